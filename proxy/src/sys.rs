//! The crate's only `unsafe`: small safe wrappers over the Linux calls the proxy makes
//! (pipes and `splice(2)` for the tunnel copy; the `SCM_RIGHTS` hand-over lives in
//! `efr-fdpass`). Each wrapper is one call or one fixed pattern; the logic lives in `splice`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `pipe2(2)` with `flags`: the read end, then the write end.
pub(crate) fn pipe2(flags: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: fds[0] is new, open, and owned by nobody else.
    let r = unsafe { OwnedFd::from_raw_fd(fds[0]) };
    // SAFETY: the same for fds[1].
    let w = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    Ok((r, w))
}

/// Ask for a pipe of `size` bytes (`F_SETPIPE_SZ`); when refused, read back the size it has
/// (`F_GETPIPE_SZ`). `None` when both fail.
pub(crate) fn set_pipe_size(pipe: &OwnedFd, size: libc::c_int) -> Option<usize> {
    // SAFETY: fcntl on an fd owned by `pipe`, open for the call; a failure leaves the size
    // the pipe has.
    let mut cap = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, size) };
    if cap <= 0 {
        // SAFETY: as above; F_GETPIPE_SZ only reads.
        cap = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_GETPIPE_SZ) };
    }
    usize::try_from(cap).ok().filter(|&c| c > 0)
}

/// `splice(2)` of at most `len` bytes `from` -> `to` (no offsets: pipes and sockets).
/// The caller keeps both fds open for the call (borrowed from live owners).
pub(crate) fn splice(from: RawFd, to: RawFd, len: usize, flags: libc::c_uint) -> io::Result<usize> {
    // SAFETY: null offsets are what splice takes for pipes and sockets; splice touches no
    // memory of ours, and on a closed or reused fd it fails or moves bytes between fds the
    // caller named (no memory unsafety).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            flags,
        )
    };
    // Negative (-1) is the only value that does not convert.
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `shutdown(fd, SHUT_WR)`, result ignored (as the copy's EOF path always did).
pub(crate) fn shutdown_write(fd: RawFd) {
    // SAFETY: shutdown takes no pointers; the caller's fd is open for the call.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}

/// `flock(fd, LOCK_EX)`: waits for the exclusive lock of an open file (freed with the fd).
pub(crate) fn lock_exclusive(fd: &impl AsRawFd) -> io::Result<()> {
    loop {
        // SAFETY: flock takes no pointers; the fd is open for the call (borrowed).
        let rc = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The effective uid of the process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}
