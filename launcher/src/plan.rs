//! The plan: everything `efr-launch` needs to run one line, complete and validated.
//!
//! The plan's types are the wire's (`efr_sandbox_wire::plan`, re-exported here so callers
//! keep their paths); its validation stays here, in [`PlanCheck`]: the launcher is the trust
//! boundary and re-checks every plan it is handed, whoever wrote it.
//!
//! A plan is JSON with unknown fields refused. It is bounded (size, list lengths, path
//! lengths) and validated before anything runs: every path absolute and free of NUL, every
//! grant of a kind this launcher knows (a `Grant::Unknown` is refused), project roots and the
//! per-conversation directories present.

use std::path::Path;

use efr_sandbox_wire::Grant;
use efr_sandbox_wire::size::Size;

pub use efr_sandbox_wire::plan::{
    CacheFile, CacheLayer, DEFAULT_RELAY_PORT, EnvVar, INSIDE_CA, INSIDE_CA_BUNDLE,
    INSIDE_GIT_CONFIG, NetMode, PLAN_VERSION, Plan, PlanMode, ProxyPlan, ScrubbedFile, TestWeaken,
    TrustPlan, UnknownWeaken,
};

/// Largest plan accepted, in bytes.
pub const MAX_PLAN_BYTES: usize = 1 << 20;
/// Longest line accepted, in bytes.
pub const MAX_LINE_BYTES: usize = 256 * 1024;
/// Most entries in one list of the plan.
pub const MAX_LIST: usize = 4096;
/// Longest path accepted, in bytes.
pub const MAX_PATH: usize = 4096;

/// Most scrubbed copies a plan holds (they live in the native backend's 1 MiB staging
/// tmpfs, hence this bound and the two below).
pub const MAX_SCRUBBED: usize = 16;
/// Longest scrubbed copy accepted, in bytes.
pub const MAX_SCRUBBED_BYTES: usize = 64 * 1024;
/// Most bytes of all the scrubbed copies of a plan together.
pub const MAX_SCRUBBED_TOTAL: usize = 256 * 1024;

/// The checks of one part of a plan (a cache layer, the proxy).
trait PartCheck {
    /// Its shape.
    fn validate(&self) -> Result<(), PlanError>;
    /// What it names on the host.
    fn check_host(&self) -> Result<(), PlanError> {
        Ok(())
    }
}

/// A cache layer's dirs, with what each is: the cache, its upper and work dirs, and its
/// conversation's layer when it has one.
fn layer_dirs(c: &CacheLayer) -> impl Iterator<Item = (&'static str, &String)> {
    [
        ("cache", &c.path),
        ("cache upper", &c.upper),
        ("cache work", &c.work),
    ]
    .into_iter()
    .chain(
        c.conversation
            .iter()
            .map(|p| ("cache conversation layer", p)),
    )
}

impl PartCheck for CacheLayer {
    fn validate(&self) -> Result<(), PlanError> {
        for (what, p) in layer_dirs(self) {
            check_path(what, p)?;
            if p.contains([',', ':', '\\']) || p.trim_end_matches('/').is_empty() {
                return Err(invalid(format!(
                    "{what}: path {p:?} cannot be an overlay layer"
                )));
            }
        }
        Ok(())
    }

    fn check_host(&self) -> Result<(), PlanError> {
        for (what, p) in layer_dirs(self) {
            match std::fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(invalid(format!("{what} {p} is not a directory"))),
                Err(e) => return Err(invalid(format!("{what} {p}: {e}"))),
            }
        }
        Ok(())
    }
}

/// The size of a call's `/tmp` when the plan names none (the built-in config's
/// `sandbox.tmp_size`; the consistency test keeps them equal).
pub const DEFAULT_TMP_SIZE: &str = "25%";
/// The size of a call's `/dev/shm` when the plan names none (`sandbox.shm_size`).
pub const DEFAULT_SHM_SIZE: &str = "10%";

/// The machine's memory in bytes (sysinfo's total RAM); 1 GiB when unknown.
fn memory() -> u64 {
    crate::sys::total_ram().unwrap_or(1 << 30)
}

/// Where the call's proxy socket is bound inside the view: `/dev` is a tmpfs private to
/// the call in both backends (a path under `/run` cannot be made on the read-only root, and
/// `$XDG_RUNTIME_DIR` is masked).
pub const INSIDE_PROXY_SOCKET: &str = "/dev/efr/proxy.sock";
/// Longest path a Unix socket address holds.
pub const MAX_SOCKET_PATH: usize = 107;

