//! A relay between a contained call's bus clients and its xdg-dbus-proxy, for proxies older
//! than [`crate::bus::PIPELINED_AUTH_VERSION`] (Debian 12 has 0.1.4).
//!
//! Such a proxy closes a client that sends `BEGIN` and its first message before the proxy
//! has answered every auth line (sd-bus's busctl and zbus send their whole handshake at
//! once); sent after the answers, the same bytes work. The relay listens where the call's bus
//! variable points and, per client, connects to the proxy's own socket, passes the auth lines
//! one at a time (each client command has exactly one answer in the D-Bus auth protocol, so
//! waiting for it changes nothing for a client that waits anyway), holds `BEGIN` and every
//! byte after it until the last answer came, then copies both ways unchanged, with the fds
//! of D-Bus's fd passing (`SCM_RIGHTS`). It reads no message: the filtering is the proxy's.
//!
//! Bounds: an auth line of at most [`MAX_AUTH_LINE`] bytes, at most [`MAX_AUTH_LINES`] of
//! them within [`AUTH_TIMEOUT`], at most [`MAX_CLIENTS`] clients at once (one more is closed
//! at once). [`Relay::stop`] closes the listener and every connection and joins every thread.

use std::collections::HashMap;
use std::io::Write;
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest auth line a client may send (the reference bus allows 16 KiB for the whole
/// auth exchange).
pub const MAX_AUTH_LINE: usize = 16 * 1024;
/// The most auth lines before `BEGIN` (a client's AUTH, DATA, NEGOTIATE_UNIX_FD, ...).
pub const MAX_AUTH_LINES: usize = 32;
/// How long a client has for its auth (the reference bus's default is 30 s).
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(30);
/// The most clients of one call's bus at once (each holds two threads of the service).
pub const MAX_CLIENTS: usize = 64;

/// Why a relay cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Binding the relay's listening socket failed.
    #[error("bus relay socket {}: {source}", path.display())]
    Listen {
        /// The socket the call's clients were to connect to.
        path: PathBuf,
        /// What bind said.
        source: std::io::Error,
    },
    /// The thread that accepts the clients could not be spawned.
    #[error("bus relay thread: {0}")]
    Thread(std::io::Error),
}

