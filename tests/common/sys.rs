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

/// A new pseudo-terminal of `rows` x `cols`, both fds close-on-exec: (master, slave).
pub fn pty_pair(rows: u16, cols: u16) -> std::io::Result<(File, File)> {
    use std::os::fd::AsRawFd;
    let (m, s) = openpty()?;
    for f in [&m, &s] {
        // SAFETY: fcntl F_SETFD on an fd this process owns.
        if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    set_winsize(m.as_raw_fd(), rows, cols)?;
    Ok((m, s))
}

/// Sets a terminal's window size (TIOCSWINSZ; on a master, the kernel signals the slave's
/// foreground group).
pub fn set_winsize(fd: std::os::fd::RawFd, rows: u16, cols: u16) -> std::io::Result<()> {
    let w = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize through the pointer, which points at a live one.
    if unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &w) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A terminal's settings as comparable values: (iflag, oflag, cflag, lflag, cc).
pub fn termios(fd: std::os::fd::RawFd) -> std::io::Result<(u32, u32, u32, u32, Vec<u8>)> {
    // SAFETY: termios is plain data; all-zero is a valid value for the kernel to overwrite.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a live termios the call writes.
    if unsafe { libc::tcgetattr(fd, &mut t) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((t.c_iflag, t.c_oflag, t.c_cflag, t.c_lflag, t.c_cc.to_vec()))
}

/// Makes `cmd`'s process lead a new session whose controlling terminal is `tty` (an fd
/// open in this process until the spawn), as a terminal emulator or tmux starts a shell.
pub fn on_controlling_terminal(cmd: &mut std::process::Command, tty: std::os::fd::RawFd) {
    use std::os::unix::process::CommandExt;
    let lead = move || {
        // SAFETY: setsid takes no arguments.
        if unsafe { libc::setsid() } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: TIOCSCTTY takes an integer; `tty` is open in the child (inherited).
        if unsafe { libc::ioctl(tty, libc::TIOCSCTTY, 0) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and calls only setsid and
    // ioctl (async-signal-safe), allocating nothing; `tty` stays open in the parent until
    // the spawn returns, so the child's copy is valid.
    unsafe { cmd.pre_exec(lead) };
}

/// Sends `sig` to `pid` (a negative pid: to that process group).
pub fn kill(pid: i32, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill takes plain integers.
    if unsafe { libc::kill(pid, sig) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `cmd`'s process join the cgroups whose `cgroup.procs` are open at `fds` (it writes
/// `0` to each, as `efr-launch --join-cgroup-fd` does) before it execs. The fds stay open
/// in this process until `cmd` is dropped; they are close-on-exec in the child.
pub fn join_before_exec(cmd: &mut std::process::Command, fds: Vec<std::os::fd::OwnedFd>) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let raw: Vec<std::os::fd::RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let join = move || {
        let _open = &fds;
        for &fd in &raw {
            // SAFETY: write of one byte from a static buffer to an fd open in the child
            // (inherited: `fds` is alive in the parent until the spawn returns).
            if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and calls only write
    // (async-signal-safe), allocating nothing (`raw` was made before).
    unsafe { cmd.pre_exec(join) };
}
