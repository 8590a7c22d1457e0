//! Port forwards of a job: a background job that listens on a loopback port
//! inside its own network namespace gets that port forwarded on the host's loopback, the
//! same port (`::1` too when it listens there), as a TCP relay in the service.
//!
//! - [`start`] starts the forwards of one job, given its launcher's pid: the socket maker
//!   of the job's network namespace (`efr-launch --ns-sockets`, `efr_launcher::ns_sockets`;
//!   the service cannot enter the namespace itself) and the watch of the job's listeners
//!   (`watch`: a `NETLINK_SOCK_DIAG` dump of the namespace's TCP listeners every
//!   [`POLL_INTERVAL`], not a guess from the line);
//! - each listener on `127.0.0.1`/`0.0.0.0` is forwarded from the host's `127.0.0.1:PORT`,
//!   each on `::1`/`::` from the host's `[::1]:PORT` (a dual-stack `::` from both), unless
//!   refused: a port below 1024 (`refused`), a port of the config's deny list
//!   (`refused`, its reason; the config's `jobs.forward_deny`), past the job's count (`limit`), held by
//!   another job (`in_use`, with `by_job` when of the same conversation; [`Ports`]) or by
//!   a host process (`in_use`);
//! - each outcome is a [`ForwardEvent`] on the job's channel, once per (address, port)
//!   while it does not change; a forward whose listener goes away, and every forward at
//!   [`Forwards::stop`], is `stopped`;
//! - each connection the host's listener accepts is relayed (`relay`) to a socket of the
//!   job's namespace connected to the same address, by `splice(2)`, at most
//!   [`ForwardConfig::max_conns`] at once per forward.
//!
//! A forward opens a port on the host's loopback, which every local user can connect to
//! (see docs/threat-model.md, "Port forwards of jobs").

pub mod dump;
mod helper;
mod ports;
mod relay;
mod watch;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use efr_launcher::api::Launcher;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use helper::HelperError;
pub use ports::{Holder, Ports};
pub use watch::host_addrs;

/// How often a job's listeners are looked at: a server is reachable within a quarter of a
/// second of its `listen` (a person or a test that starts one and then connects waits no
/// longer than that), and a poll (two sock_diag dumps of a namespace that holds a few
/// sockets, about 50 us) costs the service about 0.02% of a core per job.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The most forwards of one job by default (each host address counts: a dual-stack
/// listener is two): a job with more servers than this is not a dev server, and each
/// forward holds a host port.
pub const DEFAULT_MAX_PER_JOB: usize = 16;

/// The most connections one forward relays at once by default (each costs two sockets,
/// two pipes and a task): a browser opens six to a host, a test client a few dozen.
pub const DEFAULT_MAX_CONNS: usize = 64;

/// The limits of a job's forwards (the config's `[jobs]` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardConfig {
    /// Ports never forwarded, each with its reason (the config's `jobs.forward_deny`; none by
    /// default here).
    pub deny: Vec<(u16, String)>,
    /// The most forwards of one job (host addresses).
    pub max_per_job: usize,
    /// The most connections one forward relays at once.
    pub max_conns: usize,
}

impl Default for ForwardConfig {
    fn default() -> ForwardConfig {
        ForwardConfig {
            deny: Vec::new(),
            max_per_job: DEFAULT_MAX_PER_JOB,
            max_conns: DEFAULT_MAX_CONNS,
        }
    }
}

/// What became of a port a job listens on: the wire's `job_port_forwarded` outcome
/// (never `unknown` here).
pub use efr_sandbox_wire::job::ForwardOutcome;

/// One outcome of one (address, port) of a job (the wire's `job_port_forwarded`, without
/// the job's id, which the caller knows).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ForwardEvent {
    /// The loopback address the job listens on and the host's address of the forward, as
    /// text: `127.0.0.1` or `::1` (a listener on `0.0.0.0` listens on `127.0.0.1`, one on
    /// `::` on `::1`, and a dual-stack one on both).
    pub listen: String,
    /// The port, the same on both sides.
    pub port: u16,
    /// What became of it.
    pub outcome: ForwardOutcome,
    /// The job of the same conversation that holds the port (`in_use`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_job: Option<String>,
    /// Why, for `refused`, `limit` and an `in_use` not by a job of the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why a job's network namespace could not be found.
#[derive(Debug, thiserror::Error)]
pub enum JobNsError {
    /// The launcher's process is not there.
    #[error("no launcher process {0}")]
    NoLauncher(u32),
    /// `/proc` could not be listed.
    #[error("list /proc: {0}")]
    Proc(#[source] std::io::Error),
    /// No process of the job is in a network namespace other than the launcher's.
    #[error(
        "no process below the launcher {0} is in a network namespace of its own (the job has no network of its own, has not started or has ended)"
    )]
    NoNetworkOfItsOwn(u32),
}

/// Why a job's forwards could not start.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The job's network namespace was not found.
    #[error("the forwards of job {job}: {source}")]
    Namespace {
        /// The job's id.
        job: String,
        /// Why.
        #[source]
        source: JobNsError,
    },
    /// The socket maker could not start or enter the namespace.
    #[error("the forwards of job {job}: {source}")]
    Helper {
        /// The job's id.
        job: String,
        /// Why.
        #[source]
        source: HelperError,
    },
    /// Not called on a tokio runtime.
    #[error("the forwards of job {job}: not on a tokio runtime")]
    NoRuntime {
        /// The job's id.
        job: String,
    },
}

