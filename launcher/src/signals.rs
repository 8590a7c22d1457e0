//! The launcher's signal tables, each entry with why: which signals reach a contained line
//! through the launcher and its init, which reach an unsandboxed one, which the launcher
//! (and bubblewrap's process) ignores, and the one that ends a call from outside. A leaf:
//! [`crate::run`], [`crate::child::init`], [`crate::backend`] and [`crate::standby`] read
//! these tables, and none of them depends on another for it.

/// The signals that reach a contained line through the launcher, with why. The line runs
/// in a session of its own (see [`crate::child::init`]), out of its caller's process group, so a
/// signal sent to that group (a terminal's ^C when stdio is not the terminal, `kill -INT
/// -PGID` of a harness, a timeout) or to the launcher reaches the line only this way: the
/// launcher hands each one, whoever sent it, to the call's init, which hands it to the
/// line's process group, as the terminal would have. Under an unsandboxed launch the line
/// is in the caller's group and gets group signals itself: the launcher hands on only
/// SIGINT, SIGTERM and SIGHUP, and only when a process sent them to the launcher.
pub const FORWARDED_SIGNALS: &[(libc::c_int, &str)] = &[
    (libc::SIGINT, "^C, a harness's interrupt"),
    (libc::SIGTERM, "a harness's or timeout's stop"),
    (libc::SIGHUP, "the caller's terminal went away"),
    (libc::SIGQUIT, "a terminal's ^\\ is the line's to act on"),
    (
        libc::SIGUSR1,
        "sent to a group by tools that signal progress (dd, a harness)",
    ),
    (libc::SIGUSR2, "as SIGUSR1"),
    (
        libc::SIGALRM,
        "a timer signal sent to the group (`kill -ALRM -PGID`)",
    ),
    (libc::SIGVTALRM, "a timer signal, as SIGALRM"),
    (libc::SIGPROF, "a profiler's timer signal, as SIGALRM"),
    (
        libc::SIGIO,
        "I/O readiness sent to a group (F_SETOWN with a negative pid)",
    ),
];

/// The signals handed on to an unsandboxed line, and only when a process sent them to the
/// launcher (a group signal or a terminal's reached the line itself).
pub const UNSANDBOXED_FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The signals the launcher ignores (and bubblewrap's process with it), with why: they end
/// a process by default, and the launcher's death would end the call as "the sandbox ended
/// before the line did", but they are not the line's to get.
pub const IGNORED_SIGNALS: &[(libc::c_int, &str)] = &[
    (
        libc::SIGPWR,
        "a power-failure notice sent to every process (`kill -PWR -1` reaches the line itself)",
    ),
    (
        libc::SIGXCPU,
        "the CPU-time limit is the line's: the launcher uses almost none",
    ),
    (
        libc::SIGXFSZ,
        "the file-size limit: the launcher's status writes fail instead",
    ),
];

/// The numbers of [`FORWARDED_SIGNALS`].
pub fn forwarded_signals() -> Vec<libc::c_int> {
    FORWARDED_SIGNALS.iter().map(|&(s, _)| s).collect()
}

/// The signal that ends a call from outside: the launcher sends it to the init when the
/// caller died, and the native backend's init (cold, or a standby's once its call came)
/// gets it when the launcher dies (its `PR_SET_PDEATHSIG`). Caught, so that the init ends
/// the call itself (every process killed, the lock files the line left removed:
/// [`crate::supervise::MadeLocks`]) rather than be killed with its work undone. Until the
/// init catches it, the kernel drops it (the init is pid 1 of its namespace, and the
/// signal's default action is not SIGKILL's), and [`crate::child::init::run_init`] sees the launcher's end on
/// its pidfd, first thing and in its loop. A process of the call that sends it ends its
/// own call, which it could do anyway.
pub(crate) const LAUNCHER_DEATH_SIGNAL: libc::c_int = libc::SIGPWR;
