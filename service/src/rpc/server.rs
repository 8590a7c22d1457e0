//! `efr-sandbox serve`: the socket, the peer check and the accept loop.
//!
//! The socket is bound before the runtime starts (a restrictive umask is process-wide, so it
//! is set while the process has one thread), mode 0600 in a directory 0700. The service
//! holds `<socket>.lock` (`flock`) for its life: a second one started at the same moment
//! refuses to start rather than race it for the socket. A socket left by a service that
//! died is removed only when nothing answers on it and it is ours; a live one, or one of
//! another uid, makes this service refuse to start. Every peer's uid is read with
//! SO_PEERCRED before a byte of it is read; a peer whose uid is not allowed (by default:
//! any uid but ours) is closed and logged. At most [`MAX_CONNECTIONS`] connections are served at once; the next one gets
//! `{id: null, error: busy}` and is closed.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener as StdListener, UnixStream as StdStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use efr_policy::config::Env;
use efr_sandbox_wire::frame;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode, ServerFrame};
use nix::sys::stat::{Mode, umask};
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::paths::{ServicePaths, prepare_dir};
use crate::policy::Policy;
use crate::rpc::conn;
use crate::state::{Limits, Service};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;

/// The options of `serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub socket: Option<PathBuf>,
    /// The uids allowed to connect; empty means only the service's own uid.
    pub allow_uids: Vec<u32>,
    pub test_methods: bool,
    pub limits: Limits,
    pub max_connections: usize,
    /// Keep a launcher in standby for the next call ([`efr_call::standby`]).
    pub standby: bool,
    /// Stop once no client has been connected for this long.
    pub idle_exit: Option<Duration>,
}

/// The open files the proxies of every call leave to the rest of the service: the RPC's
/// connections, the launchers' pipes and pidfds, the caches' locks (a quarter of the limit
/// when that is less).
pub const FD_RESERVE: u64 = 1024;

/// Raises the soft open-file limit to the hard one and gives the calls' proxies, together,
/// what is left once [`FD_RESERVE`] is kept (each connection of a proxy counted twice: its
/// own fd and a tunnel's upstream).
fn fd_budgets() {
    let limit = crate::sys::raise_nofile();
    let share = limit.saturating_sub(FD_RESERVE.min(limit / 4)) / 2;
    efr_proxy::set_process_budget(usize::try_from(share).unwrap_or(usize::MAX).max(1));
    if limit < 4 * FD_RESERVE {
        eprintln!(
            "efr-sandbox: open files limited to {limit}: the calls' proxies share {share} \
             connections"
        );
    }
}

/// Removes the plan files (`<token>.json`) an earlier service left in `dir`; links and
/// anything else are left alone.
fn remove_stale_plans(dir: &std::path::Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut n = 0;
    for e in rd.flatten() {
        let p = e.path();
        let plain = e.file_type().is_ok_and(|t| t.is_file());
        if plain && p.extension().is_some_and(|x| x == "json") && fs::remove_file(&p).is_ok() {
            n += 1;
        }
    }
    if n > 0 {
        eprintln!(
            "efr-sandbox: removed {n} plan file(s) an earlier service never saw finished in {}",
            dir.display()
        );
    }
}

