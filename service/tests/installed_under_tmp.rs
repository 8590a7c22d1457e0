//! The binary may live where a contained call cannot see it (a checkout built under /tmp,
//! which every call has its own of): the bwrap backend, which runs our init inside its
//! view, and the check, which runs the probe inside calls, still work.

mod common;

use common::{BIN, temp_env};

#[test]
fn a_binary_under_tmp_launches_on_both_backends_and_passes_its_check() {
    let d = temp_env();
    assert!(
        d.path().starts_with("/tmp"),
        "the test needs its copy under /tmp"
    );
    let bin = d.path().join("bin/efr-sandbox");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(BIN, &bin).unwrap();
    let proj = d.path().join("home/proj");
    std::fs::create_dir_all(&proj).unwrap();
    let p = proj.to_str().unwrap();
    for backend in ["native", "bwrap"] {
        let out = std::process::Command::new(&bin)
            .env("HOME", d.path().join("home"))
            .env("XDG_CONFIG_HOME", d.path().join("config"))
            .env_remove("XDG_RUNTIME_DIR")
            .args([
                "run",
                "--backend",
                backend,
                "--project",
                p,
                "--cwd",
                p,
                "--",
                "echo launched",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("launched"),
            "{backend}: {out:?}"
        );
    }
    let out = std::process::Command::new(&bin)
        .env("HOME", d.path().join("home"))
        .env("XDG_CONFIG_HOME", d.path().join("config"))
        .env_remove("XDG_RUNTIME_DIR")
        .arg("check")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for test in [
        "backend_native",
        "backend_bwrap",
        "mounts",
        "seccomp",
        "proxy",
    ] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(test))
            .unwrap_or("");
        assert!(line.starts_with("pass"), "{test}: {line}\n{text}");
    }
    // The staged probe is gone after the check.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("efr-probe-"))
        .filter(|e| {
            e.metadata().is_ok_and(|m| {
                m.modified()
                    .is_ok_and(|t| t.elapsed().is_ok_and(|a| a.as_secs() < 5))
            })
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
