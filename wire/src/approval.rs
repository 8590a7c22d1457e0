//! Approvals the user gives to calls of the CLI routes (`efr-sandbox run`, `efr-sandbox
//! shell`/`efr-bash`): a refused call whose exit records name grants that open them waits
//! in the service as a pending approval; `sandbox.approvals` lists them and
//! `sandbox.approval_decide` approves one (its grants become standing grants of the call's
//! conversation, or always rules) or denies it. The service keeps both in its state dir as
//! an [`ApprovalStore`]. Times are Unix milliseconds. efrd's own approval flow does not use
//! these.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ExitRecord, Grant};

/// A refused call waiting for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Approval {
    /// Short, unique among the user's pending approvals (`[a-z0-9]`, 4 to 12 characters).
    pub id: String,
    /// The call's line, as the call ran it (the call's text: show it through a terminal
    /// filter).
    pub line: String,
    /// The call's conversation; absent for a call of none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The call's project roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// The exit records whose grants would open the call (what it needs, why).
    pub exits: Vec<ExitRecord>,
    /// Every grant the records name, once each: what approving gives.
    pub grants: Vec<Grant>,
    /// When the call was (last) refused.
    pub at: u64,
}

/// Grants the user approved for the later calls of one conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StandingGrants {
    /// The conversation.
    pub conversation: String,
    /// The uid whose calls get them.
    pub uid: u32,
    /// The grants.
    pub grants: Vec<Grant>,
    /// When they were last approved or used (they expire some days after).
    pub at: u64,
}

/// The service's file of approvals (`approvals.json` in its state dir).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalStore {
    /// The file's format (1).
    pub version: u32,
    /// The pending approvals, oldest first.
    #[serde(default)]
    pub pending: Vec<PendingApproval>,
    /// The standing grants of conversations.
    #[serde(default)]
    pub standing: Vec<StandingGrants>,
}

/// A pending approval as the store keeps it: the approval and the uid of its call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingApproval {
    /// The uid the call ran for.
    pub uid: u32,
    /// The approval.
    #[serde(flatten)]
    pub approval: Approval,
}

/// Why an approval store file does not read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Not the store's JSON.
    #[error("not an approvals file: {0}")]
    Json(#[from] serde_json::Error),
    /// Another format.
    #[error("approvals file format {0} is not known (1 is)")]
    Version(u32),
}

impl ApprovalStore {
    /// The format this build writes.
    pub const VERSION: u32 = 1;

    /// Reads a store file's text.
    pub fn parse(text: &[u8]) -> Result<ApprovalStore, StoreError> {
        let s: ApprovalStore = serde_json::from_slice(text)?;
        if s.version != Self::VERSION {
            return Err(StoreError::Version(s.version));
        }
        Ok(s)
    }
}

/// Whether `id` is an approval id as the service makes them: 4 to 12 of `a-z0-9`.
pub fn valid_approval_id(id: &str) -> bool {
    (4..=12).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The result of `sandbox.approvals`: the pending approvals of the caller's uid, oldest
/// first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalsResult {
    /// The approvals.
    pub approvals: Vec<Approval>,
}

/// What the user decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// The grants become standing grants of the call's conversation.
    Approve,
    /// The grants are saved as always rules in the user's config (and given to the
    /// conversation, so that the retry works).
    Always,
    /// The approval is dropped.
    Deny,
}

/// The params of `sandbox.approval_decide`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalDecideParams {
    /// The approval's id.
    pub id: String,
    /// What to do with it.
    pub decision: ApprovalDecision,
}

/// The result of `sandbox.approval_decide`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalDecideResult {
    /// The approval as it was.
    pub approval: Approval,
    /// What was done.
    pub decision: ApprovalDecision,
    /// The always rules saved, in words (`always` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
}

/// The params of `sandbox.approval_record`: a call the CLI ran itself (not handed to the
/// service) and its refused exit records, to wait as a pending approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRecordParams {
    /// The call's line.
    pub line: String,
    /// The call's conversation; absent for a call of none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The call's project roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// The call's exit records (those no grant opens are not kept).
    pub exits: Vec<ExitRecord>,
}

/// The result of `sandbox.approval_record`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRecordResult {
    /// One per exit record kept: the approval it waits as.
    pub approvals: Vec<ApprovalRef>,
}

/// The params of `sandbox.standing_grants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StandingGrantsParams {
    /// The conversation.
    pub conversation: String,
}

/// The result of `sandbox.standing_grants`: what the user approved for the conversation's
/// calls of the caller's uid.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StandingGrantsResult {
    /// The grants.
    pub grants: Vec<Grant>,
}

/// In a finish: the approval a refused exit record waits as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRef {
    /// The exit record's `id`.
    pub exit: String,
    /// The approval's id.
    pub approval: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_bad_files() {
        assert!(valid_approval_id("7k2p"));
        assert!(!valid_approval_id("7K2P"));
        assert!(!valid_approval_id("7k2"));
        assert!(!valid_approval_id("../x"));
        assert!(ApprovalStore::parse(b"").is_err());
        assert!(ApprovalStore::parse(b"{\"version\": 2}").is_err());
        assert!(ApprovalStore::parse(b"{\"version\": 1, \"pending\": 3}").is_err());
        let s = ApprovalStore::parse(b"{\"version\": 1}").unwrap();
        assert!(s.pending.is_empty() && s.standing.is_empty());
    }
}
