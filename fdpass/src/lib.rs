//! The socket hand-over of the efr sandbox: fds sent and received over a Unix socket with
//! `SCM_RIGHTS` (blocking, libc only; no tokio), shared by the launcher (its init hands the
//! call's sockets to the proxy, its terminal init sends the pty master to the launcher) and
//! the proxy (which receives them).
//!
//! **Hand-over** (what the launcher's init does, once, before the line exists): the init binds
//! the call's sockets inside the call's network namespace and sends them, listening, in one
//! message: the bytes `[HAND_OVER, n, role_1, ..., role_n]` with the `n` fds attached (1 to
//! [`MAX_HANDED`]; each role a [`Role`] byte). The proxy takes the first hand-over it ever
//! gets and no other; it checks every fd against its role ([`sort_hand_over`]: a listening
//! TCP socket for [`Role::Relay`], [`Role::Synthetic`] and [`Role::Tcp`], a bound, unconnected UDP socket
//! for [`Role::Dns`]; IPv4 or IPv6; at most one relay and one DNS socket), then serves them
//! itself and answers the one byte [`HAND_OVER`]. Anything else ends the connection with no
//! answer, every fd closed unread.
//!
//! Any other first byte starts an ordinary HTTP proxy request on the Unix connection itself
//! (an fd sent with it is closed unread).
//!
//! Fds go out borrowed (the sender keeps its copy and closes it when it likes) and come in
//! owned ([`OwnedFd`], each owned the moment the kernel installs it, so none leaks).
//! [`inside`] is the init's side of the hand-over.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod inside;
mod sys;

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// First byte of the hand-over of the namespace's sockets, and the proxy's answer when it
/// took them (never the start of an HTTP request).
pub const HAND_OVER: u8 = 1;

/// Most sockets in one hand-over: the relay, the DNS socket, port 443, the 64 ports a
/// plan may add and the two listeners (`127.0.0.1`, `::1`) of each of at most 16 `tcp`
/// host grants, with room to spare.
pub const MAX_HANDED: usize = 112;

/// What a handed socket is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The TCP listener the proxy variables name: its clients send HTTP proxy requests.
    Relay,
    /// A TCP listener for connections to synthetic addresses: each is a `CONNECT` to the name
    /// the address was given to, on the port dialled.
    Synthetic,
    /// The UDP socket of the call's DNS server.
    Dns,
    /// A TCP listener on the call's own loopback (`127.0.0.1:PORT`, `[::1]:PORT`) for a
    /// `tcp` host grant: each connection is relayed to the host's same address and port.
    Tcp,
}

impl Role {
    /// The role's byte in a hand-over.
    pub fn byte(self) -> u8 {
        match self {
            Role::Relay => b'r',
            Role::Synthetic => b's',
            Role::Dns => b'd',
            Role::Tcp => b't',
        }
    }

    /// The role of a hand-over byte.
    pub fn from_byte(b: u8) -> Option<Role> {
        match b {
            b'r' => Some(Role::Relay),
            b's' => Some(Role::Synthetic),
            b'd' => Some(Role::Dns),
            b't' => Some(Role::Tcp),
            _ => None,
        }
    }
}

/// Why fds could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Nothing to send the fds with (they travel with the first byte).
    #[error("sending fds: no bytes to send them with")]
    NoBytes,
    /// A hand-over with no socket.
    #[error("sending fds: no fd to hand over")]
    NoFds,
    /// More fds than one message carries here.
    #[error("sending fds: {0} fds, at most {MAX_HANDED}")]
    TooMany(usize),
    /// `sendmsg` failed (or sent nothing).
    #[error("sending fds: {0}")]
    Io(#[source] io::Error),
}

/// Why a message with fds could not be received.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// `recvmsg` failed (`WouldBlock` when nothing is there on a non-blocking socket).
    #[error("receiving fds: {0}")]
    Io(#[source] io::Error),
    /// More fds came than [`MAX_HANDED`] (the kernel closed the rest, ours were closed).
    #[error("receiving fds: more than {MAX_HANDED} fds in one message")]
    TooMany,
}

