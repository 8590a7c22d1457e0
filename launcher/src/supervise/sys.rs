//! The system calls of the supervisor: the seccomp listener and its notifications, reading
//! a path from a caller's memory, its fds through a pidfd, and the `*at` calls the
//! supervisor makes on the caller's behalf. Every `unsafe` block of the supervisor lives
//! here, each with the invariant that makes it sound.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::sys::{check, check_l};

fn own(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd =
        RawFd::try_from(check_l(fd)?).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this fd to this process; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Loads `prog` as a seccomp filter with a user-notification listener
/// (`SECCOMP_FILTER_FLAG_NEW_LISTENER`); the listener's fd. no_new_privs must be set.
pub fn seccomp_listener(prog: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let len = u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call, and holds its length; the
    // kernel copies the program and never writes through the pointer.
    own(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    })
}

/// The listener the line's child made in the init's fd table (see
/// `super::fork_supervised`), owned: `n` must be an open fd with close-on-exec set, as
/// every listener is (EBADF otherwise, and nothing is owned).
pub fn owned_listener(n: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD takes an fd number and reads its flags; an unused number gives EBADF.
    let flags = check(unsafe { libc::fcntl(n, libc::F_GETFD) })?;
    if flags & libc::FD_CLOEXEC == 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: `n` is open in this process, and was made by the kernel for the line's child
    // in the table this process then shared; the child has left the table, so nothing else
    // here owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Whether the kernel's notification structs are no bigger than ours (the kernel refuses a
/// receive into a buffer of another size only when its struct is bigger).
pub fn notif_sizes_fit() -> bool {
    let mut s = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes one `seccomp_notif_sizes` through the pointer,
    // which points at a live, writable one.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut s as *mut libc::seccomp_notif_sizes,
        )
    };
    r == 0
        && usize::from(s.seccomp_notif) <= std::mem::size_of::<libc::seccomp_notif>()
        && usize::from(s.seccomp_notif_resp) <= std::mem::size_of::<libc::seccomp_notif_resp>()
}

/// Receives one notification (blocks until one is pending).
pub fn notif_recv(listener: BorrowedFd<'_>) -> io::Result<libc::seccomp_notif> {
    // SAFETY: `seccomp_notif` is plain data; all zeroes is a valid value, and the kernel
    // requires the buffer zeroed.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one `seccomp_notif` through the pointer, which points at a
    // live one of the size the kernel checked with `notif_sizes_fit`.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut n as *mut libc::seccomp_notif,
        )
    })?;
    Ok(n)
}

/// What `fd` says now for POLLIN (a poll that does not block): its `revents`, 0 for
/// nothing, `None` when the poll failed.
fn revents_now(fd: BorrowedFd<'_>) -> Option<libc::c_short> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one live pollfd, its count 1; a zero timeout never blocks.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    (r >= 0).then_some(if r > 0 { p.revents } else { 0 })
}

/// Whether a notification waits on the listener now.
pub fn pending(listener: BorrowedFd<'_>) -> bool {
    revents_now(listener).is_some_and(|r| r & libc::POLLIN != 0)
}

/// Whether the process or thread of `pidfd` has ended (or its pidfd cannot tell).
pub fn pidfd_exited(pidfd: BorrowedFd<'_>) -> bool {
    revents_now(pidfd) != Some(0)
}

/// Answers notification `id` by letting the call run as it is (only for calls whose
/// arguments nothing reads again: the kernel reads them after this answer).
pub fn notif_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the kernel's flag (1) as the response's u32 field"
    )]
    let mut r = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: the ioctl reads one `seccomp_notif_resp` through the pointer, a live one.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut r as *mut libc::seccomp_notif_resp,
        )
    })
    .map(|_| ())
}

/// The calling thread's id.
#[cfg(test)]
#[allow(
    clippy::cast_possible_truncation,
    reason = "a tid: at most the kernel's pid_max (2^22), a pid_t"
)]
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes nothing and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// Runs `f` in a forked child and tells whether it returned true (for tests that change
/// what is the whole process's, such as the umask).
#[cfg(test)]
pub fn in_child(f: impl FnOnce() -> bool) -> bool {
    // SAFETY: the child runs `f` and leaves with _exit; the test binary's other threads
    // are not in the child, and `f` takes no lock they could hold (it allocates: glibc's
    // malloc is fork-safe).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = f();
        // SAFETY: _exit ends the child at once, running no atexit handler.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    if pid < 0 {
        return false;
    }
    let mut st = 0;
    // SAFETY: waits for the child forked above; `st` is a live int.
    let r = unsafe { libc::waitpid(pid, &mut st, 0) };
    r == pid && libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0
}

