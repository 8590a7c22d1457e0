//! The sandbox's init and the line's last steps before exec, shared by both backends (and
//! the unsandboxed launch, which uses only [`exec_line`]).
//!
//! The init (pid 1 of the sandbox's pid namespace) is not dumpable, leads a session of its
//! own (with the call's pty as controlling terminal when there is one, see [`crate::pty`]),
//! hands the signals a process sent it (the launcher's [`crate::signals::FORWARDED_SIGNALS`])
//! to the line's process group (a ^C on the call's pty reaches the line's foreground group
//! directly), SIGCONT to the line's group and, as a shell does, the
//! SIGHUP of its pty's hang-up, reaps, reports a stop of the line's main process
//! (`stopped N`), and when the line's main process ends it kills everything else in the
//! namespace, then reports the line's status on the report pipe: `exit code N` or
//! `exit signal N`. It dies with the launcher (PR_SET_PDEATHSIG), and where that signal
//! cannot reach (the launcher died before the init set it, or bubblewrap's process in
//! between) it sees the launcher's end on a pidfd of it and ends the call itself.

use std::os::fd::RawFd;

use serde::{Deserialize, Serialize};

use crate::restrict::lockdown::LandlockSpec;
use crate::sys;

/// What the line's process does between fork and exec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InnerSpec {
    /// The shell that runs the line.
    pub shell: String,
    /// Its command line: `SHELL -c LINE`, or the shell's own arguments
    /// (`efr_launcher::plan::Plan::argv`).
    pub argv: Vec<String>,
    /// The line's `RLIMIT_NPROC` (the plan's `processes_max`).
    #[serde(default)]
    pub processes_max: Option<u64>,
    /// The directory the line starts in.
    pub cwd: String,
    /// `NAME=value` strings.
    pub env: Vec<String>,
    /// Landlock rules; none for an unsandboxed line.
    #[serde(default)]
    pub landlock: Option<LandlockSpec>,
    /// Refuse to run the line (a setup error) when the kernel enforces none of `landlock`.
    #[serde(default)]
    pub require_landlock: bool,
    /// Load our seccomp programs in the line (`Some(net_view)`); `None` when bwrap already
    /// loaded them, or for an unsandboxed line.
    #[serde(default)]
    pub seccomp: Option<bool>,
    /// Drop every capability and lock the securebits.
    #[serde(default)]
    pub drop_caps: bool,
    /// Our seccomp programs were loaded before this process started (by bwrap).
    #[serde(default)]
    pub seccomp_preloaded: bool,
    /// The init binds the proxy's sockets and hands them to the call's proxy (a call with
    /// a proxy).
    #[serde(default)]
    pub egress: Option<crate::child::egress::EgressSpec>,
    /// The writes the init supervises (a contained line); see [`crate::supervise`].
    #[serde(default)]
    pub supervise: Option<crate::supervise::SuperviseSpec>,
    /// The call's own pty, when the launcher's stdio holds a terminal (see [`crate::pty`]).
    #[serde(default)]
    pub terminal: Option<crate::pty::TerminalSpec>,
    /// A pidfd of the launcher, open in the init (a contained line): the init ends the call
    /// when the launcher has ended.
    #[serde(default)]
    pub launcher_pidfd: Option<i32>,
    /// The call's own file systems (`/tmp`, `/dev/shm`) the init watches while the line
    /// runs: each one found full is reported once (`full PATH`, see `FullWatch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch_full: Vec<String>,
    /// TESTS ONLY (the plan's `test_weaken`): entries left out of the EPERM program.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seccomp_drop: Vec<String>,
}

/// The messages of the report pipe, one per line.
pub fn report(fd: RawFd, msg: &str) {
    crate::child::report::write_line(fd, msg);
}

/// Every signal but SIGKILL and SIGSTOP: the line starts with all of them at their default
/// (what the launcher, bubblewrap and the init ignored or handled is theirs, not the
/// line's; libc refuses the numbers it keeps for itself, which is fine).
fn all_signals() -> Vec<libc::c_int> {
    (1..=64)
        .filter(|&s| s != libc::SIGKILL && s != libc::SIGSTOP)
        .collect()
}

