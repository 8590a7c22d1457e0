//! The native backend's init made ahead: a warm launcher (`efr-launch --warm`, started by
//! the service before its call comes) clones the call's init into fresh user, mount, pid,
//! ipc, uts and network namespaces, writes its id maps, and the init brings its loopback
//! up and waits. When the call comes, the launcher sends the init its stdio, its spec and
//! the base of its view ([`Waiting::go`]); from there the init builds the view exactly as
//! a cold one does ([`super::native`]).
//!
//! What is made ahead is only what no call can tell apart: the user, pid, ipc, uts and
//! network namespaces (the network namespace's creation, `copy_net_ns`, is the dearest
//! step of a launch) and the id maps of this user. Nothing of the view is: the init waits
//! in the host's mount namespace and copies it (`unshare(CLONE_NEWNS)`) when its call
//! comes, so a call that waited an hour sees the host's mounts of its own time, whether or
//! not the host's mounts propagate (a copy made ahead would go stale where they do not).
//!
//! The wire on the socket pair between the launcher and the init: the byte [`MAPS`] once
//! the id maps are written; then, for the call, the byte [`GO`] with the call's stdio fds
//! (0, 1 and 2, then the pty's socket when the call has one) attached, the length of a
//! `Go` (u32, little-endian) and its JSON (the init's spec and the base of its view); then
//! the rest of the view as [`super::native`] sends it. An init that gets anything else, or
//! EOF, exits without report: the launcher falls back to a cold clone.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};

use serde::{Deserialize, Serialize};

use crate::child::init::{InnerSpec, run_init};
use crate::setup::SetupError;
use crate::sys;
use crate::view::handoff::Rest;
use crate::view::{Op, View};

/// The launcher's byte: the id maps are written.
pub const MAPS: u8 = b'M';
/// The launcher's byte of the call's start (the stdio fds attached).
pub const GO: u8 = b'G';
/// The launcher's byte that announces a call (its plan is still being made): the init
/// copies the host's mount namespace and builds the part of the view no plan changes
/// (`native::host_base`) meanwhile.
pub const ANNOUNCED: u8 = b'A';
/// The most bytes of a [`Go`] the init reads (a spec with a large environment fits).
const MAX_GO: usize = 16 << 20;

/// What the init of a warm launch gets at its call's start: what a cold init has in its
/// memory from the clone.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Go {
    /// The init's spec, complete (the pty's socket renumbered by the init).
    spec: InnerSpec,
    /// The base of the view ([`crate::view::base`]): its `/tmp`.
    tmp: Option<String>,
    /// The size of a fresh `/tmp`.
    tmp_size: u64,
    /// The size of `/dev/shm`.
    shm_size: u64,
    /// The scratch directory.
    scratch: Option<String>,
    /// The devices of the plan's grants.
    devices: Vec<String>,
    /// The host path of the call's proxy socket.
    proxy_socket: Option<String>,
    /// The broker's trust files, bound in the call's `/dev`.
    #[serde(default)]
    trust: Option<crate::plan::TrustPlan>,
}

impl Go {
    fn of(view: &View, spec: &InnerSpec) -> Go {
        Go {
            spec: spec.clone(),
            tmp: view.tmp.clone(),
            tmp_size: view.tmp_size,
            shm_size: view.shm_size,
            scratch: view.scratch.clone(),
            devices: view
                .ops
                .iter()
                .filter_map(|o| match o {
                    Op::Dev { path } => Some(path.clone()),
                    _ => None,
                })
                .collect(),
            proxy_socket: view.proxy_socket.clone(),
            trust: view.trust.clone(),
        }
    }

    fn view(&self) -> View {
        View {
            tmp: self.tmp.clone(),
            tmp_size: self.tmp_size,
            shm_size: self.shm_size,
            scratch: self.scratch.clone(),
            ops: self
                .devices
                .iter()
                .map(|p| Op::Dev { path: p.clone() })
                .collect(),
            proxy_socket: self.proxy_socket.clone(),
            trust: self.trust.clone(),
            ..Default::default()
        }
    }
}

/// Whether a call with this base view can use an init made ahead: the init's namespaces
/// include a network namespace of its own.
pub fn fits(view: &View) -> bool {
    !view.host_net
}

