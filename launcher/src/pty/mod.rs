//! The call's own terminal.
//!
//! A contained call never gets the user's terminal. Its init starts a session of its own
//! (so nothing of the call has the user's terminal as controlling terminal, and `/dev/tty`
//! inside opens nothing without a pty), and when the launcher's stdio holds a terminal:
//!
//! * the launcher saves the terminal's settings and window size and hands them to the init
//!   ([`TerminalSpec`]);
//! * the init opens a pty from the call's own devpts instance (`/dev/ptmx` of its view), so
//!   the slave is `/dev/pts/N` inside and `tty`/`ttyname` work, gives it those settings and
//!   size, makes it its controlling terminal (`/dev/tty` inside is that pty, for the line
//!   and for what the init's supervisor opens on its behalf), puts `/dev/null` in place of
//!   its own copies of the user's terminal, and sends the master to the launcher
//!   ([`open_inside`]);
//! * the line takes a process group of its own, the pty's foreground, and the slave on each
//!   of fds 0-2 that was the user's terminal ([`attach_line`]);
//! * the launcher relays between the master and the user's terminal on a thread of its own
//!   ([`Relay`]): the user's terminal in raw mode meanwhile (so `^C`, `^Z` and `stty` act on
//!   the call's pty, whose line discipline signals the line's foreground group), the keys
//!   typed before the line has taken the pty's foreground held until it has (a `^C` right
//!   after the start would signal only the init), window size changes passed on
//!   (SIGWINCH), the output through [`filter::Filter`] (escape sequences that act outside
//!   the screen dropped), and the settings restored at the end.
//!
//! When the line stops (`^Z`: its main process is stopped, the init reports `stopped N`),
//! the launcher restores the user's terminal and stops its own process group with the same
//! signal, as the terminal would have done to the job; on SIGCONT (`fg`) it puts the terminal
//! back in raw mode and continues the line (through the init). A launcher whose process
//! group is orphaned (no job-control shell above it) cannot be continued by anyone, so there
//! it continues the line at once: `^Z` does nothing. A launcher in the background relays
//! output only and reads no input.

pub mod filter;
mod sys;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Terminal settings (termios) as the init gets them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The input modes (`c_iflag`: `ICRNL`, `IXON`, ...).
    pub iflag: u32,
    /// The output modes (`c_oflag`: `OPOST`, `ONLCR`, ...).
    pub oflag: u32,
    /// The control modes (`c_cflag`: character size, parity, baud bits).
    pub cflag: u32,
    /// The local modes (`c_lflag`: `ICANON`, `ECHO`, `ISIG`, ...).
    pub lflag: u32,
    /// The line discipline (`c_line`).
    pub line: u8,
    /// The special characters (`c_cc`: `VINTR`, `VSUSP`, `VEOF`, ... and `VMIN`/`VTIME`),
    /// by index.
    pub cc: Vec<u8>,
    /// The input speed (`c_ispeed`).
    pub ispeed: u32,
    /// The output speed (`c_ospeed`).
    pub ospeed: u32,
}

impl Settings {
    fn of(t: &libc::termios) -> Settings {
        Settings {
            iflag: t.c_iflag,
            oflag: t.c_oflag,
            cflag: t.c_cflag,
            lflag: t.c_lflag,
            line: t.c_line,
            cc: t.c_cc.to_vec(),
            ispeed: t.c_ispeed,
            ospeed: t.c_ospeed,
        }
    }

    fn termios(&self) -> libc::termios {
        let mut t = sys::blank_termios();
        t.c_iflag = self.iflag;
        t.c_oflag = self.oflag;
        t.c_cflag = self.cflag;
        t.c_lflag = self.lflag;
        t.c_line = self.line;
        for (d, s) in t.c_cc.iter_mut().zip(&self.cc) {
            *d = *s;
        }
        t.c_ispeed = self.ispeed;
        t.c_ospeed = self.ospeed;
        t
    }
}

