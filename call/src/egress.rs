//! The egress proxy of a contained call (design section 7, issues 5 and 12): one [`Proxy`]
//! per contained call with its own network, grants or not, on a Unix socket in a 0700
//! directory of the call; its summary part merged into the call's `sandbox_summary`, each
//! refusal turned into a `host` (or `open_network`) exit record with source `denial` whose
//! grant is exactly what would open it. A call with no host grant still gets the DNS path
//! and the refusal path: a name it asks for is refused with a record, not a bare "could
//! not resolve host".

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use efr_launcher::plan::{MAX_SOCKET_PATH, NetMode, Plan, PlanMode, ProxyPlan};
use efr_policy::config::{Config, ConfigHint, Env};
use efr_policy::context::Context;
use efr_proxy::{HostRule, Proxy, ProxyPolicy, Refusal};
use efr_sandbox_wire::summary::BlockReason;
use efr_sandbox_wire::{
    Action, ExitKind, ExitRecord, ExitSource, Facts, Grant, HostFact, JudgedBy, Judgement, Needs,
    SandboxSummary, Verdict,
};
use tokio::sync::mpsc::Receiver;

use crate::dirs::private_dir;

/// The file name of the proxy socket in the call's directory.
pub const SOCKET_NAME: &str = "proxy.sock";

/// Whether a plan gets a proxy: contained with its own network (grants or not: with none,
/// the proxy only refuses, and each refusal is an exit record naming the grant that would
/// open it). `net_view` and `open_network` calls use the host's network and get none;
/// nor does a plan weakened with the test knob `no_proxy` (the launcher refuses such a plan
/// unless its own variable allows it).
pub fn wanted(plan: &Plan) -> bool {
    plan.mode == PlanMode::Contained
        && plan.net() == NetMode::Own
        && !plan.test_weaken.iter().any(|w| w == "no_proxy")
}

/// The policy of a call: its host grants, the config's allow, deny and resolve lists, and
/// the hosts a token visible to the call is for (denied): a token file no mask hides (the
/// call's `unmask` grants show one again), a variable of `call_env` (what the call's
/// environment keeps: [`call_env`]) or a credential helper the call can run.
pub fn policy(
    grants: &[Grant],
    config: &Config,
    env: &Env,
    projects: &[String],
    call_env: &[(String, String)],
) -> ProxyPolicy {
    let mut p = ProxyPolicy::from_grants(grants);
    // The call's budget in the service's process (each connection one fd, each tunnel a
    // second): whole numbers the config bounded, well under any usize.
    let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    p.limits.max_open = n(config.network.proxy_connections.value);
    p.limits.max_conns = n(config.network.proxy_tunnels.value);
    p.limits.max_pending = p.limits.max_pending.min(p.limits.max_open);
    p.allow = config
        .network
        .allow
        .iter()
        .filter_map(|e| HostRule::parse_cli(&e.value))
        .collect();
    for d in &config.network.deny {
        p.deny(&d.value);
    }
    for r in &config.network.resolve {
        let mut addrs = p.resolve.get(&r.name).cloned().unwrap_or_default();
        addrs.push(r.address);
        p.map(&r.name, addrs);
    }
    let ctx = Context::for_tokens(config, env);
    let roots: Vec<PathBuf> = projects.iter().map(PathBuf::from).collect();
    let unmasked: Vec<PathBuf> = grants
        .iter()
        .filter_map(|g| match g {
            Grant::Unmask { path } => Some(PathBuf::from(path)),
            // Only an unmask shows a token file that a mask hides.
            _ => None,
        })
        .collect();
    for (h, src) in efr_policy::tokens::visible_token_sources(&ctx, &roots, &unmasked, call_env) {
        p.token_host_because(&h, src.explain());
    }
    // The token files the surface's last scans saw, that no answer masks: a stat each, read
    // again only when one changed since. A refusal names the file and the answer that
    // takes the host back.
    let store = efr_surface::state::Store::for_home(&env.home);
    if let Ok(s) = efr_surface::state::for_calls(&store) {
        for (h, file) in &s.token_files {
            p.token_host_because(
                h,
                format!(
                    "the surface scan found a token for it in {file}, which the call can \
                     read; mask it (`efr-sandbox surface` lists it with its question: answer \
                     `efr-sandbox surface respond QID --mask`, or add it to sandbox.masks) \
                     and a host grant opens the host"
                ),
            );
        }
    }
    p
}