/// What [`Prepared::new`] made: the waiting init, the call's report pipe (read end, write
/// end) whose write end the init holds, and the launcher's pidfd the init holds (it ends
/// the call when the launcher ends). The launcher keeps the pipe and the pidfd for the call
/// whether or not the init is used.
#[derive(Debug)]
pub struct Prepared {
    /// The init.
    pub init: Waiting,
    /// The report pipe: read end, write end.
    pub report: (OwnedFd, OwnedFd),
    /// The launcher's pidfd, at the same number in the init.
    pub launcher_pidfd: OwnedFd,
}

/// An init cloned ahead of its call, waiting in its namespaces; killed and reaped when
/// dropped before its call started in it.
#[derive(Debug)]
pub struct Waiting {
    /// The init's pid (in the launcher's pid namespace); `None` once handed on.
    pid: Option<libc::pid_t>,
    /// The launcher's end of the socket pair.
    sock: OwnedFd,
}

/// An init that got its call: the rest of the view goes to it next ([`Going::rest`]).
#[derive(Debug)]
pub struct Going {
    pid: libc::pid_t,
    sock: OwnedFd,
}

impl Prepared {
    /// Clones the init into new namespaces and writes its id maps. `close` is an fd of the
    /// launcher the init must not keep (the service's control socket). The launcher must be
    /// single-threaded, with the signals it ignores already ignored.
    pub fn new(close: RawFd) -> Result<Prepared, SetupError> {
        let (report_r, report_w) = sys::pipe_owned().map_err(SetupError::sys("pipe"))?;
        let pidfd = sys::pidfd_open(sys::getpid())
            .and_then(sys::owned)
            .map_err(SetupError::sys("pidfd_open of the launcher"))?;
        let (mine, theirs) = sys::socketpair().map_err(SetupError::sys("socketpair"))?;
        let (uid, gid) = sys::ids();
        // Not the mount namespace: the init copies the host's when its call comes (see
        // the module's page).
        let flags = libc::CLONE_NEWUSER
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWNET;
        let pid = sys::clone_fork(flags).map_err(SetupError::sys("clone (user namespaces)"))?;
        if pid == 0 {
            drop(mine);
            sys::close(close);
            waiting_init(
                theirs,
                report_w.as_raw_fd(),
                pidfd.as_raw_fd(),
                report_r.as_raw_fd(),
            )
        }
        drop(theirs);
        let p = Prepared {
            init: Waiting {
                pid: Some(pid),
                sock: mine,
            },
            report: (report_r, report_w),
            launcher_pidfd: pidfd,
        };
        super::native::write_id_maps(pid, uid, gid)?;
        sys::write_all(p.init.sock.as_raw_fd(), &[MAPS])
            .map_err(SetupError::sys("write to the call's init"))?;
        Ok(p)
    }
}

impl Waiting {
    /// Whether the init still waits (it ends on its own only when its setup failed).
    pub fn alive(&self) -> bool {
        self.pid
            .is_some_and(|p| matches!(sys::waitpid(p, libc::WNOHANG), Ok(None)))
    }

    /// Tells the waiting init a call is coming (see [`ANNOUNCED`]); nothing when it is gone.
    pub fn announce(&self) {
        if self.pid.is_some() {
            let _ = efr_fdpass::send_fds(self.sock.as_fd(), &[ANNOUNCED], &[]);
        }
    }

    /// Sends the waiting init the call's stdio (the launcher's fds 0 to 2, by now the
    /// call's), the pty's socket of `spec` when it has one, `spec` and the base `view`.
    /// `None` when the init is gone and nothing reached it: the launcher starts a cold one.
    pub fn go(mut self, view: &View, spec: &InnerSpec) -> Option<Result<Going, SetupError>> {
        let pid = self.pid?;
        let mut fds = Vec::new();
        for fd in (0..=2).chain(spec.terminal.as_ref().map(|t| t.sock)) {
            fds.push(sys::dup_cloexec(fd).ok()?);
        }
        let sock = self.sock.try_clone().ok()?;
        let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(AsFd::as_fd).collect();
        efr_fdpass::send_fds(sock.as_fd(), &[GO], &borrowed).ok()?;
        drop(fds);
        self.pid = None;
        let going = Going { pid, sock };
        let sent = serde_json::to_vec(&Go::of(view, spec))
            .map_err(|e| SetupError::Handoff(format!("the init's spec: {e}")))
            .and_then(|json| super::native::send_framed(going.sock.as_raw_fd(), &json));
        Some(match sent {
            Ok(()) => Ok(going),
            Err(e) => {
                going.kill();
                Err(e)
            }
        })
    }
}

