//! The one secret detector, end to end: every token shape the detector knows is dropped
//! from a call's environment (said, never passed) and asked about in a home a call could
//! read; this repository cloned into a home asks nothing (its sources and test fixtures
//! merely mention the shapes); a refusal of a token host names the file that made it one
//! and what to do.

mod common;

use std::path::{Path, PathBuf};

use common::{Server, collect, command};
use efr_policy::secrets::checksummed_token;
use serde_json::{Value, json};

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A random-looking run of `n` characters of `alphabet` (fixed: the text must look
/// generated, not be so).
fn rnd(alphabet: &str, n: usize, seed: u64) -> String {
    let a = alphabet.as_bytes();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            a[(x % a.len() as u64) as usize] as char
        })
        .collect()
}

const B62: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A temp dir outside /tmp (a call has its own) with `home/` and `config/`.
fn temp_env() -> tempfile::TempDir {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir(d.path().join("home")).unwrap();
    std::fs::create_dir(d.path().join("config")).unwrap();
    d
}

/// Tokens in a URL's user part (Gemfury, Azure Artifacts, a Go proxy) and vendor tokens in
/// kept variables: none reaches the call, each is said by name.
#[test]
fn every_shape_in_the_environment_is_dropped_and_said() {
    let d = temp_env();
    let proj = d.path().join("home/proj");
    std::fs::create_dir_all(&proj).unwrap();
    let vars: Vec<(&str, String)> = vec![
        (
            "PIP_INDEX_URL",
            format!("https://{}:@repo.fury.io/acme/", rnd(B62, 20, 1)),
        ),
        (
            "PIP_EXTRA_INDEX_URL",
            format!(
                "https://{}@pkgs.dev.azure.com/org/_packaging/feed/pypi/simple/",
                rnd(B62, 52, 2)
            ),
        ),
        (
            "GOPROXY",
            format!("https://{}@goproxy.corp.example,direct", rnd(B62, 24, 3)),
        ),
        ("CARGO_GITLAB", format!("glpat-{}", rnd(B62, 20, 4))),
        ("CARGO_STRIPE", format!("sk_live_{}", rnd(B62, 24, 5))),
        ("CARGO_MAPS", format!("AIza{}", rnd(B62, 35, 6))),
        (
            "CARGO_NPM",
            checksummed_token("npm", &rnd(B62, 30, 7)).unwrap(),
        ),
    ];
    let summary = d.path().join("summary.json");
    let mut c = command(d.path());
    for (k, v) in &vars {
        c.env(k, v);
    }
    let o = c
        .current_dir(&proj)
        .args(["run", "--project"])
        .arg(&proj)
        .arg("--summary")
        .arg(&summary)
        .args(["--", "env"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let dropped = s["env_dropped"].as_array().cloned().unwrap_or_default();
    for (k, v) in &vars {
        assert!(!out.contains(v.as_str()), "{k} reached the call: {out}");
        assert!(
            err.contains(&format!(
                "{k} is not passed to the call: its value looks like a secret"
            )),
            "{k}: {err}"
        );
        assert!(dropped.contains(&json!(k)), "{k}: {s}");
    }
    // An ordinary mirror is still passed.
    let o = command(d.path())
        .env("PIP_INDEX_URL", "https://pypi.corp.example/simple/")
        .current_dir(&proj)
        .args(["run", "--project"])
        .arg(&proj)
        .args(["--", "printenv PIP_INDEX_URL"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "https://pypi.corp.example/simple/\n"
    );
}

fn pem(kind: &str) -> String {
    let body = rnd(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        400,
        99,
    );
    format!("-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----\n")
}

/// A home with every shape in a place the masks do not name: each is asked about, with
/// the hosts its token is for.
#[test]
fn every_shape_in_a_home_is_asked_about() {
    let d = temp_env();
    let home = std::fs::canonicalize(d.path().join("home")).unwrap();
    let outside = d.path().join("data");
    let ghs = checksummed_token("ghs", &rnd(B62, 30, 10)).unwrap();
    let npm = checksummed_token("npm", &rnd(B62, 30, 11)).unwrap();
    let files: Vec<(PathBuf, String, Vec<&str>)> = vec![
        (
            home.join("work/app/.git/config"),
            format!(
                "[remote \"origin\"]\n\turl = https://x-access-token:{ghs}@github.com/o/r.git\n"
            ),
            vec!["api.github.com", "github.com"],
        ),
        (
            home.join("work/deploy/sa.json"),
            format!(
                "{{\"type\": \"service_account\", \"project_id\": \"p\", \"private_key\": \"{}\"}}",
                pem("").replace('\n', "\\n")
            ),
            vec![],
        ),
        (
            home.join("work/cluster/k3s.yaml"),
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://k8s.corp.example:6443\n  name: c\nusers:\n- name: u\n  user:\n    token: {}\n",
                rnd(B62, 40, 12)
            ),
            vec!["k8s.corp.example"],
        ),
        (
            home.join("notes/gitlab.txt"),
            format!("glpat-{}\n", rnd(B62, 20, 13)),
            vec!["gitlab.com"],
        ),
        (
            home.join("notes/stripe.txt"),
            format!("live: sk_live_{}\n", rnd(B62, 24, 14)),
            vec!["api.stripe.com"],
        ),
        (
            home.join("notes/maps.txt"),
            format!("key AIza{}\n", rnd(B62, 35, 15)),
            vec![],
        ),
        (
            home.join("notes/npm.txt"),
            format!("{npm}\n"),
            vec!["registry.npmjs.org"],
        ),
        (
            home.join("keys/server.ppk"),
            format!(
                "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\n{}\nPrivate-Lines: 1\n{}\n",
                rnd(B62, 68, 16),
                rnd(B62, 44, 17)
            ),
            vec![],
        ),
        (
            home.join("keys/age.txt"),
            format!(
                "AGE-SECRET-KEY-1{}\n",
                rnd("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 18)
            ),
            vec![],
        ),
        (
            home.join("vpn/wg0.conf"),
            format!(
                "[Interface]\nPrivateKey = {}=\nAddress = 10.0.0.2/32\n",
                rnd(B62, 43, 19)
            ),
            vec![],
        ),
        (outside.join("id_deploy"), pem("RSA "), vec![]),
    ];
    for (p, text, _) in &files {
        write(p, text);
    }
    // A directory linked out of the home: a call reaches its files through the link.
    std::os::unix::fs::symlink(&outside, home.join("data")).unwrap();
    let o = command(d.path())
        .args(["surface", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let outside = std::fs::canonicalize(&outside).unwrap();
    for (p, _, hosts) in &files {
        let p = if p.starts_with(&home) {
            p.clone()
        } else {
            outside.join(p.file_name().unwrap())
        };
        let f = r["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == p.to_str().unwrap())
            .unwrap_or_else(|| panic!("{} not asked about: {r}", p.display()));
        assert!(f["question_id"].is_string(), "{f}");
        let got: Vec<&str> = f["hosts"]
            .as_array()
            .map(|a| a.iter().map(|h| h.as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(&got, hosts, "{f}");
    }
}

/// The sources and test fixtures of this repository mention every shape; cloned into a
/// home, they ask nothing (at most one question per 10,000 files would be allowed).
#[test]
fn this_repository_cloned_into_a_home_asks_nothing() {
    let d = temp_env();
    let home = d.path().join("home");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // The checkout may be another user's (CI's unprivileged pass): git is told to trust it
    // for this clone only, through a global config of the test's own.
    let trust = d.path().join("gitconfig");
    std::fs::write(&trust, "[safe]\n\tdirectory = *\n").unwrap();
    let o = std::process::Command::new("git")
        .env("GIT_CONFIG_GLOBAL", &trust)
        .args(["clone", "--quiet"])
        .arg(repo)
        .arg(home.join("efr-sandbox"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files = walkdir_count(&home.join("efr-sandbox"));
    assert!(files > 300, "{files} files in the clone");
    let o = command(d.path())
        .args(["surface", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    // `files` is absent when the scan found nothing.
    let files_seen = r["files"].as_array().cloned().unwrap_or_default();
    let questions: Vec<&Value> = files_seen
        .iter()
        .filter(|f| f["question_id"].is_string())
        .collect();
    assert!(
        questions.len() * 10_000 <= files,
        "{} questions on {files} files: {questions:?}",
        questions.len()
    );
}

fn walkdir_count(d: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![d.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() && e.file_name() != ".git" {
                stack.push(e.path());
            } else if ft.is_file() {
                n += 1;
            }
        }
    }
    n
}

/// A token host's refusal names the file that made the host one and what to do.
#[test]
fn a_token_hosts_refusal_names_its_file() {
    let s = Server::start(&[]);
    let home = std::fs::canonicalize(&s.home).unwrap();
    let proj = home.join("proj");
    let env_file = proj.join("deploy/.env");
    write(
        &env_file,
        &format!("A=1\nHF_TOKEN=hf_{}\n", rnd(B62, 34, 30)),
    );
    let mut c = s.client();
    let r = c.call(
        1,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "t"}),
    );
    assert!(
        r["end"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == env_file.to_str().unwrap()),
        "{r}"
    );
    for (i, backend) in common::backends().into_iter().enumerate() {
        let id = 10 + i as u64;
        c.request(
            id,
            "sandbox.launch",
            json!({"line": "curl -sS https://huggingface.co/ || true", "projects": [proj],
                   "backend": backend,
                   "grants": [{"kind": "host", "host": "huggingface.co"}]}),
        );
        let (items, _) = collect(&mut c, id);
        let rec = items
            .iter()
            .find(|i| i["kind"] == "exit" && i["record"]["kind"] == "host")
            .unwrap_or_else(|| panic!("{backend}: no host record: {items:?}"));
        let why = rec["record"]["judgement"]["reasons"][0].as_str().unwrap();
        assert!(why.contains(env_file.to_str().unwrap()), "{backend}: {why}");
        assert!(
            why.contains("surface respond") && why.contains("--mask"),
            "{backend}: {why}"
        );
        assert_eq!(rec["record"]["judgement"]["verdict"], "user_only");
    }
}
