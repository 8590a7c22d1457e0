//! `efr-sandbox run` handing its call to the running service (`sandbox.run`: the launcher in
//! standby for the CLI, and jobs the service owns): the real binary and a real service. The
//! call gets the CLI's stdio and environment, its status and signals; it ends when the CLI is
//! killed; a service of another home, or none that can run it, leaves the call to the CLI; a
//! service is started when none runs, and ends when idle.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Client, Server, backends, command};
use serde_json::json;

/// A temp dir with `home/`, `config/` and `proj/`, outside `/tmp` (every call has its own).
fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    for d in ["home", "config", "proj"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    dir
}

/// `efr-sandbox run --project <dir>/proj ARGS` of the user of `dir`, in `<dir>/proj`, free
/// to hand its call to a service; one it starts ends after `idle` seconds without a client
/// (so that it does not outlive the test long).
fn run_through(dir: &Path, idle: &str, args: &[&str]) -> Command {
    let mut c = command(dir);
    c.env_remove("EFR_SANDBOX_NO_SERVICE")
        .env("EFR_SANDBOX_IDLE_EXIT", idle)
        .current_dir(dir.join("proj"))
        .arg("run")
        .arg("--project")
        .arg(dir.join("proj"))
        .args(args);
    c
}

/// [`run_through`] the service at `socket` (the CLI's own launcher made unusable, so that a
/// call it ran itself fails).
fn run_cmd(dir: &Path, socket: &Path, args: &[&str]) -> Command {
    let mut c = run_through(dir, "2", args);
    c.env("EFR_SANDBOX_SOCKET", socket)
        .env("EFR_LAUNCH", "/nonexistent/efr-launch");
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn service(dir: tempfile::TempDir) -> Server {
    Server::start_in(dir, &[])
}

/// Whether a process whose command line holds `marker` runs (in any pid namespace).
fn running(marker: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Starts `c` (its stdout piped, its stderr as `stderr` says) and waits until the line
/// prints `ready`.
fn until_ready(c: &mut Command, stderr: Stdio) -> (std::process::Child, impl BufRead) {
    let mut child = c.stdout(Stdio::piped()).stderr(stderr).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut l = String::new();
    out.read_line(&mut l).unwrap();
    assert_eq!(l, "ready\n");
    (child, out)
}

fn kill(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(secs), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_call_gets_this_stdio_environment_and_status_through_the_service() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    for b in backends() {
        let mut c = run_cmd(
            &dir,
            &s.socket,
            &[
                "--backend",
                b,
                "--",
                "cat; echo out-$LANG; echo err >&2; seq 1 200000 | tail -n 1; exit 3",
            ],
        );
        let mut child = c
            .env("LANG", "cli_LANG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"from-stdin\n")
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(3), "{b}: {}", stderr(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "from-stdin\nout-cli_LANG\n200000\n",
            "{b}: {}",
            stderr(&o)
        );
        assert_eq!(stderr(&o), "err\n", "{b}");
    }
}

#[test]
fn refusals_json_and_env_notes_are_as_without_the_service() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    let line = "echo x > /etc/hosts";
    let args = [
        "--env",
        "GH=ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "--json",
        "--",
        line,
    ];
    let via = run_cmd(&dir, &s.socket, &args).output().unwrap();
    let mut here = command(&dir);
    here.current_dir(dir.join("proj"))
        .arg("run")
        .arg("--project")
        .arg(dir.join("proj"))
        .args(args);
    let here = here.output().unwrap();
    assert_eq!(via.status.code(), here.status.code(), "{}", stderr(&via));
    // bash (the line's shell) ends a line whose redirection failed with 1.
    assert_eq!(via.status.code(), Some(1));
    let lines = |o: &Output| -> Vec<String> {
        stderr(o)
            .lines()
            .filter(|l| l.starts_with("efr-sandbox: "))
            .map(str::to_string)
            .collect()
    };
    // Through the service, a refusal a grant opens also names its pending approval.
    const APPROVE: &str = "; or ask the user to run 'efr-sandbox approve ";
    let without_approval: Vec<String> = lines(&via)
        .iter()
        .map(|l| {
            l.split_once(APPROVE)
                .map_or(l.clone(), |(a, _)| a.to_string())
        })
        .collect();
    assert_eq!(without_approval, lines(&here));
    assert!(
        lines(&via).iter().any(|l| {
            l.contains("retry with --grant write=/etc/hosts")
                && l.contains(APPROVE)
                && l.ends_with("' (then retry the same command)")
        }),
        "{}",
        stderr(&via)
    );
    assert!(
        stderr(&via).contains("GH is not passed to the call"),
        "{}",
        stderr(&via)
    );
    let finish = |o: &Output| -> serde_json::Value {
        serde_json::from_str(stderr(o).lines().last().unwrap()).unwrap()
    };
    let (f1, f2) = (finish(&via), finish(&here));
    assert_eq!(f1["exits"], f2["exits"]);
    assert_eq!(f1["approvals"][0]["exit"], f1["exits"][0]["id"], "{f1}");
    assert!(f2.get("approvals").is_none(), "{f2}");
    assert_eq!(f1["sandbox_summary"]["env_dropped"], json!(["GH"]));
    assert_eq!(f1["sandbox_summary"], f2["sandbox_summary"]);
}

#[test]
fn a_signal_to_the_cli_reaches_the_line_and_a_killed_cli_ends_it() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    // SIGTERM: the line's trap runs and its status is the CLI's.
    let mut c = run_cmd(
        &dir,
        &s.socket,
        &[
            "--",
            "trap 'echo got-term; exit 7' TERM; echo ready; sleep 61.4101 & wait",
        ],
    );
    let (mut child, mut out) = until_ready(&mut c, Stdio::piped());
    kill(child.id(), nix::sys::signal::Signal::SIGTERM);
    let mut l = String::new();
    out.read_line(&mut l).unwrap();
    assert_eq!(l, "got-term\n");
    assert_eq!(child.wait().unwrap().code(), Some(7));
    wait_until("the line's sleep ends with it", 10, || {
        !running("sleep 61.4101")
    });
    // SIGKILL: the service ends the call's tree.
    let mut c = run_cmd(&dir, &s.socket, &["--", "echo ready; sleep 61.4102"]);
    let (mut child, _out) = until_ready(&mut c, Stdio::null());
    assert!(running("sleep 61.4102"));
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until("the call ends with its CLI", 10, || {
        !running("sleep 61.4102")
    });
}

#[test]
fn calls_at_once_through_one_service() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    let children: Vec<_> = (0..4)
        .map(|i| {
            run_cmd(
                &dir,
                &s.socket,
                &["--", &format!("echo call-{i}; exit {i}")],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(i as i32), "{}", stderr(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), format!("call-{i}\n"));
    }
}

#[test]
fn a_service_for_another_home_or_build_leaves_the_call_here() {
    // The service cannot run calls (its launcher is missing): a call it took would fail.
    let dir = temp_env();
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = command(dir.path());
    cmd.env("EFR_LAUNCH", "/nonexistent/efr-launch")
        .arg("serve")
        .arg("--socket")
        .arg(&socket);
    let s = Server::spawn(cmd, dir, socket);
    let dir = s.dir.path().to_path_buf();
    let ours = |c: &mut Command| {
        c.env_remove("EFR_LAUNCH");
    };
    // The same user: the service takes it (and fails it, with its reason).
    let mut c = run_cmd(&dir, &s.socket, &["--", "true"]);
    ours(&mut c);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot start efr-launch"),
        "{}",
        stderr(&o)
    );
    // Another config home: `conflict`, and the CLI runs the call itself, saying nothing.
    let other = tempfile::tempdir_in("/var/tmp").unwrap();
    let mut c = run_cmd(&dir, &s.socket, &["--", "echo here"]);
    ours(&mut c);
    let o = c.env("XDG_CONFIG_HOME", other.path()).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?} {}", c, stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "here\n");
    assert_eq!(stderr(&o), "");
    // An unsandboxed line stays in the CLI's session (a `sudo` prompt's `/dev/tty`).
    let mut c = run_cmd(
        &dir,
        &s.socket,
        &["--unsandboxed", "--", "echo unsandboxed-here"],
    );
    ours(&mut c);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "unsandboxed-here\n");
    // The service's answer to another build.
    let mut client = s.client();
    let fds: Vec<std::os::fd::OwnedFd> = (0..3)
        .map(|_| std::fs::File::open("/dev/null").unwrap().into())
        .collect();
    let req = json!({"id": 5, "method": "sandbox.run", "params": {
        "line": "true", "env": [], "home": dir.join("home"), "config_home": dir.join("config"),
        "build": "0:0:0:0.0"}});
    send_with_fds(&client, &req, &fds);
    let f = client.recv();
    assert_eq!(f["error"]["code"], "conflict", "{f}");
    assert!(
        f["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another build"),
        "{f}"
    );
    // And to a request without its three fds.
    let f = client.call(
        6,
        "sandbox.run",
        json!({"line": "true", "env": [], "home": "/", "build": "x"}),
    );
    assert_eq!(f["error"]["code"], "invalid", "{f}");
    assert!(
        f["error"]["message"].as_str().unwrap().contains("0 came"),
        "{f}"
    );
}

