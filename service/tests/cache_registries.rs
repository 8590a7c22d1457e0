//! What the merge checks against the registry the call was granted, with a registry the
//! test serves on loopback (`registry`): a crate whose name holds `-digit` (`md-5`), an
//! index cache whose checksum a first call rewrote before a second planted a crate, npm
//! index lines whose integrity the registry contradicts or confirms; and a registry that
//! answers garbage, slowly, hugely or not at all.

mod common;
mod registry;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::{backends, command};
use efr_sandbox_wire::Finish;
use sha2::Digest;

fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir_all(dir.path().join("home/proj")).unwrap();
    std::fs::create_dir_all(dir.path().join("config/efr")).unwrap();
    std::fs::write(
        dir.path().join("config/efr/config.toml"),
        registry::Server::config(),
    )
    .unwrap();
    dir
}

fn home(d: &Path) -> PathBuf {
    d.join("home")
}

fn run(d: &Path, b: &str, grant: &str, line: &str) -> (Output, Finish) {
    let fin = d.join("finish.json");
    let o = command(d)
        .current_dir(home(d).join("proj"))
        .args(["run", "--backend", b, "--project"])
        .arg(home(d).join("proj"))
        .args(["--grant", grant, "--json"])
        .arg(&fin)
        .args(["--", line])
        .output()
        .unwrap();
    let f: Finish = serde_json::from_slice(&std::fs::read(&fin).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{b}: no finish ({e}): {o:?}"));
    (o, f)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn index_line(name: &str, vers: &str, bytes: &[u8]) -> String {
    format!(
        "{{\"name\":\"{name}\",\"vers\":\"{vers}\",\"deps\":[],\"cksum\":\"{}\",\"features\":{{}},\"yanked\":false}}",
        hex(&sha2::Sha256::digest(bytes))
    )
}

/// A shell word that prints `bytes` (octal escapes for printf).
fn printf_arg(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:03o}")).collect()
}

/// cargo's index cache file for these lines.
fn index_cache(lines: &[(&str, &str)]) -> Vec<u8> {
    let mut v = vec![3u8];
    v.extend(2u32.to_le_bytes());
    v.extend(b"etag: \"1\"\0");
    for (vers, l) in lines {
        v.extend(vers.as_bytes());
        v.push(0);
        v.extend(l.as_bytes());
        v.push(0);
    }
    v
}

/// `md-5` (split at its first `-digit` it was looked up as `md` and merged unchecked) and
/// an index cache rewritten by one call so that the next call's planted crate passed: now
/// the registry's own index decides both. The registry's real crates are merged.
#[test]
fn crates_are_checked_against_the_registrys_index_not_a_cache() {
    for b in backends() {
        let d = temp_env();
        let root = d.path().join("registry");
        let server = registry::Server::start(&root);
        let (real1, real2, planted) = (
            b"the real md-5 0.1.0".to_vec(),
            b"the real md-5 0.2.0".to_vec(),
            b"planted md-5".to_vec(),
        );
        let (l1, l2) = (
            index_line("md-5", "0.1.0", &real1),
            index_line("md-5", "0.2.0", &real2),
        );
        std::fs::create_dir_all(root.join("md/-5")).unwrap();
        std::fs::write(root.join("md/-5/md-5"), format!("{l1}\n{l2}\n")).unwrap();
        std::fs::write(
            root.join("config.json"),
            format!("{{\"dl\":\"{}/dl\"}}", server.url()),
        )
        .unwrap();
        let url = format!("sparse+{}/", server.url());
        let dir = efr_call::caches::cargo::dir_names(&url)[0].clone();
        let reg = home(d.path()).join(".cargo/registry");
        std::fs::create_dir_all(&reg).unwrap();
        let cache = reg.join("cache").join(&dir);
        let idx = reg.join("index").join(&dir).join(".cache/md/-5/md-5");
        // Call 1: the real 0.1.0, a plant of 0.2.0, and an index cache whose checksum of
        // 0.2.0 is the plant's.
        let forged = index_line("md-5", "0.2.0", &planted);
        let cache_bytes = index_cache(&[("0.1.0", &l1), ("0.2.0", &forged)]);
        let line = format!(
            "mkdir -p ~/.cargo/registry/cache/{dir} ~/.cargo/registry/index/{dir}/.cache/md/-5 && \
             cd ~/.cargo/registry && printf '{}' > cache/{dir}/md-5-0.1.0.crate && \
             printf '{}' > cache/{dir}/md-5-0.2.0.crate && \
             printf '{}' > index/{dir}/.cache/md/-5/md-5",
            printf_arg(&real1),
            printf_arg(&planted),
            printf_arg(&cache_bytes)
        );
        let (o, f) = run(d.path(), b, &server.grant(), &line);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(
            std::fs::read(cache.join("md-5-0.1.0.crate")).unwrap(),
            real1,
            "{b}"
        );
        assert!(
            !cache.join("md-5-0.2.0.crate").exists(),
            "{b}: the plant was merged"
        );
        assert!(!idx.exists(), "{b}: the forged index cache was merged");
        let refused = f.sandbox_summary.cache_refused.join("\n");
        assert!(
            refused.contains("md-5-0.2.0.crate: a crate whose sha256 is not the registry's checksum of md-5 0.2.0"),
            "{b}: {refused}"
        );
        // Call 2: the plant again, on its own: the registry still says otherwise.
        let line = format!(
            "mkdir -p ~/.cargo/registry/cache/{dir} && \
             printf '{}' > ~/.cargo/registry/cache/{dir}/md-5-0.2.0.crate",
            printf_arg(&planted)
        );
        let (o, _) = run(d.path(), b, &server.grant(), &line);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(
            !cache.join("md-5-0.2.0.crate").exists(),
            "{b}: the plant was merged"
        );
        // Call 3: the real 0.2.0 and the registry's own index cache: both merged.
        let good = index_cache(&[("0.1.0", &l1), ("0.2.0", &l2)]);
        let line = format!(
            "cd ~/.cargo/registry && mkdir -p index/{dir}/.cache/md/-5 && \
             printf '{}' > cache/{dir}/md-5-0.2.0.crate && \
             printf '{}' > index/{dir}/.cache/md/-5/md-5",
            printf_arg(&real2),
            printf_arg(&good)
        );
        let (o, f) = run(d.path(), b, &server.grant(), &line);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(f.sandbox_summary.cache_refused.is_empty(), "{b}: {f:?}");
        assert_eq!(
            std::fs::read(cache.join("md-5-0.2.0.crate")).unwrap(),
            real2,
            "{b}"
        );
        assert_eq!(std::fs::read(&idx).unwrap(), good, "{b}");
        // A subset of the index (a newer version hidden) is not merged over it.
        let subset = index_cache(&[("0.1.0", &l1)]);
        let line = format!(
            "printf '{}' > ~/.cargo/registry/index/{dir}/.cache/md/-5/md-5",
            printf_arg(&subset)
        );
        let (o, _) = run(d.path(), b, &server.grant(), &line);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(std::fs::read(&idx).unwrap(), good, "{b}");
    }
}

/// The registry is asked while the call still runs, as soon as cargo's files appear in its
/// layer: the merge at the end uses those answers instead of waiting on the registry.
#[test]
fn the_registry_is_asked_while_the_call_runs() {
    for b in backends() {
        let d = temp_env();
        let root = d.path().join("registry");
        let server = registry::Server::start(&root);
        let real = b"the real md-5 0.1.0".to_vec();
        std::fs::create_dir_all(root.join("md/-5")).unwrap();
        std::fs::write(
            root.join("md/-5/md-5"),
            format!("{}\n", index_line("md-5", "0.1.0", &real)),
        )
        .unwrap();
        std::fs::write(
            root.join("config.json"),
            format!("{{\"dl\":\"{}/dl\"}}", server.url()),
        )
        .unwrap();
        let url = format!("sparse+{}/", server.url());
        let dir = efr_call::caches::cargo::dir_names(&url)[0].clone();
        std::fs::create_dir_all(home(d.path()).join(".cargo/registry")).unwrap();
        // The call leaves its crate, then waits until the test has seen the registry asked
        // (a file it creates in the project) or 60 s.
        let proj = home(d.path()).join("proj");
        let line = format!(
            "mkdir -p ~/.cargo/registry/cache/{dir} && \
             printf '{}' > ~/.cargo/registry/cache/{dir}/md-5-0.1.0.crate && \
             i=0; while [ ! -e seen ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
            printf_arg(&real)
        );
        let fin = d.path().join("finish.json");
        let mut child = command(d.path())
            .current_dir(&proj)
            .args(["run", "--backend", b, "--project"])
            .arg(&proj)
            .args(["--grant", &server.grant(), "--json"])
            .arg(&fin)
            .args(["--", &line])
            .spawn()
            .unwrap();
        let start = Instant::now();
        let asked_early = loop {
            if server.asked().iter().any(|p| p.ends_with("/md/-5/md-5")) {
                break true;
            }
            if child.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(60) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let still_running = child.try_wait().unwrap().is_none();
        std::fs::write(proj.join("seen"), "").unwrap();
        let status = child.wait().unwrap();
        assert!(
            asked_early && still_running,
            "{b}: the registry was not asked during the call: {:?}",
            server.asked()
        );
        assert_eq!(status.code(), Some(0), "{b}");
        let cache = home(d.path()).join(".cargo/registry/cache").join(&dir);
        assert_eq!(
            std::fs::read(cache.join("md-5-0.1.0.crate")).unwrap(),
            real,
            "{b}"
        );
        let index_asks = server
            .asked()
            .iter()
            .filter(|p| p.ends_with("/md/-5/md-5"))
            .count();
        assert_eq!(
            index_asks,
            1,
            "{b}: the merge asked again: {:?}",
            server.asked()
        );
        std::fs::remove_file(proj.join("seen")).unwrap();
    }
}

fn sha1_hex(b: &[u8]) -> String {
    hex(&sha1::Sha1::digest(b))
}

/// An npm index line, and the bucket it goes in (below `_cacache/index-v5`).
fn npm_line(key: &str, integrity: &str, accept: &str) -> (String, String) {
    let json = format!(
        "{{\"key\":\"{key}\",\"integrity\":\"{integrity}\",\"time\":1,\"size\":1,\
         \"metadata\":{{\"url\":\"x\",\"reqHeaders\":{{\"accept\":\"{accept}\"}},\"resHeaders\":{{}}}}}}"
    );
    let h = hex(&sha2::Sha256::digest(key.as_bytes()));
    (
        format!("{}\t{json}", sha1_hex(json.as_bytes())),
        format!("{}/{}/{}", &h[..2], &h[2..4], &h[4..]),
    )
}

fn integrity(b: &[u8]) -> String {
    use base64::Engine;
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(b))
    )
}

