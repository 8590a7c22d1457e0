//! One client connection: reading frames, `hello`, requests run as tasks, cancel, and the
//! one writer that every frame of the connection goes through.
//!
//! Rules (also in docs/protocol.md):
//! - The first request must be `hello` with [`PROTOCOL_VERSION`]. Any other method before a
//!   good hello gets `unauthorized`. A hello with another protocol gets `protocol_mismatch`
//!   (`data: {client, service}`) and the connection stays open but closed to methods: the
//!   client may send a good hello or hang up. A second hello after a good one is `conflict`.
//! - A frame that is not JSON, not an object, empty, oversized, or has no readable id gets
//!   `{id: null, error: invalid}`; when the id is readable the error carries it. The
//!   connection goes on with the next frame (the decoder skips an oversized body).
//! - `{cancel: id}` ends a running request with `{id, error: cancelled}`. Cancelling an id
//!   that is not running (never was, or already ended) is a no-op with no answer.
//! - Requests run concurrently, each as its own task; a request id still running cannot be
//!   reused (`conflict`); more than [`crate::state::Limits::inflight`] at once is `busy`.
//! - A handler that panics ends its request with `internal`; the service goes on.
//! - Outgoing frames go through a bounded queue; a client that does not read for
//!   [`crate::state::Limits::slow_reader`] while the queue is full (or while one frame is being written)
//!   is disconnected, so it wedges nothing but itself.
//! - A connection without a good hello [`crate::state::Limits::hello_deadline`] after it
//!   connected, or inside a frame [`crate::state::Limits::frame_deadline`] after the frame's
//!   first byte, gets a last `{id: null, error: invalid}` and is closed: a stalled client
//!   frees its slot.
//! - A frame body over [`crate::state::Limits::frame_free`] is read only against the
//!   service's frame budget, shared by every connection; when it is spent, the body is
//!   skipped and the client gets `{id: null, error: busy}`.
//! - When the client ends its side (EOF), the requests still running finish and their
//!   answers are written before the connection closes. When it hangs up altogether (its
//!   socket closed, it died), nobody can read them: they are ended as a cancel ends them
//!   (a launch's whole tree with it). A stream that ends inside a frame
//!   gets a last `{id: null, error: invalid}` (best effort) and the connection closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use efr_sandbox_wire::PROTOCOL_VERSION;
use efr_sandbox_wire::frame::{self, FrameDecoder, FrameError};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode, HelloParams, HelloResult, ServerFrame, method};
use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc::error::SendTimeoutError;
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};

use crate::rpc::dispatch;
use crate::rpc::handler::{Call, ItemSink};
use crate::state::Service;

/// The outgoing side of a connection.
#[derive(Debug)]
struct Outbox {
    tx: mpsc::Sender<Vec<u8>>,
    close: watch::Sender<bool>,
    slow: Duration,
    peer: String,
}

impl Outbox {
    /// Queues a frame; false when the connection is closing (or was just closed because
    /// the client does not read).
    async fn send(&self, frame: &ServerFrame) -> bool {
        let bytes = match frame::encode(frame) {
            Ok(b) => b,
            Err(e) => {
                let id = match frame {
                    ServerFrame::Item { id, .. } | ServerFrame::End { id, .. } => Some(*id),
                    ServerFrame::Error { id, .. } => *id,
                };
                let err = ServerFrame::Error {
                    id,
                    error: ErrorBody::new(ErrorCode::Internal, format!("answer not sent: {e}")),
                };
                match frame::encode(&err) {
                    Ok(b) => b,
                    Err(_) => return false,
                }
            }
        };
        self.send_bytes(bytes).await
    }

    async fn send_bytes(&self, bytes: Vec<u8>) -> bool {
        if *self.close.borrow() {
            return false;
        }
        match self.tx.send_timeout(bytes, self.slow).await {
            Ok(()) => true,
            Err(SendTimeoutError::Timeout(_)) => {
                eprintln!(
                    "efr-sandbox: {}: client does not read its answers; closing the connection",
                    self.peer
                );
                self.close.send_replace(true);
                false
            }
            Err(SendTimeoutError::Closed(_)) => {
                self.close.send_replace(true);
                false
            }
        }
    }
}

