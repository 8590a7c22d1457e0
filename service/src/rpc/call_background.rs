//! `sandbox.call_background`: moves a running contained call (`sandbox.launch`, named by
//! the `call_id` of its `started` item) to a job without restarting it. Its launch stream
//! ends with `moved`; its output goes on in the job. An unsandboxed call does not move
//! (`invalid`); a call of another conversation, or one that ended, is `not_found`.

use std::sync::Arc;

use efr_sandbox_wire::job::{CallBackgroundParams, CallBackgroundResult};

use crate::rpc::handler::{Call, HandlerFuture, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.call_background`.
pub fn call_background(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: CallBackgroundParams = params(call.params)?;
        let job_id = svc
            .jobs
            .move_call(p.conversation.as_deref(), &p.call_id, p.max_minutes)
            .await?;
        to_value(&CallBackgroundResult { job_id })
    })
}
