//! `sandbox.launch` (a stream): a call of [`efr_call::Call`], which owns it; this handler
//! hands its events on. A call with `background` becomes a job once it has started (items
//! `started`, `job`; the end names the job); a running call may be moved to a job
//! (`sandbox.call_background`: item `moved`, the same end). See docs/protocol.md.

use std::sync::Arc;
use std::time::Instant;

use efr_call::{Event, PrepareError, ProxyWhen};
use efr_sandbox_wire::job::{JobHandedOff, JobStarted, MovedFrom};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{CallParams, Launch, LaunchItem};

use crate::rpc::handler::{
    Call, HandlerFuture, ItemSink, begin_call, blocking, boxed, internal, params, setup_error_end,
    to_value,
};
use crate::state::Service;
use efr_jobs::{JobSpec, Jobs, MoveRequest};

/// Why a call may not become a job, when it may not.
fn not_a_job(p: &CallParams) -> Option<String> {
    p.unsandboxed.then(|| {
        "an unsandboxed call does not become a job: a job runs only in the sandbox".to_owned()
    })
}

/// How the call runs, for its job's `launch`.
fn launch_of(p: &CallParams) -> Launch {
    if p.unsandboxed {
        Launch::Unsandboxed
    } else {
        Launch::Contained {
            grants: p.grants.clone(),
        }
    }
}

/// `sandbox.launch`: runs one line through the launcher; items `started`, `output`, `exit`
/// (denials), then the end (summary, code or signal, duration). Cancel ends the tree.
pub fn launch(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: CallParams = params(call.params)?;
        let ctx = svc.call_ctx();
        // A job's params are checked before anything starts.
        let background = match &p.background {
            Some(b) => {
                if let Some(why) = not_a_job(&p) {
                    return Err(ErrorBody::new(ErrorCode::Invalid, why));
                }
                Jobs::check_minutes(&ctx.config.jobs, b.max_minutes)?;
                let watch = Jobs::watch(b.watch.as_deref(), b.max_wakes)?;
                svc.jobs.check_room(ctx.config.jobs.max_running.value)?;
                Some((b.max_minutes, watch))
            }
            None => None,
        };
        // The launcher in standby starts on the view while the plan is made (not for a
        // job, which gets a launcher of its own).
        let announced = match background {
            None => ctx
                .standby
                .as_ref()
                .and_then(|s| s.announce(&p, &ctx.config)),
            Some(_) => None,
        };
        let c2 = ctx.clone();
        let p2 = p.clone();
        // The plan and, for a call that gets a proxy, its policy (which reads token files):
        // one trip to the blocking pool, not two.
        // One moment's look at the file system for the whole plan: each path's steps are
        // looked up once (`efr_policy::path::memoized`), however many parts ask (the view,
        // the caches, the token files). What the plan makes (its conversation's dirs, the
        // cache layers) is made before any part looks at it, or never looked at.
        let prepared = blocking("the call", move || {
            efr_policy::path::memoized(|| {
                efr_call::Call::prepare(&p2, &c2).map(|c| {
                    let pol = c.proxy_policy(ProxyWhen::Wanted);
                    (c, pol)
                })
            })
        })
        .await?;
        let (mut c, pol) = match prepared {
            Ok(x) => x,
            Err(PrepareError::Params(e)) => return Err(e),
            Err(e) => return setup_error_end(&p, &ctx, e.to_string()),
        };
        let (guard, moves) = svc
            .jobs
            .register_call(p.conversation.clone(), not_a_job(&p));
        c.set_call_id(guard.call_id().to_owned());
        // What a job runs again while it lives, of the checks after a call.
        let checks = live_checks(&c, &p, &ctx);
        // A job's launcher joins its cgroup before it makes anything.
        let (hooks, join) = match background {
            Some(_) => {
                let (mut h, j) = svc.jobs.hooks(&ctx.config, &p, guard.call_id());
                h.checks = checks.clone();
                // No cgroup: the line's RLIMIT_NPROC bounds the job's processes (counted
                // in its own user namespace).
                if matches!(h.cgroup, Some(Err(_))) {
                    c.plan_mut().processes_max = Some(ctx.config.jobs.pids_max.value);
                }
                (Some(h), Some(j))
            }
            None => (None, None),
        };
        let begun = begin_call(c, pol, &ctx, |c| match join {
            Some(j) => c.start_job(&ctx, j),
            None => c.start_with(&ctx, announced),
        });
        let mut stream = match begun {
            Ok(s) => s,
            Err(end) => return end,
        };
        let spec = |max_minutes, watch, moved_from, before| JobSpec {
            conversation: p.conversation.clone(),
            call_id: guard.call_id().to_owned(),
            command: p.line.clone(),
            launch: launch_of(&p),
            max_minutes,
            watch,
            moved_from,
            output_max: usize::try_from(ctx.config.jobs.output_max.value).unwrap_or(usize::MAX),
            before,
        };
        if let Some((max_minutes, watch)) = background {
            // Up to `started`, the call's items go to the caller, but its output: the job's
            // from its first byte (the call holds it until `started`, up to a bound that a
            // flood passes); then it is a job.
            let mut before = Vec::new();
            loop {
                match stream.next().await {
                    Some(Event::Item(i @ LaunchItem::Started(_))) => {
                        call.items.send(to_value(&i)?).await?;
                        break;
                    }
                    Some(Event::Item(i @ LaunchItem::Output { .. })) => before.push(i),
                    Some(Event::Item(i)) => call.items.send(to_value(&i)?).await?,
                    Some(Event::End(fin)) => {
                        // It never started (a setup error): what it printed is the caller's.
                        for i in before {
                            call.items.send(to_value(&i)?).await?;
                        }
                        return to_value(&fin);
                    }
                    None => return Err(internal("the call ended without its finish")),
                }
            }
            let hooks = hooks.unwrap_or_default();
            let job = svc
                .jobs
                .start(spec(max_minutes, watch, None, before), stream, hooks);
            call.items
                .send(to_value(&LaunchItem::Job(Box::new(JobStarted {
                    job: job.info(),
                })))?)
                .await?;
            return to_value(&JobHandedOff {
                job_id: job.id.clone(),
                moved: false,
            });
        }
        let of = TheCall {
            svc: &svc,
            ctx: &ctx,
            params: &p,
            call_id: guard.call_id(),
            checks,
        };
        run_movable(
            &of,
            stream,
            &call.items,
            moves,
            |max_minutes, after_secs| {
                let from = MovedFrom {
                    call_id: guard.call_id().to_owned(),
                    after_secs,
                };
                spec(max_minutes, None, Some(from), Vec::new())
            },
        )
        .await
    })
}