/// What the init needs to give the call its own pty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalSpec {
    /// The init's end of the socket the master goes to the launcher over.
    pub sock: RawFd,
    /// The fds of 0, 1 and 2 that were the user's terminal: the line gets the slave there.
    pub fds: Vec<RawFd>,
    /// The user's terminal's settings at launch, the pty's first ones.
    pub settings: Settings,
    /// The user's terminal's height in rows at launch (`ws_row`), the pty's first.
    pub rows: u16,
    /// Its width in columns (`ws_col`).
    pub cols: u16,
    /// Its width in pixels (`ws_xpixel`, 0 when the terminal does not say).
    pub xpixel: u16,
    /// Its height in pixels (`ws_ypixel`, 0 when the terminal does not say).
    pub ypixel: u16,
}

/// The first byte of the message that carries the master to the launcher.
const MASTER: u8 = b'T';

/// Why the call's pty could not be made, handed over or relayed: the step (naming the fd
/// where there is one) and the system's error.
#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    /// A step that failed with a system error.
    #[error("{what}: {source}")]
    Io {
        /// The step, naming the fd where there is one.
        what: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The master could not be sent to the launcher.
    #[error("the call's pty to the launcher: {0}")]
    Send(#[source] efr_fdpass::SendError),
    /// The spec names fds other than 0, 1 and 2.
    #[error("terminal: fds {0:?} are not a choice of 0, 1 and 2")]
    Fds(Vec<RawFd>),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> PtyError {
    let what = what.into();
    move |source| PtyError::Io { what, source }
}

/// The init starts a session of its own: neither it nor the line has the user's terminal
/// as controlling terminal from here on (`/dev/tty` fails with ENXIO without a pty).
pub fn leave_session() -> Result<(), PtyError> {
    sys::new_session().map_err(io("new session"))
}

/// The call's pty as the init holds it for the line.
#[derive(Debug)]
pub struct LineEnd {
    slave: OwnedFd,
    fds: Vec<RawFd>,
}

/// In the init, a session leader ([`leave_session`]): opens the call's pty, gives it the
/// user's settings and size, makes it the controlling terminal, replaces its own copies of
/// the user's terminal with `/dev/null`, and sends the master to the launcher.
pub fn open_inside(spec: &TerminalSpec) -> Result<LineEnd, PtyError> {
    if spec.fds.is_empty() || spec.fds.iter().any(|&f| !(0..=2).contains(&f)) {
        return Err(PtyError::Fds(spec.fds.clone()));
    }
    let (master, slave) = sys::openpty().map_err(io("the call's pty"))?;
    sys::tcsetattr(slave.as_raw_fd(), &spec.settings.termios())
        .map_err(io("the call's pty settings"))?;
    let size = libc::winsize {
        ws_row: spec.rows,
        ws_col: spec.cols,
        ws_xpixel: spec.xpixel,
        ws_ypixel: spec.ypixel,
    };
    sys::set_winsize(slave.as_raw_fd(), &size).map_err(io("the call's pty size"))?;
    sys::set_controlling(slave.as_fd()).map_err(io("the call's pty as controlling terminal"))?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(io("/dev/null"))?;
    for &fd in &spec.fds {
        crate::sys::dup2(null.as_raw_fd(), fd)
            .map_err(io(format!("/dev/null on fd {fd} of the init")))?;
    }
    let sock = crate::sys::owned(spec.sock).map_err(io("the call's pty socket"))?;
    efr_fdpass::send_fds(sock.as_fd(), &[MASTER], &[master.as_fd()]).map_err(PtyError::Send)?;
    drop(sock);
    Ok(LineEnd {
        slave,
        fds: spec.fds.clone(),
    })
}

/// In the line's process before exec (a contained line): a process group of its own and,
/// with the call's pty, that group in the pty's foreground and the slave on the fds that
/// were the user's terminal.
pub fn attach_line(t: Option<&LineEnd>) -> Result<(), PtyError> {
    sys::own_group().map_err(io("process group"))?;
    if let Some(t) = t {
        sys::take_foreground(t.slave.as_fd()).map_err(io("foreground of the call's pty"))?;
        for &fd in &t.fds {
            crate::sys::dup2(t.slave.as_raw_fd(), fd)
                .map_err(io(format!("the call's pty on fd {fd}")))?;
        }
    }
    Ok(())
}

/// The user's terminal as the launcher found it on its stdio.
#[derive(Debug)]
struct Term {
    /// The fd whose settings are changed and restored (the first terminal of 0-2).
    ctl: RawFd,
    /// Where the user's keys are read.
    input: RawFd,
    /// Where the call's output goes.
    output: RawFd,
    /// The call's stdout is the pty (fd 1 was the terminal): the terminal's output
    /// processing is turned off too. Otherwise what else writes to the terminal meanwhile
    /// (`efr-sandbox run ... | tee log`: tee) keeps its newlines; the call's pty already
    /// turned each of its newlines into CR LF, which the terminal's own processing makes
    /// CR CR LF (shown the same).
    all_raw: bool,
    /// Terminal fds the launcher opened itself (closed with the relay).
    _own: Vec<OwnedFd>,
    state: Mutex<TermState>,
}

#[derive(Debug)]
struct TermState {
    /// The settings to restore.
    saved: libc::termios,
    /// The launcher put the terminal in raw mode (and owes the restore).
    raw: bool,
    /// The launcher stopped its job because the line stopped: SIGCONT continues the line.
    suspended: bool,
}

impl Term {
    fn lock(&self) -> std::sync::MutexGuard<'_, TermState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the launcher is in the terminal's foreground group (it is when the terminal
    /// is no controlling terminal of its: no job control applies then).
    fn foreground(&self) -> bool {
        match sys::foreground_group(self.ctl) {
            Ok(pg) => pg == sys::getpgrp(),
            Err(_) => true,
        }
    }

    /// Raw mode, when in the foreground and not raw yet (the settings saved afresh: the
    /// user's shell may have changed them while the job was stopped).
    fn enter_raw(&self) {
        let mut st = self.lock();
        if st.raw || st.suspended || !self.foreground() {
            return;
        }
        if let Ok(t) = sys::tcgetattr(self.ctl) {
            st.saved = t;
        }
        let mut raw = sys::make_raw(&st.saved);
        if !self.all_raw {
            raw.c_oflag = st.saved.c_oflag;
        }
        if sys::tcsetattr(self.ctl, &raw).is_ok() {
            st.raw = true;
        }
    }

    /// The saved settings back, if the launcher changed them.
    fn restore(&self) {
        let mut st = self.lock();
        if st.raw {
            let _ = sys::tcsetattr_anyway(self.ctl, &st.saved);
            st.raw = false;
        }
    }

    fn reading(&self) -> bool {
        let st = self.lock();
        st.raw && !st.suspended
    }

    /// The user's terminal's size on the call's pty.
    fn pass_size(&self, master: RawFd) {
        if let Ok(w) = sys::get_winsize(self.ctl) {
            let _ = sys::set_winsize(master, &w);
        }
    }
}

/// Opens the terminal at `fd` again (`/proc/self/fd/N`) for the other direction.
fn reopen(fd: RawFd, write: bool) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(OwnedFd::from)
}

/// How long the relay may take to pass on the call's last output after its end.
const DRAIN: Duration = Duration::from_secs(2);

/// The launcher's side of the call's pty: detected before the spawn ([`Relay::detect`]),
/// started after it ([`Relay::start`]), ended with the call ([`Relay::finish`], also on
/// drop). The relay runs on a thread of its own, started after the backend forked.
#[derive(Debug)]
pub struct Relay {
    term: Arc<Term>,
    spec: TerminalSpec,
    /// The init's end of the socket (closed in the launcher once the backend has it).
    inner: Option<OwnedFd>,
    /// The launcher's end, until the thread takes it.
    mine: Option<OwnedFd>,
    /// Written to when the call has ended: the relay drains and ends.
    stop_w: Option<OwnedFd>,
    done: Option<std::sync::mpsc::Receiver<()>>,
    /// Whom a stopped line is continued through (see [`Line`]).
    line: Arc<Line>,
}

/// How the launcher reaches the line to continue it: the foreground group of the call's
/// pty (the line's group, as a pid of the launcher's namespace; found through the master)
/// and the init, which continues the line's group itself.
#[derive(Debug)]
struct Line {
    init: AtomicI32,
    /// The master's fd once the relay has it (-1 before).
    master: AtomicI32,
}

impl Line {
    /// SIGCONT to the line's group, directly and through the init.
    fn resume(&self) {
        let m = self.master.load(Ordering::SeqCst);
        if m >= 0 {
            if let Ok(pg) = sys::foreground_group(m) {
                if pg > 1 {
                    let _ = crate::sys::kill(-pg, libc::SIGCONT);
                }
            }
        }
        let init = self.init.load(Ordering::SeqCst);
        if init > 0 {
            let _ = crate::sys::kill(init, libc::SIGCONT);
        }
    }
}

impl Relay {
    /// A relay when one of fds 0-2 is a terminal; `None` when none is. Each fd that is a
    /// terminal gets the call's pty (whatever terminal it is); the output goes to fd 1 or 2
    /// (the first that is a terminal, else the terminal of fd 0 opened for writing) and the
    /// keys are read from fd 0 (or the terminal of fd 1 or 2 opened for reading).
    pub fn detect() -> Result<Option<Relay>, PtyError> {
        let ttys: Vec<RawFd> = (0..=2).filter(|&f| crate::sys::isatty(f)).collect();
        let Some(&ctl) = ttys.first() else {
            return Ok(None);
        };
        let saved = sys::tcgetattr(ctl).map_err(io(format!("terminal settings of fd {ctl}")))?;
        let size = sys::get_winsize(ctl).unwrap_or(libc::winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        });
        let mut own = Vec::new();
        let output = match ttys.iter().find(|&&f| f == 1 || f == 2) {
            Some(&f) => f,
            None => match reopen(ctl, true) {
                Some(o) => {
                    let f = o.as_raw_fd();
                    own.push(o);
                    f
                }
                None => ctl,
            },
        };
        let input = if ttys.contains(&0) {
            0
        } else {
            match reopen(ctl, false) {
                Some(o) => {
                    let f = o.as_raw_fd();
                    own.push(o);
                    f
                }
                None => ctl,
            }
        };
        let (inner, mine) = crate::sys::socketpair().map_err(io("terminal socket"))?;
        let spec = TerminalSpec {
            sock: inner.as_raw_fd(),
            fds: ttys.clone(),
            settings: Settings::of(&saved),
            rows: size.ws_row,
            cols: size.ws_col,
            xpixel: size.ws_xpixel,
            ypixel: size.ws_ypixel,
        };
        Ok(Some(Relay {
            term: Arc::new(Term {
                ctl,
                input,
                output,
                all_raw: ttys.contains(&1),
                _own: own,
                state: Mutex::new(TermState {
                    saved,
                    raw: false,
                    suspended: false,
                }),
            }),
            spec,
            inner: Some(inner),
            mine: Some(mine),
            stop_w: None,
            done: None,
            line: Arc::new(Line {
                init: AtomicI32::new(0),
                master: AtomicI32::new(-1),
            }),
        }))
    }

    /// What the init gets (its [`crate::child::init::InnerSpec`]'s `terminal`).
    pub fn spec(&self) -> TerminalSpec {
        self.spec.clone()
    }

    /// After the backend started: closes the launcher's copy of the init's end and starts
    /// the relay thread, which waits for the master, then relays. `init` is the pid a
    /// stopped line is continued through (see [`Relay::line_stopped`]).
    pub fn start(&mut self, init: libc::pid_t) -> Result<(), PtyError> {
        self.inner = None;
        self.line.init.store(init, Ordering::SeqCst);
        let Some(sock) = self.mine.take() else {
            return Ok(());
        };
        let (stop_r, stop_w) = crate::sys::pipe_owned().map_err(io("relay pipe"))?;
        self.stop_w = Some(stop_w);
        let sigs = sys::relay_signals().map_err(io("relay signals"))?;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        self.done = Some(done_rx);
        let term = self.term.clone();
        let line = self.line.clone();
        std::thread::Builder::new()
            .name("efr-pty".into())
            .spawn(move || {
                relay(&term, sock, stop_r, sigs, &line);
                term.restore();
                let _ = done_tx.send(());
            })
            .map_err(io("relay thread"))?;
        Ok(())
    }

    /// The init's pid changed (bubblewrap reported it).
    pub fn set_init(&self, init: libc::pid_t) {
        self.line.init.store(init, Ordering::SeqCst);
    }

    /// The line's main process stopped with `sig` (the init reported it): the user's
    /// terminal gets its settings back and the launcher's job stops with the same signal,
    /// as it would have outside the sandbox. Where nobody could continue the job (an
    /// orphaned process group), the line is continued at once instead.
    pub fn line_stopped(&self, sig: libc::c_int) {
        let sig = match sig {
            libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU | libc::SIGSTOP => sig,
            _ => libc::SIGTSTP,
        };
        if self.done.is_none() {
            return;
        }
        if group_orphaned() {
            self.line.resume();
            return;
        }
        {
            let mut st = self.term.lock();
            if st.raw {
                let _ = sys::tcsetattr_anyway(self.term.ctl, &st.saved);
                st.raw = false;
            }
            st.suspended = true;
        }
        // The relay thread continues the line on SIGCONT.
        let _ = crate::sys::kill(0, sig);
    }

    /// The call ended (every process of it is gone): the relay passes on what the call
    /// wrote last, then the user's terminal gets its settings back. Waits at most a little
    /// over `DRAIN`.
    pub fn finish(&mut self) {
        self.inner = None;
        self.mine = None;
        if let Some(w) = self.stop_w.take() {
            let _ = crate::sys::write_all(w.as_raw_fd(), b"x");
            if let Some(done) = self.done.take() {
                let _ = done.recv_timeout(DRAIN + Duration::from_millis(500));
            }
        }
        self.term.restore();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether the launcher's process group is orphaned: no member has a parent in another
/// group of the same session (walking up from the launcher through its own group; as the
/// kernel has it, SIGTSTP would then be discarded and no shell could continue the job).
fn group_orphaned() -> bool {
    fn stat(pid: &str) -> Option<(i32, i32, i32)> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &s[s.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // state, ppid, pgrp, session
        Some((
            f.get(1)?.parse().ok()?,
            f.get(2)?.parse().ok()?,
            f.get(3)?.parse().ok()?,
        ))
    }
    let Some((mut ppid, pgrp, sid)) = stat("self") else {
        return true;
    };
    for _ in 0..64 {
        if ppid <= 0 {
            return true;
        }
        let Some((pp, pg, ps)) = stat(&ppid.to_string()) else {
            return true;
        };
        if pg != pgrp {
            return ps != sid;
        }
        ppid = pp;
    }
    true
}

/// Writes all of `buf` to the user's terminal (waiting when it is non-blocking); false when
/// it cannot take more (hung up).
fn write_out(fd: RawFd, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        match sys::write(fd, buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let _ = crate::sys::poll(&[(fd, libc::POLLOUT)], 1000);
            }
            Err(_) => return false,
        }
    }
    true
}

/// The most typed input held for a line that does not read it.
const MAX_PENDING: usize = 1 << 16;

/// How often the relay looks whether the line has taken the foreground of the call's pty
/// while it holds keys for it.
const ATTACH_POLL_MS: i32 = 5;

/// Whether the line has taken the foreground of the call's pty (master `m`): its foreground
/// group is no longer the init's, the session leader's. Until then a `^C` written to the
/// pty would signal the init's group (the init, which passes on no signal from its pty but
/// SIGHUP, and the line's process before it makes its own group) instead of the line's, and
/// be lost. When the pty cannot say, true.
fn line_in_front(m: RawFd) -> bool {
    match (sys::foreground_group(m), sys::session_of(m)) {
        (Ok(pg), Ok(sid)) => pg != sid,
        _ => true,
    }
}

/// Waits for the call's master on `sock` (or for `stop`): `None` when the init failed
/// before sending it (it reports why), sent something else, or the call ended first.
fn wait_for_master(sock: BorrowedFd<'_>, stop: RawFd) -> Option<OwnedFd> {
    loop {
        let Ok(r) = crate::sys::poll(
            &[(sock.as_raw_fd(), libc::POLLIN), (stop, libc::POLLIN)],
            -1,
        ) else {
            continue;
        };
        // The master first: a short call may have ended (stop written) before this thread
        // first ran, its output waiting in the pty.
        match efr_fdpass::recv_byte(sock) {
            Ok(Some((MASTER, mut fds))) if fds.len() == 1 => return fds.pop(),
            Err(e) if e.is_retry() => {
                if r[1] != 0 {
                    return None;
                }
            }
            _ => return None,
        }
    }
}

/// The relay of one call's pty, from the master's arrival to the call's end.
struct Relaying<'a> {
    term: &'a Term,
    line: &'a Line,
    /// The master.
    m: RawFd,
    stop: RawFd,
    sigs: RawFd,
    filter: filter::Filter,
    buf: Vec<u8>,
    out: Vec<u8>,
    /// The user's keys not yet written to the call's pty.
    pending: Vec<u8>,
    ending: Option<Instant>,
    /// The master reads EIO while no process holds the slave: at the call's end, or while
    /// the line has closed every fd of it (it may open /dev/tty again: polled then).
    hung: bool,
    out_ok: bool,
    /// The user's keys are held until the line has taken the foreground of the call's pty
    /// (see [`line_in_front`]): a key typed right after the start reaches the line as it
    /// would have on the user's terminal, where the line's job is in front from the start.
    in_front: bool,
}

