//! `admin.sandbox_check`.

use std::sync::Arc;

use crate::probe::run_check;
use crate::rpc::handler::{Call, HandlerFuture, NoParams, boxed, params, to_value};
use crate::state::Service;

/// `admin.sandbox_check`: runs every self-test now, from inside real contained calls;
/// returns the `sandbox_check` and makes its status the one `sandbox.status` gives.
pub fn sandbox_check(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let NoParams {} = params(call.params)?;
        let mut last = svc.last_check.lock().await;
        let c = run_check(&svc).await?;
        *last = Some(c.clone());
        drop(last);
        to_value(&c)
    })
}
