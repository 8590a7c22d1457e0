//! The proxy server (tokio): one [`Proxy`] per contained call, serving a Unix listener (and a
//! TCP loopback listener for tests and benchmarks).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use efr_sandbox_wire::summary::{BlockReason, Blocked, SandboxSummary};
use tokio::io::Interest;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::timeout;

use crate::addr::special_range;
use crate::broker::rewrite::Scanner;
use crate::dns::{self, DnsOutcome, NameTable, SYNTHETIC_BASE};
use crate::fdpass::{self, Role};
use crate::head::{Head, HeadError, HeadLimits, parse_head};
use crate::pace::Pacer;
use crate::policy::{Decision, Kind, ProxyPolicy};
use crate::report::{Refusal, Report, Special};
use crate::splice::Stream;
use crate::tls::{HelloError, MAX_HELLO, parse_client_hello, sni_matches};

/// Name of the response header that carries the `block_reason` of a refusal.
pub const REASON_HEADER: &str = "X-Efr-Block-Reason";

/// The port a refused DNS lookup is reported on (a lookup has none): 443, the port a tool
/// that ignores the proxy variables dials next, and the port a host grant without one opens
/// (so the refusal and a CONNECT refused for the same name are one entry).
pub const LOOKUP_PORT: u16 = 443;

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
    /// DNS queries answered for an allowed name (on the handed DNS socket).
    pub lookups: u64,
    /// Connections a `tcp` host grant relayed to the host's loopback port (also counted in
    /// `tunnels`).
    pub tcp_relayed: u64,
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
    lookups: AtomicU64,
    tcp_relayed: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

struct Inner {
    policy: ProxyPolicy,
    report: Mutex<Report>,
    events: Mutex<Option<mpsc::Sender<Refusal>>>,
    conns: Arc<Semaphore>,
    pending: Arc<Semaphore>,
    /// Connections open at once (`max_open`).
    open: Arc<Semaphore>,
    bytes: AtomicU64,
    counters: Counters,
    epoch: Instant,
    closed: watch::Sender<bool>,
    /// A hand-over came (only the first is ever taken).
    handed: AtomicBool,
    /// Resolves a name the policy does not map (`None`: the system's resolver).
    resolver: Option<Resolver>,
}

