//! The outcome of saving an "allow always" rule.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a rule was not saved. A reader takes a reason it does not know as `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotSavedReason {
    /// The config file changed since it was read.
    Changed,
    /// The config file cannot be written.
    ReadOnly,
    /// The config with the new rule does not load.
    LoadCheck,
    /// Reading or writing the file failed.
    Io,
    /// The reload after the write did not finish in time.
    ReloadTimeout,
    /// A reason this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}

impl NotSavedReason {
    /// Every reason, in wire order.
    pub const ALL: [NotSavedReason; 6] = [
        NotSavedReason::Changed,
        NotSavedReason::ReadOnly,
        NotSavedReason::LoadCheck,
        NotSavedReason::Io,
        NotSavedReason::ReloadTimeout,
        NotSavedReason::Unknown,
    ];
}

/// The always-rule outcome, tagged by `kind`. A reader takes a kind it does not know as
/// `unknown`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AlwaysOutcome {
    /// Saved as rule `index` of `[[always]]`; `rule` says it in words.
    Saved {
        /// The rule's place among the file's `[[always]]` tables, from 0.
        index: u32,
        /// The saved rule in words (`allow ...`).
        rule: String,
    },
    /// Not saved; the file is as it was.
    NotSaved {
        /// Why the rule was not saved.
        reason: NotSavedReason,
    },
    /// An outcome this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}
