//! `sandbox.approval_record`: a call the CLI ran itself (`EFR_SANDBOX_NO_SERVICE`, or a
//! terminal on its stdio) was refused: its exit records a grant opens wait as a pending
//! approval, as those of a `sandbox.run` call do (see [`crate::approvals`]). For the
//! service's own uid only: what waits is approved by the same user.

use std::sync::Arc;

use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{ApprovalRecordParams, ApprovalRecordResult};

use crate::rpc::handler::{Call, HandlerFuture, boxed, own_uid_only, params, to_value};
use crate::state::Service;

/// The most exit records one call may bring (a call's finish holds far fewer).
const MAX_EXITS: usize = 256;

/// `sandbox.approval_record`.
pub fn approval_record(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        own_uid_only(&call, "sandbox.approval_record")?;
        let p: ApprovalRecordParams = params(call.params)?;
        if p.exits.len() > MAX_EXITS {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                format!("at most {MAX_EXITS} exit records, not {}", p.exits.len()),
            ));
        }
        if let Some(c) = &p.conversation {
            efr_call::launch::check_conversation(c).map_err(|_| {
                ErrorBody::new(ErrorCode::Invalid, format!("conversation {c:?}: not an id"))
            })?;
        }
        let approvals = svc.approvals.record(
            call.uid,
            &p.line,
            p.conversation.as_deref(),
            &p.projects,
            &p.exits,
            svc.standing_ttl(),
        );
        to_value(&ApprovalRecordResult { approvals })
    })
}
