//! The bus filter of a contained call (design section 8): for each `bus_filter`
//! grant, one xdg-dbus-proxy started for that call with `--filter` and the rules of the
//! config's `[bus]` section ([`efr_policy::bus::filter_rules`]), listening on a socket in a
//! 0700 directory of the call. The call gets that socket (a `socket` grant) and its bus
//! variable naming it; the real bus's address and socket stay outside (the `DBUS_*`
//! variables are dropped and the runtime dir and `/run/dbus` are masked). Readiness is the
//! byte the proxy writes on its `--fd` socket; closing our end of it ends the proxy. Its
//! `--log` lines become the call's `bus_refused` and one `bus` exit record with source
//! `denial` per refused destination.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use efr_launcher::plan::{EnvVar, MAX_SOCKET_PATH, Plan, PlanMode};
use efr_policy::config::Config;
use efr_proxy::buslog::BusLog;
use efr_sandbox_wire::{
    Action, Bus, ExitKind, ExitRecord, ExitSource, Facts, Grant, JudgedBy, Judgement, Needs,
    SandboxSummary, Verdict,
};

/// The program, `$EFR_XDG_DBUS_PROXY` when set (tests), else `xdg-dbus-proxy` on PATH.
pub fn program() -> PathBuf {
    std::env::var_os("EFR_XDG_DBUS_PROXY")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("xdg-dbus-proxy"))
}

/// How long the proxy may take to say it listens.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The buses a plan's `bus_filter` grants ask for (a contained call only), each once.
pub fn wanted(plan: &Plan) -> Vec<Bus> {
    let mut out = Vec::new();
    if plan.mode != PlanMode::Contained {
        return out;
    }
    for g in &plan.grants {
        if let Grant::BusFilter { bus } = g {
            if !out.contains(bus) {
                out.push(*bus);
            }
        }
    }
    out
}

/// The variable that names a bus's address.
pub fn address_var(bus: Bus) -> &'static str {
    match bus {
        Bus::System => "DBUS_SYSTEM_BUS_ADDRESS",
        _ => "DBUS_SESSION_BUS_ADDRESS",
    }
}

/// The real bus's address, from the environment the line starts from.
pub fn upstream(bus: Bus, env: &[(String, String)]) -> Result<String, NoSessionBus> {
    let var = |n: &str| {
        env.iter()
            .find(|(k, v)| k == n && !v.is_empty())
            .map(|(_, v)| v.clone())
    };
    match bus {
        Bus::System => Ok(var("DBUS_SYSTEM_BUS_ADDRESS")
            .unwrap_or_else(|| "unix:path=/run/dbus/system_bus_socket".into())),
        _ => var("DBUS_SESSION_BUS_ADDRESS")
            .or_else(|| var("XDG_RUNTIME_DIR").map(|d| format!("unix:path={d}/bus")))
            .ok_or(NoSessionBus),
    }
}

/// The line's environment names no session bus.
#[derive(Debug, thiserror::Error)]
#[error("no session bus: neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set")]
pub struct NoSessionBus;

/// Why a bus filter cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The config turns the bus filter off (`bus.filter = false`), so no filter is started.
    #[error("the bus filter is off (bus.filter = false)")]
    Off,
    /// The real bus's address is not known from the line's environment.
    #[error("bus filter of the {bus} bus: {source}")]
    Upstream {
        /// The bus (`session` or `system`).
        bus: &'static str,
        /// Why there is no address, as `upstream` says.
        source: NoSessionBus,
    },
    /// Who owns the rules' names on the real bus could not be read, so the rules could not
    /// be checked against the never names of their connections.
    #[error("bus filter of the {bus} bus: {source}")]
    Owners {
        /// The bus (`session` or `system`).
        bus: &'static str,
        /// Why.
        source: Box<crate::bus_owners::OwnersError>,
    },
    /// The call's 0700 directory for the filters' sockets could not be made or is not ours.
    #[error("bus filter directory {}: {source}", path.display())]
    Dir {
        /// The directory (or its parent) that failed.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// The proxy could not be started (its sync socket pair or its spawn failed).
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        /// The xdg-dbus-proxy program run.
        program: PathBuf,
        /// Why the socket pair or the spawn failed.
        source: std::io::Error,
    },
    /// The proxy started but wrote no ready byte in time, or its relay could not start;
    /// the proxy is killed.
    #[error("{} did not get ready on {}: {why}", program.display(), socket.display())]
    NotReady {
        /// The xdg-dbus-proxy program run.
        program: PathBuf,
        /// The socket the call was to get.
        socket: PathBuf,
        /// What went wrong, with the start of the proxy's stderr when it wrote any.
        why: String,
    },
}

