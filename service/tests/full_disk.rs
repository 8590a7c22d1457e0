//! A full disk under the service's state dir degrades, never blocks: a cache whose layer
//! cannot be made is read-only for the call, the finish says so in `cache_refused`, and the
//! call runs (the `rm` that frees space included). Nothing half made is left in `layers`.
//!
//! The full disk is a small tmpfs mounted on the state dir, which only root can mount on the
//! host; an unprivileged user's run would need the service and its cache layers inside a
//! mount namespace of its own, so these run as root only (the degrading itself, a state
//! dir where no layer can be made, is tested for every user in `efr-call`'s unit tests).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{backends, command, is_root};
use efr_sandbox_wire::Finish;

fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir_all(dir.path().join("home/proj")).unwrap();
    std::fs::create_dir_all(dir.path().join("home/.npm")).unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    dir
}

fn state(d: &Path) -> PathBuf {
    d.join("home/.local/state/efr-sandbox")
}

fn run(d: &Path, b: &str, line: &str) -> (std::process::Output, Finish) {
    let fin = d.join("finish.json");
    let proj = d.join("home/proj");
    let o = command(d)
        .current_dir(&proj)
        .args(["run", "--backend", b, "--project"])
        .arg(&proj)
        .arg("--json")
        .arg(&fin)
        .args(["--", line])
        .output()
        .unwrap();
    let f: Finish = serde_json::from_slice(&std::fs::read(&fin).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{b}: no finish ({e}): {o:?}"));
    let _ = std::fs::remove_file(&fin);
    (o, f)
}

struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn sh(cmd: &str) {
    let s = Command::new("sh").args(["-c", cmd]).status().unwrap();
    assert!(s.success(), "{cmd}");
}

/// The state dir on a tmpfs full of blocks (`inodes` free inodes left: a directory then
/// still takes one, a file's content no block), or of inodes too.
fn full_state(d: &Path, inodes_full: bool) -> Mounted {
    let st = state(d);
    std::fs::create_dir_all(&st).unwrap();
    let opts = if inodes_full {
        "size=256k,nr_inodes=16"
    } else {
        "size=256k"
    };
    sh(&format!("mount -t tmpfs -o {opts} tmpfs {}", st.display()));
    let m = Mounted(st.clone());
    sh(&format!(
        "cd {} && head -c 1M /dev/zero > fill 2>/dev/null; \
         for i in $(seq 1 32); do true > f$i 2>/dev/null; done; true",
        st.display()
    ));
    if !inodes_full {
        // Blocks only: leave the inodes (the fill files of above are removed but `fill`).
        sh(&format!("cd {} && rm -f f[0-9]*", st.display()));
    }
    m
}

#[test]
fn a_full_state_disk_leaves_caches_read_only_and_the_call_runs() {
    if !is_root() {
        eprintln!("as root only: an unprivileged user cannot mount a small tmpfs on the host");
        return;
    }
    for b in backends() {
        for inodes_full in [false, true] {
            let d = temp_env();
            let _m = full_state(d.path(), inodes_full);
            let big = d.path().join("home/proj/big");
            std::fs::write(&big, "x").unwrap();
            let (o, f) = run(
                d.path(),
                b,
                "rm big && echo ran && ls ~/.npm >/dev/null && ! touch ~/.npm/new 2>/dev/null",
            );
            let what = format!("{b} (inodes full: {inodes_full})");
            assert_eq!(o.status.code(), Some(0), "{what}: {o:?} {f:?}");
            assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ran", "{what}");
            assert!(!big.exists(), "{what}: the rm did not run");
            let npm = d.path().join("home/.npm").canonicalize().unwrap();
            let note = format!("{}: read-only in this call: ", npm.display());
            assert!(
                f.sandbox_summary
                    .cache_refused
                    .iter()
                    .any(|l| l.starts_with(&note) && l.contains("No space left on device")),
                "{what}: no note of the read-only cache: {:?}",
                f.sandbox_summary
            );
            assert!(!d.path().join("home/.npm/new").exists(), "{what}");
            let left: Vec<_> = std::fs::read_dir(state(d.path()).join("layers"))
                .map(|r| r.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            assert!(left.is_empty(), "{what}: half-made layers left: {left:?}");
        }
    }
}