fn content_path(b: &[u8]) -> String {
    let h = hex(&sha2::Sha512::digest(b));
    format!("content-v2/sha512/{}/{}/{}", &h[..2], &h[2..4], &h[4..])
}

/// An index line that names a real package version with other content (which it brought,
/// hash and all) is dropped; the packument the registry serves is merged.
#[test]
fn npm_index_lines_are_checked_against_the_registrys_packument() {
    for b in backends() {
        let d = temp_env();
        let root = d.path().join("registry");
        let server = registry::Server::start(&root);
        registry::npm_registry(&root, &server.url(), &d.path().join("work"));
        let packument = std::fs::read(root.join("efrhello/index.json")).unwrap();
        std::fs::create_dir_all(home(d.path()).join(".npm")).unwrap();
        let planted = b"planted tarball".to_vec();
        let accept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*";
        let tgz_key = format!(
            "make-fetch-happen:request-cache:{}/efrhello/-/efrhello-1.0.0.tgz",
            server.url()
        );
        let doc_key = format!("make-fetch-happen:request-cache:{}/efrhello", server.url());
        let (bad, bad_bucket) = npm_line(&tgz_key, &integrity(&planted), "*/*");
        let (good, good_bucket) = npm_line(&doc_key, &integrity(&packument), accept);
        let put = |bytes: &[u8], path: &str| {
            format!(
                "mkdir -p $(dirname {path}) && printf '{}' > {path}",
                printf_arg(bytes)
            )
        };
        let line = format!(
            "mkdir -p ~/.npm/_cacache && cd ~/.npm/_cacache && {} && {} && {} && {}",
            put(&planted, &content_path(&planted)),
            put(&packument, &content_path(&packument)),
            put(
                format!("\n{bad}").as_bytes(),
                &format!("index-v5/{bad_bucket}")
            ),
            put(
                format!("\n{good}").as_bytes(),
                &format!("index-v5/{good_bucket}")
            ),
        );
        let (o, f) = run(d.path(), b, &server.grant(), &line);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        let cc = home(d.path()).join(".npm/_cacache");
        assert!(
            !cc.join("index-v5").join(&bad_bucket).exists(),
            "{b}: the planted index line was merged"
        );
        let merged = std::fs::read_to_string(cc.join("index-v5").join(&good_bucket))
            .unwrap_or_else(|e| panic!("{b}: the packument's line was not merged ({e}): {f:?}"));
        assert!(merged.contains(&good), "{b}: {merged}");
        let refused = f.sandbox_summary.cache_refused.join("\n");
        assert!(
            refused.contains("whose integrity is not the registry's for 1.0.0"),
            "{b}: {refused}"
        );
        // The registry was asked for the packument only (once), not for the tarball.
        let asked = server.asked();
        assert_eq!(
            asked.iter().filter(|p| p.as_str() == "/efrhello").count(),
            1,
            "{b}: {asked:?}"
        );
        assert!(!asked.iter().any(|p| p.ends_with(".tgz")), "{b}: {asked:?}");
    }
}

