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

/// Makes `cmd` start its process in a session of its own (`setsid`): no controlling
/// terminal, so a service the CLI starts is never in a terminal's process groups (no
/// `SIGHUP` when the terminal goes, no `/dev/tty` for its calls).
pub fn new_session(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // `setsid(2)`, which is async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
}

/// Raises this process's soft limit of open files to its hard limit (a systemd session
/// gives 1024 soft, 524288 hard): every call's proxy lives in the service's process, and
/// each call's budget (`network.proxy_connections`, `network.proxy_tunnels`) must fit many
/// times over. The soft limit in force, after the raise (the old one when it could not be
/// raised).
pub fn raise_nofile() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}