/// The frames of one request: once its last frame is sent (end, error or cancelled),
/// nothing more of it goes out.
#[derive(Debug)]
struct RequestOut {
    id: u64,
    done: tokio::sync::Mutex<bool>,
    outbox: Arc<Outbox>,
}

impl RequestOut {
    async fn item(&self, item: Value) -> Result<(), ErrorBody> {
        let done = self.done.lock().await;
        if *done {
            return Err(ErrorBody::new(
                ErrorCode::Cancelled,
                "the request has ended",
            ));
        }
        let bytes = frame::encode(&ServerFrame::Item { id: self.id, item })
            .map_err(|e| ErrorBody::new(ErrorCode::Internal, format!("item not sent: {e}")))?;
        if self.outbox.send_bytes(bytes).await {
            Ok(())
        } else {
            Err(ErrorBody::new(
                ErrorCode::Cancelled,
                "the connection is closing",
            ))
        }
    }

    async fn finish(&self, last: ServerFrame) {
        let mut done = self.done.lock().await;
        if *done {
            return;
        }
        *done = true;
        self.outbox.send(&last).await;
    }
}

impl crate::rpc::handler::ItemOut for RequestOut {
    fn item(&self, item: Value) -> crate::rpc::handler::ItemFuture<'_> {
        Box::pin(RequestOut::item(self, item))
    }
}

#[derive(Debug)]
struct Running {
    out: Arc<RequestOut>,
    abort: AbortHandle,
}

type Requests = Arc<Mutex<HashMap<u64, Running>>>;

fn lock(r: &Requests) -> MutexGuard<'_, HashMap<u64, Running>> {
    r.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HelloState {
    Waiting,
    /// The last hello named this protocol.
    Mismatched(u32),
    Open,
}

/// A frame from the client, read leniently so that errors can carry the id.
#[derive(Debug, PartialEq)]
enum Parsed {
    Cancel(u64),
    Request {
        id: u64,
        method: String,
        params: Value,
    },
    Bad(Option<u64>, String),
}

fn parse(mut map: Map<String, Value>) -> Parsed {
    let id = map.get("id").and_then(Value::as_u64);
    if let Some(c) = map.get("cancel") {
        if map.contains_key("method") {
            return Parsed::Bad(id, "a frame is a request or a cancel, not both".into());
        }
        return match c.as_u64() {
            Some(c) => Parsed::Cancel(c),
            None => Parsed::Bad(
                None,
                format!("cancel must name a request id (an unsigned integer), got {c}"),
            ),
        };
    }
    let id = match map.get("id") {
        None => return Parsed::Bad(None, "frame has no id".into()),
        Some(v) => match v.as_u64() {
            Some(id) => id,
            None => {
                return Parsed::Bad(
                    None,
                    format!("frame id must be an unsigned integer, got {v}"),
                );
            }
        },
    };
    let method = match map.remove("method") {
        None => return Parsed::Bad(Some(id), "frame has no method".into()),
        Some(Value::String(m)) => m,
        Some(other) => {
            return Parsed::Bad(Some(id), format!("method must be a string, got {other}"));
        }
    };
    let params = map.remove("params").unwrap_or(Value::Null);
    Parsed::Request { id, method, params }
}

struct Conn {
    svc: Arc<Service>,
    outbox: Arc<Outbox>,
    requests: Requests,
    supervisors: JoinSet<()>,
    state: HelloState,
    /// Fds that came with the bytes read since the last request (`SCM_RIGHTS`): the next
    /// request takes them (`sandbox.run`'s stdio); any other request closes them unread.
    fds: Vec<std::os::fd::OwnedFd>,
    /// Why the peer is taken for a contained call ([`crate::peer::contained`]): every
    /// method but `hello` is then `forbidden`.
    contained: Option<String>,
    /// The peer's uid (`SO_PEERCRED`), for the methods only the service's own uid may ask.
    uid: u32,
}

