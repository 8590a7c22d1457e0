//! The call log: every finished call has its record (`run` in its own process, a refused
//! run, a setup error, the service's `sandbox.launch` read to its end and cancelled), no
//! secret of the line is in it, writers at once never interleave, the files stay bounded,
//! and `efr-sandbox log` reads it, skipping (and saying) what is no record.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::{Server, backends, command, temp_env};
use serde_json::{Value, json};

fn state(dir: &Path) -> PathBuf {
    dir.join("state")
}

fn log_file(dir: &Path) -> PathBuf {
    state(dir).join("efr-sandbox/calls.jsonl")
}

fn efr(dir: &Path, args: &[&str]) -> Output {
    command(dir)
        .env("XDG_STATE_HOME", state(dir))
        .current_dir(dir.join("home"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The records `log --json -n 0` gives.
fn records(dir: &Path) -> Vec<Value> {
    let o = efr(dir, &["log", "--json", "-n", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Waits until the log holds `n` records (the service writes them as its calls end).
fn wait_records(dir: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = records(dir);
        if r.len() >= n {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} records: {r:?}",
            r.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn proj(dir: &Path) -> PathBuf {
    let p = dir.join("home/proj");
    std::fs::create_dir_all(&p).unwrap();
    p
}

#[test]
fn runs_refused_runs_and_setup_errors_are_logged_and_shown() {
    for b in backends() {
        let dir = temp_env();
        let p = proj(dir.path());
        let p = p.to_str().unwrap();
        let run = |line: &str, extra: &[&str]| {
            let mut args = vec!["run", "--backend", b, "--project", p];
            args.extend_from_slice(extra);
            args.extend_from_slice(&["--", line]);
            efr(dir.path(), &args)
        };
        assert!(run("true", &[]).status.success());
        let o = run("touch /etc/efr-log-test", &[]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let o = run("true", &["--shell", "/nonexistent/sh"]);
        assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
        let r = records(dir.path());
        assert_eq!(r.len(), 3, "{b}: {r:?}");
        assert_eq!(r[0]["line"], "true");
        assert_eq!(r[0]["exit_status"], 0);
        assert_eq!(r[0]["projects"], json!([p]));
        assert_eq!(r[1]["line"], "touch /etc/efr-log-test");
        assert_eq!(r[1]["exit_status"], 1);
        assert!(
            r[1]["refused"][0]
                .as_str()
                .unwrap()
                .contains("write /etc/efr-log-test"),
            "{b}: {}",
            r[1]
        );
        assert!(
            r[2]["setup_error"]
                .as_str()
                .is_some_and(|e| e.contains("/nonexistent/sh")),
            "{b}: {}",
            r[2]
        );
        // The table: a row per call, the latest last.
        let o = efr(dir.path(), &["log"]);
        let table = String::from_utf8_lossy(&o.stdout).into_owned();
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 4, "{table}");
        assert!(rows[0].starts_with("ID "), "{table}");
        assert!(
            rows[1].contains(" ok ") && rows[1].ends_with("true"),
            "{table}"
        );
        assert!(rows[2].contains("exit 1"), "{table}");
        assert!(rows[3].contains("not started"), "{table}");
        // One whole, by the start of its id.
        let id = r[1]["id"].as_str().unwrap();
        let o = efr(dir.path(), &["log", &id[..6]]);
        assert!(o.status.success(), "{}", stderr(&o));
        let whole = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            whole.contains("refused       write /etc/efr-log-test"),
            "{whole}"
        );
        assert!(whole.contains(&format!("project       {p}")), "{whole}");
        let o = efr(dir.path(), &["log", "--json", id]);
        let one: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(one, r[1]);
        let o = efr(dir.path(), &["log", "nosuchid"]);
        assert_eq!(o.status.code(), Some(1));
        // The log is the user's alone.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(log_file(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn no_secret_of_the_line_reaches_the_log() {
    let dir = temp_env();
    let p = proj(dir.path());
    let ghp = format!("ghp_{}", "Zq9xW3rT7y".repeat(4).get(..36).unwrap());
    let line = format!(
        "echo {ghp} >/dev/null; GITHUB_TOKEN=plainsecret1 true; DB_PASSWORD='pass word' true"
    );
    let o = efr(
        dir.path(),
        &["run", "--project", p.to_str().unwrap(), "--", &line],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(log_file(dir.path())).unwrap();
    for secret in [ghp.as_str(), "plainsecret1", "pass word"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let r = records(dir.path());
    assert_eq!(
        r[0]["line"],
        "echo [redacted] >/dev/null; GITHUB_TOKEN=[redacted] true; DB_PASSWORD='[redacted]' true"
    );
    // A contained call reads nothing of the log (the state dir is the control plane's).
    let file = log_file(dir.path());
    let o = efr(
        dir.path(),
        &[
            "run",
            "--project",
            p.to_str().unwrap(),
            "--",
            &format!("cat {}; echo END", file.display()),
        ],
    );
    let seen = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(seen.ends_with("END\n"), "{seen}: {}", stderr(&o));
    assert!(!seen.contains("\"line\""), "{seen}");
}

/// A service whose state dir is `<dir>/state`.
fn server() -> Server {
    let dir = temp_env();
    proj(dir.path());
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = command(dir.path());
    cmd.env("XDG_STATE_HOME", state(dir.path()))
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--test-methods");
    Server::spawn(cmd, dir, socket)
}

#[test]
fn the_services_calls_read_to_their_end_and_cancelled_are_logged() {
    let s = server();
    let dir = s.dir.path().to_path_buf();
    let p = dir.join("home/proj");
    for (i, b) in backends().into_iter().enumerate() {
        let mut c = s.client();
        let asked = |line: &str| json!({"line": line, "projects": [p], "cwd": p, "backend": b});
        let id = 10 + i as u64 * 2;
        c.request(id, "sandbox.launch", asked("echo hi"));
        let (_, end) = common::collect(&mut c, id);
        assert_eq!(end["end"]["exit_status"], 0, "{end}");
        c.request(id + 1, "sandbox.launch", asked("sleep 30"));
        loop {
            let f = c.recv();
            if f["item"]["kind"] == "started" {
                break;
            }
            assert!(f.get("item").is_some(), "{f}");
        }
        c.send(&json!({"cancel": id + 1}));
        let r = wait_records(&dir, 2 * (i + 1));
        let (done, stopped) = (&r[2 * i], &r[2 * i + 1]);
        assert_eq!(done["line"], "echo hi", "{b}: {r:?}");
        assert!(done["call_id"].is_string(), "{b}: {done}");
        assert_eq!(stopped["line"], "sleep 30", "{b}: {r:?}");
        assert_eq!(stopped["stopped"], true, "{b}: {stopped}");
        let table = String::from_utf8_lossy(&efr(&dir, &["log"]).stdout).into_owned();
        assert!(table.lines().last().unwrap().contains("stopped"), "{table}");
    }
}

#[test]
fn the_service_and_runs_writing_at_once_never_interleave() {
    let s = server();
    let dir = s.dir.path().to_path_buf();
    let p = dir.join("home/proj");
    let runs: Vec<_> = (0..6)
        .map(|i| {
            command(&dir)
                .env("XDG_STATE_HOME", state(&dir))
                // Not the test's own directory: under /tmp (a clone there), the call has
                // its own /tmp and would not find it.
                .current_dir(&p)
                .args(["run", "--project", p.to_str().unwrap(), "--"])
                .arg(format!("echo run-{i} {}", "y".repeat(3000)))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut c = s.client();
    for i in 0..6u64 {
        c.request(
            100 + i,
            "sandbox.launch",
            json!({"line": format!("echo rpc-{i} {}", "z".repeat(3000)), "projects": [p], "cwd": p}),
        );
    }
    let mut ended = 0;
    while ended < 6 {
        let f = c.recv();
        if f.get("item").is_none() {
            ended += 1;
        }
    }
    for r in runs {
        let o = r.wait_with_output().unwrap();
        assert!(o.status.success(), "{}: {}", o.status, stderr(&o));
    }
    let r = wait_records(&dir, 12);
    let text = std::fs::read_to_string(log_file(&dir)).unwrap();
    assert_eq!(text.lines().count(), 12, "{text}");
    let mut lines: Vec<String> = r
        .iter()
        .map(|x| {
            x["line"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    lines.sort();
    let mut want: Vec<String> = (0..6)
        .flat_map(|i| [format!("rpc-{i}"), format!("run-{i}")])
        .collect();
    want.sort();
    // `echo` first: the second word is the tag.
    let tags: Vec<String> = r
        .iter()
        .map(|x| {
            x["line"]
                .as_str()
                .unwrap()
                .split(' ')
                .nth(1)
                .unwrap()
                .to_string()
        })
        .collect();
    let mut tags = tags;
    tags.sort();
    assert_eq!(tags, want);
    assert!(lines.iter().all(|l| l == "echo"));
}

#[test]
fn lines_that_are_no_record_are_said_and_skipped() {
    let dir = temp_env();
    let p = proj(dir.path());
    let o = efr(
        dir.path(),
        &["run", "--project", p.to_str().unwrap(), "--", "true"],
    );
    assert!(o.status.success());
    let file = log_file(dir.path());
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        format!(
            "{{\"id\": 3}}\n\u{1}garbage\n{good}{}",
            &good[..good.len() / 2]
        ),
    )
    .unwrap();
    let o = efr(dir.path(), &["log"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    for n in [1, 2, 4] {
        assert!(
            err.contains(&format!("calls.jsonl:{n}: not a call record, skipped")),
            "{n}: {err}"
        );
    }
    assert!(err.contains("cut short"), "{err}");
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(table.lines().count(), 2, "{table}");
}

#[test]
fn the_log_rotates_to_two_bounded_files() {
    let dir = temp_env();
    let p = proj(dir.path());
    let run = || {
        let o = efr(
            dir.path(),
            &["run", "--project", p.to_str().unwrap(), "--", "true"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    };
    run();
    let file = log_file(dir.path());
    let one = std::fs::read_to_string(&file).unwrap();
    // Just under the bound (4 MiB): the next record takes it past, and it is rotated.
    let bound = 4usize << 20;
    let copies = (bound - one.len()) / one.len();
    std::fs::write(&file, one.repeat(copies + 1)).unwrap();
    let before = std::fs::metadata(&file).unwrap().len();
    assert!(before <= bound as u64);
    run();
    let old = file.with_file_name("calls.jsonl.1");
    assert_eq!(std::fs::metadata(&old).unwrap().len(), before);
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1);
    // Rotated again: still two files, the older dropped.
    std::fs::write(&file, one.repeat(copies + 1)).unwrap();
    run();
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("calls"))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(records(dir.path()).len(), copies + 2);
}

#[test]
fn efrds_planned_calls_are_logged_at_their_finish() {
    let s = server();
    let dir = s.dir.path().to_path_buf();
    let p = dir.join("home/proj");
    let mut c = s.client();
    let r = c.call(
        1,
        "sandbox.plan",
        json!({"line": "echo planned; touch /etc/efr-planned", "projects": [p], "cwd": p, "status_fd": 3}),
    );
    let end = &r["end"];
    let argv: Vec<String> = serde_json::from_value(end["argv"].clone()).unwrap();
    let status = dir.join("status.txt");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"f="$1"; shift; exec "$@" 3>"$f""#)
        .arg("sh")
        .arg(&status)
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "planned\n");
    // Planned, not finished: no record yet.
    assert!(records(&dir).is_empty());
    let lines = std::fs::read_to_string(&status).unwrap();
    let r = c.call(
        2,
        "sandbox.finish",
        json!({"token": end["token"], "status": lines}),
    );
    assert_eq!(r["end"]["exit_status"], 1, "{r}");
    let r = records(&dir);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["line"], "echo planned; touch /etc/efr-planned");
    assert_eq!(r[0]["exit_status"], 1);
    assert!(
        r[0]["refused"][0]
            .as_str()
            .unwrap()
            .contains("/etc/efr-planned"),
        "{}",
        r[0]
    );
}

/// A service whose launcher cannot be started (its executable gone, as after an upgrade
/// that moved it): the call is a setup error, and its record is in the log all the same.
#[test]
fn a_call_whose_launcher_cannot_start_is_logged() {
    let dir = temp_env();
    let p = proj(dir.path());
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = command(dir.path());
    cmd.env("XDG_STATE_HOME", state(dir.path()))
        .env("EFR_LAUNCH", dir.path().join("no-such-efr-launch"))
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--test-methods");
    let s = Server::spawn(cmd, dir, socket);
    let dir = s.dir.path().to_path_buf();
    let mut c = s.client();
    c.request(
        1,
        "sandbox.launch",
        json!({"line": "echo never", "projects": [p], "cwd": p}),
    );
    let (_, end) = common::collect(&mut c, 1);
    let err = end["end"]["sandbox_summary"]["setup_error"]
        .as_str()
        .unwrap_or_default();
    assert!(err.contains("cannot start efr-launch"), "{end}");
    let r = wait_records(&dir, 1);
    assert_eq!(r[0]["line"], "echo never", "{r:?}");
    assert!(
        r[0].to_string().contains("cannot start efr-launch"),
        "the record names the setup error: {}",
        r[0]
    );
}
