//! The jobs commands as a user types them (issue 16 item 7): `run --background` starts a
//! service when none runs and prints the job's id; `jobs`, `jobs logs`, `jobs stop` talk
//! to it; the service stays while a job runs and ends once idle after it.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::command;

/// A temp dir with `home/`, `config/` and `proj/`, outside `/tmp` (every call has its own).
fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    for d in ["home", "config", "proj"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    dir
}

/// `efr-sandbox ARGS` of the user of `dir`, with its service at `<dir>/run/sandbox.sock`
/// (started when none runs, ending after 2 idle seconds).
fn cli(dir: &Path, args: &[&str]) -> Command {
    let mut c = command(dir);
    c.env_remove("EFR_SANDBOX_NO_SERVICE")
        .env("EFR_SANDBOX_IDLE_EXIT", "2")
        .env("EFR_SANDBOX_SOCKET", dir.join("run/sandbox.sock"))
        .current_dir(dir.join("proj"))
        .args(args);
    c
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn background_jobs_from_the_command_line() {
    let dir = temp_env();
    let d = dir.path();
    let marker = format!("7{}.5", std::process::id() % 1000);
    let proj = d.join("proj");
    let line = format!("echo hello from the job; sleep {marker}");
    // No service runs: one is started, and the job's id printed.
    let o = cli(
        d,
        &[
            "run",
            "--project",
            proj.to_str().unwrap(),
            "--background",
            "--max-minutes",
            "1",
            "--",
            &line,
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o), "j1\n");
    assert!(d.join("run/sandbox.sock").exists());
    // Past the idle time, the service stays: a job runs.
    std::thread::sleep(Duration::from_secs(3));
    let o = cli(d, &["jobs"]).output().unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let listed = out(&o);
    assert!(listed.contains(" j1 "), "{listed}");
    assert!(listed.contains("running"), "{listed}");
    assert!(listed.contains("echo hello from the job"), "{listed}");
    let o = cli(d, &["jobs", "--json"]).output().unwrap();
    let jobs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(jobs[0]["id"], "j1");
    assert_eq!(jobs[0]["state"], "running");
    assert!(jobs[0]["conversation_id"].is_null());
    let o = cli(d, &["jobs", "logs", "j1"]).output().unwrap();
    assert_eq!(out(&o), "hello from the job\n", "{}", err(&o));
    // `logs --follow` goes on until the job ends: stopped from another command.
    let follow = cli(d, &["jobs", "logs", "--follow", "j1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let o = cli(d, &["jobs", "stop", "j1"]).output().unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("stopped"), "{}", out(&o));
    let f = follow.wait_with_output().unwrap();
    assert!(f.status.success());
    assert_eq!(out(&f), "hello from the job\n");
    let pgrep = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(!pgrep.status.success(), "the job's tree is gone");
    // Bad input: a clear error and status 1.
    let o = cli(d, &["jobs", "stop", "x1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("not a job id"), "{}", err(&o));
    let o = cli(d, &["jobs", "stop", "j1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("ended already"), "{}", err(&o));
    let o = cli(d, &["run", "--max-minutes", "1", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "--max-minutes needs --background");
    let o = cli(
        d,
        &["run", "--background", "--max-minutes", "0", "--", "true"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("max_minutes"), "{}", err(&o));
    // No job runs: the service ends once idle, and its socket goes.
    let deadline = Instant::now() + Duration::from_secs(15);
    while d.join("run/sandbox.sock").exists() {
        assert!(
            Instant::now() < deadline,
            "the service did not end when idle"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