/// Most fds a connection holds for its next request; more is a client that sends fds no
/// request takes, and every one of them is closed.
const MAX_HELD_FDS: usize = 3;

/// Reads what is there (waiting until something is) with the fds sent with it.
async fn read_with_fds(
    rd: &tokio::net::unix::OwnedReadHalf,
    buf: &mut [u8],
) -> std::io::Result<(usize, Vec<std::os::fd::OwnedFd>)> {
    let sock: &UnixStream = rd.as_ref();
    loop {
        sock.readable().await?;
        match sock.try_io(tokio::io::Interest::READABLE, || {
            efr_call::sys::recv_with_fds(sock, buf)
        }) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}

/// Serves one connection until the client hangs up or is disconnected.
pub async fn serve(
    svc: Arc<Service>,
    stream: UnixStream,
    peer: String,
    uid: u32,
    contained: Option<String>,
    _permit: OwnedSemaphorePermit,
) {
    let limits = svc.limits;
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel(limits.queue.max(1));
    let (close_tx, mut close_rx) = watch::channel(false);
    let outbox = Arc::new(Outbox {
        tx,
        close: close_tx.clone(),
        slow: limits.slow_reader,
        peer: peer.clone(),
    });
    let mut writer = tokio::spawn(write_loop(
        wr,
        rx,
        close_tx.clone(),
        limits.slow_reader,
        peer.clone(),
    ));
    let mut conn = Conn {
        svc,
        outbox,
        requests: Arc::new(Mutex::new(HashMap::new())),
        supervisors: JoinSet::new(),
        state: HelloState::Waiting,
        fds: Vec::new(),
        contained,
        uid,
    };

    let mut buf = vec![0u8; 64 * 1024];
    let mut decoder = FrameDecoder::new();
    let opened = tokio::time::Instant::now();
    let mut hold = FrameHold::default();
    let ended_by_client = loop {
        let deadline = conn.deadline(opened, &hold);
        let n = tokio::select! {
            r = read_with_fds(&rd, &mut buf) => match r {
                Ok((0, _)) => break true,
                Ok((n, fds)) => {
                    conn.fds.extend(fds);
                    if conn.fds.len() > MAX_HELD_FDS {
                        eprintln!("efr-sandbox: {peer}: more than {MAX_HELD_FDS} fds sent for one request; closed them");
                        conn.fds.clear();
                    }
                    Some(n)
                }
                Err(e) => {
                    eprintln!("efr-sandbox: {peer}: read failed: {e}");
                    break false;
                }
            },
            _ = close_rx.wait_for(|c| *c) => break false,
            () = until(deadline) => None,
        };
        let Some(n) = n else {
            conn.too_slow(opened, &peer).await;
            break false;
        };
        decoder.push(&buf[..n]);
        let mut took = false;
        while let Some(f) = decoder.next_frame() {
            took = true;
            conn.on_frame(f).await;
        }
        conn.hold_frame(&mut decoder, &mut hold, took).await;
        while conn.supervisors.try_join_next().is_some() {}
    };

    if ended_by_client {
        if let Err(e) = decoder.finish() {
            eprintln!("efr-sandbox: {peer}: {e}");
            conn.error(None, ErrorCode::Invalid, e.to_string()).await;
        }
        // Let the requests still running answer, as long as the client can read them: a
        // client that closed its socket (not only its sending side) has hung up, and its
        // requests end now.
        let fd = std::os::fd::AsRawFd::as_raw_fd(rd.as_ref());
        let mut tick = tokio::time::interval(HANGUP_CHECK);
        loop {
            tokio::select! {
                r = conn.supervisors.join_next() => if r.is_none() { break },
                _ = close_rx.wait_for(|c| *c) => break,
                _ = tick.tick() => if crate::sys::hung_up(fd) { break },
            }
        }
    }
    for (_, r) in lock(&conn.requests).drain() {
        r.abort.abort();
    }
    conn.supervisors.abort_all();
    drop(conn);
    // Every sender is gone (or going): the writer drains the queue and ends.
    if tokio::time::timeout(limits.slow_reader, &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

/// What the reader holds of the frame being read: when its first byte came, and its share
/// of the service's frame budget (a large body's length, while it is read).
#[derive(Debug, Default)]
struct FrameHold {
    began: Option<tokio::time::Instant>,
    budget: Option<OwnedSemaphorePermit>,
}

/// Waits until `deadline` (for ever without one).
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// How often a connection whose client sent EOF is checked for a hang-up.
const HANGUP_CHECK: Duration = Duration::from_millis(100);

async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Vec<u8>>,
    close: watch::Sender<bool>,
    slow: Duration,
    peer: String,
) {
    while let Some(bytes) = rx.recv().await {
        match tokio::time::timeout(slow, wr.write_all(&bytes)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    eprintln!("efr-sandbox: {peer}: write failed: {e}");
                }
                close.send_replace(true);
                return;
            }
            Err(_) => {
                eprintln!(
                    "efr-sandbox: {peer}: client does not read its answers; closing the connection"
                );
                close.send_replace(true);
                return;
            }
        }
    }
    let _ = wr.shutdown().await;
}