impl PartCheck for ProxyPlan {
    fn validate(&self) -> Result<(), PlanError> {
        check_path("proxy socket", &self.socket)?;
        if self.socket.len() > MAX_SOCKET_PATH {
            return Err(invalid(format!(
                "proxy socket: path longer than {MAX_SOCKET_PATH} bytes"
            )));
        }
        if self.ports.len() > 64
            || self
                .ports
                .iter()
                .any(|&p| matches!(p, 0 | 53 | 443) || p == self.relay_port)
        {
            return Err(invalid("proxy: bad synthetic ports"));
        }
        if matches!(self.relay_port, 0 | 53 | 443) {
            return Err(invalid(format!(
                "proxy: relay port {} is taken or invalid",
                self.relay_port
            )));
        }
        Ok(())
    }
}

/// The variable that lets a plan's `test_weaken` take effect (tests only).
pub const ALLOW_TEST_WEAKEN_ENV: &str = "EFR_LAUNCH_ALLOW_TEST_WEAKEN";

/// The variable the service copies into a plan's `test_weaken` (comma-separated; tests
/// only, and honoured by the launcher only with [`ALLOW_TEST_WEAKEN_ENV`]).
pub const TEST_WEAKEN_ENV: &str = "EFR_SANDBOX_TEST_WEAKEN";

/// Why a plan was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    /// The plan is larger than [`MAX_PLAN_BYTES`].
    #[error("plan is larger than {MAX_PLAN_BYTES} bytes")]
    TooLarge,
    /// The plan does not parse as a plan (bad JSON, an unknown field, a wrong type): what
    /// serde said.
    #[error("plan is not valid JSON: {0}")]
    Json(String),
    /// The plan is of another version than this launcher's `PLAN_VERSION`: its version.
    #[error("plan version {0} is not {PLAN_VERSION}")]
    Version(u32),
    /// The plan parses but breaks a rule of its validation (a bound, a relative path, an
    /// unknown grant, a missing directory): which, in words.
    #[error("{0}")]
    Invalid(String),
}

/// A plan's bytes could not be opened or read (by `efr-launch --plan`/`--plan-fd`, or a
/// standby launcher from the fd its call brought).
#[derive(Debug, thiserror::Error)]
#[error("plan {from}: {source}")]
pub struct PlanReadError {
    /// The plan's path, or `fd N`.
    pub from: String,
    /// What the open or the read said.
    #[source]
    pub source: std::io::Error,
}

/// Reads a plan's bytes from `r` (named `from` in the error), at most one byte past
/// [`MAX_PLAN_BYTES`] (the parse then refuses it as too large).
pub(crate) fn read_bounded(from: String, r: impl std::io::Read) -> Result<Vec<u8>, PlanReadError> {
    use std::io::Read as _;
    let mut data = Vec::new();
    match r.take(MAX_PLAN_BYTES as u64 + 1).read_to_end(&mut data) {
        Ok(_) => Ok(data),
        Err(source) => Err(PlanReadError { from, source }),
    }
}

/// The plan in `src` (what was read of it), or the message of the setup error that says
/// why there is none.
pub(crate) fn parse_plan<E: std::fmt::Display>(src: Result<Vec<u8>, E>) -> Result<Plan, String> {
    let data = src.map_err(|e| e.to_string())?;
    Plan::from_json(&data).map_err(|e| format!("plan: {e}"))
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// Checks one path of the plan: absolute, bounded, no NUL, no `..` component.
pub fn check_path(what: &str, p: &str) -> Result<(), PlanError> {
    if p.is_empty() || p.len() > MAX_PATH {
        return Err(invalid(format!(
            "{what}: path length {} out of range",
            p.len()
        )));
    }
    if p.contains('\0') {
        return Err(invalid(format!("{what}: path holds a NUL byte")));
    }
    if !p.starts_with('/') {
        return Err(invalid(format!("{what}: path {p:?} is not absolute")));
    }
    if Path::new(p)
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(invalid(format!("{what}: path {p:?} holds `..`")));
    }
    Ok(())
}

fn check_list(what: &str, v: &[String]) -> Result<(), PlanError> {
    if v.len() > MAX_LIST {
        return Err(invalid(format!("{what}: more than {MAX_LIST} entries")));
    }
    v.iter().try_for_each(|p| check_path(what, p))
}

