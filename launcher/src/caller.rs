//! The caller: the process that started the launch (the CLI, the service, efrd). The
//! launch ends with it, whatever it dies of: a death signal cannot serve here, because
//! `PR_SET_PDEATHSIG` fires when the parent *thread* ends (a service launches from a
//! worker thread of its runtime), so the launcher holds a pidfd of its parent process and
//! polls it with everything else it waits on (and compares `getppid` on every wake, for a
//! kernel without pidfds). When the caller is gone, the launcher kills the whole call
//! (see [`crate::run`]).
//!
//! The parent may die before the launcher runs its first instruction: then `getppid` is
//! already the reaper's pid. A caller that passes `--caller-pid` (its own pid, as
//! [`crate::api::Launcher::spawn`] does) closes that window: a launcher whose parent is
//! not that process does not start the line.

use std::os::fd::RawFd;

use crate::sys;

/// Why the launch cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum CallerError {
    /// The launcher's parent is not the caller `--caller-pid` named: the caller ended
    /// before the launch started watching it.
    #[error(
        "the caller (pid {expected}) ended before the launch started (the parent is pid {parent})"
    )]
    Gone {
        /// The caller's pid, as `--caller-pid` named it.
        expected: libc::pid_t,
        /// The launcher's parent found instead.
        parent: libc::pid_t,
    },
}

/// The watched caller.
#[derive(Debug)]
pub struct Caller {
    pid: libc::pid_t,
    /// A pidfd of the caller (none on a kernel without `pidfd_open`, before 5.3).
    pidfd: Option<RawFd>,
}

impl Caller {
    /// Watches the launcher's parent; `expected` is the pid the caller said it has.
    pub fn watch(expected: Option<libc::pid_t>) -> Result<Caller, CallerError> {
        let pid = sys::getppid();
        let gone = |parent| CallerError::Gone {
            expected: expected.unwrap_or(pid),
            parent,
        };
        if expected.is_some_and(|e| e != pid) {
            return Err(gone(pid));
        }
        let pidfd = sys::pidfd_open(pid).ok();
        // The parent may have died between getppid and pidfd_open (the pidfd would then
        // name the pid's next owner, or nothing): it is the same process only if it is
        // still the parent now.
        let now = sys::getppid();
        if now != pid {
            if let Some(fd) = pidfd {
                sys::close(fd);
            }
            return Err(gone(now));
        }
        Ok(Caller { pid, pidfd })
    }

    /// The pidfd to poll (readable once the caller has ended).
    pub fn fd(&self) -> Option<RawFd> {
        self.pidfd
    }

    /// Whether the caller has ended.
    pub fn gone(&self) -> bool {
        sys::getppid() != self.pid || self.pidfd.is_some_and(sys::pidfd_ended)
    }

    /// Waits until `fd` may be read or the caller ends: `Ok(true)` on a wake with the
    /// caller there (the read may still find nothing), `Ok(false)` once it has ended.
    /// Without a pidfd of the caller, its end is seen by `getppid` on a wake every 100 ms.
    pub fn wait_readable(&self, fd: RawFd) -> std::io::Result<bool> {
        let mut fds = vec![(fd, libc::POLLIN)];
        if let Some(c) = self.pidfd {
            fds.push((c, libc::POLLIN));
        }
        let timeout = if self.pidfd.is_some() { -1 } else { 100 };
        loop {
            match sys::poll(&fds, timeout) {
                Ok(_) => return Ok(!self.gone()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The caller's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        if let Some(fd) = self.pidfd.take() {
            sys::close(fd);
        }
    }
}