fn send_with_fds(c: &Client, v: &serde_json::Value, fds: &[std::os::fd::OwnedFd]) {
    let bytes = efr_sandbox_wire::frame::encode(v).unwrap();
    efr_call::sys::send_with_fds(&c.stream, &bytes, fds).unwrap();
}

#[test]
fn a_broken_config_is_the_callers_error() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    std::fs::create_dir_all(dir.join("config/efr")).unwrap();
    std::fs::write(dir.join("config/efr/config.toml"), "garbage [\n").unwrap();
    let o = run_cmd(&dir, &s.socket, &["--", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not valid toml"), "{}", stderr(&o));
}

/// The service `run` started for the runtime dir `rt`, by its socket in its command line.
fn started_service(rt: &Path) -> Option<u32> {
    let sock = rt.join("efr/sandbox.sock");
    let o = Command::new("pgrep")
        .args(["-f", &format!("serve --socket {}", sock.display())])
        .output()
        .ok()?;
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn run_starts_a_service_when_none_runs_and_it_ends_when_idle() {
    let dir = temp_env();
    let rt = tempfile::tempdir_in("/dev/shm").unwrap();
    let go = |line: &str| -> Output {
        run_through(dir.path(), "1.5", &["--", line])
            .env("XDG_RUNTIME_DIR", rt.path())
            .output()
            .unwrap()
    };
    let o = go("echo first");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "first\n");
    assert_eq!(stderr(&o), "");
    let pid = started_service(rt.path()).expect("a service runs");
    let log = std::fs::read_to_string(rt.path().join("efr/serve.log")).unwrap();
    assert!(log.contains("listening on"), "{log}");
    // In a session of its own: no terminal's signals reach it.
    let sid = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = sid.rsplit(')').next().unwrap().split_whitespace().collect();
    assert_eq!(fields[3], pid.to_string(), "its own session: {sid}");
    // The next call goes to the same service.
    let o = go("echo second");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "second\n");
    assert_eq!(started_service(rt.path()), Some(pid));
    // Idle for 1.5 s: it ends, its socket with it, and nothing of it is left. Ended:
    // gone, or a zombie its new parent has yet to reap, whose threads have all exited
    // (its leader shows `Z` while the others still tear down, its command line with them).
    wait_until("the idle service ends, and nothing of it runs", 20, || {
        let zombie_or_gone = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit(')').next().unwrap().trim_start().starts_with('Z'))
            .unwrap_or(true);
        zombie_or_gone && !running(&rt.path().display().to_string())
    });
    assert!(!rt.path().join("efr/sandbox.sock").exists());
    let log = std::fs::read_to_string(rt.path().join("efr/serve.log")).unwrap();
    assert!(log.contains("no client for 1.5s; stopping"), "{log}");
}