fn check_env(what: &str, v: &[EnvVar]) -> Result<(), PlanError> {
    if v.len() > MAX_LIST {
        return Err(invalid(format!("{what}: more than {MAX_LIST} entries")));
    }
    for e in v {
        if e.name.is_empty() || e.name.contains(['=', '\0']) || e.value.contains('\0') {
            return Err(invalid(format!("{what}: bad variable {:?}", e.name)));
        }
        if e.name.len() + e.value.len() > MAX_LINE_BYTES {
            return Err(invalid(format!("{what}: variable {:?} too long", e.name)));
        }
    }
    Ok(())
}

/// The line and the shell's command line: bounded, no NUL, the shell's path absolute.
fn check_line(plan: &Plan) -> Result<(), PlanError> {
    if plan.line.len() > MAX_LINE_BYTES {
        return Err(invalid("line is too long"));
    }
    if plan.line.contains('\0') {
        return Err(invalid("line holds a NUL byte"));
    }
    check_path("shell", plan.shell())?;
    let args: usize = plan.shell_args.iter().map(|a| a.len() + 1).sum();
    if args > MAX_LINE_BYTES {
        return Err(invalid("shell_args are too long"));
    }
    if plan.shell_args.iter().any(|a| a.contains('\0')) {
        return Err(invalid("shell_args hold a NUL byte"));
    }
    Ok(())
}

/// The call's directories and sizes: cwd, home, scratch, tmp, the tmpfs sizes, the
/// project roots and the paths kept read-only inside them.
fn check_dirs(plan: &Plan) -> Result<(), PlanError> {
    check_path("cwd", &plan.cwd)?;
    if let Some(h) = &plan.home {
        check_path("home", h)?;
    }
    if let Some(s) = &plan.scratch {
        check_path("scratch", s)?;
    }
    if let Some(t) = &plan.tmp {
        check_path("tmp", t)?;
    }
    for (what, s) in [("tmp_size", &plan.tmp_size), ("shm_size", &plan.shm_size)] {
        if let Some(s) = s {
            Size::parse(s).map_err(|e| invalid(format!("{what}: {e}")))?;
        }
    }
    check_list("projects", &plan.projects)?;
    check_list("read_only_inside", &plan.read_only_inside)
}

/// The protected name patterns: relative, bounded, and patterns the supervisor compiles.
fn check_protect_names(names: &[String]) -> Result<(), PlanError> {
    if names.len() > MAX_LIST {
        return Err(invalid("protect_names: too many entries"));
    }
    for n in names {
        if n.is_empty() || n.len() > MAX_PATH || n.contains('\0') || n.starts_with('/') {
            return Err(invalid(format!(
                "protect_names: {n:?} is not a relative pattern"
            )));
        }
    }
    crate::supervise::Rules::new(&[], &[], names).map_err(|e| invalid(e.to_string()))?;
    Ok(())
}

/// The scrubbed copies: each of a mask of the plan, bounded one by one and in all.
fn check_scrubbed(plan: &Plan) -> Result<(), PlanError> {
    if plan.scrubbed.len() > MAX_SCRUBBED {
        return Err(invalid(format!(
            "scrubbed: more than {MAX_SCRUBBED} copies"
        )));
    }
    let mut total = 0;
    for f in &plan.scrubbed {
        let p = f.path.trim_end_matches('/');
        if !plan.masks.iter().any(|m| m.trim_end_matches('/') == p) {
            return Err(invalid(format!(
                "scrubbed copy of {:?}: not a mask of the plan",
                f.path
            )));
        }
        if f.content.len() > MAX_SCRUBBED_BYTES || f.content.contains('\0') {
            return Err(invalid(format!(
                "scrubbed copy of {:?}: longer than {MAX_SCRUBBED_BYTES} bytes or holds NUL",
                f.path
            )));
        }
        total += f.content.len();
    }
    if total > MAX_SCRUBBED_TOTAL {
        return Err(invalid(format!(
            "scrubbed: more than {MAX_SCRUBBED_TOTAL} bytes in all"
        )));
    }
    Ok(())
}