/// A registry that answers garbage, a huge body, slowly or not at all: the merge ends
/// within its bound, merges nothing unverified, says so, and the call's finish comes.
#[test]
fn a_registry_that_misbehaves_gets_nothing_merged_and_the_merge_ends() {
    let b = backends()[0];
    for mode in ["garbage", "huge", "slow", "closed"] {
        let d = temp_env();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mode2 = mode.to_string();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let mode = mode2.clone();
                std::thread::spawn(move || misbehave(c, &mode));
            }
        });
        let grant = format!("host={}:{port}:http", registry::HOST);
        let url = format!("sparse+http://{}:{port}/", registry::HOST);
        let dir = efr_call::caches::cargo::dir_names(&url)[0].clone();
        let line = format!(
            "mkdir -p ~/.cargo/registry/cache/{dir} && echo x > ~/.cargo/registry/cache/{dir}/serde-1.0.0.crate"
        );
        std::fs::create_dir_all(home(d.path()).join(".cargo/registry")).unwrap();
        let t = Instant::now();
        let (o, f) = run(d.path(), b, &grant, &line);
        let took = t.elapsed();
        assert_eq!(o.status.code(), Some(0), "{mode}: {o:?}");
        assert!(
            !home(d.path())
                .join(format!(".cargo/registry/cache/{dir}/serde-1.0.0.crate"))
                .exists(),
            "{mode}: merged"
        );
        let refused = f.sandbox_summary.cache_refused.join("\n");
        assert!(
            refused.contains("1 files not merged, nothing confirmed them"),
            "{mode}: {refused}"
        );
        // The merge's own bound (30 s for every fetch together) and the call's start.
        assert!(took < Duration::from_secs(45), "{mode}: {took:?}");
    }
}

fn misbehave(c: std::net::TcpStream, mode: &str) {
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut w = c;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
    }
    match mode {
        "garbage" => {
            let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n\0\xff{garbage");
        }
        "huge" => {
            let _ = w.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
            let chunk = vec![b'a'; 1 << 20];
            for _ in 0..200 {
                if w.write_all(&chunk).is_err() {
                    return;
                }
            }
        }
        "slow" => {
            let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
            for _ in 0..100 {
                std::thread::sleep(Duration::from_secs(1));
                if w.write_all(b"a").is_err() {
                    return;
                }
            }
        }
        _ => {}
    }
}
