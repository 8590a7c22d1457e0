//! `sandbox.finish`: the end of a call `sandbox.plan` handed out.

use std::sync::Arc;

use efr_sandbox_wire::FinishParams;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};

use crate::rpc::handler::{Call, HandlerFuture, blocking, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.finish`: folds the call's status lines, deletes its plan file, returns the
/// summary and the denial exit records.
pub fn finish(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: FinishParams = params(call.params)?;
        let Some(c) = svc.planned.take(&p.token) else {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!(
                    "no planned call with token {:?} (finished already?)",
                    p.token
                ),
            ));
        };
        let fin = blocking("the call", move || c.finish(&p.status)).await?;
        to_value(&fin)
    })
}
