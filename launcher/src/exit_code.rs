//! The exit statuses the launcher's own processes end with when they are not the line's
//! (the line's status is passed on as it is: its code, or 128+N for a signal). Every
//! `exit_now` and `return` of a status in the crate names one of these.

/// `efr-launch`: the line did not run (a `setup_error` status line says why).
pub const SETUP_ERROR: i32 = 125;

/// The backend's first child (the native backend's clone child before the init, the
/// process that execs bubblewrap, bubblewrap's init before it reads its spec) failed: it
/// reports why as a `setup_error` on the report fd when it can.
pub const BACKEND_FAILED: i32 = 126;

/// The init or the line's process failed before the line's exec (a `setup_error` on the
/// report fd says why); also the status of a line whose end is unknown (no code and no
/// signal).
pub const INIT_FAILED: i32 = 127;

/// `efr-launch`: bad command line (usage printed on stderr).
pub const USAGE: i32 = 2;

/// A line (or the init) killed by signal `N` ends with `SIGNAL_BASE + N`, as a shell says.
pub const SIGNAL_BASE: i32 = 128;

/// The shell-style status of death by `sig`.
pub fn of_signal(sig: libc::c_int) -> i32 {
    SIGNAL_BASE + sig
}

/// `efr-launch`: the line ran but neither its code nor its signal is known (the init's report
/// was lost). (A caller folding status lines, `status::Outcome::exit_status`, says
/// [`INIT_FAILED`] for the same case.)
pub const LINE_END_UNKNOWN: i32 = 1;
