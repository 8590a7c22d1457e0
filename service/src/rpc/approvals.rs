//! `sandbox.approvals`: the pending approvals of the CLI routes' refused calls (see
//! [`crate::approvals`]), for the service's own uid only.

use std::sync::Arc;

use efr_sandbox_wire::ApprovalsResult;

use crate::rpc::handler::{Call, HandlerFuture, NoParams, boxed, own_uid_only, params, to_value};
use crate::state::Service;

/// `sandbox.approvals`.
pub fn approvals(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        own_uid_only(&call, "sandbox.approvals")?;
        let _: NoParams = params(call.params)?;
        to_value(&ApprovalsResult {
            approvals: svc.approvals.list(call.uid, svc.standing_ttl()),
        })
    })
}
