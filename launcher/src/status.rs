//! The JSON lines `efr-launch` writes on its status fd, one object per line: the types are
//! the wire's (`efr_sandbox_wire::launcher_status`, re-exported here); [`Outcome`] folds them.

pub use efr_sandbox_wire::launcher_status::{CgroupKind, LandlockReport, StatusLine};

/// What a run's status lines say, folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The `started` line, when the line started.
    pub started: Option<StatusLine>,
    /// The `setup_error` line's message: the sandbox could not start, the line did not run.
    pub setup_error: Option<String>,
    /// The line's exit code (none when a signal ended it or it did not end).
    pub code: Option<i32>,
    /// The signal that ended the line.
    pub signal: Option<i32>,
    /// Milliseconds from the start of the setup to the line's end (0 without an `exited`).
    pub duration_ms: u64,
    /// Paths whose writes the sandbox refused.
    pub denials: Vec<String>,
    /// The call's own file systems (`/tmp`, `/dev/shm`) that were full.
    pub full_tmpfs: Vec<String>,
    /// Programs of descendants the launcher could not end.
    pub survivors: Vec<String>,
    /// Path sockets the call was refused.
    pub socket_denials: Vec<String>,
    /// Protected files that had more than one hard link at launch.
    pub linked_protected: Vec<String>,
    /// Ports of the call's own loopback where a connect was refused (the host's port needs
    /// a `tcp` host grant).
    pub loopback_refused: Vec<u16>,
    /// The denials that would have left code git runs where git reads it, with why.
    pub git_denials: Vec<efr_sandbox_wire::GitDenial>,
    /// The writes the host's own file systems refused (`OP PATH: WHY`): notes, no denials.
    pub host_refused: Vec<String>,
}

impl Outcome {
    /// Folds status lines (unparsable lines are skipped).
    pub fn from_lines(text: &str) -> Outcome {
        let mut o = Outcome::default();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            match StatusLine::parse(l) {
                Ok(s @ StatusLine::Started { .. }) => o.started = Some(s),
                Ok(StatusLine::SetupError { message }) => o.setup_error = Some(message),
                Ok(StatusLine::Exited {
                    code,
                    signal,
                    duration_ms,
                    denials,
                    full_tmpfs,
                    survivors,
                    socket_denials,
                    linked_protected,
                    loopback_refused,
                    git_denials,
                    host_refused,
                }) => {
                    o.code = code;
                    o.signal = signal;
                    o.duration_ms = duration_ms;
                    o.denials = denials;
                    o.full_tmpfs = full_tmpfs;
                    o.survivors = survivors;
                    o.socket_denials = socket_denials;
                    o.linked_protected = linked_protected;
                    o.loopback_refused = loopback_refused;
                    o.git_denials = git_denials;
                    o.host_refused = host_refused;
                }
                Err(_) => {}
            }
        }
        o
    }

    /// The `sandbox_summary` of the call.
    pub fn summary(&self) -> efr_sandbox_wire::SandboxSummary {
        efr_sandbox_wire::SandboxSummary {
            denied_writes: self.denials.clone(),
            full_tmpfs: self.full_tmpfs.clone(),
            host_refused: self.host_refused.clone(),
            linked_protected: self.linked_protected.clone(),
            survivors: self.survivors.clone(),
            setup_error: self.setup_error.clone(),
            ..Default::default()
        }
    }

    /// The shell-style exit status: the code, or 128+N for a signal, or
    /// [`crate::exit_code::LINE_END_UNKNOWN`] (what `efr-launch` exits with too).
    pub fn exit_status(&self) -> i32 {
        crate::exit_code::of_end(self.code, self.signal)
    }
}