/// What a running call is, for its move.
struct TheCall<'a> {
    svc: &'a Arc<Service>,
    ctx: &'a efr_call::Ctx,
    params: &'a CallParams,
    call_id: &'a str,
    /// What its job runs again while it lives.
    checks: Option<efr_jobs::registry::checks::Checks>,
}

/// The after-the-call checks of a contained call, for the job it is or may become (an
/// unsandboxed line has none: nothing of it is the sandbox's to check).
fn live_checks(
    c: &efr_call::Call,
    p: &CallParams,
    ctx: &efr_call::Ctx,
) -> Option<efr_jobs::registry::checks::Checks> {
    (c.plan().mode == efr_launcher::plan::PlanMode::Contained).then(|| {
        efr_jobs::registry::checks::Checks {
            roots: p.projects.iter().map(std::path::PathBuf::from).collect(),
            view: c.plan().read_only_inside.clone(),
            since_ms: efr_jobs::now_ms(),
            config: ctx.config.clone(),
            index: c.index_flags(),
        }
    })
}

/// Hands a running call's events on until its end, or until it is moved to a job.
async fn run_movable(
    of: &TheCall<'_>,
    mut stream: efr_call::CallStream,
    items: &ItemSink,
    mut moves: tokio::sync::mpsc::Receiver<MoveRequest>,
    spec: impl Fn(f64, f64) -> JobSpec,
) -> Result<serde_json::Value, ErrorBody> {
    let TheCall {
        svc,
        ctx,
        params,
        call_id,
        ..
    } = *of;
    let began = Instant::now();
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Some(Event::Item(i)) => items.send(to_value(&i)?).await?,
                Some(Event::End(fin)) => return to_value(&fin),
                None => return Err(internal("the call ended without its finish")),
            },
            Some(req) = moves.recv() => {
                if let Err(e) = svc.jobs.check_move(&ctx.config.jobs, req.max_minutes) {
                    let _ = req.reply.send(Err(e));
                    continue;
                }
                let mut hooks = svc
                    .jobs
                    .hooks_for_move(&ctx.config, params, call_id, stream.launcher_pid());
                hooks.checks = of.checks.clone();
                let job_spec = spec(req.max_minutes, began.elapsed().as_secs_f64());
                let job = svc.jobs.start(job_spec, stream, hooks);
                let _ = req.reply.send(Ok(job.id.clone()));
                // The call's launcher may have been the one in standby, which is filled
                // again when the call ends: a job may run for hours, so now.
                if let Some(s) = ctx.standby.clone() {
                    tokio::task::spawn_blocking(move || s.fill(&efr_call::launch::launcher()));
                }
                // The caller may be gone: the job runs on whatever it reads.
                let _ = items
                    .send(to_value(&LaunchItem::Moved { job_id: job.id.clone() })?)
                    .await;
                return to_value(&JobHandedOff { job_id: job.id.clone(), moved: true });
            }
        }
    }
}
