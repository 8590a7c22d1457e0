//! The status lines `efr-launch` writes on its status fd, one JSON object per line: what the
//! service, the CLI, the probe and efrd (which runs the launcher itself for `sandbox.plan`
//! and hands the lines back in `sandbox.finish`) read of a launch. Moved here from
//! `efr_launcher::status`, which re-exports them; the JSON is unchanged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::backend::RunBackend;

/// What Landlock enforced of the line's ruleset (the landlock crate's `RulesetStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Every access right the launcher asks for is enforced.
    FullyEnforced,
    /// Some are: the kernel's ABI is older than the launcher's target.
    PartiallyEnforced,
    /// None: Landlock is missing or off.
    #[default]
    NotEnforced,
}

impl Enforcement {
    /// Every value, in wire order.
    pub const ALL: [Enforcement; 3] = [
        Enforcement::FullyEnforced,
        Enforcement::PartiallyEnforced,
        Enforcement::NotEnforced,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::FullyEnforced => "fully_enforced",
            Enforcement::PartiallyEnforced => "partially_enforced",
            Enforcement::NotEnforced => "not_enforced",
        }
    }
}

impl std::fmt::Display for Enforcement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What Landlock enforced for the line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI (0 when Landlock is missing).
    pub abi: u32,
    /// What the kernel enforced of the ruleset.
    pub status: Enforcement,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum StatusLine {
    /// The line is about to run.
    Started {
        /// The launcher's own pid, in its caller's pid namespace.
        launcher_pid: u32,
        /// Unix time in milliseconds.
        start_time_ms: u64,
        /// The line's process, as the launcher's pid namespace numbers it (0 when unknown).
        pid: u32,
        /// The backend the line really ran on.
        backend: RunBackend,
        /// What Landlock enforced; absent when the init reported nothing of it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        landlock: Option<LandlockReport>,
        /// The seccomp filter is loaded.
        #[serde(default)]
        seccomp: bool,
        /// The init supervises the line's writes and path sockets.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        supervised: bool,
        /// How an unsandboxed launch owns its tree; absent for a contained one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cgroup: Option<CgroupKind>,
    },
    /// The sandbox could not start; the command did not run.
    SetupError {
        /// What failed, one line.
        message: String,
    },
    /// The line ended.
    Exited {
        /// The line's exit code; absent when a signal ended it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// The signal that ended the line; absent when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// Milliseconds from the start of the sandbox's setup to the line's end.
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
        /// The ports of the call's own loopback (`127.0.0.1`, `::1`) where a connect was
        /// refused, nothing of the call listening there: the host's port needs a `tcp` host
        /// grant. Each port once, in the order refused.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        loopback_refused: Vec<u16>,
        /// The writes of `denials` refused because they would leave code git runs (a
        /// config with a key off the safe list, a hook) in a directory git takes as a git
        /// dir, with why: no write grant lets them through.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        git_denials: Vec<GitDenial>,
        /// The writes the sandbox let through that the host's own file systems refused
        /// (a read-only mount of the host, a full disk, a file's own mode), one line each:
        /// the operation, the path and what the host said. No grant changes them: they are
        /// not in `denials`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        host_refused: Vec<String>,
    },
}

/// A write the supervisor refused because it would leave code that git runs where git
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitDenial {
    /// The path of the refused write.
    pub path: String,
    /// Why, in a line (`a git config with keys off git.safe_config_keys: core.fsmonitor`).
    pub reason: String,
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
