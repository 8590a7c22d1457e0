//! `sandbox.launch` (stream, cancel), `sandbox.plan` and `sandbox.finish`, and
//! `efr-sandbox run`, end to end: the real service on a real socket, real contained calls.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Server, code, collect, command, temp_env};
use serde_json::{Value, json};

/// A project with a git dir whose hooks and config stay read-only.
fn project(home: &Path) -> PathBuf {
    let p = home.join("proj");
    std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
    std::fs::write(p.join(".git/config"), "[core]\n").unwrap();
    p
}

fn output(items: &[Value], stream: &str) -> String {
    items
        .iter()
        .filter(|i| i["kind"] == "output" && i["stream"] == stream)
        .map(|i| i["data"].as_str().unwrap_or_default())
        .collect()
}

#[test]
fn launch_streams_started_output_denials_and_the_end() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    c.request(
        1,
        "sandbox.launch",
        json!({
            "line": "echo hello; echo oops >&2; echo x > .git/hooks/pre-commit; \
                     echo x >> .git/config; exit 3",
            "projects": [proj],
            "conversation": "c1",
        }),
    );
    let (items, end) = collect(&mut c, 1);
    assert_eq!(items[0]["kind"], "started", "{items:?}");
    assert!(items[0]["launcher_pid"].as_u64().unwrap() > 0);
    assert_eq!(output(&items, "stdout"), "hello\n");
    assert!(output(&items, "stderr").contains("oops"));
    let hook = proj.join(".git/hooks/pre-commit");
    let config = proj.join(".git/config");
    let exits: Vec<&Value> = items
        .iter()
        .filter(|i| i["kind"] == "exit")
        .map(|i| &i["record"])
        .collect();
    assert_eq!(exits.len(), 2, "{items:?}");
    for (r, path) in exits.iter().zip([&hook, &config]) {
        assert_eq!(r["source"], "denial");
        assert_eq!(r["kind"], "write");
        assert_eq!(r["needs"]["kind"], "contained");
        assert_eq!(
            r["needs"]["grants"][0],
            json!({"kind": "write", "path": path})
        );
        assert!(!r["judgement"]["reasons"][0].as_str().unwrap().is_empty());
    }
    // .git/hooks is a floor: only the user may allow it; .git/config is for review.
    assert_eq!(exits[0]["judgement"]["verdict"], "user_only");
    assert_eq!(exits[0]["judgement"]["by"], "floor");
    assert_eq!(exits[1]["judgement"]["verdict"], "review");
    assert_eq!(exits[1]["judgement"]["by"], "policy");
    let end = &end["end"];
    assert_eq!(end["exit_status"], 3, "{end}");
    assert_eq!(end["code"], 3);
    assert_eq!(
        end["sandbox_summary"]["denied_writes"],
        json!([hook, config])
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[core]\n");
    assert!(!hook.exists());
}

#[test]
fn tmp_lasts_for_a_conversation() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let p = |line: &str, conv: &str| json!({"line": line, "cwd": "/", "conversation": conv});
    c.request(
        1,
        "sandbox.launch",
        p("echo kept > /tmp/f; echo $SCRATCH", "conv-a"),
    );
    let (items, end) = collect(&mut c, 1);
    assert_eq!(end["end"]["exit_status"], 0, "{end} {items:?}");
    let scratch = output(&items, "stdout");
    assert!(scratch.contains("scratch/conv-a"), "{scratch}");
    c.request(2, "sandbox.launch", p("cat /tmp/f", "conv-a"));
    let (items, _) = collect(&mut c, 2);
    assert_eq!(output(&items, "stdout"), "kept\n");
    c.request(3, "sandbox.launch", p("cat /tmp/f", "conv-b"));
    let (_, end) = collect(&mut c, 3);
    assert_eq!(end["end"]["exit_status"], 1);
    c.request(4, "sandbox.launch", p("true", "../x"));
    assert_eq!(code(&c.recv()), "invalid");
}

