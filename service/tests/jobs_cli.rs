//! The jobs commands as a user types them: `run --background` starts a
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

/// A port free on the host's loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `jobs --json` of the user of `dir`, until `done` holds for the job `id` (10 s at most).
fn json_until(
    dir: &Path,
    id: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = cli(dir, &["jobs", "--json"]).output().unwrap();
        assert!(o.status.success(), "{}", err(&o));
        let jobs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap_or_default();
        if let Some(j) = jobs.iter().find(|j| j["id"] == id)
            && done(j)
        {
            return j.clone();
        }
        assert!(Instant::now() < deadline, "{id}: {jobs:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The line of `jobs`' table of the job `id`.
fn table_row(dir: &Path, id: &str) -> String {
    let o = cli(dir, &["jobs"]).output().unwrap();
    assert!(o.status.success(), "{}", err(&o));
    out(&o)
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(id))
        .unwrap_or_else(|| panic!("no {id} in {}", out(&o)))
        .to_string()
}

/// `run --background` of `line` on `backend`: the job's id.
fn background(dir: &Path, backend: &str, line: &str) -> String {
    let proj = dir.join("proj");
    let o = cli(
        dir,
        &[
            "run",
            "--project",
            proj.to_str().unwrap(),
            "--backend",
            backend,
            "--background",
            "--max-minutes",
            "2",
            "--",
            line,
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    out(&o).trim().to_string()
}

/// Each way a job's port is not forwarded reaches `jobs` and `jobs --json` (in use by
/// another job, the deny list, a privileged port, past the job's count of forwards), and
/// jobs that ended with their service, stopped or killed, are listed by the next one as
/// ended with it.
#[test]
fn jobs_say_why_a_port_is_not_forwarded_and_list_the_jobs_their_service_ended() {
    for backend in common::backends() {
        let dir = temp_env();
        let d = dir.path();
        let (held, denied, extra, more) = (free_port(), free_port(), free_port(), free_port());
        std::fs::create_dir_all(d.join("config/efr")).unwrap();
        std::fs::write(
            d.join("config/efr/config.toml"),
            format!(
                "[jobs]\nforward_max = 1\nforward_deny = [{{ port = \"{denied}\", reason = \"the test denies it\" }}]\n"
            ),
        )
        .unwrap();
        let serve = |ports: &[u16]| {
            ports
                .iter()
                .map(|p| format!("python3 -m http.server {p} --bind 127.0.0.1 & "))
                .collect::<String>()
                + "wait"
        };
        // j1 holds `held`; j2 listens on it too, on the denied port, on 22, and on one
        // more than its one forward.
        let j1 = background(d, backend, &serve(&[held]));
        json_until(d, &j1, |j| j["forwards"][0]["port"] == held);
        // A host process holds one more port.
        let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host_port = host.local_addr().unwrap().port();
        let j2 = background(
            d,
            backend,
            &serve(&[held, denied, 22, extra, more, host_port]),
        );
        let j = json_until(d, &j2, |j| {
            j["unforwarded"].as_array().is_some_and(|u| u.len() == 5)
        });
        let of = |port: u16| {
            j["unforwarded"]
                .as_array()
                .unwrap()
                .iter()
                .find(|u| u["port"] == port)
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(of(held)["outcome"], "in_use", "{backend}: {j}");
        assert_eq!(of(held)["by_job"], j1.as_str(), "{j}");
        assert_eq!(of(denied)["outcome"], "refused", "{j}");
        assert_eq!(of(denied)["reason"], "the test denies it", "{j}");
        assert_eq!(of(host_port)["outcome"], "in_use", "{j}");
        assert!(of(host_port)["by_job"].is_null(), "{j}");
        assert_eq!(of(22)["outcome"], "refused", "{j}");
        assert!(
            of(22)["reason"]
                .as_str()
                .unwrap_or("")
                .contains("privileged"),
            "{j}"
        );
        // One forward: of `extra` and `more`, one is past the limit.
        let limited: Vec<_> = [extra, more]
            .into_iter()
            .filter(|p| of(*p)["outcome"] == "limit")
            .collect();
        assert_eq!(limited.len(), 1, "{j}");
        let row = table_row(d, &j2);
        for want in [
            format!("{held} in use by {j1}"),
            format!("{host_port} in use (a host process listens on 127.0.0.1:{host_port})"),
            format!("{denied} refused"),
            "22 refused".to_string(),
            format!("{} past the limit", limited[0]),
        ] {
            assert!(row.contains(&want), "{backend}: {want:?} in {row}");
        }

        drop(host);
        // The service is stopped (SIGTERM): the next one lists both jobs as ended with it.
        let pid = service_pid(d);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        wait_gone(pid);
        for id in [&j1, &j2] {
            let j = json_until(d, id, |j| j["state"] != "running");
            assert_eq!(j["state"], "stopped", "{j}");
            assert_eq!(j["stopped_by"], "daemon_stop", "{j}");
            let row = table_row(d, id);
            assert!(row.contains("stopped (service stopped)"), "{row}");
        }
        // A job of the next service, which is killed (SIGKILL): the one after lists it
        // ended with its service too, with the jobs ended before.
        let j3 = background(d, backend, "sleep 77");
        assert_eq!(j3, "j3");
        let pid = service_pid(d);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        wait_gone(pid);
        let j = json_until(d, &j3, |j| j["state"] != "running");
        assert_eq!(j["stopped_by"], "daemon_restart", "{j}");
        assert!(table_row(d, &j3).contains("stopped (service stopped)"));
        assert!(table_row(d, &j1).contains("stopped (service stopped)"));
        let o = cli(d, &["jobs"]).output().unwrap();
        assert!(!out(&o).contains("no jobs"), "{}", out(&o));
    }
}

/// The pid of the service listening on `<dir>/run/sandbox.sock` (its peer credentials).
fn service_pid(dir: &Path) -> nix::unistd::Pid {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let s = std::os::unix::net::UnixStream::connect(dir.join("run/sandbox.sock")).unwrap();
    nix::unistd::Pid::from_raw(getsockopt(&s, PeerCredentials).unwrap().pid())
}

/// Waits (10 s at most) until the process `pid` is gone.
fn wait_gone(pid: nix::unistd::Pid) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while nix::sys::signal::kill(pid, None).is_ok() {
        assert!(Instant::now() < deadline, "{pid} still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
}