/// The caches' layers and private files: at most 64 of each, their paths valid.
fn check_caches(plan: &Plan) -> Result<(), PlanError> {
    if plan.caches.len() > 64 {
        return Err(invalid("caches: more than 64 entries"));
    }
    for c in &plan.caches {
        c.validate()?;
    }
    if plan.cache_files.len() > 64 {
        return Err(invalid("cache_files: more than 64 entries"));
    }
    for f in &plan.cache_files {
        check_path("cache file", &f.path)?;
        check_path("cache file", &f.private)?;
    }
    Ok(())
}

/// The most system bundles the broker's bundle is bound over (distributions keep one to
/// four).
const MAX_TRUST_SYSTEM: usize = 8;

/// The broker's trust: only for a call with a proxy (whose TLS it is for), its paths valid.
fn check_trust(plan: &Plan) -> Result<(), PlanError> {
    let Some(t) = &plan.trust else {
        return Ok(());
    };
    if plan.proxy.is_none() {
        return Err(invalid(
            "trust: only for a call with a proxy (the CA is the proxy's)",
        ));
    }
    if t.system.len() > MAX_TRUST_SYSTEM {
        return Err(invalid(format!(
            "trust: more than {MAX_TRUST_SYSTEM} system bundles"
        )));
    }
    for p in [&t.bundle, &t.ca]
        .into_iter()
        .chain(&t.system)
        .chain(&t.git_config)
    {
        check_path("trust file", p)?;
    }
    Ok(())
}

/// The trust files exist as plain files (the system bundles are bound over, the service's
/// files bound from).
fn check_trust_host(t: &TrustPlan) -> Result<(), PlanError> {
    for p in [&t.bundle, &t.ca]
        .into_iter()
        .chain(&t.system)
        .chain(&t.git_config)
    {
        match std::fs::metadata(p) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(invalid(format!("trust file {p} is not a plain file"))),
            Err(e) => return Err(invalid(format!("trust file {p}: {e}"))),
        }
    }
    Ok(())
}

/// The environment's parts: the kept names, the policy (bounded, compiled), the
/// variables.
fn check_env_parts(plan: &Plan) -> Result<(), PlanError> {
    if plan.env_keep.len() > MAX_LIST {
        return Err(invalid("env_keep: too many entries"));
    }
    if let Some(p) = &plan.env_policy {
        if p.keep.len() > MAX_LIST || p.drop.len() > MAX_LIST || p.secret_values.len() > MAX_LIST {
            return Err(invalid("env_policy: too many entries"));
        }
        p.compile()
            .map_err(|e| invalid(format!("env_policy: {e}")))?;
    }
    if let Some(env) = &plan.env {
        check_env("env", env)?;
    }
    check_env("env_set", &plan.env_set)
}

/// The grants: bounded, each of a known kind with valid paths, `open_network` and
/// `net_view` not together.
fn check_grants(grants: &[Grant]) -> Result<(), PlanError> {
    if grants.len() > MAX_LIST {
        return Err(invalid("grants: too many entries"));
    }
    for g in grants {
        match g {
            Grant::Write { path }
            | Grant::Socket { path }
            | Grant::Device { path }
            | Grant::Unmask { path } => check_path(g.kind_str(), path)?,
            Grant::OpenNetwork | Grant::NetView | Grant::Bus { .. } | Grant::Desktop { .. } => {}
            Grant::Host { .. } => {
                // Carried by the proxy, which the service runs; the launcher binds the
                // listeners of a `tcp` one, which must name the host's loopback and a port.
                g.tcp_relay().map_err(|e| invalid(e.to_string()))?;
            }
            Grant::BusFilter { .. } => {
                // Carried by the proxy and the bus filter, which the service runs; the
                // launcher only needs the plan's env_set and socket grants for them.
            }
            Grant::Credential { .. } => {
                // Carried by the call side (placeholders in the plan's env and files) and
                // the proxy (the swap); it adds nothing to the view by itself.
            }
            Grant::Unknown => return Err(invalid("grant of an unknown kind")),
        }
    }
    if grants.iter().any(|g| matches!(g, Grant::OpenNetwork))
        && grants.iter().any(|g| matches!(g, Grant::NetView))
    {
        return Err(invalid("open_network and net_view together"));
    }
    Ok(())
}

