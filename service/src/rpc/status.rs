//! `sandbox.status`.

use std::sync::Arc;

use efr_sandbox_wire::SandboxStatus;
use efr_sandbox_wire::rpc::StatusResult;

use crate::probe::run_check;
use crate::rpc::handler::{Call, HandlerFuture, NoParams, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.status`: the `sandbox_status` of the last check (a check runs at the first
/// request when none has run yet), and the paths the service uses.
pub fn status(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let NoParams {} = params(call.params)?;
        let mut last = svc.last_check.lock().await;
        let status: SandboxStatus = match &*last {
            Some(c) => c.status.clone(),
            None => {
                let c = run_check(&svc).await?;
                let s = c.status.clone();
                *last = Some(c);
                s
            }
        };
        drop(last);
        to_value(&StatusResult {
            status,
            paths: svc.paths.to_wire(),
        })
    })
}
