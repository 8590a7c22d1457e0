//! A job's port forwards ([`crate::forward`]): started once its call runs (its network
//! namespace exists), each outcome sent as a `job_port_forwarded` event, the job's
//! `forwards` kept as they are, stopped (`stopped` for each) when the job ends.

use std::sync::Arc;
use std::time::Duration;

use crate::forward::{ForwardConfig, ForwardOutcome, Forwards};
use efr_sandbox_wire::job::{JobEventKind, JobForward, JobPortOutcome};
use efr_sandbox_wire::{CallParams, Grant};
use tokio::sync::mpsc;

use super::{Job, Jobs, UNFORWARDED_KEPT};

/// How often, and how long apart, the forwards are asked for before the job's namespace
/// is there (it is, once its call has started: this covers a slow init).
const START_TRIES: u32 = 5;
const START_PAUSE: Duration = Duration::from_millis(100);

/// The forwards a job gets: its limits, from the config's `[jobs]`.
#[derive(Debug, Clone)]
pub struct Plan {
    cfg: ForwardConfig,
}

/// The forwards of a call `p` under `config`: none when the config turns them off, or the
/// call has no network of its own (`open_network` and `net_view` listen on the host's
/// loopback already).
pub fn plan(config: &efr_policy::config::Config, p: &CallParams) -> Option<Plan> {
    let j = &config.jobs;
    let own_net = !p.unsandboxed
        && !p
            .grants
            .iter()
            .any(|g| matches!(g, Grant::OpenNetwork | Grant::NetView));
    (j.forwards.value && own_net).then(|| Plan {
        cfg: ForwardConfig {
            deny: j.denied_ports(),
            max_per_job: usize::try_from(j.forward_max.value).unwrap_or(usize::MAX),
            max_conns: usize::try_from(j.forward_connections.value).unwrap_or(usize::MAX),
        },
    })
}

/// The running forwards of a job, and the task that reports them.
#[derive(Debug)]
pub struct Running {
    forwards: Forwards,
    reports: tokio::task::JoinHandle<()>,
}

/// Starts the forwards of `job`, whose launcher is `launcher_pid`; `None` when they could
/// not be had (said on the service's stderr: the job runs without them).
pub async fn start(
    jobs: &Arc<Jobs>,
    job: &Arc<Job>,
    plan: &Plan,
    launcher_pid: u32,
) -> Option<Running> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let conversation = job.conversation.clone().unwrap_or_default();
    let mut tries = 0;
    let forwards = loop {
        tries += 1;
        match crate::forward::start(
            launcher_pid,
            &conversation,
            &job.id,
            plan.cfg.clone(),
            jobs.ports.clone(),
            tx.clone(),
        )
        .await
        {
            Ok(f) => break f,
            Err(e) if tries < START_TRIES => {
                let _ = e;
                tokio::time::sleep(START_PAUSE).await;
            }
            Err(e) => {
                eprintln!("efr-sandbox: job {}: no port forwards: {e}", job.id);
                return None;
            }
        }
    };
    drop(tx);
    let (jobs2, job2) = (jobs.clone(), job.clone());
    let reports = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            {
                let mut n = job2.lock();
                let (forwards, unforwarded) = n.ports_mut();
                keep(forwards, unforwarded, &ev);
            }
            jobs2.events.emit(
                job2.conversation.as_deref(),
                &job2.id,
                JobEventKind::JobPortForwarded {
                    listen: ev.listen,
                    port: ev.port,
                    outcome: ev.outcome,
                    by_job: ev.by_job,
                    reason: ev.reason,
                },
            );
        }
    });
    Some(Running { forwards, reports })
}

/// `forwards` and `unforwarded` of a job after the outcome `ev`: a forwarded port is in
/// `forwards` only, a refused one (`in_use`, `refused`, `limit`) in `unforwarded` only (its
/// latest outcome, the oldest dropped past [`UNFORWARDED_KEPT`]), a stopped one in neither.
fn keep(
    forwards: &mut Vec<JobForward>,
    unforwarded: &mut Vec<JobPortOutcome>,
    ev: &crate::forward::ForwardEvent,
) {
    let f = JobForward {
        listen: ev.listen.clone(),
        port: ev.port,
    };
    unforwarded.retain(|u| u.listen != f.listen || u.port != f.port);
    match ev.outcome {
        ForwardOutcome::Forwarded if !forwards.contains(&f) => forwards.push(f),
        ForwardOutcome::Forwarded => {}
        ForwardOutcome::Stopped => forwards.retain(|x| *x != f),
        outcome => {
            forwards.retain(|x| *x != f);
            if unforwarded.len() >= UNFORWARDED_KEPT {
                unforwarded.remove(0);
            }
            unforwarded.push(JobPortOutcome {
                listen: f.listen,
                port: f.port,
                outcome,
                by_job: ev.by_job.clone(),
                reason: ev.reason.clone(),
            });
        }
    }
}

impl Running {
    /// Stops them: `stopped` for each, the host's ports free again; returns once every
    /// event is sent.
    pub async fn stop(self) {
        self.forwards.stop().await;
        let _ = self.reports.await;
    }
}