/// One running filter.
#[derive(Debug)]
struct Filter {
    bus: Bus,
    child: Child,
    /// Our end of the `--fd` socket: dropping it ends the proxy.
    sync: Option<UnixStream>,
    log: Arc<Mutex<BusLog>>,
    reader: Option<JoinHandle<()>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<JoinHandle<()>>,
    /// Between the call's clients and the proxy (see [`start`]).
    relay: Option<crate::bus_relay::Relay>,
    /// The watch of who owns the rules' names (it cuts the filter when a rule comes to
    /// reach a never name), and the rules it cut before the filter started.
    owners: Option<crate::bus_owners::Owners>,
    cut_rules: Vec<crate::bus_owners::CutRule>,
}

/// The bus filters of one call, running until [`CallBus::finish`] (or drop).
#[derive(Debug)]
pub struct CallBus {
    filters: Vec<Filter>,
    dir: PathBuf,
    done: bool,
    /// The never entries in force: a refusal of one is the user's to open.
    never: Vec<efr_policy::config::Entry>,
}

/// A 0700 directory for the call's sockets below `runtime` (`calls/bus-<random>`), else
/// below the temp dir (`efr-sandbox-<uid>/calls/`) when there is no runtime dir or the
/// socket path would be too long; when that shared name is not ours (another user's, or
/// in a user namespace the real root's), a directory of a name of this call's own there.
fn call_dir(runtime: Option<&Path>) -> Result<PathBuf, AttachError> {
    call_dir_in(runtime, &std::env::temp_dir())
}

/// [`call_dir`] with `tmp` as the temp dir.
fn call_dir_in(runtime: Option<&Path>, tmp_root: &Path) -> Result<PathBuf, AttachError> {
    let name = crate::sys::random_hex(8).map_err(|e| AttachError::Dir {
        path: PathBuf::from("calls"),
        source: e,
    })?;
    let uid = crate::sys::euid();
    let leaf = format!("bus-{name}");
    let tmp = tmp_root.join(format!("efr-sandbox-{uid}/calls"));
    let parent = match runtime {
        Some(r) if fits(&r.join("calls").join(&leaf)) => {
            // The runtime dir is the service's own (not a shared one): made as it is named.
            if std::fs::symlink_metadata(r).is_err() {
                crate::dirs::private_dir(r).map_err(|e| AttachError::Dir {
                    path: r.to_path_buf(),
                    source: e,
                })?;
            }
            r.join("calls")
        }
        _ => tmp,
    };
    let (dir, result) = match checked_parent(&parent, uid) {
        Ok(()) => {
            let dir = parent.join(&leaf);
            let made = crate::dirs::private_dir(&dir);
            (dir, made)
        }
        Err(first) => {
            let own = tmp_root.join(format!("efr-sandbox-{uid}-{leaf}"));
            if !fits(&own) {
                return Err(first);
            }
            // Made here, not found: a name planted in the shared dir is an error.
            use std::os::unix::fs::DirBuilderExt;
            let made = std::fs::DirBuilder::new().mode(0o700).create(&own);
            (own, made)
        }
    };
    result.map_err(|e| AttachError::Dir {
        path: dir.clone(),
        source: e,
    })?;
    Ok(dir)
}

/// The longest socket of a call's bus dir fits a socket address.
fn fits(dir: &Path) -> bool {
    dir.join("session.sock").as_os_str().len() <= MAX_SOCKET_PATH
}

/// Makes `parent` and the directory above it (0700) where missing, one at a time without
/// following a link, and checks that both are directories of ours.
fn checked_parent(parent: &Path, uid: u32) -> Result<(), AttachError> {
    let err = |path: &Path, source| AttachError::Dir {
        path: path.to_path_buf(),
        source,
    };
    let above = parent.parent().unwrap_or(parent);
    for d in [above, parent] {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        if std::fs::symlink_metadata(d).is_err() {
            match std::fs::DirBuilder::new().mode(0o700).create(d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(d, e)),
            }
        }
        match std::fs::symlink_metadata(d) {
            Ok(m) if m.is_dir() && m.uid() == uid => {}
            _ => return Err(err(d, std::io::Error::other("not a directory of ours"))),
        }
    }
    Ok(())
}