/// The launcher has ended: nothing of the call may outlive it. Kills every process of the
/// namespace and ends the init (its namespace goes with it).
fn launcher_gone() -> ! {
    let _ = sys::kill(-1, libc::SIGKILL);
    sys::exit_now(crate::exit_code::of_signal(libc::SIGKILL))
}

/// How often the init looks at the watched file systems, in milliseconds.
const FULL_POLL_MS: i32 = 100;

/// The file systems of [`InnerSpec::watch_full`]: the init looks at each every
/// [`FULL_POLL_MS`] while the line runs and once at its end, and reports `full PATH` the
/// first time one has less than 0.5% of its size (at least 64 KiB) left: a write there
/// failed, or the next one will. A fill that the line undoes within one look is not seen.
#[derive(Debug)]
struct FullWatch {
    paths: Vec<(String, bool)>,
}

impl FullWatch {
    fn new(paths: &[String]) -> FullWatch {
        FullWatch {
            paths: paths.iter().map(|p| (p.clone(), false)).collect(),
        }
    }

    /// The poll timeout of the init's loop.
    fn timeout(&self) -> i32 {
        if self.paths.iter().any(|(_, seen)| !seen) {
            FULL_POLL_MS
        } else {
            -1
        }
    }

    fn check(&mut self, report_fd: RawFd) {
        for (p, seen) in &mut self.paths {
            if *seen {
                continue;
            }
            if let Ok((size, free)) = sys::statfs_bytes(p) {
                if free <= (size / 200).max(64 << 10) {
                    *seen = true;
                    crate::child::report::send(
                        report_fd,
                        &crate::child::report::Report::Full(p.to_string()),
                    );
                }
            }
        }
    }
}

/// Enters the Landlock domain of `l` (no_new_privs set by the caller); a domain that is
/// not enforced is an error when the spec requires Landlock.
fn enter_landlock(
    spec: &InnerSpec,
    l: &crate::restrict::lockdown::LandlockSpec,
) -> Result<crate::status::LandlockReport, crate::restrict::lockdown::LandlockError> {
    let r = crate::restrict::lockdown::restrict(l)?;
    if spec.require_landlock && r.status == efr_sandbox_wire::Enforcement::NotEnforced {
        return Err(crate::restrict::lockdown::LandlockError::Required);
    }
    Ok(r)
}

/// What the init did for the line before forking it.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The Landlock domain the init entered (the line nests its own in it).
    pub landlock: Option<crate::status::LandlockReport>,
    /// The line's notification filter is in force already (loaded by the line's process
    /// itself, forked sharing the init's fd table: see
    /// [`crate::supervise::fork_supervised`]).
    pub supervised: bool,
    /// A contained line: a process group of its own, and the call's pty when it has one
    /// (see [`crate::pty::attach_line`]).
    pub contained: bool,
    /// The slave of the call's pty and the fds of 0-2 the line gets it on (`None`: the call
    /// has no pty).
    pub terminal: Option<crate::pty::LineEnd>,
}

