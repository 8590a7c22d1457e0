//! A call's lifetime through `efr-launch` used directly: the launch ends with the process
//! that started it, whatever that process dies of (within a second nothing of the call
//! runs and nothing of it is left in the project), on both backends and unsandboxed; a
//! launcher told its caller's pid does not start when its parent is another process; and a
//! signal sent to the call's process group gives the line's own status (128+N, or the code
//! it chose when it traps it), never 125 ("the sandbox could not start").

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use efr_launcher::api::BackendChoice;
use efr_launcher::plan::Plan;
use efr_launcher::status::Outcome;
use efr_sandbox_tests::common::{
    self, Fixture, alive, backends, descendants, launcher, new_stage_dirs, procs_with, stage_dirs,
    tree, wait_for_file,
};

/// How long the call may outlive its caller.
const GRACE: Duration = Duration::from_secs(1);

/// A tag no other process on the machine has in its command line.
fn tag() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "1000.{}{:03}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// The modes a test runs in: each backend, and unsandboxed (None).
fn modes() -> Vec<Option<BackendChoice>> {
    let mut v: Vec<Option<BackendChoice>> = backends().into_iter().map(Some).collect();
    v.push(None);
    v
}

fn plan_for(fx: &Fixture, line: &str, mode: Option<BackendChoice>) -> Plan {
    let mut r = fx.request(line, mode.unwrap_or(BackendChoice::Native));
    if mode.is_none() {
        r.mode = efr_launcher::plan::PlanMode::Unsandboxed;
    }
    r
}

fn write_plan(fx: &Fixture, plan: &Plan, name: &str) -> PathBuf {
    let f = fx.dir.path().join(name);
    std::fs::write(&f, serde_json::to_vec(plan).unwrap()).unwrap();
    f
}

fn status_of(path: &Path) -> Outcome {
    Outcome::from_lines(&std::fs::read_to_string(path).unwrap_or_default())
}

