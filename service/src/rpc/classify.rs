//! `sandbox.classify`: the classifier of efr-policy behind the service.

use std::sync::Arc;

use efr_policy::classify::{self, ClassifyRequest};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};

use crate::rpc::handler::{Call, HandlerFuture, blocking, boxed, params};
use crate::state::Service;

fn check_request(req: &ClassifyRequest) -> Result<(), ErrorBody> {
    let invalid = |m: String| Err(ErrorBody::new(ErrorCode::Invalid, m));
    if let Some(cwd) = &req.cwd {
        if !cwd.is_absolute() {
            return invalid(format!("cwd {} is not absolute", cwd.display()));
        }
    }
    for p in &req.project_roots {
        if !p.is_absolute() {
            return invalid(format!("project root {} is not absolute", p.display()));
        }
    }
    Ok(())
}

/// `sandbox.classify`: a line, its cwd, mode, project roots, granted launch and counters
/// in; `{launch, exits}` out. A line the parser cannot read (too long, too deep, broken)
/// is opaque: an exit for review, never an error and never "safe".
pub fn classify(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let req: ClassifyRequest = params(call.params)?;
        check_request(&req)?;
        let config = svc.policy.config();
        let ctx = svc.classifier.get(&config, svc.policy.env());
        let result = blocking("classify", move || classify::classify(&req, &ctx)).await?;
        serde_json::to_value(&result).map_err(|e| {
            ErrorBody::new(
                ErrorCode::Internal,
                format!("result does not serialize: {e}"),
            )
        })
    })
}
