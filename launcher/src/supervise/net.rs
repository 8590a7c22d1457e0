//! Connecting and sending to path sockets, made by the init on the caller's behalf.
//!
//! A Unix socket bound on the host is a way out of the call whoever bound it (a daemon in
//! another network namespace, a container's socket, one re-created during the call), and
//! the mount view cannot hide every one. So `connect`, `sendto` with an address, `sendmsg`
//! and `sendmmsg` are supervised: the init reads the address once, resolves a path socket
//! as the kernel would (from the caller's cwd, links followed), allows it only inside the
//! call's own places (its writable roots, its private `/tmp` and `/dev`) or where a grant
//! names it, and then makes the call itself on a duplicate of the caller's socket
//! (`pidfd_getfd`), addressing the socket by the inode it checked (`/proc/self/fd/N` of an
//! `O_PATH` fd: a link or a rename swapped in afterwards changes nothing). `sendmsg` is
//! made from copies of the caller's data and control messages (its `SCM_RIGHTS` fds
//! duplicated into the init), so no second read of its memory decides anything. Abstract
//! sockets are the call's own network namespace's (and Landlock's scope keeps them there).
//!
//! A TCP connect to the call's own loopback (`127.0.0.1` or `::1`, also as
//! `::ffff:127.0.0.1`) that is refused (nothing of the call listens on that port) is reported
//! once per port (`loopback_refused PORT`) when the call has a network namespace of its own
//! (not on the host's network: `net_view`, `open_network`): its loopback is its own, and the host's
//! port there needs a `tcp` host grant. The caller gets exactly what the connect gave (a
//! non-blocking one still gets `EINPROGRESS`: its refusal is seen, without changing the
//! socket, in the TCP state the kernel has already set when the connect returns, as it does
//! on loopback). A connect to another address of 127/8 is not reported: no grant opens it.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::ops::{At, Call, Reply, Target, errno, result};
use super::sys;

/// The longest address the kernel takes (`sizeof(struct sockaddr_storage)`).
const MAX_ADDR: usize = 128;
/// The most data copied for one message: a stream socket gets a short count past it (the
/// caller sends the rest), a datagram larger than this fails with EMSGSIZE.
const MAX_DATA: usize = 1 << 20;
/// The most control bytes copied for one message.
const MAX_CONTROL: usize = 4096;
/// The most messages of one `sendmmsg` (the kernel's UIO_MAXIOV).
const MAX_MMSG: u32 = 1024;
/// The most iovecs of one message (the kernel's UIO_MAXIOV).
const MAX_IOV: u64 = 1024;

/// Where a contained call may reach a path socket.
#[derive(Debug, Clone, Default)]
pub struct SocketRules {
    /// The call's own places: a socket below one is the call's or one it may make.
    dirs: Vec<Vec<u8>>,
    /// Sockets a grant names (the bus, a desktop, `socket=PATH`).
    granted: Vec<Vec<u8>>,
    /// The loopback is the call's own (a network namespace of its own): refused connects
    /// there are reported.
    own_loopback: bool,
}

impl SocketRules {
    /// The rules of a call: sockets below the call's own places `dirs`, and the `granted`
    /// sockets themselves.
    pub fn new(dirs: &[String], granted: &[String]) -> SocketRules {
        use super::rules::trim;
        SocketRules {
            dirs: dirs.iter().map(|d| trim(d)).collect(),
            granted: granted.iter().map(|g| trim(g)).collect(),
            own_loopback: false,
        }
    }

    /// The same rules, with the call's loopback its own (`yes`: refused connects there are
    /// reported) or the host's (not: nothing is).
    pub fn own_loopback(mut self, yes: bool) -> SocketRules {
        self.own_loopback = yes;
        self
    }

    /// Whether a socket at the absolute path `p` (links resolved) may be reached.
    pub fn allows(&self, p: &[u8]) -> bool {
        self.granted.iter().any(|g| g.as_slice() == p)
            || self.dirs.iter().any(|d| super::rules::under(p, d))
    }
}