impl Conn {
    /// When the connection is dropped unless more comes: its hello's deadline until a
    /// good hello, the frame's once one has begun.
    fn deadline(
        &self,
        opened: tokio::time::Instant,
        hold: &FrameHold,
    ) -> Option<tokio::time::Instant> {
        let limits = self.svc.limits;
        let hello = (self.state != HelloState::Open).then(|| opened + limits.hello_deadline);
        let frame = hold.began.map(|b| b + limits.frame_deadline);
        hello.into_iter().chain(frame).min()
    }

    /// Says why a client that stalled is dropped (logged, and to it as a last error).
    async fn too_slow(&self, opened: tokio::time::Instant, peer: &str) {
        let limits = self.svc.limits;
        let why = if self.state != HelloState::Open && opened.elapsed() >= limits.hello_deadline {
            format!(
                "no hello with protocol {PROTOCOL_VERSION} within {}s of connecting",
                limits.hello_deadline.as_secs_f64()
            )
        } else {
            format!(
                "a frame was not complete within {}s of its first byte",
                limits.frame_deadline.as_secs_f64()
            )
        };
        eprintln!("efr-sandbox: {peer}: {why}; closing the connection");
        self.error(
            None,
            ErrorCode::Invalid,
            format!("{why}; closing the connection"),
        )
        .await;
    }

    /// After the frames of a read are out: starts the clock of a frame begun, and takes a
    /// large body's length from the service's frame budget before more of it is held;
    /// when the budget is spent, skips the body (held: one read's worth at most) and
    /// answers `busy`.
    async fn hold_frame(&self, d: &mut FrameDecoder, hold: &mut FrameHold, took: bool) {
        if took {
            // The held frame is out; a next one begun in the same read begins now.
            *hold = FrameHold::default();
        }
        if !d.in_frame() {
            *hold = FrameHold::default();
            return;
        }
        hold.began.get_or_insert_with(tokio::time::Instant::now);
        let len = match d.body_pending() {
            Some(len) if len > self.svc.limits.frame_free => len,
            _ => {
                hold.budget = None;
                return;
            }
        };
        if hold.budget.is_some() {
            return;
        }
        let permits = u32::try_from(len).unwrap_or(u32::MAX);
        match self
            .svc
            .frame_budget
            .clone()
            .try_acquire_many_owned(permits)
        {
            Ok(p) => hold.budget = Some(p),
            Err(_) => {
                d.skip_body();
                let budget = self.svc.limits.frame_budget >> 20;
                self.error(
                    None,
                    ErrorCode::Busy,
                    format!(
                        "a frame of {len} bytes was not read: the unfinished frames of the \
                         service's clients hold its {budget} MiB for them; send it again later"
                    ),
                )
                .await;
            }
        }
    }

