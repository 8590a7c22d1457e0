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
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// First byte of a connection that passes client sockets (never the start of an HTTP
/// request).
pub const PASS_FD: u8 = 0;

/// Most fds taken from one message (more are closed; the message is refused).
const MAX_FDS: usize = 4;

/// A control message with room for `N` fds. On Linux the data of a `cmsghdr` starts right
/// after it (`CMSG_ALIGN(sizeof(struct cmsghdr)) == sizeof(struct cmsghdr)`), so this
/// `repr(C)` layout is what `CMSG_FIRSTHDR`/`CMSG_DATA` would walk.
#[repr(C)]
struct Cmsg<const N: usize> {
    hdr: libc::cmsghdr,
    fds: [RawFd; N],
}

impl<const N: usize> Cmsg<N> {
    fn new() -> Self {
        // SAFETY: both fields are plain integers (and padding): all-zero is valid.
        unsafe { zeroed() }
    }
}

/// Send one byte `PASS_FD` with `fd` attached (blocking unless `sock` is non-blocking).
pub fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [PASS_FD];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut ctl = Cmsg::<1>::new();
    ctl.hdr.cmsg_level = libc::SOL_SOCKET;
    ctl.hdr.cmsg_type = libc::SCM_RIGHTS;
    ctl.hdr.cmsg_len = (size_of::<libc::cmsghdr>() + size_of::<RawFd>()) as _;
    ctl.fds[0] = fd;
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the sendmsg.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&raw mut ctl).cast();
    msg.msg_controllen = size_of::<Cmsg<1>>() as _;
    loop {
        // SAFETY: `msg` and what it points at are valid for the call.
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n == 1 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if n < 0 && e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return Err(if n < 0 {
            e
        } else {
            io::ErrorKind::WriteZero.into()
        });
    }
}

/// Receive one byte and the fds that came with it (non-blocking: `WouldBlock` when nothing
/// is there). `Ok(None)` at EOF.
pub(crate) fn recv_byte(sock: RawFd) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut ctl = Cmsg::<MAX_FDS>::new();
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the recvmsg.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&raw mut ctl).cast();
    msg.msg_controllen = size_of::<Cmsg<MAX_FDS>>() as _;
    let n = loop {
        // SAFETY: `msg` and its buffers are valid for the call.
        let n =
            unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    // Take ownership of every fd received first, so each is closed whatever happens next.
    // Linux puts all fds of a message in one SCM_RIGHTS header (no SO_PASSCRED here).
    let mut fds = Vec::new();
    let hdr = size_of::<libc::cmsghdr>();
    if msg.msg_controllen as usize >= hdr
        && ctl.hdr.cmsg_level == libc::SOL_SOCKET
        && ctl.hdr.cmsg_type == libc::SCM_RIGHTS
    {
        #[allow(clippy::unnecessary_cast)] // cmsg_len is u32 on some libcs (musl)
        let count = (ctl.hdr.cmsg_len as usize).saturating_sub(hdr) / size_of::<RawFd>();
        for &fd in &ctl.fds[..count.min(MAX_FDS)] {
            // SAFETY: the kernel installed this fd for us just now; nothing else owns it.
            fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    if n == 0 {
        return Ok(None);
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        // More fds than MAX_FDS (the rest closed by the kernel): refused; ours close here.
        return Err(io::Error::new(io::ErrorKind::InvalidData, "too many fds"));
    }
    Ok(Some((byte[0], fds)))
}

fn sockopt(fd: RawFd, opt: libc::c_int) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for getsockopt to write an int.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, (&raw mut v).cast(), &mut len) };
    (rc == 0).then_some(v)
}

/// Whether `fd` is a connected TCP (IPv4/IPv6) stream socket, not listening: the only kind
/// of fd the proxy serves as a client.
pub(crate) fn is_client_socket(fd: &OwnedFd) -> bool {
    let raw = fd.as_raw_fd();
    // SAFETY: an all-zero stat is valid; fstat writes it.
    let mut st: libc::stat = unsafe { zeroed() };
    // SAFETY: `raw` is open (owned by `fd`), `st` writable.
    if unsafe { libc::fstat(raw, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return false;
    }
    let stream = sockopt(raw, libc::SO_TYPE) == Some(libc::SOCK_STREAM);
    let inet = matches!(
        sockopt(raw, libc::SO_DOMAIN),
        Some(libc::AF_INET | libc::AF_INET6)
    );
    let tcp = sockopt(raw, libc::SO_PROTOCOL) == Some(libc::IPPROTO_TCP);
    let listening = sockopt(raw, libc::SO_ACCEPTCONN) != Some(0);
    // SAFETY: an all-zero sockaddr_storage is valid; getpeername writes at most `len`.
    let mut sa: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `sa` and `len` are valid for getpeername.
    let connected = unsafe { libc::getpeername(raw, (&raw mut sa).cast(), &mut len) } == 0;
    stream && inet && tcp && !listening && connected
}