/// An address the init can use: the caller's bytes, or for a path socket `/proc/self/fd/N`
/// of the inode checked (kept open in `_inode` while it is used).
struct Route {
    addr: Vec<u8>,
    _inode: Option<OwnedFd>,
}

/// `TCP_CLOSE`, the state of a TCP socket whose connect was refused.
const TCP_CLOSE: u8 = 7;

/// The port of an address of the call's own loopback a `tcp` grant would name: `127.0.0.1`
/// (also as `::ffff:127.0.0.1`) or `::1`, port not 0, from a `sockaddr_in` or
/// `sockaddr_in6` as the caller gave it; `None` for anything else.
fn loopback_port(raw: &[u8]) -> Option<u16> {
    let family = i32::from(u16::from_ne_bytes([*raw.first()?, *raw.get(1)?]));
    let port = u16::from_be_bytes([*raw.get(2)?, *raw.get(3)?]);
    let lo = match family {
        libc::AF_INET => raw.get(4..8)? == [127, 0, 0, 1],
        libc::AF_INET6 => {
            let a: [u8; 16] = raw.get(8..24)?.try_into().ok()?;
            let ip = std::net::Ipv6Addr::from(a);
            ip.is_loopback() || ip.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST)
        }
        _ => false,
    };
    (lo && port != 0).then_some(port)
}