/// The variables a plan's line starts with, as the launcher scrubs them (the same code).
pub fn call_env(plan: &Plan) -> Vec<(String, String)> {
    let inherited = efr_launcher::env::source(plan);
    efr_launcher::env::scrub(plan, &inherited)
        .into_iter()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// Whether `p` is on a tmpfs (a socket made and removed there costs no disk inode).
fn on_tmpfs(p: &Path) -> bool {
    nix::sys::statfs::statfs(p).is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
}

/// The parents made and checked in this process (each once: a launch does not pay for it).
static CHECKED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The directory the calls' socket directories go in, made (0700) and checked once per
/// process: `<runtime>/calls` when the runtime dir is a tmpfs; else `/dev/shm` (a tmpfs on
/// every Linux: making and removing a socket and its directory on a disk file system, such
/// as an ext4 `/tmp`, costs the launch a few hundred microseconds of inode work, see
/// docs/benchmarks.md), else the runtime dir or the temp dir. A directory of a shared
/// (sticky) dir must be ours, not one planted there; a path too long for a socket is not
/// taken.
fn calls_dir(runtime: Option<&Path>, name: &str) -> Result<PathBuf, AttachError> {
    let uid = crate::sys::euid();
    let shared = |base: &Path| base.join(format!("efr-sandbox-{uid}")).join("calls");
    let fits = |p: &PathBuf| p.join(name).join(SOCKET_NAME).as_os_str().len() <= MAX_SOCKET_PATH;
    let shm = Path::new("/dev/shm");
    let mut choices: Vec<(PathBuf, bool)> = Vec::new();
    if let Some(r) = runtime.filter(|r| on_tmpfs(r)) {
        choices.push((r.join("calls"), false));
    }
    if on_tmpfs(shm) {
        choices.push((shared(shm), true));
    }
    if let Some(r) = runtime {
        choices.push((r.join("calls"), false));
    }
    choices.push((shared(&std::env::temp_dir()), true));
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    let mut last = AttachError::TooLong;
    for (parent, in_shared) in choices.into_iter().filter(|(p, _)| fits(p)) {
        if checked.contains(&parent) && parent.is_dir() {
            return Ok(parent);
        }
        match make_checked(&parent, in_shared, uid) {
            Ok(()) => {
                sweep_stale(&parent);
                checked.push(parent.clone());
                return Ok(parent);
            }
            // Another choice: a shared dir of that name may be another user's (in a user
            // namespace, uid 0 is also the real root's name).
            Err(e) => last = e,
        }
    }
    // Last: a directory of a name of this process's own in the temp dir.
    let then = |last: AttachError, e: AttachError| AttachError::Fallback {
        last: Box::new(last),
        then: Box::new(e),
    };
    let name = match crate::sys::random_hex(8) {
        Ok(n) => n,
        Err(e) => return Err(then(last, AttachError::Name(e))),
    };
    let own = std::env::temp_dir().join(format!("efr-sandbox-{uid}-{name}"));
    {
        use std::os::unix::fs::DirBuilderExt;
        let made = std::fs::DirBuilder::new().mode(0o700).create(&own);
        if let Err(source) = made {
            return Err(then(last, AttachError::Dir { path: own, source }));
        }
    }
    let parent = own.join("calls");
    if let Err(e) = make_checked(&parent, false, uid) {
        return Err(then(last, e));
    }
    checked.push(parent.clone());
    Ok(parent)
}

/// The lock file in each call's socket directory, held (`flock`) by the process that
/// serves the call's proxy for as long as the directory lives.
const OWNER_LOCK: &str = "owner.lock";

/// A directory without an owner lock younger than this is left alone (its owner may be
/// between making it and locking; older ones are left by a build before the lock).
const UNLOCKED_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the call directories in `parent` whose owner is gone: a service or CLI killed
/// by SIGKILL (or OOM) cannot remove its own, and they piled up (124 after a day of tests
/// here). An owner holds its `owner.lock`; one whose lock can be taken is dead. Run once
/// per process, when `parent` is first checked. Only names of the calls' own shape (16 hex
/// digits) are looked at.
fn sweep_stale(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let ours = name.len() == 16
            && name
                .as_encoded_bytes()
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
        if !ours || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = e.path();
        let stale = match crate::owner::take_if_free(&dir.join(OWNER_LOCK)) {
            Ok(free) => free.is_some(),
            Err(_) => e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|a| a > UNLOCKED_GRACE)),
        };
        if stale {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Makes `parent` (0700) and, in a shared dir, checks that it and its parent are ours.
fn make_checked(parent: &Path, in_shared: bool, uid: u32) -> Result<(), AttachError> {
    private_dir(parent).map_err(|source| AttachError::Dir {
        path: parent.to_path_buf(),
        source,
    })?;
    if in_shared {
        for d in [parent, parent.parent().unwrap_or(parent)] {
            use std::os::unix::fs::MetadataExt;
            match std::fs::symlink_metadata(d) {
                Ok(m) if m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0 => {}
                _ => return Err(AttachError::NotOurs(d.to_path_buf())),
            }
        }
    }
    Ok(())
}

/// Why a call's proxy cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No random name for the socket's directory.
    #[error("no random name for the proxy socket: {0}")]
    Name(#[source] std::io::Error),
    /// Every place for the calls' socket directories gives a socket path too long.
    #[error("no directory short enough for the proxy socket")]
    TooLong,
    /// A directory (or the owner lock in it) could not be made.
    #[error("{}: {source}", path.display())]
    Dir {
        /// The directory or file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A directory of a shared dir that is not ours (another user's, or not 0700).
    #[error("{}: not a directory of ours", .0.display())]
    NotOurs(PathBuf),
    /// The last choice of a directory failed too: why the one before it failed, then why
    /// the last one did.
    #[error("{last}; {then}")]
    Fallback {
        /// Why the choice before the last failed.
        last: Box<AttachError>,
        /// Why the last one failed.
        then: Box<AttachError>,
    },
    /// No runtime for the proxy's thread.
    #[error("no runtime for the call's proxy: {0}")]
    Runtime(#[source] std::io::Error),
    /// The proxy's socket could not be bound.
    #[error("proxy socket {}: {source}", path.display())]
    Socket {
        /// The socket's path.
        path: PathBuf,
        /// What the bind said.
        source: std::io::Error,
    },
    /// No thread for the proxy.
    #[error("no thread for the call's proxy: {0}")]
    Thread(#[source] std::io::Error),
}

/// The proxy of one call, serving until [`CallProxy::stop`] (or drop).
#[derive(Debug)]
pub struct CallProxy {
    proxy: Proxy,
    /// The thread serving this call's proxy alone (its own single-threaded runtime): one
    /// call's load queues behind nothing of another call's or the RPC's, and the kernel
    /// shares the processors between it and them as between any threads.
    thread: Option<std::thread::JoinHandle<()>>,
    dir: PathBuf,
    /// The directory's owner lock, held while the call's proxy lives.
    _owner: crate::owner::Held,
    events: Mutex<Option<Receiver<Refusal>>>,
    ids: Mutex<HashMap<(String, u16, BlockReason), usize>>,
    stopped: bool,
}

impl CallProxy {
    /// Starts the proxy of `plan` (when [`wanted`]) on a socket in a new 0700 directory
    /// below `runtime` (`calls/<random>`; under the temp dir when that path would be too
    /// long for a socket), served on a thread of its own (`serve_on_own_thread`), and
    /// fills the plan's `proxy` member.
    pub fn attach(
        plan: &mut Plan,
        policy: ProxyPolicy,
        runtime: Option<&Path>,
    ) -> Result<CallProxy, AttachError> {
        let name = crate::sys::random_hex(8).map_err(AttachError::Name)?;
        let parent = calls_dir(runtime, &name)?;
        let dir = parent.join(&name);
        // A directory (not `create_dir_all`: the parent is checked, and made once).
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|source| AttachError::Dir {
                    path: dir.clone(),
                    source,
                })?;
        }
        // Held until the directory is removed: a sweep of a later process sees the owner
        // alive ([`sweep_stale`]).
        let owner = match crate::owner::hold(&dir.join(OWNER_LOCK)) {
            Ok(o) => o,
            Err(source) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(AttachError::Dir {
                    path: dir.join(OWNER_LOCK),
                    source,
                });
            }
        };
        let sock = dir.join(SOCKET_NAME);
        let mut ports: Vec<u16> = policy
            .grants
            .iter()
            .chain(&policy.allow)
            .filter_map(|r| r.port)
            .filter(|p| !matches!(p, 53 | 443) && *p != efr_launcher::plan::DEFAULT_RELAY_PORT)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports.truncate(64);
        let proxy = Proxy::new(policy);
        let events = proxy.subscribe(1024);
        let thread = match serve_on_own_thread(&proxy, &sock) {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let mut pp = ProxyPlan::new(sock.to_string_lossy().into_owned());
        pp.ports = ports;
        plan.proxy = Some(pp);
        Ok(CallProxy {
            proxy,
            thread: Some(thread),
            dir,
            _owner: owner,
            events: Mutex::new(Some(events)),
            ids: Mutex::new(HashMap::new()),
            stopped: false,
        })
    }

    /// The call's private directory (0700, removed with the proxy): where the service
    /// writes the call's trust files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The refusal events (once; `sandbox.launch` sends them as they happen).
    pub fn take_events(&self) -> Option<Receiver<Refusal>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The exit record of a refusal not seen before (`None` for one already recorded).
    pub fn record_new(&self, r: &Refusal, line: &str) -> Option<ExitRecord> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let key = (r.host.clone(), r.port, r.reason);
        if ids.contains_key(&key) {
            return None;
        }
        let n = ids.len() + 1;
        ids.insert(key, n);
        Some(host_record(n, r, line, self.proxy.policy()))
    }

    /// TESTS ONLY (the check's `proxy_down`): the proxy stops serving, its socket file stays,
    /// so a connection to it (the init's hand-over) is refused.
    pub fn stop_serving(&self) {
        self.proxy.shutdown();
    }

    /// Ends the proxy (listener and tunnels) and removes its directory (which holds only
    /// the socket).
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.proxy.shutdown();
            // The listener's loop sees the shutdown at once; the runtime then drops every
            // connection of the call, so its descriptors are closed when this returns.
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
            let _ = std::fs::remove_file(self.dir.join(SOCKET_NAME));
            let _ = std::fs::remove_file(self.dir.join(OWNER_LOCK));
            if std::fs::remove_dir(&self.dir).is_err() {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
        }
    }

    /// Stops the proxy, merges its part of the summary, and gives the exit records of every
    /// refusal not recorded yet (one per host, port and reason).
    pub fn finish(&mut self, summary: &mut SandboxSummary, line: &str) -> Vec<ExitRecord> {
        self.stop();
        let s = self.proxy.summary();
        summary.proxied = s.proxied;
        summary.blocked = s.blocked;
        summary.blocked_more = s.blocked_more;
        summary.tcp_relayed = s.tcp_relayed;
        summary.credentials_used = s.credentials_used;
        summary.credentials_used_more = s.credentials_used_more;
        self.proxy
            .refusals_all()
            .into_iter()
            .filter_map(|r| self.record_new(&r, line))
            .collect()
    }
}

