//! Real caches through the sandbox: the real binary running real calls on each backend,
//! whose writes in a cache go to a per-call overlay layer. After the call only what is
//! verified reaches the real cache (here npm's content, addressed by its hash; the
//! registries' checks are in `cache_registries.rs`); the rest stays with the call's
//! conversation or goes with the call; deletes are held until `efr-sandbox cache apply`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{backends, command};
use efr_sandbox_wire::{ExitKind, ExitSource, Finish, TargetClass};
use sha2::Digest;

/// A temp dir with `home/` (holding `home/proj`, the project) and `config/`, outside
/// `/tmp` (which every call has its own of).
fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir_all(dir.path().join("home/proj")).unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    dir
}

fn home(d: &Path) -> PathBuf {
    d.join("home")
}

fn state(d: &Path) -> PathBuf {
    home(d).join(".local/state/efr-sandbox")
}

/// `efr-sandbox run --backend B --project ~/proj --json FILE -- LINE`; the output and the
/// finish.
fn run(d: &Path, b: &str, line: &str) -> (Output, Finish) {
    run_in(d, b, None, line)
}

/// [`run`] in the conversation `conv` (its runtime dir `d/run`).
fn run_in(d: &Path, b: &str, conv: Option<&str>, line: &str) -> (Output, Finish) {
    let fin = d.join(format!("finish-{}.json", rand()));
    let mut c = command(d);
    c.current_dir(home(d).join("proj"))
        .args(["run", "--backend", b, "--project"])
        .arg(home(d).join("proj"))
        .arg("--json")
        .arg(&fin);
    if let Some(id) = conv {
        let rt = d.join("run");
        std::fs::create_dir_all(&rt).unwrap();
        std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o700)).unwrap();
        c.env("XDG_RUNTIME_DIR", &rt).args(["--conversation", id]);
    }
    let o = c.args(["--", line]).output().unwrap();
    let f: Finish = serde_json::from_slice(&std::fs::read(&fin).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{b}: no finish ({e}): {o:?}"));
    let _ = std::fs::remove_file(&fin);
    (o, f)
}

fn rand() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish()
}

/// A shell function for a call's line: `put SEED SIZE` writes SIZE bytes (SEED, then
/// zeros, cut at SIZE) as npm content addressed by its sha512 (the one kind of file the merge verifies
/// without asking a registry), and prints its path below `~/.npm/_cacache`.
const PUT: &str = "put() { { printf '%s' \"$1\"; head -c $2 /dev/zero; } | head -c $2 > /tmp/put.t; \
    h=$(sha512sum /tmp/put.t | cut -c1-128); \
    p=content-v2/sha512/$(echo $h | cut -c1-2)/$(echo $h | cut -c3-4); \
    mkdir -p ~/.npm/_cacache/$p && mv /tmp/put.t ~/.npm/_cacache/$p/$(echo $h | cut -c5-); }; ";

/// The path below `~/.npm/_cacache` of the content `put SEED SIZE` makes.
fn put_path(seed: &str, size: usize) -> String {
    let mut b = seed.as_bytes().to_vec();
    b.resize(size, 0);
    let h = sha512_hex(&b);
    format!("content-v2/sha512/{}/{}/{}", &h[..2], &h[2..4], &h[4..])
}

/// Every path below `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(base, &p, out);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Nothing of a call's layers is left, and no merge temp file anywhere.
fn nothing_left(d: &Path, b: &str) {
    let layers = tree(&state(d).join("layers"));
    assert!(layers.is_empty(), "{b}: layers left: {layers:?}");
    let staging = tree(&state(d).join("staging"));
    assert!(
        staging.iter().all(|p| !p.contains(".efr-merge-")),
        "{b}: temp files left: {staging:?}"
    );
}