/// The line's process: closes every fd but 0-2 (and the report fd, close-on-exec), applies
/// the restrictions, reports `ready` and execs `SHELL -c LINE`. Never returns.
pub fn exec_line(spec: &InnerSpec, report_fd: RawFd, pre: Prepared) -> ! {
    sys::default_signals(&all_signals());
    if pre.contained {
        if let Err(e) = crate::pty::attach_line(pre.terminal.as_ref()) {
            crate::child::report::setup_error(report_fd, e);
            sys::exit_now(crate::exit_code::INIT_FAILED);
        }
    }
    let rfd = if report_fd != 3 {
        if sys::dup2(report_fd, 3).is_err() {
            sys::exit_now(crate::exit_code::INIT_FAILED);
        }
        3
    } else {
        3
    };
    // The report fd must not reach the line: it could write the launcher's report.
    if let Err(e) = sys::set_cloexec(rfd) {
        crate::child::report::setup_error(rfd, format!("the report fd {rfd} close-on-exec: {e}"));
        sys::exit_now(crate::exit_code::INIT_FAILED);
    }
    let sup = pre.supervised;
    let first_closed = 4;
    let closed = sys::close_from(first_closed);
    let fail = |msg: String| -> ! {
        crate::child::report::setup_error(rfd, msg);
        sys::exit_now(crate::exit_code::INIT_FAILED)
    };
    // Every fd of the init and the launcher beyond these stays out of the line.
    if let Err(e) = closed {
        fail(format!(
            "closing the line's fds from {first_closed} up: {e}"
        ));
    }
    if let Err(e) = sys::chdir(&spec.cwd) {
        fail(format!("cwd {}: {e}", spec.cwd));
    }
    if spec.landlock.is_some() || spec.seccomp.is_some() || spec.drop_caps || sup {
        if let Err(e) = sys::no_new_privs() {
            fail(format!("no_new_privs: {e}"));
        }
    }
    // Under the init's domain (see `run_init`), the line nests one of its own with the
    // scopes only: it cannot signal the init, which can still signal it and read its memory.
    let mut ll = pre.landlock;
    match (&ll, &spec.landlock) {
        (Some(_), Some(l)) if l.scopes => {
            if let Err(e) = crate::restrict::lockdown::nest_scopes() {
                fail(e.to_string());
            }
        }
        (None, Some(l)) => match enter_landlock(spec, l) {
            Ok(r) => ll = Some(r),
            Err(e) => fail(e.to_string()),
        },
        _ => {}
    }
    // The line's filters: the EPERM one, and the supervisor's with its listener. Where this
    // process loads both (the native backend), they are one program, loaded with the
    // listener as this process started (one load, and one filter run per call); bubblewrap
    // loads the EPERM one for the whole sandbox, and the line's fork then adds the
    // supervisor's own.
    let merged = sup && !spec.seccomp_preloaded;
    let progs = match spec.seccomp {
        Some(_) if merged => None,
        Some(nv) => match crate::restrict::seccomp::program_without(nv, &spec.seccomp_drop) {
            Ok(p) => Some(p),
            Err(e) => fail(e.to_string()),
        },
        None => None,
    };
    // Set while the process may still raise it; the line cannot raise it back (no
    // capability, no_new_privs).
    if let Some(n) = spec.processes_max {
        if let Err(e) = sys::set_nproc(n) {
            fail(format!("RLIMIT_NPROC {n}: {e}"));
        }
    }
    if spec.drop_caps {
        if let Err(e) = crate::restrict::caps::drop_all() {
            fail(format!("dropping capabilities: {e}"));
        }
    }
    if let Some(p) = &progs {
        if let Err(e) = crate::restrict::seccomp::load(p) {
            fail(e.to_string());
        }
    }
    let ready = crate::child::report::Ready {
        landlock: ll,
        seccomp: progs.is_some() || spec.seccomp_preloaded || (merged && spec.seccomp.is_some()),
        supervised: sup,
    };
    crate::child::report::send(rfd, &crate::child::report::Report::Ready(ready));
    let e = sys::execve(&spec.shell, &spec.argv, &spec.env);
    fail(format!("exec {}: {e}", spec.shell))
}

/// What the init does with the line's listener after a poll (see
/// `crate::supervise::Lazy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListenerTurn {
    /// A supervised call waits: start the supervisor.
    Start,
    /// No process holds the line's filter any more (POLLHUP without POLLIN: the line's
    /// tree is exiting), so none ever will: the listener is done with. Polled on, it says
    /// POLLHUP at once on every turn of the loop until the line can be reaped: that was a
    /// spin of up to 700 turns at the end of a call that wrote nothing, beside the exiting
    /// line (`perf stat -e syscalls:sys_enter_statfs`: 2 to 1394 a launch).
    Done,
    /// Nothing for the listener (or it was not polled).
    Wait,
}

/// The turn for the listener's `revents` (`None`: not polled).
fn listener_turn(revents: Option<libc::c_short>) -> ListenerTurn {
    match revents {
        Some(e) if e & libc::POLLIN != 0 => ListenerTurn::Start,
        Some(e) if e & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 => ListenerTurn::Done,
        _ => ListenerTurn::Wait,
    }
}

/// The init cannot set the call up: `msg` is the call's setup error, and the init ends.
fn init_failed(report_fd: RawFd, msg: impl std::fmt::Display) -> ! {
    crate::child::report::setup_error(report_fd, msg);
    sys::exit_now(crate::exit_code::INIT_FAILED)
}

