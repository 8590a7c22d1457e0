//! `sandbox.always_save`: an "allow always" rule written into the user's config file.

use std::sync::Arc;

use efr_policy::config::AlwaysRule;
use efr_sandbox_wire::AlwaysOutcome;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};

use crate::rpc::handler::{Call, HandlerFuture, blocking, boxed, params};
use crate::state::Service;

/// Params of `sandbox.always_save`.
#[derive(Debug, Deserialize)]
struct AlwaysSaveParams {
    rule: AlwaysRule,
    /// The config file's text as the caller read it; the save is `changed` when the file
    /// differs now. Absent: only a change while the service writes is caught.
    #[serde(default)]
    expected: Option<String>,
}

/// Result of `sandbox.always_save`.
#[derive(Debug, Serialize)]
struct AlwaysSaveResult {
    outcome: AlwaysOutcome,
}

/// `sandbox.always_save`: writes an "allow always" rule into the user's config file.
pub fn always_save(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: AlwaysSaveParams = params(call.params)?;
        if p.rule.command.is_empty() && p.rule.host.is_none() && p.rule.path.is_none() {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                "an always rule needs a command, a host or a path",
            ));
        }
        let path = svc.policy.env().config_file();
        let outcome = blocking("always_save", move || {
            crate::always::save_always(&path, p.expected.as_deref(), &p.rule)
        })
        .await?;
        if matches!(outcome, AlwaysOutcome::Saved { .. }) {
            // Read the new file now, so the next classification matches the rule.
            let _ = svc.policy.config();
        }
        serde_json::to_value(AlwaysSaveResult { outcome }).map_err(|e| {
            ErrorBody::new(
                ErrorCode::Internal,
                format!("result does not serialize: {e}"),
            )
        })
    })
}
