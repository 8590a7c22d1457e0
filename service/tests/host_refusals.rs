//! A write the sandbox lets through but the host's own file system refuses (a read-only
//! bind mount of the host, a full disk, a directory's own mode) is no refusal of the
//! sandbox: no exit record, no `--grant` to retry with (no grant could make the write), and
//! the finish says what the host refused in `sandbox_summary.host_refused`.
//!
//! The read-only mount and the full disk need the host's own mounts, which only root can
//! make (an unprivileged mount namespace makes mounts of its own, not the host's): those
//! run as root only. The directory's own mode runs as every user.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{backends, command, is_root};
use serde_json::Value;

fn home_env() -> tempfile::TempDir {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir(d.path().join("home")).unwrap();
    std::fs::create_dir(d.path().join("config")).unwrap();
    d
}

/// `run` of `line` in `proj`: (stderr, the finish of `--json FILE`).
fn run(d: &Path, proj: &Path, backend: &str, line: &str) -> (String, Value) {
    let json = d.join("finish.json");
    let o = command(d)
        .current_dir(proj)
        .args([
            "run",
            "--backend",
            backend,
            "--project",
            proj.to_str().unwrap(),
        ])
        .arg("--json")
        .arg(&json)
        .args(["--", line])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let fin: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (err, fin)
}

/// The finish has no exit record, proposes no grant, and notes `why` on `path`.
fn host_refused(backend: &str, err: &str, fin: &Value, path: &Path, why: &str) {
    assert!(
        fin.get("exits")
            .is_none_or(|e| e.as_array().is_some_and(Vec::is_empty)),
        "{backend}: the host's refusal became an exit record: {fin}"
    );
    assert!(
        fin["sandbox_summary"].get("denied_writes").is_none(),
        "{backend}: the host's refusal is a denied write: {fin}"
    );
    assert!(
        !err.contains("--grant"),
        "{backend}: a grant proposed: {err}"
    );
    assert_ne!(
        fin["exit_status"], 0,
        "{backend}: the write succeeded: {fin}"
    );
    let notes: Vec<&str> = fin["sandbox_summary"]["host_refused"]
        .as_array()
        .unwrap_or_else(|| panic!("{backend}: no host_refused note: {fin}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let p = path.to_str().unwrap();
    assert!(
        notes.iter().any(|n| n.contains(p) && n.contains(why)),
        "{backend}: no note of {p} ({why}): {notes:?}"
    );
}

/// A mount of the host's, undone on drop.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn sh(cmd: &str) {
    let s = Command::new("sh").args(["-c", cmd]).status().unwrap();
    assert!(s.success(), "{cmd}");
}

#[test]
fn a_write_on_the_hosts_read_only_mount_is_a_note_not_an_exit() {
    if !is_root() {
        eprintln!("as root only: an unprivileged user cannot make the host's read-only mount");
        return;
    }
    for backend in backends() {
        let d = home_env();
        let src = d.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let proj = d.path().join("home/proj");
        std::fs::create_dir(&proj).unwrap();
        sh(&format!(
            "mount --bind {0} {1} && mount -o remount,bind,ro {1}",
            src.display(),
            proj.display()
        ));
        let _m = Mounted(proj.clone());
        let (err, fin) = run(d.path(), &proj, backend, "echo x > out.log");
        host_refused(
            backend,
            &err,
            &fin,
            &proj.join("out.log"),
            "read-only file system",
        );
        assert!(!src.join("out.log").exists());
    }
}

#[test]
fn a_write_on_a_full_host_disk_is_a_note_not_an_exit() {
    if !is_root() {
        eprintln!("as root only: an unprivileged user cannot mount the host's small tmpfs");
        return;
    }
    for backend in backends() {
        let d = home_env();
        let proj = d.path().join("home/proj");
        std::fs::create_dir(&proj).unwrap();
        let small = proj.join("small");
        std::fs::create_dir(&small).unwrap();
        // Full of inodes too: the create itself fails (a write(2) that fails for want of
        // blocks is the line's own business, not a supervised call).
        sh(&format!(
            "mount -t tmpfs -o size=64k,nr_inodes=8 tmpfs {}",
            small.display()
        ));
        let _m = Mounted(small.clone());
        sh(&format!(
            "cd {} && for i in 1 2 3 4 5 6 7 8 9; do true > f$i 2>/dev/null; done; \
             head -c 1M /dev/zero > f1 2>/dev/null; true",
            small.display()
        ));
        let (err, fin) = run(d.path(), &proj, backend, "echo x > small/more");
        host_refused(
            backend,
            &err,
            &fin,
            &small.join("more"),
            "no space left on device",
        );
    }
}

#[test]
fn a_write_a_directorys_own_mode_refuses_is_a_note_not_an_exit() {
    for backend in backends() {
        let d = home_env();
        let proj = d.path().join("home/proj");
        let locked = proj.join("locked");
        std::fs::create_dir_all(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let (err, fin) = run(d.path(), &proj, backend, "echo x > locked/f");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        host_refused(backend, &err, &fin, &locked.join("f"), "permission denied");
        assert!(!locked.join("f").exists());
    }
}
