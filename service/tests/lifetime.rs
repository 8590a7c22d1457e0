//! A call's lifetime and output through `efr-sandbox run` and the service, end to end: the
//! call ends with the CLI or the service that started it, whatever that dies of, and with
//! a connection that hangs up mid-call (within a second nothing of it runs, nothing is left
//! in the project); a signal to the CLI or to its process group gives the line's status
//! (128+N, or the code it chose), never 125; stdout and stderr into one file keep their
//! order; forged refusal lines on stderr give no denial and no exit record.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{Server, command, temp_env};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// How long the call may outlive what ended it.
const GRACE: Duration = Duration::from_secs(1);

/// The modes: each backend (`--backend`), and unsandboxed (None).
fn modes() -> Vec<Option<&'static str>> {
    let mut v = vec![Some("native")];
    if Path::new(efr_launcher::backend::bwrap::BWRAP).exists() {
        v.push(Some("bwrap"));
    } else {
        assert!(
            std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
            "EFR_SANDBOX_MUST_WORK is set and bwrap is missing"
        );
    }
    v.push(None);
    v
}

fn mode_args(mode: Option<&str>) -> Vec<String> {
    match mode {
        Some(b) => vec!["--backend".into(), b.into()],
        None => vec!["--unsandboxed".into()],
    }
}

/// A tag no other process of the machine has in its command line.
fn tag() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "1000.{}{:03}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

