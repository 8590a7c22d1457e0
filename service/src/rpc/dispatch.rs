//! The method table: every method the service answers, one handler (one file of `rpc/`)
//! each.
//!
//! A handler is a plain `fn` that returns a boxed future ([`crate::rpc::handler`]); it gets
//! the shared [`crate::state::Service`] and a [`Call`](crate::rpc::handler::Call) (the request id, its params and a
//! sink for stream items). A unary method
//! returns its result (sent as `{id, end: result}`); a stream sends items through
//! [`Call::items`](crate::rpc::handler::Call::items) and returns its last word. An error returned ends the request as
//! `{id, error}`. Cancel and panics are handled by the connection, not by handlers.
//!
//! Adding a method is one row in [`METHODS`] and one handler file in `rpc/`.
//!
//! `hello` is not in the table: it is answered by the connection itself, because it changes
//! the connection's state and must be handled before the next frame is read.

use efr_sandbox_wire::rpc::method;

use crate::rpc::handler::Handler;
use crate::rpc::{
    always_save, approval_decide, approval_record, approvals, cache_delete_apply, call_background,
    check, classify, debug, explain, finish, floor_write, job_events, job_output, job_stop, jobs,
    launch, plan, run, standing_grants, status, surface, surface_respond,
};

/// One row of the table.
#[derive(Debug)]
pub struct Method {
    pub name: &'static str,
    pub handler: Handler,
    /// Answered only when the service runs with `--test-methods` (tests of cancel, panics
    /// and slow readers). Never listed or answered otherwise.
    pub test_only: bool,
}

/// Every method the service answers, besides `hello`.
pub const METHODS: &[Method] = &[
    Method {
        name: method::STATUS,
        handler: status::status,
        test_only: false,
    },
    Method {
        name: method::CHECK,
        handler: check::sandbox_check,
        test_only: false,
    },
    Method {
        name: method::EXPLAIN,
        handler: explain::explain,
        test_only: false,
    },
    Method {
        name: method::CLASSIFY,
        handler: classify::classify,
        test_only: false,
    },
    Method {
        name: method::ALWAYS_SAVE,
        handler: always_save::always_save,
        test_only: false,
    },
    Method {
        name: method::CACHE_DELETE_APPLY,
        handler: cache_delete_apply::cache_delete_apply,
        test_only: false,
    },
    Method {
        name: method::LAUNCH,
        handler: launch::launch,
        test_only: false,
    },
    Method {
        name: method::RUN,
        handler: run::run,
        test_only: false,
    },
    Method {
        name: method::PLAN,
        handler: plan::plan,
        test_only: false,
    },
    Method {
        name: method::FINISH,
        handler: finish::finish,
        test_only: false,
    },
    Method {
        name: method::SURFACE,
        handler: surface::surface,
        test_only: false,
    },
    Method {
        name: method::SURFACE_RESPOND,
        handler: surface_respond::surface_respond,
        test_only: false,
    },
    Method {
        name: method::FLOOR_WRITE,
        handler: floor_write::floor_write,
        test_only: false,
    },
    Method {
        name: method::JOBS,
        handler: jobs::jobs,
        test_only: false,
    },
    Method {
        name: method::JOB_STOP,
        handler: job_stop::job_stop,
        test_only: false,
    },
    Method {
        name: method::JOB_OUTPUT,
        handler: job_output::job_output,
        test_only: false,
    },
    Method {
        name: method::JOB_EVENTS,
        handler: job_events::job_events,
        test_only: false,
    },
    Method {
        name: method::CALL_BACKGROUND,
        handler: call_background::call_background,
        test_only: false,
    },
    Method {
        name: method::APPROVALS,
        handler: approvals::approvals,
        test_only: false,
    },
    Method {
        name: method::APPROVAL_DECIDE,
        handler: approval_decide::approval_decide,
        test_only: false,
    },
    Method {
        name: method::APPROVAL_RECORD,
        handler: approval_record::approval_record,
        test_only: false,
    },
    Method {
        name: method::STANDING_GRANTS,
        handler: standing_grants::standing_grants,
        test_only: false,
    },
    Method {
        name: debug::DEBUG_SLEEP,
        handler: debug::debug_sleep,
        test_only: true,
    },
    Method {
        name: debug::DEBUG_PANIC,
        handler: debug::debug_panic,
        test_only: true,
    },
    Method {
        name: debug::DEBUG_STREAM,
        handler: debug::debug_stream,
        test_only: true,
    },
];

/// The method of this name, when the service answers it.
pub fn lookup(name: &str, test_methods: bool) -> Option<&'static Method> {
    METHODS
        .iter()
        .find(|m| m.name == name && (test_methods || !m.test_only))
}

/// The names `hello` lists: `hello` and every method answered.
pub fn method_names(test_methods: bool) -> Vec<String> {
    std::iter::once(method::HELLO)
        .chain(
            METHODS
                .iter()
                .filter(|m| test_methods || !m.test_only)
                .map(|m| m.name),
        )
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_test_methods_hidden() {
        let all = method_names(true);
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len());
        let public = method_names(false);
        assert!(public.iter().all(|m| !m.starts_with("debug.")));
        assert!(public.contains(&"sandbox.explain".to_owned()));
        assert!(lookup("debug.sleep", false).is_none());
        assert!(lookup("debug.sleep", true).is_some());
    }
}