/// Whether the listener says every process with its filter is gone (POLLHUP).
pub fn hung_up(listener: BorrowedFd<'_>) -> bool {
    revents_now(listener).is_some_and(|r| r & libc::POLLHUP != 0)
}

/// Asks the kernel to wake the receiver on the notifying task's CPU; ignored where the
/// kernel does not know the flag.
pub fn notif_sync_wake_up(listener: BorrowedFd<'_>) {
    // SAFETY: SECCOMP_IOCTL_NOTIF_SET_FLAGS takes its flags as the integer argument.
    let _ = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            1 as libc::c_ulong, // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
        )
    };
}

/// Answers notification `id`: the call returns `val`, or fails with `errno` when not 0.
pub fn notif_send(listener: BorrowedFd<'_>, id: u64, val: i64, errno: i32) -> io::Result<()> {
    let mut r = libc::seccomp_notif_resp {
        id,
        val,
        error: -errno,
        flags: 0,
    };
    // SAFETY: the ioctl reads one `seccomp_notif_resp` through the pointer, a live one.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut r as *mut libc::seccomp_notif_resp,
        )
    })
    .map(|_| ())
}

/// Whether notification `id` is still pending (its caller still waits in the same call).
pub fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64 through the pointer, a live one.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// Installs `fd` in the caller of notification `id` and answers the call with the new fd's
/// number in one step (`SECCOMP_ADDFD_FLAG_SEND`). `cloexec` sets O_CLOEXEC on it.
pub fn notif_addfd_send(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    cloexec: bool,
) -> io::Result<i32> {
    // A borrowed fd is never negative.
    let srcfd =
        u32::try_from(fd.as_raw_fd()).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the kernel's flag (2) as the request's u32 field"
    )]
    let mut a = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one `seccomp_notif_addfd` through the pointer, a live one.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &mut a as *mut libc::seccomp_notif_addfd,
        )
    })
}

/// Reads from `addr` in process `pid` into `buf`; how many bytes were read (fewer at the
/// end of the caller's mapped memory).
pub fn read_mem(pid: libc::pid_t, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // An address past usize is none of the caller's (EFAULT, as the kernel answers).
    let addr = usize::try_from(addr).map_err(|_| io::Error::from_raw_os_error(libc::EFAULT))?;
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, live and writable for its whole length; the remote
    // address is only read by the kernel, in the other process, with its own checks.
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    // Negative (-1) is the only value that does not convert.
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// A pidfd of thread `tid` (`PIDFD_THREAD`), or of its process on a kernel without it.
pub fn pidfd_open(tid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
    let r = own(unsafe {
        libc::syscall(
            libc::SYS_pidfd_open,
            tid,
            libc::PIDFD_THREAD as libc::c_uint,
        )
    });
    match r {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            // SAFETY: as above, without flags.
            own(unsafe { libc::syscall(libc::SYS_pidfd_open, tid, 0) })
        }
        r => r,
    }
}

/// A duplicate of fd `fd` of the process behind `pidfd` (its open file, not a new open).
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd takes three integers and returns a new fd or -1.
    own(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) })
}