impl RecvError {
    /// Whether nothing was there yet (`WouldBlock`) or the call was interrupted: try again
    /// when the socket is readable.
    pub fn is_retry(&self) -> bool {
        matches!(self, RecvError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted))
    }
}

impl From<RecvError> for io::Error {
    fn from(e: RecvError) -> io::Error {
        match e {
            RecvError::Io(e) => e,
            RecvError::TooMany => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
        }
    }
}

/// The bytes of a hand-over of sockets with these roles: `[HAND_OVER, n, role...]`.
pub fn hand_over_bytes(roles: &[Role]) -> Vec<u8> {
    let n = u8::try_from(roles.len()).unwrap_or(u8::MAX);
    let mut b = vec![HAND_OVER, n];
    b.extend(roles.iter().map(|r| r.byte()));
    b
}

/// Send `bytes` on `sock` with `fds` attached to the first of them (`SCM_RIGHTS`, at most
/// [`MAX_HANDED`]; blocking unless `sock` is non-blocking). The fds stay ours: the receiver
/// gets its own copies.
pub fn send_fds(
    sock: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
) -> Result<(), SendError> {
    if bytes.is_empty() {
        return Err(SendError::NoBytes);
    }
    if fds.len() > MAX_HANDED {
        return Err(SendError::TooMany(fds.len()));
    }
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let n = sys::send_with_fds::<MAX_HANDED>(sock, bytes, &raw).map_err(SendError::Io)?;
    let mut rest = &bytes[n..];
    while !rest.is_empty() {
        match sys::send_with_fds::<0>(sock, rest, &[]) {
            Ok(k) => rest = &rest[k..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SendError::Io(e)),
        }
    }
    Ok(())
}

