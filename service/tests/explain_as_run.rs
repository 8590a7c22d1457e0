//! `explain`, `classify` and a refusal answer for the call `run` would make: with the
//! project `run` takes without `--project` (the git top level of the working directory),
//! and with the masks the user's surface answers add to every call (a write to one needs
//! `unmask=`, which is what the refusal proposes and what lets the retry write).

mod common;

use std::path::{Path, PathBuf};

use common::{backends, command};
use serde_json::{Value, json};

/// A home under /var/tmp (a call's /tmp is its own) with a repository `home/proj`.
fn home_with_repo() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    for s in ["home", "config"] {
        std::fs::create_dir(d.path().join(s)).unwrap();
    }
    let proj = d.path().join("home/proj");
    std::fs::create_dir_all(proj.join("src")).unwrap();
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&proj)
        .status()
        .unwrap();
    assert!(ok.success());
    (d, proj)
}

fn json_of(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"))
}

/// `explain --json PATH` run in `cwd`, with no `--project`.
fn explain(d: &Path, cwd: &Path, path: &str) -> (Value, String) {
    let o = command(d)
        .current_dir(cwd)
        .args(["explain", "--json", path])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (json_of(&o), err)
}

#[test]
fn explain_and_classify_take_the_project_run_takes() {
    let (d, proj) = home_with_repo();
    let sub = proj.join("src");
    // From a directory of the repository: the project is its top level, as for `run`.
    let (v, err) = explain(d.path(), &sub, "new.rs");
    assert_eq!(v["class"], json!("project"), "{v}");
    assert_eq!(v["access"], json!("write"), "{v}");
    assert!(
        err.contains(&format!("project: {}", proj.display())),
        "{err}"
    );
    let (v, _) = explain(d.path(), &sub, "../.git/config");
    assert_eq!(
        (&v["class"], &v["access"]),
        (&json!("project"), &json!("read")),
        "{v}"
    );
    assert_eq!(v["read_only"]["rule"], json!(".git/config"), "{v}");
    // Its lock file is read-only with it, and the fix is the grant of the config (which
    // brings its lock file), not of the lock.
    let (v, _) = explain(d.path(), &sub, "../.git/config.lock");
    assert_eq!(v["access"], json!("read"), "{v}");
    assert_eq!(
        v["grant"]["grant"],
        json!({"kind": "write", "path": proj.join(".git/config")}),
        "{v}"
    );
    // classify: a write in the project needs nothing; the config write needs its grant.
    let classify = |line: &str| {
        json_of(
            &command(d.path())
                .current_dir(&sub)
                .args(["classify", "--json", "--", line])
                .output()
                .unwrap(),
        )
    };
    let v = classify("touch new.rs");
    assert_eq!(v["exits"], json!([]), "{v}");
    assert!(
        v["launch"]["grants"].as_array().is_none_or(Vec::is_empty),
        "{v}"
    );
    let v = classify("git config user.name X");
    assert_eq!(
        v["launch"]["grants"],
        json!([{"kind": "write", "path": proj.join(".git/config")}]),
        "{v}"
    );
    // `run` agrees: the write lands.
    let o = command(d.path())
        .current_dir(&sub)
        .args(["run", "--", "touch new.rs"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(sub.join("new.rs").exists());
    // In the home itself no project is taken (as `run` takes none): read-only there.
    let home = d.path().join("home");
    let (v, err) = explain(d.path(), &home, "notes.txt");
    assert_eq!(v["access"], json!("read"), "{v}");
    assert!(err.contains("project: none"), "{err}");
    // An explicit --project is still the one used.
    let o = command(d.path())
        .current_dir(&sub)
        .args(["explain", "--json", "--project"])
        .arg(&sub)
        .arg("../README")
        .output()
        .unwrap();
    assert_eq!(json_of(&o)["access"], json!("read"), "{o:?}");
}

#[test]
fn a_mask_the_surface_answer_made_is_explained_and_its_refusal_proposes_unmask() {
    for backend in backends() {
        let (d, proj) = home_with_repo();
        let env_file = proj.join(".env");
        std::fs::write(&env_file, "SECRET=visible-before\n").unwrap();
        let cli = |args: &[&str]| {
            command(d.path())
                .current_dir(&proj)
                .args(args)
                .output()
                .unwrap()
        };
        let v = json_of(&cli(&["surface", "--project", ".", "--json"]));
        let q = v["files"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["path"] == json!(env_file))
            .and_then(|f| f["question_id"].as_str())
            .unwrap_or_else(|| panic!("no question on {}: {v}", env_file.display()))
            .to_string();
        assert!(cli(&["surface", "respond", &q, "--mask"]).status.success());

        // explain shows the mask and where it came from, and the grant that lifts it.
        let (v, _) = explain(d.path(), &proj, ".env");
        assert_eq!(
            (&v["class"], &v["access"]),
            (&json!("masked"), &json!("none")),
            "{v}"
        );
        assert_eq!(v["masked"]["key"], json!("surface.answers"), "{v}");
        assert!(
            v["masked"]["reason"]
                .as_str()
                .unwrap()
                .contains("efr-sandbox surface"),
            "{v}"
        );
        assert_eq!(
            v["grant"]["grant"],
            json!({"kind": "unmask", "path": env_file}),
            "{v}"
        );

        // The refused write proposes unmask=, and the retry as printed writes.
        let json = d.path().join("finish.json");
        let o = command(d.path())
            .current_dir(&proj)
            .args(["run", "--backend", backend, "--json"])
            .arg(&json)
            .args(["--", "echo added >> .env"])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{backend}: {o:?}");
        let fin: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let r = &fin["exits"][0];
        assert_eq!(
            r["needs"],
            json!({"kind": "contained", "grants": [{"kind": "unmask", "path": env_file}]}),
            "{backend}: {fin}"
        );
        let err = String::from_utf8_lossy(&o.stderr);
        let want = format!("; retry with --grant unmask={}\n", env_file.display());
        assert!(err.contains(&want), "{backend}: no {want:?} in\n{err}");
        let o = command(d.path())
            .current_dir(&proj)
            .args(["run", "--backend", backend, "--grant"])
            .arg(format!("unmask={}", env_file.display()))
            .args(["--", "echo added >> .env"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{backend}: the retry: {o:?}");
        assert_eq!(
            std::fs::read_to_string(&env_file).unwrap(),
            "SECRET=visible-before\nadded\n",
            "{backend}"
        );
    }
}
