//! The socket maker of a job's network namespace: `efr-launch --ns-sockets --pid PID
//! --control-fd N --caller-pid SVC`, started by the service
//! ([`crate::api::Launcher::spawn_ns_sockets`]) for the port forwards of a background job
//! (`efr_jobs::forward`).
//!
//! The service is multi-threaded and cannot enter a user namespace (`setns` refuses a
//! process with threads), and a network namespace owned by the job's user namespace needs
//! `CAP_SYS_ADMIN` over that namespace and over the caller's own. This small
//! single-threaded process does it once: it opens `/proc/PID/ns/net` of a process of the
//! job, refuses when that is its own network namespace (the job has no network of its
//! own: nothing to forward), enters the user namespace that owns it (`NS_GET_USERNS`: under
//! bubblewrap the job's processes are in a user namespace nested below the owner, where no
//! capability over the network namespace is held), then the network namespace. It never
//! enters the job's mount or pid namespace and runs no code of the job.
//!
//! It then answers one-byte requests on the control socket (a seqpacket socket, one
//! message a request): [`INET`] for a new IPv4 TCP socket, [`INET6`] for an IPv6 one,
//! [`SOCK_DIAG`] for a `NETLINK_SOCK_DIAG` socket, each made in the job's namespace and
//! sent back with [`OK`] (`SCM_RIGHTS`), or [`ERR`] followed by the error's text. Its first
//! message, before any request, says whether it is in the namespace ([`OK`] with no fd, or
//! [`ERR`] and why, and then it exits). It exits at the control socket's EOF and when its
//! caller ends ([`crate::caller`]).
//!
//! The job's processes cannot reach it: it is not in the job's pid namespace (they cannot
//! name it to signal, trace or open it), it is not dumpable (`PR_SET_DUMPABLE` 0, set
//! before it opens anything: its `/proc` files and memory are closed to every process of
//! its user, and a process of the job is one), and the control socket is a socket pair
//! of the service, never bound to a name. What it hands out is a socket not yet bound
//! or connected, with no capability attached: the service connects it to the job's own
//! loopback.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use crate::caller::Caller;
use crate::sys;

/// The request for a new `AF_INET` `SOCK_STREAM` socket.
pub const INET: u8 = b'4';
/// The request for a new `AF_INET6` `SOCK_STREAM` socket.
pub const INET6: u8 = b'6';
/// The request for a new `NETLINK_SOCK_DIAG` socket.
pub const SOCK_DIAG: u8 = b'd';
/// The first byte of an answer that holds what was asked (the socket, attached).
pub const OK: u8 = b'+';
/// The first byte of an answer that says why not (the text follows).
pub const ERR: u8 = b'-';

/// The `NETLINK_SOCK_DIAG` protocol number (linux/netlink.h).
const NETLINK_SOCK_DIAG: libc::c_int = 4;

