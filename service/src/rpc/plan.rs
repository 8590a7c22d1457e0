//! `sandbox.plan`: a call of [`efr_call::Call`] handed out as a plan file efrd runs, held
//! by [`efr_call::Planned`] until `sandbox.finish`.

use std::sync::Arc;

use efr_call::{PrepareError, ProxyWhen};
use efr_sandbox_wire::PlanParams;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};

use crate::rpc::handler::{
    Call, HandlerFuture, blocking, boxed, internal, params, setup_error_end, to_value,
};
use crate::state::Service;

/// `sandbox.plan`: the launcher command line and a plan file it reads (0600 in a 0700 dir
/// of the runtime dir), the conversation's dirs made; `sandbox.finish` releases them.
pub fn plan(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: PlanParams = params(call.params)?;
        if p.call.background.is_some() {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                "background: a job is started by sandbox.launch, not sandbox.plan",
            ));
        }
        let status_fd = p.status_fd.unwrap_or(3);
        if !(3..=1024).contains(&status_fd) {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                format!("status_fd {status_fd}: expected 3 to 1024"),
            ));
        }
        let ctx = svc.call_ctx();
        let svc2 = svc.clone();
        blocking("the call", move || {
            let prepared = efr_call::Call::prepare(&p.call, &ctx).and_then(|mut c| {
                let pol = c.proxy_policy(ProxyWhen::Wanted);
                c.attach(pol, &ctx).map(|()| c)
            });
            let c = match prepared {
                Ok(c) => c,
                Err(PrepareError::Params(e)) => return Err(e),
                Err(e) => return setup_error_end(&p.call, &ctx, e.to_string()),
            };
            let dir = svc2.paths.runtime_dir.join("plans");
            let r = svc2
                .planned
                .hand_out(c, &dir, status_fd)
                .map_err(|e| internal(e.to_string()))?;
            to_value(&r)
        })
        .await?
    })
}