/// Init step 1: not dumpable (the line, same uid, may not ptrace the init or take its
/// fds), then the reaper of the call's orphans, so that none outlives the line unseen.
fn harden_init(report_fd: RawFd) {
    for (op, arg, what) in [
        (
            libc::PR_SET_DUMPABLE,
            0,
            "prctl(PR_SET_DUMPABLE, 0) of the init",
        ),
        (
            libc::PR_SET_CHILD_SUBREAPER,
            1,
            "prctl(PR_SET_CHILD_SUBREAPER) of the init",
        ),
    ] {
        if let Err(e) = sys::prctl(op, arg, 0) {
            init_failed(report_fd, format!("{what}: {e}"));
        }
    }
}

/// Init step 2: the signal pipe of what the launcher hands on (`fwd`, see
/// `crate::signals::FORWARDED_SIGNALS`) and of what the init acts on itself.
fn init_signals(fwd: &[libc::c_int], report_fd: RawFd) -> RawFd {
    let mut sigs = fwd.to_vec();
    sigs.extend([
        libc::SIGCHLD,
        libc::SIGCONT,
        crate::signals::LAUNCHER_DEATH_SIGNAL,
    ]);
    match sys::signal_pipe(&sigs) {
        Ok(r) => r,
        Err(e) => init_failed(report_fd, format!("init signals: {e}")),
    }
}

/// Init step 3: a session of the call's own: no process of it has the user's terminal as
/// controlling terminal; the call's pty, when it has one, is that of the init and the line.
fn own_session(spec: &InnerSpec, report_fd: RawFd) -> Prepared {
    let mut pre = Prepared {
        contained: true,
        ..Default::default()
    };
    if let Err(e) = crate::pty::leave_session() {
        init_failed(report_fd, e);
    }
    if let Some(t) = &spec.terminal {
        match crate::pty::open_inside(t) {
            Ok(l) => pre.terminal = Some(l),
            Err(e) => init_failed(report_fd, e),
        }
    }
    pre
}

/// Init step 4: the proxy's sockets are bound in the call's network namespace and sent to
/// the call's proxy before the line exists: the line finds them listening, and never holds
/// them (the init's copies are closed by then). The proxy's answer is watched while the
/// line starts ([`InitWatch::egress_answer`]).
fn bind_egress(spec: &InnerSpec, report_fd: RawFd) -> Option<crate::child::egress::Pending> {
    let e = spec.egress.as_ref()?;
    match crate::child::egress::Egress::bind(e).and_then(|b| b.send()) {
        Ok(p) => Some(p),
        Err(e) => init_failed(report_fd, e),
    }
}

/// Init step 5: a supervised call's init enters the line's Landlock domain before forking
/// it: the supervisor then can do nothing the line could not.
fn enter_supervised_domain(spec: &InnerSpec, pre: &mut Prepared, report_fd: RawFd) {
    if spec.supervise.is_none() {
        return;
    }
    if !crate::supervise::available() {
        init_failed(
            report_fd,
            "the kernel cannot supervise writes (seccomp user notification)",
        );
    }
    if let Some(l) = &spec.landlock {
        if let Err(e) = sys::no_new_privs() {
            init_failed(report_fd, format!("no_new_privs: {e}"));
        }
        match enter_landlock(spec, l) {
            Ok(r) => pre.landlock = Some(r),
            Err(e) => init_failed(report_fd, e),
        }
    }
}

/// The line forked (init step 6).
struct Forked {
    /// The line's main process.
    main: libc::pid_t,
    /// The line's listener, until its child has said where it is (a supervised line).
    pending: Option<crate::supervise::PendingListener>,
    /// The init's copy of what the line's child took (a supervised line): dropped once the
    /// child has left the init's fd table (see `fork_supervised`).
    held: Option<Prepared>,
}

