//! `sandbox.standing_grants`: the grants the user approved for a conversation
//! (`efr-sandbox approve`), for a call of it the CLI runs itself. For the service's own uid
//! only.

use std::sync::Arc;

use efr_sandbox_wire::{StandingGrantsParams, StandingGrantsResult};

use crate::rpc::handler::{Call, HandlerFuture, boxed, own_uid_only, params, to_value};
use crate::state::Service;

/// `sandbox.standing_grants`.
pub fn standing_grants(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        own_uid_only(&call, "sandbox.standing_grants")?;
        let p: StandingGrantsParams = params(call.params)?;
        to_value(&StandingGrantsResult {
            grants: svc
                .approvals
                .standing(call.uid, &p.conversation, svc.standing_ttl()),
        })
    })
}