/// What a call leaves in a cache reaches the host only when verified: the rest (a new
/// file, a changed one, a delete) is what the next call of the same conversation sees, and
/// no other call sees it; `cache list` shows the conversation's layer, `cache clear`
/// removes it.
#[test]
fn what_a_call_leaves_in_a_cache_stays_with_its_conversation() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    for b in backends() {
        std::fs::create_dir_all(npm.join("old")).unwrap();
        std::fs::write(npm.join("old/kept"), "old\n").unwrap();
        std::fs::write(npm.join(format!("gone-{b}")), "g").unwrap();
        let (ca, cb) = (format!("a-{b}"), format!("b-{b}"));
        let (o, f) = run_in(
            d.path(),
            b,
            Some(&ca),
            &format!(
                "{PUT}mkdir -p ~/.npm/{b}/deep && echo one > ~/.npm/{b}/deep/f && \
                 printf '#!/bin/sh\\n' > ~/.npm/{b}/x && chmod 755 ~/.npm/{b}/x && \
                 echo more >> ~/.npm/old/kept && rm ~/.npm/gone-{b} && put verified-{b} 300"
            ),
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        // The host: the verified content only; the deleted file still there (held).
        assert!(!npm.join(b).exists(), "{b}: {:?}", tree(&npm));
        assert_eq!(
            std::fs::read_to_string(npm.join("old/kept")).unwrap(),
            "old\n"
        );
        assert!(npm.join(format!("gone-{b}")).exists(), "{b}");
        let content = npm
            .join("_cacache")
            .join(put_path(&format!("verified-{b}"), 300));
        assert_eq!(std::fs::metadata(&content).unwrap().len(), 300, "{b}");
        assert_eq!(
            f.sandbox_summary.cache_deletes,
            [npm.join(format!("gone-{b}")).to_string_lossy().into_owned()],
            "{b}: {f:?}"
        );
        assert!(f.sandbox_summary.cache_refused.is_empty(), "{b}: {f:?}");
        let probe = format!(
            "cat ~/.npm/{b}/deep/f ~/.npm/old/kept; test -x ~/.npm/{b}/x && echo exec; \
             test -e ~/.npm/gone-{b} && echo present; true"
        );
        // The same conversation sees what its call left, the delete included.
        let (o, _) = run_in(d.path(), b, Some(&ca), &probe);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "one\nold\nmore\nexec\n",
            "{b}: {o:?}"
        );
        // Another conversation, and a call without one, see the real cache.
        for conv in [Some(cb.as_str()), None] {
            let (o, _) = run_in(d.path(), b, conv, &probe);
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                "old\npresent\n",
                "{b} {conv:?}: {o:?}"
            );
        }
        let cli = |args: &[&str]| command(d.path()).arg("cache").args(args).output().unwrap();
        let list = String::from_utf8_lossy(&cli(&["list"]).stdout).into_owned();
        assert!(
            list.lines()
                .any(|l| l.starts_with(&format!("conversation {ca} {}", npm.display()))),
            "{b}: {list}"
        );
        let o = cli(&["clear", "--conversation", &ca]);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        let (o, _) = run_in(d.path(), b, Some(&ca), &probe);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "old\npresent\n",
            "{b}: {o:?}"
        );
        let o = cli(&["clear", "--conversation", "never-was"]);
        assert_eq!(o.status.code(), Some(2), "{b}: {o:?}");
        nothing_left(d.path(), b);
        assert!(
            !tree(&home(d.path())).iter().any(|p| p.contains("upper")),
            "{b}"
        );
    }
}

/// Two calls of one conversation in a row build on each other's layer: a file the first
/// made and the second changed, a directory the second removed and made again.
#[test]
fn a_conversation_layer_takes_each_call_in_turn() {
    let d = temp_env();
    let cache = home(d.path()).join(".cache");
    std::fs::create_dir_all(cache.join("real/sub")).unwrap();
    std::fs::write(cache.join("real/sub/r"), "r").unwrap();
    for b in backends() {
        let c = format!("turns-{b}");
        for line in [
            "mkdir -p ~/.cache/t && echo 1 > ~/.cache/t/f",
            "echo 2 >> ~/.cache/t/f && rm -rf ~/.cache/real && mkdir ~/.cache/real && echo n > ~/.cache/real/new",
        ] {
            let (o, _) = run_in(d.path(), b, Some(&c), line);
            assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        }
        let (o, _) = run_in(d.path(), b, Some(&c), "cat ~/.cache/t/f; ls ~/.cache/real");
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "1\n2\nnew\n",
            "{b}: {o:?}"
        );
        assert_eq!(
            std::fs::read_to_string(cache.join("real/sub/r")).unwrap(),
            "r"
        );
        assert!(!cache.join("t").exists(), "{b}");
    }
}