/// `openat2(dir, path, flags, mode, resolve)`.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    // SAFETY: `open_how` is plain data; all zeroes is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    // No open flag is the sign bit: a negative `flags` is refused as the kernel refuses it.
    how.flags = u64::try_from(flags | libc::O_CLOEXEC)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    how.mode = u64::from(mode);
    how.resolve = resolve;
    // SAFETY: `path` is NUL-terminated and `how` a live `open_how` whose size is passed;
    // the kernel only reads both.
    own(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    })
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`.
pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and outlives the call.
    own(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    }
    .into())
}

/// `fstatat(dir, name, flags)`; an empty `name` with AT_EMPTY_PATH is `dir` itself.
pub fn fstatat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> io::Result<libc::stat> {
    // SAFETY: `stat` is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated; the kernel writes one `stat` through the pointer.
    check(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, flags) })?;
    Ok(st)
}

/// The target of the link `name` in `dir` (bytes, at most 4096).
pub fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4097];
    // SAFETY: `name` is NUL-terminated; the kernel writes at most `buf.len()` bytes into
    // `buf`, which is live and writable.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // Not negative (checked above).
    let n = n.unsigned_abs();
    if n >= buf.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    buf.truncate(n);
    Ok(buf)
}

fn cst(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The path of an fd of this process as the kernel names it (`/proc/self/fd/N`).
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| std::os::unix::ffi::OsStringExt::into_vec(p.into_os_string()))
}

/// Opens this process's `fd` again through `/proc/self/fd/N` with `flags` (the same file,
/// a new open file description).
pub fn reopen(fd: BorrowedFd<'_>, flags: i32) -> io::Result<OwnedFd> {
    let p = cst(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_bytes())?;
    // SAFETY: `p` is NUL-terminated and outlives the call.
    own(unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC) }.into())
}

pub fn renameat2(
    od: BorrowedFd<'_>,
    on: &CStr,
    nd: BorrowedFd<'_>,
    nn: &CStr,
    flags: u32,
) -> io::Result<()> {
    // SAFETY: both names are NUL-terminated and outlive the call.
    check_l(unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            od.as_raw_fd(),
            on.as_ptr(),
            nd.as_raw_fd(),
            nn.as_ptr(),
            flags,
        )
    })
    .map(|_| ())
}

pub fn linkat(
    od: BorrowedFd<'_>,
    on: &CStr,
    nd: BorrowedFd<'_>,
    nn: &CStr,
    flags: i32,
) -> io::Result<()> {
    // SAFETY: both names are NUL-terminated and outlive the call.
    check(unsafe {
        libc::linkat(
            od.as_raw_fd(),
            on.as_ptr(),
            nd.as_raw_fd(),
            nn.as_ptr(),
            flags,
        )
    })
    .map(|_| ())
}

pub fn unlinkat(d: BorrowedFd<'_>, n: &CStr, flags: i32) -> io::Result<()> {
    // SAFETY: `n` is NUL-terminated and outlives the call.
    check(unsafe { libc::unlinkat(d.as_raw_fd(), n.as_ptr(), flags) }).map(|_| ())
}

pub fn mkdirat(d: BorrowedFd<'_>, n: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: `n` is NUL-terminated and outlives the call.
    check(unsafe { libc::mkdirat(d.as_raw_fd(), n.as_ptr(), mode as libc::mode_t) }).map(|_| ())
}

pub fn mknodat(d: BorrowedFd<'_>, n: &CStr, mode: u32, dev: u64) -> io::Result<()> {
    // SAFETY: `n` is NUL-terminated and outlives the call.
    check(unsafe { libc::mknodat(d.as_raw_fd(), n.as_ptr(), mode as libc::mode_t, dev) })
        .map(|_| ())
}

pub fn symlinkat(target: &CStr, d: BorrowedFd<'_>, n: &CStr) -> io::Result<()> {
    // SAFETY: both strings are NUL-terminated and outlive the call.
    check(unsafe { libc::symlinkat(target.as_ptr(), d.as_raw_fd(), n.as_ptr()) }).map(|_| ())
}

/// `fchmodat2(d, n, mode, flags)`, or `fchmodat` when `flags` is 0.
pub fn fchmodat(d: BorrowedFd<'_>, n: &CStr, mode: u32, flags: i32) -> io::Result<()> {
    // SAFETY: `n` is NUL-terminated and outlives the call.
    check_l(unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            d.as_raw_fd(),
            n.as_ptr(),
            mode as libc::mode_t,
            flags,
        )
    })
    .map(|_| ())
}

pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: fchmod takes an fd and a mode.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) }).map(|_| ())
}

pub fn ftruncate(fd: BorrowedFd<'_>, len: i64) -> io::Result<()> {
    // SAFETY: ftruncate takes an fd and a length.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }).map(|_| ())
}

pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: `stat` is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes one `stat` through the pointer, a live one.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// Sets this process's umask; the old one.
pub fn umask(m: u32) -> u32 {
    // SAFETY: umask takes a mode and cannot fail.
    unsafe { libc::umask(m as libc::mode_t) as u32 }
}

/// `AT_FDCWD` as a borrowed fd, for the `*at` calls given an absolute path.
pub fn at_fdcwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is no fd of this process but a value every `*at` call takes for the
    // working directory; nothing closes it, so the borrow never dangles.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// Writes `buf` at `addr` in process `pid` (a result the caller's call hands back, such as
/// `sendmmsg`'s counts); how many bytes were written.
pub fn write_mem(pid: libc::pid_t, addr: u64, buf: &[u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // An address past usize is none of the caller's (EFAULT, as the kernel answers).
    let addr = usize::try_from(addr).map_err(|_| io::Error::from_raw_os_error(libc::EFAULT))?;
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, live for its whole length and only read; the remote
    // address is written by the kernel, in the other process, with its own checks.
    let r = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    // Negative (-1) is the only value that does not convert.
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// A caller's `struct msghdr` at `addr`, as plain values (its pointers are the caller's).
#[derive(Debug, Clone, Copy)]
pub struct MsgHdr {
    pub name: u64,
    pub namelen: u32,
    pub iov: u64,
    pub iovlen: u64,
    pub control: u64,
    pub controllen: u64,
}

/// The size of a `struct msghdr` (and of the head of a `struct mmsghdr`).
pub const MSGHDR_SIZE: usize = std::mem::size_of::<libc::msghdr>();
/// The size of a `struct mmsghdr`.
pub const MMSGHDR_SIZE: usize = std::mem::size_of::<libc::mmsghdr>();

/// Reads the caller's `struct msghdr` at `addr`.
pub fn read_msghdr(pid: libc::pid_t, addr: u64) -> io::Result<MsgHdr> {
    let mut b = [0u8; MSGHDR_SIZE];
    if read_mem(pid, addr, &mut b)? != MSGHDR_SIZE {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    Ok(MsgHdr {
        name: u64_at(std::mem::offset_of!(libc::msghdr, msg_name)),
        namelen: u32_at(std::mem::offset_of!(libc::msghdr, msg_namelen)),
        iov: u64_at(std::mem::offset_of!(libc::msghdr, msg_iov)),
        iovlen: u64_at(std::mem::offset_of!(libc::msghdr, msg_iovlen)),
        control: u64_at(std::mem::offset_of!(libc::msghdr, msg_control)),
        controllen: u64_at(std::mem::offset_of!(libc::msghdr, msg_controllen)),
    })
}

/// `connect(2)` of `sock` to the address bytes `addr` (a sockaddr as the caller gave it).
#[allow(
    clippy::cast_possible_truncation,
    reason = "a sockaddr's length: at most MAX_ADDR bytes (a sockaddr_storage), or a short \
              /proc/self/fd path"
)]
pub fn connect(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: `addr` is live for its length, which is passed with it; the kernel copies it.
    check(unsafe {
        libc::connect(
            sock.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// `sendmsg(2)` on `sock` of `data` to `name` (none: the socket's peer) with the control
/// bytes `control` (already holding this process's fds), `flags` plus MSG_NOSIGNAL (a
/// broken pipe is the caller's to be signalled, not the init's).
pub fn sendmsg(
    sock: BorrowedFd<'_>,
    name: Option<&[u8]>,
    data: &[u8],
    control: &mut [u8],
    flags: i32,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: all zeroes is a valid msghdr (null pointers, zero lengths).
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some(n) = name {
        m.msg_name = n.as_ptr() as *mut libc::c_void;
        // Past socklen_t is past a sockaddr_storage: EINVAL, as the kernel answers.
        m.msg_namelen = libc::socklen_t::try_from(n.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    }
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    if !control.is_empty() {
        m.msg_control = control.as_mut_ptr().cast();
        m.msg_controllen = control.len();
    }
    // SAFETY: every pointer in `m` points at memory live for this call (`name`, `iov` and
    // `data`, `control`) with the length given beside it; the kernel only reads them.
    let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &m, flags | libc::MSG_NOSIGNAL) };
    // Negative (-1) is the only value that does not convert.
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// The type of socket `sock` (SOCK_STREAM, SOCK_DGRAM, ...).
pub fn socket_type(sock: BorrowedFd<'_>) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the size of an int: 4 bytes"
    )]
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes one int into `v` and its size into `len`, both live.
    check(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// The TCP state of `sock` (`tcpi_state`, the first byte of `TCP_INFO`: 7 is
/// `TCP_CLOSE`). Reading it changes nothing of the socket (its pending error stays).
pub fn tcp_state(sock: BorrowedFd<'_>) -> io::Result<u8> {
    // `struct tcp_info` starts with `__u8 tcpi_state`; the kernel copies at most `len`
    // bytes of it.
    let mut info = [0u8; 8];
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the size of the buffer: 8 bytes"
    )]
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `info` and the length into `len`,
    // both live.
    check(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    Ok(info[0])
}

/// Sends SIGPIPE to thread `tid` of process `pid` (what its own write to a broken pipe
/// would have done).
pub fn sigpipe(pid: libc::pid_t, tid: libc::pid_t) {
    // SAFETY: tgkill takes three integers; a thread that is gone makes it fail, harmlessly.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGPIPE) };
}