/// Send a hand-over on `sock`: the bytes of [`hand_over_bytes`] with every fd attached.
pub fn send_hand_over(
    sock: BorrowedFd<'_>,
    socks: &[(Role, BorrowedFd<'_>)],
) -> Result<(), SendError> {
    if socks.is_empty() {
        return Err(SendError::NoFds);
    }
    if socks.len() > MAX_HANDED {
        return Err(SendError::TooMany(socks.len()));
    }
    let roles: Vec<Role> = socks.iter().map(|s| s.0).collect();
    let fds: Vec<BorrowedFd<'_>> = socks.iter().map(|s| s.1).collect();
    send_fds(sock, &hand_over_bytes(&roles), &fds)
}

/// Receive one byte and the fds that came with it (never blocks: on a socket with nothing
/// there, [`RecvError::is_retry`]). `Ok(None)` at EOF.
pub fn recv_byte(sock: BorrowedFd<'_>) -> Result<Option<(u8, Vec<OwnedFd>)>, RecvError> {
    let mut byte = [0u8];
    // Every fd received is owned from here on, so each is closed whatever happens next.
    let (n, fds, truncated) =
        sys::recv_fds::<MAX_HANDED>(sock, &mut byte).map_err(RecvError::Io)?;
    if n == 0 {
        return Ok(None);
    }
    if truncated {
        // More fds than MAX_HANDED (the rest closed by the kernel): refused; ours close here.
        return Err(RecvError::TooMany);
    }
    Ok(Some((byte[0], fds)))
}

/// Receive one message into `buf` and the fds that came with it (never blocks: on a socket
/// with nothing there, [`RecvError::is_retry`]): the bytes read and the fds. `Ok(None)` at
/// EOF. On a `SOCK_SEQPACKET` socket each call is one message, whatever is past `buf`
/// of it discarded (as [`recv_byte`] keeps one byte).
pub fn recv_msg(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> Result<Option<(usize, Vec<OwnedFd>)>, RecvError> {
    let (n, fds, truncated) = sys::recv_fds::<MAX_HANDED>(sock, buf).map_err(RecvError::Io)?;
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    if truncated {
        return Err(RecvError::TooMany);
    }
    Ok(Some((n, fds)))
}

fn inet(raw: BorrowedFd<'_>, ty: libc::c_int, proto: libc::c_int) -> bool {
    sys::is_socket(raw)
        && sys::getsockopt_int(raw, libc::SO_TYPE) == Some(ty)
        && matches!(
            sys::getsockopt_int(raw, libc::SO_DOMAIN),
            Some(libc::AF_INET | libc::AF_INET6)
        )
        && sys::getsockopt_int(raw, libc::SO_PROTOCOL) == Some(proto)
}

/// Whether `fd` is what a socket of `role` must be: a listening TCP (IPv4/IPv6) socket for
/// the relay, the synthetic listeners and the `tcp` grants' listeners, a bound, unconnected
/// UDP (IPv4/IPv6) socket for DNS.
pub fn fits(role: Role, fd: &OwnedFd) -> bool {
    let raw = fd.as_fd();
    match role {
        Role::Relay | Role::Synthetic | Role::Tcp => {
            inet(raw, libc::SOCK_STREAM, libc::IPPROTO_TCP)
                && sys::getsockopt_int(raw, libc::SO_ACCEPTCONN) == Some(1)
        }
        Role::Dns => {
            inet(raw, libc::SOCK_DGRAM, libc::IPPROTO_UDP)
                && sys::local_port(raw).is_some_and(|p| p != 0)
                && !sys::is_connected(raw)
        }
    }
}

/// The sockets of a hand-over, each checked against its role (see the module docs); `None`
/// (every fd closed) when any is not what its role needs, the counts differ, or there is
/// more than one relay or DNS socket.
pub fn sort_hand_over(roles: &[u8], fds: Vec<OwnedFd>) -> Option<Vec<(Role, OwnedFd)>> {
    if roles.is_empty() || roles.len() != fds.len() || roles.len() > MAX_HANDED {
        return None;
    }
    let roles: Vec<Role> = roles
        .iter()
        .map(|&b| Role::from_byte(b))
        .collect::<Option<_>>()?;
    for one in [Role::Relay, Role::Dns] {
        if roles.iter().filter(|&&r| r == one).count() > 1 {
            return None;
        }
    }
    let out: Vec<(Role, OwnedFd)> = roles.into_iter().zip(fds).collect();
    out.iter().all(|(r, fd)| fits(*r, fd)).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};

    fn fd<T: Into<OwnedFd>>(x: T) -> OwnedFd {
        x.into()
    }

    #[test]
    fn roles_are_checked() {
        let l = || fd(TcpListener::bind("127.0.0.1:0").unwrap());
        let u = || fd(UdpSocket::bind("127.0.0.1:0").unwrap());
        let l6 = TcpListener::bind("[::1]:0").map(fd);
        assert!(fits(Role::Relay, &l()));
        assert!(fits(Role::Synthetic, &l()));
        assert!(fits(Role::Tcp, &l()));
        assert!(!fits(Role::Tcp, &u()));
        if let Ok(l6) = &l6 {
            assert!(fits(Role::Synthetic, l6));
        }
        assert!(fits(Role::Dns, &u()));
        assert!(!fits(Role::Dns, &l()));
        assert!(!fits(Role::Relay, &u()));
        // A connected TCP socket is no listener; a connected UDP socket is no server.
        let srv = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(srv.local_addr().unwrap()).unwrap();
        assert!(!fits(Role::Relay, &fd(c)));
        let cu = UdpSocket::bind("127.0.0.1:0").unwrap();
        cu.connect("127.0.0.1:9").unwrap();
        assert!(!fits(Role::Dns, &fd(cu)));
        // A pipe, a Unix socket.
        let (r, _w) = std::io::pipe().unwrap();
        assert!(!fits(Role::Relay, &fd(r)));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(!fits(Role::Relay, &fd(a)));

        // Counts and kinds of a whole hand-over.
        assert!(sort_hand_over(b"rds", vec![l(), u(), l()]).is_some());
        assert!(sort_hand_over(b"ss", vec![l(), l()]).is_some());
        assert!(sort_hand_over(b"", vec![]).is_none());
        assert!(sort_hand_over(b"rs", vec![l()]).is_none());
        assert!(sort_hand_over(b"r", vec![l(), l()]).is_none());
        assert!(sort_hand_over(b"rr", vec![l(), l()]).is_none());
        assert!(sort_hand_over(b"dd", vec![u(), u()]).is_none());
        assert!(sort_hand_over(b"x", vec![l()]).is_none());
        assert!(sort_hand_over(b"rd", vec![l(), l()]).is_none());
        assert_eq!(hand_over_bytes(&[Role::Relay, Role::Dns]), b"\x01\x02rd");
    }

    #[test]
    fn fds_go_over_and_come_back_owned() {
        use std::io::{Read, Write};
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (mut r, w) = std::io::pipe().unwrap();
        let l = fd(TcpListener::bind("127.0.0.1:0").unwrap());
        send_fds(a.as_fd(), b"xyz", &[w.as_fd(), l.as_fd()]).unwrap();
        let (byte, fds) = recv_byte(b.as_fd()).unwrap().expect("a message");
        assert_eq!(byte, b'x');
        assert_eq!(fds.len(), 2);
        assert!(fits(Role::Relay, &fds[1]));
        // The received write end is the pipe's: what goes in comes out of our read end.
        let mut wr = std::fs::File::from(fds.into_iter().next().unwrap());
        drop(w);
        wr.write_all(b"through").unwrap();
        drop(wr);
        let mut got = String::new();
        r.read_to_string(&mut got).unwrap();
        assert_eq!(got, "through");
        // The rest of the bytes came without fds.
        let (byte, fds) = recv_byte(b.as_fd()).unwrap().unwrap();
        assert_eq!((byte, fds.len()), (b'y', 0));
    }

    #[test]
    fn nothing_there_eof_and_bad_sends_are_errors() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        // Nothing sent yet: a retry, never a block.
        let e = recv_byte(b.as_fd()).unwrap_err();
        assert!(e.is_retry(), "{e}");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::WouldBlock);
        assert!(matches!(
            send_fds(a.as_fd(), b"", &[]),
            Err(SendError::NoBytes)
        ));
        assert!(matches!(
            send_hand_over(a.as_fd(), &[]),
            Err(SendError::NoFds)
        ));
        let l = fd(TcpListener::bind("127.0.0.1:0").unwrap());
        let many = vec![l.as_fd(); MAX_HANDED + 1];
        let e = send_fds(a.as_fd(), b"x", &many).unwrap_err();
        assert!(
            matches!(e, SendError::TooMany(n) if n == MAX_HANDED + 1),
            "{e}"
        );
        assert_eq!(e.to_string(), "sending fds: 113 fds, at most 112");
        drop(a);
        assert!(recv_byte(b.as_fd()).unwrap().is_none());
        // A socket that is no socket: the error, not a panic.
        let (r, _w) = std::io::pipe().unwrap();
        assert!(send_fds(r.as_fd(), b"x", &[]).is_err());
        assert!(matches!(recv_byte(r.as_fd()), Err(RecvError::Io(_))));
    }

    #[test]
    fn more_fds_than_room_are_refused_and_closed() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let l = fd(TcpListener::bind("127.0.0.1:0").unwrap());
        let raw = vec![l.as_raw_fd(); MAX_HANDED + 5];
        sys::send_with_fds::<{ MAX_HANDED + 5 }>(a.as_fd(), b"x", &raw).unwrap();
        let e = recv_byte(b.as_fd()).unwrap_err();
        assert!(matches!(e, RecvError::TooMany), "{e}");
        assert!(!e.is_retry());
    }

    #[test]
    fn hand_over_bytes_name_each_role() {
        assert_eq!(
            hand_over_bytes(&[Role::Relay, Role::Synthetic, Role::Dns]),
            b"\x01\x03rsd"
        );
        for r in [Role::Relay, Role::Synthetic, Role::Dns, Role::Tcp] {
            assert_eq!(Role::from_byte(r.byte()), Some(r));
        }
        assert_eq!(Role::from_byte(b'x'), None);
    }
}