/// Init step 6: forks the line, supervised (its filter with its listener, loaded by the
/// line's process as it starts) or not.
fn fork_line(spec: &InnerSpec, report_fd: RawFd, pre: Prepared) -> Forked {
    if spec.supervise.is_none() {
        return match sys::fork() {
            Ok(0) => exec_line(spec, report_fd, pre),
            Ok(main) => {
                // The line holds the call's pty now; the init keeps it as controlling
                // terminal only (an open slave here would keep its master from ever
                // reading EOF).
                drop(pre.terminal);
                Forked {
                    main,
                    pending: None,
                    held: None,
                }
            }
            Err(e) => init_failed(report_fd, format!("fork: {e}")),
        };
    }
    // On the native backend the EPERM program with the supervised table merged in (one
    // filter run per call), under bubblewrap (which loaded the EPERM one) the table alone,
    // after the line's own refusals. (Only the programs used are built: about 0.03 ms
    // each.)
    let prog = match spec.seccomp {
        Some(nv) if !spec.seccomp_preloaded => {
            let bodies = crate::supervise::filter::bodies();
            match crate::restrict::seccomp::program_with(nv, &spec.seccomp_drop, &bodies) {
                Ok(p) => p,
                Err(e) => init_failed(report_fd, e),
            }
        }
        _ => crate::supervise::filter::program(),
    };
    let line_only = spec
        .seccomp_preloaded
        .then(crate::supervise::filter::line_only);
    // The line's child takes `pre` from its own copy of this slot; the init's copy stays
    // here until the child has left the init's fd table (see `fork_supervised`).
    let mut slot = Some(pre);
    let forked =
        crate::supervise::fork_supervised(&prog, line_only.as_ref(), || match slot.take() {
            Some(pre) => exec_line(spec, report_fd, pre),
            None => sys::exit_now(crate::exit_code::INIT_FAILED),
        });
    match forked {
        Ok((main, l)) => Forked {
            main,
            pending: Some(l),
            held: slot,
        },
        Err(e) => init_failed(report_fd, e),
    }
}

/// The init's watch of the running line (init step 8): reaps, hands signals on, starts
/// the supervisor, takes the proxy's answer, looks at the call's file systems.
struct InitWatch {
    report_fd: RawFd,
    /// The line's main process.
    main: libc::pid_t,
    sig_r: RawFd,
    /// The signals the launcher hands on.
    fwd: Vec<libc::c_int>,
    /// The launcher's pidfd.
    launcher: Option<RawFd>,
    /// The line's listener and, once started, its supervisor.
    lazy: Option<crate::supervise::Lazy>,
    /// See [`Forked::held`].
    held: Option<Prepared>,
    /// The call's proxy, until it answered.
    egress: Option<crate::child::egress::Pending>,
    full: FullWatch,
    /// The lock files of granted files the line makes: those left at its end go (the
    /// user's next `git config` would fail on one with `File exists`).
    locks: Option<std::sync::Arc<crate::supervise::MadeLocks>>,
}

impl InitWatch {
    /// Watches until the line's main process ended: its wait status.
    fn run(&mut self) -> libc::c_int {
        loop {
            if let Some(st) = self.reap() {
                return st;
            }
            self.wait_turn();
            self.egress_answer();
            self.full.check(self.report_fd);
            self.hand_on_signals();
        }
    }

    /// Reaps whatever ended: the main process's wait status once it ended. A stop of the
    /// line (^Z on the call's pty) is reported: the launcher stops its job too and
    /// continues the line through the init (SIGCONT).
    fn reap(&self) -> Option<libc::c_int> {
        let mut status = None;
        while let Ok(Some((pid, st))) = sys::waitpid(-1, libc::WNOHANG | libc::WUNTRACED) {
            if pid != self.main {
                continue;
            }
            if libc::WIFSTOPPED(st) {
                crate::child::report::send(
                    self.report_fd,
                    &crate::child::report::Report::Stopped(libc::WSTOPSIG(st)),
                );
            } else {
                status = Some(st);
            }
        }
        status
    }

    /// The line's processes killed, the lock files it left removed, the init ended.
    fn end_now(&self) -> ! {
        let _ = sys::kill(-1, libc::SIGKILL);
        self.remove_locks();
        launcher_gone()
    }

    fn remove_locks(&self) {
        if let Some(l) = &self.locks {
            l.remove_left();
        }
    }

