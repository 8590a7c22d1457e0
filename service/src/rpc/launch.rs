//! `sandbox.launch` (a stream), `sandbox.plan` and `sandbox.finish`: each a call of
//! [`efr_call::Call`], which owns it. See docs/protocol.md for the frames.

use std::sync::Arc;

use efr_call::{Ctx, Event, PrepareError, ProxyWhen, setup_error_finish};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{CallParams, FinishParams, PlanParams};
use serde::Serialize;
use serde_json::Value;

use crate::dispatch::{Call, HandlerFuture, boxed, params};
use crate::server::Service;

fn internal(m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(ErrorCode::Internal, m)
}

fn to_value<T: Serialize>(v: &T) -> Result<Value, ErrorBody> {
    serde_json::to_value(v).map_err(|e| internal(format!("result does not serialize: {e}")))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorBody> {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(internal(format!("did not finish: {e}"))),
    }
}

/// The end of a call that never ran.
fn setup_error_end(msg: String) -> Result<Value, ErrorBody> {
    to_value(&setup_error_finish(msg))
}

/// The context of the service's calls: its config, its runtime dir (conversations and
/// sockets), this runtime for their proxies.
fn ctx(svc: &Service) -> Ctx {
    Ctx {
        config: svc.policy.config(),
        env: svc.policy.env().clone(),
        conversations: Some(svc.paths.runtime_dir.clone()),
        sockets: Some(svc.paths.runtime_dir.clone()),
        handle: tokio::runtime::Handle::current(),
    }
}

/// `sandbox.launch`: runs one line through the launcher; items `started`, `output`, `exit`
/// (denials), then the end (summary, code or signal, duration). Cancel ends the tree.
pub fn launch(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: CallParams = params(call.params)?;
        let ctx = ctx(&svc);
        let c2 = ctx.clone();
        // The plan and, for a call that gets a proxy, its policy (which reads token files):
        // one trip to the blocking pool, not two.
        let prepared = blocking(move || {
            efr_call::Call::prepare(&p, &c2).map(|mut c| {
                // The launcher starts from this process's environment: what of it is not
                // passed because it looks like a secret goes in the summary.
                c.note_env_dropped(Vec::new());
                let pol = c.proxy_policy(ProxyWhen::Wanted);
                (c, pol)
            })
        })
        .await?;
        let (mut c, pol) = match prepared {
            Ok(x) => x,
            Err(PrepareError::Params(e)) => return Err(e),
            Err(PrepareError::Setup(msg)) => return setup_error_end(msg),
        };
        match c.attach(pol, &ctx) {
            Ok(()) => {}
            Err(PrepareError::Params(e)) => return Err(e),
            Err(PrepareError::Setup(msg)) => return setup_error_end(msg),
        }
        let mut stream = match c.start(&ctx) {
            Ok(s) => s,
            Err(e) => return setup_error_end(format!("cannot start efr-launch: {}", e.source)),
        };
        while let Some(ev) = stream.next().await {
            match ev {
                Event::Item(i) => call.items.send(to_value(&i)?).await?,
                Event::End(fin) => return to_value(&fin),
            }
        }
        Err(internal("the call ended without its finish"))
    })
}

/// `sandbox.plan`: the launcher command line and a plan file it reads (0600 in a 0700 dir
/// of the runtime dir), the conversation's dirs made; `sandbox.finish` releases them.
pub fn plan(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: PlanParams = params(call.params)?;
        let status_fd = p.status_fd.unwrap_or(3);
        if !(3..=1024).contains(&status_fd) {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                format!("status_fd {status_fd}: expected 3 to 1024"),
            ));
        }
        let ctx = ctx(&svc);
        let svc2 = svc.clone();
        blocking(move || {
            let prepared = efr_call::Call::prepare(&p.call, &ctx).and_then(|mut c| {
                let pol = c.proxy_policy(ProxyWhen::Wanted);
                c.attach(pol, &ctx).map(|()| c)
            });
            let c = match prepared {
                Ok(c) => c,
                Err(PrepareError::Params(e)) => return Err(e),
                Err(PrepareError::Setup(msg)) => return setup_error_end(msg),
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

/// `sandbox.finish`: folds the call's status lines, deletes its plan file, returns the
/// summary and the denial exit records.
pub fn finish(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: FinishParams = params(call.params)?;
        let Some(c) = svc.planned.take(&p.token) else {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!(
                    "no planned call with token {:?} (finished already?)",
                    p.token
                ),
            ));
        };
        let fin = blocking(move || c.finish(&p.status)).await?;
        to_value(&fin)
    })
}
