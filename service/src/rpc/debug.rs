//! The test-only methods (`debug.*`, answered only with `--test-methods`).

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::rpc::handler::{Call, HandlerFuture, NoParams, boxed, params};
use crate::state::Service;

/// Test-only: waits `ms` milliseconds (at most ten minutes), so cancel can be tested on a
/// request that really runs.
pub const DEBUG_SLEEP: &str = "debug.sleep";
/// Test-only: its handler panics, to show a panic ends the request as `internal`.
pub const DEBUG_PANIC: &str = "debug.panic";
/// Test-only: sends `count` items of `size` bytes, to test streams and slow readers.
pub const DEBUG_STREAM: &str = "debug.stream";

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