fn project(home: &Path) -> PathBuf {
    let p = home.join("proj");
    std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
    std::fs::write(p.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(p.join("README"), "hello\n").unwrap();
    p
}

/// Every path under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(base, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Every descendant of `root` (host pids), through the ppid links of /proc.
fn descendants(root: i32) -> Vec<i32> {
    let mut parent = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Some(pp) = stat_fields(pid).and_then(|f| f.get(1)?.parse::<i32>().ok()) {
            parent.insert(pid, pp);
        }
    }
    parent
        .keys()
        .copied()
        .filter(|&pid| {
            let mut cur = pid;
            for _ in 0..64 {
                match parent.get(&cur) {
                    Some(&pp) if pp == root => return true,
                    Some(&pp) if pp > 1 => cur = pp,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// The processes of the call running in service `root`: its descendants but a launcher in
/// standby that holds no call (its waiting init has no child yet) and that init. A standby
/// is the next call's, and outlives this one.
fn call_of(root: i32) -> Vec<i32> {
    let all = descendants(root);
    let idle: Vec<i32> = all
        .iter()
        .copied()
        .filter(|&p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let standby = String::from_utf8_lossy(&cmd).contains("\0--warm\0");
            let kids = descendants(p);
            standby && kids.len() <= 1 && kids.iter().all(|&k| descendants(k).is_empty())
        })
        .flat_map(|p| std::iter::once(p).chain(descendants(p)))
        .collect();
    all.into_iter().filter(|p| !idle.contains(p)).collect()
}

/// A live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    stat_fields(pid).is_some_and(|f| f[0] != "Z" && f[0] != "X")
}

fn procs_with(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `n` sleeps tagged `t` run.
fn wait_for_sleeps(t: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while procs_with(&format!("sleep {t}")).len() < n {
        assert!(Instant::now() < deadline, "the sleeps never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Checks that none of `pids` (and no sleep tagged `t`) is alive a second after `t0`;
/// kills what is left before failing, so that nothing outlives the test.
fn assert_all_ended(what: &str, pids: &[i32], t: &str, t0: Instant) {
    let mut pids = pids.to_vec();
    pids.extend(procs_with(&format!("sleep {t}")));
    let left = loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || t0.elapsed() > GRACE {
            break left;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let desc: Vec<String> = left
        .iter()
        .map(|p| {
            let c = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            format!("{p}: {}", String::from_utf8_lossy(&c).replace('\0', " "))
        })
        .collect();
    for &p in &left {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
    assert!(
        left.is_empty(),
        "{what}: alive {:?} after: {desc:?}",
        t0.elapsed()
    );
}

/// The sleeping line of the kill tests: a background sleep, a double-forked one, then one
/// in the foreground; `ready` is written in the project first.
fn sleeping_line(t: &str) -> String {
    format!("sleep {t} & (sleep {t} &); echo $$ > ready; sleep {t}; wait")
}

fn cli(dir: &Path, mode: Option<&str>, proj: &Path, line: &str) -> std::process::Command {
    let mut c = command(dir);
    c.arg("run")
        .args(mode_args(mode))
        .arg("--project")
        .arg(proj)
        .arg("--cwd")
        .arg(proj)
        .arg("--")
        .arg(line);
    c
}

fn cli_killed(sig: Signal) {
    for mode in modes() {
        let d = temp_env();
        let proj = project(&d.path().join("home"));
        let before = tree(&proj);
        let t = tag();
        let mut child: Child = cli(d.path(), mode, &proj, &sleeping_line(&t))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_file(&proj.join("ready"));
        wait_for_sleeps(&t, 3);
        let call = descendants(child.id() as i32);
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
        let t0 = Instant::now();
        let st = child.wait().unwrap();
        assert_all_ended(&format!("[{mode:?}] {sig}"), &call, &t, t0);
        let mut want = before.clone();
        want.push("ready".into());
        want.sort();
        assert_eq!(
            tree(&proj),
            want,
            "[{mode:?}] {sig}: the call left something"
        );
        if sig == Signal::SIGTERM {
            // Handed to the line, which died of it: the line's status.
            assert_eq!(st.code(), Some(128 + libc::SIGTERM), "[{mode:?}] {st}");
        }
    }
}

#[test]
fn the_call_ends_when_the_cli_is_terminated() {
    cli_killed(Signal::SIGTERM);
}

#[test]
fn the_call_ends_when_the_cli_is_killed() {
    cli_killed(Signal::SIGKILL);
}

/// SIGTERM to the CLI goes to the line: one that traps it ends with the code it chose.
#[test]
fn a_line_that_traps_the_clis_sigterm_gives_its_own_code() {
    for mode in modes() {
        let d = temp_env();
        let proj = project(&d.path().join("home"));
        let t = tag();
        let mut child = cli(
            d.path(),
            mode,
            &proj,
            &format!("trap 'exit 3' TERM; echo > ready; sleep {t} & wait"),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        wait_for_file(&proj.join("ready"));
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        let st = child.wait().unwrap();
        assert_all_ended(
            &format!("[{mode:?}] trapped SIGTERM"),
            &[],
            &t,
            Instant::now(),
        );
        assert_eq!(st.code(), Some(3), "[{mode:?}] {st}");
    }
}

/// Starts the CLI running `line` in a process group of its own and, once the line has
/// written `ready` in its project, sends `sig` to that group (a terminal's ^C is SIGINT to
/// the foreground group): the CLI, its temp dir and the project.
fn signal_group(
    mode: Option<&str>,
    line: &str,
    sig: Signal,
) -> (Child, tempfile::TempDir, PathBuf) {
    let d = temp_env();
    let proj = project(&d.path().join("home"));
    let child = cli(d.path(), mode, &proj, line)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_for_file(&proj.join("ready"));
    std::thread::sleep(Duration::from_millis(100));
    nix::sys::signal::killpg(Pid::from_raw(child.id() as i32), sig).unwrap();
    (child, d, proj)
}

/// [`signal_group`], then the CLI's end.
fn group_signalled(mode: Option<&str>, line: &str, sig: Signal) -> std::process::Output {
    let (child, _d, _) = signal_group(mode, line, sig);
    child.wait_with_output().unwrap()
}

#[test]
fn ctrl_c_to_the_group_gives_130() {
    for mode in modes() {
        let t = tag();
        let o = group_signalled(mode, &format!("echo > ready; sleep {t}"), Signal::SIGINT);
        assert_eq!(o.status.code(), Some(130), "[{mode:?}] {o:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!e.contains("could not start"), "[{mode:?}] {e}");
    }
}

#[test]
fn ctrl_c_to_a_line_that_traps_it_gives_its_code() {
    for mode in modes() {
        let t = tag();
        let o = group_signalled(
            mode,
            &format!("trap 'exit 7' INT; echo > ready; sleep {t} & wait"),
            Signal::SIGINT,
        );
        assert_eq!(o.status.code(), Some(7), "[{mode:?}] {o:?}");
    }
}

const INTERLEAVED: &str = "for i in $(seq 100); do echo o$i; echo e$i >&2; done";

fn interleaved() -> String {
    (1..=100).map(|i| format!("o{i}\ne{i}\n")).collect()
}

/// `efr-sandbox run ... >out 2>&1`.
#[test]
fn cli_output_into_one_file_keeps_its_order() {
    for mode in modes() {
        let d = temp_env();
        let proj = project(&d.path().join("home"));
        let out = d.path().join("out");
        let f = std::fs::File::create(&out).unwrap();
        let st = cli(d.path(), mode, &proj, INTERLEAVED)
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .status()
            .unwrap();
        assert!(st.success(), "[{mode:?}] {st}");
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            interleaved(),
            "[{mode:?}]"
        );
    }
}

/// `efr-sandbox run ... 2>&1 | reader`.
#[test]
fn cli_output_into_one_pipe_keeps_its_order() {
    for mode in modes() {
        let d = temp_env();
        let proj = project(&d.path().join("home"));
        let (mut rd, wr) = std::io::pipe().unwrap();
        let mut child = cli(d.path(), mode, &proj, INTERLEAVED)
            .stdout(wr.try_clone().unwrap())
            .stderr(wr)
            .spawn()
            .unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut rd, &mut got).unwrap();
        assert!(child.wait().unwrap().success(), "[{mode:?}]");
        assert_eq!(got, interleaved(), "[{mode:?}]");
    }
}

/// Refusal lines the line prints for paths it never touched: no denied write in the
/// summary, no exit record.
#[test]
fn forged_denials_give_no_record() {
    for mode in modes().into_iter().flatten() {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = project(&home);
        let summary = d.path().join("summary.json");
        let line = format!(
            "echo \"touch: cannot touch '{h}/.ssh/authorized_keys': Read-only file system\" >&2; \
             echo 'sh: 1: cannot create /etc/cron.d/x: Read-only file system' >&2; \
             echo \"PermissionError: [Errno 13] Permission denied: '{p}/.git/hooks/pre-push'\" >&2; \
             exit 1",
            h = home.display(),
            p = proj.display()
        );
        let o = command(d.path())
            .arg("run")
            .args(["--backend", mode])
            .arg("--project")
            .arg(&proj)
            .arg("--cwd")
            .arg(&proj)
            .arg("--summary")
            .arg(&summary)
            .arg("--")
            .arg(&line)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "[{mode}] {o:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("authorized_keys"), "[{mode}] {e}");
        let records: Vec<&str> = e
            .lines()
            .filter(|l| l.starts_with("efr-sandbox:"))
            .collect();
        assert!(records.is_empty(), "[{mode}] exit records: {records:?}");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert!(
            v.get("denied_writes").is_none_or(|w| w == &json!([])),
            "[{mode}] {v}"
        );
    }
}

/// Starts a sleeping `sandbox.launch` on `c`; returns the project and the sleeps' tag once
/// the line runs.
fn launch_sleeping(s: &Server, c: &mut common::Client, mode: Option<&str>) -> (PathBuf, String) {
    let proj = project(&s.home);
    let _ = std::fs::remove_file(proj.join("ready"));
    let t = tag();
    c.request(
        5,
        "sandbox.launch",
        json!({
            "line": sleeping_line(&t),
            "cwd": proj,
            "projects": [proj],
            "backend": mode.unwrap_or("auto"),
            "unsandboxed": mode.is_none(),
        }),
    );
    let f = c.recv();
    assert_eq!(f["item"]["kind"], "started", "[{mode:?}] {f}");
    wait_for_file(&proj.join("ready"));
    wait_for_sleeps(&t, 3);
    (proj, t)
}

#[test]
fn the_call_ends_when_the_service_is_killed() {
    for mode in modes() {
        let mut s = Server::start(&[]);
        let mut c = s.client();
        let (proj, t) = launch_sleeping(&s, &mut c, mode);
        let before = tree(&proj);
        let call = descendants(s.child.id() as i32);
        s.child.kill().unwrap();
        let t0 = Instant::now();
        let _ = s.child.wait();
        assert_all_ended(&format!("[{mode:?}] service killed"), &call, &t, t0);
        assert_eq!(tree(&proj), before, "[{mode:?}] the call left something");
    }
}

#[test]
fn the_call_ends_when_its_connection_hangs_up() {
    for mode in modes() {
        let s = Server::start(&[]);
        let mut c = s.client();
        let (proj, t) = launch_sleeping(&s, &mut c, mode);
        let before = tree(&proj);
        let call: Vec<i32> = call_of(s.child.id() as i32);
        drop(c);
        let t0 = Instant::now();
        assert_all_ended(&format!("[{mode:?}] connection closed"), &call, &t, t0);
        assert_eq!(tree(&proj), before, "[{mode:?}] the call left something");
        // The service goes on.
        let mut c = s.client();
        let r = c.call(6, "sandbox.launch", json!({"line": "true", "cwd": "/"}));
        assert_eq!(r["item"]["kind"], "started", "{r}");
    }
}

/// A client that only ends its sending side still gets its answer.
#[test]
fn a_half_closed_connection_still_gets_the_end() {
    let s = Server::start(&[]);
    let mut c = s.client();
    c.request(
        9,
        "sandbox.launch",
        json!({"line": "sleep 0.3; echo done", "cwd": "/"}),
    );
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let (items, end) = common::collect(&mut c, 9);
    assert!(end.get("end").is_some(), "{end}");
    let out: String = items
        .iter()
        .filter(|i| i["kind"] == "output")
        .map(|i| i["data"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(out, "done\n");
}

/// A signal to the CLI's process group reaches a contained line once (the launcher is in a
/// group of its own: only the CLI hands it on), and one the CLI would die of by default
/// (SIGUSR1) does not end the call.
#[test]
fn a_group_signal_reaches_the_line_once() {
    for mode in modes() {
        for sig in [Signal::SIGINT, Signal::SIGUSR1, Signal::SIGTERM] {
            let line = format!(
                "trap 'echo got >> count' {}; echo > ready; \
                 while [ ! -f stop ]; do sleep 0.05; done; exit 0",
                &sig.as_str()[3..]
            );
            let (child, _d, proj) = signal_group(mode, &line, sig);
            // Time for a second delivery, were there one.
            std::thread::sleep(Duration::from_millis(700));
            std::fs::write(proj.join("stop"), "").unwrap();
            let o = child.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "[{mode:?}] {sig}: {o:?}");
            let got = std::fs::read_to_string(proj.join("count")).unwrap_or_default();
            if mode.is_some() {
                assert_eq!(got, "got\n", "[{mode:?}] {sig}: the trap ran {got:?}");
            } else {
                // Unsandboxed, the line is in the CLI's group and gets the group's signal
                // itself, besides the one handed on (see the threat model).
                assert!(got.starts_with("got\n"), "[{mode:?}] {sig}: {got:?}");
            }
        }
    }
}