#[test]
fn links_fifos_setuid_bits_and_masked_paths_never_reach_the_host() {
    let d = temp_env();
    let cache = home(d.path()).join(".cache");
    std::fs::create_dir_all(&cache).unwrap();
    for b in backends() {
        let (o, _) = run(
            d.path(),
            b,
            &format!(
                "cd ~/.cache && ln -s /etc/passwd link-{b} && mkfifo fifo-{b} && \
                 echo x > suid-{b} && chmod 4755 suid-{b} && mkdir sgid-{b} && \
                 chmod 2755 sgid-{b} && mkdir -p huggingface && echo t > huggingface/token && \
                 echo fine > plain-{b}"
            ),
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        for what in [
            format!("link-{b}"),
            format!("fifo-{b}"),
            format!("suid-{b}"),
            format!("sgid-{b}"),
            "huggingface/token".to_string(),
            format!("plain-{b}"),
        ] {
            assert!(
                std::fs::symlink_metadata(cache.join(&what)).is_err(),
                "{b}: {what} reached the host"
            );
        }
        nothing_left(d.path(), b);
    }
}

#[test]
fn a_link_put_in_the_real_cache_during_the_call_is_never_followed() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    let outside = d.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let go = home(d.path()).join("proj/go");
    for b in backends() {
        let _ = std::fs::remove_file(&go);
        let _ = std::fs::remove_dir_all(npm.join("_cacache"));
        let dd = d.path().to_path_buf();
        let seed = format!("linked-{b}");
        let content = put_path(&seed, 100);
        // The content's first directory level, which the host turns into a link.
        let first = npm.join("_cacache").join(&content[..content.len() - 128]);
        std::fs::create_dir_all(npm.join("_cacache/content-v2/sha512")).unwrap();
        let line =
            format!("{PUT}put {seed} 100 && touch ready && while [ ! -e go ]; do sleep 0.02; done");
        let t = std::thread::spawn(move || run(&dd, b, &line));
        let ready = home(d.path()).join("proj/ready");
        for _ in 0..500 {
            if ready.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(ready.exists(), "{b}: the call did not start");
        // While the call runs, a directory of the real cache becomes a link out of it.
        let _ = std::fs::remove_dir_all(&first);
        std::os::unix::fs::symlink(&outside, &first).unwrap();
        std::fs::write(&go, "").unwrap();
        let (o, f) = t.join().unwrap();
        std::fs::remove_file(&ready).unwrap();
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(
            tree(&outside).is_empty(),
            "{b}: the merge followed the link: {:?}",
            tree(&outside)
        );
        let refused = f.sandbox_summary.cache_refused.join("\n");
        assert!(
            refused.contains(&format!(
                "{}: cannot open it in the real cache (a link?)",
                first.display()
            )),
            "{b}: {refused}"
        );
        std::fs::remove_file(&first).unwrap();
    }
}

#[test]
fn deletes_are_held_and_applied_only_by_cache_apply() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    for b in backends() {
        std::fs::create_dir_all(npm.join(format!("dir-{b}/sub"))).unwrap();
        std::fs::write(npm.join(format!("dir-{b}/sub/f")), "12345").unwrap();
        std::fs::write(npm.join(format!("file-{b}")), "abc").unwrap();
        std::fs::write(npm.join(format!("stale-{b}")), "s").unwrap();
        std::fs::create_dir_all(npm.join(format!("remade-{b}"))).unwrap();
        std::fs::write(npm.join(format!("remade-{b}/gone")), "g").unwrap();
        let (o, f) = run(
            d.path(),
            b,
            &format!(
                "rm -rf ~/.npm/dir-{b} && rm ~/.npm/file-{b} ~/.npm/stale-{b} && \
                 rm -rf ~/.npm/remade-{b} && mkdir ~/.npm/remade-{b} && \
                 echo new > ~/.npm/remade-{b}/new"
            ),
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        // Nothing deleted in the real cache; what the call made is not there either.
        for p in [
            format!("dir-{b}/sub/f"),
            format!("file-{b}"),
            format!("stale-{b}"),
            format!("remade-{b}/gone"),
        ] {
            assert!(npm.join(&p).exists(), "{b}: {p}");
        }
        assert!(!npm.join(format!("remade-{b}/new")).exists(), "{b}");
        let held: Vec<String> = [
            format!("dir-{b}"),
            format!("file-{b}"),
            format!("remade-{b}/gone"),
            format!("stale-{b}"),
        ]
        .iter()
        .map(|p| npm.join(p).to_string_lossy().into_owned())
        .collect();
        let mut listed = f.sandbox_summary.cache_deletes.clone();
        listed.sort();
        assert_eq!(listed, held, "{b}: {f:?}");
        let exits: Vec<_> = f
            .exits
            .iter()
            .filter(|e| e.source == ExitSource::CacheDelete)
            .collect();
        assert_eq!(exits.len(), 4, "{b}: {f:?}");
        for e in &exits {
            assert_eq!(e.kind, ExitKind::CacheDelete);
            assert_eq!(e.facts.targets[0].class, TargetClass::Cache);
        }
        let cli = |args: &[&str]| command(d.path()).arg("cache").args(args).output().unwrap();
        let list = cli(&["list"]);
        for h in &held {
            assert!(
                String::from_utf8_lossy(&list.stdout).contains(h.as_str()),
                "{b}"
            );
        }
        // Unknown: refused, nothing applied.
        let o = cli(&["apply", &held[0], &npm.join("nope").to_string_lossy()]);
        assert_eq!(o.status.code(), Some(2), "{b}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("is not a held cache delete"),
            "{b}: {o:?}"
        );
        assert!(npm.join(format!("dir-{b}")).exists(), "{b}");
        // Stale: the file changed since the call deleted it.
        std::fs::write(npm.join(format!("stale-{b}")), "changed").unwrap();
        let o = cli(&["apply", &held[3]]);
        assert_eq!(o.status.code(), Some(2), "{b}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("stale"),
            "{b}: {o:?}"
        );
        assert!(npm.join(format!("stale-{b}")).exists(), "{b}");
        // Approved ones.
        let o = cli(&["apply", &held[0], &held[1], &held[2]]);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("freed 9 bytes"),
            "{b}: {o:?}"
        );
        for p in [
            format!("dir-{b}"),
            format!("file-{b}"),
            format!("remade-{b}/gone"),
        ] {
            assert!(!npm.join(&p).exists(), "{b}: {p}");
        }
        assert!(!npm.join(format!("remade-{b}/new")).exists(), "{b}");
        // Applied once: a second apply is unknown.
        let o = cli(&["apply", &held[1]]);
        assert_eq!(o.status.code(), Some(2), "{b}: {o:?}");
    }
}

