//! Sockets handed to the proxy over its Unix socket (`SCM_RIGHTS`).
//!
//! **Hand-over** (what the launcher's init does, once, before the line exists): the init binds
//! the call's sockets inside the call's network namespace and sends them, listening, in one
//! message: the bytes `[HAND_OVER, n, role_1, ..., role_n]` with the `n` fds attached (1 to
//! [`MAX_HANDED`]; each role a [`Role`] byte). The proxy takes the first hand-over it ever
//! gets and no other; it checks every fd against its role (a listening TCP socket for
//! [`Role::Relay`] and [`Role::Synthetic`], a bound, unconnected UDP socket for [`Role::Dns`];
//! IPv4 or IPv6; at most one relay and one DNS socket), then serves them itself and answers
//! the one byte [`HAND_OVER`]. Anything else ends the connection with no answer, every fd
//! closed unread.
//!
//! Any other first byte starts an ordinary HTTP proxy request on the Unix connection itself
//! (an fd sent with it is closed unread).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys;

/// First byte of the hand-over of the namespace's sockets, and the proxy's answer when it
/// took them (never the start of an HTTP request).
pub const HAND_OVER: u8 = 1;

/// Most sockets in one hand-over: the relay, the DNS socket, port 443 and the 64 ports a
/// plan may add, with room to spare.
pub const MAX_HANDED: usize = 80;

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
}

impl Role {
    /// The role's byte in a hand-over.
    pub fn byte(self) -> u8 {
        match self {
            Role::Relay => b'r',
            Role::Synthetic => b's',
            Role::Dns => b'd',
        }
    }

    /// The role of a hand-over byte.
    pub fn from_byte(b: u8) -> Option<Role> {
        match b {
            b'r' => Some(Role::Relay),
            b's' => Some(Role::Synthetic),
            b'd' => Some(Role::Dns),
            _ => None,
        }
    }
}

/// The bytes of a hand-over of sockets with these roles: `[HAND_OVER, n, role...]`.
pub fn hand_over_bytes(roles: &[Role]) -> Vec<u8> {
    let mut b = vec![HAND_OVER, roles.len() as u8];
    b.extend(roles.iter().map(|r| r.byte()));
    b
}

/// Send `bytes` on `sock` with `fds` attached to the first of them (`SCM_RIGHTS`, at most
/// [`MAX_HANDED`]; blocking unless `sock` is non-blocking). `InvalidInput` for no bytes or
/// too many fds.
pub fn send_fds(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let n = sys::send_with_fds::<MAX_HANDED>(sock, bytes, fds)?;
    let mut rest = &bytes[n..];
    while !rest.is_empty() {
        match sys::send_with_fds::<0>(sock, rest, &[]) {
            Ok(k) => rest = &rest[k..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Send a hand-over on `sock`: the bytes of [`hand_over_bytes`] with every fd attached.
/// `InvalidInput` when there is no fd or more than [`MAX_HANDED`].
pub fn send_hand_over(sock: RawFd, socks: &[(Role, RawFd)]) -> io::Result<()> {
    if socks.is_empty() {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let roles: Vec<Role> = socks.iter().map(|s| s.0).collect();
    let fds: Vec<RawFd> = socks.iter().map(|s| s.1).collect();
    send_fds(sock, &hand_over_bytes(&roles), &fds)
}

/// Receive one byte and the fds that came with it (on a non-blocking socket: `WouldBlock`
/// when nothing is there). `Ok(None)` at EOF.
pub fn recv_byte(sock: RawFd) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    let mut byte = [0u8];
    // Every fd received is owned from here on, so each is closed whatever happens next.
    let (n, fds, truncated) = sys::recv_fds::<MAX_HANDED>(sock, &mut byte)?;
    if n == 0 {
        return Ok(None);
    }
    if truncated {
        // More fds than MAX_HANDED (the rest closed by the kernel): refused; ours close here.
        return Err(io::Error::new(io::ErrorKind::InvalidData, "too many fds"));
    }
    Ok(Some((byte[0], fds)))
}

fn inet(raw: RawFd, ty: libc::c_int, proto: libc::c_int) -> bool {
    sys::is_socket(raw)
        && sys::getsockopt_int(raw, libc::SO_TYPE) == Some(ty)
        && matches!(
            sys::getsockopt_int(raw, libc::SO_DOMAIN),
            Some(libc::AF_INET | libc::AF_INET6)
        )
        && sys::getsockopt_int(raw, libc::SO_PROTOCOL) == Some(proto)
}

/// Whether `fd` is what a socket of `role` must be: a listening TCP (IPv4/IPv6) socket for
/// the relay and the synthetic listeners, a bound, unconnected UDP (IPv4/IPv6) socket for
/// DNS.
pub(crate) fn fits(role: Role, fd: &OwnedFd) -> bool {
    let raw = fd.as_raw_fd();
    match role {
        Role::Relay | Role::Synthetic => {
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
pub(crate) fn sort_hand_over(roles: &[u8], fds: Vec<OwnedFd>) -> Option<Vec<(Role, OwnedFd)>> {
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
}
