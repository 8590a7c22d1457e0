//! The launcher's process as its caller holds it: started without fork (`posix_spawn`, in
//! the private `sys::spawn`), with stdio the caller chooses ([`Io`]) and pipes to read.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// What one of the launcher's fds 0 to 2 is.
#[derive(Debug)]
pub enum Io {
    /// The caller's own.
    Inherit,
    /// `/dev/null`.
    Null,
    /// A new pipe; the caller's end is in [`Launched`] (`stdin`, `stdout`, `stderr`).
    Piped,
    /// This fd (a file, a pipe end, a socket).
    Fd(OwnedFd),
}

impl Io {
    /// [`Io::Null`].
    pub fn null() -> Io {
        Io::Null
    }

    /// [`Io::Piped`].
    pub fn piped() -> Io {
        Io::Piped
    }

    /// [`Io::Inherit`].
    pub fn inherit() -> Io {
        Io::Inherit
    }
}

impl From<File> for Io {
    fn from(f: File) -> Io {
        Io::Fd(f.into())
    }
}

impl From<OwnedFd> for Io {
    fn from(f: OwnedFd) -> Io {
        Io::Fd(f)
    }
}

/// The fds of the child for its stdio, and the caller's ends of its pipes.
pub(crate) struct Stdio {
    /// `(fd, target)` for the child (kept open until it is started).
    pub child: Vec<(OwnedFd, i32)>,
    /// The caller's ends: stdin (to write), stdout and stderr (to read).
    pub ends: [Option<File>; 3],
}

impl Stdio {
    /// The child's fds and the caller's pipe ends for `[stdin, stdout, stderr]`.
    pub(crate) fn new(io: [Io; 3]) -> io::Result<Stdio> {
        let mut s = Stdio {
            child: Vec::new(),
            ends: [None, None, None],
        };
        for (target, io) in (0..3).zip(io) {
            match io {
                Io::Inherit => {}
                Io::Null => {
                    let f = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open("/dev/null")?;
                    s.child.push((f.into(), target));
                }
                Io::Fd(fd) => s.child.push((fd, target)),
                Io::Piped => {
                    let (r, w) = crate::sys::pipe_owned()?;
                    let (theirs, ours) = if target == 0 { (r, w) } else { (w, r) };
                    s.child.push((theirs, target));
                    s.ends[usize::try_from(target).unwrap_or(0)] = Some(File::from(ours));
                }
            }
        }
        Ok(s)
    }
}

/// A started `efr-launch`: its pid, the caller's ends of its piped stdio, and its end.
/// Waited for once; killed only while not yet waited for (its pid cannot have been reused
/// before that).
#[derive(Debug)]
pub struct Launched {
    pid: libc::pid_t,
    /// Its status, once waited for.
    status: Option<ExitStatus>,
    /// Its stdin, when [`Io::Piped`].
    pub stdin: Option<File>,
    /// Its stdout, when [`Io::Piped`].
    pub stdout: Option<File>,
    /// Its stderr, when [`Io::Piped`].
    pub stderr: Option<File>,
}

/// Where a started launcher stands among its caller's processes (defined beside the spawn
/// that applies it).
pub use crate::sys::spawn::Detach;

impl Launched {
    /// Starts `program` with `args` (its name first); `fds` are `(fd, target)` pairs of
    /// extra fds (the plan, the status pipe).
    pub(crate) fn start(
        program: &std::ffi::OsStr,
        args: &[std::ffi::OsString],
        stdio: [Io; 3],
        extra: &[(OwnedFd, i32)],
        detach: Detach,
    ) -> io::Result<Launched> {
        let Stdio { child, ends } = Stdio::new(stdio)?;
        let fds: Vec<(i32, i32)> = child
            .iter()
            .chain(extra)
            .map(|(f, t)| (f.as_raw_fd(), *t))
            .collect();
        let pid = crate::sys::spawn::spawn(&crate::sys::spawn::Spawn {
            program,
            args,
            fds: &fds,
            detach,
        })?;
        // The child's copies are its own now; ours close here.
        drop(child);
        let [stdin, stdout, stderr] = ends;
        Ok(Launched {
            pid,
            status: None,
            stdin,
            stdout,
            stderr,
        })
    }

    /// Its pid (as `std::process::Child::id`).
    pub fn id(&self) -> u32 {
        // A child's pid is positive (at most the kernel's pid_max, 2^22).
        u32::try_from(self.pid).unwrap_or(0)
    }

    /// Waits for it to end (at once when it was waited for already).
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            match self.reap(0) {
                Ok(Some(st)) => return Ok(st),
                Ok(None) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Its status when it has ended, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.reap(libc::WNOHANG)
    }