    /// One poll: the launcher's end, the line's listener's turn.
    fn wait_turn(&mut self) {
        let mut fds = vec![(self.sig_r, libc::POLLIN)];
        fds.extend(self.launcher.map(|fd| (fd, libc::POLLIN)));
        let at = self.lazy.as_ref().map(|l| {
            fds.push((l.fd(), libc::POLLIN));
            fds.len() - 1
        });
        fds.extend(self.egress.as_ref().map(|p| (p.fd(), libc::POLLIN)));
        let timeout = match (&self.egress, self.full.timeout()) {
            (Some(p), -1) => p.ms_left(),
            (Some(p), t) => t.min(p.ms_left()),
            (None, t) => t,
        };
        let Ok(r) = sys::poll(&fds, timeout) else {
            return;
        };
        if self.launcher.is_some()
            && r.get(1)
                .is_some_and(|&e| e & (libc::POLLIN | libc::POLLHUP) != 0)
        {
            self.end_now();
        }
        match listener_turn(at.and_then(|i| r.get(i).copied())) {
            ListenerTurn::Start => self.listener_ready(),
            ListenerTurn::Done => self.lazy = None,
            ListenerTurn::Wait => {}
        }
    }

    /// The line's child has said where its listener is (or has failed to make it): it has
    /// left the init's fd table, and what it needed from it is the init's. Or a supervised
    /// call waits: the supervisor starts. On failure the line, which waits on its first
    /// write, is ended rather than let run unsupervised.
    fn listener_ready(&mut self) {
        let Some(l) = self.lazy.take() else {
            return;
        };
        let was_pending = l.pending();
        match l.ready() {
            Ok(next) => self.lazy = next,
            Err(e) => {
                crate::child::report::setup_error(self.report_fd, e);
                let _ = sys::kill(self.main, libc::SIGKILL);
            }
        }
        if was_pending {
            drop(self.held.take());
        }
    }

    /// The proxy's answer (or a close, or none in time): a call whose proxy did not take
    /// its sockets ends, as it would not have started before.
    fn egress_answer(&mut self) {
        if let Some(answer) = self.egress.as_mut().and_then(|p| p.answer()) {
            self.egress = None;
            if let Err(e) = answer {
                crate::child::report::setup_error(self.report_fd, e);
                let _ = sys::kill(self.main, libc::SIGKILL);
            }
        }
    }

    /// The signals the init caught, acted on.
    fn hand_on_signals(&self) {
        let mut buf = [0u8; 64];
        let Ok(n) = sys::read(self.sig_r, &mut buf) else {
            return;
        };
        for pair in buf[..n].chunks_exact(2) {
            let (sig, from_kernel) = (libc::c_int::from(pair[0]), pair[1] == 1);
            if sig == crate::signals::LAUNCHER_DEATH_SIGNAL {
                self.end_now();
            }
            // To the line's group (the line leads it; before it has made its group, to the
            // line alone): what a process sent, as the caller's terminal or a group signal
            // would have reached it; the SIGHUP of the call's pty hanging up (the kernel
            // tells the session leader only; a shell passes it on to its job); SIGCONT, as
            // a shell's `fg` does.
            let to_group = if from_kernel {
                sig == libc::SIGHUP
            } else {
                self.fwd.contains(&sig) || sig == libc::SIGCONT
            };
            if to_group && sys::kill(-self.main, sig).is_err() {
                let _ = sys::kill(self.main, sig);
            }
        }
    }