/// How much lower than the service's own threads a call's proxy thread runs (nice steps).
/// The service's RPC and the calls' control (starts, ends, merges), and the lines
/// themselves, come before any call's proxy work when the processors are all busy: a call
/// flooding its proxy is slowed first, its neighbours barely. 10 steps is a tenth of the
/// weight; a call's proxy still gets every idle cycle.
const PROXY_NICENESS: i32 = 10;

/// Binds the call's proxy socket at `sock` and serves it on a new thread with a
/// single-threaded runtime of its own, until [`Proxy::shutdown`]. All of a call's proxy work
/// (heads, decisions, tunnels, its DNS and relays handed over by the init) runs there, so a
/// call flooding its proxy takes one thread's share of the processors and delays nothing
/// queued on the service's runtime (the RPC, the other calls' ends) or on another call's proxy.
fn serve_on_own_thread(
    proxy: &Proxy,
    sock: &Path,
) -> Result<std::thread::JoinHandle<()>, AttachError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AttachError::Runtime)?;
    let listener = {
        let _g = rt.enter();
        Proxy::bind_unix(sock).map_err(|source| AttachError::Socket {
            path: sock.to_path_buf(),
            source,
        })?
    };
    let p = proxy.clone();
    std::thread::Builder::new()
        .name("efr-call-proxy".into())
        .spawn(move || {
            // Best effort: at the default priority the proxy still works, only with less
            // isolation.
            let _ = crate::sys::nice_this_thread(PROXY_NICENESS);
            rt.block_on(p.serve_unix(listener));
            // Drops the call's connections here and now; a name lookup still running on
            // the blocking pool ends on its own.
            rt.shutdown_background();
        })
        .map_err(AttachError::Thread)
}