#[test]
fn setup_errors_and_refused_grants() {
    let s = Server::start(&[]);
    let mut c = s.client();
    c.request(
        1,
        "sandbox.launch",
        json!({"line": "echo ran", "projects": ["/nonexistent-efr"], "cwd": "/"}),
    );
    let (items, end) = collect(&mut c, 1);
    assert!(output(&items, "stdout").is_empty());
    assert_eq!(end["end"]["exit_status"], 125);
    assert!(
        end["end"]["sandbox_summary"]["setup_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent-efr")
    );
    let r = c.call(
        2,
        "sandbox.launch",
        json!({"line": "true", "grants": [{"kind": "host", "host": "10.0.0.1"}]}),
    );
    assert_eq!(code(&r), "invalid");
    let r = c.call(
        3,
        "sandbox.launch",
        json!({"line": "true", "cwd": "/", "grants": [{"kind": "frobnicate"}]}),
    );
    assert!(
        r["end"]["sandbox_summary"]["setup_error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown"),
        "{r}"
    );
}

/// Pids of processes whose command line is exactly `argv`.
fn pids_of(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok() == Some(want.clone()))
        .collect()
}

fn cancel_ends_the_tree(unsandboxed: bool) {
    let s = Server::start(&[]);
    let mut c = s.client();
    // A unique duration, to find this call's sleep among the machine's processes.
    let dur = format!("1000.{}{}", std::process::id(), u8::from(unsandboxed));
    c.request(
        7,
        "sandbox.launch",
        json!({"line": format!("sleep {dur}; "), "cwd": "/", "unsandboxed": unsandboxed}),
    );
    let f = c.recv();
    assert_eq!(f["item"]["kind"], "started", "{f}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids_of(&["sleep", &dur]).is_empty() {
        assert!(Instant::now() < deadline, "the sleep never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    c.send(&json!({"cancel": 7}));
    let f = c.recv();
    assert_eq!(code(&f), "cancelled", "{f}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pids_of(&["sleep", &dur]).is_empty() {
        assert!(Instant::now() < deadline, "the sleep survived the cancel");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The connection goes on.
    let r = c.call(8, "sandbox.launch", json!({"line": "true", "cwd": "/"}));
    assert_eq!(r["item"]["kind"], "started", "{r}");
}

#[test]
fn cancel_ends_a_contained_tree() {
    cancel_ends_the_tree(false);
}

#[test]
fn cancel_ends_an_unsandboxed_tree() {
    cancel_ends_the_tree(true);
}

#[test]
fn plan_then_finish() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    let r = c.call(
        1,
        "sandbox.plan",
        json!({"line": "echo planned; echo x >> .git/config", "projects": [proj], "status_fd": 3}),
    );
    let end = &r["end"];
    let plan_file = PathBuf::from(end["plan_file"].as_str().unwrap());
    let meta = std::fs::metadata(&plan_file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dir = std::fs::metadata(plan_file.parent().unwrap()).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    assert!(plan_file.starts_with(s.dir.path().join("run")));
    let argv: Vec<String> = serde_json::from_value(end["argv"].clone()).unwrap();
    assert!(
        argv.iter().any(|a| a == plan_file.to_str().unwrap()),
        "{argv:?}"
    );
    // Run it as efrd would, status lines on fd 3.
    let status = s.dir.path().join("status.txt");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"f="$1"; shift; exec "$@" 3>"$f""#)
        .arg("sh")
        .arg(&status)
        .args(&argv)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "planned\n");
    // bash (the line's shell) ends a line whose redirection failed with 1.
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let lines = std::fs::read_to_string(&status).unwrap();
    let r = c.call(
        2,
        "sandbox.finish",
        json!({"token": end["token"], "status": lines}),
    );
    let fin = &r["end"];
    assert_eq!(fin["exit_status"], 1, "{r}");
    let config = proj.join(".git/config");
    assert_eq!(fin["sandbox_summary"]["denied_writes"], json!([config]));
    assert_eq!(fin["exits"][0]["source"], "denial");
    assert_eq!(fin["exits"][0]["kind"], "write");
    assert!(!plan_file.exists(), "finish leaves the plan file");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[core]\n");
    let r = c.call(
        3,
        "sandbox.finish",
        json!({"token": end["token"], "status": ""}),
    );
    assert_eq!(code(&r), "not_found");
}

fn run_cli(dir: &Path, args: &[&str]) -> std::process::Output {
    command(dir).arg("run").args(args).output().unwrap()
}

#[test]
fn cli_run_exit_codes_signals_summary_and_bad_grants() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = project(&home);
    let p = proj.to_str().unwrap();
    let o = run_cli(
        d.path(),
        &["--project", p, "--cwd", p, "--", "echo hi; exit 7"],
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hi\n");
    assert_eq!(o.status.code(), Some(7), "{o:?}");
    let o = run_cli(d.path(), &["--cwd", "/", "--", "kill -USR1 $$"]);
    assert_eq!(o.status.code(), Some(128 + libc::SIGUSR1), "{o:?}");
    let summary = d.path().join("summary.json");
    let o = run_cli(
        d.path(),
        &[
            "--project",
            p,
            "--cwd",
            p,
            "--summary",
            summary.to_str().unwrap(),
            "--",
            "touch .git/hooks/post-checkout",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(
        v["denied_writes"],
        json!([proj.join(".git/hooks/post-checkout")])
    );
    for bad in [
        "bogus=1",
        "write",
        "bus=tram",
        "host=1.2.3.4",
        "host=a.test:x",
    ] {
        let o = run_cli(d.path(), &["--grant", bad, "--", "echo ran"]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {o:?}");
        assert!(o.stdout.is_empty());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("--grant"), "{e}");
    }
    let o = run_cli(
        d.path(),
        &[
            "--project",
            "/nonexistent-efr",
            "--cwd",
            "/",
            "--",
            "echo ran",
        ],
    );
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    assert!(o.stdout.is_empty());
    let o = run_cli(
        d.path(),
        &[
            "--grant",
            "write=/nonexistent-efr/x",
            "--cwd",
            "/",
            "--",
            "echo ran",
        ],
    );
    // A bad command line (the path is to be made first), not a sandbox that failed.
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not exist; create it first"),
        "{o:?}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn cli_run_passes_the_terminal() {
    // `script` gives the call a real pty; the line's stdin and stdout must be it. (Its
    // name: the contained view has its own devpts, so `tty` cannot name the host's pty.)
    if !Path::new("/usr/bin/script").exists() {
        return;
    }
    let d = temp_env();
    let cmd = format!("{BIN} run --cwd / -- 'test -t 0 && test -t 1 && echo on-a-tty'");
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("HOME", d.path().join("home"))
        .env("XDG_CONFIG_HOME", d.path().join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("on-a-tty"), "{out} {o:?}");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

#[test]
fn the_lines_shell_is_bash_unless_asked_and_shell_args_run_as_given() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    let line = "[[ -n x ]] && echo {a,b}";
    for (n, b) in common::backends().into_iter().enumerate() {
        let id = 10 * n as u64;
        let mut run = |id: u64, extra: Value| {
            let mut p = json!({"line": line, "projects": [proj], "backend": b});
            p.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            c.request(id, "sandbox.launch", p);
            let (items, end) = collect(&mut c, id);
            (output(&items, "stdout"), end["end"]["exit_status"].clone())
        };
        assert_eq!(run(id + 1, json!({})), ("a b\n".into(), json!(0)), "{b}");
        let (out, st) = run(id + 2, json!({"shell": "sh"}));
        assert_ne!(st, json!(0), "{b}: dash ran bash's syntax: {out}");
        // The shell's own command line: `$0` and the arguments as given.
        let (out, st) = run(
            id + 3,
            json!({"shell_args": ["-e", "-c", "printf '<%s>' \"$0\" \"$@\"; false; echo no", "nm", "a b"]}),
        );
        assert_eq!((out.as_str(), st), ("<nm><a b>", json!(1)), "{b}");
        c.request(
            id + 4,
            "sandbox.launch",
            json!({"line": "true", "shell": "zsh"}),
        );
        let (_, end) = collect(&mut c, id + 4);
        assert_eq!(code(&end), "invalid", "{b}: {end}");
    }
}
