//! Handing a client's TCP connection from the in-namespace relay to the proxy over the
//! proxy's Unix socket (`SCM_RIGHTS`), so the proxy serves the client's socket itself and
//! no relay copies the tunnel's bytes.
//!
//! Protocol on the proxy socket: a connection whose first byte is [`PASS_FD`] carries, with
//! that byte and each later one (all [`PASS_FD`]), exactly one file descriptor: a connected
//! TCP socket (IPv4 or IPv6, stream, not listening). The proxy serves each as if the client
//! had connected to it: the same head, decision, TLS check, limits and accounting. Any other
//! first byte starts an ordinary HTTP proxy request on the Unix connection itself. Anything
//! else (no fd, several, not such a socket) ends the connection; the fds are closed unread.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys;

/// First byte of a connection that passes client sockets (never the start of an HTTP
/// request).
pub const PASS_FD: u8 = 0;

/// Most fds taken from one message (more are closed; the message is refused).
const MAX_FDS: usize = 4;

/// Send one byte `PASS_FD` with `fd` attached (blocking unless `sock` is non-blocking).
pub fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    sys::send_fd(sock, PASS_FD, fd)
}

/// Receive one byte and the fds that came with it (non-blocking: `WouldBlock` when nothing
/// is there). `Ok(None)` at EOF.
pub(crate) fn recv_byte(sock: RawFd) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    let mut byte = [0u8];
    // Every fd received is owned from here on, so each is closed whatever happens next.
    let (n, fds, truncated) = sys::recv_fds::<MAX_FDS>(sock, &mut byte)?;
    if n == 0 {
        return Ok(None);
    }
    if truncated {
        // More fds than MAX_FDS (the rest closed by the kernel): refused; ours close here.
        return Err(io::Error::new(io::ErrorKind::InvalidData, "too many fds"));
    }
    Ok(Some((byte[0], fds)))
}

/// Whether `fd` is a connected TCP (IPv4/IPv6) stream socket, not listening: the only kind
/// of fd the proxy serves as a client.
pub(crate) fn is_client_socket(fd: &OwnedFd) -> bool {
    let raw = fd.as_raw_fd();
    if !sys::is_socket(raw) {
        return false;
    }
    let stream = sys::getsockopt_int(raw, libc::SO_TYPE) == Some(libc::SOCK_STREAM);
    let inet = matches!(
        sys::getsockopt_int(raw, libc::SO_DOMAIN),
        Some(libc::AF_INET | libc::AF_INET6)
    );
    let tcp = sys::getsockopt_int(raw, libc::SO_PROTOCOL) == Some(libc::IPPROTO_TCP);
    let listening = sys::getsockopt_int(raw, libc::SO_ACCEPTCONN) != Some(0);
    let connected = sys::is_connected(raw);
    stream && inet && tcp && !listening && connected
}
