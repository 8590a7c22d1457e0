//! `sandbox.approval_decide`: the user approves a pending approval (its grants become
//! standing grants of the call's conversation), approves it always (also saved as `[[always]]`
//! rules of the user's config, as `sandbox.always_save` saves them) or denies it (dropped).
//! For the service's own uid only.

use std::sync::Arc;

use efr_policy::config::AlwaysRule;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{
    AlwaysOutcome, ApprovalDecideParams, ApprovalDecideResult, ApprovalDecision, ExitKind, Grant,
};

use crate::approvals::DecideError;
use crate::rpc::handler::{Call, HandlerFuture, blocking, boxed, own_uid_only, params, to_value};
use crate::state::Service;

fn decide_error(e: DecideError) -> ErrorBody {
    let code = match e {
        DecideError::Unknown(_) => ErrorCode::NotFound,
        DecideError::NoConversation(_) => ErrorCode::Invalid,
        DecideError::Save { .. } => ErrorCode::Internal,
    };
    ErrorBody::new(code, e.to_string())
}

/// The always rule of a grant, where its kind has one: a host (the host exits to it) or a
/// write (the write exits under the path).
fn always_rule(g: &Grant, why: &str) -> Result<AlwaysRule, String> {
    let (host, path, kind) = match g {
        Grant::Host { host, .. } => (Some(host.clone()), None, ExitKind::Host),
        Grant::Write { path } => (None, Some(path.clone()), ExitKind::Write),
        other @ (Grant::OpenNetwork
        | Grant::Socket { .. }
        | Grant::Bus { .. }
        | Grant::BusFilter { .. }
        | Grant::Device { .. }
        | Grant::Unmask { .. }
        | Grant::Desktop { .. }
        | Grant::NetView
        | Grant::Credential { .. }
        | Grant::Unknown) => {
            return Err(format!(
                "the grant {} has no always rule (only host and write grants do): approve it \
                 for the conversation without --always",
                serde_json::to_string(other).unwrap_or_default()
            ));
        }
    };
    Ok(AlwaysRule {
        command: Vec::new(),
        host,
        path,
        kind: Some(kind),
        reason: why.to_string(),
        source: None,
    })
}

/// `sandbox.approval_decide`.
pub fn approval_decide(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        own_uid_only(&call, "sandbox.approval_decide")?;
        let p: ApprovalDecideParams = params(call.params)?;
        let uid = call.uid;
        let a = svc.approvals.get(uid, &p.id).map_err(decide_error)?;
        let mut rules = Vec::new();
        if p.decision == ApprovalDecision::Always {
            let why = format!("approved for the line {:?}", a.line);
            let made: Vec<AlwaysRule> = a
                .grants
                .iter()
                .map(|g| always_rule(g, &why))
                .collect::<Result<_, _>>()
                .map_err(|e| ErrorBody::new(ErrorCode::Invalid, e))?;
            let path = svc.policy.env().config_file();
            let outcomes = blocking("approval_decide", move || {
                made.iter()
                    .map(|r| crate::always::save_always(&path, None, r))
                    .collect::<Vec<_>>()
            })
            .await?;
            for o in outcomes {
                match o {
                    AlwaysOutcome::Saved { rule, .. } => rules.push(rule),
                    other => {
                        return Err(ErrorBody::new(
                            ErrorCode::Internal,
                            format!(
                                "the always rule was not saved ({}); approval {} is still \
                                 pending",
                                serde_json::to_string(&other).unwrap_or_default(),
                                p.id
                            ),
                        ));
                    }
                }
            }
            let _ = svc.policy.config();
        }
        // `always` also gives the conversation its grants, so that the retry works as it
        // does after `approve`.
        let grant = match p.decision {
            ApprovalDecision::Approve => true,
            ApprovalDecision::Always => a.conversation.is_some(),
            ApprovalDecision::Deny => false,
        };
        let a = svc
            .approvals
            .decide(uid, &p.id, grant)
            .map_err(decide_error)?;
        to_value(&ApprovalDecideResult {
            approval: a,
            decision: p.decision,
            rules,
        })
    })
}
