//! One terminated `CONNECT` of a broker call: the call's TLS accepted with the host's leaf
//! (the ClientHello already read by the proxy is replayed into the acceptor), the upstream
//! dialled with TLS offering the ALPN the call offered, and every request relayed with
//! hyper: swapped, checked, streamed, its response masked.
//!
//! The call's side speaks the protocol the upstream chose (ALPN: the call offered it), so
//! no request changes version on the way: an upstream that picks `h2` is spoken to in
//! `h2` on both sides, one that picks `http/1.1` (or no ALPN) in HTTP/1.1.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use efr_sandbox_wire::summary::BlockReason;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::LazyConfigAcceptor;

use super::rewrite::{self, Masker, Place, ReqHead, Scanner};
use super::{Broker, upstream};
use crate::splice::Stream;

/// What the relay needs of the proxy that serves the connection (the call's budget, its
/// records and counters), given by the server per connection: the relay does not know the
/// server's types.
pub(crate) trait Link: Clone + Unpin + std::marker::Send + Sync + 'static {
    /// Bytes moved now (the idle timer's activity).
    fn touch(&self);
    /// Count `n` body bytes in the call's byte budget; `false` past it.
    fn count_bytes(&self, n: usize) -> bool;
    /// Record the refusal `credential` of `host:port`.
    fn refuse_credential(&self, host: &str, port: u16, name: &str);
    /// Count a request in which credential `name` was sent.
    fn record_use(&self, name: &str, host: &str, method: &str, path: &str);
    /// The upstream could not be reached.
    fn upstream_error(&self);
    /// The connection reached its upstream.
    fn count_tunnel(&self);
    /// Returns once the connection was idle for the call's idle timeout (counted).
    fn idle(&self) -> Pin<Box<dyn std::future::Future<Output = ()> + std::marker::Send + '_>>;
    /// The connection ended: the byte limit hit is recorded.
    fn done(&self, host: &str, port: u16);
    /// The call's handshake timeout.
    fn handshake_timeout(&self) -> std::time::Duration;
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type OutBody = BoxBody<Bytes, BoxError>;

const H2: &[u8] = b"h2";
const H1: &[u8] = b"http/1.1";

/// The call's connection (its hello bytes first), each byte counted as activity.
struct Replay<S, L> {
    head: Vec<u8>,
    at: usize,
    s: S,
    link: L,
}

impl<S: AsyncRead + Unpin, L: Link> AsyncRead for Replay<S, L> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        if me.at < me.head.len() {
            let n = (me.head.len() - me.at).min(buf.remaining());
            buf.put_slice(&me.head[me.at..me.at + n]);
            me.at += n;
            return Poll::Ready(Ok(()));
        }
        ready!(Pin::new(&mut me.s).poll_read(cx, buf))?;
        me.link.touch();
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin, L: Link> AsyncWrite for Replay<S, L> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = &mut *self;
        let n = ready!(Pin::new(&mut me.s).poll_write(cx, b))?;
        me.link.touch();
        Poll::Ready(Ok(n))
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.s).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.s).poll_shutdown(cx)
    }
}

/// The sender of requests to the upstream.
enum Sender {
    H1(tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<OutBody>>),
    H2(hyper::client::conn::http2::SendRequest<OutBody>),
}

/// What every request of one connection shares.
struct Conn<L> {
    link: L,
    broker: Arc<Broker>,
    host: String,
    port: u16,
    up: Result<Sender, String>,
    h2: bool,
}