impl Going {
    /// Sends the rest of the view; the init's pid.
    pub fn rest(self, rest: &Rest) -> Result<libc::pid_t, SetupError> {
        match super::native::send_framed(self.sock.as_raw_fd(), &crate::view::handoff::encode(rest))
        {
            Ok(()) => Ok(self.pid),
            Err(e) => {
                self.kill();
                Err(e)
            }
        }
    }

    fn kill(&self) {
        let _ = sys::kill(self.pid, libc::SIGKILL);
        let _ = sys::waitpid(self.pid, 0);
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::waitpid(pid, 0);
        }
    }
}

/// The init of a warm launch until its call comes: dies with the launcher, becomes
/// undumpable once its maps are in, names its host, brings its loopback up and opens its
/// privileged ports to the call (`native::open_low_ports`), then waits
/// for [`GO`]. Any failure before the call ends it without a report (the launcher clones a
/// cold init then, which reports it).
fn waiting_init(sock: OwnedFd, report_w: RawFd, launcher_pidfd: RawFd, report_r: RawFd) -> ! {
    fn quit() -> ! {
        sys::exit_now(crate::exit_code::BACKEND_FAILED)
    }
    // The launcher's end, which the init has no use for.
    sys::close(report_r);
    if sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0).is_err()
        || sys::pidfd_ended(launcher_pidfd)
    {
        quit();
    }
    let mut b = [0u8; 1];
    if !matches!(sys::read(sock.as_raw_fd(), &mut b), Ok(1)) || b[0] != MAPS {
        quit();
    }
    if sys::prctl(libc::PR_SET_DUMPABLE, 0, 0).is_err()
        || sys::sethostname(efr_sandbox_wire::CALL_HOSTNAME).is_err()
        || sys::loopback_up().is_err()
        || super::native::open_low_ports().is_err()
    {
        quit();
    }
    // The host's mounts as they are when the call is announced (or starts), not as they
    // were when the init was made: its mount namespace is copied then.
    let host_base = || {
        sys::unshare(libc::CLONE_NEWNS)
            .map_err(SetupError::sys("unshare the call's mount namespace"))
            .and_then(|()| super::native::host_base())
    };
    let mut base: Option<Result<(), SetupError>> = None;
    let fds = loop {
        match sys::poll(&[(sock.as_raw_fd(), libc::POLLIN)], -1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => quit(),
        }
        match efr_fdpass::recv_byte(sock.as_fd()) {
            Ok(Some((GO, fds))) => break fds,
            Ok(Some((ANNOUNCED, fds))) if fds.is_empty() => {
                base.get_or_insert_with(host_base);
            }
            Err(e) if e.is_retry() => continue,
            _ => quit(),
        }
    };
    let Some(mut go) = read_go(sock.as_fd()) else {
        quit()
    };
    // From here on the init runs a call: it ends it itself when the launcher dies (see
    // `LAUNCHER_DEATH_SIGNAL`; until the init catches it, its pidfd watch of the launcher
    // holds).
    let death = crate::signals::LAUNCHER_DEATH_SIGNAL as libc::c_ulong;
    if sys::prctl(libc::PR_SET_PDEATHSIG, death, 0).is_err() {
        quit();
    }
    let want = 3 + usize::from(go.spec.terminal.is_some());
    if fds.len() != want {
        quit();
    }
    let mut fds = fds.into_iter();
    for target in 0..=2 {
        let Some(fd) = fds.next() else { quit() };
        // dup2 leaves the copy inheritable: the line gets the call's stdio.
        if sys::dup2(fd.as_raw_fd(), target).is_err() {
            quit();
        }
    }
    if let (Some(t), Some(fd)) = (go.spec.terminal.as_mut(), fds.next()) {
        // Close-on-exec as received; the init's own from here on.
        t.sock = fd.into_raw_fd();
    }
    let view = go.view();
    let rest = match base
        .unwrap_or_else(host_base)
        .and_then(|()| super::native::finish_root(&view, sock))
    {
        Ok(r) => r,
        Err(e) => {
            crate::child::report::setup_error(report_w, e);
            sys::exit_now(crate::exit_code::BACKEND_FAILED);
        }
    };
    go.spec.landlock = rest.landlock;
    run_init(&go.spec, report_w)
}

/// The [`Go`] after the byte: its length, then its JSON.
fn read_go(fd: BorrowedFd<'_>) -> Option<Go> {
    let buf = super::native::read_framed(fd, MAX_GO).ok()?;
    serde_json::from_slice(&buf).ok()
}
