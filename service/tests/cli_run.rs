//! `efr-sandbox run`'s defaults, the real binary running real calls on
//! each backend: the project without `--project`, `--conversation`, `--json`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{backends, command};
use efr_sandbox_wire::{ExitKind, ExitSource, Finish};

/// A temp dir with `home/` and `config/`, outside `/tmp` (which every call has its own
/// of: a home or a runtime dir under the host's `/tmp` would not be there inside).
fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir(dir.path().join("home")).unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    dir
}

/// `efr-sandbox run ARGS` in `cwd`, with the test's home and config and no runtime dir
/// unless `runtime` names one.
fn run(dir: &Path, cwd: &Path, runtime: Option<&Path>, args: &[&str]) -> Output {
    let mut c = command(dir);
    c.current_dir(cwd).arg("run").args(args);
    if let Some(r) = runtime {
        c.env("XDG_RUNTIME_DIR", r);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository as git makes one (HEAD, objects, refs, hooks), without running git.
fn repo(at: &Path) -> PathBuf {
    for d in ["objects", "refs/heads", "hooks"] {
        std::fs::create_dir_all(at.join(".git").join(d)).unwrap();
    }
    std::fs::write(at.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(at.join(".git/config"), "[core]\n").unwrap();
    at.to_path_buf()
}

#[test]
fn without_project_a_call_writes_its_git_top_level_and_says_so() {
    let d = temp_env();
    let top = repo(&d.path().join("repo"));
    let sub = top.join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    for b in backends() {
        let o = run(
            d.path(),
            &sub,
            None,
            &[
                "--backend",
                b,
                "--",
                &format!("touch ../../top-{b} here-{b}"),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(top.join(format!("top-{b}")).exists(), "{b}: {o:?}");
        assert!(sub.join(format!("here-{b}")).exists(), "{b}: {o:?}");
        let hint = format!(
            "efr-sandbox: project: {} (the git top level of the working directory)\n",
            top.display()
        );
        assert!(stderr(&o).starts_with(&hint), "{b}: {}", stderr(&o));
        // The repository's floors hold in a project taken by default too.
        let o = run(
            d.path(),
            &sub,
            None,
            &["--backend", b, "--", "touch ../../.git/hooks/pre-commit"],
        );
        assert_eq!(o.status.code(), Some(1), "{b}: {o:?}");
        assert!(!top.join(".git/hooks/pre-commit").exists());
        // --project given: no hint, and only that project is writable.
        let other = d.path().join(format!("other-{b}"));
        std::fs::create_dir_all(&other).unwrap();
        let o = run(
            d.path(),
            &sub,
            None,
            &[
                "--backend",
                b,
                "--project",
                other.to_str().unwrap(),
                "--",
                &format!("touch {}/x; touch ../../given-{b}", other.display()),
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{b}: {o:?}");
        assert!(other.join("x").exists());
        assert!(!top.join(format!("given-{b}")).exists());
        assert!(
            !stderr(&o).contains("efr-sandbox: project:"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn without_project_outside_git_the_working_directory_and_never_the_home() {
    let d = temp_env();
    let plain = d.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let home = d.path().join("home");
    for b in backends() {
        let o = run(
            d.path(),
            &plain,
            None,
            &["--backend", b, "--", &format!("touch f-{b}")],
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(plain.join(format!("f-{b}")).exists());
        assert!(
            stderr(&o).starts_with(&format!(
                "efr-sandbox: project: {} (the working directory, not in a git repository)\n",
                plain.display()
            )),
            "{b}: {}",
            stderr(&o)
        );
        // In the home: nothing is taken, and the hint says how to make one.
        let o = run(
            d.path(),
            &home,
            None,
            &["--backend", b, "--", &format!("touch h-{b}")],
        );
        assert_eq!(o.status.code(), Some(1), "{b}: {o:?}");
        assert!(!home.join(format!("h-{b}")).exists());
        assert!(
            stderr(&o).contains("efr-sandbox: project: none (") && stderr(&o).contains("--project"),
            "{b}: {}",
            stderr(&o)
        );
        // A dotfiles repository in the home does not make the home writable: the working
        // directory is taken instead.
        repo(&home);
        let work = home.join(format!("work-{b}"));
        std::fs::create_dir_all(&work).unwrap();
        let o = run(
            d.path(),
            &work,
            None,
            &["--backend", b, "--", "touch w ../dot"],
        );
        assert_eq!(o.status.code(), Some(1), "{b}: {o:?}");
        assert!(work.join("w").exists());
        assert!(!home.join("dot").exists());
        assert!(
            stderr(&o).starts_with(&format!("efr-sandbox: project: {} (", work.display())),
            "{b}: {}",
            stderr(&o)
        );
        std::fs::remove_dir_all(home.join(".git")).unwrap();
    }
}

#[test]
fn a_conversation_keeps_tmp_and_scratch_between_calls() {
    let d = temp_env();
    let rt = d.path().join("run");
    std::fs::create_dir(&rt).unwrap();
    for b in backends() {
        let (c1, c2) = (format!("c1-{b}"), format!("c2-{b}"));
        let args = |conv: &str, line: &str| -> Vec<String> {
            [
                "--backend",
                b,
                "--cwd",
                "/",
                "--conversation",
                conv,
                "--",
                line,
            ]
            .map(String::from)
            .to_vec()
        };
        let go = |a: Vec<String>| {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            run(d.path(), d.path(), Some(&rt), &a)
        };
        let o = go(args(
            &c1,
            "echo kept > /tmp/f; echo s > \"$SCRATCH/s\"; echo \"$SCRATCH\"",
        ));
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(
            stdout(&o),
            format!("{}\n", rt.join("efr/scratch").join(&c1).display())
        );
        let o = go(args(&c1, "cat /tmp/f \"$SCRATCH/s\""));
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(stdout(&o), "kept\ns\n", "{b}");
        let o = go(args(&c2, "cat /tmp/f"));
        assert_eq!(o.status.code(), Some(1), "{b}: {o:?}");
        assert!(stdout(&o).is_empty(), "{b}: {o:?}");
        // Another conversation's dirs are not even visible (the runtime dir is masked).
        let o = go(args(&c2, &format!("cat {}/efr/tmp/{c1}/f", rt.display())));
        assert_ne!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(stdout(&o).is_empty(), "{b}: {o:?}");
        // Without --conversation, /tmp is new.
        let o = run(
            d.path(),
            d.path(),
            Some(&rt),
            &["--backend", b, "--cwd", "/", "--", "cat /tmp/f"],
        );
        assert_eq!(o.status.code(), Some(1), "{b}: {o:?}");
    }
}

#[test]
fn a_bad_conversation_is_a_usage_error_and_nothing_runs() {
    let d = temp_env();
    let rt = d.path().join("run");
    std::fs::create_dir(&rt).unwrap();
    let marker = d.path().join("ran");
    let line = format!("touch {}", marker.display());
    let long = "a".repeat(129);
    for bad in ["../x", "a/b", ".", "..", "", "a b", long.as_str()] {
        let o = run(
            d.path(),
            d.path(),
            Some(&rt),
            &["--cwd", "/", "--conversation", bad, "--", &line],
        );
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {o:?}");
        assert!(o.stdout.is_empty());
        assert!(stderr(&o).contains("--conversation"), "{}", stderr(&o));
        assert!(!marker.exists(), "{bad:?}");
    }
    assert!(!rt.join("efr/tmp/..").join("x").exists());
    // 128 characters are fine; without a runtime dir a conversation has nowhere to live.
    let ok = "b".repeat(128);
    let o = run(
        d.path(),
        d.path(),
        Some(&rt),
        &["--cwd", "/", "--conversation", &ok, "--", "true"],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let o = run(
        d.path(),
        d.path(),
        None,
        &["--cwd", "/", "--conversation", "c", "--", &line],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains("XDG_RUNTIME_DIR"), "{}", stderr(&o));
    assert!(!marker.exists());
}

/// The finish `run --json` printed: the last line of stderr, or FILE.
fn finish_of(text: &str) -> Finish {
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not a finish ({e}): {text}"))
}

#[test]
fn json_prints_the_finish_with_the_refused_writes() {
    let d = temp_env();
    let top = repo(&d.path().join("repo"));
    let hook = top.join(".git/hooks/pre-commit");
    for b in backends() {
        let line = "echo out; echo err >&2; touch .git/hooks/pre-commit; exit 4";
        let o = run(
            d.path(),
            &top,
            None,
            &["--backend", b, "--json", "--", line],
        );
        assert_eq!(o.status.code(), Some(4), "{b}: {o:?}");
        // The line's stdout stays the line's.
        assert_eq!(stdout(&o), "out\n", "{b}");
        let e = stderr(&o);
        assert!(e.contains("err\n"), "{e}");
        let f = finish_of(&e);
        assert_eq!(f.exit_status, 4);
        assert_eq!(f.code, Some(4));
        assert_eq!(
            f.sandbox_summary.denied_writes,
            vec![hook.to_string_lossy().into_owned()]
        );
        assert_eq!(f.exits.len(), 1, "{f:?}");
        assert_eq!(f.exits[0].source, ExitSource::Denial);
        assert_eq!(f.exits[0].kind, ExitKind::Write);
        // --json FILE: the same finish in the file, stderr without it.
        let file = d.path().join(format!("finish-{b}.json"));
        let o = run(
            d.path(),
            &top,
            None,
            &["--backend", b, "--json", file.to_str().unwrap(), "--", line],
        );
        assert_eq!(o.status.code(), Some(4), "{b}: {o:?}");
        assert_eq!(stdout(&o), "out\n", "{b}");
        assert!(!stderr(&o).contains("sandbox_summary"), "{}", stderr(&o));
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let g = finish_of(&text);
        assert_eq!(g.sandbox_summary, f.sandbox_summary);
        assert_eq!(g.exits.len(), 1, "{g:?}");
        assert_eq!(g.exits[0].source, ExitSource::Denial);
        assert_eq!(g.exit_status, 4);
        assert!(!hook.exists());
    }
}

/// A runtime dir under the host's `/tmp` (some desktops and containers): its mask has no
/// place in the call's own `/tmp`, and the call runs (it failed to start: the mask's mount
/// point was missing).
#[test]
fn a_runtime_dir_under_tmp_does_not_stop_the_call() {
    let d = temp_env();
    let proj = d.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let rt = tempfile::Builder::new()
        .prefix("efr-test-runtime.")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(rt.path().join("secret-socket"), "x").unwrap();
    for b in backends() {
        let p = proj.to_str().unwrap();
        let line = format!(
            "echo ran; test -e {}/secret-socket && echo visible || echo hidden; \
             echo own > /tmp/own && cat /tmp/own",
            rt.path().display()
        );
        let o = run(
            d.path(),
            &proj,
            Some(rt.path()),
            &["--backend", b, "--project", p, "--", &line],
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {}", stderr(&o));
        assert_eq!(stdout(&o), "ran\nhidden\nown\n", "{b}: {}", stderr(&o));
    }
}

/// A `run` killed by SIGKILL cannot remove its call's socket directory; the next `run`
/// with the same runtime dir removes it (its owner lock is free), and a later one leaves
/// the directory of a call still running beside it.
#[test]
fn a_killed_runs_socket_directory_is_removed_by_the_next_run() {
    let d = temp_env();
    let proj = repo(&d.path().join("proj"));
    // A tmpfs runtime dir, so the calls' directories go there (and not in /dev/shm's
    // shared one, which other tests use).
    let runtime = tempfile::tempdir_in("/dev/shm").unwrap();
    let calls = runtime.path().join("efr/calls");
    let dirs = || -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&calls)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let start = |line: &str| {
        let mut c = command(d.path());
        c.current_dir(&proj)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .args(["run", "--project"])
            .arg(&proj)
            .args(["--", line])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c.spawn().unwrap()
    };
    let wait_for = |n: usize| {
        let t = std::time::Instant::now();
        while dirs().len() < n && t.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        dirs()
    };
    let mut killed = start("sleep 60");
    let left = wait_for(1);
    assert_eq!(left.len(), 1, "{left:?}");
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(left[0].exists(), "SIGKILL leaves it");
    // The next run sweeps it when it makes its own.
    let mut running = start("sleep 60");
    let t = std::time::Instant::now();
    while (dirs().len() != 1 || left[0].exists())
        && t.elapsed() < std::time::Duration::from_secs(20)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let now = dirs();
    assert!(!left[0].exists(), "swept: {now:?}");
    assert_eq!(now.len(), 1, "{now:?}");
    // A third run leaves the running call's directory (its owner holds the lock).
    let o = run(d.path(), &proj, Some(runtime.path()), &["--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(dirs(), now, "the running call's stays");
    running.kill().unwrap();
    running.wait().unwrap();
}
