//! The handlers of the methods in [`crate::dispatch::METHODS`].

use std::sync::Arc;
use std::time::Duration;

use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode, StatusResult};
use efr_sandbox_wire::{ExplainParams, SandboxCheck, SandboxStatus};
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Value, json};

use crate::dispatch::{Call, HandlerFuture, boxed, params};
use crate::server::Service;

/// Test-only: waits `ms` milliseconds (at most ten minutes), so cancel can be tested on a
/// request that really runs.
pub const DEBUG_SLEEP: &str = "debug.sleep";
/// Test-only: its handler panics, to show a panic ends the request as `internal`.
pub const DEBUG_PANIC: &str = "debug.panic";
/// Test-only: sends `count` items of `size` bytes, to test streams and slow readers.
pub const DEBUG_STREAM: &str = "debug.stream";

/// Params of a method that takes none: absent, `null` or an object (whose members are
/// ignored).
#[derive(Debug, Deserialize)]
struct NoParams {}

fn result<T: Serialize>(v: &T) -> Result<Value, ErrorBody> {
    serde_json::to_value(v).map_err(|e| {
        ErrorBody::new(
            ErrorCode::Internal,
            format!("result does not serialize: {e}"),
        )
    })
}

/// Runs a check now (off the async threads) and caches it. The caller holds the lock.
async fn run_check(svc: &Arc<Service>) -> Result<SandboxCheck, ErrorBody> {
    let s2 = svc.clone();
    let handle = tokio::runtime::Handle::current();
    match tokio::task::spawn_blocking(move || crate::check::service_check(&s2, handle)).await {
        Ok(c) => Ok(c),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ErrorBody::new(
            ErrorCode::Internal,
            format!("the check did not finish: {e}"),
        )),
    }
}

/// `sandbox.status`: the `sandbox_status` of the last check (a check runs at the first
/// request when none has run yet), and the paths the service uses.
pub fn status(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let NoParams {} = params(call.params)?;
        let mut last = svc.last_check.lock().await;
        let status: SandboxStatus = match &*last {
            Some(c) => c.status.clone(),
            None => {
                let c = run_check(&svc).await?;
                let s = c.status.clone();
                *last = Some(c);
                s
            }
        };
        drop(last);
        result(&StatusResult {
            status,
            paths: svc.paths.to_wire(),
        })
    })
}

/// `admin.sandbox_check`: runs every self-test now, from inside real contained calls;
/// returns the `sandbox_check` and makes its status the one `sandbox.status` gives.
pub fn sandbox_check(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let NoParams {} = params(call.params)?;
        let mut last = svc.last_check.lock().await;
        let c = run_check(&svc).await?;
        *last = Some(c.clone());
        drop(last);
        result(&c)
    })
}

/// `sandbox.explain`: what a contained call gets at a path (efr-policy does the work, off
/// the async threads since it reads the file system).
pub fn explain(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: ExplainParams = params(call.params)?;
        let r = tokio::task::spawn_blocking(move || svc.policy.explain(p)).await;
        match r {
            Ok(r) => result(&r?),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(ErrorBody::new(
                ErrorCode::Internal,
                format!("explain did not finish: {e}"),
            )),
        }
    })
}

#[derive(Debug, Deserialize)]
struct SleepParams {
    ms: u64,
}

/// `debug.sleep` (only with `--test-methods`).
pub fn debug_sleep(_svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: SleepParams = params(call.params)?;
        let ms = p.ms.min(600_000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(json!({ "request": call.id, "slept_ms": ms }))
    })
}

/// `debug.panic` (only with `--test-methods`).
pub fn debug_panic(_svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let NoParams {} = params(call.params)?;
        panic!("debug.panic was called");
    })
}

#[derive(Debug, Deserialize)]
struct StreamParams {
    count: u32,
    #[serde(default)]
    size: u32,
}

/// `debug.stream` (only with `--test-methods`).
pub fn debug_stream(_svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: StreamParams = params(call.params)?;
        let size = (p.size as usize).min(1 << 20);
        let filler = "x".repeat(size);
        for n in 0..p.count {
            call.items.send(json!({ "n": n, "data": filler })).await?;
        }
        Ok(json!({ "sent": p.count }))
    })
}