/// The launcher's checks of a plan (the plan's types are the wire's: these are the
/// launcher's, its trust boundary).
pub trait PlanCheck: Sized {
    /// Reads and validates a plan from JSON bytes.
    fn from_json(bytes: &[u8]) -> Result<Self, PlanError>;
    /// The sizes in bytes of the call's own `/tmp` and `/dev/shm` tmpfs (a share of the
    /// memory is taken of this machine's).
    fn tmpfs_sizes(&self) -> (u64, u64);
    /// Checks the plan's shape (not the file system: see [`PlanCheck::check_host`]).
    fn validate(&self) -> Result<(), PlanError>;
    /// Checks what the plan names on the host: project roots, cwd, scratch and tmp must be
    /// directories; write, device and socket grants must exist.
    fn check_host(&self) -> Result<(), PlanError>;
}

impl PlanCheck for Plan {
    fn from_json(bytes: &[u8]) -> Result<Plan, PlanError> {
        if bytes.len() > MAX_PLAN_BYTES {
            return Err(PlanError::TooLarge);
        }
        let plan: Plan =
            serde_json::from_slice(bytes).map_err(|e| PlanError::Json(e.to_string()))?;
        plan.validate()?;
        Ok(plan)
    }

    fn tmpfs_sizes(&self) -> (u64, u64) {
        let one = |s: &Option<String>, default: &str| {
            let size = Size::parse(s.as_deref().unwrap_or(default))
                .or_else(|_| Size::parse(default))
                .unwrap_or(Size::Bytes(1 << 30));
            match size {
                Size::Bytes(b) => b,
                p => p.bytes(memory()),
            }
        };
        (
            one(&self.tmp_size, DEFAULT_TMP_SIZE),
            one(&self.shm_size, DEFAULT_SHM_SIZE),
        )
    }

    fn validate(&self) -> Result<(), PlanError> {
        if self.version != PLAN_VERSION {
            return Err(PlanError::Version(self.version));
        }
        check_line(self)?;
        check_dirs(self)?;
        check_protect_names(&self.protect_names)?;
        check_list("masks", &self.masks)?;
        check_scrubbed(self)?;
        check_caches(self)?;
        check_trust(self)?;
        check_env_parts(self)?;
        if self.test_weaken.len() > 16 {
            return Err(invalid("test_weaken: too many entries"));
        }
        self.weakenings().map_err(|e| invalid(e.to_string()))?;
        check_grants(&self.grants)?;
        if let Some(p) = &self.proxy {
            p.validate()?;
            if self.mode != PlanMode::Contained || self.net() != NetMode::Own {
                return Err(invalid(
                    "proxy: only for a contained call with its own network (not with \
                     open_network, net_view or unsandboxed)",
                ));
            }
        }
        Ok(())
    }

