//! `sandbox.explain`.

use std::sync::Arc;

use efr_sandbox_wire::ExplainParams;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};

use crate::rpc::handler::{Call, HandlerFuture, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.explain`: what a contained call gets at a path (efr-policy does the work, off
/// the async threads since it reads the file system).
pub fn explain(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: ExplainParams = params(call.params)?;
        let r = tokio::task::spawn_blocking(move || svc.policy.explain(p)).await;
        match r {
            Ok(r) => to_value(&r?),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(ErrorBody::new(
                ErrorCode::Internal,
                format!("explain did not finish: {e}"),
            )),
        }
    })
}
