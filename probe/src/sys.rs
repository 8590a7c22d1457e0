//! Thin safe wrappers over the system calls the probe makes. Every `unsafe` block of the
//! crate lives here, each with the invariant that makes it sound.
//!
//! The self-tests tell errno values apart (EPERM from EBADF, EINVAL, ENOSYS, ...), so each
//! wrapper hands back the call's result or its raw errno, read right after the call.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// The result of a raw call: its return value, or the errno it set.
pub type Raw = Result<i64, i32>;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn raw(r: i64) -> Raw {
    if r < 0 { Err(errno()) } else { Ok(r) }
}

/// The effective user id of the process.
pub fn geteuid() -> libc::uid_t {
    // SAFETY: geteuid takes no arguments, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// kill(2): sends `sig` to `pid` (0 only checks the permission).
pub fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes plain integers and touches no memory of ours; the caller names
    // the process it means (its own child, or a null signal that delivers nothing).
    let r = unsafe { libc::kill(pid, sig) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// socket(2) of `domain` and `ty`, owned so that it is closed when dropped.
pub fn socket(domain: libc::c_int, ty: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes plain integers and touches no memory of ours.
    let fd = unsafe { libc::socket(domain, ty, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2): a valid fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// unshare(2) with `flags`. The probe only passes an invalid flag, which changes nothing.
pub fn unshare(flags: libc::c_int) -> Raw {
    // SAFETY: unshare takes an integer and touches no memory of ours; with an invalid flag
    // (the probe's only use) it is refused before anything changes.
    raw(i64::from(unsafe { libc::unshare(flags) }))
}

/// keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_THREAD_KEYRING, create = 0): a read-only query.
pub fn keyctl_thread_keyring_id() -> Raw {
    const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
    const KEY_SPEC_THREAD_KEYRING: libc::c_long = -1;
    // SAFETY: GET_KEYRING_ID takes integers only; with create = 0 it does not create the
    // thread keyring, so nothing changes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_GET_KEYRING_ID,
            KEY_SPEC_THREAD_KEYRING,
            0 as libc::c_long,
        )
    };
    raw(r)
}

/// ioctl(-1, TIOCSTI, NULL): EBADF from the kernel, unless a filter answers first.
pub fn ioctl_tiocsti_bad_fd() -> Raw {
    // SAFETY: fd -1 is never valid, so the kernel fails with EBADF before it reads the
    // (null) argument.
    raw(i64::from(unsafe {
        libc::ioctl(-1, libc::TIOCSTI, std::ptr::null::<u8>())
    }))
}

/// clone3(NULL, 0): EINVAL from the kernel (the size is too small), unless a filter
/// answers first.
pub fn clone3_null() -> Raw {
    // SAFETY: a size of 0 is below the smallest clone_args, so the kernel refuses the call
    // before it reads the (null) pointer or creates anything.
    raw(unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) })
}

/// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): the kernel's
/// Landlock ABI, or the errno when it has none.
pub fn landlock_abi_version() -> Raw {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with the VERSION flag, a null attribute pointer and a size of 0, the call
    // reads no memory and creates no ruleset: it only returns a number.
    raw(unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    })
}

/// getrandom(2) into `buf`: the number of bytes written.
pub fn getrandom(buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, exclusively borrowed buffer; getrandom writes at most
    // `buf.len()` bytes into it.
    let r = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    // Negative (-1) is the only value that does not convert.
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}
