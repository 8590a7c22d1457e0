//! What runs inside the call's network namespace (blocking, threads, no tokio), for the
//! launcher's init:
//!
//! - [`run_relay`]: TCP on `127.0.0.1:<port>` (the proxy variables name it) piped to the
//!   call's proxy socket;
//! - [`DnsServer`]: a DNS server on `127.0.0.1:53` that answers allowed names with synthetic
//!   loopback addresses from a [`NameTable`] and refuses the rest, never forwarding
//!   ([`crate::dns`]);
//! - [`run_synthetic_relay`]: TCP to a synthetic address, handed to the proxy as
//!   `CONNECT name:port` so the proxy's checks (TLS, SNI, limits) still hold.
//!
//! Every function takes explicit addresses, so tests run them on ordinary loopback.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::dns::{DnsOutcome, NameTable, answer};

/// Most relayed connections at once per relay (each takes two threads).
pub const MAX_RELAY_CONNS: usize = 256;
const PIPE_BUF: usize = 128 << 10;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Accept TCP connections and hand each, as it is, to the proxy at `proxy`: the accepted
/// socket is passed over the proxy's Unix socket (`SCM_RIGHTS`, see [`crate::fdpass`]) and
/// the proxy serves it like any client (every check of the proxy applies); the relay keeps
/// no copy and copies no byte. One Unix connection carries every socket, reopened when it
/// fails. Runs until the listener fails. A connection the proxy cannot take is closed.
pub fn run_relay(listener: TcpListener, proxy: &Path) -> io::Result<()> {
    let mut conn: Option<UnixStream> = None;
    loop {
        let (c, _) = match listener.accept() {
            Ok(x) => x,
            Err(e)
                if e.kind() == io::ErrorKind::Interrupted
                    || e.kind() == io::ErrorKind::ConnectionAborted =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        let _ = c.set_nodelay(true);
        for _ in 0..2 {
            if conn.is_none() {
                conn = UnixStream::connect(proxy).ok();
            }
            let Some(u) = &conn else { break };
            if crate::fdpass::send_fd(u.as_raw_fd(), c.as_raw_fd()).is_ok() {
                break;
            }
            conn = None;
        }
        drop(c);
    }
}

/// Why a hand-over failed.
#[derive(Debug, thiserror::Error)]
pub enum HandOverError {
    #[error("no socket to hand over")]
    Nothing,
    #[error("{0} sockets to hand over, at most {max}", max = crate::fdpass::MAX_HANDED)]
    TooMany(usize),
    #[error("connect {path}: {source}", path = .path.display())]
    Connect { path: PathBuf, source: io::Error },
    #[error("sending the sockets: {0}")]
    Send(io::Error),
    #[error("the proxy did not take the sockets: {0}")]
    NoAnswer(io::Error),
    #[error("the proxy refused the sockets")]
    Refused,
}

/// The sockets the init binds in the call's network namespace, for [`hand_over`].
#[derive(Debug, Default)]
pub struct Sockets {
    /// The TCP listener the proxy variables name.
    pub relay: Option<TcpListener>,
    /// The DNS server's UDP socket.
    pub dns: Option<UdpSocket>,
    /// The listeners for connections to synthetic addresses (port 443 and the ports grants
    /// name).
    pub synthetic: Vec<TcpListener>,
}

/// Hands `socks` to the call's proxy at `proxy`, once (see [`crate::fdpass`]), and waits
/// up to `wait` for the proxy to say it took them; the sockets (our copies) are closed when
/// this returns, either way. From then on the proxy accepts on the listeners and answers on
/// the DNS socket itself: nothing of the call's traffic passes through the caller.
pub fn hand_over(proxy: &Path, socks: Sockets, wait: Duration) -> Result<(), HandOverError> {
    use crate::fdpass::{self, Role};
    let mut list: Vec<(Role, std::os::fd::RawFd)> = Vec::new();
    if let Some(l) = &socks.relay {
        list.push((Role::Relay, l.as_raw_fd()));
    }
    if let Some(u) = &socks.dns {
        list.push((Role::Dns, u.as_raw_fd()));
    }
    list.extend(
        socks
            .synthetic
            .iter()
            .map(|l| (Role::Synthetic, l.as_raw_fd())),
    );
    if list.is_empty() {
        return Err(HandOverError::Nothing);
    }
    if list.len() > fdpass::MAX_HANDED {
        return Err(HandOverError::TooMany(list.len()));
    }
    let mut u = UnixStream::connect(proxy).map_err(|source| HandOverError::Connect {
        path: proxy.to_path_buf(),
        source,
    })?;
    u.set_write_timeout(Some(wait))
        .and_then(|()| u.set_read_timeout(Some(wait)))
        .map_err(HandOverError::Send)?;
    fdpass::send_hand_over(u.as_raw_fd(), &list).map_err(HandOverError::Send)?;
    let mut b = [0u8];
    loop {
        return match u.read(&mut b) {
            Ok(1) if b[0] == fdpass::HAND_OVER => Ok(()),
            Ok(_) => Err(HandOverError::Refused),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(HandOverError::NoAnswer(e)),
        };
    }
}

struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(a: &Arc<AtomicUsize>) -> Option<Slot> {
        if a.fetch_add(1, Ordering::AcqRel) >= MAX_RELAY_CONNS {
            a.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot(a.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

trait Half: Read + Write + Send + 'static {
    fn dup(&self) -> io::Result<Self>
    where
        Self: Sized;
    fn shut(&self, how: Shutdown);
}

impl Half for TcpStream {
    fn dup(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn shut(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

impl Half for UnixStream {
    fn dup(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn shut(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

/// Copy one way until EOF with `splice(2)` (socket -> pipe -> socket, no user-space copy),
/// falling back to a buffer copy where splice does not apply; then pass the half-close on.
fn copy_half<A: Half + AsRawFd, B: Half + AsRawFd>(from: A, to: B) {
    let spliced = crate::splice::Pipe::blocking()
        .and_then(|p| crate::splice::blocking_one_way(from.as_raw_fd(), to.as_raw_fd(), &p));
    match spliced {
        Ok(None) => copy_buffered(from, to),
        Ok(Some(_)) | Err(_) => {
            to.shut(Shutdown::Write);
            from.shut(Shutdown::Read);
        }
    }
}

fn copy_buffered<A: Half, B: Half>(mut from: A, mut to: B) {
    let mut buf = vec![0u8; PIPE_BUF];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    to.shut(Shutdown::Write);
    from.shut(Shutdown::Read);
}

/// Copy both ways until both ends closed; half-close passed on.
fn pipe<A: Half + AsRawFd, B: Half + AsRawFd>(a: A, b: B) {
    let (Ok(a2), Ok(b2)) = (a.dup(), b.dup()) else {
        return;
    };
    let t = std::thread::spawn(move || copy_half(a2, b2));
    copy_half(b, a);
    let _ = t.join();
}

/// Accept TCP connections to synthetic addresses and hand each to the proxy at `proxy` as
/// `CONNECT name:port`, `port` being `connect_port` or else the port the client dialled.
/// A connection to an address the table never gave out is closed.
pub fn run_synthetic_relay(
    listener: TcpListener,
    table: Arc<NameTable>,
    proxy: &Path,
    connect_port: Option<u16>,
) -> io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let (c, _) = match listener.accept() {
            Ok(x) => x,
            Err(e)
                if e.kind() == io::ErrorKind::Interrupted
                    || e.kind() == io::ErrorKind::ConnectionAborted =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        let Some(guard) = Slot::take(&active) else {
            continue;
        };
        let path: PathBuf = proxy.to_path_buf();
        let table = table.clone();
        std::thread::spawn(move || {
            let _guard = guard;
            let Ok(local) = c.local_addr() else { return };
            let IpAddr::V4(ip) = local.ip() else { return };
            let Some(name) = table.name_of(ip) else {
                return;
            };
            let port = connect_port.unwrap_or(local.port());
            if let Ok(u) = connect_via_proxy(&path, &name, port) {
                let _ = c.set_nodelay(true);
                pipe(c, u);
            }
        });
    }
}

/// Open `CONNECT name:port` on the proxy's Unix socket; the stream once the proxy answered
/// 200 (its refusal otherwise, as an error).
pub fn connect_via_proxy(proxy: &Path, name: &str, port: u16) -> io::Result<UnixStream> {
    let mut u = UnixStream::connect(proxy)?;
    u.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        u,
        "CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n"
    )?;
    // Read the answer head byte by byte: nothing of the tunnel may be swallowed.
    let mut head = Vec::with_capacity(128);
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 4096 || u.read(&mut b)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad proxy answer",
            ));
        }
        head.push(b[0]);
    }
    u.set_read_timeout(None)?;
    let line = head.split(|&c| c == b'\n').next().unwrap_or_default();
    if line.starts_with(b"HTTP/1.1 200") || line.starts_with(b"HTTP/1.0 200") {
        Ok(u)
    } else {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            String::from_utf8_lossy(line).trim().to_string(),
        ))
    }
}

/// Most distinct refused names remembered (the rest only counted).
pub const MAX_REFUSED_NAMES: usize = 1024;

/// The in-namespace DNS server (UDP).
#[derive(Debug)]
pub struct DnsServer {
    sock: UdpSocket,
    table: Arc<NameTable>,
    refused: Mutex<BTreeMap<String, u32>>,
    refused_other: AtomicU64,
    answered: AtomicU64,
}

impl DnsServer {
    /// Bind UDP at `addr` (127.0.0.1:53 inside the namespace).
    pub fn bind(addr: SocketAddr, table: Arc<NameTable>) -> io::Result<DnsServer> {
        Ok(DnsServer {
            sock: UdpSocket::bind(addr)?,
            table,
            refused: Mutex::new(BTreeMap::new()),
            refused_other: AtomicU64::new(0),
            answered: AtomicU64::new(0),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Serve until the socket fails.
    pub fn run(&self) -> io::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let (n, from) = match self.sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if let Some(resp) = self.handle(&buf[..n]) {
                let _ = self.sock.send_to(&resp, from);
            }
        }
    }

    /// Answer one query datagram (and count it).
    pub fn handle(&self, q: &[u8]) -> Option<Vec<u8>> {
        let (resp, outcome) = answer(&self.table, q);
        match outcome {
            DnsOutcome::Allowed(_) => {
                self.answered.fetch_add(1, Ordering::Relaxed);
            }
            DnsOutcome::Refused(Some(n)) => {
                let mut r = lock(&self.refused);
                if r.len() < MAX_REFUSED_NAMES || r.contains_key(&n) {
                    *r.entry(n).or_insert(0) += 1;
                } else {
                    self.refused_other.fetch_add(1, Ordering::Relaxed);
                }
            }
            DnsOutcome::Refused(None) => {
                self.refused_other.fetch_add(1, Ordering::Relaxed);
            }
            DnsOutcome::Dropped => {}
        }
        resp
    }

    /// Refused names and their counts, and the count of refused queries without a usable name
    /// (or past [`MAX_REFUSED_NAMES`]).
    pub fn refused(&self) -> (BTreeMap<String, u32>, u64) {
        (
            lock(&self.refused).clone(),
            self.refused_other.load(Ordering::Relaxed),
        )
    }

    /// Queries answered for allowed names.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pseudo-random payload (xorshift), different per seed.
    fn payload(len: usize, mut seed: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            v.extend_from_slice(&seed.to_le_bytes());
        }
        v.truncate(len);
        v
    }

    /// The relay's spliced copy (TCP <-> Unix) passes every byte both ways, and each
    /// half-close on to the other side while the other direction keeps flowing.
    // Sends all of `data` from `from`, half-closes it, and checks that `to` reads exactly
    // that, then EOF.
    fn one_way<A: Half, B: Half>(from: &A, to: &mut B, data: &[u8], what: &str) {
        let data2 = data.to_vec();
        let mut f = from.dup().unwrap();
        let w = std::thread::spawn(move || {
            f.write_all(&data2).unwrap();
            f.shut(Shutdown::Write);
        });
        let mut got = Vec::new();
        to.read_to_end(&mut got).unwrap();
        w.join().unwrap();
        assert_eq!(got.len(), data.len(), "{what}");
        assert!(got == data, "{what}: bytes differ");
    }

    #[test]
    fn spliced_pipe_integrity_and_half_close() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (served, _) = l.accept().unwrap();
        let (relay_side, mut far) = UnixStream::pair().unwrap();
        let relay = std::thread::spawn(move || pipe(served, relay_side));

        let up = payload((9 << 20) + 4321, 0x9e37_79b9_7f4a_7c15);
        let down = payload((7 << 20) + 123, 0x2545_f491_4f6c_dd1d);

        // Client -> far, then a half-close; far -> client still flows after it.
        one_way(&client, &mut far, &up, "client -> far");
        one_way(&far, &mut client, &down, "far -> client");
        relay.join().unwrap();
    }

    /// The same the other way round: the far side closes first, the client keeps sending.
    #[test]
    fn spliced_pipe_far_closes_first() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (served, _) = l.accept().unwrap();
        let (relay_side, mut far) = UnixStream::pair().unwrap();
        let relay = std::thread::spawn(move || pipe(served, relay_side));
        // Far -> client, then a half-close; client -> far still flows after it.
        one_way(&far, &mut client, &payload(3 << 20, 7), "far -> client");
        one_way(&client, &mut far, &payload(5 << 20, 11), "client -> far");
        relay.join().unwrap();
    }
}
