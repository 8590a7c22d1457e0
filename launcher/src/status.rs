//! The JSON lines `efr-launch` writes on its status fd, one object per line.

use serde::{Deserialize, Serialize};

/// What Landlock enforced for the line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI (0 when Landlock is missing).
    pub abi: u32,
    /// `fully_enforced`, `partially_enforced` or `not_enforced`.
    pub status: String,
    /// TCP bind/connect rules are handled (net_view only).
    #[serde(default)]
    pub net: bool,
    /// Signal and abstract Unix socket scopes are enforced (ABI >= 6).
    #[serde(default)]
    pub scopes: bool,
    /// Connecting path Unix sockets is restricted (ABI >= 9).
    #[serde(default)]
    pub unix_sockets: bool,
}

/// Which tree-ownership mechanism an unsandboxed launch got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupKind {
    /// A cgroup v2 child of the launcher's delegated cgroup.
    V2,
    /// A cgroup v1 freezer child.
    V1Freezer,
    /// No cgroup: the child subreaper only.
    None,
}

/// One status line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum StatusLine {
    /// The line is about to run.
    Started {
        launcher_pid: u32,
        /// Unix time in milliseconds.
        start_time_ms: u64,
        /// The line's process, as the launcher's pid namespace numbers it (0 when unknown).
        pid: u32,
        /// `native`, `bwrap` or `unsandboxed`.
        backend: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        landlock: Option<LandlockReport>,
        /// The seccomp filter is loaded.
        #[serde(default)]
        seccomp: bool,
        /// The init supervises the line's writes and path sockets.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        supervised: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cgroup: Option<CgroupKind>,
    },
    /// The sandbox could not start; the command did not run.
    SetupError { message: String },
    /// The line ended.
    Exited {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        duration_ms: u64,
        /// Paths whose writes the sandbox refused (from the line's stderr).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        denials: Vec<String>,
        /// The call's own file systems (`/tmp`, `/dev/shm`) that were full.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        full_tmpfs: Vec<String>,
        /// Programs of descendants the launcher could not end.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        survivors: Vec<String>,
        /// Path sockets the call was refused (outside its own places, not granted).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        socket_denials: Vec<String>,
        /// Protected files that had more than one hard link at launch (writes through any
        /// of their names were refused).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        linked_protected: Vec<String>,
    },
}

impl StatusLine {
    /// Parses one line.
    pub fn parse(line: &str) -> Result<StatusLine, serde_json::Error> {
        serde_json::from_str(line.trim_end())
    }

    /// The line as written, without the newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }
}

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

    /// The shell-style exit status: the code, or 128+N for a signal.
    pub fn exit_status(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => crate::exit_code::of_signal(s),
            _ => crate::exit_code::INIT_FAILED,
        }
    }
}
