//! `sandbox.explain`: what a contained call gets at one path, and why.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::exit::TargetClass;
use crate::launch::Grant;
use crate::serde_util::is_false;

/// Params of `sandbox.explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExplainParams {
    /// Absolute, relative to `cwd`, or starting with `~`.
    pub path: String,
    /// The directory a relative path is read from; the service's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The turn's project roots; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
}

/// What a contained call may do at a path.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Hidden (masked, or outside the view).
    None,
    /// Readable, not writable.
    Read,
    /// Readable and writable.
    Write,
}

/// What a path is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A Unix socket.
    Socket,
    /// A named pipe.
    Fifo,
    /// A block device node.
    BlockDevice,
    /// A character device node.
    CharDevice,
    /// Nothing is there (yet).
    Missing,
}

/// A rule of the config that applies to the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RuleHit {
    /// The dotted config key the rule comes from, such as `sandbox.masks`.
    pub key: String,
    /// The rule as the config holds it, such as `~/.ssh`.
    pub rule: String,
    /// Why the rule is there, one line.
    pub reason: String,
}

/// The link a path goes through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LinkInfo {
    /// The path of the link itself (the path asked, or one of its parents).
    pub link: String,
    /// What the link says, as `readlink` prints it.
    pub points_to: String,
    /// Where it leads, every link resolved.
    pub resolved: String,
    /// What the link leads to, every link followed (`missing` when it dangles).
    pub target_kind: FileKind,
}

/// The grant that would change what a contained call gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GrantHint {
    /// The grant, as a call's `grants` would carry it.
    pub grant: Grant,
    /// What it would change, one line.
    pub effect: String,
    /// Only the user can approve it (a floor path); false when absent.
    #[serde(default, skip_serializing_if = "is_false")]
    pub user_only: bool,
}

/// Result of `sandbox.explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExplainResult {
    /// The path as asked.
    pub path: String,
    /// Absolute, `.` and `..` folded and every link resolved.
    pub canonical: String,
    /// How efr shows it: relative to a project root, `$SCRATCH/...`, `~/...` or absolute.
    pub shown: String,
    /// Something is at the path itself (a dangling link is there).
    pub exists: bool,
    /// What the path itself is (a link is `symlink`).
    pub kind: FileKind,
    /// The link the path goes through; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkInfo>,
    /// Where the path lies (`masked` or `floor` when a rule says so).
    pub class: TargetClass,
    /// What a contained call may do at the path.
    pub access: Access,
    /// The rule that makes it writable (a project root, scratch, `/tmp`, a grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writable_by: Option<RuleHit>,
    /// The mask that hides the path or a link it passes; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masked: Option<RuleHit>,
    /// The floor rule the path falls under; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<RuleHit>,
    /// Read-only although it is inside a writable root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<RuleHit>,
    /// The grant that would change it; absent when none would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantHint>,
    /// The path has bytes that are not UTF-8; strings show each as `\xNN` (false when
    /// absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub non_utf8: bool,
}
