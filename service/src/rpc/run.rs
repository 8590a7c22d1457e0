//! `sandbox.run` (a stream): a call of `efr-sandbox run` handed to the service, run with
//! the caller's stdin, stdout and stderr (the three fds sent with the request) and the
//! caller's environment, through the launcher in standby. Items: `env_dropped` (what of
//! the environment the line does not get, with why), `started`, `exit`; the end is the
//! finish. Taken only from this service's own build, for its own home, runtime dir and
//! config home: else `conflict`, and the caller runs the call itself.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use efr_call::{PrepareError, ProxyWhen};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{LaunchItem, RunParams};

use crate::rpc::handler::{
    Call, HandlerFuture, blocking, boxed, params, run_call, setup_error_end, to_value,
};
use crate::state::Service;

/// Whether the caller is one this service runs calls for: `Err` with why not.
fn same_caller(svc: &Service, p: &RunParams) -> Result<(), String> {
    if p.build != crate::identity::build() {
        return Err(format!(
            "the service is another build of efr-sandbox ({}, the caller's {})",
            crate::identity::build(),
            p.build
        ));
    }
    let own = crate::identity::Dirs::of(svc.policy.env());
    let theirs = crate::identity::Dirs {
        home: p.home.clone(),
        runtime_dir: p.runtime_dir.clone(),
        config_home: p.config_home.clone(),
    };
    if own != theirs {
        return Err(format!(
            "the service runs for {own}, the caller has {theirs}"
        ));
    }
    Ok(())
}

/// `sandbox.run`.
pub fn run(svc: Arc<Service>, mut call: Call) -> HandlerFuture {
    boxed(async move {
        let fds = std::mem::take(&mut call.fds);
        let stdio: [OwnedFd; 3] = fds.try_into().map_err(|f: Vec<OwnedFd>| {
            ErrorBody::new(
                ErrorCode::Invalid,
                format!(
                    "sandbox.run takes the caller's stdin, stdout and stderr: 3 fds sent with \
                     the request (SCM_RIGHTS); {} came",
                    f.len()
                ),
            )
        })?;
        let mut p: RunParams = params(call.params)?;
        if p.call.background.is_some() {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                "background: a job is started by sandbox.launch, not sandbox.run (whose \
                 stdio is the caller's)",
            ));
        }
        same_caller(&svc, &p).map_err(|why| ErrorBody::new(ErrorCode::Conflict, why))?;
        // The grants the user approved for this conversation (`efr-sandbox approve`), for
        // the calls of the uid they were approved for.
        let ttl = svc.standing_ttl();
        if let Some(conv) = &p.call.conversation {
            for g in svc.approvals.standing(call.uid, conv, ttl) {
                if !p.call.grants.contains(&g) {
                    p.call.grants.push(g);
                }
            }
        }
        let asked = (
            p.call.line.clone(),
            p.call.conversation.clone(),
            p.call.projects.clone(),
        );
        // A config file that does not load is the caller's error, as it is without the
        // service (which would go on with the last good one).
        let config = svc
            .policy
            .config_as_is()
            .map_err(|e| ErrorBody::new(ErrorCode::Invalid, e))?;
        let ctx = svc.call_ctx_with(config);
        let announced = ctx
            .standby
            .as_ref()
            .and_then(|s| s.announce(&p.call, &ctx.config));
        let c2 = ctx.clone();
        let env: Vec<(String, String)> = p.env.into_iter().map(|v| (v.name, v.value)).collect();
        let (cp, env_args) = (p.call, p.env_args);
        let unprepared = cp.clone();
        // As `sandbox.launch`: the plan and its proxy policy in one trip, one moment's look
        // at the file system; then `--env`, and what of the environment is not passed.
        let prepared = blocking("the call", move || {
            efr_policy::path::memoized(|| {
                efr_call::Call::prepare_with_env(&cp, &c2, Some(env)).map(|mut c| {
                    let notes = c
                        .env_args(&env_args)
                        .map(|refused| c.note_env_dropped(refused));
                    let pol = c.proxy_policy(ProxyWhen::Wanted);
                    (c, notes, pol)
                })
            })
        })
        .await?;
        let (c, notes, pol) = match prepared {
            Ok(x) => x,
            Err(PrepareError::Params(e)) => return Err(e),
            Err(e) => return setup_error_end(&unprepared, &ctx, e.to_string()),
        };
        let notes = notes.map_err(|e| ErrorBody::new(ErrorCode::Invalid, format!("--env {e}")))?;
        for (name, why) in notes {
            call.items
                .send(to_value(&LaunchItem::EnvDropped { name, why })?)
                .await?;
        }
        let end = run_call(c, pol, &ctx, &call.items, |c| {
            c.start_passed(&ctx, announced, stdio)
        })
        .await?;
        Ok(with_approvals(&svc, call.uid, asked, end, ttl))
    })
}

/// The finish `end` with the pending approvals made of its refused exit records (see
/// [`crate::approvals`]); as it is when it has none, or does not read as a finish.
fn with_approvals(
    svc: &Service,
    uid: u32,
    (line, conversation, projects): (String, Option<String>, Vec<String>),
    end: serde_json::Value,
    ttl: std::time::Duration,
) -> serde_json::Value {
    let Ok(mut fin) = serde_json::from_value::<efr_sandbox_wire::Finish>(end.clone()) else {
        return end;
    };
    if fin.exits.is_empty() {
        return end;
    }
    fin.approvals = svc.approvals.record(
        uid,
        &line,
        conversation.as_deref(),
        &projects,
        &fin.exits,
        ttl,
    );
    serde_json::to_value(&fin).unwrap_or(end)
}
