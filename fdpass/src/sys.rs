//! The crate's only `unsafe`: `sendmsg`/`recvmsg` with `SCM_RIGHTS` and the socket
//! queries the hand-over's checks make. Each wrapper is one call or one fixed pattern; the
//! logic lives in the crate root.

use std::io;
use std::mem::{size_of, size_of_val, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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

/// A zeroed `msghdr` pointing at one one-byte `iov` and the control buffer `ctl`.
fn msghdr<const N: usize>(iov: &mut libc::iovec, ctl: &mut Cmsg<N>) -> libc::msghdr {
    // SAFETY: msghdr is plain integers and pointers: all-zero (null pointers) is valid.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (ctl as *mut Cmsg<N>).cast();
    msg.msg_controllen = size_of::<Cmsg<N>>() as _;
    msg
}

/// Send `data` with `fds` attached (`SCM_RIGHTS`, at most `N`, none: no control message;
/// `MSG_NOSIGNAL`), retrying on
/// `EINTR`; blocking unless `sock` is non-blocking. The bytes sent (the fds go with the
/// first of them; the caller sends the rest, if any, without fds).
pub(super) fn send_with_fds<const N: usize>(
    sock: BorrowedFd<'_>,
    data: &[u8],
    fds: &[RawFd],
) -> io::Result<usize> {
    if fds.len() > N || data.is_empty() {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let mut iov = libc::iovec {
        // sendmsg only reads through iov_base.
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    let mut ctl = Cmsg::<N>::new();
    ctl.hdr.cmsg_level = libc::SOL_SOCKET;
    ctl.hdr.cmsg_type = libc::SCM_RIGHTS;
    ctl.hdr.cmsg_len = (size_of::<libc::cmsghdr>() + size_of_val(fds)) as _;
    ctl.fds[..fds.len()].copy_from_slice(fds);
    let mut msg = msghdr(&mut iov, &mut ctl);
    // Exactly the space of this one header (CMSG_SPACE): the kernel would read zeroed room
    // after it as a second, invalid header.
    let space = size_of::<libc::cmsghdr>() + size_of_val(fds).next_multiple_of(size_of::<usize>());
    msg.msg_controllen = space as _;
    if fds.is_empty() {
        msg.msg_control = std::ptr::null_mut();
        msg.msg_controllen = 0;
    }
    loop {
        // SAFETY: `msg` points at `iov` (-> `data`, `data.len()` readable bytes) and `ctl`
        // (`msg_controllen` <= its size), all alive and unmoved for the call; sendmsg only
        // reads them.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n > 0 {
            return Ok(n.unsigned_abs());
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

/// Receive into `buf` with at most `N` fds (`MSG_CMSG_CLOEXEC | MSG_DONTWAIT`, retrying on
/// `EINTR`): the bytes read, every fd received (each owned at once, so none leaks whatever
/// the caller does next), and whether the control data was truncated (`MSG_CTRUNC`: more
/// fds were sent than room here; the kernel closed the rest).
pub(super) fn recv_fds<const N: usize>(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>, bool)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut ctl = Cmsg::<N>::new();
    let mut msg = msghdr(&mut iov, &mut ctl);
    let n = loop {
        // SAFETY: `msg` points at `iov` (-> `buf`, `buf.len()` writable bytes) and `ctl`
        // (`msg_controllen` writable bytes), all alive and unmoved for the call.
        let n = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
            )
        };
        // Negative (-1) is the only value that does not convert.
        if let Ok(n) = usize::try_from(n) {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    // Linux puts all fds of a message in one SCM_RIGHTS header (no SO_PASSCRED here).
    let mut fds = Vec::new();
    let hdr = size_of::<libc::cmsghdr>();
    #[allow(clippy::unnecessary_cast)] // msg_controllen is socklen_t on some libcs (musl)
    let controllen = msg.msg_controllen as usize;
    if controllen >= hdr
        && ctl.hdr.cmsg_level == libc::SOL_SOCKET
        && ctl.hdr.cmsg_type == libc::SCM_RIGHTS
    {
        #[allow(clippy::unnecessary_cast)] // cmsg_len is u32 on some libcs (musl)
        let count = (ctl.hdr.cmsg_len as usize).saturating_sub(hdr) / size_of::<RawFd>();
        for &fd in &ctl.fds[..count.min(N)] {
            // SAFETY: the kernel installed this fd for us just now; nothing else owns it.
            fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    Ok((n, fds, msg.msg_flags & libc::MSG_CTRUNC != 0))
}

/// The size of `T`, an int or a socket address, as the `socklen_t` the socket calls take.
#[allow(
    clippy::cast_possible_truncation,
    reason = "used for an int and socket addresses only: at most 128 bytes (sockaddr_storage)"
)]
fn socklen_of<T>() -> libc::socklen_t {
    size_of::<T>() as libc::socklen_t
}

/// `getsockopt(fd, SOL_SOCKET, opt)` of an int option; `None` on failure.
pub(super) fn getsockopt_int(fd: BorrowedFd<'_>, opt: libc::c_int) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = socklen_of::<libc::c_int>();
    // SAFETY: `v` and `len` are valid for getsockopt to write an int (`len` bytes at most).
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&raw mut v).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(v)
}

/// Whether `fstat` succeeds on `fd` and says it is a socket.
pub(super) fn is_socket(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: an all-zero stat (plain integers) is valid; fstat writes it.
    let mut st: libc::stat = unsafe { zeroed() };
    // SAFETY: `st` is writable for fstat; a bad fd only fails.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }) == 0
        && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
}

/// The local port of the socket `fd` (`getsockname`, IPv4 or IPv6); `None` when it fails
/// or the socket is of another family.
pub(super) fn local_port(fd: BorrowedFd<'_>) -> Option<u16> {
    // A sockaddr_in6 holds a sockaddr_in too, and both have the port (network order) at
    // the same offset, right after the family.
    // SAFETY: an all-zero sockaddr_in6 (plain integers) is valid.
    let mut sa: libc::sockaddr_in6 = unsafe { zeroed() };
    let mut len = socklen_of::<libc::sockaddr_in6>();
    // SAFETY: `sa` and `len` are valid for getsockname, which writes at most `len` bytes.
    if unsafe { libc::getsockname(fd.as_raw_fd(), (&raw mut sa).cast(), &mut len) } != 0 {
        return None;
    }
    matches!(
        sa.sin6_family as libc::c_int,
        libc::AF_INET | libc::AF_INET6
    )
    .then(|| u16::from_be(sa.sin6_port))
}

/// Whether the socket `fd` has a peer (`getpeername` succeeds).
pub(super) fn is_connected(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: an all-zero sockaddr_storage (plain integers) is valid.
    let mut sa: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = socklen_of::<libc::sockaddr_storage>();
    // SAFETY: `sa` and `len` are valid for getpeername, which writes at most `len` bytes.
    (unsafe { libc::getpeername(fd.as_raw_fd(), (&raw mut sa).cast(), &mut len) }) == 0
}