#[test]
fn a_socket_of_another_user_gets_nothing() {
    // Needs a second uid to listen: as root only (the unprivileged pass has no other).
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let dir = temp_env();
    let shared = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(
        shared.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let sock = shared.path().join("sandbox.sock");
    let got = shared.path().join("got");
    let listening = shared.path().join("listening");
    // Another user's "service": it records how many bytes it was sent.
    let script = format!(
        "import socket,os\ns=socket.socket(socket.AF_UNIX)\ns.bind({sock:?})\nos.chmod({sock:?},0o777)\n\
         s.listen(1)\nopen({listening:?},'w')\nc,_=s.accept()\nc.settimeout(5)\nn=0\ntry:\n  while True:\n    b=c.recv(65536)\n    \
         if not b: break\n    n+=len(b)\nexcept Exception: pass\nopen({got:?},'w').write(str(n))\n"
    );
    let mut fake = Command::new("runuser")
        .args(["-u", "nobody", "--", "python3", "-c", &script])
        .spawn()
        .unwrap();
    wait_until("the fake service listens", 10, || listening.exists());
    let o = run_through(dir.path(), "2", &["--", "echo ran-here"])
        .env("EFR_SANDBOX_SOCKET", &sock)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ran-here\n");
    assert!(
        stderr(&o).contains("runs as uid 65534, not as this user (0)"),
        "{}",
        stderr(&o)
    );
    fake.wait().unwrap();
    assert_eq!(std::fs::read_to_string(&got).unwrap(), "0");
    // A service is not started in a directory others can write...
    assert!(sock.exists());
    let serve = |at: &Path| {
        command(dir.path())
            .arg("serve")
            .arg("--socket")
            .arg(at)
            .output()
            .unwrap()
    };
    let o = serve(&sock);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is writable by group or others"),
        "{}",
        stderr(&o)
    );
    // ... and, in its own, never takes another user's socket for a stale one of its own.
    let own = tempfile::tempdir_in("/var/tmp").unwrap();
    let theirs = own.path().join("sandbox.sock");
    drop(std::os::unix::net::UnixListener::bind(&theirs).unwrap());
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let o = serve(&theirs);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("is a socket of uid 65534, not of this service's uid 0"),
        "{}",
        stderr(&o)
    );
    assert!(theirs.exists());
}