/// The network namespace of `/proc/PID/ns/net` (its link text), when readable.
fn net_ns(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// A descendant of the launcher `launcher_pid` in the job's own network namespace: the
/// nearest (by generations) whose namespace this process may read and that is not the
/// launcher's own. (The call's init is not dumpable, and its namespace files are closed to
/// the service; the line's processes, or bubblewrap's, are open to it.)
pub fn job_ns_pid(launcher_pid: u32) -> Result<u32, JobNsError> {
    let own = net_ns(launcher_pid)
        .or_else(|| net_ns(std::process::id()))
        .ok_or(JobNsError::NoLauncher(launcher_pid))?;
    if !std::path::Path::new(&format!("/proc/{launcher_pid}")).exists() {
        return Err(JobNsError::NoLauncher(launcher_pid));
    }
    let mut children: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    for e in std::fs::read_dir("/proc")
        .map_err(JobNsError::Proc)?
        .flatten()
    {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent is the second field after the command's closing parenthesis.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pp) = ppid {
            children.entry(pp).or_default().push(pid);
        }
    }
    let mut level = vec![launcher_pid];
    // A call's tree is a few generations deep (launcher, bubblewrap, its pid 1, the
    // init, the line); 16 bounds a loop in a /proc read while pids were reused.
    for _ in 0..16 {
        let mut next = Vec::new();
        for p in &level {
            let mut kids = children.remove(p).unwrap_or_default();
            kids.sort_unstable();
            for k in kids {
                if net_ns(k).is_some_and(|n| n != own) {
                    return Ok(k);
                }
                next.push(k);
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Err(JobNsError::NoNetworkOfItsOwn(launcher_pid))
}

/// The running forwards of one job.
#[derive(Debug)]
pub struct Forwards {
    current: Arc<Mutex<Vec<(String, u16)>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<watch::Watch>>,
}

/// Starts the forwards of the job whose launcher is `launcher_pid` (a contained call with
/// a network namespace of its own, running), on the current tokio runtime, with the
/// service's launcher ([`efr_call::launch::launcher`]). See [`start_with`].
pub async fn start(
    launcher_pid: u32,
    conversation: &str,
    job_id: &str,
    cfg: ForwardConfig,
    ports: Arc<Ports>,
    events: UnboundedSender<ForwardEvent>,
) -> Result<Forwards, ForwardError> {
    start_with(
        &efr_call::launch::launcher(),
        launcher_pid,
        conversation,
        job_id,
        cfg,
        ports,
        events,
    )
    .await
}

/// [`start`] with the socket maker run by `launcher`: finds a process of the job in its
/// network namespace ([`job_ns_pid`]), starts the socket maker there and waits until it is
/// in, then watches the job's listeners on a task of the current runtime until
/// [`Forwards::stop`]. The outcomes go to `events`; `ports` is the service's one
/// [`Ports`].
pub async fn start_with(
    launcher: &Launcher,
    launcher_pid: u32,
    conversation: &str,
    job_id: &str,
    cfg: ForwardConfig,
    ports: Arc<Ports>,
    events: UnboundedSender<ForwardEvent>,
) -> Result<Forwards, ForwardError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(ForwardError::NoRuntime { job: job_id.into() });
    }
    let pid = job_ns_pid(launcher_pid).map_err(|source| ForwardError::Namespace {
        job: job_id.into(),
        source,
    })?;
    let helper = helper::Helper::start(launcher, pid)
        .await
        .map_err(|source| ForwardError::Helper {
            job: job_id.into(),
            source,
        })?;
    let job = Holder {
        conversation: conversation.into(),
        job_id: job_id.into(),
    };
    let mut w = watch::Watch::new(job, cfg, ports, Arc::new(helper), events);
    let current = w.current.clone();
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                _ = tick.tick() => {
                    // A failed poll changes nothing; the next one asks for a new socket.
                    let _ = w.poll().await;
                }
            }
        }
        w
    });
    Ok(Forwards {
        current,
        stop: Some(stop),
        task: Some(task),
    })
}

impl Forwards {
    /// The forwards running now: (address, port), the address `127.0.0.1` or `::1`.
    pub fn current(&self) -> Vec<(String, u16)> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops them all: `stopped` reported for each forward, the host's listeners and every
    /// relayed connection closed, the ports given back, the socket maker ended and reaped.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let Some(task) = self.task.take() else {
            return;
        };
        let Ok(mut w) = task.await else {
            return;
        };
        w.stop_all().await;
        let helper = w.helper.take();
        drop(w);
        // Every relay has ended: the watch held the last reference.
        if let Some(Ok(h)) = helper.map(Arc::try_unwrap) {
            h.end().await;
        }
    }
}

impl Drop for Forwards {
    fn drop(&mut self) {
        // Dropped without `stop`: the watch's task ends with its relays and socket maker
        // (each ended on drop), without events.
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}
