//! The JSON lines `efr-launch` writes on its status fd, one object per line: the types are
//! the wire's (`efr_sandbox_wire::launcher_status`, re-exported here); [`Outcome`] folds them.

pub use efr_sandbox_wire::launcher_status::{CgroupKind, LandlockReport, StatusLine};

/// What a run's status lines say, folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub started: Option<StatusLine>,
    pub setup_error: Option<String>,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub denials: Vec<String>,
    pub full_tmpfs: Vec<String>,
    pub survivors: Vec<String>,
    pub socket_denials: Vec<String>,
    pub linked_protected: Vec<String>,
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
                }) => {
                    o.code = code;
                    o.signal = signal;
                    o.duration_ms = duration_ms;
                    o.denials = denials;
                    o.full_tmpfs = full_tmpfs;
                    o.survivors = survivors;
                    o.socket_denials = socket_denials;
                    o.linked_protected = linked_protected;
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
