//! The backend closed sets: the one choice of a backend (the config's `sandbox.backend`,
//! a call's `backend` param, the launcher's request) and the backend a call really ran on
//! (the launcher's `started` status line). The resolved backend of a contained call (the
//! plan's, `sandbox_status`'s) is [`crate::Backend`]: it has no `auto`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::Backend;

/// Which backend is asked for: the config's `sandbox.backend` (TOML) and a call's `backend`
/// (JSON). One type for both (`efr_policy::config` and `efr_launcher::api` re-export it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// The probe picks the one that works (native first).
    Auto,
    /// Our own clone, mounts and pivot_root.
    Native,
    /// bubblewrap, with our Landlock and seccomp.
    Bwrap,
}

impl BackendChoice {
    /// Every choice, in wire order.
    pub const ALL: [BackendChoice; 3] = [
        BackendChoice::Auto,
        BackendChoice::Native,
        BackendChoice::Bwrap,
    ];

    /// The wire name (and the config's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Native => "native",
            BackendChoice::Bwrap => "bwrap",
        }
    }

    /// The choice named `s`, if any (`auto`, `native`, `bwrap`).
    pub fn from_name(s: &str) -> Option<BackendChoice> {
        BackendChoice::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The backend chosen, when the choice names one (`auto` must be resolved first).
    pub fn fixed(self) -> Option<Backend> {
        match self {
            BackendChoice::Auto => None,
            BackendChoice::Native => Some(Backend::Native),
            BackendChoice::Bwrap => Some(Backend::Bwrap),
        }
    }
}

impl From<Backend> for BackendChoice {
    fn from(b: Backend) -> BackendChoice {
        match b {
            Backend::Native => BackendChoice::Native,
            Backend::Bwrap => BackendChoice::Bwrap,
        }
    }
}

/// The backend a call really ran on (the `started` status line's `backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunBackend {
    /// Contained, by the native backend.
    Native,
    /// Contained, by bubblewrap.
    Bwrap,
    /// Not contained: an ordinary child in a cgroup of its own.
    Unsandboxed,
}

impl RunBackend {
    /// Every value, in wire order.
    pub const ALL: [RunBackend; 3] = [
        RunBackend::Native,
        RunBackend::Bwrap,
        RunBackend::Unsandboxed,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunBackend::Native => "native",
            RunBackend::Bwrap => "bwrap",
            RunBackend::Unsandboxed => "unsandboxed",
        }
    }
}

impl From<Backend> for RunBackend {
    fn from(b: Backend) -> RunBackend {
        match b {
            Backend::Native => RunBackend::Native,
            Backend::Bwrap => RunBackend::Bwrap,
        }
    }
}

impl std::fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for RunBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