/// A resolver of names to addresses, in place of the system's (tests: a name that resolves
/// into a private range without touching the machine's DNS).
pub type Resolver = Arc<dyn Fn(&str, u16) -> Vec<IpAddr> + Send + Sync>;

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("policy", &self.policy)
            .field("counters", &self.counters)
            .field("resolver", &self.resolver.is_some())
            .finish_non_exhaustive()
    }
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
        Proxy::build(policy, None)
    }

    /// A proxy for `policy` that resolves names with `resolver` instead of the system's
    /// resolver (tests; `[network.resolve]` mappings still come first).
    pub fn with_resolver(policy: ProxyPolicy, resolver: Resolver) -> Proxy {
        Proxy::build(policy, Some(resolver))
    }

    fn build(policy: ProxyPolicy, resolver: Option<Resolver>) -> Proxy {
        let l = &policy.limits;
        let conns = Arc::new(Semaphore::new(l.max_conns.max(1)));
        let pending = Arc::new(Semaphore::new(l.max_pending.max(1)));
        let open = Arc::new(Semaphore::new(l.max_open.max(1)));
        Proxy {
            inner: Arc::new(Inner {
                report: Mutex::new(Report::default()),
                events: Mutex::new(None),
                conns,
                pending,
                open,
                bytes: AtomicU64::new(0),
                counters: Counters::default(),
                epoch: Instant::now(),
                closed: watch::channel(false).0,
                handed: AtomicBool::new(false),
                resolver,
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

    /// The call's summary part: `proxied`, at most 32 `blocked`, `blocked_more`,
    /// `tcp_relayed`.
    pub fn summary(&self) -> SandboxSummary {
        let mut s = lock(&self.inner.report).summary();
        let n = self.inner.counters.tcp_relayed.load(Ordering::Relaxed);
        s.tcp_relayed = u32::try_from(n).unwrap_or(u32::MAX);
        s
    }

    /// Every refusal entry, first-seen order (no cap).
    pub fn blocked_all(&self) -> Vec<Blocked> {
        lock(&self.inner.report).all().to_vec()
    }

    /// Every refusal entry with its special address, first-seen order (no cap).
    pub fn refusals_all(&self) -> Vec<Refusal> {
        lock(&self.inner.report).refusals()
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
            lookups: g(&c.lookups),
            tcp_relayed: g(&c.tcp_relayed),
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

    /// Serve a Unix listener until [`Proxy::shutdown`]. Only the first connection it
    /// accepts may be a hand-over: a call's init connects and sends before the call's line
    /// exists, so its connection is first in the listener's queue whether or not the init
    /// waits for the answer (it does not), and a connection the line makes later is not.
    pub async fn serve_unix(&self, listener: UnixListener) {
        let mut first = true;
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => {
                        let Some(slot) = self.admit(&s) else {
                            drop(s);
                            tokio::time::sleep(OVER_BUDGET_PAUSE).await;
                            continue;
                        };
                        let p = self.clone();
                        let may_hand_over = std::mem::replace(&mut first, false);
                        tokio::spawn(async move {
                            let _slot = slot;
                            tokio::select! {
                                _ = p.handle_unix(s, may_hand_over) => {}
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
                        let Some(slot) = self.admit(&s) else {
                            drop(s);
                            tokio::time::sleep(OVER_BUDGET_PAUSE).await;
                            continue;
                        };
                        let _ = s.set_nodelay(true);
                        self.spawn(s, slot)
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                },
                _ = self.closed() => return,
            }
        }
    }

    fn spawn<S>(&self, s: S, slot: OpenSlot)
    where
        S: Stream,
    {
        let p = self.clone();
        tokio::spawn(async move {
            let _slot = slot;
            p.handle(s).await
        });
    }

    /// A slot of the call's connection budget (`max_open`) and of the process's
    /// ([`set_process_budget`]) for a connection just accepted; `None` when either is spent:
    /// the connection is then answered `limit` without waiting (a write that would block is
    /// not made) and closed, so a refused connection holds no fd past its accept, and the
    /// refusal is recorded (host `*`: its head was never read).
    fn admit<S: TryWriteNow>(&self, s: &S) -> Option<OpenSlot> {
        let slot = self
            .inner
            .open
            .clone()
            .try_acquire_owned()
            .ok()
            .and_then(OpenSlot::new);
        if slot.is_none() {
            bump(&self.inner.counters.dropped);
            self.refuse_record(ANY_HOST, 0, BlockReason::Limit, None);
            let _ = s.try_write_now(limit_answer().as_bytes());
        }
        slot
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

    /// A connection on the Unix socket: an HTTP proxy request on the connection itself, or
    /// the hand-over of a call's sockets (first byte [`fdpass::HAND_OVER`], see
    /// [`crate::fdpass`]).
    async fn handle_unix(&self, mut s: UnixStream, may_hand_over: bool) {
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
        match first {
            (fdpass::HAND_OVER, fds) => self.take_hand_over(s, fds, may_hand_over).await,
            (b, fds) => {
                drop(fds); // an fd sent with an HTTP request: closed unread
                self.handle_inner(s, vec![b]).await
            }
        }
    }

    /// The hand-over (see [`crate::fdpass`]): only on the first connection this proxy
    /// accepted ([`Proxy::serve_unix`]) and only once, every socket
    /// checked against its role; then each is served here (the relay like
    /// [`Proxy::serve_tcp`], the synthetic listeners by [`Proxy::serve_synthetic`], DNS by
    /// [`Proxy::serve_dns`], all with one [`NameTable`] of this proxy's policy, the `tcp`
    /// grants' listeners by [`Proxy::serve_loopback`], each on an address and port a `tcp`
    /// grant of the policy opens) and the sender gets the byte [`fdpass::HAND_OVER`].
    /// Anything else: no answer, fds closed.
    async fn take_hand_over(&self, mut s: UnixStream, fds: Vec<OwnedFd>, may_hand_over: bool) {
        let inner = &self.inner;
        let first = may_hand_over && !inner.handed.swap(true, Ordering::SeqCst);
        // The roles are read even when refusing, so the sender sees a close, not a reset.
        let roles = timeout(inner.policy.limits.handshake_timeout, async {
            let n = s.read_u8().await? as usize;
            let mut roles = vec![0u8; n];
            s.read_exact(&mut roles).await?;
            io::Result::Ok(roles)
        })
        .await;
        let (true, Ok(Ok(roles))) = (first, roles) else {
            bump(&inner.counters.malformed);
            return;
        };
        let Some(socks) = fdpass::sort_hand_over(&roles, fds) else {
            bump(&inner.counters.malformed);
            return;
        };
        let table = Arc::new(NameTable::new(inner.policy.clone(), SYNTHETIC_BASE));
        let mut serve = Vec::new();
        for (role, fd) in socks {
            let r = match role {
                Role::Relay | Role::Synthetic | Role::Tcp => {
                    let l = std::net::TcpListener::from(fd);
                    // A `tcp` listener only where a grant of this policy opens the host's
                    // same address and port.
                    let granted = role != Role::Tcp
                        || l.local_addr().is_ok_and(|a| inner.policy.tcp_allows(a));
                    if !granted {
                        bump(&inner.counters.malformed);
                        return;
                    }
                    l.set_nonblocking(true)
                        .and_then(|()| TcpListener::from_std(l))
                        .map(|l| Handed::Tcp(role, l))
                }
                Role::Dns => {
                    let u = std::net::UdpSocket::from(fd);
                    u.set_nonblocking(true)
                        .and_then(|()| tokio::net::UdpSocket::from_std(u))
                        .map(Handed::Dns)
                }
            };
            match r {
                Ok(h) => serve.push(h),
                Err(_) => {
                    bump(&inner.counters.malformed);
                    return;
                }
            }
        }
        for h in serve {
            let (p, t) = (self.clone(), table.clone());
            match h {
                Handed::Tcp(Role::Relay, l) => tokio::spawn(async move { p.serve_tcp(l).await }),
                Handed::Tcp(Role::Tcp, l) => tokio::spawn(async move { p.serve_loopback(l).await }),
                Handed::Tcp(_, l) => tokio::spawn(async move { p.serve_synthetic(l, t).await }),
                Handed::Dns(u) => tokio::spawn(async move { p.serve_dns(u, t).await }),
            };
        }
        let _ = s.write_all(&[fdpass::HAND_OVER]).await;
    }

    /// Serve a TCP listener whose connections go to synthetic addresses (given out by
    /// `table`'s DNS answers) until shutdown: each connection is a `CONNECT` to the name its
    /// address was given to, on the port dialled, with every check of a `CONNECT` (the
    /// client speaks TLS at once, so a refusal closes the connection without an answer). A
    /// connection to `127.0.0.1` on a port a `tcp` grant opens is relayed to the host's
    /// (the listener, on `0.0.0.0`, holds that address too: [`Proxy::serve_loopback`]). A
    /// connection to an address the table never gave out is closed at once
    /// ([`Stats::malformed`]).
    pub async fn serve_synthetic(&self, listener: TcpListener, table: Arc<NameTable>) {
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => {
                        let Some(slot) = self.admit(&s) else {
                            drop(s);
                            tokio::time::sleep(OVER_BUDGET_PAUSE).await;
                            continue;
                        };
                        let _ = s.set_nodelay(true);
                        let (p, t) = (self.clone(), table.clone());
                        tokio::spawn(async move {
                            let _slot = slot;
                            tokio::select! {
                                _ = p.handle_synthetic(s, &t) => {}
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

    async fn handle_synthetic(&self, s: TcpStream, table: &NameTable) {
        if s.local_addr()
            .is_ok_and(|a| self.inner.policy.tcp_allows(a))
        {
            return self.handle_loopback(s).await;
        }
        let Some(pending) = self.take_pending() else {
            return;
        };
        let name = match s.local_addr() {
            Ok(SocketAddr::V4(a)) => table.name_of(*a.ip()).map(|n| (n, a.port())),
            _ => None,
        };
        let Some((name, port)) = name else {
            bump(&self.inner.counters.malformed);
            return;
        };
        self.pass(s, Kind::Connect, &name, port, Vec::new(), None, pending)
            .await;
    }

    /// Serve a `tcp` grant's listener on the call's loopback until shutdown: each
    /// connection is relayed, as bytes, to the host's same loopback address and port, with
    /// the limits of a tunnel; the host's port refusing it is the refusal `host_refused`.
    pub async fn serve_loopback(&self, listener: TcpListener) {
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => {
                        let Some(slot) = self.admit(&s) else {
                            drop(s);
                            tokio::time::sleep(OVER_BUDGET_PAUSE).await;
                            continue;
                        };
                        let _ = s.set_nodelay(true);
                        let p = self.clone();
                        tokio::spawn(async move {
                            let _slot = slot;
                            tokio::select! {
                                _ = p.handle_loopback(s) => {}
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

    /// One connection to the call's `127.0.0.1:PORT` or `[::1]:PORT` of a `tcp` grant: the
    /// proxy (on the host's side) connects to the host's same address and port and relays
    /// both ways, with the limits of a tunnel (connections, bytes, idle timeout; the dial
    /// within the handshake timeout). The host's port refusing it is the refusal
    /// `host_refused` of that address and port; the connection then ends.
    async fn handle_loopback(&self, mut s: TcpStream) {
        let inner = &self.inner;
        let lim = &inner.policy.limits;
        let Some(pending) = self.take_pending() else {
            return;
        };
        let to = match s.local_addr() {
            Ok(a) if inner.policy.tcp_allows(a) => SocketAddr::new(a.ip().to_canonical(), a.port()),
            _ => {
                bump(&inner.counters.malformed);
                return;
            }
        };
        let (host, port) = (to.ip().to_string(), to.port());
        if inner.bytes.load(Ordering::Relaxed) >= lim.max_bytes {
            return self.refuse_record(&host, port, BlockReason::Limit, None);
        }
        let Ok(_slot) = inner.conns.clone().try_acquire_owned() else {
            return self.refuse_record(&host, port, BlockReason::Limit, None);
        };
        drop(pending);
        let up = match timeout(lim.handshake_timeout, TcpStream::connect(to)).await {
            Ok(Ok(up)) => up,
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return self.refuse_record(&host, port, BlockReason::HostRefused, None);
            }
            Ok(Err(_)) | Err(_) => {
                bump(&inner.counters.upstream_errors);
                return;
            }
        };
        let _ = up.set_nodelay(true);
        bump(&inner.counters.tcp_relayed);
        if let Some((broker, scan)) = self.relay_scanner(&host, port) {
            return self.scanned_tunnel(s, up, &host, port, &broker, scan).await;
        }
        self.tunnel(&s, &up, &host, port).await;
        let _ = s.shutdown().await;
    }

    /// In a call holding a credential, the scan of what the call sends through a `tcp`
    /// relay to `host:port` for the placeholders of the credentials not bound there
    /// (`None`: nothing to scan, the relay splices as any tunnel).
    fn relay_scanner(
        &self,
        host: &str,
        port: u16,
    ) -> Option<(Arc<crate::broker::Broker>, Scanner)> {
        let b = self.inner.policy.broker.clone()?;
        let scan = Scanner::new(b.credentials(), host, port);
        (!scan.is_empty()).then_some((b, scan))
    }

    /// A `tcp` relay of a call holding a credential: what the call sends is read, scanned
    /// and written on (a copy, not a splice: the relay carries no TLS the proxy could end,
    /// so the bytes are all there is to look at); a placeholder seen ends the relay before
    /// the chunk that completes it is written, recorded `credential`. What the host answers
    /// is copied back as is. A tunnel's limits apply (bytes, idle timeout).
    async fn scanned_tunnel(
        &self,
        s: TcpStream,
        up: TcpStream,
        host: &str,
        port: u16,
        broker: &crate::broker::Broker,
        scan: Scanner,
    ) {
        let inner = &self.inner;
        bump(&inner.counters.tunnels);
        let state = TunnelState {
            last: AtomicU64::new(self.now_ms()),
            hit: AtomicBool::new(false),
        };
        let count = |n: usize| self.count(&state, n);
        tokio::select! {
            seen = crate::broker::scanned::relay(s, up, scan, &count) => {
                if let Some(i) = seen {
                    let name = broker.credentials().get(i).map_or("?", |c| c.name.as_str());
                    self.refuse_credential_record(host, port, name);
                }
            }
            () = self.watch_idle(&state, inner.policy.limits.idle_timeout) => {
                bump(&inner.counters.timeouts);
            }
        }
        if state.hit.load(Ordering::Relaxed) {
            self.refuse_record(host, port, BlockReason::Limit, None);
        }
    }

    /// Counts `n` bytes of a tunnel (its last activity, the call's byte budget); `false`
    /// once the budget is spent (the tunnel's `hit` set).
    fn count(&self, state: &TunnelState, n: usize) -> bool {
        let inner = &self.inner;
        state.last.store(self.now_ms(), Ordering::Relaxed);
        let total = inner.bytes.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        let ok = total <= inner.policy.limits.max_bytes;
        if !ok {
            state.hit.store(true, Ordering::Relaxed);
        }
        ok
    }

    /// Answer DNS queries on a UDP socket until shutdown, from `table` only (see
    /// [`crate::dns::answer`]): nothing is ever forwarded. Each lookup of a name refused is
    /// counted as a refusal of that name on [`LOOKUP_PORT`], with the reason a `CONNECT` to
    /// it would get (`not_allowed`, `denied`, ...; `limit` when the table is full).
    pub async fn serve_dns(&self, sock: tokio::net::UdpSocket, table: Arc<NameTable>) {
        let mut buf = vec![0u8; 4096];
        loop {
            let (n, from) = tokio::select! {
                r = sock.recv_from(&mut buf) => match r {
                    Ok(x) => x,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                },
                _ = self.closed() => return,
            };
            if let Some(r) = self.dns_credential(&buf[..n]) {
                let _ = sock.try_send_to(&r, from);
                continue;
            }
            let (resp, outcome) = dns::answer(&table, &buf[..n]);
            match outcome {
                DnsOutcome::Allowed(_) => bump(&self.inner.counters.lookups),
                DnsOutcome::Refused(Some(name)) => self.refuse_lookup(&name),
                DnsOutcome::Refused(None) | DnsOutcome::Dropped => {
                    bump(&self.inner.counters.malformed)
                }
            }
            if let Some(r) = resp {
                // Never wait on a client: an answer that does not fit now is dropped.
                let _ = sock.try_send_to(&r, from);
            }
        }
    }

    /// A broker call's lookup of a name that holds a credential's placeholder (any case,
    /// split over labels): recorded as the refusal `credential` of that name and answered
    /// NXDOMAIN.
    fn dns_credential(&self, q: &[u8]) -> Option<Vec<u8>> {
        let b = self.inner.policy.broker.as_ref()?;
        let (name, end) = crate::broker::dns_qname(q)?;
        let cred = b.placeholder_in_name(&name)?.name.clone();
        let host = match crate::name::normalize(&name) {
            Ok(crate::name::Host::Name(n)) => n,
            _ => name
                .to_ascii_lowercase()
                .chars()
                .take(crate::name::MAX_NAME)
                .collect(),
        };
        self.refuse_credential_record(&host, LOOKUP_PORT, &cred);
        let mut r = q.get(..end)?.to_vec();
        r[2] = 0x80 | (q[2] & 0x79); // QR, the opcode and RD as asked
        r[3] = 0x80 | 3; // RA, NXDOMAIN
        r[6..12].fill(0);
        Some(r)
    }

    /// Count the refused lookup of `name` (as asked).
    fn refuse_lookup(&self, name: &str) {
        let policy = &self.inner.policy;
        let (host, reason) = match policy.decide(Kind::Connect, name, LOOKUP_PORT) {
            // The name passes on some port, yet the table refused it: it is full.
            Decision::Refuse { host, .. } if policy.name_allowed(&host) => {
                (host, BlockReason::Limit)
            }
            Decision::Refuse { host, reason, .. } => (host, reason),
            Decision::Allow { host, .. } => (host, BlockReason::Limit),
        };
        self.refuse_record(&host, LOOKUP_PORT, reason, None);
    }

    /// A head slot (`max_pending`), the connection counted as accepted; `None` (counted as
    /// dropped) when every slot is taken.
    fn take_pending(&self) -> Option<OwnedSemaphorePermit> {
        let inner = &self.inner;
        match inner.pending.clone().try_acquire_owned() {
            Ok(p) => {
                bump(&inner.counters.accepted);
                Some(p)
            }
            Err(_) => {
                bump(&inner.counters.dropped);
                None
            }
        }
    }

    pub(crate) fn refuse_record(
        &self,
        host: &str,
        port: u16,
        reason: BlockReason,
        special: Option<Special>,
    ) {
        self.record(Refusal {
            special,
            ..Refusal::new(host, port, reason)
        });
    }

    /// Records a `credential` refusal of `host:port`: credential `name`'s placeholder was
    /// sent there.
    pub(crate) fn refuse_credential_record(&self, host: &str, port: u16, name: &str) {
        self.record(Refusal {
            credential: Some(name.to_string()),
            ..Refusal::new(host, port, BlockReason::Credential)
        });
    }

    /// Lists a refusal in the report and sends its event (once listed).
    fn record(&self, r: Refusal) {
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

    /// The name of the broker's credential whose placeholder is in `bytes` (not bound to
    /// `host:port`), when the call has a broker.
    fn placeholder_in(
        &self,
        bytes: &[u8],
        host: &str,
        port: u16,
    ) -> Option<crate::broker::BrokerCredential> {
        let b = self.inner.policy.broker.as_ref()?;
        b.placeholder_in(bytes, host, port).cloned()
    }

    /// Refuse a plain request that carried `c`'s placeholder: recorded `credential`, and
    /// answered 403 with the reason and a body that names the credential and its hosts.
    async fn refuse_credential<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        s: &mut S,
        host: &str,
        port: u16,
        c: &crate::broker::BrokerCredential,
    ) {
        self.refuse_credential_record(host, port, &c.name);
        let body = crate::broker::Broker::refusal_text(c, host, "the request");
        answer(s, 403, Some(BlockReason::Credential), &body).await;
        linger(s).await;
    }

    async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        s: &mut S,
        host: &str,
        port: u16,
        reason: BlockReason,
        special: Option<Special>,
    ) {
        self.refuse_record(host, port, reason, special);
        let code = match reason {
            BlockReason::BadRequest => 400,
            BlockReason::Limit => 429,
            _ => 403,
        };
        let body = match special {
            Some(sp) => format!(
                "efr sandbox proxy refused {host}:{port}: {}: {}\n",
                reason.as_str(),
                sp.explain(host)
            ),
            None => format!(
                "efr sandbox proxy refused {host}:{port}: {}\n",
                reason.as_str()
            ),
        };
        answer(s, code, Some(reason), &body).await;
        linger(s).await;
    }

    async fn handle_inner<S>(&self, mut s: S, prefix: Vec<u8>)
    where
        S: Stream,
    {
        let inner = &self.inner;
        let Some(pending) = self.take_pending() else {
            return;
        };
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
                    .refuse(&mut s, &host, port, BlockReason::BadRequest, None)
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
        self.pass(
            s,
            head.kind,
            &head.host,
            head.port,
            rest,
            Some(&head),
            pending,
        )
        .await;
    }

    /// A refusal before the tunnel: answered when the client sent a request head (`http`),
    /// else only counted (the connection then ends).
    async fn refuse_on<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        s: &mut S,
        http: bool,
        host: &str,
        port: u16,
        reason: BlockReason,
        special: Option<Special>,
    ) {
        if http {
            self.refuse(s, host, port, reason, special).await;
        } else {
            self.refuse_record(host, port, reason, special);
        }
    }

    /// Steps 2 to 10 for a request for `raw_host:port` of `kind`: from its head (`head`;
    /// `rest` the bytes after it), or from a synthetic address (no head: no HTTP answer, no
    /// `200`, the ClientHello comes at once).
    #[allow(clippy::too_many_arguments)]
    async fn pass<S>(
        &self,
        mut s: S,
        kind: Kind,
        raw_host: &str,
        port: u16,
        rest: Vec<u8>,
        head: Option<&Head>,
        pending: OwnedSemaphorePermit,
    ) where
        S: Stream,
    {
        let inner = &self.inner;
        let lim = &inner.policy.limits;
        let http = head.is_some();
        let (host, port, mapped) = match inner.policy.decide(kind, raw_host, port) {
            Decision::Refuse { host, port, reason } => {
                return self
                    .refuse_on(&mut s, http, &host, port, reason, None)
                    .await;
            }
            Decision::Allow { host, port, addrs } => (host, port, addrs),
        };
        if inner.bytes.load(Ordering::Relaxed) >= lim.max_bytes {
            return self
                .refuse_on(&mut s, http, &host, port, BlockReason::Limit, None)
                .await;
        }
        let Ok(_slot) = inner.conns.clone().try_acquire_owned() else {
            return self
                .refuse_on(&mut s, http, &host, port, BlockReason::Limit, None)
                .await;
        };
        drop(pending);

        // Resolve (or take the mapping), check every answer, dial exactly those addresses.
        let addrs: Vec<IpAddr> = match mapped {
            Some(a) => a,
            None => match &inner.resolver {
                Some(r) => r(&host, port),
                None => match timeout(
                    lim.handshake_timeout,
                    tokio::net::lookup_host((host.as_str(), port)),
                )
                .await
                {
                    Ok(Ok(it)) => it.map(|sa| sa.ip()).collect(),
                    _ => Vec::new(),
                },
            },
        };
        if addrs.is_empty() {
            bump(&inner.counters.upstream_errors);
            if http {
                let body = format!("efr sandbox proxy: cannot resolve {host}\n");
                answer(&mut s, 502, None, &body).await;
            }
            return;
        }
        // An answer into a special range is refused (no rebinding into the host or its
        // networks) unless `[network.resolve]` maps the name: the refusal names the first
        // such address and its range.
        let special = addrs
            .iter()
            .find_map(|a| special_range(*a).map(|range| Special { address: *a, range }));
        if let (false, Some(sp)) = (inner.policy.resolve.contains_key(&host), special) {
            return self
                .refuse_on(&mut s, http, &host, port, BlockReason::Denied, Some(sp))
                .await;
        }
        let Some(mut up) = dial(&addrs, port, lim.handshake_timeout).await else {
            bump(&inner.counters.upstream_errors);
            if http {
                let body = format!("efr sandbox proxy: cannot connect to {host}:{port}\n");
                answer(&mut s, 502, None, &body).await;
            }
            return;
        };
        let _ = up.set_nodelay(true);

        match (kind, head) {
            (Kind::Connect, _) => {
                if http
                    && s.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
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
                    self.refuse_record(&host, port, reason, None);
                    return;
                }
                if let Some(b) = &inner.policy.broker {
                    // A broker call: terminated and relayed request by request.
                    let link = BrokerLink {
                        proxy: self.clone(),
                        state: self.tunnel_state(),
                    };
                    return crate::broker::relay::serve(link, b.clone(), s, buf, up, &host, port)
                        .await;
                }
                if up.write_all(&buf).await.is_err() {
                    return;
                }
            }
            (Kind::PlainHttp, Some(head)) => {
                let mut req = head.origin_request(&host);
                req.extend_from_slice(&rest);
                if let Some(c) = self.placeholder_in(&req, &host, port) {
                    return self.refuse_credential(&mut s, &host, port, &c).await;
                }
                if up.write_all(&req).await.is_err() {
                    return;
                }
            }
            // Only a request head asks for plain HTTP.
            (Kind::PlainHttp, None) => return,
        }
        self.tunnel(&s, &up, &host, port).await;
    }

    /// Relays both ways between the client `s` and the upstream `up` (a tunnel to
    /// `host:port`, counted), with the byte limit and the idle timeout; the byte limit hit
    /// is the refusal `limit` of `host:port`.
    async fn tunnel<S: Stream>(&self, s: &S, up: &TcpStream, host: &str, port: u16) {
        let inner = &self.inner;
        let lim = &inner.policy.limits;
        bump(&inner.counters.tunnels);
        let state = Arc::new(TunnelState {
            last: AtomicU64::new(self.now_ms()),
            hit: AtomicBool::new(false),
        });
        let idle = lim.idle_timeout;
        let account = |n: usize| -> bool { self.count(&state, n) };
        tokio::select! {
            _ = crate::splice::both_ways(s, up, &account) => {}
            _ = self.watch_idle(&state, idle) => bump(&inner.counters.timeouts),
        }
        if state.hit.load(Ordering::Relaxed) {
            self.refuse_record(host, port, BlockReason::Limit, None);
        }
    }

    /// A fresh activity state (now) for a connection the broker relays.
    fn tunnel_state(&self) -> Arc<TunnelState> {
        Arc::new(TunnelState {
            last: AtomicU64::new(self.now_ms()),
            hit: AtomicBool::new(false),
        })
    }

    /// Every credential use of the call, first-seen order (no cap of the summary).
    pub fn credentials_used_all(&self) -> Vec<efr_sandbox_wire::summary::CredentialUse> {
        lock(&self.inner.report).uses().to_vec()
    }

    async fn closed(&self) {
        let mut rx = self.inner.closed.subscribe();
        let _ = rx.wait_for(|&c| c).await;
    }

    fn now_ms(&self) -> u64 {
        // Saturating: u64::MAX milliseconds are 584 million years.
        u64::try_from(self.inner.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Returns once no byte went either way for `idle`. One timer per tunnel, set for when
    /// the tunnel would be idle (not a periodic tick): no wakeup while bytes flow.
    async fn watch_idle(&self, st: &TunnelState, idle: Duration) {
        let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
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
        match s.try_io(Interest::READABLE, || {
            fdpass::recv_byte(s.as_fd()).map_err(io::Error::from)
        }) {
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
    let mut pacer = Pacer::default();
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
        pacer.before_read().await;
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
    let mut pacer = Pacer::default();
    loop {
        match parse_client_hello(buf) {
            Ok(h) => return Ok(Ok(h.sni)),
            Err(HelloError::Incomplete) if buf.len() <= MAX_HELLO + 4096 => {}
            Err(HelloError::Incomplete) => return Ok(Err(HelloError::Malformed("too large"))),
            Err(e) => return Ok(Err(e)),
        }
        pacer.before_read().await;
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

/// A socket of a hand-over, ready for tokio.
enum Handed {
    Tcp(Role, TcpListener),
    Dns(tokio::net::UdpSocket),
}

/// The activity and byte-limit state of one tunnel or terminated connection.
#[derive(Debug)]
struct TunnelState {
    last: AtomicU64,
    hit: AtomicBool,
}

/// How long a listener stops accepting after it refused a connection over the budget:
/// what a call that keeps reopening connections over its budget costs the service's
/// runtime (an accept, a write, a close) is at most one refusal per pause per listener; its
/// next connections wait in the listen queue meanwhile.
const OVER_BUDGET_PAUSE: Duration = Duration::from_millis(10);

/// The host of a refusal made before a connection's head was read (the connection budget).
pub const ANY_HOST: &str = "*";

/// What a connection over the budget reads before it is closed.
const LIMIT_BODY: &str = "efr sandbox proxy: limit: too many connections open for this call\n";

fn limit_answer() -> String {
    format!(
        "HTTP/1.1 429 Too Many Requests\r\n{REASON_HEADER}: limit\r\nContent-Type: text/plain; \
         charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{LIMIT_BODY}",
        LIMIT_BODY.len()
    )
}

/// Connections of every proxy of the process open at once, and the most allowed.
static PROCESS_OPEN: AtomicUsize = AtomicUsize::new(0);
static PROCESS_CAP: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Bounds the connections every proxy of this process holds open at once, together, to
/// `max` (each call's own `max_open` still applies): the service sets it below its
/// open-file limit, keeping a reserve for its RPC, its launchers and their pipes. Past it
/// a new connection of any call is answered `limit` and closed.
pub fn set_process_budget(max: usize) {
    PROCESS_CAP.store(max, Ordering::Relaxed);
}

/// A connection's place in its call's budget and the process's, given back on drop.
struct OpenSlot {
    _call: OwnedSemaphorePermit,
}

impl OpenSlot {
    fn new(call: OwnedSemaphorePermit) -> Option<OpenSlot> {
        let cap = PROCESS_CAP.load(Ordering::Relaxed);
        PROCESS_OPEN
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .ok()
            .map(|_| OpenSlot { _call: call })
    }
}

impl Drop for OpenSlot {
    fn drop(&mut self) {
        PROCESS_OPEN.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A write that never waits: what a refused connection is told before it is closed.
trait TryWriteNow {
    fn try_write_now(&self, b: &[u8]) -> io::Result<usize>;
}

impl TryWriteNow for UnixStream {
    fn try_write_now(&self, b: &[u8]) -> io::Result<usize> {
        self.try_write(b)
    }
}

impl TryWriteNow for TcpStream {
    fn try_write_now(&self, b: &[u8]) -> io::Result<usize> {
        self.try_write(b)
    }
}

/// What the broker's relay of one connection reaches of its proxy.
#[derive(Debug, Clone)]
struct BrokerLink {
    proxy: Proxy,
    state: Arc<TunnelState>,
}

impl crate::broker::relay::Link for BrokerLink {
    fn touch(&self) {
        self.state
            .last
            .store(self.proxy.now_ms(), Ordering::Relaxed);
    }

    fn count_bytes(&self, n: usize) -> bool {
        let inner = &self.proxy.inner;
        self.touch();
        let total = inner.bytes.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        let ok = total <= inner.policy.limits.max_bytes;
        if !ok {
            self.state.hit.store(true, Ordering::Relaxed);
        }
        ok
    }

    fn refuse_credential(&self, host: &str, port: u16, name: &str) {
        self.proxy.refuse_credential_record(host, port, name);
    }

    fn record_use(&self, name: &str, host: &str, method: &str, path: &str) {
        lock(&self.proxy.inner.report).add_use(name, host, method, path);
    }

    fn upstream_error(&self) {
        bump(&self.proxy.inner.counters.upstream_errors);
    }

    fn count_tunnel(&self) {
        bump(&self.proxy.inner.counters.tunnels);
    }

    fn idle(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let idle = self.proxy.inner.policy.limits.idle_timeout;
            self.proxy.watch_idle(&self.state, idle).await;
            bump(&self.proxy.inner.counters.timeouts);
        })
    }

    fn done(&self, host: &str, port: u16) {
        if self.state.hit.load(Ordering::Relaxed) {
            self.proxy
                .refuse_record(host, port, BlockReason::Limit, None);
        }
    }

    fn handshake_timeout(&self) -> Duration {
        self.proxy.inner.policy.limits.handshake_timeout
    }
}
