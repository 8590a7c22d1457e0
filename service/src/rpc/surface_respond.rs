//! `sandbox.surface_respond`: the user's answer to a surface question, kept in the state
//! directory; a masked answer hides the file from the next contained call on.

use std::sync::Arc;

use efr_sandbox_wire::SurfaceRespondParams;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_surface::run::SurfaceRespondError;
use efr_surface::state::Store;

use crate::rpc::handler::{Call, HandlerFuture, blocking, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.surface_respond` (params `conversation`, `question_id`, `keep`); an unknown or
/// stale question id is `not_found`.
pub fn surface_respond(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: SurfaceRespondParams = params(call.params)?;
        let home = svc.policy.env().home.clone();
        let r = blocking("surface_respond", move || {
            efr_surface::run::surface_respond(
                &Store::for_home(&home),
                &p.conversation,
                &p.question_id,
                p.keep,
            )
        })
        .await?;
        match r {
            Ok(r) => to_value(&r),
            Err(e @ SurfaceRespondError::Conversation(_)) => {
                Err(ErrorBody::new(ErrorCode::Invalid, e.to_string()))
            }
            Err(e @ SurfaceRespondError::NotFound(_)) => {
                Err(ErrorBody::new(ErrorCode::NotFound, e.to_string()))
            }
            Err(e) => Err(ErrorBody::new(ErrorCode::Internal, e.to_string())),
        }
    })
}
