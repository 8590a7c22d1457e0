//! `sandbox.cache_delete_apply`: the held cache deletes of [`efr_call::caches`] the user
//! approved, applied.

use efr_call::caches::{MAX_HELD, apply, state_dir};

/// `sandbox.cache_delete_apply`: applies held cache deletes the user approved.
pub fn cache_delete_apply(
    svc: std::sync::Arc<crate::state::Service>,
    call: crate::rpc::handler::Call,
) -> crate::rpc::handler::HandlerFuture {
    use efr_sandbox_wire::rpc::{
        CacheDeleteApplyParams, CacheDeleteApplyResult, ErrorBody, ErrorCode,
    };
    crate::rpc::handler::boxed(async move {
        let p: CacheDeleteApplyParams = crate::rpc::handler::params(call.params)?;
        if p.paths.is_empty() || p.paths.len() > MAX_HELD {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                format!("paths: between 1 and {MAX_HELD} held deletes"),
            ));
        }
        let state = state_dir(svc.policy.env());
        let r = tokio::task::spawn_blocking(move || apply(&state, &p.paths))
            .await
            .map_err(|e| {
                ErrorBody::new(
                    ErrorCode::Internal,
                    format!("the apply did not finish: {e}"),
                )
            })?;
        match r {
            Ok(a) => serde_json::to_value(CacheDeleteApplyResult {
                paths: a.paths,
                freed_bytes: a.freed_bytes,
            })
            .map_err(|e| {
                ErrorBody::new(
                    ErrorCode::Internal,
                    format!("result does not serialize: {e}"),
                )
            }),
            Err(e) if e.is_invalid() => Err(ErrorBody::new(ErrorCode::Invalid, e.to_string())),
            Err(e) => Err(ErrorBody::new(ErrorCode::Internal, e.to_string())),
        }
    })
}