impl Relaying<'_> {
    /// Relays until the call's end (and its drain) or a hang-up of the user's terminal.
    fn run(&mut self) {
        loop {
            if !self.in_front && !self.pending.is_empty() {
                self.in_front = line_in_front(self.m);
            }
            if let Some(d) = self.ending {
                if self.hung || Instant::now() >= d {
                    break;
                }
            }
            let reading =
                self.ending.is_none() && self.pending.len() < MAX_PENDING && self.term.reading();
            let Some(fds) = self.poll(reading) else {
                continue;
            };
            let ready = |fd: RawFd| fds.iter().any(|p| p.fd == fd && fd >= 0 && p.revents != 0);
            if ready(self.sigs) {
                self.on_signals();
            }
            if self.ending.is_none() && ready(self.stop) {
                self.ending = Some(Instant::now() + DRAIN);
            }
            if (self.hung || ready(self.m)) && !self.relay_output() {
                break;
            }
            if reading && ready(self.term.input) && !self.read_keys() {
                break;
            }
            if !self.in_front && !self.pending.is_empty() {
                self.in_front = line_in_front(self.m);
            }
            if self.in_front && !self.pending.is_empty() {
                self.write_keys();
            }
        }
    }

    /// One poll of the signals, the stop, the master and (when `reading`) the user's keys:
    /// the polled fds, `None` when the poll failed.
    fn poll(&self, reading: bool) -> Option<[libc::pollfd; 4]> {
        // fd -1 is left out by poll.
        let pfd = |fd: RawFd, events: libc::c_short| libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        let mut ev = 0;
        if !self.hung {
            ev |= libc::POLLIN;
        }
        if self.in_front && !self.pending.is_empty() {
            ev |= libc::POLLOUT;
        }
        let mut fds = [
            pfd(self.sigs, libc::POLLIN),
            pfd(
                if self.ending.is_none() { self.stop } else { -1 },
                libc::POLLIN,
            ),
            pfd(if ev != 0 { self.m } else { -1 }, ev),
            pfd(if reading { self.term.input } else { -1 }, libc::POLLIN),
        ];
        let timeout = match self.ending {
            // Saturating: the wait is the ending's grace, a few seconds.
            Some(d) => i32::try_from(d.saturating_duration_since(Instant::now()).as_millis())
                .unwrap_or(i32::MAX),
            None if self.hung => 100,
            None if !self.in_front && !self.pending.is_empty() => ATTACH_POLL_MS,
            None => -1,
        };
        sys::poll(&mut fds, timeout).ok().map(|_| fds)
    }

    /// The relay's signals: SIGCONT resumes the line and the raw mode; each passes the
    /// size on.
    fn on_signals(&self) {
        let mut s = [0u8; 64];
        let n = crate::sys::read(self.sigs, &mut s).unwrap_or(0);
        for &sig in &s[..n] {
            if libc::c_int::from(sig) == libc::SIGCONT {
                let was = std::mem::replace(&mut self.term.lock().suspended, false);
                if was {
                    self.line.resume();
                }
                self.term.enter_raw();
            }
            self.term.pass_size(self.m);
        }
    }

    /// The master: what the call wrote, through the filter (one read per wake-up, as the
    /// peer relays do; until EAGAIN while polled on a timer). False when the user's
    /// terminal is gone (hung up): so is the call's.
    fn relay_output(&mut self) -> bool {
        let once = !self.hung;
        loop {
            match crate::sys::read(self.m, &mut self.buf) {
                Ok(0) => {
                    self.hung = true;
                    return true;
                }
                Ok(n) => {
                    self.hung = false;
                    self.out.clear();
                    self.filter.feed(&self.buf[..n], &mut self.out);
                    if self.out_ok && !self.out.is_empty() {
                        self.out_ok = write_out(self.term.output, &self.out);
                        if !self.out_ok && self.ending.is_none() {
                            return false;
                        }
                    }
                    if once {
                        return true;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(_) => {
                    self.hung = true;
                    return true;
                }
            }
        }
    }

    /// The user's keys, to the pending bytes. False on EOF (or EIO) of a terminal: it hung
    /// up (the user closed it). The call's pty hangs up too when the master closes: the
    /// line's foreground group gets SIGHUP from it, as it would have from the user's
    /// terminal.
    fn read_keys(&mut self) -> bool {
        match crate::sys::read(self.term.input, &mut self.buf) {
            Ok(0) => false,
            Ok(n) => {
                self.pending.extend_from_slice(&self.buf[..n]);
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) =>
            {
                true
            }
            Err(_) => false,
        }
    }

    /// The pending keys, to the call's pty.
    fn write_keys(&mut self) {
        match sys::write(self.m, &self.pending) {
            Ok(n) => {
                self.pending.drain(..n);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) => {}
            Err(_) => self.pending.clear(),
        }
    }

    /// The filter's last bytes, out.
    fn finish(&mut self) {
        self.out.clear();
        self.filter.finish(&mut self.out);
        if self.out_ok && !self.out.is_empty() {
            write_out(self.term.output, &self.out);
        }
    }
}

/// The relay thread: waits for the master, then relays until the call's end.
fn relay(term: &Term, sock: OwnedFd, stop: OwnedFd, sigs: OwnedFd, line: &Line) {
    let Some(master) = wait_for_master(sock.as_fd(), stop.as_raw_fd()) else {
        return;
    };
    let m = master.as_raw_fd();
    line.master.store(m, Ordering::SeqCst);
    let _ = crate::sys::set_nonblocking(m);
    term.enter_raw();
    term.pass_size(m);
    let mut r = Relaying {
        term,
        line,
        m,
        stop: stop.as_raw_fd(),
        sigs: sigs.as_raw_fd(),
        filter: filter::Filter::new(),
        buf: vec![0u8; 1 << 16],
        out: Vec::with_capacity(1 << 17),
        pending: Vec::new(),
        ending: None,
        hung: false,
        out_ok: true,
        in_front: false,
    };
    r.run();
    line.master.store(-1, Ordering::SeqCst);
    r.finish();
}

/// The settings of the terminals on fds 0-2 (for a process that runs the launcher, as the
/// CLI does): put back by [`SavedTerminal::restore`] when the launcher could not (it was
/// killed).
#[derive(Debug)]
pub struct SavedTerminal {
    fd: RawFd,
    saved: libc::termios,
}

impl SavedTerminal {
    /// The settings of the first terminal of fds 0-2, if any.
    pub fn of_stdio() -> Option<SavedTerminal> {
        let fd = (0..=2).find(|&f| crate::sys::isatty(f))?;
        let saved = sys::tcgetattr(fd).ok()?;
        Some(SavedTerminal { fd, saved })
    }

    /// Puts the settings back.
    pub fn restore(&self) {
        let _ = sys::tcsetattr_anyway(self.fd, &self.saved);
    }
}
