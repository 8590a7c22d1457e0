//! Thin wrappers over the system calls the launcher needs. Every `unsafe` block of the crate
//! lives here, each with the invariant that makes it sound.

pub mod spawn;

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

pub(crate) fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(crate) fn check_l(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A system call's result (a pid, an fd, a count) as its own type: the kernel returns it in
/// a long, but it always fits; EOVERFLOW if it did not.
fn narrow<T: TryFrom<libc::c_long>>(r: libc::c_long) -> io::Result<T> {
    T::try_from(r).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
}

/// A C string of a Rust string (an interior NUL becomes an `InvalidInput` error).
pub fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in string"))
}

/// `clone(flags | SIGCHLD)` with fork semantics (no new stack). Returns 0 in the child.
pub fn clone_fork(flags: libc::c_int) -> io::Result<libc::pid_t> {
    #[allow(
        clippy::cast_sign_loss,
        reason = "clone's flags: the int widened to the kernel's unsigned long as C widens it"
    )]
    // SAFETY: a raw clone without CLONE_VM and with a null stack duplicates the process like
    // fork(2); the callers (the launcher, and the init forking the line) are single-threaded,
    // so the child owns a consistent copy of memory (the unit tests of
    // `supervise::fork_supervised` call it from a thread of the test harness, with a child
    // that makes system calls only, allocates nothing and leaves with _exit).
    // The remaining arguments (parent tid, child tid, tls) are unused without their flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    check_l(r).and_then(narrow)
}

/// Leaves a shared fd table for a private copy of it and closes `fd` in that copy only
/// (`close_range(fd, fd, CLOSE_RANGE_UNSHARE)`, 5.9): the processes that shared the table
/// keep theirs.
pub fn close_range_unshare(fd: RawFd) -> io::Result<()> {
    let fd = libc::c_uint::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: close_range takes integers; `fd` is closed in the caller's new private table
    // only, which is the intent.
    let r = unsafe { libc::syscall(libc::SYS_close_range, fd, fd, libc::CLOSE_RANGE_UNSHARE) };
    check_l(r).map(|_| ())
}

/// fork(2). Returns 0 in the child.
pub fn fork() -> io::Result<libc::pid_t> {
    // SAFETY: the callers are single-threaded processes (the launcher, its init), so the
    // child gets a consistent copy of memory and may keep allocating.
    check(unsafe { libc::fork() })
}

/// Ends the process at once, without running destructors or flushing stdio.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// waitpid(2); `Ok(None)` when WNOHANG finds nothing.
pub fn waitpid(
    pid: libc::pid_t,
    flags: libc::c_int,
) -> io::Result<Option<(libc::pid_t, libc::c_int)>> {
    let mut st: libc::c_int = 0;
    // SAFETY: `st` is a valid out pointer for the duration of the call.
    let r = check(unsafe { libc::waitpid(pid, &mut st, flags) })?;
    Ok(if r == 0 { None } else { Some((r, st)) })
}

/// kill(2).
pub fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes plain integers.
    check(unsafe { libc::kill(pid, sig) }).map(|_| ())
}

/// prctl(2) with integer arguments.
pub fn prctl(op: libc::c_int, a: libc::c_ulong, b: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: the operations used (PDEATHSIG, DUMPABLE, NO_NEW_PRIVS, SUBREAPER, CAPBSET_DROP,
    // CAP_AMBIENT, SET_SECUREBITS) take integer arguments only.
    check(unsafe { libc::prctl(op, a, b, 0 as libc::c_ulong, 0 as libc::c_ulong) })
}

/// Clears the effective, permitted and inheritable capability sets of the calling thread
/// (`capset` with a version-3 header and two zeroed data structs). The order of the drop is
/// `crate::restrict::caps::drop_all`'s.
pub fn capset_clear() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let d = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset with a version-3 header reads exactly two Data structs, which `d` holds.
    check_l(unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) })
        .map(|_| ())
}