/// Waits until none of `pids` is a live process, at most [`GRACE`] from `t0`; the ones
/// still alive then.
fn alive_after(pids: &[i32], t0: Instant) -> Vec<i32> {
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || t0.elapsed() > GRACE {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn describe(pids: &[i32]) -> String {
    pids.iter()
        .map(|p| {
            let c = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            format!("{p}: {}", String::from_utf8_lossy(&c).replace('\0', " "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A shell that starts `efr-launch` in the background and waits for it: the launcher's
/// caller, killed by the test.
fn caller(plan: &Path, status: &Path) -> Child {
    let l = launcher();
    Command::new("/bin/sh")
        .arg("-c")
        .arg(r#""$0" --plan "$1" --status-fd 3 3>"$2" & wait"#)
        .arg(&l.exe)
        .arg(plan)
        .arg(status)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(status.with_extension("err")).unwrap())
        .spawn()
        .unwrap()
}

/// Starts a sleeping line (with a background child and a double-forked one) under a caller,
/// kills the caller with `sig`, then checks that within a second no process of the call
/// is alive and the project holds only what the line wrote.
fn caller_killed(sig: i32) {
    for mode in modes() {
        let fx = Fixture::new();
        let proj = PathBuf::from(&fx.proj);
        let before = tree(&proj);
        let stages_before = stage_dirs();
        let t = tag();
        let line = format!("sleep {t} & (sleep {t} &); echo $$ > ready; sleep {t}; wait");
        let plan = write_plan(&fx, &plan_for(&fx, &line, mode), "plan.json");
        let status = fx.dir.path().join("status");
        let mut parent = caller(&plan, &status);
        assert!(
            wait_for_file(&proj.join("ready"), 20),
            "[{mode:?}] the line never started: {:?} {:?}",
            std::fs::read_to_string(&status),
            std::fs::read_to_string(status.with_extension("err"))
        );
        // The three sleeps run (the line wrote `ready` just before the last one).
        let deadline = Instant::now() + Duration::from_secs(10);
        while procs_with(&format!("sleep {t}")).len() < 3 {
            assert!(Instant::now() < deadline, "[{mode:?}] the sleeps never ran");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The call's processes (the snapshot is taken again while one is being reparented:
        // /proc is not read atomically).
        let deadline = Instant::now() + Duration::from_secs(10);
        let call = loop {
            let call = descendants(parent.id() as i32);
            let sleeps = procs_with(&format!("sleep {t}"));
            if sleeps.iter().all(|p| call.contains(p)) {
                break call;
            }
            assert!(
                Instant::now() < deadline,
                "[{mode:?}] {sleeps:?} not in {call:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let launcher_pid = call
            .iter()
            .copied()
            .find(|&p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .ok()
                    .and_then(|s| {
                        s.rsplit_once(')')?
                            .1
                            .split_whitespace()
                            .nth(1)?
                            .parse::<u32>()
                            .ok()
                    })
                    == Some(parent.id())
            })
            .unwrap();
        if mode == Some(BackendChoice::Bwrap) {
            // The stage goes once the init runs: nothing is left for a SIGKILL to leak.
            assert_eq!(
                new_stage_dirs(&stages_before, launcher_pid),
                Vec::<String>::new(),
                "[{mode:?}] bubblewrap's stage while the call runs"
            );
        }
        common::sys::kill(parent.id() as i32, sig).unwrap();
        let t0 = Instant::now();
        let _ = parent.wait();
        let mut watched = call.clone();
        watched.extend(procs_with(&format!("sleep {t}")));
        let left = alive_after(&watched, t0);
        let what = describe(&left);
        // Left alive, the call would outlive the test: end it.
        for &p in &left {
            let _ = common::sys::kill(p, libc::SIGKILL);
        }
        assert!(
            left.is_empty(),
            "[{mode:?}] signal {sig}: alive {:?} after the caller died: {}",
            t0.elapsed(),
            what
        );
        let mut want = before.clone();
        want.push("ready".into());
        want.sort();
        assert_eq!(tree(&proj), want, "[{mode:?}] the call left something");
        if mode == Some(BackendChoice::Bwrap) {
            assert_eq!(
                new_stage_dirs(&stages_before, launcher_pid),
                Vec::<String>::new(),
                "[{mode:?}] bubblewrap's stage"
            );
        }
        let o = status_of(&status);
        assert_eq!(o.signal, Some(libc::SIGKILL), "[{mode:?}] {o:?}");
        assert!(o.setup_error.is_none(), "[{mode:?}] {o:?}");
    }
}

#[test]
fn caller_killed_by_term_ends_the_call() {
    caller_killed(libc::SIGTERM);
}

#[test]
fn caller_killed_by_kill_ends_the_call() {
    caller_killed(libc::SIGKILL);
}

/// `--caller-pid` names a process that is not the launcher's parent (the caller died
/// before the launcher ran, and the launcher was reparented): the line does not run.
#[test]
fn a_launcher_whose_caller_is_gone_does_not_start() {
    for mode in modes() {
        let fx = Fixture::new();
        let marker = format!("{}/ran", fx.proj);
        let plan = write_plan(
            &fx,
            &plan_for(&fx, &format!("echo > {marker}"), mode),
            "plan.json",
        );
        let status = fx.dir.path().join("status");
        let l = launcher();
        // Our parent is not this process.
        let other = std::os::unix::process::parent_id();
        let o = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"exec "$0" --plan "$1" --status-fd 3 --caller-pid "$3" 3>"$2""#)
            .arg(&l.exe)
            .arg(&plan)
            .arg(&status)
            .arg(other.to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(125), "[{mode:?}] {o:?}");
        let out = status_of(&status);
        assert!(
            out.setup_error
                .as_deref()
                .is_some_and(|e| e.contains("caller")),
            "[{mode:?}] {out:?}"
        );
        assert!(!Path::new(&marker).exists(), "[{mode:?}] the line ran");
        // With the right pid it runs.
        let o = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#""$0" --plan "$1" --status-fd 3 --caller-pid $$ 3>"$2"; exit $?"#)
            .arg(&l.exe)
            .arg(&plan)
            .arg(&status)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "[{mode:?}] {o:?}");
        assert!(
            Path::new(&marker).exists(),
            "[{mode:?}] the line did not run"
        );
    }
}

/// Runs `line` through `efr-launch` in a process group of its own, sends `sig` to the
/// group once the line wrote `ready`; the launcher's exit status and outcome.
fn group_signalled(
    fx: &Fixture,
    line: &str,
    mode: Option<BackendChoice>,
    sig: i32,
) -> (Option<i32>, Outcome, String) {
    use std::os::unix::process::CommandExt;
    let ready = PathBuf::from(&fx.proj).join("ready");
    let _ = std::fs::remove_file(&ready);
    let plan = write_plan(fx, &plan_for(fx, line, mode), "plan.json");
    let status = fx.dir.path().join("status");
    let err = fx.dir.path().join("stderr");
    let l = launcher();
    let mut child = Command::new(&l.exe)
        .arg("--plan")
        .arg(&plan)
        .arg("--status-fd")
        .arg("1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&status).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    assert!(
        wait_for_file(&ready, 20),
        "[{mode:?}] the line never started"
    );
    // The line is in its sleep (or about to be).
    std::thread::sleep(Duration::from_millis(100));
    common::sys::kill(-(child.id() as i32), sig).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("[{mode:?}] signal {sig}: the launch did not end");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (
        st.code(),
        status_of(&status),
        std::fs::read_to_string(&err).unwrap_or_default(),
    )
}

/// A signal sent to the process group (a terminal's ^C is SIGINT to the foreground group)
/// ends the line, and the call's status is the line's: 128+N.
#[test]
fn a_signal_to_the_group_gives_the_lines_status() {
    for mode in modes() {
        let fx = Fixture::new();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1] {
            let t = tag();
            let (code, o, err) =
                group_signalled(&fx, &format!("echo > ready; sleep {t}"), mode, sig);
            assert_eq!(
                code,
                Some(128 + sig),
                "[{mode:?}] signal {sig}: {o:?} {err}"
            );
            assert_eq!(o.signal, Some(sig), "[{mode:?}] signal {sig}: {o:?}");
            assert!(o.setup_error.is_none(), "[{mode:?}] signal {sig}: {o:?}");
            assert!(
                procs_with(&format!("sleep {t}")).iter().all(|&p| !alive(p)),
                "[{mode:?}] signal {sig}: the sleep survived"
            );
        }
    }
}

/// A line that traps SIGINT and exits 7 gives 7.
#[test]
fn a_line_that_traps_the_signal_gives_its_own_code() {
    for mode in modes() {
        let fx = Fixture::new();
        let t = tag();
        let (code, o, err) = group_signalled(
            &fx,
            &format!("trap 'exit 7' INT; echo > ready; sleep {t} & wait"),
            mode,
            libc::SIGINT,
        );
        assert_eq!(code, Some(7), "[{mode:?}] {o:?} {err}");
        assert_eq!(o.code, Some(7), "[{mode:?}] {o:?}");
        assert!(o.setup_error.is_none(), "[{mode:?}] {o:?}");
    }
}
