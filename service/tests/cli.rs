//! The command line: `explain` and `config`, run as the real binary.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Output;

use common::{command, temp_env};
use serde_json::Value;

fn run(dir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    command(dir).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn explain_json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["explain", "--json"];
    all.extend_from_slice(args);
    let os: Vec<&std::ffi::OsStr> = all.iter().map(std::ffi::OsStr::new).collect();
    let o = run(dir, &os);
    assert!(
        o.status.success(),
        "explain {args:?} failed: {}",
        stderr(&o)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not json ({e}): {}", stdout(&o)))
}

fn explain_text(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["explain"];
    all.extend_from_slice(args);
    let os: Vec<&std::ffi::OsStr> = all.iter().map(std::ffi::OsStr::new).collect();
    let o = run(dir, &os);
    assert!(
        o.status.success(),
        "explain {args:?} failed: {}",
        stderr(&o)
    );
    stdout(&o)
}

#[test]
fn explain_ssh_key_is_masked() {
    let dir = temp_env();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "secret").unwrap();
    let key = home.join(".ssh/id_ed25519");
    for path in ["~/.ssh/id_ed25519", key.to_str().unwrap()] {
        let r = explain_json(dir.path(), &[path]);
        assert_eq!(r["access"], "none", "{r}");
        assert_eq!(r["class"], "masked", "{r}");
        assert_eq!(r["masked"]["key"], "sandbox.masks", "{r}");
        assert_eq!(r["masked"]["rule"], "~/.ssh", "{r}");
        assert_eq!(r["shown"], "~/.ssh/id_ed25519", "{r}");
        assert_eq!(r["grant"]["grant"]["kind"], "unmask", "{r}");
    }
    let text = explain_text(dir.path(), &["~/.ssh/id_ed25519"]);
    assert!(text.contains("masked"), "{text}");
    assert!(text.contains("~/.ssh"), "{text}");
}

#[test]
fn explain_git_hooks_in_a_project_is_read_only() {
    let dir = temp_env();
    let proj = dir.path().join("proj");
    std::fs::create_dir_all(proj.join(".git/hooks")).unwrap();
    let p = proj.to_str().unwrap();
    let r = explain_json(dir.path(), &["--project", p, "--cwd", p, ".git/hooks"]);
    assert_eq!(r["access"], "read", "{r}");
    assert!(r["read_only"].is_object(), "{r}");
    assert_eq!(r["read_only"]["rule"], ".git/hooks", "{r}");
    assert_eq!(r["exists"], true, "{r}");
    let text = explain_text(dir.path(), &["--project", p, "--cwd", p, ".git/hooks"]);
    assert!(text.contains("read-only inside a writable root"), "{text}");
    // The project itself is writable.
    let r = explain_json(dir.path(), &["--project", p, p]);
    assert_eq!(r["access"], "write", "{r}");
}

#[test]
fn explain_etc_passwd_is_read() {
    let dir = temp_env();
    let r = explain_json(dir.path(), &["/etc/passwd"]);
    assert_eq!(r["access"], "read", "{r}");
    assert_eq!(r["canonical"], "/etc/passwd", "{r}");
    let text = explain_text(dir.path(), &["/etc/passwd"]);
    assert!(text.contains("read"), "{text}");
}

#[test]
fn explain_takes_a_name_that_is_not_utf8() {
    let dir = temp_env();
    let name = std::ffi::OsStr::from_bytes(b"/tmp/efr-not-utf8-\xff");
    let o = run(dir.path(), &["explain".as_ref(), "--json".as_ref(), name]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["non_utf8"], true, "{r}");
    assert!(r["canonical"].as_str().unwrap().ends_with("\\xff"), "{r}");
}

#[test]
fn explain_refuses_unusable_input() {
    let dir = temp_env();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--cwd", "/nonexistent-efr-dir", "x"],
            "is not a directory",
        ),
        (
            &["--project", "/nonexistent-efr-dir", "/etc"],
            "is not a directory",
        ),
        (&[""], "empty"),
    ];
    for (args, what) in cases {
        let mut all = vec!["explain"];
        all.extend_from_slice(args);
        let os: Vec<&std::ffi::OsStr> = all.iter().map(std::ffi::OsStr::new).collect();
        let o = run(dir.path(), &os);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(stderr(&o).contains(what), "{args:?}: {}", stderr(&o));
    }
    // No PATH at all: clap's usage error.
    let o = run(dir.path(), &["explain".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn config_prints_each_value_with_its_source() {
    let dir = temp_env();
    let o = run(dir.path(), &["config".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("sandbox.masks"), "{text}");
    assert!(text.contains("default"), "{text}");

    let cfg = dir.path().join("config/efr");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[sandbox]\nbackend = \"native\"\n").unwrap();
    let o = run(dir.path(), &["config".as_ref(), "--json".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let backend = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "sandbox.backend")
        .unwrap();
    assert_eq!(backend["value"], "native", "{v}");
    assert_eq!(backend["source"]["kind"], "file", "{v}");
    assert_eq!(backend["source"]["line"], 2, "{v}");
}

#[test]
fn broken_config_is_an_error_with_line_and_column() {
    let dir = temp_env();
    let cfg = dir.path().join("config/efr");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[sandbox]\nbackend = \n").unwrap();
    for args in [
        &["config"][..],
        &["config", "--json"],
        &["explain", "/etc/passwd"],
    ] {
        let os: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        let o = run(dir.path(), &os);
        assert!(!o.status.success(), "{args:?} should fail");
        let err = stderr(&o);
        assert!(err.contains("line 2, column"), "{args:?}: {err}");
        assert!(err.contains("config.toml"), "{args:?}: {err}");
    }
}

#[test]
fn serve_without_a_socket_place_is_a_clear_error() {
    let dir = temp_env();
    let o = run(dir.path(), &["serve".as_ref()]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("XDG_RUNTIME_DIR is not set"),
        "{}",
        stderr(&o)
    );
}
