//! The proxy server (tokio): one [`Proxy`] per contained call, serving a Unix listener (and a
//! TCP loopback listener for tests and benchmarks).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use efr_sandbox_wire::summary::{BlockReason, Blocked, SandboxSummary};
use tokio::io::Interest;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::timeout;

use crate::addr::special_range;
use crate::fdpass;
use crate::head::{Head, HeadError, HeadLimits, parse_head};
use crate::policy::{Decision, Kind, ProxyPolicy};
use crate::report::{Refusal, Report};
use crate::splice::Stream;
use crate::tls::{HelloError, MAX_HELLO, parse_client_hello, sni_matches};

/// Name of the response header that carries the `block_reason` of a refusal.
pub const REASON_HEADER: &str = "X-Efr-Block-Reason";

/// Counters of one proxy (beyond the refusals of [`Proxy::summary`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted and read.
    pub accepted: u64,
    /// Tunnels (and plain HTTP requests) that reached their upstream.
    pub tunnels: u64,
    /// Refusals counted in the report.
    pub refused: u64,
    /// Heads that did not parse far enough to name a host (answered 400/431, not in
    /// `blocked`).
    pub malformed: u64,
    /// Clients too slow for the handshake timeout, and tunnels ended by the idle timeout.
    pub timeouts: u64,
    /// Connections closed unread because `max_pending` heads were being read.
    pub dropped: u64,
    /// Resolution or dial failures (answered 502/504, not refusals).
    pub upstream_errors: u64,
    /// Bytes through tunnels, both ways.
    pub bytes: u64,
    /// Refusal events lost because the receiver lagged.
    pub events_dropped: u64,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    tunnels: AtomicU64,
    refused: AtomicU64,
    malformed: AtomicU64,
    timeouts: AtomicU64,
    dropped: AtomicU64,
    upstream_errors: AtomicU64,
    events_dropped: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug)]
struct Inner {
    policy: ProxyPolicy,
    report: Mutex<Report>,
    events: Mutex<Option<mpsc::Sender<Refusal>>>,
    conns: Arc<Semaphore>,
    pending: Arc<Semaphore>,
    bytes: AtomicU64,
    counters: Counters,
    epoch: Instant,
    closed: watch::Sender<bool>,
}

/// The proxy of one contained call. Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

enum ReadHead {
    Head(Head, Vec<u8>),
    Bad(HeadError),
    Closed,
}

impl Proxy {
    /// A proxy for `policy`.
    pub fn new(policy: ProxyPolicy) -> Proxy {
        let l = &policy.limits;
        let conns = Arc::new(Semaphore::new(l.max_conns.max(1)));
        let pending = Arc::new(Semaphore::new(l.max_pending.max(1)));
        Proxy {
            inner: Arc::new(Inner {
                report: Mutex::new(Report::default()),
                events: Mutex::new(None),
                conns,
                pending,
                bytes: AtomicU64::new(0),
                counters: Counters::default(),
                epoch: Instant::now(),
                closed: watch::channel(false).0,
                policy,
            }),
        }
    }

    /// The policy it enforces.
    pub fn policy(&self) -> &ProxyPolicy {
        &self.inner.policy
    }

