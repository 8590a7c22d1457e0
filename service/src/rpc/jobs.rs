//! `sandbox.jobs`: the background jobs, newest first (at most 200), of one conversation or
//! of all.

use std::sync::Arc;

use efr_sandbox_wire::job::{JobsParams, JobsResult};

use crate::rpc::handler::{Call, HandlerFuture, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.jobs`.
pub fn jobs(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: JobsParams = params(call.params)?;
        to_value(&JobsResult {
            jobs: svc.jobs.infos(p.conversation.as_deref()),
        })
    })
}
