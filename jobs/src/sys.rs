//! The system calls of jobs that std does not wrap: every `unsafe` of the crate (pidfds,
//! fds registered with tokio).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The service's effective uid.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// A pidfd of process `pid`.
#[allow(
    clippy::cast_possible_truncation,
    reason = "an fd the kernel returned: not negative (checked) and an int, below the fd limit"
)]
pub fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // A pid past `pid_t` names no process: EINVAL, as the kernel answers a negative one.
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends `sig` through a pidfd (never to a recycled pid).
pub fn pidfd_send_signal(fd: &OwnedFd, sig: libc::c_int) -> std::io::Result<()> {
    // SAFETY: pidfd_send_signal on an fd this caller owns, with no siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `fd` registered with the current tokio runtime for reading and writing (a socket the
/// port forwards use: the socket maker's control socket, a sock_diag socket). Must be
/// called within a runtime; `fd` should be non-blocking.
pub fn async_owned(fd: OwnedFd) -> std::io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` is an open fd that only it closes, and `as_raw_fd` always gives
    // that same fd: it stays open, and the same file description, for the AsyncFd's life.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            fd,
            tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE,
        )
    }
    .map_err(std::io::Error::from)
}