fn drain(
    mut r: impl Read + Send + 'static,
    mut each: impl FnMut(&[u8]) + Send + 'static,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => each(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    })
}

impl CallBus {
    /// Starts a filter for each bus of `buses` and gives `plan` its socket (a `socket`
    /// grant) and the variable that names it. `runtime` holds the call's directory.
    pub fn attach(
        plan: &mut Plan,
        buses: &[Bus],
        config: &Config,
        runtime: Option<&Path>,
    ) -> Result<CallBus, AttachError> {
        if !config.bus.filter.value {
            return Err(AttachError::Off);
        }
        let rules = efr_policy::bus::filter_rules(&config.bus);
        let env = efr_launcher::env::source(plan);
        let dir = call_dir(runtime)?;
        let mut cb = CallBus {
            filters: Vec::new(),
            dir: dir.clone(),
            done: false,
            never: rules.never.clone(),
        };
        for &bus in buses {
            let upstream = upstream(bus, &env).map_err(|source| AttachError::Upstream {
                bus: bus.as_str(),
                source,
            })?;
            // The rules whose connection also owns a never name they would reach are cut;
            // the watch goes on while the filter runs.
            let (cut_rules, owners) =
                crate::bus_owners::start(&upstream, &rules.connection, &rules.never).map_err(
                    |source| AttachError::Owners {
                        bus: bus.as_str(),
                        source: Box::new(source),
                    },
                )?;
            let args: Vec<String> = rules
                .args
                .iter()
                .filter(|a| !cut_rules.iter().any(|c| c.arg == **a))
                .cloned()
                .collect();
            let sock = dir.join(format!("{}.sock", bus.as_str()));
            let mut f = start(bus, &upstream, &sock, &args)?;
            owners.proxy_pid.store(
                i32::try_from(f.child.id()).unwrap_or(0),
                std::sync::atomic::Ordering::SeqCst,
            );
            // A change seen before the pid was known: the cut happens now.
            if owners.cut().is_some() {
                crate::bus_owners::kill(&owners.proxy_pid);
            }
            f.owners = Some(owners);
            f.cut_rules = cut_rules;
            cb.filters.push(f);
            let path = sock.to_string_lossy().into_owned();
            plan.grants.push(Grant::Socket { path: path.clone() });
            let name = address_var(bus);
            plan.env_set.retain(|e| e.name != name);
            plan.env_set.push(EnvVar {
                name: name.into(),
                value: format!("unix:path={path}"),
            });
        }
        Ok(cb)
    }

