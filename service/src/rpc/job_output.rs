//! `sandbox.job_output` (a stream): a job's output from an offset, as `output` items (and
//! `skipped` for what its bound dropped); with `follow`, what it writes until it ends. The
//! end says where a next read starts.

use std::sync::Arc;

use efr_sandbox_wire::job::{JobOutputEnd, JobOutputItem, JobOutputParams, JobState};

use crate::rpc::handler::{Call, HandlerFuture, boxed, params, to_value};
use crate::state::Service;
use efr_jobs::registry::output::PIECE;

/// `sandbox.job_output`.
pub fn job_output(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: JobOutputParams = params(call.params)?;
        let job = svc.jobs.find(p.conversation.as_deref(), &p.job_id)?;
        let mut changed = job.output.changed();
        let mut at = p.offset;
        loop {
            // The state before the read: output written before the end is read in full.
            let state = job.state();
            loop {
                let r = job.output.read(at, PIECE);
                if let Some((from, to)) = r.skipped {
                    call.items
                        .send(to_value(&JobOutputItem::Skipped { from, to })?)
                        .await?;
                }
                for piece in &r.pieces {
                    let mut c = efr_call::launch::Chunker::default();
                    let data = c.push(&piece.bytes).or_else(|| c.flush());
                    if let Some(data) = data {
                        call.items
                            .send(to_value(&JobOutputItem::Output {
                                offset: piece.offset,
                                stream: piece.stream,
                                data,
                            })?)
                            .await?;
                    }
                }
                let moved = r.next != at;
                at = r.next;
                if !moved {
                    break;
                }
            }
            if !p.follow || state != JobState::Running {
                return to_value(&JobOutputEnd {
                    next_offset: at,
                    state: job.state(),
                });
            }
            // Wait for more, or the end.
            if changed.changed().await.is_err() {
                return to_value(&JobOutputEnd {
                    next_offset: at,
                    state: job.state(),
                });
            }
        }
    })
}