impl Call<'_> {
    /// The caller's address of `len` bytes at `addr`.
    fn sockaddr(&self, addr: u64, len: u32) -> Result<Vec<u8>, i32> {
        let len = len as usize;
        if len > MAX_ADDR {
            return Err(libc::EINVAL);
        }
        let mut b = vec![0u8; len];
        if len > 0 && sys::read_mem(self.tid(), addr, &mut b).map_err(|_| libc::EFAULT)? != len {
            return Err(libc::EFAULT);
        }
        Ok(b)
    }

    /// The address to use from the init for the caller's `raw` one: a path socket is
    /// resolved, checked and named by its inode; anything else is used as it is.
    fn route(&mut self, what: &'static str, raw: Vec<u8>) -> Result<Route, i32> {
        let family = raw
            .get(..2)
            .map(|f| u16::from_ne_bytes([f[0], f[1]]) as i32);
        // Unnamed and abstract (`sun_path[0] == 0`) Unix addresses, and other families.
        if family != Some(libc::AF_UNIX) || raw.len() <= 2 || raw[2] == 0 {
            return Ok(Route {
                addr: raw,
                _inode: None,
            });
        }
        let path = &raw[2..];
        let path = &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())];
        let at: At = match self.resolve(libc::AT_FDCWD, path, true)? {
            Target::At(at) => at,
            // The caller's own fd through /proc: not a socket's name.
            Target::ProcFd(_) => return Err(libc::ECONNREFUSED),
        };
        if !self.sup.sockets.allows(&at.path) {
            self.sup.refuse_socket(what, &at.path);
            return Err(libc::EACCES);
        }
        let inode = sys::openat(
            at.dir.as_fd(),
            &at.name,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .map_err(errno)?;
        let st = sys::fstat(inode.as_fd()).map_err(errno)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err(libc::ECONNREFUSED);
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "AF_UNIX is 1, a sa_family_t (u16)"
        )]
        let mut addr = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes().to_vec();
        addr.extend_from_slice(format!("/proc/self/fd/{}", inode.as_raw_fd()).as_bytes());
        addr.push(0);
        Ok(Route {
            addr,
            _inode: Some(inode),
        })
    }

    pub(super) fn connect(&mut self, fd: i32, addr: u64, len: u32) -> Reply {
        let raw = match self.sockaddr(addr, len) {
            Ok(r) => r,
            Err(e) => return Reply::Err(e),
        };
        // Only a loopback of the call's own: on the host's network a refusal is the host's.
        let loopback = if self.sup.sockets.own_loopback {
            loopback_port(&raw)
        } else {
            None
        };
        if !self.valid() {
            return Reply::None;
        }
        let sock = match self.fd(fd) {
            Ok(s) => s,
            Err(e) => return Reply::Err(e),
        };
        let route = match self.route("connect", raw) {
            Ok(r) => r,
            Err(e) => return Reply::Err(e),
        };
        let r = sys::connect(sock.as_fd(), &route.addr);
        if let Some(port) = loopback {
            let refused = match &r {
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => true,
                // A non-blocking connect: on loopback the kernel has its answer by now.
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                    sys::tcp_state(sock.as_fd()).is_ok_and(|s| s == TCP_CLOSE)
                }
                _ => false,
            };
            if refused {
                self.sup.refuse_loopback(port);
            }
        }
        result(r)
    }

    pub(super) fn sendto(
        &mut self,
        fd: i32,
        buf: u64,
        len: usize,
        flags: i32,
        addr: u64,
        alen: u32,
    ) -> Reply {
        let raw = match self.sockaddr(addr, alen) {
            Ok(r) => r,
            Err(e) => return Reply::Err(e),
        };
        let iov = [(buf, len as u64)];
        self.send_one(
            fd,
            if alen == 0 { None } else { Some(raw) },
            &iov,
            &[],
            flags,
        )
    }

    pub(super) fn sendmsg(&mut self, fd: i32, msg: u64, flags: i32) -> Reply {
        match self.message(msg) {
            Ok((name, iov, control)) => self.send_one(fd, name, &iov, &control, flags),
            Err(e) => Reply::Err(e),
        }
    }

    pub(super) fn sendmmsg(&mut self, fd: i32, vec: u64, vlen: u32, flags: i32) -> Reply {
        let vlen = vlen.min(MAX_MMSG);
        let mut sent = 0i64;
        for i in 0..u64::from(vlen) {
            let at = vec + i * sys::MMSGHDR_SIZE as u64;
            let r = match self.message(at) {
                Ok((name, iov, control)) => self.send_one(fd, name, &iov, &control, flags),
                Err(e) => Reply::Err(e),
            };
            match r {
                Reply::Val(n) => {
                    // `msg_len` follows the msghdr in a `struct mmsghdr`.
                    let len_at = at + sys::MSGHDR_SIZE as u64;
                    // The bytes sent: at most MAX_DATA, always a u32.
                    let n = u32::try_from(n).unwrap_or(u32::MAX);
                    let _ = sys::write_mem(self.tid(), len_at, &n.to_ne_bytes());
                    sent += 1;
                }
                // Like the kernel: the count so far, else the first error.
                Reply::Err(e) if sent == 0 => return Reply::Err(e),
                Reply::None if sent == 0 => return Reply::None,
                _ => break,
            }
        }
        Reply::Val(sent)
    }

    /// The caller's message at `msg`: its address, iovecs and control bytes.
    #[allow(clippy::type_complexity)]
    fn message(&self, msg: u64) -> Result<(Option<Vec<u8>>, Vec<(u64, u64)>, Vec<u8>), i32> {
        let h = sys::read_msghdr(self.tid(), msg).map_err(|_| libc::EFAULT)?;
        let name = if h.name != 0 && h.namelen > 0 {
            Some(self.sockaddr(h.name, h.namelen)?)
        } else {
            None
        };
        if h.iovlen > MAX_IOV {
            return Err(libc::EMSGSIZE);
        }
        let iovlen = usize::try_from(h.iovlen).map_err(|_| libc::EMSGSIZE)?;
        let mut raw = vec![0u8; iovlen * 16];
        if !raw.is_empty()
            && sys::read_mem(self.tid(), h.iov, &mut raw).map_err(|_| libc::EFAULT)? != raw.len()
        {
            return Err(libc::EFAULT);
        }
        let iov = raw
            .chunks_exact(16)
            .map(|c| {
                let a = u64::from_ne_bytes(c[..8].try_into().expect("8 bytes"));
                let l = u64::from_ne_bytes(c[8..].try_into().expect("8 bytes"));
                (a, l)
            })
            .collect();
        // Past usize is past MAX_CONTROL.
        let clen = usize::try_from(h.controllen).unwrap_or(usize::MAX);
        if clen > MAX_CONTROL {
            return Err(libc::ENOBUFS);
        }
        let mut control = vec![0u8; if h.control == 0 { 0 } else { clen }];
        if !control.is_empty()
            && sys::read_mem(self.tid(), h.control, &mut control).map_err(|_| libc::EFAULT)? != clen
        {
            return Err(libc::EFAULT);
        }
        Ok((name, iov, control))
    }

    /// Sends one message of the caller's, from copies: its data from the iovecs `iov`, its
    /// control bytes with the caller's `SCM_RIGHTS` fds replaced by duplicates.
    fn send_one(
        &mut self,
        fd: i32,
        name: Option<Vec<u8>>,
        iov: &[(u64, u64)],
        control: &[u8],
        flags: i32,
    ) -> Reply {
        if !self.valid() {
            return Reply::None;
        }
        let sock = match self.fd(fd) {
            Ok(s) => s,
            Err(e) => return Reply::Err(e),
        };
        let route = match name.map(|n| self.route("send", n)).transpose() {
            Ok(r) => r,
            Err(e) => return Reply::Err(e),
        };
        let total: u64 = iov.iter().map(|&(_, l)| l).sum();
        // Only a stream socket may take part of a message (asked only then: a system call).
        if total > MAX_DATA as u64
            && !sys::socket_type(sock.as_fd()).is_ok_and(|t| t == libc::SOCK_STREAM)
        {
            return Reply::Err(libc::EMSGSIZE);
        }
        let mut data = vec![0u8; usize::try_from(total).map_or(MAX_DATA, |t| t.min(MAX_DATA))];
        let mut off = 0usize;
        for &(a, l) in iov {
            if off == data.len() {
                break;
            }
            let n = usize::try_from(l)
                .unwrap_or(usize::MAX)
                .min(data.len() - off);
            if n == 0 {
                continue;
            }
            match sys::read_mem(self.tid(), a, &mut data[off..off + n]) {
                Ok(got) if got == n => off += n,
                _ => return Reply::Err(libc::EFAULT),
            }
        }
        let mut control = control.to_vec();
        let _dups = match self.own_control(&mut control) {
            Ok(d) => d,
            Err(e) => return Reply::Err(e),
        };
        match sys::sendmsg(
            sock.as_fd(),
            route.as_ref().map(|r| r.addr.as_slice()),
            &data,
            &mut control,
            flags,
        ) {
            // At most MAX_DATA bytes: always an i64.
            Ok(n) => Reply::Val(i64::try_from(n).unwrap_or(i64::MAX)),
            Err(e) => {
                let e = errno(e);
                if e == libc::EPIPE && flags & libc::MSG_NOSIGNAL == 0 {
                    if let Some(pid) = super::ops::tgid(self.tid()) {
                        sys::sigpipe(pid, self.tid());
                    }
                }
                Reply::Err(e)
            }
        }
    }

    /// Makes the caller's control messages the init's: the caller's fds in `SCM_RIGHTS`
    /// replaced by duplicates of the init's (returned: they stay open until the message is
    /// sent), and the caller's pid in `SCM_CREDENTIALS` by the init's. The kernel lets a
    /// sender name only its own pid (GLib's D-Bus clients send their credentials), so the
    /// caller may name only its own too, as the kernel would have required of it, and the
    /// receiver then sees the init's pid: that of the call's process that sent it. (Uid and
    /// gid are the same for every process of the call: they are left as they are, and the
    /// kernel checks them against the init's.)
    fn own_control(&self, control: &mut [u8]) -> Result<Vec<OwnedFd>, i32> {
        const HDR: usize = std::mem::size_of::<libc::cmsghdr>();
        let mut dups = Vec::new();
        let mut at = 0usize;
        while at + HDR <= control.len() {
            let len = usize::from_ne_bytes(control[at..at + 8].try_into().expect("8 bytes"));
            let level = i32::from_ne_bytes(control[at + 8..at + 12].try_into().expect("4"));
            let kind = i32::from_ne_bytes(control[at + 12..at + 16].try_into().expect("4"));
            if len < HDR || at + len > control.len() {
                return Err(libc::EINVAL);
            }
            if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
                for f in control[at + HDR..at + len].chunks_exact_mut(4) {
                    let theirs = i32::from_ne_bytes((&*f).try_into().expect("4 bytes"));
                    let mine = self.fd(theirs)?;
                    f.copy_from_slice(&mine.as_raw_fd().to_ne_bytes());
                    dups.push(mine);
                }
            }
            if level == libc::SOL_SOCKET && kind == libc::SCM_CREDENTIALS && len >= HDR + 12 {
                let claimed =
                    i32::from_ne_bytes(control[at + HDR..at + HDR + 4].try_into().expect("4"));
                if super::ops::tgid(self.tid()) != Some(claimed) {
                    return Err(libc::EPERM);
                }
                let me = crate::sys::getpid();
                control[at + HDR..at + HDR + 4].copy_from_slice(&me.to_ne_bytes());
            }
            // The next header, aligned as CMSG_NXTHDR aligns it.
            at += (len + 7) & !7;
        }
        Ok(dups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address bytes of `a` as a caller passes them (`sockaddr_in`, `sockaddr_in6`).
    fn raw(a: std::net::SocketAddr) -> Vec<u8> {
        let fam = |f: i32| u16::try_from(f).unwrap().to_ne_bytes();
        match a {
            std::net::SocketAddr::V4(v) => {
                let mut b = fam(libc::AF_INET).to_vec();
                b.extend_from_slice(&v.port().to_be_bytes());
                b.extend_from_slice(&v.ip().octets());
                b.extend_from_slice(&[0; 8]);
                b
            }
            std::net::SocketAddr::V6(v) => {
                let mut b = fam(libc::AF_INET6).to_vec();
                b.extend_from_slice(&v.port().to_be_bytes());
                b.extend_from_slice(&[0; 4]);
                b.extend_from_slice(&v.ip().octets());
                b.extend_from_slice(&[0; 4]);
                b
            }
        }
    }

    #[test]
    fn the_loopback_ports_a_tcp_grant_would_open() {
        let port = |a: &str| loopback_port(&raw(a.parse().unwrap()));
        assert_eq!(port("127.0.0.1:5432"), Some(5432));
        assert_eq!(port("[::1]:6379"), Some(6379));
        assert_eq!(port("[::ffff:127.0.0.1]:80"), Some(80));
        assert_eq!(port("127.0.0.2:5432"), None);
        assert_eq!(port("127.0.0.1:0"), None);
        assert_eq!(port("10.0.0.1:5432"), None);
        assert_eq!(port("[::2]:5432"), None);
        // Short or other families: nothing.
        assert_eq!(
            loopback_port(&raw("127.0.0.1:1".parse().unwrap())[..6]),
            None
        );
        assert_eq!(loopback_port(&[]), None);
        let mut unix = u16::try_from(libc::AF_UNIX).unwrap().to_ne_bytes().to_vec();
        unix.extend_from_slice(b"/tmp/s\0");
        assert_eq!(loopback_port(&unix), None);
    }

    #[test]
    fn own_places_and_grants() {
        let r = SocketRules::new(
            &["/home/u/proj".into(), "/tmp".into()],
            &["/run/user/1/bus".into()],
        );
        assert!(r.allows(b"/home/u/proj/s.sock"));
        assert!(r.allows(b"/tmp/x/y"));
        assert!(r.allows(b"/run/user/1/bus"));
        assert!(!r.allows(b"/run/user/1/bus2"));
        assert!(!r.allows(b"/home/u/projx/s"));
        assert!(!r.allows(b"/run/docker.sock"));
        assert!(!SocketRules::default().allows(b"/tmp/s"));
    }
}