/// Why the socket maker could not enter the job's network namespace.
#[derive(Debug, thiserror::Error)]
pub enum EnterError {
    /// `PR_SET_DUMPABLE` could not be cleared.
    #[error("prctl(PR_SET_DUMPABLE, 0): {0}")]
    Dumpable(#[source] std::io::Error),
    /// A namespace file could not be opened or read.
    #[error("open {path}: {source}")]
    Open {
        /// The namespace file.
        path: String,
        /// What the open or the stat said.
        #[source]
        source: std::io::Error,
    },
    /// The process is in this process's own network namespace.
    #[error("pid {0} has no network namespace of its own (it is the service's)")]
    NoNetworkOfItsOwn(libc::pid_t),
    /// The user namespace owning the network namespace could not be had.
    #[error("the user namespace that owns the network namespace of pid {pid}: {source}")]
    Owner {
        /// The job's process.
        pid: libc::pid_t,
        /// What `ioctl(NS_GET_USERNS)` said.
        #[source]
        source: std::io::Error,
    },
    /// `setns` failed.
    #[error("setns into the {what} namespace of pid {pid}: {source}")]
    Setns {
        /// `user` or `network`.
        what: &'static str,
        /// The job's process.
        pid: libc::pid_t,
        /// What setns said.
        #[source]
        source: std::io::Error,
    },
}

fn open(path: String) -> Result<(std::fs::File, u64, u64), EnterError> {
    let f = std::fs::File::open(&path).map_err(|source| EnterError::Open {
        path: path.clone(),
        source,
    })?;
    let m = f
        .metadata()
        .map_err(|source| EnterError::Open { path, source })?;
    Ok((f, m.dev(), m.ino()))
}

fn same_as_own(f: &std::fs::File, path: &str) -> Result<bool, EnterError> {
    let (_, dev, ino) = open(path.to_string())?;
    let m = f.metadata().map_err(|source| EnterError::Open {
        path: path.to_string(),
        source,
    })?;
    Ok((m.dev(), m.ino()) == (dev, ino))
}

/// Enters the network namespace of `pid` (and first the user namespace owning it, when it
/// is not this process's own).
pub fn enter(pid: libc::pid_t) -> Result<(), EnterError> {
    sys::prctl(libc::PR_SET_DUMPABLE, 0, 0).map_err(EnterError::Dumpable)?;
    let (net, _, _) = open(format!("/proc/{pid}/ns/net"))?;
    if same_as_own(&net, "/proc/self/ns/net")? {
        return Err(EnterError::NoNetworkOfItsOwn(pid));
    }
    let owner: std::fs::File = sys::ns_owner(net.as_fd())
        .map_err(|source| EnterError::Owner { pid, source })?
        .into();
    if !same_as_own(&owner, "/proc/self/ns/user")? {
        sys::setns(owner.as_fd(), libc::CLONE_NEWUSER).map_err(|source| EnterError::Setns {
            what: "user",
            pid,
            source,
        })?;
    }
    sys::setns(net.as_fd(), libc::CLONE_NEWNET).map_err(|source| EnterError::Setns {
        what: "network",
        pid,
        source,
    })
}

/// The socket a request byte asks for, made here.
fn make(request: u8) -> Result<OwnedFd, String> {
    let (domain, ty, proto, what) = match request {
        INET => (libc::AF_INET, libc::SOCK_STREAM, 0, "an IPv4 TCP socket"),
        INET6 => (libc::AF_INET6, libc::SOCK_STREAM, 0, "an IPv6 TCP socket"),
        SOCK_DIAG => (
            libc::AF_NETLINK,
            libc::SOCK_RAW,
            NETLINK_SOCK_DIAG,
            "a sock_diag netlink socket",
        ),
        other => return Err(format!("unknown request byte {other}")),
    };
    sys::socket(domain, ty, proto).map_err(|e| format!("{what} in the job's namespace: {e}"))
}

fn answer(control: BorrowedFd<'_>, r: Result<Option<OwnedFd>, String>) -> bool {
    let sent = match r {
        Ok(fd) => {
            let fds: Vec<BorrowedFd<'_>> = fd.iter().map(AsFd::as_fd).collect();
            efr_fdpass::send_fds(control, &[OK], &fds)
        }
        Err(m) => {
            let mut b = vec![ERR];
            b.extend_from_slice(m.as_bytes());
            efr_fdpass::send_fds(control, &b, &[])
        }
    };
    sent.is_ok()
}

/// Runs the socket maker for the job's process `pid` on `control`; returns its exit status.
pub fn main(pid: libc::pid_t, control: OwnedFd, caller: &Caller) -> i32 {
    if let Err(e) = enter(pid) {
        answer(control.as_fd(), Err(e.to_string()));
        return crate::exit_code::SETUP_ERROR;
    }
    if !answer(control.as_fd(), Ok(None)) {
        return 0;
    }
    loop {
        match caller.wait_readable(control.as_raw_fd()) {
            Ok(true) => {}
            Ok(false) => return 0,
            Err(_) => return crate::exit_code::SETUP_ERROR,
        }
        // Fds sent with a request are closed unread (owned on receipt).
        match efr_fdpass::recv_byte(control.as_fd()) {
            Ok(Some((b, _))) => {
                if !answer(control.as_fd(), make(b).map(Some)) {
                    return 0;
                }
            }
            Ok(None) => return 0,
            Err(e) if e.is_retry() => {}
            Err(_) => return 0,
        }
    }
}
