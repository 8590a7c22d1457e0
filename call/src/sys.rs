//! The call's system calls that std does not wrap: every `unsafe` of the crate (random
//! names, pidfds, the forwarding of signals to a foreground call's launcher, the cache
//! merge's `openat2` and `lgetxattr`).

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
        // Not negative (checked above).
        got += r.unsigned_abs();
    }
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The service's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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

/// A pidfd of process `pid`, registered with the current tokio runtime (readable once the
/// process has ended). Must be called within a runtime.
pub fn async_pidfd(pid: u32) -> std::io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    let fd = pidfd_open(pid)?;
    // SAFETY: an `OwnedFd` is an open fd that only it closes, and `as_raw_fd` always gives
    // that same fd: it stays open, and the same file description, for the AsyncFd's life.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(std::io::Error::from)
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

/// The pidfd the forwarded signals go to (-1: none yet).
static FORWARD_TO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
/// A signal that came before there was a process to forward it to (0: none).
static PENDING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// `si_code` of a signal the kernel sent (a terminal's ^C, a hangup): it reached the
/// whole foreground process group, the line's processes included.
const SI_KERNEL: libc::c_int = 0x80;

/// Whether the kernel's signals (a terminal's ^C) are handed on too: when the launcher is
/// in a process group of its own, they do not reach it otherwise.
static FORWARD_KERNEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Hands on the kernel's signals too (see `FORWARD_KERNEL`).
pub fn forward_kernel_signals(on: bool) {
    FORWARD_KERNEL.store(on, std::sync::atomic::Ordering::SeqCst);
}

extern "C" fn on_forwarded(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        unsafe { (*info).si_code }
    };
    if code == SI_KERNEL && !FORWARD_KERNEL.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let fd = FORWARD_TO.load(std::sync::atomic::Ordering::SeqCst);
    if fd < 0 {
        PENDING.store(sig, std::sync::atomic::Ordering::SeqCst);
        return;
    }
    // SAFETY: pidfd_send_signal is a plain system call (async-signal-safe) on an fd the
    // process keeps open while forwarding (see `forward_to`), with no siginfo.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd,
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
}

/// Forwards `sigs` sent to this process by another one to the process [`forward_to`]
/// names (held until then); the kernel's own (a terminal's ^C) are not forwarded.
pub fn forward_signals(sigs: &[libc::c_int]) -> std::io::Result<()> {
    for &s in sigs {
        // SAFETY: sigaction is plain data; all-zero is a valid value before filling it in.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_forwarded as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: the handler only makes async-signal-safe calls (atomics, a system call).
        if unsafe { libc::sigaction(s, &sa, std::ptr::null_mut()) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Forwards to the process of `pidfd` from now on (and the signal held, if one came
/// first). The caller keeps `pidfd` open until [`stop_forwarding`].
pub fn forward_to(pidfd: &OwnedFd) {
    FORWARD_TO.store(pidfd.as_raw_fd(), std::sync::atomic::Ordering::SeqCst);
    let held = PENDING.swap(0, std::sync::atomic::Ordering::SeqCst);
    if held != 0 {
        let _ = pidfd_send_signal(pidfd, held);
    }
}

/// Puts `sigs` back to their default; a signal still held (it came when there was no
/// process to forward it to) is raised on this process.
pub fn stop_forwarding(sigs: &[libc::c_int]) {
    for &s in sigs {
        // SAFETY: SIG_DFL is always a valid disposition.
        unsafe { libc::signal(s, libc::SIG_DFL) };
    }
    FORWARD_TO.store(-1, std::sync::atomic::Ordering::SeqCst);
    let held = PENDING.swap(0, std::sync::atomic::Ordering::SeqCst);
    if held != 0 {
        // SAFETY: raise takes a signal number.
        unsafe { libc::raise(held) };
    }
}

/// Opens `rel` below the directory `dir` with `openat2(2)`, `RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: no component may be a link or leave `dir`
/// (a link planted in a real cache is refused, never followed).
pub fn open_beneath(
    dir: &impl std::os::fd::AsFd,
    rel: &std::path::Path,
    flags: nix::fcntl::OFlag,
    mode: u32,
) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .mode(nix::sys::stat::Mode::from_bits_truncate(mode))
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    let rel = if rel.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        rel
    };
    nix::fcntl::openat2(dir, rel, how).map_err(std::io::Error::from)
}

/// The value of the extended attribute `name` of the file at `path` (links not followed),
/// `None` when it has none.
pub fn lgetxattr(path: &std::path::Path, name: &str) -> std::io::Result<Option<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let n = std::ffi::CString::new(name)?;
    let mut buf = vec![0u8; 256];
    // SAFETY: `p` and `n` are NUL-terminated strings alive for the call; `buf` is a buffer
    // this function owns and its length is passed.
    let r = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(None),
            _ => Err(e),
        };
    }
    // Not negative (checked above).
    buf.truncate(r.unsigned_abs());
    Ok(Some(buf))
}