impl Drop for CallProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The exit record of a connection refused before its head was read, for the call's (or
/// the service's) connection budget: no host was asked for, so it names none, and no grant
/// changes it.
fn budget_record(n: usize, r: &Refusal, line: &str) -> ExitRecord {
    ExitRecord {
        id: format!("host-{n}"),
        source: ExitSource::Denial,
        kind: ExitKind::Host,
        summary: format!(
            "open more connections to its proxy at once (refused by the proxy: {})",
            r.reason.as_str()
        ),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts::default(),
        needs: Needs::Nothing,
        judgement: Judgement {
            verdict: Verdict::Refuse,
            by: JudgedBy::Policy,
            reasons: vec![
                "the proxy refused connections past the call's budget (network.proxy_connections \
                 and network.proxy_tunnels, or the service's share of its open files) before \
                 reading what they asked for; the connections it held were served, and no \
                 grant raises the budget"
                    .to_string(),
            ],
        },
    }
}

/// The exit record of a placeholder sent to a host its credential is not bound to: kind
/// `credential`, the host in `facts.host` and `facts.hosts`, the credential in
/// `facts.credential` (the one whose placeholder the proxy found), no grant proposed (a misuse is not fixed by a grant: the grant that would let it through
/// would send the secret there).
fn credential_record(n: usize, r: &Refusal, line: &str, policy: &ProxyPolicy) -> ExitRecord {
    // The proxy names the credential whose placeholder it saw; a refusal without a name
    // (none is made so) names every credential of the call not bound to the host.
    let name = match &r.credential {
        Some(n) => n.clone(),
        None => policy
            .broker
            .iter()
            .flat_map(|b| b.credentials())
            .filter(|c| !c.binds(&r.host, r.port))
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    };
    let hp = format!("{}:{}", r.host, r.port);
    ExitRecord {
        id: format!("host-{n}"),
        source: ExitSource::Denial,
        kind: ExitKind::Credential,
        summary: format!(
            "send the placeholder of credential {name} to {hp}, which it is not bound to \
             (refused by the proxy: credential)"
        ),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            hosts: vec![HostFact {
                host: r.host.clone(),
                port: Some(r.port),
                project_remote: false,
            }],
            credential: (!name.is_empty()).then_some(name),
            host: Some(r.host.clone()),
            ..Default::default()
        },
        needs: Needs::Nothing,
        judgement: Judgement {
            verdict: Verdict::Refuse,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the proxy refused {hp}: the request carried a credential's placeholder, and \
                 a credential is sent only to the hosts it is bound to; no grant sends it \
                 elsewhere (bind the host in the credential's config entry if it is meant \
                 to receive it)"
            )],
        },
    }
}

/// Why a name that resolved to a special address was refused, with the config lines that
/// map it on purpose after the first line (or why the config cannot).
fn special_reason(hp: &str, host: &str, sp: &efr_proxy::Special) -> String {
    let hint = ConfigHint::resolve([(host, sp.address)]);
    let first = format!(
        "the proxy refused {hp}: {}; no host grant opens it",
        sp.explain(host)
    );
    if hint.is_empty() {
        return format!(
            "{first}; the config cannot map {host}: its [network.resolve] takes names of \
             letters, digits and '-' only"
        );
    }
    format!(
        "{first}; the lines to add to the config:\n{}",
        hint.render().trim_end()
    )
}

