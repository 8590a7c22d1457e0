//! `sandbox.classify`: a shell line to the launch it needs and its exit records.
//!
//! The request and the result the classifier (`efr_policy::classify`) takes and returns, as
//! the service reads and answers them.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::exit::ExitRecord;
use crate::launch::Launch;
use crate::mode::Mode;

/// Params of `sandbox.classify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClassifyRequest {
    /// The shell line.
    pub line: String,
    /// The directory the line runs in; relative paths are unknown without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The session's mode.
    pub mode: Mode,
    /// The turn's project roots (writable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub project_roots: Vec<PathBuf>,
    /// The launch already granted for this call: exits it covers are not asked again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<Launch>,
    /// Denials of the user in a row, this turn.
    #[serde(default)]
    pub denials_in_a_row: u32,
    /// Denials of the user this turn.
    #[serde(default)]
    pub denials_this_turn: u32,
}

impl ClassifyRequest {
    /// A request with only a line, a cwd and a mode.
    pub fn new(line: impl Into<String>, cwd: Option<PathBuf>, mode: Mode) -> Self {
        ClassifyRequest {
            line: line.into(),
            cwd,
            mode,
            project_roots: Vec::new(),
            granted: None,
            denials_in_a_row: 0,
            denials_this_turn: 0,
        }
    }
}

/// What `sandbox.classify` answers: `{"launch": ..., "exits": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClassifyResult {
    /// How the line runs: `direct` in full mode; otherwise contained with the grants its
    /// exits need, or unsandboxed when one needs that (approval is asked per exit).
    pub launch: Launch,
    /// Every way the line leaves its sandbox (source `line`).
    pub exits: Vec<ExitRecord>,
    /// Parts of the line efr could not read (also in each exit's facts); not on the wire:
    /// the classifier's own list, for its text rendering.
    #[serde(skip)]
    #[schemars(skip)]
    pub opaque: Vec<String>,
    /// What the line does that needs no exit but that the caller should know: a `cmd &` job
    /// the sandbox ends with the line, a server only the line itself reaches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