    /// Ends the filters and removes their directory. Gives a message for each filter that
    /// had ended before the call did (its bus was cut off).
    pub fn stop(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.done {
            return notes;
        }
        self.done = true;
        for f in &mut self.filters {
            for c in &f.cut_rules {
                notes.push(format!(
                    "bus rule {} was left out of the bus filter of the {} bus: {}",
                    c.rule,
                    f.bus.as_str(),
                    c.why
                ));
            }
            // The watch first: it may kill the proxy, which is reaped only below.
            let cut = f.owners.as_mut().and_then(|o| {
                o.stop();
                o.cut()
            });
            if let Some(c) = &cut {
                notes.push(format!(
                    "the bus filter of the {} bus was cut during the call: {}: {}; the call's \
                     bus was cut off from then on",
                    f.bus.as_str(),
                    c.rule,
                    c.why
                ));
            } else if let Ok(Some(st)) = f.child.try_wait() {
                let err =
                    String::from_utf8_lossy(&f.stderr.lock().unwrap_or_else(|e| e.into_inner()))
                        .trim()
                        .to_string();
                notes.push(format!(
                    "the bus filter of the {} bus ended during the call ({st}{}): the call's \
                     bus was cut off from then on",
                    f.bus.as_str(),
                    if err.is_empty() {
                        String::new()
                    } else {
                        format!(": {err}")
                    }
                ));
            }
            if let Some(mut r) = f.relay.take() {
                r.stop();
            }
            f.sync = None;
            let _ = f.child.kill();
            let _ = f.child.wait();
            for r in [f.reader.take(), f.stderr_reader.take()]
                .into_iter()
                .flatten()
            {
                let _ = r.join();
            }
            f.log.lock().unwrap_or_else(|e| e.into_inner()).finish();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        notes
    }

    /// Ends the filters, puts their refusals in `summary` (`bus_refused`, at most 16, and
    /// `bus_refused_more`), and gives one `bus` exit record per refused destination, with
    /// the messages of [`Self::stop`].
    pub fn finish(
        &mut self,
        summary: &mut SandboxSummary,
        line: &str,
    ) -> (Vec<ExitRecord>, Vec<String>) {
        let notes = self.stop();
        let mut exits = Vec::new();
        for f in &self.filters {
            // What was cut comes first: the rules left out, the filter ended.
            let mut cut: Vec<efr_sandbox_wire::BusRefused> = f
                .cut_rules
                .iter()
                .map(|c| efr_sandbox_wire::BusRefused {
                    bus: f.bus,
                    name: c.name.clone(),
                    member: None,
                    path: None,
                    count: 1,
                    cut: Some(format!("{}: {}", c.rule, c.why)),
                })
                .collect();
            if let Some(c) = f.owners.as_ref().and_then(|o| o.cut()) {
                cut.push(efr_sandbox_wire::BusRefused {
                    bus: f.bus,
                    name: c.name.clone(),
                    member: None,
                    path: None,
                    count: 1,
                    cut: Some(format!(
                        "the filter was ended during the call: {}: {}",
                        c.rule, c.why
                    )),
                });
            }
            let room = efr_proxy::buslog::MAX_SUMMARY.saturating_sub(summary.bus_refused.len());
            let left = cut.len().saturating_sub(room);
            summary.bus_refused.extend(cut.into_iter().take(room));
            summary.bus_refused_more = summary
                .bus_refused_more
                .saturating_add(u32::try_from(left).unwrap_or(u32::MAX));
            let log = f.log.lock().unwrap_or_else(|e| e.into_inner());
            let (listed, more) = log.summary();
            let room = efr_proxy::buslog::MAX_SUMMARY.saturating_sub(summary.bus_refused.len());
            let left = listed.len().saturating_sub(room);
            summary.bus_refused.extend(listed.into_iter().take(room));
            summary.bus_refused_more = summary
                .bus_refused_more
                .saturating_add(more)
                .saturating_add(u32::try_from(left).unwrap_or(u32::MAX));
            let mut names: Vec<(&str, u32)> = Vec::new();
            for r in log.refused() {
                match names.iter_mut().find(|(n, _)| *n == r.name) {
                    Some((_, c)) => *c = c.saturating_add(r.count),
                    None => names.push((&r.name, r.count)),
                }
            }
            for (name, count) in names {
                // A unique name is shown with the names its connection owns, and judged by
                // them: a connection that owns a never name is the user's to open.
                let owns = f
                    .owners
                    .as_ref()
                    .filter(|_| name.starts_with(':'))
                    .map(|o| o.names_of(name))
                    .unwrap_or_default();
                exits.push(bus_record(
                    exits.len() + 1,
                    f.bus,
                    name,
                    &owns,
                    count,
                    line,
                    &self.never,
                ));
            }
        }
        (exits, notes)
    }
}

/// The service's hook: the filters of `plan`'s `bus_filter` grants (none when it has
/// none), or why the call cannot start.
pub fn attach_for(
    plan: &mut Plan,
    config: &Config,
    runtime: &Path,
) -> Result<Option<CallBus>, AttachError> {
    let buses = wanted(plan);
    if buses.is_empty() {
        return Ok(None);
    }
    CallBus::attach(plan, &buses, config, Some(runtime)).map(Some)
}

/// The service's hook at the call's end: the filters' part of `fin` (summary and exit
/// records, a filter that died during the call said on stderr); gives
/// the exit records added.
pub fn finish_into(
    b: &mut CallBus,
    fin: &mut efr_sandbox_wire::Finish,
    line: &str,
) -> Vec<ExitRecord> {
    let (recs, notes) = b.finish(&mut fin.sandbox_summary, line);
    for n in notes {
        eprintln!("efr-sandbox: {n}");
    }
    fin.exits.extend(recs.iter().cloned());
    recs
}

impl Drop for CallBus {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts one xdg-dbus-proxy and waits for its ready byte; the call's clients reach it on
/// `sock` through a [`crate::bus_relay::Relay`]. The relay is what lets a client that sends
/// its whole auth at once talk to a proxy older than [`PIPELINED_AUTH_VERSION`]; it is
/// used with every version, because telling the version costs a run of the program on
/// every `efr-sandbox run` (4 to 5 ms, measured with scripts/bench-bus.sh), more than the
/// relay costs a call (a listener and a thread; a copy per message).
fn start(bus: Bus, upstream: &str, sock: &Path, rules: &[String]) -> Result<Filter, AttachError> {
    let program = program();
    let listen = sock.with_extension("up");
    let (ours, theirs) = UnixStream::pair().map_err(|e| AttachError::Spawn {
        program: program.clone(),
        source: e,
    })?;
    // The proxy's end is its stdin: `--fd=0` (no descriptor to place by hand).
    let mut child = Command::new(&program)
        .arg("--fd=0")
        .arg(upstream)
        .arg(&listen)
        .arg("--filter")
        .arg("--log")
        .args(rules)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .spawn()
        .map_err(|e| AttachError::Spawn {
            program: program.clone(),
            source: e,
        })?;
    let log = Arc::new(Mutex::new(BusLog::new(bus)));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let reader = child.stdout.take().map(|out| {
        let log = log.clone();
        drain(out, move |b| {
            log.lock().unwrap_or_else(|e| e.into_inner()).feed(b)
        })
    });
    let stderr_reader = child.stderr.take().map(|err| {
        let keep = stderr.clone();
        drain(err, move |b| {
            let mut k = keep.lock().unwrap_or_else(|e| e.into_inner());
            let room = 4096usize.saturating_sub(k.len());
            k.extend_from_slice(&b[..b.len().min(room)]);
        })
    });
    let mut f = Filter {
        bus,
        child,
        sync: Some(ours),
        log,
        reader,
        stderr,
        stderr_reader,
        relay: None,
        owners: None,
        cut_rules: Vec::new(),
    };
    let ready = {
        let s = f.sync.as_mut().expect("set above");
        let _ = s.set_read_timeout(Some(READY_TIMEOUT));
        let mut b = [0u8; 1];
        loop {
            match s.read(&mut b) {
                Ok(1) => break Ok(()),
                Ok(_) => break Err("it ended before it listened".to_string()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(format!("no ready byte within {READY_TIMEOUT:?} ({e})")),
            }
        }
    };
    if let Err(why) = ready {
        f.sync = None;
        let _ = f.child.kill();
        let _ = f.child.wait();
        if let Some(r) = f.stderr_reader.take() {
            let _ = r.join();
        }
        let err = String::from_utf8_lossy(&f.stderr.lock().unwrap_or_else(|e| e.into_inner()))
            .trim()
            .to_string();
        return Err(AttachError::NotReady {
            program,
            socket: sock.to_path_buf(),
            why: if err.is_empty() {
                why
            } else {
                format!("{why}: {err}")
            },
        });
    }
    match crate::bus_relay::Relay::start(sock, &listen) {
        Ok(r) => f.relay = Some(r),
        Err(e) => {
            f.sync = None;
            let _ = f.child.kill();
            let _ = f.child.wait();
            return Err(AttachError::NotReady {
                program,
                socket: sock.to_path_buf(),
                why: e.to_string(),
            });
        }
    }
    Ok(f)
}

/// The exit record of one refused destination: kind `bus`, source `denial`, needs the real
/// bus (the filter's rules are the config's; a rule in `[bus]` opens the name to every
/// filtered call). A unique name is shown with the well-known names its connection owns
/// (`owns`, as the filter's watch saw them). Judged `review`; `user_only` for a never name,
/// or a connection that owns one (the real bus would give the call all of it).
pub fn bus_record(
    n: usize,
    bus: Bus,
    name: &str,
    owns: &[String],
    count: u32,
    line: &str,
    never: &[efr_policy::config::Entry],
) -> ExitRecord {
    let times = if count == 1 {
        "once".to_string()
    } else {
        format!("{count} times")
    };
    let shown = if owns.is_empty() {
        name.to_string()
    } else {
        format!("{name} (the connection of {})", owns.join(", "))
    };
    let is_never = |n: &str| {
        never.iter().any(|e| {
            let root = e.value.split('=').next().unwrap_or("");
            n == root || (n.starts_with(root) && n[root.len()..].starts_with('.'))
        })
    };
    let never_name = std::iter::once(name)
        .chain(owns.iter().map(String::as_str))
        .find(|n| is_never(n));
    let mut reasons = vec![format!(
        "the bus filter refused the call's messages to {shown}: no [bus] rule lets them \
         through; a rule in [bus] lets filtered calls reach it, a bus grant gives the call the \
         whole real bus"
    )];
    if let Some(n) = never_name {
        reasons.push(format!(
            "{n} is on the bus filter's never list: the real bus would let the call run code \
             outside the sandbox through it"
        ));
    }
    ExitRecord {
        id: format!("bus-{n}"),
        source: ExitSource::Denial,
        kind: ExitKind::Bus,
        summary: format!(
            "talk to {shown} on the {} bus (refused by the bus filter, {times})",
            bus.as_str()
        ),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts::default(),
        needs: Needs::Contained {
            grants: vec![Grant::Bus { bus }],
        },
        judgement: Judgement {
            verdict: if never_name.is_some() {
                Verdict::UserOnly
            } else {
                Verdict::Review
            },
            by: JudgedBy::Policy,
            reasons,
        },
    }
}

/// The oldest xdg-dbus-proxy the filter runs: 0.1.4 fixed its reading of multi-line auth
/// and a `Hello()` the bus answers with an error (older ones let such a client on).
pub const MIN_VERSION: (u32, u32, u32) = (0, 1, 4);

/// From this version on, xdg-dbus-proxy serves a client that sends its whole auth
/// handshake at once (sd-bus's busctl, zbus); older ones close its connection.
pub const PIPELINED_AUTH_VERSION: (u32, u32, u32) = (0, 1, 6);

/// Why xdg-dbus-proxy's version is not known.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    /// It could not be run.
    #[error("cannot run {}: {source}", program.display())]
    Run {
        /// The program.
        program: PathBuf,
        /// What the spawn said.
        source: std::io::Error,
    },
    /// Its `--version` gave no version.
    #[error("{} --version said {said:?}", program.display())]
    Unreadable {
        /// The program.
        program: PathBuf,
        /// What it printed.
        said: String,
    },
}

/// The program's version (`xdg-dbus-proxy 0.1.4`).
pub fn version() -> Result<(u32, u32, u32), VersionError> {
    version_of(&program())
}

fn version_of(p: &Path) -> Result<(u32, u32, u32), VersionError> {
    let o = Command::new(p)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| VersionError::Run {
            program: p.to_path_buf(),
            source,
        })?;
    let text = String::from_utf8_lossy(&o.stdout);
    let v = text.split_whitespace().last().unwrap_or("");
    let parts: Vec<u32> = v.split('.').map_while(|x| x.parse().ok()).collect();
    match parts.as_slice() {
        [a, b, c, ..] => Ok((*a, *b, *c)),
        [a, b] => Ok((*a, *b, 0)),
        _ => Err(VersionError::Unreadable {
            program: p.to_path_buf(),
            said: text.trim().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared `efr-sandbox-<uid>` in the temp dir that is not ours (here a link to a
    /// directory elsewhere, as another user could plant) is not used: the call's sockets go
    /// in a directory of its own name, 0700, beside it; a real one of ours is used.
    #[test]
    fn a_shared_dir_not_ours_is_passed_over_for_one_of_the_calls_own() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let uid = crate::sys::euid();
        let shared = d.path().join(format!("efr-sandbox-{uid}"));
        std::os::unix::fs::symlink(&elsewhere, &shared).unwrap();
        let dir = call_dir_in(None, d.path()).unwrap();
        assert_eq!(dir.parent(), Some(d.path()), "{}", dir.display());
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("efr-sandbox-{uid}-bus-")),
            "{name}"
        );
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(
            std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
            "nothing was made through the link"
        );
        std::fs::remove_file(&shared).unwrap();
        let dir = call_dir_in(None, d.path()).unwrap();
        assert_eq!(dir.parent(), Some(shared.join("calls").as_path()));
    }
}