#[test]
fn runs_at_once_with_no_service_start_one_and_all_go_through_it() {
    let dir = temp_env();
    let rt = tempfile::tempdir_in("/dev/shm").unwrap();
    let children: Vec<_> = (0..4)
        .map(|i| {
            run_through(dir.path(), "1", &["--", &format!("echo call-{i}")])
                .env("XDG_RUNTIME_DIR", rt.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), format!("call-{i}\n"));
        // None ran here for want of a service: each found the one that won the socket.
        assert_eq!(stderr(&o), "", "call {i}");
    }
    let services = Command::new("pgrep")
        .args(["-f", &format!("serve --socket {}", rt.path().display())])
        .output()
        .unwrap();
    let n = String::from_utf8_lossy(&services.stdout).lines().count();
    assert!(n <= 1, "one service at most is left: {n}");
    wait_until("the idle service ends", 20, || {
        !rt.path().join("efr/sandbox.sock").exists()
    });
}

#[test]
fn a_service_that_stops_mid_call_ends_it_and_the_cli_says_so() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    let mut c = run_cmd(&dir, &s.socket, &["--", "echo ready; sleep 61.4103"]);
    let (child, _out) = until_ready(&mut c, Stdio::piped());
    // The service is stopped (a restart, a logout): the call ends with it.
    kill(s.child.id(), nix::sys::signal::Signal::SIGTERM);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("went away during the call"),
        "{}",
        stderr(&o)
    );
    wait_until("the call ends with its service", 10, || {
        !running("sleep 61.4103")
    });
}

