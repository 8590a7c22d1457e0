//! What a handler gets and gives: the shared [`Service`], a [`Call`] (the request id, its
//! params and a sink for stream items) and a boxed future of its result; [`params`] reads
//! the params, [`boxed`] boxes the future, [`blocking`] runs work off the async threads.
//! Every handler (one file each in `rpc/`) uses this module and no other handler.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::state::Service;

/// What a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, ErrorBody>> + Send>>;

/// A method's handler.
pub type Handler = fn(Arc<Service>, Call) -> HandlerFuture;

/// What [`ItemOut::item`] returns.
pub type ItemFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ErrorBody>> + Send + 'a>>;

/// Where a request's items go (the connection's writer; a trait, so that handlers need
/// not know the connection).
pub trait ItemOut: Send + Sync + std::fmt::Debug {
    /// Sends one `{id, item}` frame.
    fn item(&self, item: Value) -> ItemFuture<'_>;
}

/// Sends the `{id, item}` frames of one request.
#[derive(Debug, Clone)]
pub struct ItemSink(Arc<dyn ItemOut>);

impl ItemSink {
    pub fn new(out: Arc<dyn ItemOut>) -> ItemSink {
        ItemSink(out)
    }

    /// Sends one item; an error when the request has ended (cancelled) or the connection
    /// is closing: the handler should return it.
    pub async fn send(&self, item: Value) -> Result<(), ErrorBody> {
        self.0.item(item).await
    }
}

/// One request, as a handler sees it.
#[derive(Debug)]
pub struct Call {
    pub id: u64,
    pub params: Value,
    /// Sends `{id, item}` frames (streams only).
    pub items: ItemSink,
    /// The fds sent with the request (`SCM_RIGHTS`, with its bytes): `sandbox.run`'s stdio.
    /// A method that takes none leaves them to close with the call.
    pub fds: Vec<std::os::fd::OwnedFd>,
    /// The peer's uid (`SO_PEERCRED`): one of the service's allowed uids.
    pub uid: u32,
}

/// `forbidden` unless the peer runs as the service's own uid: for what only the user the
/// service runs as may do (approvals), when `serve --allow-uid` lets other uids connect.
pub fn own_uid_only(call: &Call, what: &str) -> Result<(), ErrorBody> {
    let own = nix::unistd::geteuid().as_raw();
    if call.uid == own {
        Ok(())
    } else {
        Err(ErrorBody::new(
            ErrorCode::Forbidden,
            format!(
                "{what} is for the service's own user (uid {own}), not uid {}",
                call.uid
            ),
        ))
    }
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

/// Params of a method that takes none: absent, `null` or an object (whose members are
/// ignored).
#[derive(Debug, serde::Deserialize)]
pub struct NoParams {}

/// An `internal` error.
pub fn internal(m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(ErrorCode::Internal, m)
}

/// The end of a call of `p` that never ran (`sandbox.launch`, `sandbox.plan`,
/// `sandbox.run`), recorded in the call log.
pub fn setup_error_end(
    p: &efr_sandbox_wire::CallParams,
    ctx: &efr_call::Ctx,
    msg: String,
) -> Result<Value, ErrorBody> {
    let fin = efr_call::setup_error_finish(msg);
    efr_call::history::append_unprepared(p, &fin, &ctx.config, &ctx.env);
    to_value(&fin)
}

/// A result as its JSON (`internal` when it does not serialize).
pub fn to_value<T: Serialize>(v: &T) -> Result<Value, ErrorBody> {
    serde_json::to_value(v).map_err(|e| {
        ErrorBody::new(
            ErrorCode::Internal,
            format!("result does not serialize: {e}"),
        )
    })
}

/// Runs blocking work off the async threads; a panic goes on to the connection, which
/// answers `internal`.
pub async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorBody> {
    match efr_call::launch::off_runtime(f).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ErrorBody::new(
            ErrorCode::Internal,
            format!("{what} did not finish: {e}"),
        )),
    }
}

/// A planned call attached to its proxy (with `policy`) and started by `start`: its
/// stream, or the end of a call that did not start (a setup error's finish, or bad params).
pub fn begin_call(
    mut c: efr_call::Call,
    policy: Option<efr_proxy::ProxyPolicy>,
    ctx: &efr_call::Ctx,
    start: impl FnOnce(efr_call::Call) -> Result<efr_call::CallStream, efr_call::SpawnError>,
) -> Result<efr_call::CallStream, Result<Value, ErrorBody>> {
    use efr_call::PrepareError;
    match c.attach(policy, ctx) {
        Ok(()) => {}
        Err(PrepareError::Params(e)) => return Err(Err(e)),
        Err(e) => return Err(to_value(&c.unstarted(e.to_string()))),
    }
    start(c).map_err(|e| {
        to_value(&efr_call::setup_error_finish(format!(
            "cannot start efr-launch: {}",
            e.source
        )))
    })
}

/// The rest of a call of `sandbox.launch` or `sandbox.run` once planned: its proxy
/// attached (with `policy`), started by `start`, its items sent on `items`; its finish.
pub async fn run_call(
    c: efr_call::Call,
    policy: Option<efr_proxy::ProxyPolicy>,
    ctx: &efr_call::Ctx,
    items: &ItemSink,
    start: impl FnOnce(efr_call::Call) -> Result<efr_call::CallStream, efr_call::SpawnError>,
) -> Result<Value, ErrorBody> {
    use efr_call::Event;
    let mut stream = match begin_call(c, policy, ctx, start) {
        Ok(s) => s,
        Err(end) => return end,
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Event::Item(i) => items.send(to_value(&i)?).await?,
            Event::End(fin) => return to_value(&fin),
        }
    }
    Err(internal("the call ended without its finish"))
}
