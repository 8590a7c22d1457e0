//! `sandbox.launch` (a stream): a call of [`efr_call::Call`], which owns it; this handler
//! only hands its events on. See docs/protocol.md for the frames.

use std::sync::Arc;

use efr_call::{PrepareError, ProxyWhen};
use efr_sandbox_wire::CallParams;

use crate::rpc::handler::{
    Call, HandlerFuture, blocking, boxed, params, run_call, setup_error_end,
};
use crate::state::Service;

/// `sandbox.launch`: runs one line through the launcher; items `started`, `output`, `exit`
/// (denials), then the end (summary, code or signal, duration). Cancel ends the tree.
pub fn launch(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: CallParams = params(call.params)?;
        let ctx = svc.call_ctx();
        // The launcher in standby starts on the view while the plan is made.
        let announced = ctx
            .standby
            .as_ref()
            .and_then(|s| s.announce(&p, &ctx.config));
        let c2 = ctx.clone();
        // The plan and, for a call that gets a proxy, its policy (which reads token files):
        // one trip to the blocking pool, not two.
        // One moment's look at the file system for the whole plan: each path's steps are
        // looked up once (`efr_policy::path::memoized`), however many parts ask (the view,
        // the caches, the token files). What the plan makes (its conversation's dirs, the
        // cache layers) is made before any part looks at it, or never looked at.
        let prepared = blocking("the call", move || {
            efr_policy::path::memoized(|| {
                efr_call::Call::prepare(&p, &c2).map(|c| {
                    let pol = c.proxy_policy(ProxyWhen::Wanted);
                    (c, pol)
                })
            })
        })
        .await?;
        let (c, pol) = match prepared {
            Ok(x) => x,
            Err(PrepareError::Params(e)) => return Err(e),
            Err(PrepareError::Setup(msg)) => return setup_error_end(msg),
        };
        run_call(c, pol, &ctx, &call.items, |c| c.start_with(&ctx, announced)).await
    })
}
