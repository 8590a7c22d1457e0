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

/// The line ran but neither its code nor its signal is known (the init's report was lost):
/// `efr-launch` exits with it and a caller folding status lines
/// (`status::Outcome::exit_status`) says the same, through [`of_end`].
pub const LINE_END_UNKNOWN: i32 = INIT_FAILED;

/// The shell-style status of a line's end as a status line gives it: the code, or 128+N
/// for a signal, or [`LINE_END_UNKNOWN`]. The one mapping of the launcher's own exit and
/// of [`crate::status::Outcome::exit_status`].
pub fn of_end(code: Option<i32>, signal: Option<i32>) -> i32 {
    match (code, signal) {
        (Some(c), _) => c,
        (None, Some(s)) => of_signal(s),
        (None, None) => LINE_END_UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Outcome;

    /// `efr-launch`'s exit and a caller's fold of its status lines agree on every end,
    /// the unknown one too (the launcher exited 1 where the fold said 127).
    #[test]
    fn launcher_exit_and_folded_status_agree() {
        for (line, code, signal) in [
            (
                r#"{"event":"exited","code":3,"duration_ms":1}"#,
                Some(3),
                None,
            ),
            (
                r#"{"event":"exited","signal":9,"duration_ms":1}"#,
                None,
                Some(9),
            ),
            (r#"{"event":"exited","duration_ms":1}"#, None, None),
        ] {
            let folded = Outcome::from_lines(line).exit_status();
            assert_eq!(crate::run::line_exit(code, signal), folded, "{line}");
        }
        assert_eq!(crate::run::line_exit(None, None), INIT_FAILED);
    }
}
