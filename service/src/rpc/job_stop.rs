//! `sandbox.job_stop`: stops one job (its whole tree) and answers it as it ended.
//! `conflict` for a job that has ended already; `not_found` for a job of another
//! conversation; `invalid` for an id that is not `j<N>`.

use std::sync::Arc;

use efr_sandbox_wire::job::{JobStopBy, JobStopParams, JobStopResult};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};

use crate::rpc::handler::{Call, HandlerFuture, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.job_stop`.
pub fn job_stop(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: JobStopParams = params(call.params)?;
        let by = p.stopped_by.unwrap_or(JobStopBy::User);
        if matches!(
            by,
            JobStopBy::TimeLimit | JobStopBy::DaemonRestart | JobStopBy::Unknown
        ) {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                "stopped_by: a client stops a job as user, model, guard, full_off or daemon_stop",
            ));
        }
        let job = svc.jobs.find(p.conversation.as_deref(), &p.job_id)?;
        if !job.stop(by) {
            return Err(ErrorBody::new(
                ErrorCode::Conflict,
                format!("job {} has ended already ({:?})", job.id, job.state()),
            ));
        }
        job.wait_ended().await;
        to_value(&JobStopResult { job: job.info() })
    })
}
