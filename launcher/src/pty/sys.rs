//! The terminal's system calls: the call's pty pair, termios and window size, sessions and
//! process groups, and the relay's own signal pipe. Every `unsafe` block of [`super`] lives
//! here, each with the invariant that makes it sound.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::sys::check;

/// A pty pair opened from `/dev/ptmx` of the calling process's view: (master, slave), both
/// close-on-exec, neither the caller's controlling terminal. The slave is its devpts
/// instance's `/dev/pts/N`, so it has a name where that instance is mounted.
pub fn openpty() -> io::Result<(OwnedFd, OwnedFd)> {
    let master = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open("/dev/ptmx")
        .map_err(|e| io::Error::new(e.kind(), format!("open /dev/ptmx: {e}")))?;
    let master = OwnedFd::from(master);
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int through the pointer, which points at a live int.
    check(unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock) })
        .map_err(|e| io::Error::new(e.kind(), format!("unlock the pty: {e}")))?;
    // TIOCGPTPEER (Linux 4.13) opens the slave from the master itself: no path lookup that
    // another devpts mounted over /dev/pts could divert.
    // SAFETY: TIOCGPTPEER takes open flags as an integer and returns a new fd or -1.
    let fd = unsafe {
        libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    let fd =
        check(fd).map_err(|e| io::Error::new(e.kind(), format!("open the pty's slave: {e}")))?;
    // SAFETY: the kernel just made this fd for this process; nothing else owns it.
    let slave = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok((master, slave))
}

/// tcgetattr(3).
pub fn tcgetattr(fd: RawFd) -> io::Result<libc::termios> {
    // SAFETY: termios is plain data; all-zero is a valid value for the kernel to overwrite.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a live termios the call writes.
    check(unsafe { libc::tcgetattr(fd, &mut t) })?;
    Ok(t)
}

/// tcsetattr(3) with TCSANOW.
pub fn tcsetattr(fd: RawFd, t: &libc::termios) -> io::Result<()> {
    // SAFETY: `t` is a live termios the call reads.
    check(unsafe { libc::tcsetattr(fd, libc::TCSANOW, t) }).map(|_| ())
}

/// [`tcsetattr`] with SIGTTOU blocked in the calling thread, so a process that is not (or
/// no longer) in the terminal's foreground group still sets it instead of being stopped
/// (the kernel lets a caller that blocks SIGTTOU change the terminal).
pub fn tcsetattr_anyway(fd: RawFd, t: &libc::termios) -> io::Result<()> {
    with_sigttou_blocked(|| tcsetattr(fd, t))
}

fn with_sigttou_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain data; all-zero is the empty set on Linux.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, the old mask pthread_sigmask writes.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid signal set the call modifies.
    unsafe { libc::sigaddset(&mut set, libc::SIGTTOU) };
    // SAFETY: both sets are live; this changes only the calling thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
    let r = f();
    // SAFETY: `old` is the mask pthread_sigmask gave above; restoring it.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    r
}

/// The settings of raw mode (cfmakeraw(3)): every byte goes through as typed, nothing
/// echoed, no signal characters, no output processing.
pub fn make_raw(t: &libc::termios) -> libc::termios {
    let mut r = *t;
    // SAFETY: cfmakeraw only changes the flags of the live termios it is given.
    unsafe { libc::cfmakeraw(&mut r) };
    r.c_cc[libc::VMIN] = 1;
    r.c_cc[libc::VTIME] = 0;
    r
}

/// The window size of a terminal (TIOCGWINSZ).
pub fn get_winsize(fd: RawFd) -> io::Result<libc::winsize> {
    let mut w = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize through the pointer, which points at a live one.
    check(unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut w) })?;
    Ok(w)
}

/// Sets the window size of a terminal (TIOCSWINSZ; on a pty's master it is the slave's, and
/// the kernel sends SIGWINCH to the slave's foreground group when it changed).
pub fn set_winsize(fd: RawFd, w: &libc::winsize) -> io::Result<()> {
    // SAFETY: TIOCSWINSZ reads one winsize through the pointer, which points at a live one.
    check(unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, w) }).map(|_| ())
}