    async fn error(&self, id: Option<u64>, code: ErrorCode, message: impl Into<String>) {
        self.outbox
            .send(&ServerFrame::Error {
                id,
                error: ErrorBody::new(code, message),
            })
            .await;
    }

    async fn on_frame(&mut self, f: Result<Map<String, Value>, FrameError>) {
        let map = match f {
            Ok(m) => m,
            Err(e) => return self.error(None, ErrorCode::Invalid, e.to_string()).await,
        };
        match parse(map) {
            Parsed::Cancel(id) => self.cancel(id).await,
            Parsed::Bad(id, msg) => self.error(id, ErrorCode::Invalid, msg).await,
            Parsed::Request { id, method, params } => self.request(id, method, params).await,
        }
    }

    async fn hello(&mut self, id: u64, params: Value) {
        if self.state == HelloState::Open {
            return self
                .error(
                    Some(id),
                    ErrorCode::Conflict,
                    "hello was already done on this connection",
                )
                .await;
        }
        let p: HelloParams = match crate::rpc::handler::params(params) {
            Ok(p) => p,
            Err(error) => {
                self.outbox
                    .send(&ServerFrame::Error {
                        id: Some(id),
                        error,
                    })
                    .await;
                return;
            }
        };
        if p.protocol != PROTOCOL_VERSION {
            self.state = HelloState::Mismatched(p.protocol);
            let mut error = ErrorBody::new(
                ErrorCode::ProtocolMismatch,
                format!(
                    "protocol mismatch: the client speaks {} and the service {PROTOCOL_VERSION}",
                    p.protocol
                ),
            );
            error.data = Some(json!({ "client": p.protocol, "service": PROTOCOL_VERSION }));
            self.outbox
                .send(&ServerFrame::Error {
                    id: Some(id),
                    error,
                })
                .await;
            return;
        }
        self.state = HelloState::Open;
        let result = HelloResult {
            protocol: PROTOCOL_VERSION,
            server: "efr-sandbox".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            methods: dispatch::method_names(self.svc.test_methods),
        };
        let end = match serde_json::to_value(&result) {
            Ok(v) => v,
            Err(e) => {
                return self
                    .error(Some(id), ErrorCode::Internal, format!("hello result: {e}"))
                    .await;
            }
        };
        self.outbox.send(&ServerFrame::End { id, end }).await;
    }

