//! Refused writes a user can act on: a write refused in a cache or in the
//! project is an exit record naming the grant that allows it, `run` prints the exact
//! `--grant` to retry with, and the retry as printed writes. The home is under /var/tmp: a
//! call's /tmp is its own, so a home under the host's /tmp would not be the real one.

mod common;

use std::path::Path;

use common::{backends, command};
use serde_json::{Value, json};

fn home_env() -> tempfile::TempDir {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir(d.path().join("home")).unwrap();
    std::fs::create_dir(d.path().join("config")).unwrap();
    d
}

/// `run` in `proj` with `grants`; (stderr, the finish of `--json FILE`).
fn run(d: &Path, proj: &Path, backend: &str, grants: &[String], line: &str) -> (String, Value) {
    let json = d.join("finish.json");
    let p = proj.to_str().unwrap();
    let mut c = command(d);
    c.current_dir(proj)
        .arg("run")
        .args(["--backend", backend, "--project", p]);
    for g in grants {
        c.args(["--grant", g]);
    }
    let o = c
        .arg("--json")
        .arg(&json)
        .args(["--", line])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let fin: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (err, fin)
}

/// The `--grant` values of the retry lines.
fn retry_grants(err: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in err.lines() {
        if let Some((_, rest)) = l.split_once("; retry with ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            for pair in w.chunks(2).take_while(|p| p[0] == "--grant") {
                out.push(pair[1].to_string());
            }
        }
    }
    out
}

#[test]
fn refused_writes_name_their_grant_and_the_retry_writes() {
    for backend in backends() {
        let d = home_env();
        let home = d.path().join("home");
        // A cache whose root does not exist yet (no layer for it: refused).
        let npm = home.join(".cargo/registry");
        std::fs::create_dir_all(home.join(".cargo")).unwrap();
        let proj = home.join("proj");
        std::fs::create_dir_all(&proj).unwrap();
        let line = "mkdir -p ~/.cargo/registry/cache/x && echo cached > ~/.cargo/registry/cache/x/f; \
                    echo 'export A=1' > .envrc; true";
        let (err, fin) = run(d.path(), &proj, backend, &[], line);
        let exits = fin["exits"].as_array().expect("exit records");
        let by_path = |p: &Path| {
            exits
                .iter()
                .find(|r| r["facts"]["targets"][0]["path"] == json!(p))
                .unwrap_or_else(|| panic!("{backend}: no record of {}: {fin}", p.display()))
        };
        // In a cache (one with no layer: its root does not exist yet): the grant is the
        // cache's root (the tool's next write lands elsewhere in it), and the reason names
        // the cache.
        let cache_dir = npm.clone();
        let r = by_path(&cache_dir);
        assert_eq!(
            (&r["kind"], &r["source"]),
            (&json!("write"), &json!("denial")),
            "{r}"
        );
        assert_eq!(r["facts"]["targets"][0]["class"], json!("cache"), "{r}");
        assert_eq!(
            r["needs"],
            json!({"kind": "contained", "grants": [{"kind": "write", "path": npm}]}),
            "{r}"
        );
        let why = r["judgement"]["reasons"][0].as_str().unwrap();
        assert!(
            why.contains(&format!(
                "in the cache {} (cargo's downloads:",
                npm.display()
            )) && why.contains(&format!("the grant write={}", npm.display())),
            "{backend}: {why}"
        );
        // In the project: a read-only path of it; the grant is the path.
        let envrc = proj.join(".envrc");
        let r = by_path(&envrc);
        assert_eq!(r["facts"]["targets"][0]["class"], json!("project"), "{r}");
        assert_eq!(
            r["needs"],
            json!({"kind": "contained", "grants": [{"kind": "write", "path": envrc}]}),
            "{r}"
        );
        assert!(
            r["judgement"]["reasons"][0]
                .as_str()
                .unwrap()
                .contains("direnv runs it"),
            "{r}"
        );
        for (summary, grant) in [
            (
                format!("write {} (refused by the sandbox)", cache_dir.display()),
                format!(
                    "write={} (create {} first: a write grant names a path that exists)",
                    npm.display(),
                    npm.display()
                ),
            ),
            (
                format!("write {} (refused by the sandbox)", envrc.display()),
                format!(
                    "write={} (create {} first: a write grant names a path that exists)",
                    envrc.display(),
                    envrc.display()
                ),
            ),
        ] {
            let want = format!("efr-sandbox: refused: {summary}; retry with --grant {grant}\n");
            assert!(err.contains(&want), "{backend}: no {want:?} in\n{err}");
        }
        assert!(!npm.exists());
        assert!(!envrc.exists());

        // Granted as printed (the missing file made first, as the line says): both writes
        // land, nothing is refused.
        let grants = retry_grants(&err);
        std::fs::write(&envrc, "").unwrap();
        std::fs::create_dir(&npm).unwrap();
        assert_eq!(grants.len(), 2, "{backend}: {err}");
        let (err, fin) = run(d.path(), &proj, backend, &grants, line);
        assert!(fin.get("exits").is_none(), "{backend}: {fin}\n{err}");
        assert_eq!(
            std::fs::read_to_string(npm.join("cache/x/f")).unwrap(),
            "cached\n"
        );
        assert_eq!(std::fs::read_to_string(&envrc).unwrap(), "export A=1\n");
    }
}