fn sha512_hex(b: &[u8]) -> String {
    sha2::Sha512::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

fn b64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn npm_content_whose_hash_is_not_its_path_is_refused_and_unverified_index_lines_stay_out() {
    let d = temp_env();
    let cc = home(d.path()).join(".npm/_cacache");
    std::fs::create_dir_all(&cc).unwrap();
    for b in backends() {
        let good = format!("good package {b}");
        let bad = format!("bad package {b}");
        let gh = sha512_hex(good.as_bytes());
        // The bad one claims the hash of other bytes.
        let claimed = sha512_hex(format!("what npm fetched {b}").as_bytes());
        let path = |h: &str| format!("content-v2/sha512/{}/{}/{}", &h[..2], &h[2..4], &h[4..]);
        let entry = |key: &str, h: &str| {
            let bytes: Vec<u8> = (0..h.len() / 2)
                .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            format!(
                "0123abcd\t{{\"key\":\"{key}\",\"integrity\":\"sha512-{}\",\"time\":1}}",
                b64(&bytes)
            )
        };
        let bucket = format!("index-v5/aa/{b}/bucket");
        let line = format!(
            "cd ~/.npm/_cacache && mkdir -p $(dirname {gp}) $(dirname {bp}) $(dirname {bucket}) && \
             printf '%s' '{good}' > {gp} && printf '%s' '{bad}' > {bp} && \
             printf '%s\\n%s\\n' '{ge}' '{be}' > {bucket}",
            gp = path(&gh),
            bp = path(&claimed),
            ge = entry("good", &gh),
            be = entry("bad", &claimed),
        );
        let (o, f) = run(d.path(), b, &line);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(
            std::fs::read_to_string(cc.join(path(&gh))).unwrap(),
            good,
            "{b}"
        );
        assert!(
            !cc.join(path(&claimed)).exists(),
            "{b}: poisoned content merged"
        );
        // Index lines no registry confirmed (not even a key the merge reads): none.
        assert!(
            !cc.join(&bucket).exists(),
            "{b}: an unverified bucket merged"
        );
        let refused = f.sandbox_summary.cache_refused.join("\n");
        assert!(refused.contains("hash is not its path's"), "{b}: {refused}");
        assert!(
            refused.contains("2 files not merged, nothing confirmed them"),
            "{b}: {refused}"
        );
        // Existing content is never replaced.
        let (o, f) = run(
            d.path(),
            b,
            &format!("printf other > ~/.npm/_cacache/{}", path(&gh)),
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(
            std::fs::read_to_string(cc.join(path(&gh))).unwrap(),
            good,
            "{b}"
        );
        assert!(!f.sandbox_summary.cache_refused.is_empty(), "{b}");
    }
}

#[test]
fn concurrent_merges_of_one_cache_corrupt_nothing() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    for b in backends() {
        let line = |who: char| {
            format!(
                "{PUT}for i in $(seq 1 150); do put {b}{who}$i 4096; done && \
                 put {b}only{who} 40"
            )
        };
        let (d1, d2) = (d.path().to_path_buf(), d.path().to_path_buf());
        let (l1, l2) = (line('A'), line('B'));
        let t1 = std::thread::spawn(move || run(&d1, b, &l1));
        let t2 = std::thread::spawn(move || run(&d2, b, &l2));
        for (o, f) in [t1.join().unwrap(), t2.join().unwrap()] {
            assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
            assert!(f.sandbox_summary.cache_refused.is_empty(), "{b}: {f:?}");
        }
        let cc = npm.join("_cacache");
        for who in ['A', 'B'] {
            for i in 1..=150 {
                let p = cc.join(put_path(&format!("{b}{who}{i}"), 4096));
                let c = std::fs::read(&p).unwrap_or_else(|e| panic!("{b}: {who}{i}: {e}"));
                assert_eq!(c.len(), 4096, "{b}: {who}{i}");
            }
            assert!(
                cc.join(put_path(&format!("{b}only{who}"), 40)).exists(),
                "{b}"
            );
        }
        nothing_left(d.path(), b);
    }
}

#[test]
fn a_leftover_temp_and_the_layer_of_a_dead_service_are_cleaned_by_the_next_merge() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    for b in backends() {
        // A merge that died: its temp file in the staging dir, and its call's layer (its
        // lock free) with a file the real cache never got.
        let (o, _) = run(d.path(), b, &format!("{PUT}put first-{b} 40"));
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        let staging = std::fs::read_dir(state(d.path()).join("staging"))
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path();
        std::fs::write(staging.join(".efr-merge-deadbeef"), "half").unwrap();
        let call = state(d.path()).join("layers/0123456789abcdef");
        let orphan = put_path(&format!("orphan-{b}"), 20);
        let up = call.join("0/upper/_cacache").join(&orphan);
        std::fs::create_dir_all(up.parent().unwrap()).unwrap();
        std::fs::create_dir_all(call.join("0/work")).unwrap();
        let mut bytes = format!("orphan-{b}").into_bytes();
        bytes.resize(20, 0);
        std::fs::write(&up, &bytes).unwrap();
        std::fs::write(call.join("lock"), "").unwrap();
        let real = npm.canonicalize().unwrap();
        let manifest = serde_json::json!({
            "layers": [{
                "path": real,
                "upper": call.join("0/upper"),
                "work": call.join("0/work"),
            }],
            "masks": [],
            "verify": {
                "kinds": [[[real, "npm"]]],
                "granted": [],
                "resolve": {},
                "cargo_registries": [],
                "conversation_days": 7,
            },
        });
        std::fs::write(call.join("call.json"), manifest.to_string()).unwrap();
        let (o, _) = run(d.path(), b, &format!("{PUT}put second-{b} 40"));
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(
            std::fs::read(npm.join("_cacache").join(&orphan)).unwrap(),
            bytes
        );
        assert!(
            npm.join("_cacache")
                .join(put_path(&format!("second-{b}"), 40))
                .exists(),
            "{b}"
        );
        assert!(!staging.join(".efr-merge-deadbeef").exists(), "{b}");
        assert!(!tree(&npm).iter().any(|p| p.contains(".efr-merge")), "{b}");
        nothing_left(d.path(), b);
    }
}