    /// Init step 9: the line's main process ended with `st`: the rest of the namespace is
    /// ended and reaped, the lock files left removed, and only then the line's end is
    /// reported (the launcher then ends at once, without waiting for the init's exit: see
    /// `run`).
    fn finish(mut self, st: libc::c_int) -> ! {
        self.full.check(self.report_fd);
        // A refusal that came while the line was ending is still the call's setup error.
        if let Some(Err(e)) = self.egress.as_mut().and_then(|p| p.answer()) {
            crate::child::report::setup_error(self.report_fd, e);
        }
        let _ = sys::kill(-1, libc::SIGKILL);
        loop {
            match sys::waitpid(-1, 0) {
                Ok(Some(_)) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        self.remove_locks();
        // The call is over: its output ends as soon as the launcher closes its own copies,
        // not after this process's teardown. (Only 0 to 2: other fds of the init may still
        // be owned by its supervisor's thread, ending too.)
        sys::stdio_to_null();
        let report = |r| crate::child::report::send(self.report_fd, &r);
        if libc::WIFSIGNALED(st) {
            let s = libc::WTERMSIG(st);
            report(crate::child::report::Report::ExitSignal(s));
            sys::exit_now(crate::exit_code::of_signal(s))
        }
        let c = libc::WEXITSTATUS(st);
        report(crate::child::report::Report::ExitCode(c));
        sys::exit_now(c)
    }
}

/// The init: forks the line, forwards signals, reaps, ends the rest when the line ends and
/// reports its status. Never returns. In steps: the launcher's end checked, the init
/// hardened (1), its signals (2), its session (3), the proxy's sockets (4), the
/// supervisor's Landlock domain (5), the line forked (6), the init's capabilities dropped
/// and the supervisor made ready (7), the line watched (8), the call ended (9).
pub fn run_init(spec: &InnerSpec, report_fd: RawFd) -> ! {
    let launcher = spec.launcher_pidfd.filter(|&fd| sys::fd_open(fd));
    if launcher.is_some_and(sys::pidfd_ended) {
        launcher_gone();
    }
    harden_init(report_fd);
    let fwd = crate::signals::forwarded_signals();
    let sig_r = init_signals(&fwd, report_fd);
    let mut pre = own_session(spec, report_fd);
    let egress = bind_egress(spec, report_fd);
    let sockets = spec
        .supervise
        .as_ref()
        .map(|sv| {
            crate::supervise::SocketRules::new(&sv.socket_dirs, &sv.sockets)
                .own_loopback(sv.own_loopback)
        })
        .unwrap_or_default();
    enter_supervised_domain(spec, &mut pre, report_fd);
    pre.supervised = spec.supervise.is_some();
    let Forked {
        main,
        pending,
        held,
    } = fork_line(spec, report_fd, pre);
    // Step 7. The ports below 1024 are bound and the line forked: the init needs no
    // capability any more (under bwrap it has none to drop). The supervisor makes the
    // line's writes: with a capability it could write what the line may not
    // (CAP_DAC_OVERRIDE).
    if spec.drop_caps {
        if let Err(e) = crate::restrict::caps::drop_all() {
            let _ = sys::kill(main, libc::SIGKILL);
            init_failed(report_fd, format!("init dropping capabilities: {e}"));
        }
    }
    // The line's listener, once its child has said where it is; its supervisor starts with
    // the line's first supervised call (see `crate::supervise::Lazy`). The protected files
    // with several links are found first, while the line goes on to its exec: a protected
    // directory may hold thousands of files (the walk stops at 4096), and the line must not
    // wait for them.
    let lazy = match (pending, &spec.supervise) {
        (Some(p), Some(sv)) => Some(crate::supervise::Lazy::new(
            p,
            sv.clone(),
            sockets,
            crate::supervise::Linked::find(sv, report_fd),
            report_fd,
        )),
        _ => None,
    };
    let mut w = InitWatch {
        report_fd,
        main,
        sig_r,
        fwd,
        launcher,
        locks: lazy.as_ref().map(crate::supervise::Lazy::locks),
        lazy,
        held,
        egress,
        full: FullWatch::new(&spec.watch_full),
    };
    let st = w.run();
    w.finish(st)
}

#[cfg(test)]
mod tests {
    use super::{ListenerTurn, listener_turn};

    #[test]
    fn a_hung_up_listener_is_done_with_and_a_waiting_call_starts_the_supervisor() {
        assert_eq!(listener_turn(Some(libc::POLLHUP)), ListenerTurn::Done);
        assert_eq!(listener_turn(Some(libc::POLLERR)), ListenerTurn::Done);
        assert_eq!(listener_turn(Some(libc::POLLNVAL)), ListenerTurn::Done);
        // A call that waits still starts the supervisor, even as the rest hangs up.
        assert_eq!(listener_turn(Some(libc::POLLIN)), ListenerTurn::Start);
        assert_eq!(
            listener_turn(Some(libc::POLLIN | libc::POLLHUP)),
            ListenerTurn::Start
        );
        assert_eq!(listener_turn(Some(0)), ListenerTurn::Wait);
        assert_eq!(listener_turn(None), ListenerTurn::Wait);
    }
}
