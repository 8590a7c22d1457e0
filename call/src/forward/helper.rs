//! The service's side of the socket maker of a job's network namespace
//! (`efr-launch --ns-sockets`, `efr_launcher::ns_sockets`): started for one job, asked for
//! sockets made in the job's namespace over its seqpacket control socket, one request at a
//! time, on the runtime (no thread blocks on it).

use std::os::fd::{AsFd, OwnedFd};

use efr_launcher::api::{Launched, Launcher};
use efr_launcher::ns_sockets::{ERR, OK};
use tokio::io::unix::AsyncFd;

/// Why the socket maker could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    /// `efr-launch` could not be started.
    #[error("start the socket maker {exe} for pid {pid}: {source}")]
    Spawn {
        /// The launcher's executable.
        exe: String,
        /// The job's process.
        pid: u32,
        /// What the spawn said.
        #[source]
        source: std::io::Error,
    },
    /// The control socket failed.
    #[error("the control socket of the socket maker of pid {pid}: {source}")]
    Io {
        /// The job's process.
        pid: u32,
        /// What the socket said.
        #[source]
        source: std::io::Error,
    },
    /// The socket maker answered with an error.
    #[error("the socket maker of pid {pid}: {message}")]
    Refused {
        /// The job's process.
        pid: u32,
        /// Its message.
        message: String,
    },
    /// The socket maker ended (or answered what is not its protocol).
    #[error("the socket maker of pid {pid} ended or broke its protocol")]
    Gone {
        /// The job's process.
        pid: u32,
    },
}

/// A running socket maker.
#[derive(Debug)]
pub(crate) struct Helper {
    pid: u32,
    control: tokio::sync::Mutex<AsyncFd<OwnedFd>>,
    child: std::sync::Mutex<Option<Launched>>,
}

impl Helper {
    /// Starts the socket maker for the job's process `pid` and waits until it is in the
    /// job's network namespace (or says why it cannot be).
    pub(crate) async fn start(launcher: &Launcher, pid: u32) -> Result<Helper, HelperError> {
        let ns = launcher
            .spawn_ns_sockets(pid)
            .map_err(|source| HelperError::Spawn {
                exe: launcher.exe.display().to_string(),
                pid,
                source,
            })?;
        let io = |source| HelperError::Io { pid, source };
        nix::fcntl::fcntl(
            &ns.control,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(|e| io(e.into()))?;
        let helper = Helper {
            pid,
            control: tokio::sync::Mutex::new(crate::sys::async_owned(ns.control).map_err(io)?),
            child: std::sync::Mutex::new(Some(ns.child)),
        };
        // Its first message: in the namespace, or why not.
        let first = {
            let c = helper.control.lock().await;
            helper.answer(&c).await
        };
        match first {
            Ok(None) => Ok(helper),
            Ok(Some(_)) => Err(HelperError::Gone { pid }),
            Err(e) => {
                helper.end().await;
                Err(e)
            }
        }
    }

    /// A new socket of the job's namespace: `what` is a request byte of
    /// `efr_launcher::ns_sockets` (`INET`, `INET6`, `SOCK_DIAG`).
    pub(crate) async fn socket(&self, what: u8) -> Result<OwnedFd, HelperError> {
        let c = self.control.lock().await;
        efr_fdpass::send_fds(c.get_ref().as_fd(), &[what], &[]).map_err(|e| HelperError::Io {
            pid: self.pid,
            source: std::io::Error::other(e),
        })?;
        match self.answer(&c).await? {
            Some(fd) => Ok(fd),
            None => Err(HelperError::Gone { pid: self.pid }),
        }
    }

    /// Reads one answer: `Some(fd)` for OK with an fd, `None` for OK without.
    async fn answer(&self, c: &AsyncFd<OwnedFd>) -> Result<Option<OwnedFd>, HelperError> {
        let pid = self.pid;
        let mut buf = [0u8; 1024];
        loop {
            let mut guard = c
                .readable()
                .await
                .map_err(|source| HelperError::Io { pid, source })?;
            match efr_fdpass::recv_msg(c.get_ref().as_fd(), &mut buf) {
                Err(e) if e.is_retry() => guard.clear_ready(),
                Err(e) => {
                    return Err(HelperError::Io {
                        pid,
                        source: e.into(),
                    });
                }
                Ok(None) => return Err(HelperError::Gone { pid }),
                Ok(Some((n, fds))) => {
                    let mut fds = fds.into_iter();
                    return match (buf.get(..n), fds.next(), fds.next()) {
                        (Some([OK]), fd, None) => Ok(fd),
                        (Some([ERR, text @ ..]), None, None) => Err(HelperError::Refused {
                            pid,
                            message: String::from_utf8_lossy(text).into_owned(),
                        }),
                        _ => Err(HelperError::Gone { pid }),
                    };
                }
            }
        }
    }

    /// Ends it and reaps it (off the runtime's workers). It holds nothing of value (a
    /// socket it made is the service's once sent): killed rather than asked.
    pub(crate) async fn end(self) {
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(self);
        if let Some(mut c) = child {
            let _ = c.kill();
            let reaped = tokio::task::spawn_blocking(move || {
                let _ = c.wait();
            })
            .await;
            drop(reaped);
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Not ended through `end` (a drop of the forwards without their stop): killed and
        // reaped here (it dies at once: SIGKILL, nothing to flush).
        if let Some(mut c) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