    async fn request(&mut self, id: u64, name: String, params: Value) {
        if name == method::HELLO {
            return self.hello(id, params).await;
        }
        if let Some(why) = &self.contained {
            self.fds.clear();
            let message = format!("{name} was not run: {why}");
            return self.error(Some(id), ErrorCode::Forbidden, message).await;
        }
        match self.state {
            HelloState::Open => {}
            HelloState::Waiting => {
                return self
                    .error(
                        Some(id),
                        ErrorCode::Unauthorized,
                        format!(
                            "send hello with protocol {PROTOCOL_VERSION} first; {name} was not run"
                        ),
                    )
                    .await;
            }
            HelloState::Mismatched(p) => {
                return self
                    .error(
                        Some(id),
                        ErrorCode::Unauthorized,
                        format!(
                            "the last hello asked for protocol {p} and the service speaks \
                             {PROTOCOL_VERSION}; {name} was not run"
                        ),
                    )
                    .await;
            }
        }
        let Some(m) = dispatch::lookup(&name, self.svc.test_methods) else {
            return self
                .error(
                    Some(id),
                    ErrorCode::Invalid,
                    format!("unknown method {name}"),
                )
                .await;
        };
        let refusal = {
            let running = lock(&self.requests);
            if running.contains_key(&id) {
                Some((
                    ErrorCode::Conflict,
                    format!("request {id} is still running"),
                ))
            } else if running.len() >= self.svc.limits.inflight {
                Some((
                    ErrorCode::Busy,
                    format!(
                        "{} requests are running on this connection; try later",
                        running.len()
                    ),
                ))
            } else {
                None
            }
        };
        if let Some((code, message)) = refusal {
            return self.error(Some(id), code, message).await;
        }
        let out = Arc::new(RequestOut {
            id,
            done: tokio::sync::Mutex::new(false),
            outbox: self.outbox.clone(),
        });
        // The fds sent with this request's bytes are its own (and closed with it).
        let fds = std::mem::take(&mut self.fds);
        let call = Call {
            id,
            params,
            items: ItemSink::new(out.clone()),
            fds,
            uid: self.uid,
        };
        let inner = tokio::spawn((m.handler)(self.svc.clone(), call));
        lock(&self.requests).insert(
            id,
            Running {
                out: out.clone(),
                abort: inner.abort_handle(),
            },
        );
        let requests = self.requests.clone();
        let method = m.name;
        self.supervisors.spawn(async move {
            let last = match inner.await {
                Ok(Ok(end)) => Some(ServerFrame::End { id, end }),
                Ok(Err(error)) => Some(ServerFrame::Error {
                    id: Some(id),
                    error,
                }),
                Err(e) if e.is_panic() => {
                    let why = panic_message(e.into_panic());
                    eprintln!("efr-sandbox: {method} (request {id}) panicked: {why}");
                    Some(ServerFrame::Error {
                        id: Some(id),
                        error: ErrorBody::new(
                            ErrorCode::Internal,
                            format!("{method} failed inside the service: {why}"),
                        ),
                    })
                }
                // Cancelled: the cancel has answered.
                Err(_) => None,
            };
            if let Some(last) = last {
                out.finish(last).await;
            }
            let mut running = lock(&requests);
            if running.get(&id).is_some_and(|r| Arc::ptr_eq(&r.out, &out)) {
                running.remove(&id);
            }
        });
    }

    async fn cancel(&mut self, id: u64) {
        let running = lock(&self.requests).remove(&id);
        if let Some(r) = running {
            r.abort.abort();
            r.out
                .finish(ServerFrame::Error {
                    id: Some(id),
                    error: ErrorBody::new(ErrorCode::Cancelled, "cancelled by the client"),
                })
                .await;
        }
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn parses_frames() {
        assert_eq!(parse(obj(json!({"cancel": 3}))), Parsed::Cancel(3));
        assert_eq!(
            parse(obj(
                json!({"id": 1, "method": "hello", "params": {"protocol": 1}})
            )),
            Parsed::Request {
                id: 1,
                method: "hello".into(),
                params: json!({"protocol": 1})
            }
        );
        assert_eq!(
            parse(obj(json!({"id": 1, "method": "x"}))),
            Parsed::Request {
                id: 1,
                method: "x".into(),
                params: Value::Null
            }
        );
        assert!(matches!(
            parse(obj(json!({"method": "x"}))),
            Parsed::Bad(None, _)
        ));
        assert!(matches!(
            parse(obj(json!({"id": "a", "method": "x"}))),
            Parsed::Bad(None, _)
        ));
        assert!(matches!(
            parse(obj(json!({"id": -1, "method": "x"}))),
            Parsed::Bad(None, _)
        ));
        assert!(matches!(
            parse(obj(json!({"id": 4}))),
            Parsed::Bad(Some(4), _)
        ));
        assert!(matches!(
            parse(obj(json!({"id": 4, "method": 5}))),
            Parsed::Bad(Some(4), _)
        ));
        assert!(matches!(
            parse(obj(json!({"cancel": "x"}))),
            Parsed::Bad(None, _)
        ));
        assert!(matches!(
            parse(obj(json!({"id": 2, "cancel": 1, "method": "x"}))),
            Parsed::Bad(Some(2), _)
        ));
    }
}