#[test]
fn a_kill_during_the_merge_leaves_the_cache_valid_and_the_next_merge_finishes_it() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    for b in backends() {
        let dir = npm.join("_cacache");
        let _ = std::fs::remove_dir_all(&dir);
        let fin = d.path().join("kill.json");
        let mut child = command(d.path())
            .current_dir(home(d.path()).join("proj"))
            .args(["run", "--backend", b, "--project"])
            .arg(home(d.path()).join("proj"))
            .arg("--json")
            .arg(&fin)
            .args([
                "--",
                &format!(
                    "{PUT}for i in $(seq 1 400); do put {b}$i 8192; done && touch ~/proj/done-{b}"
                ),
            ])
            .spawn()
            .unwrap();
        let done = home(d.path()).join(format!("proj/done-{b}"));
        for _ in 0..3000 {
            if done.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(done.exists(), "{b}: the call did not end");
        // The line ended: the merge is running now (or about to).
        std::thread::sleep(std::time::Duration::from_millis(100));
        let _ = child.kill();
        let _ = child.wait();
        let files = |dir: &Path| -> Vec<String> {
            tree(dir)
                .into_iter()
                .filter(|p| dir.join(p).is_file())
                .collect()
        };
        eprintln!(
            "{b}: {} of 400 files merged when the merge was killed",
            files(&dir).len()
        );
        // Whatever the merge had done: only complete files, no temp file in the cache.
        for p in files(&npm) {
            assert!(!p.contains(".efr-merge"), "{b}: {p}");
            assert_eq!(
                std::fs::metadata(npm.join(&p)).unwrap().len(),
                8192,
                "{b}: {p}"
            );
        }
        // The next merge finishes it.
        let (o, _) = run(d.path(), b, "true");
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        for i in 1..=400 {
            assert!(
                npm.join("_cacache")
                    .join(put_path(&format!("{b}{i}"), 8192))
                    .exists(),
                "{b}: {i}"
            );
        }
        nothing_left(d.path(), b);
        let _ = std::fs::remove_file(&fin);
    }
}