/// Serve one terminated connection to its end: `client` (its first bytes, the ClientHello,
/// in `hello`), `tcp` the upstream's connection, `host:port` the allowed `CONNECT`.
pub(crate) async fn serve<S: Stream, L: Link>(
    link: L,
    broker: Arc<Broker>,
    client: S,
    hello: Vec<u8>,
    tcp: TcpStream,
    host: &str,
    port: u16,
) {
    let hs = link.handshake_timeout();
    let io = Replay {
        head: hello,
        at: 0,
        s: client,
        link: link.clone(),
    };
    let acc = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io);
    let Ok(Ok(start)) = timeout(hs, acc).await else {
        return;
    };
    let offered: Vec<Vec<u8>> = start
        .client_hello()
        .alpn()
        .map(|it| {
            it.filter(|p| *p == H2 || *p == H1)
                .map(<[u8]>::to_vec)
                .collect()
        })
        .unwrap_or_default();
    let up = match timeout(
        hs,
        upstream::connect(broker.upstream.clone(), offered.clone(), host, tcp),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err("the TLS handshake timed out".to_string()),
    };
    let chosen: Option<Vec<u8>> = match &up {
        Ok(t) => t.get_ref().1.alpn_protocol().map(<[u8]>::to_vec),
        Err(_) => offered.iter().find(|p| p.as_slice() == H1).cloned(),
    };
    let Ok(leaf) = broker.ca.leaf(host) else {
        return;
    };
    let cfg = server_config(leaf, chosen.clone());
    let Ok(Ok(tls)) = timeout(hs, start.into_stream(Arc::new(cfg))).await else {
        return;
    };
    let h2 = chosen.as_deref() == Some(H2);
    let up = match up {
        Ok(t) => handshake(t, h2).await,
        Err(e) => Err(e),
    };
    if up.is_err() {
        link.upstream_error();
    }
    let conn = Arc::new(Conn {
        link: link.clone(),
        broker,
        host: host.to_string(),
        port,
        up,
        h2,
    });
    let svc = service_fn(move |req| {
        let c = conn.clone();
        async move { Ok::<_, Infallible>(c.request(req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let served = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
    link.count_tunnel();
    tokio::select! {
        _ = served => {}
        _ = link.idle() => {}
    }
    link.done(host, port);
}

fn server_config(
    leaf: Arc<rustls::sign::CertifiedKey>,
    alpn: Option<Vec<u8>>,
) -> rustls::ServerConfig {
    let provider = super::provider();
    let b = match rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
    {
        Ok(b) => b,
        Err(_) => rustls::ServerConfig::builder(),
    };
    let mut c = b
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Fixed(leaf)));
    c.alpn_protocols = alpn.into_iter().collect();
    c
}

#[derive(Debug)]
struct Fixed(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for Fixed {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

async fn handshake(
    t: tokio_rustls::client::TlsStream<TcpStream>,
    h2: bool,
) -> Result<Sender, String> {
    let io = TokioIo::new(t);
    if h2 {
        let (s, c) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(c);
        Ok(Sender::H2(s))
    } else {
        let (s, c) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(c.with_upgrades());
        Ok(Sender::H1(tokio::sync::Mutex::new(s)))
    }
}

fn text(code: StatusCode, reason: Option<BlockReason>, body: String) -> Response<OutBody> {
    let mut r = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|n: Infallible| match n {})
            .boxed(),
    );
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Some(reason) = reason
        && let Ok(v) = HeaderValue::from_str(reason.as_str())
    {
        h.insert(HeaderName::from_static("x-efr-block-reason"), v);
    }
    r
}

/// A credential misuse seen in a streamed body, shared between the body and its request.
#[derive(Default)]
struct Seen {
    hit: AtomicBool,
    cred: Mutex<Option<usize>>,
}

impl<L: Link> Conn<L> {
    async fn request(&self, mut req: Request<Incoming>) -> Response<OutBody> {
        let sender = match &self.up {
            Ok(s) => s,
            Err(e) => {
                let body = format!(
                    "efr sandbox proxy: cannot reach {}:{} over TLS: {e}\n",
                    self.host, self.port
                );
                return text(StatusCode::BAD_GATEWAY, None, body);
            }
        };
        let creds = self.broker.credentials();
        let mut head = ReqHead {
            target: req
                .uri()
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "/".into()),
            headers: req
                .headers()
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
                .collect(),
        };
        let used = match rewrite::rewrite_head(creds, &self.host, self.port, &mut head) {
            Ok(u) => u,
            Err(m) => return self.misuse(m.cred, &m.place),
        };
        let method = req.method().as_str().to_string();
        let path = head.target.split('?').next().unwrap_or("/").to_string();
        for i in used {
            if let Some(c) = creds.get(i) {
                self.link.record_use(&c.name, &self.host, &method, &path);
            }
        }
        let client_upgrade = (!self.h2 && req.headers().contains_key(http::header::UPGRADE))
            .then(|| hyper::upgrade::on(&mut req));
        let (mut parts, body) = req.into_parts();
        if let Err(r) = self.set_head(&mut parts, &head) {
            return r;
        }
        let seen = Arc::new(Seen::default());
        let scanner = Scanner::new(creds, &self.host, self.port);
        let up_body = Filter {
            inner: body,
            scan: (!scanner.is_empty()).then_some(scanner),
            mask: None,
            seen: Some(seen.clone()),
            conn: self.acct(),
            drained: 0,
        }
        .boxed();
        let out = Request::from_parts(parts, up_body);
        let resp = match sender {
            Sender::H2(s) => s.clone().send_request(out).await,
            Sender::H1(m) => {
                let mut s = m.lock().await;
                match s.ready().await {
                    Ok(()) => s.send_request(out).await,
                    Err(e) => Err(e),
                }
            }
        };
        if seen.hit.load(Ordering::Relaxed) {
            let cred = seen.cred.lock().map(|c| *c).unwrap_or(None).unwrap_or(0);
            return self.misuse(cred, &Place::Body);
        }
        let mut resp = match resp {
            Ok(r) => r,
            Err(e) => {
                let body = format!(
                    "efr sandbox proxy: the request to {}:{} failed: {e}\n",
                    self.host, self.port
                );
                return text(StatusCode::BAD_GATEWAY, None, body);
            }
        };
        if resp.status() == StatusCode::SWITCHING_PROTOCOLS
            && let Some(cu) = client_upgrade
        {
            let uu = hyper::upgrade::on(&mut resp);
            // After the switch the bytes are no longer HTTP: what the call sends is scanned
            // as a `tcp` relay's is, every byte counted in the call's budget.
            let scan = Scanner::new(self.broker.credentials(), &self.host, self.port);
            let (link, broker) = (self.link.clone(), self.broker.clone());
            let (host, port) = (self.host.clone(), self.port);
            tokio::spawn(async move {
                if let (Ok(a), Ok(b)) = (cu.await, uu.await) {
                    let count = |n: usize| {
                        link.touch();
                        link.count_bytes(n)
                    };
                    let seen =
                        super::scanned::relay(TokioIo::new(a), TokioIo::new(b), scan, &count);
                    if let Some(i) = seen.await {
                        let name = broker.credentials().get(i).map_or("?", |c| c.name.as_str());
                        link.refuse_credential(&host, port, name);
                    }
                }
            });
        }
        self.response(resp)
    }

    /// Put the checked head on the request going upstream.
    fn set_head(
        &self,
        parts: &mut http::request::Parts,
        head: &ReqHead,
    ) -> Result<(), Response<OutBody>> {
        let bad = |what: &str| {
            text(
                StatusCode::BAD_REQUEST,
                Some(BlockReason::BadRequest),
                format!("efr sandbox proxy: {what}\n"),
            )
        };
        let uri: Uri = if self.h2 {
            let auth = if self.port == 443 {
                self.host.clone()
            } else {
                format!("{}:{}", self.host, self.port)
            };
            format!("https://{auth}{}", head.target).parse()
        } else {
            head.target.parse()
        }
        .map_err(|_| bad("bad request target"))?;
        parts.uri = uri;
        parts.headers.clear();
        for (n, v) in &head.headers {
            let n = HeaderName::from_bytes(n.as_bytes()).map_err(|_| bad("bad header name"))?;
            let v = HeaderValue::from_bytes(v).map_err(|_| bad("bad header value"))?;
            parts.headers.append(n, v);
        }
        Ok(())
    }

    fn response(&self, resp: Response<Incoming>) -> Response<OutBody> {
        let pairs = rewrite::mask_pairs(self.broker.credentials(), &self.host, self.port);
        let (mut parts, body) = resp.into_parts();
        if !pairs.is_empty() {
            for v in parts.headers.values_mut() {
                if let Some(m) = rewrite::mask_value(&pairs, v.as_bytes())
                    && let Ok(nv) = HeaderValue::from_bytes(&m)
                {
                    *v = nv;
                }
            }
        }
        let body = Filter {
            inner: body,
            scan: None,
            mask: (!pairs.is_empty()).then(|| Masker::new(pairs)),
            seen: None,
            conn: self.acct(),
            drained: 0,
        };
        Response::from_parts(parts, body.boxed())
    }

    fn acct(&self) -> Box<dyn Fn(usize) -> bool + std::marker::Send + Sync> {
        let l = self.link.clone();
        Box::new(move |n| l.count_bytes(n))
    }

    fn misuse(&self, cred: usize, place: &Place) -> Response<OutBody> {
        let c = self.broker.credentials().get(cred);
        let name = c.map_or("?", |c| c.name.as_str());
        self.link.refuse_credential(&self.host, self.port, name);
        let body = match c {
            Some(c) => Broker::refusal_text(c, &self.host, &place.to_string()),
            None => {
                "efr sandbox proxy: a credential placeholder was sent to the wrong host\n".into()
            }
        };
        text(StatusCode::FORBIDDEN, Some(BlockReason::Credential), body)
    }
}

const MISUSE: &str = "efr sandbox proxy: a credential placeholder in the body";

/// After a placeholder in a request body, the rest of the body is read (not sent) up to
/// this much before the upstream request is aborted, so that an HTTP/1.1 client still
/// sending reads the refusal rather than a reset.
const DRAIN_MAX: usize = 2 << 20;

/// A body on its way: counted, scanned for placeholders (request) or masked (response).
struct Filter {
    drained: usize,
    inner: Incoming,
    scan: Option<Scanner>,
    mask: Option<Masker>,
    seen: Option<Arc<Seen>>,
    /// Counts bytes in the call's budget; `false` past it.
    conn: Box<dyn Fn(usize) -> bool + std::marker::Send + Sync>,
}

impl Body for Filter {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let me = &mut *self;
        loop {
            let frame = match ready!(Pin::new(&mut me.inner).poll_frame(cx)) {
                None if me
                    .seen
                    .as_ref()
                    .is_some_and(|s| s.hit.load(Ordering::Relaxed)) =>
                {
                    return Poll::Ready(Some(Err(MISUSE.into())));
                }
                None => {
                    let rest = me.mask.as_mut().map(Masker::finish).unwrap_or_default();
                    return Poll::Ready((!rest.is_empty()).then(|| Ok(Frame::data(rest.into()))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e.into()))),
                Some(Ok(f)) => f,
            };
            let data = match frame.into_data() {
                Ok(d) => d,
                Err(other) => return Poll::Ready(Some(Ok(other))),
            };
            if !(me.conn)(data.len()) {
                return Poll::Ready(Some(Err("efr sandbox proxy: byte limit".into())));
            }
            if let Some(seen) = me.seen.as_ref()
                && seen.hit.load(Ordering::Relaxed)
            {
                // Drained, not sent: the call reads the refusal instead of a reset.
                me.drained += data.len();
                if me.drained >= DRAIN_MAX {
                    return Poll::Ready(Some(Err(MISUSE.into())));
                }
                continue;
            }
            if let (Some(s), Some(seen)) = (me.scan.as_mut(), me.seen.as_ref())
                && let Some(i) = s.feed(&data)
            {
                if let Ok(mut c) = seen.cred.lock() {
                    *c = Some(i);
                }
                seen.hit.store(true, Ordering::Relaxed);
                continue;
            }
            let out = match me.mask.as_mut() {
                Some(m) => Bytes::from(m.feed(&data)),
                None => data,
            };
            if out.is_empty() {
                continue;
            }
            return Poll::Ready(Some(Ok(Frame::data(out))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream() && self.mask.as_ref().is_none_or(Masker::is_drained)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        // Same-length masking: the size is the upstream's.
        self.inner.size_hint()
    }
}