/// Sets the extended attribute `name` of the file at `path` (links not followed): the
/// tests make overlayfs's marks with it.
#[cfg(test)]
pub fn lsetxattr(path: &std::path::Path, name: &str, value: &[u8]) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let n = std::ffi::CString::new(name)?;
    // SAFETY: `p` and `n` are NUL-terminated strings alive for the call; `value` is a
    // slice whose length is passed.
    let r = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Most fds one D-Bus message (and one `SCM_RIGHTS` message) carries: the kernel's
/// `SCM_MAX_FD`.
pub const MAX_FDS: usize = 253;

/// Reads into `buf` from the stream socket `sock` with the fds that came with those bytes
/// (`SCM_RIGHTS`, received close-on-exec). `Ok((0, _))` at EOF. Fds beyond [`MAX_FDS`] are
/// closed by the kernel and make this an error (the message they belonged to is lost).
pub fn recv_with_fds(
    sock: &impl std::os::fd::AsFd,
    buf: &mut [u8],
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; MAX_FDS]);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = loop {
        match recvmsg::<()>(
            sock.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            r => break r.map_err(std::io::Error::from)?,
        }
    };
    let mut fds = Vec::new();
    for c in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(raw) = c {
            for fd in raw {
                // SAFETY: the kernel installed these fds in this process for this message
                // (SCM_RIGHTS); nothing else knows them, so they are ours to own.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
        return Err(std::io::Error::other(format!(
            "more than {MAX_FDS} fds came with one message"
        )));
    }
    Ok((msg.bytes, fds))
}

/// Writes all of `bytes` on the stream socket `sock`, `fds` attached to the first of them
/// (`SCM_RIGHTS`; the fds stay ours: the peer gets its own copies).
pub fn send_with_fds(
    sock: &impl std::os::fd::AsFd,
    bytes: &[u8],
    fds: &[OwnedFd],
) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let raw: Vec<std::os::fd::RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let mut sent = 0;
    while sent < bytes.len() || (sent == 0 && !raw.is_empty()) {
        let iov = [std::io::IoSlice::new(&bytes[sent..])];
        let cmsg = [ControlMessage::ScmRights(&raw)];
        let cmsgs: &[ControlMessage<'_>] = if sent == 0 && !raw.is_empty() {
            &cmsg
        } else {
            &[]
        };
        match sendmsg::<()>(
            sock.as_fd().as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(std::io::Error::from(e)),
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
        }
    }
    Ok(())
}

/// Lowers the calling thread's scheduling priority by `by` nice steps (on Linux the nice
/// value is per thread, and `PRIO_PROCESS` with id 0 names the calling thread; threads it
/// starts later inherit it). Raising one's own niceness needs no privilege.
pub fn nice_this_thread(by: i32) -> std::io::Result<()> {
    // -1 is also a nice value: errno, cleared first, tells an error from it.
    nix::errno::Errno::clear();
    // SAFETY: getpriority only reads the calling thread's nice value.
    let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if now == -1 && nix::errno::Errno::last_raw() != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: setpriority changes the calling thread's nice value only.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, (now + by).min(19)) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the nice value of the thread `tid` (`PRIO_PROCESS` names one thread on Linux).
/// Raising the nice value of a thread of one's own user needs no privilege; lowering it does.
pub fn set_nice(tid: u32, nice: i32) -> std::io::Result<()> {
    let id = libc::id_t::from(tid);
    // SAFETY: setpriority takes plain integers and changes only the named thread's nice value.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, id, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's clock ticks per second (`/proc/PID/stat`'s unit of processor time).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(n).unwrap_or(100)
}