    /// Receive every refusal from now on (a later call replaces the earlier receiver). Events
    /// the receiver does not take in time (more than `capacity` waiting) are counted in
    /// [`Stats::events_dropped`] and still counted in the summary.
    pub fn subscribe(&self, capacity: usize) -> mpsc::Receiver<Refusal> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        *lock(&self.inner.events) = Some(tx);
        rx
    }

    /// The call's summary part: `proxied`, at most 32 `blocked`, `blocked_more`.
    pub fn summary(&self) -> SandboxSummary {
        lock(&self.inner.report).summary()
    }

    /// Every refusal entry, first-seen order (no cap).
    pub fn blocked_all(&self) -> Vec<Blocked> {
        lock(&self.inner.report).all().to_vec()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            accepted: g(&c.accepted),
            tunnels: g(&c.tunnels),
            refused: g(&c.refused),
            malformed: g(&c.malformed),
            timeouts: g(&c.timeouts),
            dropped: g(&c.dropped),
            upstream_errors: g(&c.upstream_errors),
            bytes: g(&self.inner.bytes),
            events_dropped: g(&c.events_dropped),
        }
    }

    /// End the listeners and every connection (tunnels included) of this proxy.
    pub fn shutdown(&self) {
        self.inner.closed.send_replace(true);
    }

    /// Bind a Unix listener at `path` (the path must not exist).
    pub fn bind_unix(path: &Path) -> io::Result<UnixListener> {
        UnixListener::bind(path)
    }

    /// Serve a Unix listener until [`Proxy::shutdown`].
    pub async fn serve_unix(&self, listener: UnixListener) {
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => {
                        let p = self.clone();
                        tokio::spawn(async move {
                            tokio::select! {
                                _ = p.handle_unix(s) => {}
                                _ = p.closed() => {}
                            }
                        });
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                },
                _ = self.closed() => return,
            }
        }
    }

    /// Serve a TCP listener (tests, benchmarks, the standalone runner) until shutdown.
    pub async fn serve_tcp(&self, listener: TcpListener) {
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => {
                        let _ = s.set_nodelay(true);
                        self.spawn(s)
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                },
                _ = self.closed() => return,
            }
        }
    }

    fn spawn<S>(&self, s: S)
    where
        S: Stream,
    {
        let p = self.clone();
        tokio::spawn(async move { p.handle(s).await });
    }

    /// Serve one client connection to its end (or until shutdown).
    pub async fn handle<S>(&self, s: S)
    where
        S: Stream,
    {
        tokio::select! {
            _ = self.handle_inner(s, Vec::new()) => {}
            _ = self.closed() => {}
        }
    }

    /// A connection on the Unix socket: either an HTTP proxy request on the connection
    /// itself, or (first byte [`fdpass::PASS_FD`]) client TCP sockets passed by the relay,
    /// each then served like a client of [`Proxy::serve_tcp`] (see [`crate::fdpass`]).
    async fn handle_unix(&self, mut s: UnixStream) {
        let inner = &self.inner;
        let first = {
            // The wait for the first byte holds a head slot, as reading a head does.
            let Ok(_pending) = inner.pending.clone().try_acquire_owned() else {
                bump(&inner.counters.dropped);
                return;
            };
            match timeout(inner.policy.limits.handshake_timeout, recv_byte(&s)).await {
                Err(_) => {
                    bump(&inner.counters.timeouts);
                    let body = "efr sandbox proxy: request head timeout\n";
                    return answer(&mut s, 408, None, body).await;
                }
                Ok(Err(_) | Ok(None)) => return,
                Ok(Ok(Some(x))) => x,
            }
        };
        let mut fds = match first {
            (fdpass::PASS_FD, fds) => fds,
            (b, fds) => {
                drop(fds); // an fd sent with an HTTP request: closed unread
                return self.handle_inner(s, vec![b]).await;
            }
        };
        loop {
            let fd = match fds.pop() {
                Some(fd) if fds.is_empty() && fdpass::is_client_socket(&fd) => fd,
                _ => {
                    bump(&inner.counters.malformed);
                    return;
                }
            };
            let std = std::net::TcpStream::from(fd);
            let Ok(t) = std
                .set_nonblocking(true)
                .and_then(|()| TcpStream::from_std(std))
            else {
                return;
            };
            let _ = t.set_nodelay(true);
            self.spawn(t);
            fds = match recv_byte(&s).await {
                Ok(Some((fdpass::PASS_FD, fds))) => fds,
                Ok(Some(_)) => {
                    bump(&inner.counters.malformed);
                    return;
                }
                Ok(None) | Err(_) => return,
            };
        }
    }

    fn refuse_record(&self, host: &str, port: u16, reason: BlockReason) {
        let r = Refusal {
            host: host.to_string(),
            port,
            reason,
        };
        let listed = lock(&self.inner.report).add(&r);
        bump(&self.inner.counters.refused);
        if !listed {
            return; // past the report's bound: counted, no event (no exit record)
        }
        if let Some(tx) = lock(&self.inner.events).as_ref()
            && tx.try_send(r).is_err()
        {
            bump(&self.inner.counters.events_dropped);
        }
    }

    async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        s: &mut S,
        host: &str,
        port: u16,
        reason: BlockReason,
    ) {
        self.refuse_record(host, port, reason);
        let code = match reason {
            BlockReason::BadRequest => 400,
            BlockReason::Limit => 429,
            _ => 403,
        };
        let body = format!(
            "efr sandbox proxy refused {host}:{port}: {}\n",
            reason.as_str()
        );
        answer(s, code, Some(reason), &body).await;
        linger(s).await;
    }

    async fn handle_inner<S>(&self, mut s: S, prefix: Vec<u8>)
    where
        S: Stream,
    {
        let inner = &self.inner;
        let Ok(pending) = inner.pending.clone().try_acquire_owned() else {
            bump(&inner.counters.dropped);
            return;
        };
        bump(&inner.counters.accepted);
        let lim = &inner.policy.limits;
        let hl = HeadLimits {
            max_line: lim.max_line,
            max_headers: lim.max_headers,
            max_head: lim.max_head,
        };
        let (head, rest) = match timeout(lim.handshake_timeout, read_head(&mut s, hl, prefix)).await
        {
            Err(_) => {
                bump(&inner.counters.timeouts);
                answer(
                    &mut s,
                    408,
                    None,
                    "efr sandbox proxy: request head timeout\n",
                )
                .await;
                return;
            }
            Ok(ReadHead::Closed) => return,
            Ok(ReadHead::Bad(HeadError::BadTarget { host, port, .. })) => {
                return self
                    .refuse(&mut s, &host, port, BlockReason::BadRequest)
                    .await;
            }
            Ok(ReadHead::Bad(e)) => {
                bump(&inner.counters.malformed);
                let code = match e {
                    HeadError::LineTooLong
                    | HeadError::TooManyHeaders
                    | HeadError::HeadTooLarge => 431,
                    _ => 400,
                };
                answer(
                    &mut s,
                    code,
                    Some(BlockReason::BadRequest),
                    &format!("efr sandbox proxy: {e}\n"),
                )
                .await;
                linger(&mut s).await;
                return;
            }
            Ok(ReadHead::Head(h, rest)) => (h, rest),
        };
        let (host, port, mapped) = match inner.policy.decide(head.kind, &head.host, head.port) {
            Decision::Refuse { host, port, reason } => {
                return self.refuse(&mut s, &host, port, reason).await;
            }
            Decision::Allow { host, port, addrs } => (host, port, addrs),
        };
        if inner.bytes.load(Ordering::Relaxed) >= lim.max_bytes {
            return self.refuse(&mut s, &host, port, BlockReason::Limit).await;
        }
        let Ok(_slot) = inner.conns.clone().try_acquire_owned() else {
            return self.refuse(&mut s, &host, port, BlockReason::Limit).await;
        };
        drop(pending);

        // Resolve (or take the mapping), check every answer, dial exactly those addresses.
        let addrs: Vec<IpAddr> = match mapped {
            Some(a) => a,
            None => match timeout(
                lim.handshake_timeout,
                tokio::net::lookup_host((host.as_str(), port)),
            )
            .await
            {
                Ok(Ok(it)) => it.map(|sa| sa.ip()).collect(),
                _ => Vec::new(),
            },
        };
        if addrs.is_empty() {
            bump(&inner.counters.upstream_errors);
            answer(
                &mut s,
                502,
                None,
                &format!("efr sandbox proxy: cannot resolve {host}\n"),
            )
            .await;
            return;
        }
        if !inner.policy.resolve.contains_key(&host)
            && addrs.iter().any(|a| special_range(*a).is_some())
        {
            return self.refuse(&mut s, &host, port, BlockReason::Denied).await;
        }
        let Some(mut up) = dial(&addrs, port, lim.handshake_timeout).await else {
            bump(&inner.counters.upstream_errors);
            answer(
                &mut s,
                502,
                None,
                &format!("efr sandbox proxy: cannot connect to {host}:{port}\n"),
            )
            .await;
            return;
        };
        let _ = up.set_nodelay(true);

        match head.kind {
            Kind::Connect => {
                if s.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                let mut buf = rest;
                let r = timeout(lim.handshake_timeout, read_hello(&mut s, &mut buf)).await;
                let reason = match r {
                    Err(_) => {
                        bump(&inner.counters.timeouts);
                        return;
                    }
                    Ok(Err(_)) => return,
                    Ok(Ok(Err(HelloError::NotTls))) => Some(BlockReason::NotTls),
                    Ok(Ok(Err(_))) => Some(BlockReason::BadRequest),
                    Ok(Ok(Ok(sni))) => match sni {
                        Some(n) if sni_matches(&n, &host) => None,
                        _ => Some(BlockReason::BadRequest),
                    },
                };
                if let Some(reason) = reason {
                    // The tunnel is open: no HTTP answer is possible, the connection ends.
                    self.refuse_record(&host, port, reason);
                    return;
                }
                if up.write_all(&buf).await.is_err() {
                    return;
                }
            }
            Kind::PlainHttp => {
                let mut req = head.origin_request(&host);
                req.extend_from_slice(&rest);
                if up.write_all(&req).await.is_err() {
                    return;
                }
            }
        }
        bump(&inner.counters.tunnels);
        let state = Arc::new(TunnelState {
            last: AtomicU64::new(self.now_ms()),
            hit: AtomicBool::new(false),
        });
        let idle = lim.idle_timeout;
        let account = |n: usize| -> bool {
            state.last.store(self.now_ms(), Ordering::Relaxed);
            let total = inner.bytes.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            let ok = total <= lim.max_bytes;
            if !ok {
                state.hit.store(true, Ordering::Relaxed);
            }
            ok
        };
        tokio::select! {
            _ = crate::splice::both_ways(&s, &up, &account) => {}
            _ = self.watch_idle(&state, idle) => bump(&inner.counters.timeouts),
        }
        if state.hit.load(Ordering::Relaxed) {
            self.refuse_record(&host, port, BlockReason::Limit);
        }
    }

    async fn closed(&self) {
        let mut rx = self.inner.closed.subscribe();
        let _ = rx.wait_for(|&c| c).await;
    }

    fn now_ms(&self) -> u64 {
        self.inner.epoch.elapsed().as_millis() as u64
    }

    /// Returns once no byte went either way for `idle`. One timer per tunnel, set for when
    /// the tunnel would be idle (not a periodic tick): no wakeup while bytes flow.
    async fn watch_idle(&self, st: &TunnelState, idle: Duration) {
        let idle_ms = idle.as_millis() as u64;
        loop {
            let quiet = self
                .now_ms()
                .saturating_sub(st.last.load(Ordering::Relaxed));
            if quiet >= idle_ms {
                return;
            }
            tokio::time::sleep(Duration::from_millis(idle_ms - quiet)).await;
        }
    }
}

