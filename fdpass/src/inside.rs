//! What runs inside the call's network namespace, for the launcher's init (blocking, no
//! tokio): [`hand_over`] gives the sockets the init bound there (the relay's listener, the
//! DNS socket, the synthetic listeners, the `tcp` grants' listeners: [`Sockets`]) to the
//! call's proxy, once, over the proxy's Unix socket (see [`crate`]). The proxy then serves them itself; nothing of
//! the call's traffic passes through the init.

use std::io::{self, Read};
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a hand-over failed.
#[derive(Debug, thiserror::Error)]
pub enum HandOverError {
    /// [`Sockets`] holds no socket.
    #[error("no socket to hand over")]
    Nothing,
    /// More sockets than [`MAX_HANDED`](crate::MAX_HANDED) (how many there were).
    #[error("{0} sockets to hand over, at most {max}", max = crate::MAX_HANDED)]
    TooMany(usize),
    /// Connecting to the proxy's Unix socket failed.
    #[error("connect {path}: {source}", path = .path.display())]
    Connect {
        /// The proxy's socket.
        path: PathBuf,
        /// What connect said.
        source: io::Error,
    },
    /// Setting the send or receive timeout on the connection failed.
    #[error("setting the timeout on {path}: {source}", path = .path.display())]
    Timeout {
        /// The proxy's socket.
        path: PathBuf,
        /// What setsockopt said.
        source: io::Error,
    },
    /// Sending the hand-over message failed.
    #[error("sending the sockets to {path}: {source}", path = .path.display())]
    Send {
        /// The proxy's socket.
        path: PathBuf,
        /// Why the send failed.
        source: crate::SendError,
    },
    /// Reading the answer failed, such as no answer within the wait.
    #[error("the proxy did not take the sockets: {0}")]
    NoAnswer(io::Error),
    /// The proxy answered another byte than [`HAND_OVER`](crate::HAND_OVER), or closed the
    /// connection with no answer.
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
    /// The listeners on the call's loopback of its `tcp` host grants (relayed to the host's
    /// same address and port).
    pub tcp: Vec<TcpListener>,
}

/// Hands `socks` to the call's proxy at `proxy`, once (see [`crate`]), and waits
/// up to `wait` for the proxy to say it took them; the sockets (our copies) are closed when
/// this returns, either way. From then on the proxy accepts on the listeners and answers on
/// the DNS socket itself: nothing of the call's traffic passes through the caller.
pub fn hand_over(proxy: &Path, socks: Sockets, wait: Duration) -> Result<(), HandOverError> {
    let mut u = send(proxy, socks, wait)?;
    u.set_read_timeout(Some(wait))
        .map_err(|source| HandOverError::Timeout {
            path: proxy.to_path_buf(),
            source,
        })?;
    let mut b = [0u8];
    loop {
        if let Some(r) = answer(u.read(&mut b), b[0]) {
            return r;
        }
    }
}

/// The first half of [`hand_over`]: connects to the proxy at `proxy` and sends `socks` in
/// one message (writes bounded by `wait`); our copies are closed when this returns. The
/// connection is returned for the answer, which [`answer`] reads.
pub fn send(proxy: &Path, socks: Sockets, wait: Duration) -> Result<UnixStream, HandOverError> {
    use crate::Role;
    let mut list: Vec<(Role, BorrowedFd<'_>)> = Vec::new();
    if let Some(l) = &socks.relay {
        list.push((Role::Relay, l.as_fd()));
    }
    if let Some(u) = &socks.dns {
        list.push((Role::Dns, u.as_fd()));
    }
    list.extend(socks.synthetic.iter().map(|l| (Role::Synthetic, l.as_fd())));
    list.extend(socks.tcp.iter().map(|l| (Role::Tcp, l.as_fd())));
    if list.is_empty() {
        return Err(HandOverError::Nothing);
    }
    if list.len() > crate::MAX_HANDED {
        return Err(HandOverError::TooMany(list.len()));
    }
    let u = UnixStream::connect(proxy).map_err(|source| HandOverError::Connect {
        path: proxy.to_path_buf(),
        source,
    })?;
    u.set_write_timeout(Some(wait))
        .map_err(|source| HandOverError::Timeout {
            path: proxy.to_path_buf(),
            source,
        })?;
    crate::send_hand_over(u.as_fd(), &list).map_err(|source| HandOverError::Send {
        path: proxy.to_path_buf(),
        source,
    })?;
    Ok(u)
}

/// The proxy's answer from one read of its connection into `byte`: taken, refused (another
/// byte, or a close), or a read error (a timeout included); `None` when the read was
/// interrupted and is to be made again.
pub fn answer(read: io::Result<usize>, byte: u8) -> Option<Result<(), HandOverError>> {
    match read {
        Ok(1) if byte == crate::HAND_OVER => Some(Ok(())),
        Ok(_) => Some(Err(HandOverError::Refused)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
        Err(e) => Some(Err(HandOverError::NoAnswer(e))),
    }
}
