//! The service's system calls that std does not wrap: every `unsafe` of the crate.

/// Whether the peer of a connected stream socket has closed it altogether (POLLHUP: both
/// directions shut; a peer that only ended its sending side gives EOF without it).
pub fn hung_up(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    // SAFETY: poll reads and writes the one pollfd given, which lives for the call.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0
}
