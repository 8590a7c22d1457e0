//! The method table: every method the service answers, and what a handler gets.
//!
//! A handler is a plain `fn` that returns a boxed future; it gets the shared [`Service`]
//! and a [`Call`] (the request id, its params and a sink for stream items). A unary method
//! returns its result (sent as `{id, end: result}`); a stream sends items through
//! [`Call::items`] and returns its last word. An error returned ends the request as
//! `{id, error}`. Cancel and panics are handled by the connection, not by handlers.
//!
//! Adding a method later (`sandbox.classify`, ...) is one row in [`METHODS`] and one
//! handler in [`crate::methods`] (or [`crate::launch_rpc`] for the launch methods).
//!
//! `hello` is not in the table: it is answered by the connection itself, because it changes
//! the connection's state and must be handled before the next frame is read.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode, method};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::conn::ItemSink;
use crate::methods;
use crate::server::Service;

/// What a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, ErrorBody>> + Send>>;

/// A method's handler.
pub type Handler = fn(Arc<Service>, Call) -> HandlerFuture;

/// One request, as a handler sees it.
#[derive(Debug)]
pub struct Call {
    pub id: u64,
    pub params: Value,
    /// Sends `{id, item}` frames (streams only).
    pub items: ItemSink,
}

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
        handler: methods::status,
        test_only: false,
    },
    Method {
        name: method::CHECK,
        handler: methods::sandbox_check,
        test_only: false,
    },
    Method {
        name: method::EXPLAIN,
        handler: methods::explain,
        test_only: false,
    },
    Method {
        name: method::CLASSIFY,
        handler: crate::classify::classify,
        test_only: false,
    },
    Method {
        name: method::ALWAYS_SAVE,
        handler: crate::classify::always_save,
        test_only: false,
    },
    Method {
        name: method::CACHE_DELETE_APPLY,
        handler: crate::cache_cmd::apply_rpc,
        test_only: false,
    },
    Method {
        name: method::LAUNCH,
        handler: crate::launch_rpc::launch,
        test_only: false,
    },
    Method {
        name: method::PLAN,
        handler: crate::launch_rpc::plan,
        test_only: false,
    },
    Method {
        name: method::FINISH,
        handler: crate::launch_rpc::finish,
        test_only: false,
    },
    Method {
        name: methods::DEBUG_SLEEP,
        handler: methods::debug_sleep,
        test_only: true,
    },
    Method {
        name: methods::DEBUG_PANIC,
        handler: methods::debug_panic,
        test_only: true,
    },
    Method {
        name: methods::DEBUG_STREAM,
        handler: methods::debug_stream,
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

/// Reads params into `T`; a failure is `invalid` with serde's message. Params must be an
/// object; absent params (`null`) read as an empty object, so a method whose params are all
/// optional needs none. Members `T` does not know are ignored, as every reader of the
/// protocol does (additive changes).
pub fn params<T: DeserializeOwned>(params: Value) -> Result<T, ErrorBody> {
    let params = match params {
        Value::Null => Value::Object(Default::default()),
        Value::Object(m) => Value::Object(m),
        other => {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                format!("invalid params: expected an object, got {}", kind(&other)),
            ));
        }
    };
    serde_json::from_value(params)
        .map_err(|e| ErrorBody::new(ErrorCode::Invalid, format!("invalid params: {e}")))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Boxes a handler's future.
pub fn boxed<F>(f: F) -> HandlerFuture
where
    F: Future<Output = Result<Value, ErrorBody>> + Send + 'static,
{
    Box::pin(f)
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
