//! `sandbox.surface`: what a contained call could read that looks like a secret, with the
//! conversation's questions and the changes since its last scan (efr-surface does the work,
//! off the async threads: it walks the home).

use std::sync::Arc;

use efr_sandbox_wire::SurfaceParams;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_surface::run::SurfaceError;
use efr_surface::state::Store;

use crate::rpc::handler::{Call, HandlerFuture, blocking, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.surface` (params `projects`, `conversation`).
pub fn surface(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: SurfaceParams = params(call.params)?;
        let config = svc.policy.config();
        let env = svc.policy.env().clone();
        let r = blocking("surface", move || {
            let store = Store::for_home(&env.home);
            efr_surface::run::surface(
                &config,
                &env,
                &store,
                &p.conversation,
                &p.projects,
                &efr_surface::Budget::default(),
            )
        })
        .await?;
        match r {
            Ok(r) => to_value(&r),
            Err(e @ (SurfaceError::Project(_) | SurfaceError::Conversation(_))) => {
                Err(ErrorBody::new(ErrorCode::Invalid, e.to_string()))
            }
            Err(e) => Err(ErrorBody::new(ErrorCode::Internal, e.to_string())),
        }
    })
}
