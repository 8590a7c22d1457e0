//! The tests' own system calls (the only `unsafe` of the test crate).

use std::fs::File;
use std::os::fd::FromRawFd;

/// A new pseudo-terminal: (master, slave).
pub fn openpty() -> std::io::Result<(File, File)> {
    let mut master: libc::c_int = -1;
    let mut slave: libc::c_int = -1;
    // SAFETY: openpty writes two fds into the pointers given; name, termios and winsize may
    // be NULL.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: openpty just returned this fd, owned here only.
    let m = unsafe { File::from_raw_fd(master) };
    // SAFETY: as above.
    let s = unsafe { File::from_raw_fd(slave) };
    Ok((m, s))
}

/// Sends `sig` to `pid` (a negative pid: to that process group).
pub fn kill(pid: i32, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill takes plain integers.
    if unsafe { libc::kill(pid, sig) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
