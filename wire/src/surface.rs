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
    pub path: String,
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
    pub path: String,
    /// One line: what happened to it.
    pub what: String,
    /// The path is a floor file (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub floor: bool,
    /// Where efr keeps the copy from before the change; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
}
