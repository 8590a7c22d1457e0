//! The sandbox surface: what a contained call can reach that the user may not expect
//! (a credential file that appeared, a socket), the questions about it, and the files a
//! turn reports.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::serde_util::is_false;

/// `question_id`: names one surface question within a conversation: `q` and a number
/// (`q1`, `q2`, ...). Any other string is refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct QuestionId(String);

impl JsonSchema for QuestionId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "QuestionId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^q[1-9][0-9]{0,9}$",
            "description": "One surface question of a conversation: q1, q2, ..."
        })
    }
}

/// A string that is not a question id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a question id (q1, q2, ...): {0:?}")]
pub struct BadQuestionId(String);

impl QuestionId {
    /// Checks the form `q` + a positive number without leading zeros, at most 10 digits.
    pub fn new(s: &str) -> Result<Self, BadQuestionId> {
        let digits = s.strip_prefix('q').unwrap_or("");
        let ok = !digits.is_empty()
            && digits.len() <= 10
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0');
        if ok {
            Ok(QuestionId(s.to_owned()))
        } else {
            Err(BadQuestionId(s.to_owned()))
        }
    }

    /// The question id of number `n` (`n` >= 1).
    pub fn from_number(n: u32) -> Self {
        QuestionId(format!("q{}", n.max(1)))
    }

    /// The id as its text (`q1`, `q2`, ...).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for QuestionId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        QuestionId::new(&s).map_err(serde::de::Error::custom)
    }
}

/// How the surface changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SurfaceChangeKind {
    /// A path appeared that a contained call can read (a new token file, a socket).
    Appeared,
    /// A path the surface held is gone.
    Disappeared,
    /// A path the surface held changed (such as a file that now holds a token).
    Changed,
}

/// `surface_change`: one change of what contained calls can reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SurfaceChange {
    /// The file that changed (absolute).
    pub path: String,
    /// How it changed.
    pub change: SurfaceChangeKind,
    /// Why it matters, one line (such as `holds a token for registry.npmjs.org`).
    pub why: String,
    /// The sandbox masks it now (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub masked: bool,
    /// The question the user is asked about it; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<QuestionId>,
}

/// `reported_file`: a file outside the project that a turn's calls changed or exposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReportedFile {
    /// The file (absolute).
    pub path: String,
    /// One line: what happened to it.
    pub what: String,
    /// The path is a floor file (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub floor: bool,
    /// Where efr keeps the copy from before the change; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// A file the surface scan found: what it looks like (`key`, `credentials`, `token`,
    /// `env`, `history`); absent for a file a call changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The hosts a token in it is for (what the proxy denies while it is visible); absent
    /// when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The open question about it (answer with `sandbox.surface_respond`); absent when
    /// none is open (the user kept it visible, or it is not a scan's finding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<QuestionId>,
    /// The user answered to keep it visible (false when absent); asked again when what
    /// it holds changes (its class or its hosts).
    #[serde(default, skip_serializing_if = "is_false")]
    pub kept: bool,
}

/// Params of `sandbox.surface`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct SurfaceParams {
    /// The project roots of the turn (absolute); the home is always scanned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// The conversation whose questions these are (its question ids, and the changes
    /// since its last scan).
    #[serde(alias = "conversation_id")]
    pub conversation: String,
}

/// Where a scan stopped before it was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SurfacePartial {
    /// `time` or `entries`: the bound that cut it.
    pub why: String,
    /// The directory it was in.
    pub at: String,
}

/// Result of `sandbox.surface`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct SurfaceResult {
    /// What a contained call can read that looks like a secret, sorted by path; absent
    /// when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ReportedFile>,
    /// What changed since the conversation's last scan (none at its first); absent when
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<SurfaceChange>,
    /// Set when a bound cut the scan short: what is listed is what was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<SurfacePartial>,
    /// How long the scan took, in milliseconds.
    pub ms: u64,
}

/// Params of `sandbox.surface_respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SurfaceRespondParams {
    /// The conversation the question was asked in (also read as `conversation_id`).
    #[serde(alias = "conversation_id")]
    pub conversation: String,
    /// The question answered, as `sandbox.surface` gave it.
    pub question_id: QuestionId,
    /// true: leave the file visible and stop asking while what it holds stays the same;
    /// false: mask it from the next contained call on.
    pub keep: bool,
}

/// Result of `sandbox.surface_respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SurfaceRespondResult {
    /// The file the question was about.
    pub path: String,
    /// The answer, as given.
    pub keep: bool,
    /// The file is masked in contained calls from now on (`keep` false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub masked: bool,
}

/// Params of `sandbox.floor_write`: a write to a floor file that the user approved, made
/// by the service after it backed the file up. Exactly one of `edit` and `line`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FloorWriteParams {
    /// The floor file (absolute, or `~/...`), inside the home.
    pub path: String,
    /// The file's new content (a file tool's edit), at most 8 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<String>,
    /// One line to append (the approved line), at most 8 KiB, without a newline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// `home_file_changed` as the sandbox reports it: a file of the home (a floor file) that
/// was written, where the copy from before is, and the real file when the path is a
/// link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HomeFileChanged {
    /// The floor file written (absolute).
    pub path: String,
    /// The path is a floor file (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub floor: bool,
    /// The real file written, when `path` reaches it through a link; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real: Option<String>,
    /// The copy from before the write; absent when the file did not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
}

/// Result of `sandbox.floor_write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FloorWriteResult {
    /// The file written, and where its backup is.
    pub home_file_changed: HomeFileChanged,
}