/// The exit record of one proxy refusal: kind `host` (`open_network` for an IP literal),
/// source `denial`.
pub fn host_record(n: usize, r: &Refusal, line: &str, policy: &ProxyPolicy) -> ExitRecord {
    if r.host == efr_proxy::ANY_HOST {
        return budget_record(n, r, line);
    }
    if r.reason == BlockReason::Credential {
        return credential_record(n, r, line, policy);
    }
    let hp = if r.host.contains(':') {
        format!("[{}]:{}", r.host, r.port)
    } else {
        format!("{}:{}", r.host, r.port)
    };
    let (kind, needs, judgement) = match grant_that_opens(r, &hp) {
        Some((kind, grant, why)) => (
            kind,
            Needs::Contained {
                grants: vec![grant],
            },
            Judgement {
                verdict: Verdict::Review,
                by: JudgedBy::Policy,
                reasons: vec![why],
            },
        ),
        None => {
            let (verdict, why) = refusal(r, &hp, policy);
            (
                ExitKind::Host,
                Needs::Nothing,
                Judgement {
                    verdict,
                    by: JudgedBy::Policy,
                    reasons: vec![why],
                },
            )
        }
    };
    ExitRecord {
        id: format!("host-{n}"),
        source: ExitSource::Denial,
        kind,
        summary: match r.reason {
            BlockReason::HostRefused => {
                format!("reach the host's {hp} (refused by the host: host_refused)")
            }
            _ => format!("reach {hp} (refused by the proxy: {})", r.reason.as_str()),
        },
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            hosts: vec![HostFact {
                host: r.host.clone(),
                port: Some(r.port),
                project_remote: false,
            }],
            ..Default::default()
        },
        needs,
        judgement,
    }
}

/// The grant that opens a refused host (`hp`: its `host:port`), with the record's kind
/// and why (judged `review`); `None` when no grant opens it.
fn grant_that_opens(r: &Refusal, hp: &str) -> Option<(ExitKind, Grant, String)> {
    let port = (r.port != 443).then_some(r.port);
    let host = |plain_http: bool| Grant::Host {
        host: r.host.clone(),
        port,
        plain_http,
        tcp: false,
    };
    match r.reason {
        BlockReason::IpLiteral => Some((
            ExitKind::OpenNetwork,
            Grant::OpenNetwork,
            format!(
                "the proxy refused {hp}: an IP address, which no host grant names; only \
                 open_network reaches it"
            ),
        )),
        BlockReason::NotAllowed => Some((
            ExitKind::Host,
            host(false),
            format!("the proxy refused {hp}: no grant names it; a host grant opens it"),
        )),
        BlockReason::NotTls => Some((
            ExitKind::Host,
            host(true),
            format!(
                "the proxy refused {hp}: not TLS; a host grant with plain HTTP lets plain \
                 HTTP requests through (a tunnel must still carry TLS)"
            ),
        )),
        _ => None,
    }
}