/// Why one client's connection ended before its auth was through (kept for the tests and
/// the debug log; the client sees its connection closed, as the proxy would close it).
#[derive(Debug, thiserror::Error)]
enum ClientError {
    #[error("connect to the filter's socket {}: {source}", path.display())]
    Upstream {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Auth(#[from] AuthError),
    #[error("the auth took longer than {AUTH_TIMEOUT:?}")]
    Timeout,
    #[error("the connection ended during the auth")]
    Ended,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// One call's relay, running until [`Relay::stop`] (or drop).
#[derive(Debug)]
pub struct Relay {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    clients: Arc<Clients>,
}

/// An open client: its socket, its connection to the proxy once made (both to close them
/// at the stop) and its thread.
type Open = (UnixStream, Option<UnixStream>, Option<JoinHandle<()>>);

#[derive(Debug, Default)]
struct Clients {
    /// Each open client by its number.
    open: Mutex<HashMap<u64, Open>>,
    /// Threads of clients that ended, to join.
    ended: Mutex<Vec<JoinHandle<()>>>,
    next: AtomicU64,
}

impl Relay {
    /// Listens on `listen` (a path in the call's 0700 directory) and relays each client to
    /// the proxy listening on `upstream`.
    pub fn start(listen: &Path, upstream: &Path) -> Result<Relay, RelayError> {
        let listener = UnixListener::bind(listen).map_err(|e| RelayError::Listen {
            path: listen.to_path_buf(),
            source: e,
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let clients = Arc::new(Clients::default());
        let accept = {
            let (stop, clients, upstream) = (stop.clone(), clients.clone(), upstream.to_owned());
            std::thread::Builder::new()
                .name("efr-bus-relay".into())
                .spawn(move || accept_loop(&listener, &upstream, &stop, &clients))
                .map_err(RelayError::Thread)?
        };
        Ok(Relay {
            path: listen.to_path_buf(),
            stop,
            accept: Some(accept),
            clients,
        })
    }

    /// Closes the listener and every client's connection, and joins every thread.
    pub fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept: it sees the flag and ends (its listener closes with it).
        let _ = UnixStream::connect(&self.path);
        let _ = accept.join();
        let open: Vec<_> = {
            let mut o = lock(&self.clients.open);
            o.drain().collect()
        };
        for (_, (c, u, t)) in open {
            let _ = c.shutdown(Shutdown::Both);
            if let Some(u) = u {
                let _ = u.shutdown(Shutdown::Both);
            }
            if let Some(t) = t {
                let _ = t.join();
            }
        }
        for t in std::mem::take(&mut *lock(&self.clients.ended)) {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(
    listener: &UnixListener,
    upstream: &Path,
    stop: &AtomicBool,
    clients: &Arc<Clients>,
) {
    loop {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) if stop.load(Ordering::SeqCst) => return,
            Err(_) => {
                // EMFILE and the like: wait a moment rather than spin.
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        for t in std::mem::take(&mut *lock(&clients.ended)) {
            let _ = t.join();
        }
        let Ok(keep) = client.try_clone() else {
            continue;
        };
        let id = clients.next.fetch_add(1, Ordering::SeqCst);
        {
            let mut open = lock(&clients.open);
            if open.len() >= MAX_CLIENTS {
                continue;
            }
            open.insert(id, (keep, None, None));
        }
        let (up, cl) = (upstream.to_owned(), clients.clone());
        let spawned = std::thread::Builder::new()
            .name("efr-bus-client".into())
            .spawn(move || {
                let _ = serve(client, &up, id, &cl);
                let me = lock(&cl.open).remove(&id);
                if let Some((_, _, Some(t))) = me {
                    lock(&cl.ended).push(t);
                }
            });
        match spawned {
            Ok(t) => {
                let mut open = lock(&clients.open);
                match open.get_mut(&id) {
                    Some(e) => e.2 = Some(t),
                    // Ended already: join it later.
                    None => lock(&clients.ended).push(t),
                }
            }
            Err(_) => {
                lock(&clients.open).remove(&id);
            }
        }
    }
}

/// One client: the auth in lock-step, then both ways unchanged.
fn serve(
    client: UnixStream,
    upstream: &Path,
    id: u64,
    clients: &Clients,
) -> Result<(), ClientError> {
    let proxy = UnixStream::connect(upstream).map_err(|e| ClientError::Upstream {
        path: upstream.to_path_buf(),
        source: e,
    })?;
    match lock(&clients.open).get_mut(&id) {
        Some(e) => e.1 = Some(proxy.try_clone()?),
        // Stopped meanwhile.
        None => return Ok(()),
    }
    let held = auth(&client, &proxy)?;
    client.set_read_timeout(None)?;
    proxy.set_read_timeout(None)?;
    // BEGIN, then the client's bytes after it with the fds that came so far (they belong
    // to its first messages: fds on auth bytes would be a client's mistake, and a proxy
    // reading the auth line by line would drop them).
    let begin = b"BEGIN\r\n".len();
    (&proxy).write_all(&held.to_proxy[..begin])?;
    if held.to_proxy.len() > begin {
        crate::sys::send_with_fds(&proxy, &held.to_proxy[begin..], &held.fds)?;
    }
    drop(held.fds);
    if !held.to_client.is_empty() {
        (&client).write_all(&held.to_client)?;
    }
    let (c2, p2) = (client.try_clone()?, proxy.try_clone()?);
    let back = std::thread::Builder::new()
        .name("efr-bus-client".into())
        .spawn(move || copy(&p2, &c2))?;
    copy(&client, &proxy);
    let _ = back.join();
    Ok(())
}

/// What the auth phase leaves to pass on when it ends.
struct Held {
    /// `BEGIN\r\n` and every byte after it the client sent so far.
    to_proxy: Vec<u8>,
    /// The fds that came with those bytes.
    fds: Vec<OwnedFd>,
    /// Bytes of the proxy after its last answer (none in the protocol; passed on if any).
    to_client: Vec<u8>,
}

/// The client's side of the auth split into its lines (no I/O: fuzzed,
/// `fuzz/fuzz_targets/bus_auth.rs`). Fed what the client sent, it gives the nul byte's
/// check, each auth line whole, and at `BEGIN` everything from it on.
#[derive(Debug, Default)]
pub struct AuthLines {
    buf: Vec<u8>,
    nul: bool,
    lines: usize,
}

/// What [`AuthLines::next_part`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum AuthNext {
    /// Nothing whole yet: feed more.
    More,
    /// One auth line (with its `\r\n`), to pass on and wait for its one answer.
    Line(Vec<u8>),
    /// `BEGIN\r\n` and every byte after it so far: the auth is over.
    Begin(Vec<u8>),
}

/// Why a client's auth is refused (its connection is closed, as the proxy would close it).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The client's first byte is not the nul byte a D-Bus auth starts with.
    #[error("the client's first byte is not the nul byte of the d-bus auth")]
    NoNul,
    /// No `\r\n` within the first `MAX_AUTH_LINE` bytes of an auth line.
    #[error("an auth line longer than {MAX_AUTH_LINE} bytes")]
    LongLine,
    /// The client sent more than `MAX_AUTH_LINES` lines before `BEGIN`.
    #[error("more than {MAX_AUTH_LINES} auth lines")]
    ManyLines,
}

impl AuthLines {
    /// Adds bytes the client sent.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole part of the auth.
    pub fn next_part(&mut self) -> Result<AuthNext, AuthError> {
        if !self.nul {
            match self.buf.first() {
                None => return Ok(AuthNext::More),
                Some(0) => {
                    self.buf.remove(0);
                    self.nul = true;
                }
                Some(_) => return Err(AuthError::NoNul),
            }
        }
        let window = &self.buf[..self.buf.len().min(MAX_AUTH_LINE)];
        let Some(i) = window.windows(2).position(|w| w == b"\r\n") else {
            return if self.buf.len() >= MAX_AUTH_LINE {
                Err(AuthError::LongLine)
            } else {
                Ok(AuthNext::More)
            };
        };
        let end = i + 2;
        if &self.buf[..end] == b"BEGIN\r\n" {
            return Ok(AuthNext::Begin(std::mem::take(&mut self.buf)));
        }
        self.lines += 1;
        if self.lines > MAX_AUTH_LINES {
            return Err(AuthError::ManyLines);
        }
        Ok(AuthNext::Line(self.buf.drain(..end).collect()))
    }
}

/// Passes the client's nul byte and auth lines one at a time, each answer back, until the
/// client's `BEGIN`.
fn auth(mut client: &UnixStream, mut proxy: &UnixStream) -> Result<Held, ClientError> {
    let until = Instant::now() + AUTH_TIMEOUT;
    let mut lines = AuthLines::default();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut pbuf: Vec<u8> = Vec::new();
    // The nul byte goes with the first line (credentials, if the client sent any with it,
    // are the kernel's business: the proxy reads its peer's from the socket).
    let mut out = vec![0u8];
    loop {
        match lines.next_part()? {
            AuthNext::More => {
                let mut got = Vec::new();
                fill(client, &mut got, &mut fds, 1, until)?;
                lines.push(&got);
            }
            AuthNext::Begin(rest) => {
                proxy.write_all(&out)?;
                return Ok(Held {
                    to_proxy: rest,
                    fds,
                    to_client: pbuf,
                });
            }
            AuthNext::Line(line) => {
                out.extend_from_slice(&line);
                proxy.write_all(&out)?;
                out.clear();
                // Its one answer.
                let aend = loop {
                    if let Some(i) = pbuf.windows(2).position(|w| w == b"\r\n") {
                        break i + 2;
                    }
                    if pbuf.len() > MAX_AUTH_LINE {
                        return Err(AuthError::LongLine.into());
                    }
                    let have = pbuf.len();
                    let mut none = Vec::new();
                    fill(proxy, &mut pbuf, &mut none, have + 1, until)?;
                };
                client.write_all(&pbuf[..aend])?;
                pbuf.drain(..aend);
            }
        }
    }
}

/// Reads from `s` into `buf` until it holds at least `want` bytes, before `until`.
fn fill(
    s: &UnixStream,
    buf: &mut Vec<u8>,
    fds: &mut Vec<OwnedFd>,
    want: usize,
    until: Instant,
) -> Result<(), ClientError> {
    let mut chunk = [0u8; 4096];
    while buf.len() < want {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::Timeout);
        }
        s.set_read_timeout(Some(left))?;
        match crate::sys::recv_with_fds(s, &mut chunk) {
            Ok((0, _)) => return Err(ClientError::Ended),
            Ok((n, got)) => {
                buf.extend_from_slice(&chunk[..n]);
                fds.extend(got);
                if fds.len() > crate::sys::MAX_FDS {
                    return Err(ClientError::Io(std::io::Error::other(
                        "too many fds during the auth",
                    )));
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ClientError::Timeout);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Copies `from` to `to` with their fds until `from` ends or either fails; then ends the
/// writing side of `to` (so its peer sees the end) and the reading side of `from`.
fn copy(from: &UnixStream, to: &UnixStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match crate::sys::recv_with_fds(from, &mut buf) {
            Ok((0, _)) => break,
            Ok((n, fds)) => {
                if crate::sys::send_with_fds(to, &buf[..n], &fds).is_err() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

#[cfg(test)]
mod tests;