    fn check_host(&self) -> Result<(), PlanError> {
        let dir = |what: &str, p: &str| -> Result<(), PlanError> {
            match std::fs::metadata(p) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(_) => Err(invalid(format!("{what} {p} is not a directory"))),
                Err(e) => Err(invalid(format!("{what} {p}: {e}"))),
            }
        };
        for p in &self.projects {
            dir("project root", p)?;
        }
        if let Some(s) = &self.scratch {
            dir("scratch", s)?;
        }
        if let Some(t) = &self.tmp {
            dir("tmp", t)?;
        }
        if self.mode == PlanMode::Contained {
            for c in &self.caches {
                c.check_host()?;
            }
            if let Some(t) = &self.trust {
                check_trust_host(t)?;
            }
            for f in &self.cache_files {
                for p in [&f.path, &f.private] {
                    match std::fs::symlink_metadata(p) {
                        Ok(m) if m.is_file() => {}
                        Ok(_) => {
                            return Err(invalid(format!("cache file {p} is not a plain file")));
                        }
                        Err(e) => return Err(invalid(format!("cache file {p}: {e}"))),
                    }
                }
            }
            for g in &self.grants {
                match g {
                    Grant::Write { path } | Grant::Device { path } | Grant::Socket { path } => {
                        std::fs::symlink_metadata(path).map_err(|e| {
                            invalid(match e.kind() {
                                std::io::ErrorKind::NotFound => format!(
                                    "{} grant {path}: it does not exist; create it first (a \
                                     grant names a path that exists)",
                                    g.kind_str()
                                ),
                                _ => format!("{} grant {path}: {e}", g.kind_str()),
                            })
                        })?;
                    }
                    // An unmask is checked below, against its mask; the others name no path
                    // the launcher must find.
                    Grant::Unmask { .. }
                    | Grant::Host { .. }
                    | Grant::OpenNetwork
                    | Grant::Bus { .. }
                    | Grant::BusFilter { .. }
                    | Grant::Desktop { .. }
                    | Grant::NetView
                    | Grant::Credential { .. }
                    | Grant::Unknown => {}
                }
            }
            // An `unmask` below a mask shows what exists there at launch; anything else it
            // cannot do without lifting the mask above it.
            for g in &self.grants {
                if let Grant::Unmask { path } = g {
                    if let Some(m) = crate::view::unmask_refused(self, path) {
                        return Err(invalid(format!(
                            "unmask grant {path}: it does not exist below the mask {m}, which \
                             shows only what exists at launch; unmask {m} to lift the mask"
                        )));
                    }
                }
            }
            if let Some(p) = &self.proxy {
                use std::os::unix::fs::FileTypeExt;
                match std::fs::metadata(&p.socket) {
                    Ok(m) if m.file_type().is_socket() => {}
                    Ok(_) => {
                        return Err(invalid(format!("proxy socket {}: not a socket", p.socket)));
                    }
                    Err(e) => return Err(invalid(format!("proxy socket {}: {e}", p.socket))),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_plan() -> serde_json::Value {
        serde_json::json!({"version": 1, "mode": "contained", "line": "true", "cwd": "/"})
    }

    #[test]
    fn minimal_plan_parses() {
        let p = Plan::from_json(ok_plan().to_string().as_bytes()).unwrap();
        assert_eq!(p.shell(), "/bin/sh");
        assert!(p.hide_sockets);
    }

    /// The launcher expands no `~`: every path of a plan arrives absolute (efr-call
    /// expands the home with the policy's one expansion), and a plan with a `~/` or a
    /// relative path anywhere is refused, naming the list.
    #[test]
    fn paths_arrive_absolute() {
        let home = Plan {
            home: Some("/home/u".into()),
            ..Plan::contained("true", "/")
        };
        assert!(home.validate().is_ok());
        for (what, bad) in [
            (
                "masks",
                Plan {
                    masks: vec!["~/.ssh".into()],
                    ..home.clone()
                },
            ),
            (
                "read_only_inside",
                Plan {
                    read_only_inside: vec![".envrc".into()],
                    ..home.clone()
                },
            ),
            (
                "projects",
                Plan {
                    projects: vec!["~/p".into()],
                    ..home.clone()
                },
            ),
            (
                "home",
                Plan {
                    home: Some("~".into()),
                    ..home.clone()
                },
            ),
            (
                "cwd",
                Plan {
                    cwd: "~/p".into(),
                    ..home.clone()
                },
            ),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(
                e.starts_with(what) && e.contains("not absolute"),
                "{what}: {e}"
            );
        }
    }

    #[test]
    fn unknown_field_refused() {
        let mut v = ok_plan();
        v["bogus"] = 1.into();
        assert!(matches!(
            Plan::from_json(v.to_string().as_bytes()),
            Err(PlanError::Json(_))
        ));
    }

    #[test]
    fn unknown_grant_refused() {
        let mut v = ok_plan();
        v["grants"] = serde_json::json!([{"kind": "teleport", "path": "/x"}]);
        let e = Plan::from_json(v.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("unknown kind"), "{e}");
    }

    /// A `tcp` host grant names the host's loopback and a port; the launcher re-checks it.
    #[test]
    fn a_tcp_grant_must_name_a_loopback_port() {
        let with = |g: serde_json::Value| {
            let mut v = ok_plan();
            v["grants"] = serde_json::json!([g]);
            Plan::from_json(v.to_string().as_bytes())
        };
        with(serde_json::json!({"kind": "host", "host": "localhost", "port": 5432, "tcp": true}))
            .unwrap();
        for (g, says) in [
            (
                serde_json::json!({"kind": "host", "host": "db.test", "port": 5432, "tcp": true}),
                "the host's loopback",
            ),
            (
                serde_json::json!({"kind": "host", "host": "::1", "tcp": true}),
                "names its port",
            ),
        ] {
            let e = with(g.clone()).unwrap_err();
            assert!(e.to_string().contains(says), "{g}: {e}");
        }
    }

    #[test]
    fn relative_and_nul_paths_refused() {
        for bad in ["rel/path", "/a/../b", "/a\0b", ""] {
            let mut v = ok_plan();
            v["projects"] = serde_json::json!([bad]);
            assert!(
                Plan::from_json(v.to_string().as_bytes()).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn sizes_bounded() {
        let big = vec![b' '; MAX_PLAN_BYTES + 1];
        assert_eq!(Plan::from_json(&big), Err(PlanError::TooLarge));
        let mut v = ok_plan();
        v["line"] = "x".repeat(MAX_LINE_BYTES + 1).into();
        assert!(Plan::from_json(v.to_string().as_bytes()).is_err());
        let mut v = ok_plan();
        v["masks"] = serde_json::json!(vec!["/a"; MAX_LIST + 1]);
        assert!(Plan::from_json(v.to_string().as_bytes()).is_err());
    }

    #[test]
    fn scrubbed_copies_checked() {
        let mut v = ok_plan();
        v["masks"] = serde_json::json!(["/h/.npmrc"]);
        v["scrubbed"] = serde_json::json!([{"path": "/h/.npmrc", "content": "registry=x\n"}]);
        let p = Plan::from_json(v.to_string().as_bytes()).unwrap();
        assert_eq!(p.scrubbed.len(), 1);
        for bad in [
            serde_json::json!([{"path": "/h/other", "content": ""}]),
            serde_json::json!([{"path": "/h/.npmrc", "content": "a\0b"}]),
            serde_json::json!([{"path": "/h/.npmrc", "content": "x".repeat(MAX_SCRUBBED_BYTES + 1)}]),
            serde_json::json!(vec![
                serde_json::json!({"path": "/h/.npmrc", "content": ""});
                MAX_SCRUBBED + 1
            ]),
            serde_json::json!([{"path": "/h/.npmrc", "content": "", "extra": 1}]),
        ] {
            let mut v = v.clone();
            v["scrubbed"] = bad.clone();
            assert!(Plan::from_json(v.to_string().as_bytes()).is_err(), "{bad}");
        }
        let mut many = v.clone();
        let masks: Vec<String> = (0..8).map(|i| format!("/h/f{i}")).collect();
        many["masks"] = serde_json::json!(masks);
        many["scrubbed"] = serde_json::json!(
            masks
                .iter()
                .map(|m| serde_json::json!({"path": m, "content": "x".repeat(MAX_SCRUBBED_BYTES)}))
                .collect::<Vec<_>>()
        );
        let e = Plan::from_json(many.to_string().as_bytes())
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().contains("in all"), "{e}");
    }

    /// The broker's trust: only with a proxy, absolute paths, a bounded list; on the host,
    /// plain files only.
    #[test]
    fn trust_checked() {
        let d = tempfile::tempdir().unwrap();
        let f = |n: &str| {
            let p = d.path().join(n);
            std::fs::write(&p, "pem").unwrap();
            p.to_string_lossy().into_owned()
        };
        let (bundle, ca, sys) = (f("bundle"), f("ca"), f("system"));
        let sock = d.path().join("proxy.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let mut v = ok_plan();
        v["proxy"] = serde_json::json!({"socket": sock});
        v["trust"] = serde_json::json!({"bundle": bundle, "ca": ca, "system": [sys]});
        let p = Plan::from_json(v.to_string().as_bytes()).unwrap();
        p.check_host().unwrap();
        let dir = d.path().to_string_lossy().into_owned();
        for bad in [
            serde_json::json!({"bundle": "rel", "ca": ca}),
            serde_json::json!({"bundle": bundle, "ca": ca, "system": vec![sys.clone(); MAX_TRUST_SYSTEM + 1]}),
            serde_json::json!({"bundle": bundle, "ca": ca, "extra": 1}),
        ] {
            let mut v = v.clone();
            v["trust"] = bad.clone();
            assert!(Plan::from_json(v.to_string().as_bytes()).is_err(), "{bad}");
        }
        let mut no_proxy = v.clone();
        no_proxy.as_object_mut().unwrap().remove("proxy");
        let e = Plan::from_json(no_proxy.to_string().as_bytes())
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.to_string().contains("only for a call with a proxy"),
            "{e}"
        );
        for (bad, why) in [
            (
                serde_json::json!({"bundle": dir, "ca": ca}),
                "not a plain file",
            ),
            (
                serde_json::json!({"bundle": bundle, "ca": format!("{dir}/missing")}),
                "missing",
            ),
        ] {
            let mut v = v.clone();
            v["trust"] = bad;
            let p = Plan::from_json(v.to_string().as_bytes()).unwrap();
            let e = p.check_host().map(|_| ()).unwrap_err().to_string();
            assert!(e.contains("trust file"), "{e}");
            assert!(why != "not a plain file" || e.contains(why), "{e}");
        }
    }

    #[test]
    fn proxy_checked() {
        let mut v = ok_plan();
        v["proxy"] = serde_json::json!({"socket": "/run/x/proxy.sock", "ports": [8443]});
        let p = Plan::from_json(v.to_string().as_bytes()).unwrap();
        assert_eq!(p.proxy.unwrap().relay_port, DEFAULT_RELAY_PORT);
        for bad in [
            serde_json::json!({"socket": "rel.sock"}),
            serde_json::json!({"socket": format!("/{}", "x".repeat(200))}),
            serde_json::json!({"socket": "/s", "relay_port": 53}),
            serde_json::json!({"socket": "/s", "bogus": 1}),
            serde_json::json!({"socket": "/s", "names": ["a.test"]}),
            serde_json::json!({"socket": "/s", "ports": [443]}),
        ] {
            let mut v = ok_plan();
            v["proxy"] = bad.clone();
            assert!(Plan::from_json(v.to_string().as_bytes()).is_err(), "{bad}");
        }
        let mut v = ok_plan();
        v["proxy"] = serde_json::json!({"socket": "/s"});
        v["grants"] = serde_json::json!([{"kind": "open_network"}]);
        assert!(Plan::from_json(v.to_string().as_bytes()).is_err());
        v["grants"] = serde_json::json!([]);
        v["mode"] = "unsandboxed".into();
        assert!(Plan::from_json(v.to_string().as_bytes()).is_err());
    }

    #[test]
    fn tmpfs_sizes_checked() {
        let mut v = ok_plan();
        v["tmp_size"] = "16M".into();
        v["shm_size"] = "5%".into();
        let p = Plan::from_json(v.to_string().as_bytes()).unwrap();
        let (t, s) = p.tmpfs_sizes();
        assert_eq!(t, 16 << 20);
        assert!(s >= 1 << 20 && s < memory() / 10, "{s}");
        let d = Plan::from_json(ok_plan().to_string().as_bytes()).unwrap();
        let (t, s) = d.tmpfs_sizes();
        assert!(t > s && t <= memory() / 4 + 4096, "{t} {s}");
        for bad in ["lots", "0%", "1k"] {
            let mut v = ok_plan();
            v["tmp_size"] = bad.into();
            let e = Plan::from_json(v.to_string().as_bytes()).unwrap_err();
            assert!(e.to_string().starts_with("tmp_size: "), "{e}");
        }
    }

    /// The wire's plan fixtures read through the launcher's plan, validated, and render
    /// again byte for byte (the plan's JSON is the same before and after the types moved
    /// to `efr_sandbox_wire::plan`).
    #[test]
    fn wire_fixtures_read_back_byte_for_byte() {
        for (name, text) in [
            (
                "plan.json",
                include_str!("../../wire/fixtures/v1/plan.json"),
            ),
            (
                "plan_minimal.json",
                include_str!("../../wire/fixtures/v1/plan_minimal.json"),
            ),
        ] {
            let p = Plan::from_json(text.as_bytes())
                .unwrap_or_else(|e| panic!("{name} is refused: {e}"));
            let mut again = serde_json::to_string_pretty(&p).unwrap();
            again.push('\n');
            assert_eq!(again, text, "{name}");
        }
    }

    #[test]
    fn weakening_knobs_typed_and_unknown_ones_refused() {
        let mut v = ok_plan();
        v["test_weaken"] = serde_json::json!(["no_masks", "seccomp_drop=keyctl"]);
        let p = Plan::from_json(v.to_string().as_bytes()).unwrap();
        assert_eq!(
            p.weakenings(),
            Ok(vec![
                TestWeaken::NoMasks,
                TestWeaken::SeccompDrop("keyctl".into())
            ])
        );
        for bad in ["no_seccomp", "bwrap=", "seccomp_drop"] {
            v["test_weaken"] = serde_json::json!([bad]);
            let e = Plan::from_json(v.to_string().as_bytes()).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("test_weaken: unknown entry {bad:?}")),
                "{e}"
            );
        }
    }

    #[test]
    fn version_checked() {
        let mut v = ok_plan();
        v["version"] = 2.into();
        assert_eq!(
            Plan::from_json(v.to_string().as_bytes()),
            Err(PlanError::Version(2))
        );
    }
}