    /// SIGKILL, unless it was waited for already (then its pid may be another process's).
    pub fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        crate::sys::kill(self.pid, libc::SIGKILL)
    }

    /// `waitpid` with `flags`, once: the status kept for every later ask.
    fn reap(&mut self, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            if let Some((_, st)) = crate::sys::waitpid(self.pid, flags)? {
                self.status = Some(ExitStatus::from_raw(st));
            }
        }
        Ok(self.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::io::{Read, Write};

    fn sh(script: &str) -> Vec<OsString> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    /// The extra fds arrive at their numbers with close-on-exec cleared, piped stdio reaches
    /// the caller, nothing else of the caller's is open, the child leads its own group when
    /// asked, and it starts with no signal blocked and SIGPIPE at its default.
    #[test]
    fn fds_stdio_group_and_signals_are_as_asked() {
        let plan = crate::sys::memfd_with("t", b"the plan").unwrap();
        let (r, w) = crate::sys::pipe_owned().unwrap();
        let script = "cat <&3; echo status >&4; echo err >&2; read x; echo got:$x; \
                      ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; \
                      ps -o pid=,pgid= -p $$; grep -E '^Sig(Blk|Ign)' /proc/self/status";
        let mut l = Launched::start(
            std::ffi::OsStr::new("/bin/sh"),
            &sh(script),
            [Io::piped(), Io::piped(), Io::piped()],
            &[(plan, 3), (w, 4)],
            Detach::Group,
        )
        .unwrap();
        l.stdin.take().unwrap().write_all(b"hello\n").unwrap();
        let mut out = String::new();
        l.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let mut err = String::new();
        l.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let mut status = String::new();
        File::from(r).read_to_string(&mut status).unwrap();
        let st = l.wait().unwrap();
        assert!(st.success(), "{st:?} {out} {err}");
        assert_eq!(l.wait().unwrap(), st, "a second wait gives the same status");
        assert!(out.starts_with("the plangot:hello\n"), "{out}");
        assert_eq!(status, "status\n");
        assert_eq!(err, "err\n");
        // fds 0-4, the one ls opens for /proc/self/fd, and what this test process itself
        // holds without close-on-exec (its own caller's, as a shell passes them).
        let fds: Vec<i32> = out
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        assert_eq!(&fds[..5], [0, 1, 2, 3, 4], "{out}");
        let inherited = |fd: i32| {
            let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"));
            let flags = info.ok().and_then(|i| {
                let f = i.lines().find_map(|l| l.strip_prefix("flags:"))?;
                i64::from_str_radix(f.trim(), 8).ok()
            });
            flags.is_some_and(|f| f & i64::from(libc::O_CLOEXEC) == 0)
        };
        let extra: Vec<i32> = fds[5..]
            .iter()
            .copied()
            .filter(|&f| !inherited(f))
            .collect();
        assert!(extra.len() <= 1, "only the placed fds are open: {out}");
        let ids: Vec<&str> = out.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(ids[0], ids[1], "its own process group: {out}");
        let blk = out.lines().find(|l| l.starts_with("SigBlk")).unwrap();
        assert!(blk.ends_with("0000000000000000"), "{out}");
        let ign = out.lines().find(|l| l.starts_with("SigIgn")).unwrap();
        let ign = u64::from_str_radix(ign.split_whitespace().nth(1).unwrap(), 16).unwrap();
        assert_eq!(
            ign & (1 << (libc::SIGPIPE - 1)),
            0,
            "SIGPIPE at its default: {out}"
        );
    }

    /// Without a group of its own the child is in the caller's; inherited stdio is the
    /// caller's; a missing program is an error of the start (ENOENT), not a child that
    /// fails; bad targets are refused before anything starts.
    #[test]
    fn errors_and_defaults() {
        let mut l = Launched::start(
            std::ffi::OsStr::new("/bin/sh"),
            &sh("test \"$(ps -o pgid= -p $$)\" = \"$(ps -o pgid= -p $PPID)\""),
            [Io::null(), Io::inherit(), Io::inherit()],
            &[],
            Detach::None,
        )
        .unwrap();
        assert!(l.wait().unwrap().success());
        let e = Launched::start(
            std::ffi::OsStr::new("/nonexistent/efr-launch"),
            &sh("true"),
            [Io::null(), Io::null(), Io::null()],
            &[],
            Detach::None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let (_r, w) = crate::sys::pipe_owned().unwrap();
        let e = Launched::start(
            std::ffi::OsStr::new("/bin/true"),
            &sh("true"),
            [Io::null(), Io::null(), Io::null()],
            &[(w, 12)],
            Detach::None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    /// kill ends a running child; after it was waited for, kill sends nothing (its pid may
    /// be reused).
    #[test]
    fn kill_and_try_wait() {
        let mut l = Launched::start(
            std::ffi::OsStr::new("/bin/sleep"),
            &["sleep".into(), "30".into()],
            [Io::null(), Io::null(), Io::null()],
            &[],
            Detach::None,
        )
        .unwrap();
        assert!(l.try_wait().unwrap().is_none());
        l.kill().unwrap();
        let st = l.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGKILL));
        assert_eq!(l.try_wait().unwrap(), Some(st));
        l.kill().unwrap();
    }
}