#[test]
fn a_config_changed_between_calls_holds_for_the_next_one() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    let secret = dir.join("proj/notes.private");
    std::fs::write(&secret, "hidden\n").unwrap();
    let line = format!("cat {}", secret.display());
    let o = run_cmd(&dir, &s.socket, &["--", &line]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hidden\n",
        "{}",
        stderr(&o)
    );
    // The user masks it in their config: the service, already running, reads the change
    // before the next call, as a `run` of its own would.
    std::fs::create_dir_all(dir.join("config/efr")).unwrap();
    std::fs::write(
        dir.join("config/efr/config.toml"),
        format!(
            "[sandbox]\nmasks = [{{ path = {:?}, reason = \"test\" }}]\n",
            secret.display().to_string()
        ),
    )
    .unwrap();
    // A masked file reads as empty (the call ran: status 0).
    let o = run_cmd(&dir, &s.socket, &["--", &line]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "", "{}", stderr(&o));
}

#[test]
fn a_conversation_is_the_same_through_the_service_and_without() {
    let dir = temp_env();
    let rt = tempfile::tempdir_in("/dev/shm").unwrap();
    let go = |service: bool, conv: &str, line: &str| -> Output {
        let mut c = run_through(dir.path(), "1", &["--conversation", conv, "--", line]);
        if !service {
            c.env("EFR_SANDBOX_NO_SERVICE", "1");
        }
        c.env("XDG_RUNTIME_DIR", rt.path()).output().unwrap()
    };
    // Written by a call of the CLI's own (as on a terminal), read through the service.
    let o = go(false, "conv-a", "echo kept > /tmp/note; echo \"$SCRATCH\"");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let scratch = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(!scratch.is_empty());
    let o = go(true, "conv-a", "cat /tmp/note; echo \"$SCRATCH\"");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("kept\n{scratch}\n")
    );
    assert!(
        started_service(rt.path()).is_some(),
        "it went through a service"
    );
    // Another conversation has its own.
    let o = go(true, "conv-b", "cat /tmp/note 2>/dev/null || echo none");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "none\n");
    wait_until("the idle service ends", 20, || {
        !rt.path().join("efr/sandbox.sock").exists()
    });
}

/// Through the service too: `git remote add` with the grant of `.git/config` works, and a
/// lock the line made is gone when the CLI is killed mid-write (the service ends the call,
/// and its init removes the lock).
#[test]
fn a_git_config_write_through_the_service_and_a_killed_cli_leave_no_lock() {
    let s = service(temp_env());
    let dir = s.dir.path().to_path_buf();
    let proj = dir.join("proj");
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(&proj)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(args)
            .output()
            .unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    let grant = format!("write={}", proj.join(".git/config").display());
    let lock = proj.join(".git/config.lock");
    for b in backends() {
        let line = format!("git remote add o-{b} https://e.com/x.git");
        let o = run_cmd(
            &dir,
            &s.socket,
            &["--backend", b, "--grant", &grant, "--", &line],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "{b}: {}", stderr(&o));
        let url = git(&["config", "--get", &format!("remote.o-{b}.url")]);
        assert_eq!(
            String::from_utf8_lossy(&url.stdout),
            "https://e.com/x.git\n",
            "{b}"
        );
        assert!(!lock.exists(), "{b}");

        let mut c = run_cmd(
            &dir,
            &s.socket,
            &[
                "--backend",
                b,
                "--grant",
                &grant,
                "--",
                "set -C; : > .git/config.lock && echo ready && sleep 61.4103",
            ],
        );
        let (mut child, _out) = until_ready(&mut c, Stdio::null());
        assert!(lock.exists(), "{b}: the line made its lock");
        child.kill().unwrap();
        child.wait().unwrap();
        wait_until("the call ends with its CLI", 10, || {
            !running("sleep 61.4103")
        });
        wait_until("the lock goes with the call", 3, || !lock.exists());
        assert!(
            git(&["config", "user.name", "after"]).status.success(),
            "{b}"
        );
    }
}
