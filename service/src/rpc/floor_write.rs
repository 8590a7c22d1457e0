//! `sandbox.floor_write`: a write to a floor file that the user approved (a file tool's
//! edit, or one line appended), made after a backup of the file; the result carries
//! `home_file_changed`.

use std::path::PathBuf;
use std::sync::Arc;

use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{FloorWriteParams, FloorWriteResult};
use efr_surface::floor::{Content, floor_write as write};

use crate::rpc::handler::{Call, HandlerFuture, blocking, boxed, params, to_value};
use crate::state::Service;

/// `sandbox.floor_write` (params `path`, and `edit` or `line`).
pub fn floor_write(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: FloorWriteParams = params(call.params)?;
        let content = match (p.edit, p.line) {
            (Some(e), None) => Content::Edit(e),
            (None, Some(l)) => Content::Line(l),
            _ => {
                return Err(ErrorBody::new(
                    ErrorCode::Invalid,
                    "a floor write needs exactly one of edit and line",
                ));
            }
        };
        let config = svc.policy.config();
        let env = svc.policy.env().clone();
        let Some(path) = env.expand(&p.path).filter(|p| p.is_absolute()) else {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                format!("path {:?} is not absolute or ~/...", p.path),
            ));
        };
        let r = blocking("floor_write", move || {
            let floors: Vec<PathBuf> = config
                .floors
                .paths
                .iter()
                .filter_map(|e| env.expand(&e.value))
                .collect();
            let state = efr_surface::state::state_dir(&env.home);
            write(&env.home, &state, &floors, &path, &content)
        })
        .await?;
        match r {
            Ok(c) => to_value(&FloorWriteResult {
                home_file_changed: c,
            }),
            Err(e) if e.is_input() => Err(ErrorBody::new(ErrorCode::Invalid, e.to_string())),
            Err(e) => Err(ErrorBody::new(ErrorCode::Internal, e.to_string())),
        }
    })
}
