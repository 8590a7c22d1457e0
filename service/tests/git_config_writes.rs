//! `git remote add` and `git config` in the project, with the grant `classify` proposes:
//! git writes `.git/config` by `.git/config.lock` and a rename, which a grant to write
//! `.git/config` allows; the user's own git then reads the new config and finds no lock.
//! A lock the call made and left (its writer killed, or its caller) is gone at the call's
//! end; a lock the host's git holds is not the call's to write or remove. Both backends;
//! the project is under /var/tmp (a call's /tmp is its own).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{backends, command};

const URL: &str = "https://example.com/team/app.git";

/// A home under /var/tmp with a repository `home/proj` holding one commit.
fn repo() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    for s in ["home", "config"] {
        std::fs::create_dir(d.path().join(s)).unwrap();
    }
    let proj = d.path().join("home/proj");
    std::fs::create_dir(&proj).unwrap();
    std::fs::write(proj.join("README"), "hello\n").unwrap();
    for args in [
        &["init", "-q", "."][..],
        &["add", "README"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    ] {
        let o = user_git(&proj, args);
        assert!(o.status.success(), "git {args:?}: {o:?}");
    }
    (d, proj)
}

/// The user's own git on the host, in `dir`, with no global or system config.
fn user_git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn user_git_out(dir: &Path, args: &[&str]) -> String {
    let o = user_git(dir, args);
    assert!(o.status.success(), "the user's git {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The write grants `classify` proposes for `line` in `proj` (`--grant` values).
fn proposed_writes(d: &Path, proj: &Path, line: &str) -> Vec<String> {
    let o = command(d)
        .current_dir(proj)
        .args(["classify", "--json", "--project"])
        .arg(proj)
        .args(["--", line])
        .output()
        .unwrap();
    assert!(o.status.success(), "classify: {o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["launch"]["grants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["kind"] == "write")
        .map(|g| format!("write={}", g["path"].as_str().unwrap()))
        .collect()
}

/// `run` of `line` in `proj` on `backend` with `grants`: the output.
fn run(
    d: &Path,
    proj: &Path,
    backend: &str,
    grants: &[String],
    line: &str,
) -> std::process::Output {
    let mut c = command(d);
    c.current_dir(proj).args(["run", "--backend", backend]);
    for g in grants {
        c.args(["--grant", g]);
    }
    c.args(["--", line]).output().unwrap()
}

/// What the user meets after the call: `git status` works and no lock is left.
fn host_is_clean(proj: &Path, what: &str) {
    let lock = proj.join(".git/config.lock");
    assert!(
        !lock.exists(),
        "{what}: {} left on the host",
        lock.display()
    );
    assert_eq!(user_git_out(proj, &["status", "--porcelain"]), "", "{what}");
}

#[test]
fn git_remote_add_and_git_config_work_with_the_grant_classify_proposes() {
    for backend in backends() {
        let (d, proj) = repo();
        // The user's own keys that run programs (an alias, an editor): git rewrites the
        // whole file to set one key, and they stay (they are the user's, not the call's).
        for (k, v) in [("alias.co", "checkout"), ("core.editor", "vim")] {
            assert!(user_git(&proj, &["config", k, v]).status.success());
        }
        let line = format!("git remote add origin {URL}");
        let grants = proposed_writes(d.path(), &proj, &line);
        let config = proj.join(".git/config");
        assert_eq!(
            grants,
            [format!("write={}", config.display())],
            "{backend}: classify proposes the write of .git/config"
        );
        let o = run(d.path(), &proj, backend, &grants, &line);
        assert!(o.status.success(), "{backend}: {line}: {o:?}");
        let o = run(
            d.path(),
            &proj,
            backend,
            &grants,
            "git config user.name 'Ada L'",
        );
        assert!(o.status.success(), "{backend}: git config: {o:?}");
        assert_eq!(
            user_git_out(&proj, &["config", "--get", "remote.origin.url"]),
            URL,
            "{backend}"
        );
        assert_eq!(
            user_git_out(&proj, &["config", "--get", "user.name"]),
            "Ada L",
            "{backend}"
        );
        for (k, v) in [("alias.co", "checkout"), ("core.editor", "vim")] {
            assert_eq!(user_git_out(&proj, &["config", "--get", k]), v, "{backend}");
        }
        host_is_clean(&proj, backend);
        // The grant adds no key that runs a program: that is the user's alone to set.
        let o = run(
            d.path(),
            &proj,
            backend,
            &grants,
            "git config alias.st '!id'",
        );
        assert!(!o.status.success(), "{backend}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("alias.st") && err.contains("only you can run the line unsandboxed"),
            "{backend}: {err}"
        );
        assert!(
            user_git(&proj, &["config", "--get", "alias.st"])
                .stdout
                .is_empty(),
            "{backend}"
        );
        host_is_clean(&proj, backend);
        // The user's own next config write works (no lock in the way).
        assert!(
            user_git(&proj, &["config", "user.email", "ada@example.com"])
                .status
                .success(),
            "{backend}"
        );
    }
}

/// Without the grant, the refusal names the grant of `.git/config` (not of its lock file,
/// whose grant would need it made on the host first and then left there), and the retry as
/// printed works.
#[test]
fn the_refusal_of_the_lock_file_proposes_the_grant_of_the_config() {
    for backend in backends() {
        let (d, proj) = repo();
        let line = format!("git remote add origin {URL}");
        let o = run(d.path(), &proj, backend, &[], &line);
        assert!(!o.status.success(), "{backend}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let config = proj.join(".git/config");
        let want = format!("; retry with --grant write={}\n", config.display());
        assert!(err.contains(&want), "{backend}: no {want:?} in\n{err}");
        assert!(!err.contains("create "), "{backend}: {err}");
        host_is_clean(&proj, backend);
        let o = run(
            d.path(),
            &proj,
            backend,
            &[format!("write={}", config.display())],
            &line,
        );
        assert!(o.status.success(), "{backend}: the retry: {o:?}");
        assert_eq!(
            user_git_out(&proj, &["config", "--get", "remote.origin.url"]),
            URL
        );
        host_is_clean(&proj, backend);
    }
}

/// A writer killed between the lock's creation and its rename: the lock does not outlive the
/// call, whether the line dies, its caller (`run`) is killed or (native) its launcher.
#[test]
fn a_lock_left_by_a_killed_writer_is_gone_at_the_calls_end() {
    for backend in backends() {
        let (d, proj) = repo();
        let grant = format!("write={}", proj.join(".git/config").display());
        let lock = proj.join(".git/config.lock");
        // The line makes the lock as git does (O_CREAT|O_EXCL: `set -C`) and is killed.
        let o = run(
            d.path(),
            &proj,
            backend,
            std::slice::from_ref(&grant),
            "set -C; echo '[core]' > .git/config.lock && test -f .git/config.lock && kill -9 $$",
        );
        assert_eq!(o.status.code(), Some(137), "{backend}: {o:?}");
        host_is_clean(&proj, &format!("{backend}, the line killed"));
        assert!(
            user_git(&proj, &["config", "user.name", "after"])
                .status
                .success(),
            "{backend}"
        );

        // The caller (`run`) killed while the lock is there, then (native backend) its
        // launcher. Under bubblewrap a launcher killed itself takes bubblewrap with it
        // (SIGKILL, its death signal), and the kernel kills the init with bubblewrap's
        // namespace before it can remove the lock (a limit the threat model states).
        let killed: &[&str] = if backend == "native" {
            &["the caller", "the launcher"]
        } else {
            &["the caller"]
        };
        for &killed in killed {
            let mut c = command(d.path());
            c.current_dir(&proj)
                .args(["run", "--backend", backend, "--grant", &grant, "--"])
                .arg("set -C; : > .git/config.lock && : > made && sleep 30")
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = c.spawn().unwrap();
            let until = Instant::now() + Duration::from_secs(20);
            while !proj.join("made").exists() {
                assert!(Instant::now() < until, "{backend}: the line never started");
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(lock.exists(), "{backend}: the line made its lock");
            if killed == "the caller" {
                child.kill().unwrap();
            } else {
                let launcher = children(child.id()).into_iter().next().expect("a launcher");
                let _ = Command::new("kill")
                    .args(["-KILL", &launcher.to_string()])
                    .status();
            }
            let until = Instant::now() + Duration::from_secs(3);
            while lock.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            child.wait().unwrap();
            std::fs::remove_file(proj.join("made")).unwrap();
            host_is_clean(&proj, &format!("{backend}, {killed} killed"));
        }
    }
}

/// The pids of the children of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The fields after the name (which may hold blanks): state, ppid, ...
        let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        if after.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
            out.push(p);
        }
    }
    out
}

/// A lock the host's git holds while the call runs is not the call's: it may not write,
/// remove or replace it, and git in the call fails as the user's would.
#[test]
fn the_hosts_own_lock_is_not_the_calls() {
    for backend in backends() {
        let (d, proj) = repo();
        let grant = format!("write={}", proj.join(".git/config").display());
        let lock = proj.join(".git/config.lock");
        std::fs::write(&lock, "the host's\n").unwrap();
        let o = run(
            d.path(),
            &proj,
            backend,
            std::slice::from_ref(&grant),
            "git config user.name X; echo '[core]' > .git/config.lock; rm -f .git/config.lock; \
             mv .git/config.lock .git/config; true",
        );
        assert!(o.status.success(), "{backend}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("File exists"), "{backend}: {err}");
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap(),
            "the host's\n",
            "{backend}"
        );
        assert!(
            user_git(&proj, &["config", "--get", "user.name"])
                .stdout
                .is_empty(),
            "{backend}"
        );
        // Nor may the call plant a lock by a link or a rename onto its name.
        std::fs::remove_file(&lock).unwrap();
        let o = run(
            d.path(),
            &proj,
            backend,
            std::slice::from_ref(&grant),
            "echo '[core]' > x; ln x .git/config.lock; mv x .git/config.lock; \
             ln -s x .git/config.lock; true",
        );
        assert!(o.status.success(), "{backend}: {o:?}");
        assert!(
            std::fs::symlink_metadata(&lock).is_err(),
            "{backend}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A file granted outside the project (`~/.gitconfig`): its directory stays read-only to a
/// call, so the lock-and-rename writer still fails there; the refusal says why and that
/// only the user can run it, and proposes no grant of the lock (which would need it made
/// on the host and would leave it there).
#[test]
fn a_lock_outside_the_project_is_refused_without_a_grant_that_would_leave_it() {
    for backend in backends() {
        let (d, proj) = repo();
        let home = d.path().join("home");
        let global = home.join(".gitconfig");
        std::fs::write(&global, "[core]\n\tpager = less\n").unwrap();
        let o = run(
            d.path(),
            &proj,
            backend,
            &[format!("write={}", global.display())],
            "git config --global user.name X",
        );
        assert!(!o.status.success(), "{backend}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "refused: write {}.lock (refused by the sandbox): {}.lock is the lock file of {}",
                global.display(),
                global.display(),
                global.display()
            )) && err.contains("only you can run the line unsandboxed"),
            "{backend}: {err}"
        );
        assert!(!err.contains("retry with"), "{backend}: {err}");
        assert!(!home.join(".gitconfig.lock").exists(), "{backend}");
        assert_eq!(
            std::fs::read_to_string(&global).unwrap(),
            "[core]\n\tpager = less\n"
        );
    }
}