/// Makes the terminal `fd` the caller's controlling terminal (TIOCSCTTY; the caller is a
/// session leader without one).
pub fn set_controlling(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: TIOCSCTTY takes an integer (0: do not steal it from another session).
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSCTTY, 0) }).map(|_| ())
}

/// Makes the caller's process group the foreground group of its controlling terminal `fd`
/// (SIGTTOU blocked meanwhile: the caller starts in a background group).
pub fn take_foreground(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: getpgrp has no preconditions.
    let pgrp = unsafe { libc::getpgrp() };
    // SAFETY: tcsetpgrp takes integers.
    with_sigttou_blocked(|| check(unsafe { libc::tcsetpgrp(fd.as_raw_fd(), pgrp) })).map(|_| ())
}

/// The foreground process group of the terminal `fd` (for a pty master: of its slave), as
/// a pid of the caller's pid namespace.
pub fn foreground_group(fd: RawFd) -> io::Result<libc::pid_t> {
    // SAFETY: tcgetpgrp takes an integer.
    check(unsafe { libc::tcgetpgrp(fd) })
}

/// The session of the terminal `fd` (for a pty master: of its slave; TIOCGSID), as a pid
/// of the caller's pid namespace.
pub fn session_of(fd: RawFd) -> io::Result<libc::pid_t> {
    let mut sid: libc::pid_t = 0;
    // SAFETY: TIOCGSID writes one pid_t through the pointer, which points at a live one.
    check(unsafe { libc::ioctl(fd, libc::TIOCGSID, &mut sid) })?;
    Ok(sid)
}

/// The caller's process group.
pub fn getpgrp() -> libc::pid_t {
    // SAFETY: getpgrp has no preconditions.
    unsafe { libc::getpgrp() }
}

/// Puts the caller in a process group of its own (setpgid(0, 0)).
pub fn own_group() -> io::Result<()> {
    // SAFETY: setpgid takes integers.
    check(unsafe { libc::setpgid(0, 0) }).map(|_| ())
}

/// Starts a new session (and drops the controlling terminal), unless the caller leads one
/// already.
pub fn new_session() -> io::Result<()> {
    // SAFETY: getsid takes an integer (0: the caller).
    let sid = unsafe { libc::getsid(0) };
    if sid == crate::sys::getpid() {
        return Ok(());
    }
    // SAFETY: setsid has no arguments.
    check(unsafe { libc::setsid() }).map(|_| ())
}

/// The write end of the relay's signal pipe (-1 before [`relay_signals`]).
static RELAY_SIG_W: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_relay_signal(sig: libc::c_int) {
    let fd = RELAY_SIG_W.load(Ordering::Relaxed);
    if fd >= 0 {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a signal number: SIGWINCH or SIGCONT, below 65"
        )]
        let b = [sig as u8];
        // SAFETY: write(2) is async-signal-safe; `b` is valid for 1 byte.
        unsafe { libc::write(fd, b.as_ptr().cast(), 1) };
    }
}

/// Routes SIGWINCH and SIGCONT to a pipe of the relay: each delivery writes the signal's
/// number as one byte; the read end is returned (non-blocking). A second call replaces the
/// first pipe (a retried launch).
pub fn relay_signals() -> io::Result<OwnedFd> {
    let (r, w) = crate::sys::pipe()?;
    crate::sys::set_nonblocking(r)?;
    crate::sys::set_nonblocking(w)?;
    let old = RELAY_SIG_W.swap(w, Ordering::SeqCst);
    if old >= 0 {
        crate::sys::close(old);
    }
    for s in [libc::SIGWINCH, libc::SIGCONT] {
        // SAFETY: sigaction is plain data; all-zero is a valid value before filling it in.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_relay_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: the handler only calls async-signal-safe write(2).
        check(unsafe { libc::sigaction(s, &sa, std::ptr::null_mut()) })?;
    }
    // SAFETY: `r` was made by pipe() above and is owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// An all-zero termios, to fill in.
pub fn blank_termios() -> libc::termios {
    // SAFETY: termios is plain data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// One write(2); the bytes written.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes of reads.
    let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    // Negative (-1) is the only value that does not convert.
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// poll(2) on `fds` (a negative fd is left out); the number of fds with events.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is a live slice of `fds.len()` pollfd structs the call reads and writes.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    // Negative (-1) is the only value that does not convert.
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}
