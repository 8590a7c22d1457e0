//! What the CLI prints that a call controls reaches the user's terminal through the pty
//! relay's filter: a job's output (`jobs logs`), a job's command line (`jobs`), the paths
//! of `run`'s refusal lines. On a terminal an OSC 52 (a clipboard write) never arrives;
//! `--raw` and a pipe keep the bytes.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{backends, command};

/// The clipboard write the tests plant: OSC 52, "pwned" in base64, BEL-terminated.
const OSC52: &str = "\x1b]52;c;cHduZWQ=\x07";

fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    for d in ["home", "config", "proj"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    dir
}

/// `efr-sandbox ARGS` of the user of `dir`, its service at `<dir>/run/sandbox.sock`.
fn cli(dir: &Path, args: &[&str]) -> Command {
    let mut c = command(dir);
    c.env_remove("EFR_SANDBOX_NO_SERVICE")
        .env("EFR_SANDBOX_IDLE_EXIT", "2")
        .env("EFR_SANDBOX_SOCKET", dir.join("run/sandbox.sock"))
        .current_dir(dir.join("proj"))
        .args(args);
    c
}

/// Runs `c` with stdin, stdout and stderr on a new pty, in a session of its own (the pty
/// its controlling terminal, as a terminal starts a shell); what the terminal got.
fn on_a_terminal(c: Command) -> (std::process::ExitStatus, Vec<u8>) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let pty = nix::pty::openpty(None, None).unwrap();
    fcntl(&pty.master, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
    let mut master = std::fs::File::from(pty.master);
    let mut child = {
        let slave = std::fs::File::from(pty.slave);
        // `setsid -c`: the pty becomes the controlling terminal of the command's session.
        let mut s = Command::new("setsid");
        s.arg("-c").arg(c.get_program()).args(c.get_args());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => s.env(k, v),
                None => s.env_remove(k),
            };
        }
        if let Some(d) = c.get_current_dir() {
            s.current_dir(d);
        }
        s.stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .spawn()
            .unwrap()
        // The command and its copies of the slave end here: the child holds the only ones.
    };
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut read = |got: &mut Vec<u8>| loop {
        match master.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            // EAGAIN: nothing now; EIO: every slave is closed.
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    };
    let end = Instant::now() + Duration::from_secs(60);
    let st = loop {
        read(&mut got);
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < end,
            "the command did not end: {}",
            text(&got)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for _ in 0..10 {
        if !read(&mut got) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (st, got)
}

fn has(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn wait_for_output(d: &Path, id: &str, want: &str) {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let o: Output = cli(d, &["jobs", "logs", id]).output().unwrap();
        if text(&o.stdout).contains(want) {
            return;
        }
        assert!(
            Instant::now() < end,
            "{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A job prints an OSC 52 between ordinary text and colours; its command line holds one
/// too. On a terminal, `jobs logs` drops it (the text and the colour arrive) and `jobs`
/// shows the command line's ESC as `\e`; `--raw` and a pipe give the bytes.
#[test]
fn a_jobs_output_and_command_line_are_filtered_on_a_terminal() {
    let dir = temp_env();
    let d = dir.path();
    let proj = d.join("proj");
    let line = format!(
        ": '{OSC52}'; printf 'before \\033[31mred\\033[0m \\033]52;c;cHduZWQ=\\007after\\n'; sleep 30"
    );
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
    assert!(o.status.success(), "{}", text(&o.stderr));
    let id = text(&o.stdout).trim().to_string();
    wait_for_output(d, &id, "after");

    // On a terminal: the clipboard write is gone, the rest is there.
    let (st, got) = on_a_terminal(cli(d, &["jobs", "logs", &id]));
    assert!(st.success(), "{}", text(&got));
    assert!(has(&got, "before ") && has(&got, "after"), "{}", text(&got));
    assert!(
        has(&got, "\x1b[31mred\x1b[0m"),
        "colours pass: {:?}",
        text(&got)
    );
    assert!(
        !has(&got, "\x1b]52"),
        "an OSC 52 reached the terminal: {:?}",
        text(&got)
    );
    // `--raw` on a terminal, and a pipe: the bytes as the job wrote them.
    let (_, raw) = on_a_terminal(cli(d, &["--raw", "jobs", "logs", &id]));
    assert!(has(&raw, "\x1b]52;c;cHduZWQ="), "{:?}", text(&raw));
    let piped = cli(d, &["jobs", "logs", &id])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        has(&piped.stdout, "\x1b]52;c;cHduZWQ="),
        "{:?}",
        text(&piped.stdout)
    );

    // The list: the command line's ESC and BEL are shown, not sent.
    let (_, listed) = on_a_terminal(cli(d, &["jobs"]));
    assert!(!has(&listed, "\x1b]52"), "{:?}", text(&listed));
    assert!(
        has(&listed, ": '\\e]52;c;cHduZWQ=\\x07'"),
        "{:?}",
        text(&listed)
    );
    let (_, listed_json) = on_a_terminal(cli(d, &["jobs", "--json"]));
    assert!(!has(&listed_json, "\x1b]52"), "{:?}", text(&listed_json));
    let piped = cli(d, &["jobs"]).output().unwrap();
    assert!(has(&piped.stdout, OSC52), "{:?}", text(&piped.stdout));
    let _ = cli(d, &["jobs", "stop", &id]).output();
}

/// `run` on a terminal: a refused write to a path whose name holds an OSC 52 is said with
/// the name shown, not sent; the line's own output goes through the call's pty filter.
#[test]
fn runs_refusal_lines_show_the_calls_paths_safely() {
    for backend in backends() {
        let dir = temp_env();
        let d = dir.path();
        let proj = d.join("proj");
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let target = outside.path().join(format!("x{OSC52}y"));
        let line = format!("touch '{}' 2>/dev/null; echo done", target.display());
        let mut c = command(d);
        c.args(["run", "--backend", backend, "--project"])
            .arg(&proj)
            .arg("--cwd")
            .arg(&proj)
            .args(["--", &line]);
        let (_, got) = on_a_terminal(c);
        assert!(has(&got, "done"), "{backend}: {:?}", text(&got));
        assert!(!has(&got, "\x1b]52"), "{backend}: {:?}", text(&got));
        assert!(
            has(&got, "x\\e]52;c;cHduZWQ=\\x07y"),
            "{backend}: the refused path, shown: {:?}",
            text(&got)
        );
        assert!(!target.exists());
    }
}