/// Sets `RLIMIT_NPROC` (soft and hard) of this process to `n`.
pub fn set_nproc(n: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: setrlimit reads one rlimit, which `lim` is, for a resource of this process.
    if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &lim) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets no_new_privs.
pub fn no_new_privs() -> io::Result<()> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0).map(|_| ())
}

/// Closes every fd from `from` up: `close_range`, or, on a kernel without it (`ENOSYS`,
/// before 5.9), `close` of every number up to the hard limit of open files (at least 4096,
/// at most 2^20). Any other failure of `close_range` is returned: fds may be left open.
pub fn close_from(from: RawFd) -> io::Result<()> {
    #[allow(
        clippy::cast_sign_loss,
        reason = "an fd number (the init passes 4), close_range's unsigned int"
    )]
    // SAFETY: close_range takes integers; closing fds the process does not use further is the
    // intent (the callers are about to exec).
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            from as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    close_each_from(from, open_files_hard_limit());
    Ok(())
}

/// The hard limit of open files, bounded to `4096..=2^20` (every fd number is below it).
fn open_files_hard_limit() -> RawFd {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit, which `lim` is.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_max
    } else {
        1 << 20
    };
    max.clamp(4096, 1 << 20) as RawFd
}

/// `close` of every fd number in `from..to` (the fallback of [`close_from`]).
pub fn close_each_from(from: RawFd, to: RawFd) {
    for fd in from..to {
        // SAFETY: closing fds the process does not use further is the intent (the callers
        // are about to exec); a number that is no fd gives EBADF, which is what we want.
        unsafe { libc::close(fd) };
    }
}

/// Closes one fd.
pub fn close(fd: RawFd) {
    // SAFETY: the callers own `fd` and do not use it afterwards.
    unsafe { libc::close(fd) };
}

/// Clears FD_CLOEXEC on `fd` (so a program exec'd next inherits it).
pub fn set_inheritable(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl F_SETFD on an fd the caller owns.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }).map(|_| ())
}

/// dup2(2).
pub fn dup2(a: RawFd, b: RawFd) -> io::Result<()> {
    // SAFETY: dup2 takes integers; the caller owns both slots.
    check(unsafe { libc::dup2(a, b) }).map(|_| ())
}

/// A pipe with O_CLOEXEC on both ends: (read, write).
pub fn pipe() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two fds pipe2 writes.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

/// [`pipe`] as owned fds: (read, write), each closed when dropped.
pub fn pipe_owned() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    let (r, w) = pipe()?;
    // SAFETY: pipe2 just made both fds for this process; nobody else owns them.
    let r = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(r) };
    // SAFETY: as above, the write end.
    let w = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(w) };
    Ok((r, w))
}

/// read(2).
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes of writes.
    check_l(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } as libc::c_long)
        .and_then(narrow)
}

/// Writes all of `buf` (retrying on EINTR and short writes).
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for `buf.len()` bytes of reads.
        let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // Not negative (checked above).
        buf = &buf[r.unsigned_abs()..];
    }
    Ok(())
}

