//! A launcher in standby (`efr-launch --warm`, the service's way of starting a call): the
//! call it takes is the call a launcher started for it would have been (the same view,
//! namespaces, credentials, environment, stdio and end), whatever the plan; the init it made
//! ahead sees the host's mounts of the time of the call, not of its own start; and nothing
//! of it outlives its owner (dropped, or its caller killed). The escape and must-work
//! suites run through it too with `EFR_TEST_WARM=1` (`.ci/run`'s unprivileged pass).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use efr_launcher::api::{BackendChoice, Io};
use efr_launcher::status::StatusLine;
use efr_sandbox_tests::common::{
    self, Fixture, alive, backends, descendants, launcher, run_plan_as,
};

/// How long a standby may outlive its owner.
const GRACE: Duration = Duration::from_secs(1);

/// What a line shows of its sandbox: every value a call has and a waiting init could get
/// wrong (its host name, id maps, capabilities, filters, network, mounts, view, env, stdio).
const SHOW: &str = "hostname; cat /proc/self/uid_map /proc/self/gid_map; id -u; id -g; \
    grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; \
    cat /sys/class/net/lo/operstate; ls /sys/class/net; \
    awk '{print $5, $9}' /proc/self/mountinfo | grep -v -E '/other/(early|late) ' | sort; \
    pwd; ls -A; ls -A ~/.ssh; cat ~/.ssh/id_rsa 2>&1; (echo x > /etc/efr-x) 2>&1; \
    env | grep -v -E '^(_|SHLVL|PWD|OLDPWD)=' | sort; set -- /proc/[0-9]*; echo $#; \
    echo pid $$; read a; echo stdin $a; echo err >&2; tty 2>&1; ps -o pid=,pgid=,sid= -p $$";

fn stdin(text: &str) -> Io {
    let f = tempfile::tempfile().unwrap();
    std::fs::write(
        format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f)),
        text,
    )
    .unwrap();
    Io::from(f)
}

/// The same line, in a fresh launcher and in one in standby, shows the same sandbox, on
/// every backend and unsandboxed (a plan the standby's init was not made for drops it).
#[test]
fn a_call_in_standby_is_the_call_a_fresh_launcher_makes() {
    let fx = Fixture::new();
    let mut modes: Vec<Option<BackendChoice>> = backends().into_iter().map(Some).collect();
    modes.push(None);
    for mode in modes {
        let mut r = fx.request(SHOW, mode.unwrap_or(BackendChoice::Native));
        if mode.is_none() {
            r.mode = efr_launcher::plan::PlanMode::Unsandboxed;
        }
        let plan = r;
        let cold = run_plan_as(&plan, Some(stdin("hello\n")), false);
        let warm = run_plan_as(&plan, Some(stdin("hello\n")), true);
        for ran in [&cold, &warm] {
            assert!(ran.status.success(), "{mode:?}: {ran:?}");
            assert!(ran.stdout.contains("stdin hello\n"), "{mode:?}: {ran:?}");
            assert_eq!(ran.stderr, "err\n", "{mode:?}: {ran:?}");
        }
        let backend = |ran: &common::Ran| match &ran.outcome.started {
            Some(StatusLine::Started { backend, .. }) => *backend,
            o => panic!("{mode:?}: no started line: {o:?}"),
        };
        assert_eq!(backend(&cold), backend(&warm), "{mode:?}");
        if mode.is_none() {
            // An unsandboxed line sees the host itself (its pids, its sessions, its mounts).
            continue;
        }
        assert_eq!(cold.stdout, warm.stdout, "{mode:?}: the two calls differ");
        assert!(
            warm.stdout.starts_with("efr-sandbox\n"),
            "{mode:?}: {}",
            warm.stdout
        );
        assert!(!warm.stdout.contains(common::SECRET), "{}", warm.stdout);
    }
}

