//! The service's system calls that std does not wrap: every `unsafe` of the crate.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `n` random bytes from the kernel, as lower-case hex. `getrandom` is retried on EINTR
/// and short reads; a failure is an error, never a guessable value.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut b = vec![0u8; n];
    let mut got = 0;
    while got < b.len() {
        // SAFETY: getrandom writes at most `b.len() - got` bytes at `b[got..]`, a buffer
        // this function owns.
        let r = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += r as usize;
    }
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The service's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Ignores `sig` in this process (SIG_IGN).
pub fn ignore_signal(sig: libc::c_int) {
    // SAFETY: setting a disposition to SIG_IGN installs no handler and touches no memory.
    unsafe { libc::signal(sig, libc::SIG_IGN) };
}

/// A pidfd of process `pid`.
pub fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
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
