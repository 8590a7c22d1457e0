//! `sandbox.job_events` (a stream): the job events of one conversation (`job_ended`,
//! `job_watch_matched`, `job_port_forwarded`) as they happen, after those kept since
//! `since`. It runs until the client cancels it; a reader too slow for the events gets a
//! `lagged` event and goes on.

use std::sync::Arc;

use efr_sandbox_wire::job::{JobEvent, JobEventKind, JobEventsParams};
use tokio::sync::broadcast::error::RecvError;

use crate::rpc::handler::{Call, HandlerFuture, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.job_events`.
pub fn job_events(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: JobEventsParams = params(call.params)?;
        let conv = p.conversation.as_deref();
        let mut r = svc.jobs.events.read(conv, p.since);
        let mut last = p.since.unwrap_or(0);
        for ev in r.replay.drain(..) {
            last = ev.seq;
            call.items.send(to_value(&ev)?).await?;
        }
        loop {
            match r.live.recv().await {
                Ok(ev) if ev.conversation_id.as_deref() == conv && ev.seq > last => {
                    last = ev.seq;
                    call.items.send(to_value(&ev)?).await?;
                }
                Ok(_) => {}
                Err(RecvError::Lagged(missed)) => {
                    let ev = JobEvent {
                        seq: last,
                        conversation_id: p.conversation.clone(),
                        job_id: String::new(),
                        what: JobEventKind::Lagged { missed },
                    };
                    call.items.send(to_value(&ev)?).await?;
                }
                Err(RecvError::Closed) => return to_value(&serde_json::json!({})),
            }
        }
    })
}