/// poll(2) on (fd, events) pairs; returns the revents in order.
pub fn poll(fds: &[(RawFd, libc::c_short)], timeout_ms: i32) -> io::Result<Vec<libc::c_short>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` holds `p.len()` initialised pollfd structs.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(p.iter().map(|x| x.revents).collect())
}

/// isatty(3).
pub fn isatty(fd: RawFd) -> bool {
    // SAFETY: isatty takes an integer.
    unsafe { libc::isatty(fd) == 1 }
}

/// mount(2); `None` strings become NULL.
pub fn mount(
    src: Option<&str>,
    dst: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let src = src.map(cstr).transpose()?;
    let dst_c = cstr(dst)?;
    let fstype = fstype.map(cstr).transpose()?;
    let data = data.map(cstr).transpose()?;
    let p = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is NULL or a NUL-terminated string alive for the call.
    let r = unsafe { libc::mount(p(&src), dst_c.as_ptr(), p(&fstype), flags, p(&data).cast()) };
    check(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("mount {dst}: {e}")))
}

/// umount2(2).
pub fn umount2(dst: &str, flags: libc::c_int) -> io::Result<()> {
    let c = cstr(dst)?;
    // SAFETY: `c` is a NUL-terminated string alive for the call.
    check(unsafe { libc::umount2(c.as_ptr(), flags) }).map(|_| ())
}

/// pivot_root(2).
pub fn pivot_root(new: &str, old: &str) -> io::Result<()> {
    let n = cstr(new)?;
    let o = cstr(old)?;
    // SAFETY: both are NUL-terminated strings alive for the call.
    check_l(unsafe { libc::syscall(libc::SYS_pivot_root, n.as_ptr(), o.as_ptr()) }).map(|_| ())
}

/// mount_setattr(2) with AT_RECURSIVE: sets (and clears) mount attributes of a whole tree.
pub fn mount_setattr_recursive(path: &str, set: u64, clr: u64) -> io::Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let c = cstr(path)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    // SAFETY: `c` is a NUL-terminated path and `attr` a mount_attr of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check_l(r)
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("mount_setattr {path}: {e}")))
}

/// MOUNT_ATTR_RDONLY.
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// sethostname(2).
pub fn sethostname(name: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe `name`'s bytes.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(|_| ())
}

/// Brings the loopback interface up (in a fresh network namespace).
/// unshare(2).
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    check(unsafe { libc::unshare(flags) }).map(|_| ())
}

#[allow(
    clippy::cast_possible_truncation,
    reason = "IFF_UP | IFF_RUNNING is 0x41, a short (the ioctl's flags field)"
)]
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket takes integers.
    let s =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo\0".iter().enumerate() {
        // The byte as C's char (i8 or u8 by the target).
        ifr.ifr_name[i] = libc::c_char::from_ne_bytes([*b]);
    }
    // SAFETY: SIOCGIFFLAGS reads the name and writes the flags of the ifreq passed.
    let r = unsafe { libc::ioctl(s, libc::SIOCGIFFLAGS as _, &mut ifr) };
    if r >= 0 {
        // SAFETY: the union member ifru_flags is the one SIOCGIFFLAGS filled in.
        unsafe { ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    }
    let r = if r >= 0 {
        // SAFETY: SIOCSIFFLAGS reads the ifreq passed.
        unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS as _, &ifr) }
    } else {
        r
    };
    let e = io::Error::last_os_error();
    close(s);
    if r < 0 { Err(e) } else { Ok(()) }
}

/// chdir(2).
pub fn chdir(p: &str) -> io::Result<()> {
    std::env::set_current_dir(p)
}

/// execve(2); returns only on failure.
pub fn execve(prog: &str, argv: &[String], env: &[String]) -> io::Error {
    let to_c = |v: &[String]| -> io::Result<Vec<CString>> { v.iter().map(|s| cstr(s)).collect() };
    let (p, a, e) = match (cstr(prog), to_c(argv), to_c(env)) {
        (Ok(p), Ok(a), Ok(e)) => (p, a, e),
        _ => return io::Error::new(io::ErrorKind::InvalidInput, "NUL in argv or env"),
    };
    let mut ap: Vec<*const libc::c_char> = a.iter().map(|c| c.as_ptr()).collect();
    ap.push(std::ptr::null());
    let mut ep: Vec<*const libc::c_char> = e.iter().map(|c| c.as_ptr()).collect();
    ep.push(std::ptr::null());
    // SAFETY: `p` and every pointer of the NULL-terminated `ap` and `ep` point into CStrings
    // alive for the call.
    unsafe { libc::execve(p.as_ptr(), ap.as_ptr(), ep.as_ptr()) };
    io::Error::last_os_error()
}

/// The calling process's pid.
pub fn getpid() -> libc::pid_t {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// The effective uid and gid.
pub fn ids() -> (u32, u32) {
    // SAFETY: geteuid has no preconditions.
    let u = unsafe { libc::geteuid() };
    // SAFETY: getegid has no preconditions.
    let g = unsafe { libc::getegid() };
    (u, g)
}

static SIG_PIPE_W: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        unsafe { (*info).si_code }
    };
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a signal number: at most SIGRTMAX (64), a byte"
    )]
    let msg = [sig as u8, if code == 0x80 { 1 } else { 0 }];
    let fd = SIG_PIPE_W.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; `msg` is valid for 2 bytes.
        unsafe { libc::write(fd, msg.as_ptr().cast(), 2) };
    }
}

/// Makes `fd` non-blocking (it replaces the file status flags: for pipes this launcher made).
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl(F_SETFL) takes integers; a bad fd is an error, not undefined behaviour.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) }).map(|_| ())
}

/// Routes `sigs` to a self-pipe: each delivery writes `[signal, from_kernel]` to the pipe
/// whose read end is returned (non-blocking both ends). `from_kernel` is 1 when the kernel
/// (e.g. a terminal's ^C) sent it rather than a process.
pub fn signal_pipe(sigs: &[libc::c_int]) -> io::Result<RawFd> {
    let (r, w) = pipe()?;
    set_nonblocking(r)?;
    set_nonblocking(w)?;
    SIG_PIPE_W.store(w, Ordering::Relaxed);
    for &s in sigs {
        // SAFETY: sigaction is plain data; all-zero is a valid value before filling it in.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: the handler only calls async-signal-safe write(2).
        check(unsafe { libc::sigaction(s, &sa, std::ptr::null_mut()) })?;
    }
    Ok(r)
}

/// Puts `sigs` back to their default action.
pub fn default_signals(sigs: &[libc::c_int]) {
    for &s in sigs {
        // SAFETY: SIG_DFL is always a valid disposition.
        unsafe { libc::signal(s, libc::SIG_DFL) };
    }
    // SAFETY: sigset_t is plain data; all-zero is the empty set on Linux.
    let set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, initialised signal set; the old mask is not asked for.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) };
}

/// The program name of a process (`/proc/PID/comm`).
pub fn comm(pid: libc::pid_t) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

/// The Landlock ABI version of the kernel (0 when Landlock is missing or disabled).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attr, size 0 and the VERSION flag the call only returns a number.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    // Negative (no Landlock) reads as 0.
    u32::try_from(r).unwrap_or(0)
}

/// Sets FD_CLOEXEC on `fd`.
pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl F_SETFD on an fd the caller owns.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }).map(|_| ())
}

/// A sealed-size anonymous file holding `data`, positioned at its start (close-on-exec).
pub fn memfd_with(name: &str, data: &[u8]) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let c = cstr(name)?;
    // SAFETY: `c` is a NUL-terminated name alive for the call.
    let raw = check(unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: memfd_create just made this fd for this process; nobody else owns it (it is
    // closed when `fd` drops, on the error paths below too).
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    write_all(fd.as_raw_fd(), data)?;
    // SAFETY: lseek on the fd just created.
    check_l(unsafe { libc::lseek(fd.as_raw_fd(), 0, libc::SEEK_SET) } as libc::c_long)?;
    Ok(fd)
}

/// Takes ownership of an fd handed over by the parent (checked open first).
pub fn file_from_fd(fd: RawFd) -> io::Result<std::fs::File> {
    // SAFETY: F_GETFD only queries the fd's flags.
    check(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // SAFETY: the fd is open (checked above) and, by the command line's contract, handed to
    // this process to own; nothing else in the launcher uses it.
    Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// Puts `/dev/null` on fds 0, 1 and 2 (what was there is closed); nothing when it cannot be
/// opened.
pub fn stdio_to_null() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..=2 {
            let _ = dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd);
        }
    }
}

/// A close-on-exec copy of the open fd `fd` (at 3 or above).
pub fn dup_cloexec(fd: RawFd) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC makes a new fd or fails; it changes nothing of `fd`.
    let n = check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: `n` was just made for this process by the fcntl above; nobody else owns it.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(n) })
}

/// Wraps an fd the caller owns.
pub fn owned(fd: RawFd) -> io::Result<std::os::fd::OwnedFd> {
    Ok(file_from_fd(fd)?.into())
}

/// Loads a seccomp filter into the calling thread (`SECCOMP_SET_MODE_FILTER`; no_new_privs
/// must be set, or the caller must hold CAP_SYS_ADMIN).
pub fn seccomp_filter(prog: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call, and holds its length; the
    // kernel copies the program and never writes through the pointer.
    check_l(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    })
    .map(|_| ())
}

/// The parent's pid (0 when the parent is outside the caller's pid namespace).
pub fn getppid() -> libc::pid_t {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() }
}

/// A pidfd of process `pid` (close-on-exec, as pidfd_open always makes it).
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<RawFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    check_l(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) }).and_then(narrow)
}

/// Whether the process of a pidfd has ended (its pidfd is readable, or hung up once the
/// process is reaped).
pub fn pidfd_ended(fd: RawFd) -> bool {
    matches!(poll(&[(fd, libc::POLLIN)], 0), Ok(r) if r[0] & (libc::POLLIN | libc::POLLHUP) != 0)
}

/// Whether `fd` is an open fd of this process.
pub fn fd_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only queries the fd's flags; a closed fd gives EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Ignores `sigs` (SIG_IGN, which an exec keeps).
pub fn ignore_signals(sigs: &[libc::c_int]) {
    for &s in sigs {
        // SAFETY: SIG_IGN is always a valid disposition and installs no handler.
        unsafe { libc::signal(s, libc::SIG_IGN) };
    }
}

/// Whether the file `fd` is open on (an `O_PATH` fd will do) is the root of a mount
/// (`STATX_ATTR_MOUNT_ROOT`); an error when the kernel cannot say (before 5.8).
pub fn is_mount_root(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: statx is a plain C struct of integers; all zeroes is a valid value.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH names `fd` itself; `st` is a
    // valid, writable statx buffer that outlives the call.
    check(unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BASIC_STATS,
            &mut st,
        )
    })?;
    let bit = libc::STATX_ATTR_MOUNT_ROOT as u64;
    if st.stx_attributes_mask & bit == 0 {
        return Err(io::Error::other("the kernel does not report mount roots"));
    }
    Ok(st.stx_attributes & bit != 0)
}

/// The size and the free bytes (for an unprivileged writer) of the file system at `path`.
pub fn statfs_bytes(path: &str) -> io::Result<(u64, u64)> {
    let c = cstr(path)?;
    // SAFETY: statfs is a plain C struct of integers; all zeroes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a writable buffer, both alive for the
    // call.
    check(unsafe { libc::statfs(c.as_ptr(), &mut st) })?;
    // A block size is never negative.
    let bsize = u64::try_from(st.f_bsize).unwrap_or(0);
    Ok((
        (st.f_blocks as u64).saturating_mul(bsize),
        (st.f_bavail as u64).saturating_mul(bsize),
    ))
}

/// The file system type (`f_type`, the kernel's magic number) of the file open at `fd`.
pub fn fstatfs_type(fd: RawFd) -> io::Result<i64> {
    // SAFETY: statfs is a plain C struct of integers; all zeroes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable buffer alive for the call; a closed `fd` is an EBADF.
    check(unsafe { libc::fstatfs(fd, &mut st) })?;
    // `f_type` is an `__fsword_t`: `i64` on 64-bit Linux, narrower elsewhere.
    #[allow(
        clippy::useless_conversion,
        reason = "not the same type on every target"
    )]
    Ok(i64::from(st.f_type))
}

/// The machine's total RAM in bytes (sysinfo(2)).
pub fn total_ram() -> io::Result<u64> {
    // SAFETY: sysinfo is a plain C struct of integers; all zeroes is a valid value.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `si` is a valid, writable sysinfo buffer that outlives the call.
    check(unsafe { libc::sysinfo(&mut si) })?;
    Ok((si.totalram as u64).saturating_mul(u64::from(si.mem_unit.max(1))))
}

/// A connected pair of Unix stream sockets, both ends close-on-exec.
pub fn socketpair() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    socketpair_of(libc::SOCK_STREAM)
}

/// A connected pair of Unix seqpacket sockets (one message a read), both ends
/// close-on-exec.
pub fn seqpacket_pair() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    socketpair_of(libc::SOCK_SEQPACKET)
}

fn socketpair_of(ty: libc::c_int) -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: the kernel writes two fds into `fds`, a live array of two.
    check(unsafe {
        libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
    })?;
    // SAFETY: socketpair just made this fd for this process; nobody else owns it.
    let a = unsafe { OwnedFd::from_raw_fd(fds[0]) };
    // SAFETY: as above, the other end.
    let b = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    Ok((a, b))
}

/// A new close-on-exec socket of `domain`, `ty` and `protocol`, in this process's network
/// namespace.
pub fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2) takes no pointers; it makes a new fd or fails.
    let fd = check(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: `fd` was just made for this process by socket(2); nobody else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `setns(2)`: moves this (single-threaded) process into the namespace `ns` is a file of,
/// of type `nstype` (`CLONE_NEWUSER`, `CLONE_NEWNET`, ...).
pub fn setns(ns: std::os::fd::BorrowedFd<'_>, nstype: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: setns takes an fd the caller keeps open for the call and a flag; no pointers.
    check(unsafe { libc::setns(ns.as_raw_fd(), nstype) }).map(|_| ())
}

/// `NS_GET_USERNS` (`_IO(0xb7, 0x1)` of linux/nsfs.h): the `ioctl` that gives the user
/// namespace owning a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

/// The user namespace that owns the namespace `ns` is a file of (`ioctl(NS_GET_USERNS)`),
/// as a new close-on-exec fd.
pub fn ns_owner(ns: std::os::fd::BorrowedFd<'_>) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: NS_GET_USERNS takes no argument; it returns a new fd (close-on-exec) or fails.
    let fd = check(unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS as _) })?;
    // SAFETY: `fd` was just made for this process by the ioctl; nobody else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fallback of `close_from` closes fds above 4096 too (the loop stopped at 4096),
    /// in a child process: the harness keeps its fds.
    #[test]
    fn the_close_fallback_reaches_past_4096() {
        let limit = open_files_hard_limit();
        if limit <= 5000 {
            eprintln!("skipped: the hard limit of open files is {limit}");
            return;
        }
        let pid = fork().unwrap();
        if pid == 0 {
            // Only async-signal-safe calls from here (the harness has threads).
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes one rlimit, which `lim` is.
            let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
            lim.rlim_cur = lim.rlim_max;
            // SAFETY: setrlimit reads one rlimit, which `lim` is.
            let raised = got && unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0;
            if !raised || dup2(1, 5000).is_err() || !fd_open(5000) {
                exit_now(2);
            }
            close_each_from(4000, open_files_hard_limit());
            exit_now(if fd_open(5000) { 1 } else { 0 });
        }
        let (_, st) = waitpid(pid, 0).unwrap().expect("the child's status");
        assert!(libc::WIFEXITED(st), "{st}");
        assert_eq!(
            libc::WEXITSTATUS(st),
            0,
            "fd 5000 survived the fallback (2: setup)"
        );
    }
}