/// Its line's end is the line's: a code, a signal, and a line that never starts (a cwd
/// that is not there) is a setup error as in a fresh launcher.
#[test]
fn the_end_of_a_call_in_standby_is_its_lines() {
    let fx = Fixture::new();
    for b in backends() {
        let code = run_plan_as(&fx.plan("exit 7", b, Vec::new()), None, true);
        assert_eq!(code.outcome.code, Some(7), "{b:?}: {code:?}");
        assert_eq!(code.status.code(), Some(7), "{b:?}");
        let sig = run_plan_as(&fx.plan("kill -TERM $$", b, Vec::new()), None, true);
        assert_eq!(sig.outcome.signal, Some(libc::SIGTERM), "{b:?}: {sig:?}");
        let mut p = fx.plan("true", b, Vec::new());
        p.cwd = format!("{}/not-there", fx.proj);
        let cold = run_plan_as(&p, None, false);
        let warm = run_plan_as(&p, None, true);
        assert!(warm.outcome.setup_error.is_some(), "{b:?}: {warm:?}");
        assert_eq!(cold.outcome.setup_error, warm.outcome.setup_error, "{b:?}");
        assert_eq!(warm.status.code(), Some(125), "{b:?}");
    }
}

/// Waits up to [`GRACE`] for none of `pids` to be alive; those still alive.
fn alive_after(pids: &[i32]) -> Vec<i32> {
    let t0 = Instant::now();
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || t0.elapsed() > GRACE {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The standby's init, once it has been cloned: the standby's descendants.
fn standby_tree(pid: i32) -> Vec<i32> {
    let t0 = Instant::now();
    loop {
        let d = descendants(pid);
        if !d.is_empty() || t0.elapsed() > Duration::from_secs(5) {
            return d;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A standby dropped unused takes its waiting init with it; one that has ended says so,
/// and gives no call.
#[test]
fn a_standby_dropped_or_dead_leaves_nothing() {
    let w = launcher().spawn_warm().unwrap();
    let pid = i32::try_from(w.id()).unwrap();
    let tree = standby_tree(pid);
    assert_eq!(tree.len(), 1, "the launcher and its waiting init: {tree:?}");
    drop(w);
    let mut all = tree.clone();
    all.push(pid);
    assert_eq!(alive_after(&all), Vec::<i32>::new(), "left after the drop");

    let mut w = launcher().spawn_warm().unwrap();
    let pid = i32::try_from(w.id()).unwrap();
    let tree = standby_tree(pid);
    common::sys::kill(pid, libc::SIGKILL).unwrap();
    let t0 = Instant::now();
    while w.alive() && t0.elapsed() < GRACE {
        std::thread::sleep(Duration::from_millis(10));
    }
    let fx = Fixture::new();
    let plan = fx.plan("true", BackendChoice::Native, Vec::new());
    let e = w
        .go(&plan, Io::null(), Io::null(), Io::null())
        .expect_err("a dead standby takes no call");
    assert!(e.to_string().contains("has ended"), "{e}");
    assert_eq!(
        alive_after(&tree),
        Vec::<i32>::new(),
        "its init outlived it"
    );
}

/// A standby whose caller dies (SIGKILL, nothing cleaned up) ends with its init within a
/// second, as a running launch does.
#[test]
fn a_standby_ends_with_its_caller() {
    let l = launcher();
    // A caller that is not this test: python starts the standby with a socket pair of its
    // own, prints its pid and waits to be killed.
    let script = "import os, socket, subprocess, sys, time\n\
        a, b = socket.socketpair()\n\
        p = subprocess.Popen(sys.argv[1:] + ['--warm', '--control-fd', str(b.fileno()), \
        '--caller-pid', str(os.getpid())], pass_fds=[b.fileno()])\n\
        print(p.pid, flush=True)\n\
        time.sleep(60)\n";
    let mut caller = Command::new(common::python())
        .arg("-c")
        .arg(script)
        .arg(&l.exe)
        .args(&l.pre_args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(caller.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid: i32 = line.trim().parse().unwrap();
    let mut all = standby_tree(pid);
    assert_eq!(all.len(), 1, "the standby's init: {all:?}");
    all.push(pid);
    caller.kill().unwrap();
    caller.wait().unwrap();
    assert_eq!(alive_after(&all), Vec::<i32>::new(), "outlived its caller");
}

/// A mount the host makes while the standby waits is in the call's view, as in a fresh
/// launcher's; one it removes is gone. The init's mount namespace is a copy of the host's
/// made ahead, but it receives the host's mounts until the call's setup. Root only: an
/// unprivileged user cannot mount on the host (the root pass of `.ci/run` runs it).
#[test]
fn the_host_mounts_of_the_call_time_are_in_its_view() {
    if nix_euid() != 0 {
        eprintln!("runs as root only: an unprivileged user cannot mount on the host");
        return;
    }
    let fx = Fixture::new();
    let late = format!("{}/late", fx.other);
    let early = format!("{}/early", fx.other);
    for d in [&late, &early] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mount = |dir: &str, args: &[&str]| {
        let ok = Command::new("mount")
            .args(args)
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount {args:?} {dir}");
    };
    mount(&early, &["-t", "tmpfs", "tmpfs"]);
    std::fs::write(format!("{early}/mark"), "early\n").unwrap();
    let w = launcher().spawn_warm().unwrap();
    standby_tree(i32::try_from(w.id()).unwrap());
    mount(&late, &["-t", "tmpfs", "tmpfs"]);
    std::fs::write(format!("{late}/mark"), "late\n").unwrap();
    let unmounted = Command::new("umount")
        .arg(&early)
        .status()
        .unwrap()
        .success();
    let line = format!("cat {late}/mark; ls -A {early}; echo end");
    let plan = fx.plan(&line, BackendChoice::Native, Vec::new());
    let out = tempfile::NamedTempFile::new().unwrap();
    let running = w
        .go(
            &plan,
            Io::null(),
            Io::from(out.reopen().unwrap()),
            Io::null(),
        )
        .unwrap();
    let (o, _) = running.wait().unwrap();
    let _ = Command::new("umount").arg(&late).status();
    assert!(unmounted, "umount {early}");
    let text = std::fs::read_to_string(out.path()).unwrap();
    assert_eq!(o.code, Some(0), "{o:?} {text}");
    assert_eq!(text, "late\nend\n", "the view of the call's time");
}

fn nix_euid() -> u32 {
    // SAFETY-free: geteuid through the std's view of /proc.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|u| u.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// Standbys taken at once, from several threads, each run their own call.
#[test]
fn standbys_taken_at_once_run_their_own_calls() {
    let fx = Fixture::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let plan = fx.plan(
                    &format!("echo call {i}; hostname"),
                    BackendChoice::Native,
                    Vec::new(),
                );
                s.spawn(move || run_plan_as(&plan, None, true))
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let ran = h.join().unwrap();
            assert_eq!(ran.stdout, format!("call {i}\nefr-sandbox\n"), "{ran:?}");
        }
    });
}

/// A terminal on the stdio of a call in standby gets the call its own pty, relayed, as a
/// fresh launcher does (the pty's socket goes to the waiting init with its stdio).
#[test]
fn a_terminal_through_a_standby_gets_the_calls_own_pty() {
    use std::io::Read;
    let fx = Fixture::new();
    let (master, slave) = common::sys::pty_pair(30, 100).unwrap();
    let plan = fx.plan(
        "tty; test -t 0 && test -t 1 && echo both-ttys; stty size; echo end",
        BackendChoice::Native,
        Vec::new(),
    );
    let running = launcher()
        .spawn_warm()
        .unwrap()
        .go(
            &plan,
            Io::from(slave.try_clone().unwrap()),
            Io::from(slave.try_clone().unwrap()),
            Io::null(),
        )
        .unwrap();
    drop(slave);
    // The user's side of the terminal: read until the call's output ends (EIO once no
    // process holds the slave).
    let reader = std::thread::spawn(move || {
        let mut m = master;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = m.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let (o, st) = running.wait().unwrap();
    let seen = reader.join().unwrap();
    assert!(st.success(), "{o:?} {seen}");
    assert!(seen.contains("/dev/pts/"), "{seen}");
    assert!(seen.contains("both-ttys"), "{seen}");
    assert!(
        seen.contains("30 100"),
        "the size of the user's terminal: {seen}"
    );
    assert!(seen.contains("end"), "{seen}");
}