/// One byte and its fds from a Unix connection (see [`crate::fdpass`]); `None` at EOF.
async fn recv_byte(s: &UnixStream) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    loop {
        s.ready(Interest::READABLE).await?;
        match s.try_io(Interest::READABLE, || fdpass::recv_byte(s.as_raw_fd())) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn read_head<S: AsyncRead + Unpin>(s: &mut S, hl: HeadLimits, prefix: Vec<u8>) -> ReadHead {
    let mut buf = prefix;
    buf.reserve(2048);
    let mut chunk = [0u8; 4096];
    loop {
        match parse_head(&buf, hl) {
            Ok(Some(h)) => {
                let rest = buf[h.len..].to_vec();
                return ReadHead::Head(h, rest);
            }
            Ok(None) => {}
            Err(e) => return ReadHead::Bad(e),
        }
        // Never read far past the bound: at most one chunk beyond it.
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => {
                return if buf.is_empty() {
                    ReadHead::Closed
                } else {
                    ReadHead::Bad(HeadError::Malformed("truncated"))
                };
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Read until `buf` holds a whole ClientHello; its SNI, or why not.
async fn read_hello<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut Vec<u8>,
) -> io::Result<Result<Option<String>, HelloError>> {
    let mut chunk = [0u8; 4096];
    loop {
        match parse_client_hello(buf) {
            Ok(h) => return Ok(Ok(h.sni)),
            Err(HelloError::Incomplete) if buf.len() <= MAX_HELLO + 4096 => {}
            Err(HelloError::Incomplete) => return Ok(Err(HelloError::Malformed("too large"))),
            Err(e) => return Ok(Err(e)),
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn dial(addrs: &[IpAddr], port: u16, t: Duration) -> Option<TcpStream> {
    for a in addrs {
        if let Ok(Ok(s)) = timeout(t, TcpStream::connect(SocketAddr::new(*a, port))).await {
            return Some(s);
        }
    }
    None
}

async fn answer<S: AsyncWrite + Unpin>(
    s: &mut S,
    code: u16,
    reason: Option<BlockReason>,
    body: &str,
) {
    let text = match code {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let mut out = format!("HTTP/1.1 {code} {text}\r\n");
    if let Some(r) = reason {
        out.push_str(&format!("{REASON_HEADER}: {}\r\n", r.as_str()));
    }
    out.push_str(&format!(
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let _ = timeout(Duration::from_secs(2), async {
        let _ = s.write_all(out.as_bytes()).await;
        let _ = s.flush().await;
    })
    .await;
}

/// After an answer: close our side and drain what the client still sends for a moment, so
/// its kernel does not reset the connection before the client read the answer.
async fn linger<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) {
    let _ = s.shutdown().await;
    let mut sink = [0u8; 8192];
    let mut left: usize = 2 << 20;
    let _ = timeout(Duration::from_secs(1), async {
        while left > 0 {
            match s.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

#[derive(Debug)]
struct TunnelState {
    last: AtomicU64,
    hit: AtomicBool,
}
