//! The service's side of the socket maker of a job's network namespace
//! (`efr-launch --ns-sockets`, `efr_launcher::ns_sockets`): started for one job, asked for
//! sockets made in the job's namespace over its seqpacket control socket, on the runtime
//! (no thread blocks on it). Stream sockets are asked for [`AHEAD`] at a time (the requests
//! pipelined, the answers read in order) and kept until a connection takes one: a
//! connection through a forward then costs no round trip to the socket maker but one in
//! [`AHEAD`] (measured in docs/benchmarks.md, "Port forwards of jobs").

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

/// Stream sockets of the job's namespace made ahead, per family: an unconnected socket
/// holds nothing of the job, and a dozen fds a family is little.
pub(crate) const AHEAD: usize = 16;

/// The control socket, and the sockets made ahead (by request byte).
type Control = (AsyncFd<OwnedFd>, Vec<(u8, OwnedFd)>);

/// A running socket maker.
#[derive(Debug)]
pub(crate) struct Helper {
    pid: u32,
    control: tokio::sync::Mutex<Control>,
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
            control: tokio::sync::Mutex::new((
                crate::sys::async_owned(ns.control).map_err(io)?,
                Vec::new(),
            )),
            child: std::sync::Mutex::new(Some(ns.child)),
        };
        // Its first message: in the namespace, or why not.
        let first = {
            let c = helper.control.lock().await;
            helper.answer(&c.0).await
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
    /// `efr_launcher::ns_sockets` (`INET`, `INET6`, `SOCK_DIAG`). A stream socket comes from
    /// those made ahead, [`AHEAD`] more asked for when none is left.
    pub(crate) async fn socket(&self, what: u8) -> Result<OwnedFd, HelperError> {
        let mut c = self.control.lock().await;
        if let Some(i) = c.1.iter().position(|(w, _)| *w == what) {
            return Ok(c.1.swap_remove(i).1);
        }
        let n = if what == efr_launcher::ns_sockets::SOCK_DIAG {
            1
        } else {
            AHEAD
        };
        for _ in 0..n {
            efr_fdpass::send_fds(c.0.get_ref().as_fd(), &[what], &[]).map_err(|e| {
                HelperError::Io {
                    pid: self.pid,
                    source: std::io::Error::other(e),
                }
            })?;
        }
        // Every answer is read, a refusal among them too (the next request must not read
        // an answer of this one); the first refusal is the error when no socket came.
        let mut got = Vec::with_capacity(n);
        let mut refused = None;
        for _ in 0..n {
            match self.answer(&c.0).await {
                Ok(Some(fd)) => got.push(fd),
                Ok(None) => return Err(HelperError::Gone { pid: self.pid }),
                Err(e @ HelperError::Refused { .. }) => {
                    refused.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        let Some(first) = got.pop() else {
            return Err(refused.unwrap_or(HelperError::Gone { pid: self.pid }));
        };
        c.1.extend(got.into_iter().map(|fd| (what, fd)));
        Ok(first)
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