/// Runs the service until SIGINT or SIGTERM.
pub fn run(opts: ServeOptions) -> anyhow::Result<()> {
    fd_budgets();
    let uid = nix::unistd::geteuid().as_raw();
    let mut env = Env::from_process();
    let paths = ServicePaths::resolve(opts.socket.as_deref(), env.config_file())?;
    prepare_dir(&paths.runtime_dir, uid, paths.runtime_dir_is_default)?;
    env.scratch = Some(paths.scratch.clone());
    // Its own socket, wherever `--socket` put it: part of the control plane no call reaches.
    if !env.service_sockets.contains(&paths.socket) {
        env.service_sockets.push(paths.socket.clone());
    }
    let approvals_dir = efr_policy::control::state_home(&env).join("efr-sandbox");
    let policy = Policy::load(env);
    // One service per socket: two started at once (two `efr-sandbox run`s finding none)
    // must not both take the socket, nor one remove the other's as stale between its bind
    // and its listen. Held until this process ends.
    let _owner = own(&paths.socket)?;
    let std_listener = bind(&paths.socket)?;
    // Bound, so no other service runs here: the plans an earlier one handed out and never
    // saw finished can no longer be finished by anyone.
    remove_stale_plans(&paths.runtime_dir.join("plans"));
    let bound = fs::symlink_metadata(&paths.socket)
        .map(|m| (m.dev(), m.ino()))
        .ok();
    let allowed: BTreeSet<u32> = if opts.allow_uids.is_empty() {
        BTreeSet::from([uid])
    } else {
        opts.allow_uids.iter().copied().collect()
    };

    let svc = Arc::new(Service {
        paths,
        test_methods: opts.test_methods,
        limits: opts.limits,
        frame_budget: Arc::new(Semaphore::new(opts.limits.frame_budget)),
        policy,
        classifier: Default::default(),
        planned: Default::default(),
        last_check: Default::default(),
        standby: opts.standby.then(Default::default),
        jobs: Default::default(),
        approvals: Arc::new(crate::approvals::Approvals::open(&approvals_dir)),
    });
    svc.jobs
        .take_over(efr_jobs::registry::restart::Record::open(
            &svc.paths.runtime_dir,
            &svc.paths.socket,
        ));
    // The first call finds its launcher waiting too; each call that takes it starts the
    // next once it has ended.
    let standby = svc.standby.clone();
    if let Some(s) = &standby {
        s.fill(&efr_call::launch::launcher());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let socket = svc.paths.socket.clone();
    let jobs = svc.jobs.clone();
    let res = rt.block_on(async move {
        std_listener
            .set_nonblocking(true)
            .context("cannot make the socket non-blocking")?;
        let listener =
            UnixListener::from_std(std_listener).context("cannot register the socket")?;
        eprintln!(
            "efr-sandbox: listening on {} (uids allowed: {})",
            svc.paths.socket.display(),
            allowed
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot watch SIGTERM")?;
        let accept = accept_loop(
            listener,
            svc,
            allowed,
            opts.max_connections.max(1),
            opts.idle_exit,
        );
        tokio::pin!(accept);
        let mut accepting = true;
        tokio::select! {
            () = &mut accept => accepting = false,
            r = tokio::signal::ctrl_c() => { r.context("cannot watch SIGINT")?; }
            _ = term.recv() => {}
        }
        eprintln!("efr-sandbox: stopping");
        // Every job ends with the service (and its record says none runs), while the
        // connections still run: their readers of `sandbox.job_events` get the ends.
        let had_jobs = jobs.running() > 0;
        tokio::select! {
            () = jobs.stop_all(efr_sandbox_wire::job::JobStopBy::DaemonStop) => {}
            () = &mut accept, if accepting => {}
        }
        if had_jobs {
            // The connections' writers send the `job_ended` events out before the runtime
            // goes.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::Ok(())
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    if let Some(s) = standby {
        s.clear();
    }
    // Remove the socket only if it is still the one we bound.
    if let (Some(b), Ok(m)) = (bound, fs::symlink_metadata(&socket))
        && (m.dev(), m.ino()) == b
    {
        let _ = fs::remove_file(&socket);
    }
    res
}

/// Takes the lock beside `socket` (`<socket>.lock`, 0600, `flock`), or says which service
/// holds it.
fn own(socket: &Path) -> anyhow::Result<nix::fcntl::Flock<fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .with_context(|| format!("cannot open the lock {}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        if e == nix::errno::Errno::EWOULDBLOCK {
            anyhow::anyhow!(
                "another service runs on {} (it holds {}); refusing to start a second one",
                socket.display(),
                path.display()
            )
        } else {
            anyhow::anyhow!("cannot lock {}: {e}", path.display())
        }
    })
}

/// Binds the socket 0600, removing a stale one first.
fn bind(socket: &Path) -> anyhow::Result<StdListener> {
    let uid = nix::unistd::geteuid().as_raw();
    match fs::symlink_metadata(socket) {
        // Another user's socket is never taken for a stale one of ours.
        Ok(m) if m.file_type().is_socket() && m.uid() != uid => bail!(
            "{} is a socket of uid {}, not of this service's uid {uid}; refusing to replace it",
            socket.display(),
            m.uid()
        ),
        Ok(m) if m.file_type().is_socket() => match StdStream::connect(socket) {
            Ok(_) => bail!(
                "another service answers on {}; refusing to start a second one",
                socket.display()
            ),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                fs::remove_file(socket).with_context(|| {
                    format!("cannot remove the stale socket {}", socket.display())
                })?;
                eprintln!("efr-sandbox: removed the stale socket {}", socket.display());
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("cannot tell whether {} is in use", socket.display())
                });
            }
        },
        Ok(_) => bail!(
            "{} exists and is not a socket; refusing to replace it",
            socket.display()
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", socket.display())),
    }
    // The process has one thread here, so the umask change is seen by no one else.
    let old = umask(Mode::from_bits_truncate(0o177));
    let listener = StdListener::bind(socket);
    umask(old);
    let listener = listener.with_context(|| format!("cannot bind {}", socket.display()))?;
    fs::set_permissions(socket, fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot set mode 0600 on {}", socket.display()))?;
    Ok(listener)
}

/// Accepts connections until the service has had none for `idle` (forever without).
async fn accept_loop(
    listener: UnixListener,
    svc: Arc<Service>,
    allowed: BTreeSet<u32>,
    max: usize,
    idle: Option<Duration>,
) {
    let slots = Arc::new(Semaphore::new(max));
    // Looked at a few times per idle period: idle since when no connection was open.
    let mut tick = tokio::time::interval(idle.map_or(Duration::from_secs(3600), |d| {
        (d / 4).clamp(Duration::from_millis(10), Duration::from_secs(5))
    }));
    let mut idle_since: Option<tokio::time::Instant> = None;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            now = tick.tick() => {
                if let Some(limit) = idle {
                    // A client, or a job, keeps the service.
                    if slots.available_permits() < max || svc.jobs.running() > 0 {
                        idle_since = None;
                    } else if now.duration_since(*idle_since.get_or_insert(now)) >= limit {
                        eprintln!(
                            "efr-sandbox: no client for {}s; stopping",
                            limit.as_secs_f64()
                        );
                        return;
                    }
                }
                continue;
            }
        };
        idle_since = None;
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Such as EMFILE: wait a little rather than spin.
                eprintln!("efr-sandbox: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // The peer's credentials, before a byte is read.
        let cred = match stream.peer_cred() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("efr-sandbox: closed a peer whose credentials cannot be read: {e}");
                continue;
            }
        };
        let pid = cred.pid().map_or_else(|| "?".to_owned(), |p| p.to_string());
        if !allowed.contains(&cred.uid()) {
            eprintln!(
                "efr-sandbox: refused a peer of uid {} (pid {pid}): not an allowed uid",
                cred.uid()
            );
            drop(stream);
            continue;
        }
        let peer = format!("peer pid {pid}");
        // A contained call that reached the socket anyway gets nothing but `hello`.
        let contained = crate::peer::contained(&stream, cred.pid());
        if let Some(why) = &contained {
            eprintln!("efr-sandbox: {peer}: {why}");
        }
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(conn::serve(
                    svc.clone(),
                    stream,
                    peer,
                    cred.uid(),
                    contained,
                    permit,
                ));
            }
            Err(_) => {
                eprintln!("efr-sandbox: {peer}: refused, {max} connections are open");
                tokio::spawn(refuse_busy(stream, max));
            }
        }
    }
}

async fn refuse_busy(mut stream: UnixStream, max: usize) {
    let err = ServerFrame::Error {
        id: None,
        error: ErrorBody::new(
            ErrorCode::Busy,
            format!("{max} connections are open; try later"),
        ),
    };
    if let Ok(bytes) = frame::encode(&err) {
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&bytes)).await;
    }
    let _ = stream.shutdown().await;
}