/// How a refusal no grant opens is judged (`user_only` for a token host, else `refuse`),
/// and why.
fn refusal(r: &Refusal, hp: &str, policy: &ProxyPolicy) -> (Verdict, String) {
    let token = policy
        .token_hosts
        .iter()
        .any(|p| efr_proxy::name::matches(p, &r.host));
    match r.reason {
        BlockReason::Denied if token => (
            Verdict::UserOnly,
            format!(
                "the proxy refused {hp}: a token host (a token for it is visible to the \
                 call); no host grant opens it, only you can let a call reach it: {}",
                policy.token_reason(&r.host).unwrap_or(
                    "a file it can read, a variable it keeps or a credential helper it can \
                     run holds one"
                )
            ),
        ),
        BlockReason::Denied => (
            Verdict::Refuse,
            match &r.special {
                Some(sp) => special_reason(hp, &r.host, sp),
                None => format!(
                    "the proxy refused {hp}: on the config's deny list; no host grant \
                     opens it"
                ),
            },
        ),
        BlockReason::HostRefused => (
            Verdict::Refuse,
            format!(
                "the host's {hp} refused the connection the call's tcp grant relayed: \
                 nothing listens on that port of the host (start the server there); no \
                 grant changes that"
            ),
        ),
        BlockReason::BadRequest => (
            Verdict::Refuse,
            format!(
                "the proxy refused {hp}: a malformed request, or a TLS name (SNI) other \
                 than the host asked for"
            ),
        ),
        _ => (
            Verdict::Refuse,
            format!("the proxy refused {hp}: over the call's connection or byte limits"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use efr_policy::classify::{ClassifyRequest, classify};
    use efr_proxy::{Decision, Kind};
    use efr_sandbox_wire::{Launch, Mode};

    /// A connection refused for the budget names no host (it asked for none yet) and
    /// proposes nothing; a host refusal still names its host and port.
    #[test]
    fn a_budget_refusal_names_no_host_and_proposes_nothing() {
        let policy = ProxyPolicy::default();
        let r = Refusal::new(
            efr_proxy::ANY_HOST,
            0,
            efr_sandbox_wire::summary::BlockReason::Limit,
        );
        let rec = host_record(1, &r, "curl x", &policy);
        assert_eq!(
            rec.summary,
            "open more connections to its proxy at once (refused by the proxy: limit)"
        );
        assert!(rec.facts.hosts.is_empty(), "{:?}", rec.facts.hosts);
        assert!(matches!(rec.needs, Needs::Nothing));
        assert!(matches!(rec.judgement.verdict, Verdict::Refuse));
        assert!(rec.judgement.reasons[0].contains("network.proxy_connections"));
        let r = Refusal::new(
            "example.com",
            443,
            efr_sandbox_wire::summary::BlockReason::Limit,
        );
        let rec = host_record(2, &r, "curl x", &policy);
        assert_eq!(rec.facts.hosts[0].host, "example.com");
        assert!(
            rec.summary.starts_with("reach example.com:443"),
            "{}",
            rec.summary
        );
    }

    /// A placeholder sent to a host its credential is not bound to is a `credential` exit
    /// record naming the host and the credential, proposing no grant.
    #[test]
    fn a_credential_refusal_is_a_credential_record_with_no_grant() {
        let d = tempfile::tempdir().unwrap();
        let ca = std::sync::Arc::new(efr_proxy::broker::Ca::load_or_create(d.path()).unwrap());
        let cred = |name: &str, host: &str| efr_proxy::broker::BrokerCredential {
            name: name.into(),
            hosts: vec![(host.into(), 443)],
            secret: "ghp_0123456789abcdefghij0123456789abcdef".into(),
            placeholder: format!("ghp_{name:x<36}"),
            send: efr_proxy::broker::Send::Bearer,
        };
        let broker = efr_proxy::broker::Broker::new(
            ca,
            &[],
            vec![cred("forge", "api.test"), cred("other", "paste.test")],
        )
        .unwrap();
        let policy = ProxyPolicy {
            broker: Some(std::sync::Arc::new(broker)),
            ..ProxyPolicy::default()
        };
        let r = Refusal::new("paste.test", 443, BlockReason::Credential);
        let rec = host_record(1, &r, "curl x", &policy);
        assert_eq!(rec.kind, ExitKind::Credential);
        assert_eq!(rec.facts.hosts[0].host, "paste.test");
        // The placeholder found there was forge's: other is bound to paste.test.
        assert_eq!(rec.facts.credential.as_deref(), Some("forge"));
        assert_eq!(rec.needs, Needs::Nothing);
        assert_eq!(rec.judgement.verdict, Verdict::Refuse);
        assert!(rec.summary.contains("forge") && rec.summary.contains("paste.test:443"));
    }

    /// The sweep removes a call directory whose owner lock can be taken (its owner died)
    /// and an old one without a lock (a build before the lock), and keeps a live owner's, a
    /// young unlocked one (its owner may be about to lock) and names not of the calls'
    /// shape.
    #[test]
    fn the_sweep_removes_only_directories_whose_owner_is_gone() {
        let d = tempfile::tempdir().unwrap();
        let parent = d.path();
        let mk = |name: &str, lock: bool| {
            let dir = parent.join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join(SOCKET_NAME), "").unwrap();
            if lock {
                std::fs::write(dir.join(OWNER_LOCK), "").unwrap();
            }
            dir
        };
        let dead = mk("00000000000000d1", true);
        let live = mk("00000000000000a1", true);
        let held = nix::fcntl::Flock::lock(
            std::fs::File::open(live.join(OWNER_LOCK)).unwrap(),
            nix::fcntl::FlockArg::LockExclusiveNonblock,
        )
        .unwrap();
        let young = mk("00000000000000b1", false);
        let old = mk("00000000000000c1", false);
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::open(&old)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        let other = mk("bus-something", true);
        std::fs::File::open(&other)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        sweep_stale(parent);
        assert!(!dead.exists() && !old.exists());
        assert!(live.join(SOCKET_NAME).exists() && young.exists() && other.exists());
        drop(held);
        sweep_stale(parent);
        assert!(!live.exists(), "its owner let go");
    }

    fn write(p: &Path, text: &str) {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }

    /// The grants the classifier proposes for `line` (the launch it answers).
    fn proposed(config: &Config, env: &Env, proj: &Path, line: &str) -> Vec<Grant> {
        let ctx = Context::new(config, env);
        let mut req = ClassifyRequest::new(line, Some(proj.to_path_buf()), Mode::Cautious);
        req.project_roots = vec![proj.to_path_buf()];
        match classify(&req, &ctx).launch {
            Launch::Contained { grants } => grants,
            other => panic!("{line}: launched {other:?}"),
        }
    }

    /// Each tool's line, granted exactly what the classifier proposed, gets through the
    /// call's proxy to every host the tool contacts (its registry's index and its files).
    #[test]
    fn the_proposal_granted_as_is_admits_every_host_the_tool_contacts() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        let proj = home.join("src/app");
        std::fs::create_dir_all(&proj).unwrap_or_else(|e| panic!("{e}"));
        let env = Env::new(&home);
        let config = Config::defaults();
        // A user logged in to npm and cargo: their token files are masked, so the
        // registries stay open to a grant.
        write(
            &home.join(".npmrc"),
            "//registry.npmjs.org/:_authToken=npm_secret\n",
        );
        write(
            &home.join(".cargo/credentials.toml"),
            "[registry]\ntoken = \"cio\"\n",
        );
        write(
            &proj.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\n",
        );
        let cases: &[(&str, &[&str])] = &[
            ("cargo fetch", &["index.crates.io", "static.crates.io"]),
            // No Cargo.lock and a registry dependency: the build resolves and downloads.
            ("cargo build", &["index.crates.io", "static.crates.io"]),
            (
                "cargo test --release",
                &["index.crates.io", "static.crates.io"],
            ),
            (
                "pip install requests",
                &["pypi.org", "files.pythonhosted.org"],
            ),
            ("uv sync", &["pypi.org", "files.pythonhosted.org"]),
            ("poetry install", &["pypi.org", "files.pythonhosted.org"]),
            (
                "pipx install black",
                &["pypi.org", "files.pythonhosted.org"],
            ),
            (
                "python3 -m pip install -r requirements.txt",
                &["pypi.org", "files.pythonhosted.org"],
            ),
            ("npm ci", &["registry.npmjs.org"]),
            ("pnpm install", &["registry.npmjs.org"]),
            ("yarn", &["registry.yarnpkg.com", "registry.npmjs.org"]),
            ("bun install", &["registry.npmjs.org"]),
            ("go mod download", &["proxy.golang.org", "sum.golang.org"]),
            ("bundle install", &["rubygems.org", "index.rubygems.org"]),
            (
                "composer install",
                &[
                    "repo.packagist.org",
                    "api.github.com",
                    "codeload.github.com",
                ],
            ),
            ("mvn package", &["repo.maven.apache.org"]),
            (
                "./gradlew build",
                &[
                    "services.gradle.org",
                    "downloads.gradle.org",
                    "plugins.gradle.org",
                    "repo.maven.apache.org",
                ],
            ),
        ];
        for (line, hosts) in cases {
            let grants = proposed(&config, &env, &proj, line);
            let projects = vec![proj.to_string_lossy().into_owned()];
            let pol = policy(&grants, &config, &env, &projects, &[]);
            for h in *hosts {
                assert!(
                    matches!(pol.decide(Kind::Connect, h, 443), Decision::Allow { .. }),
                    "{line}: the proxy refuses {h} with the proposed grants {grants:?}"
                );
            }
        }
        // The user's own registries: a project .npmrc and a pip.conf with an extra index
        // on plain http.
        write(
            &proj.join(".npmrc"),
            "registry=https://npm.corp.example:4873/\n@x:registry=https://x.corp.example/\n",
        );
        write(
            &home.join(".config/pip/pip.conf"),
            "[global]\nindex-url = https://pypi.corp.example/simple\nextra-index-url = http://extra.corp.example:8080/simple\n",
        );
        let projects = vec![proj.to_string_lossy().into_owned()];
        let grants = proposed(&config, &env, &proj, "npm install");
        let pol = policy(&grants, &config, &env, &projects, &[]);
        assert!(matches!(
            pol.decide(Kind::Connect, "npm.corp.example", 4873),
            Decision::Allow { .. }
        ));
        assert!(matches!(
            pol.decide(Kind::Connect, "x.corp.example", 443),
            Decision::Allow { .. }
        ));
        let grants = proposed(&config, &env, &proj, "pip install flask");
        let pol = policy(&grants, &config, &env, &projects, &[]);
        assert!(matches!(
            pol.decide(Kind::Connect, "pypi.corp.example", 443),
            Decision::Allow { .. }
        ));
        assert!(matches!(
            pol.decide(Kind::PlainHttp, "extra.corp.example", 8080),
            Decision::Allow { .. }
        ));
    }

    /// A visible token denies its host whatever the grants; a masked one denies nothing.
    #[test]
    fn only_visible_tokens_deny() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        let proj = home.join("src/app");
        std::fs::create_dir_all(&proj).unwrap_or_else(|e| panic!("{e}"));
        let env = Env::new(&home);
        let config = Config::defaults();
        let projects = vec![proj.to_string_lossy().into_owned()];
        write(
            &home.join(".npmrc"),
            "//registry.npmjs.org/:_authToken=npm_secret\n",
        );
        let grants = vec![Grant::Host {
            host: "registry.npmjs.org".into(),
            port: None,
            plain_http: false,
            tcp: false,
        }];
        let allowed = |pol: &ProxyPolicy| {
            matches!(
                pol.decide(Kind::Connect, "registry.npmjs.org", 443),
                Decision::Allow { .. }
            )
        };
        assert!(allowed(&policy(&grants, &config, &env, &projects, &[])));
        // Unmasked by a grant: visible, denied.
        let mut g2 = grants.clone();
        g2.push(Grant::Unmask {
            path: home.join(".npmrc").to_string_lossy().into_owned(),
        });
        assert!(!allowed(&policy(&g2, &config, &env, &projects, &[])));
        // A token variable the call keeps.
        let ce = vec![("NPM_TOKEN".to_string(), "x".to_string())];
        assert!(!allowed(&policy(&grants, &config, &env, &projects, &ce)));
        // A project .npmrc with a token.
        write(
            &proj.join(".npmrc"),
            "//registry.npmjs.org/:_authToken=npm_secret\n",
        );
        assert!(!allowed(&policy(&grants, &config, &env, &projects, &[])));
    }

    /// The work the proxy adds to a call, in-process and without the launcher: the policy,
    /// the attach (directory, socket, serve task), the init's hand-over (three sockets bound
    /// here, on the host's loopback, handed over and answered) and the finish (stop, merge,
    /// directory removed). Wall time per call, median of N; CPU time of the whole process
    /// over the N calls (so the load of the machine does not inflate it). Run by
    /// `cargo test --release -p efr-sandbox --bin efr-sandbox -- --ignored proxy_cost
    /// --nocapture` (docs/benchmarks.md, "The proxy on every call").
    #[test]
    #[ignore]
    fn proxy_cost() {
        use std::time::Instant;
        let n: usize = std::env::var("EFR_BENCH_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("proj")).unwrap();
        let env = Env {
            home: home.clone(),
            ..Env::from_process()
        };
        let config = Config::defaults();
        let projects = vec![home.join("proj").to_string_lossy().into_owned()];
        // The runtime dir: `$XDG_RUNTIME_DIR` (a tmpfs on a desktop) where efrd puts it, or
        // EFR_BENCH_RUNTIME (another file system to compare), else the temp dir.
        let rt_base = std::env::var_os("EFR_BENCH_RUNTIME").map(PathBuf::from);
        let rt_dir = match &rt_base {
            Some(b) => tempfile::tempdir_in(b).unwrap(),
            None => tempfile::tempdir().unwrap(),
        };
        let runtime = rt_dir.path().join("run");
        let proc_cpu = || {
            let s = std::fs::read_to_string("/proc/self/stat").unwrap();
            let f: Vec<u64> = s
                .rsplit_once(')')
                .unwrap()
                .1
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            // utime, stime are fields 14 and 15 (11 and 12 after the name and state).
            (f[10] + f[11]) * 10_000
        };
        let one = || -> [u64; 4] {
            let t0 = Instant::now();
            let mut plan = Plan::contained("true", "/");
            let ce = call_env(&plan);
            let pol = policy(&[], &config, &env, &projects, &ce);
            let t1 = Instant::now();
            let mut cp = CallProxy::attach(&mut plan, pol, Some(&runtime)).unwrap();
            let t2 = Instant::now();
            let sock = plan.proxy.as_ref().unwrap().socket.clone();
            let socks = efr_proxy::inside::Sockets {
                relay: Some(std::net::TcpListener::bind("127.0.0.1:0").unwrap()),
                dns: Some(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()),
                synthetic: vec![std::net::TcpListener::bind("127.0.0.1:0").unwrap()],
                tcp: Vec::new(),
            };
            efr_proxy::inside::hand_over(
                Path::new(&sock),
                socks,
                std::time::Duration::from_secs(5),
            )
            .unwrap();
            let t3 = Instant::now();
            let mut summary = SandboxSummary::default();
            let recs = cp.finish(&mut summary, "true");
            let t4 = Instant::now();
            assert!(recs.is_empty() && summary.proxied);
            [t1 - t0, t2 - t1, t3 - t2, t4 - t3]
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        };
        for _ in 0..50 {
            one();
        }
        // CPU of each part alone: the policy; the attach and finish with no hand-over.
        let c0 = proc_cpu();
        for _ in 0..n {
            let ce = call_env(&Plan::contained("true", "/"));
            std::hint::black_box(policy(&[], &config, &env, &projects, &ce));
        }
        let cpu_policy = (proc_cpu() - c0) as f64 / n as f64;
        let pol = policy(&[], &config, &env, &projects, &[]);
        let c0 = proc_cpu();
        for _ in 0..n {
            let mut plan = Plan::contained("true", "/");
            let mut cp = CallProxy::attach(&mut plan, pol.clone(), Some(&runtime)).unwrap();
            let mut summary = SandboxSummary::default();
            cp.finish(&mut summary, "true");
        }
        let cpu_attach = (proc_cpu() - c0) as f64 / n as f64;
        let c0 = proc_cpu();
        let mut all: Vec<[u64; 4]> = (0..n).map(|_| one()).collect();
        let cpu = (proc_cpu() - c0) as f64 / n as f64;
        let med = |i: usize, all: &mut Vec<[u64; 4]>| {
            all.sort_by_key(|a| a[i]);
            all[all.len() / 2][i]
        };
        let mut tot: Vec<u64> = all.iter().map(|a| a.iter().sum()).collect();
        tot.sort_unstable();
        println!(
            "proxy per call, {n} calls (median wall, us): policy {} attach {} hand-over {} \
             finish {} total {}; CPU of the process per call {cpu:.0} us (policy alone \
             {cpu_policy:.0}, attach + finish alone {cpu_attach:.0}); load {}",
            med(0, &mut all),
            med(1, &mut all),
            med(2, &mut all),
            med(3, &mut all),
            tot[tot.len() / 2],
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
    }
}