#[test]
fn a_layer_is_a_private_dir_outside_the_project() {
    let d = temp_env();
    std::fs::create_dir_all(home(d.path()).join(".npm")).unwrap();
    for b in backends() {
        let (o, _) = run(
            d.path(),
            b,
            "touch ~/.npm/x; stat -c %a ~/.npm; ls -d ~/.local/state/efr-sandbox/layers/* 2>&1; true",
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        // The state dir is masked: the call sees no layer of its own or another's.
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("No such file or directory"),
            "{b}: {o:?}"
        );
        // Inside, the cache has its own mode (the private one is the call dir above).
        assert!(
            String::from_utf8_lossy(&o.stdout).starts_with("755\n"),
            "{b}: {o:?}"
        );
        let st = std::fs::metadata(state(d.path())).unwrap();
        assert_eq!(st.permissions().mode() & 0o777, 0o700, "{b}");
    }
}

#[test]
fn a_full_disk_keeps_the_layer_and_shows_nothing_half_written() {
    // The cache on a small tmpfs of a mount namespace of the test's own (a user namespace
    // too, so that an unprivileged user can mount it); the service runs in there.
    let ok = std::process::Command::new("unshare")
        .args(["-Urm", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
            "EFR_SANDBOX_MUST_WORK is set and unshare -Urm fails"
        );
        eprintln!("SKIP: unshare -Urm fails");
        return;
    }
    for b in backends() {
        let d = temp_env();
        let h = home(d.path());
        std::fs::create_dir_all(h.join(".npm")).unwrap();
        let script = format!(
            "set -e\n\
             mount -t tmpfs -o size=300k tmpfs \"$HOME/.npm\"\n\
             cd \"$HOME/proj\"\n\
             \"$SBX\" run --backend {b} --project \"$HOME/proj\" --json \"$D/f1.json\" -- \
               \"$LINE\" >/dev/null 2>&1\n\
             echo after1\n\
             find \"$HOME/.npm\" -type f -printf '%P %s\\n'\n\
             echo layers\n\
             find \"$HOME/.local/state/efr-sandbox/layers\" -type f -path '*upper*content-v2*' -printf '%f\\n'\n\
             mount -o remount,size=2m tmpfs \"$HOME/.npm\"\n\
             \"$SBX\" run --backend {b} --project \"$HOME/proj\" -- true >/dev/null 2>&1\n\
             echo after2\n\
             find \"$HOME/.npm\" -type f -printf '%P %s\\n'\n\
             echo layers2\n\
             find \"$HOME/.local/state/efr-sandbox/layers\" -mindepth 1 -printf '%P\\n'\n"
        );
        let o = std::process::Command::new("unshare")
            .env("HOME", &h)
            .env("XDG_CONFIG_HOME", d.path().join("config"))
            .env_remove("XDG_RUNTIME_DIR")
            .env("SBX", common::BIN)
            .env("D", d.path())
            .env(
                "LINE",
                format!("{PUT}for i in 1 2 3 4 5 6; do put $i 100000; done"),
            )
            .args(["-Urm", "--propagation", "private", "sh", "-c", &script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{b}: {o:?}");
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let part = |from: &str, to: &str| -> Vec<String> {
            let s = out.split(&format!("{from}\n")).nth(1).unwrap_or("");
            let s = s.split(&format!("{to}\n")).next().unwrap_or("");
            // (The root, and the empty staging dir a merge keeps in a cache on a file
            // system of its own, are not files.)
            s.lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with(' '))
                .filter(|l| !l.starts_with(".efr-merge "))
                .map(String::from)
                .collect()
        };
        // The merge stopped on the full disk: only whole files, no temp file, the layer
        // kept with everything it did not merge.
        let after1 = part("after1", "layers");
        assert!(!after1.is_empty() && after1.len() < 6, "{b}: {out}");
        for l in &after1 {
            assert!(
                l.ends_with(" 100000") && !l.starts_with(".efr-merge"),
                "{b}: half-written {l}: {out}"
            );
        }
        assert_eq!(
            part("layers", "after2").len() + after1.len(),
            6,
            "{b}: {out}"
        );
        let f: Finish =
            serde_json::from_slice(&std::fs::read(d.path().join("f1.json")).unwrap()).unwrap();
        let refused = f.sandbox_summary.cache_refused.join("\n");
        assert!(
            refused.contains("its layer kept at") && refused.contains("No space left on device"),
            "{b}: {refused}"
        );
        // With room again, the next merge finishes it and removes the layer.
        let after2 = part("after2", "layers2");
        assert_eq!(after2.len(), 6, "{b}: {out}");
        assert!(after2.iter().all(|l| l.ends_with(" 100000")), "{b}: {out}");
        assert!(
            out.split("layers2\n")
                .nth(1)
                .unwrap_or("x")
                .trim()
                .is_empty(),
            "{b}: {out}"
        );
    }
}

#[test]
fn git_configs_hooks_and_checkouts_in_a_cache_never_reach_the_host() {
    let d = temp_env();
    let git = home(d.path()).join(".cargo/git");
    std::fs::create_dir_all(git.join("db/dep-1234/hooks")).unwrap();
    std::fs::write(git.join("db/dep-1234/config"), "[core]\n\tbare = true\n").unwrap();
    for b in backends() {
        let (o, f) = run(
            d.path(),
            b,
            "cd ~/.cargo/git && \
             printf '[core]\\n\\tsshCommand = touch /tmp/pwned\\n' >> db/dep-1234/config && \
             echo evil > db/dep-1234/hooks/pre-fetch && echo /tmp/x > db/dep-1234/commondir && \
             mkdir -p checkouts/dep-1234/abc/.git/hooks && \
             echo evil > checkouts/dep-1234/abc/.git/hooks/post-checkout && \
             echo '[core]' > checkouts/dep-1234/abc/.git/config && \
             echo fine > checkouts/dep-1234/abc/lib.rs",
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(f.sandbox_summary.cache_refused.is_empty(), "{b}: {f:?}");
        assert_eq!(
            std::fs::read_to_string(git.join("db/dep-1234/config")).unwrap(),
            "[core]\n\tbare = true\n",
            "{b}"
        );
        assert!(!git.join("db/dep-1234/hooks/pre-fetch").exists(), "{b}");
        assert!(!git.join("db/dep-1234/commondir").exists(), "{b}");
        assert!(!git.join("checkouts").exists(), "{b}");
    }
}

#[test]
fn the_rpc_applies_held_deletes_and_refuses_unknown_and_stale_ones() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    std::fs::create_dir_all(npm.join("gone")).unwrap();
    std::fs::write(npm.join("gone/a"), "1234567").unwrap();
    std::fs::write(npm.join("changes"), "x").unwrap();
    // The held deletes of a call through `sandbox.launch` of the service.
    let srv = common::Server::start_in(d, &[]);
    let mut c = srv.client();
    c.request(
        1,
        "sandbox.launch",
        serde_json::json!({
            "line": "rm -rf ~/.npm/gone ~/.npm/changes",
            "projects": [srv.home.join("proj")],
        }),
    );
    let (items, end) = common::collect(&mut c, 1);
    let end = &end["end"];
    let deletes: Vec<String> = end["sandbox_summary"]["cache_deletes"]
        .as_array()
        .unwrap_or_else(|| panic!("no cache_deletes: {end}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let gone = npm.join("gone").to_string_lossy().into_owned();
    let changes = npm.join("changes").to_string_lossy().into_owned();
    assert_eq!(deletes, vec![changes.clone(), gone.clone()], "{end}");
    // Each is an exit item of the stream too.
    let exits: Vec<_> = items
        .iter()
        .filter(|i| i["kind"] == "exit" && i["record"]["source"] == "cache_delete")
        .collect();
    assert_eq!(exits.len(), 2, "{items:?}");
    assert!(npm.join("gone/a").exists() && npm.join("changes").exists());
    let apply = |c: &mut common::Client, id: u64, paths: &[&str]| {
        c.call(
            id,
            "sandbox.cache_delete_apply",
            serde_json::json!({ "paths": paths }),
        )
    };
    let r = apply(&mut c, 2, &[&gone, "/nowhere/x"]);
    assert_eq!(common::code(&r), "invalid", "{r}");
    assert!(
        common::message(&r).contains("/nowhere/x is not a held cache delete"),
        "{r}"
    );
    std::fs::write(npm.join("changes"), "changed").unwrap();
    let r = apply(&mut c, 3, &[&changes]);
    assert_eq!(common::code(&r), "invalid", "{r}");
    assert!(common::message(&r).contains("stale"), "{r}");
    let r = apply(&mut c, 4, &[&gone]);
    assert_eq!(r["end"]["paths"], serde_json::json!([gone]), "{r}");
    assert_eq!(r["end"]["freed_bytes"], 7, "{r}");
    assert!(!npm.join("gone").exists());
    let r = apply(&mut c, 5, &[]);
    assert_eq!(common::code(&r), "invalid", "{r}");
}

#[test]
fn plan_then_finish_merges_the_layer_and_a_cache_under_tmp_gets_none() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    // A cache the call cannot see (its /tmp is its own): no layer, and the call still runs.
    let under_tmp = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::create_dir_all(d.path().join("config/efr")).unwrap();
    std::fs::write(
        d.path().join("config/efr/config.toml"),
        format!(
            "[sandbox]\ncaches = [{{ path = \"{}\", reason = \"test\" }}]\n",
            under_tmp.path().display()
        ),
    )
    .unwrap();
    let srv = common::Server::start_in(d, &[]);
    let mut c = srv.client();
    let r = c.call(
        1,
        "sandbox.plan",
        serde_json::json!({
            "line": format!("{PUT}put planned 50 && echo unverified > ~/.npm/unverified"),
            "projects": [srv.home.join("proj")],
            "status_fd": 3,
        }),
    );
    let end = &r["end"];
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(end["plan_file"].as_str().unwrap()).unwrap())
            .unwrap();
    let layered: Vec<&str> = plan["caches"]
        .as_array()
        .unwrap_or_else(|| panic!("no caches in the plan: {plan}"))
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert!(layered.contains(&npm.to_str().unwrap()), "{layered:?}");
    assert!(
        !layered.iter().any(|p| p.starts_with("/tmp/")),
        "{layered:?}"
    );
    let argv: Vec<String> = serde_json::from_value(end["argv"].clone()).unwrap();
    let status = srv.dir.path().join("status.txt");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"f="$1"; shift; exec "$@" 3>"$f""#)
        .arg("sh")
        .arg(&status)
        .args(&argv)
        // As efrd runs it: in the user's environment (the plan has none of its own).
        .env("HOME", &srv.home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // Not merged before the finish.
    let planned = npm.join("_cacache").join(put_path("planned", 50));
    assert!(!planned.exists());
    let lines = std::fs::read_to_string(&status).unwrap();
    let r = c.call(
        2,
        "sandbox.finish",
        serde_json::json!({"token": end["token"], "status": lines}),
    );
    assert_eq!(r["end"]["exit_status"], 0, "{r}");
    assert_eq!(std::fs::metadata(&planned).unwrap().len(), 50);
    assert!(!npm.join("unverified").exists());
    // The service removes merged layers after the finish went out (a thread of its own).
    let layers = state(srv.dir.path()).join("layers");
    let t = std::time::Instant::now();
    while !tree(&layers).is_empty() && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(tree(&layers).is_empty(), "{:?}", tree(&layers));
}

/// A background job of a conversation has the conversation's layer under its own like any
/// call: it sees what the conversation's calls left in a cache; what it leaves there is
/// its own while it runs (the host and the conversation's other calls do not see it), and
/// after its end is the conversation's, never the host's.
#[test]
fn a_job_of_a_conversation_layers_its_cache_like_any_call() {
    let d = temp_env();
    let npm = home(d.path()).join(".npm");
    std::fs::create_dir_all(&npm).unwrap();
    let srv = common::Server::start_in(d, &[]);
    let proj = srv.home.join("proj");
    let mut c = srv.client();
    let launch = |c: &mut common::Client, id: u64, line: &str, background: bool| {
        let mut p = serde_json::json!({"line": line, "projects": [proj], "conversation": "jc"});
        if background {
            p["background"] = serde_json::json!({"max_minutes": 1});
        }
        c.request(id, "sandbox.launch", p);
        let (items, end) = common::collect(c, id);
        let out: String = items
            .iter()
            .filter(|i| i["kind"] == "output")
            .map(|i| i["data"].as_str().unwrap_or("").to_string())
            .collect();
        (out, end)
    };
    let (_, end) = launch(&mut c, 1, "echo from-call > ~/.npm/left", false);
    assert!(end.get("end").is_some(), "{end}");
    let marker = srv.home.join("proj/job-wrote");
    let (_, end) = launch(
        &mut c,
        2,
        "cat ~/.npm/left > ~/proj/job-saw && echo from-job > ~/.npm/job && touch ~/proj/job-wrote && \
         while [ ! -e ~/proj/job-go ]; do sleep 0.05; done",
        true,
    );
    assert!(end.get("end").is_some(), "{end}");
    let t = std::time::Instant::now();
    while !marker.exists() && t.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(marker.exists(), "the job did not run");
    assert_eq!(
        std::fs::read_to_string(srv.home.join("proj/job-saw")).unwrap(),
        "from-call\n"
    );
    // While it runs: its write is its own.
    assert!(!npm.join("job").exists());
    let (out, _) = launch(&mut c, 3, "cat ~/.npm/job 2>/dev/null; echo .", false);
    assert_eq!(out, ".\n");
    std::fs::write(srv.home.join("proj/job-go"), "").unwrap();
    // After its end: the conversation's, not the host's.
    let t = std::time::Instant::now();
    let mut seen = String::new();
    while t.elapsed() < std::time::Duration::from_secs(20) {
        let (out, _) = launch(&mut c, 4, "cat ~/.npm/job 2>/dev/null; echo .", false);
        seen = out;
        if seen == "from-job\n.\n" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(seen, "from-job\n.\n");
    assert!(!npm.join("job").exists() && !npm.join("left").exists());
}
