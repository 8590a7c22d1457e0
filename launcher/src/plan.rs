//! The plan: everything `efr-launch` needs to run one line, complete and validated.
//!
//! A plan is JSON with unknown fields refused. It is bounded (size, list lengths, path
//! lengths) and validated before anything runs: every path absolute and free of NUL, every
//! grant of a kind this launcher knows (a `Grant::Unknown` is refused), project roots and the
//! per-conversation directories present.

use std::path::Path;

use efr_sandbox_wire::size::Size;
use efr_sandbox_wire::{Backend, Grant};
use serde::{Deserialize, Serialize};

/// Largest plan accepted, in bytes.
pub const MAX_PLAN_BYTES: usize = 1 << 20;
/// Longest line accepted, in bytes.
pub const MAX_LINE_BYTES: usize = 256 * 1024;
/// Most entries in one list of the plan.
pub const MAX_LIST: usize = 4096;
/// Longest path accepted, in bytes.
pub const MAX_PATH: usize = 4096;
/// The plan format this launcher reads.
pub const PLAN_VERSION: u32 = 1;

/// How the line runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanMode {
    /// In the sandbox: namespaces, read-only view, Landlock, seccomp.
    Contained,
    /// Outside the sandbox; the launcher still owns the process tree.
    Unsandboxed,
}

/// One variable the service sets for the line (after scrubbing, so it is kept as given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

/// The complete input of one launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// [`PLAN_VERSION`].
    pub version: u32,
    pub mode: PlanMode,
    /// The backend of a contained launch (ignored for an unsandboxed one).
    #[serde(default = "default_backend")]
    pub backend: Backend,
    /// The shell line.
    pub line: String,
    /// The shell that runs it as `SHELL -c LINE`; `/bin/sh` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// The directory the line starts in.
    pub cwd: String,
    /// The user's home (what `~` is inside); used for the environment and masks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// The turn's project roots: writable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// The conversation's scratch directory: writable, at its own path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch: Option<String>,
    /// The host directory shown as `/tmp` inside (lasts for the conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp: Option<String>,
    /// The size of the call's own `/tmp` tmpfs (when `tmp` is absent): bytes such as `2G`
    /// or a share of the memory such as `25%` (`efr_sandbox_wire::size`);
    /// [`DEFAULT_TMP_SIZE`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_size: Option<String>,
    /// The size of the call's `/dev/shm` tmpfs; [`DEFAULT_SHM_SIZE`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_size: Option<String>,
    /// Paths inside writable roots that stay read-only (existing or not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only_inside: Vec<String>,
    /// Name patterns (`*` within a component, `**` across) kept read-only relative to each
    /// writable root and each repository below one, existing or not, whatever the host does
    /// to them during the call (the init supervises the writes; see `crate::supervise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect_names: Vec<String>,
    /// Paths shown present but empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masks: Vec<String>,
    /// Masked files shown with their secrets removed: a generated copy bound read-only
    /// over the mask (a settings file that also holds a token, such as `~/.npmrc`), so the
    /// registry setting still applies inside. Each path is one of `masks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scrubbed: Vec<ScrubbedFile>,
    /// Grants on top of the default view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
    /// Real caches shown writable through a per-call layer (overlayfs in the call's user
    /// namespace); the service merges the layer's upper dir after the call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<CacheLayer>,
    /// Files beside a cache that its tool must write (a lock), each shown writable as a
    /// private per-call file `private` of the service bound at `path`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_files: Vec<CacheFile>,
    /// The environment the line starts from (scrubbed by the launcher); the launcher's own
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Variables set after scrubbing (e.g. `SCRATCH`, proxy variables).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_set: Vec<EnvVar>,
    /// Extra variable names kept by the scrubber (still dropped by the policy's `drop`
    /// names and secret values; ignored without `env_policy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_keep: Vec<String>,
    /// What of `env` the line keeps (the config's `[environment]`); when absent (an older
    /// service), only [`crate::env::FALLBACK_KEEP`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_policy: Option<efr_sandbox_wire::envfilter::EnvPolicy>,
    /// Hide the host's listening path sockets (true when absent).
    #[serde(default = "yes")]
    pub hide_sockets: bool,
    /// Fail the launch when Landlock cannot be enforced at all (false when absent).
    #[serde(default)]
    pub require_landlock: bool,
    /// The call's egress proxy (a contained call with its own network only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyPlan>,
    /// TESTS ONLY: weaken one layer on purpose, so the probe's tests can see the matching
    /// check fail ([`TEST_WEAKEN_KINDS`]). Honored only when the launcher's environment
    /// holds [`ALLOW_TEST_WEAKEN_ENV`]`=1`; otherwise a plan that holds any is a setup error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_weaken: Vec<String>,
}

/// A masked file's copy with its secrets removed ([`Plan::scrubbed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrubbedFile {
    /// The masked path (absolute).
    pub path: String,
    /// What the call reads there.
    pub content: String,
}

/// Most scrubbed copies a plan holds, the longest one, and all of them together (they
/// live in the native backend's 1 MiB staging tmpfs).
pub const MAX_SCRUBBED: usize = 16;
pub const MAX_SCRUBBED_BYTES: usize = 64 * 1024;
pub const MAX_SCRUBBED_TOTAL: usize = 256 * 1024;

/// One real cache of the call and its per-call layer: `path` is the cache (the overlay's
/// lower dir, and where the merged view is mounted), `upper` and `work` are empty
/// directories of a private (0700) per-call directory of the service, outside every
/// writable root. Paths hold no `,`, `:` or `\\` (overlayfs option syntax).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheLayer {
    pub path: String,
    pub upper: String,
    pub work: String,
}

/// A file a cache's tool writes beside the cache (`~/.cargo/.package-cache`), shown as the
/// call's own: the service's empty per-call file `private`, bound writable at `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheFile {
    pub path: String,
    pub private: String,
}

impl CacheLayer {
    fn validate(&self) -> Result<(), PlanError> {
        for (what, p) in [
            ("cache", &self.path),
            ("cache upper", &self.upper),
            ("cache work", &self.work),
        ] {
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
        for (what, p) in [
            ("cache", &self.path),
            ("cache upper", &self.upper),
            ("cache work", &self.work),
        ] {
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
/// The relay's port on 127.0.0.1 when the plan names none.
pub const DEFAULT_RELAY_PORT: u16 = 3128;
/// Longest path a Unix socket address holds.
pub const MAX_SOCKET_PATH: usize = 107;

/// The call's egress proxy (design section 7): the launcher binds its socket into the view
/// at [`INSIDE_PROXY_SOCKET`], points `/etc/resolv.conf` at the call's DNS server, sets the
/// proxy variables, and the init binds (inside the call's network namespace) the relay's
/// listener on `127.0.0.1:relay_port`, the DNS socket on `127.0.0.1:53` and the synthetic
/// listeners on port 443 and `ports`, and hands them to the proxy, which serves them (the
/// names the DNS answers are the proxy's, from its own policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyPlan {
    /// The host path of the call's proxy socket (the service's proxy listens there).
    pub socket: String,
    /// The relay's TCP port on 127.0.0.1 (the proxy variables name it).
    #[serde(default = "default_relay_port")]
    pub relay_port: u16,
    /// Ports besides 443 of the synthetic listeners (the ports host grants name), so a tool
    /// that ignores the proxy variables reaches `name:port` too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
}

fn default_relay_port() -> u16 {
    DEFAULT_RELAY_PORT
}

impl ProxyPlan {
    /// A proxy plan for the socket at `socket` with the default relay port.
    pub fn new(socket: impl Into<String>) -> ProxyPlan {
        ProxyPlan {
            socket: socket.into(),
            relay_port: DEFAULT_RELAY_PORT,
            ports: Vec::new(),
        }
    }

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

/// The `test_weaken` entries known: `no_landlock` (Landlock is not applied), `no_masks`
/// (masks are not mounted), `seccomp_drop=NAME` (the EPERM program loses the entry of that
/// system call, such as `keyctl`, or the `socket` rule), `bwrap=PATH` (bubblewrap is run
/// from PATH, such as `/bin/false`), `no_supervise` (the init does not supervise writes:
/// the tests of the post-call guard, the layer behind it).
pub const TEST_WEAKEN_KINDS: &[&str] = &[
    "no_landlock",
    "no_masks",
    "seccomp_drop=",
    "bwrap=",
    "no_supervise",
];

/// The variable the service copies into a plan's `test_weaken` (comma-separated; tests
/// only, and honoured by the launcher only with [`ALLOW_TEST_WEAKEN_ENV`]).
pub const TEST_WEAKEN_ENV: &str = "EFR_SANDBOX_TEST_WEAKEN";

fn yes() -> bool {
    true
}

fn default_backend() -> Backend {
    Backend::Native
}

/// Why a plan was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("plan is larger than {MAX_PLAN_BYTES} bytes")]
    TooLarge,
    #[error("plan is not valid JSON: {0}")]
    Json(String),
    #[error("plan version {0} is not {PLAN_VERSION}")]
    Version(u32),
    #[error("{0}")]
    Invalid(String),
    /// A launch request without the view's `{0}` list: the lists are the policy's
    /// (`efr_policy::config::Config::launch_view`), the launcher has none of its own.
    #[error(
        "building the plan: the request names no {0} (the view comes from the policy's launch_view)"
    )]
    NoView(&'static str),
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

impl Plan {
    /// A contained plan with every optional member empty.
    pub fn contained(line: impl Into<String>, cwd: impl Into<String>) -> Plan {
        Plan {
            version: PLAN_VERSION,
            mode: PlanMode::Contained,
            backend: Backend::Native,
            line: line.into(),
            shell: None,
            cwd: cwd.into(),
            home: None,
            projects: Vec::new(),
            scratch: None,
            tmp: None,
            tmp_size: None,
            shm_size: None,
            read_only_inside: Vec::new(),
            protect_names: Vec::new(),
            masks: Vec::new(),
            scrubbed: Vec::new(),
            grants: Vec::new(),
            caches: Vec::new(),
            cache_files: Vec::new(),
            env: None,
            env_set: Vec::new(),
            env_keep: Vec::new(),
            env_policy: None,
            hide_sockets: true,
            require_landlock: false,
            proxy: None,
            test_weaken: Vec::new(),
        }
    }

    /// Whether the plan asks for this `test_weaken` entry (exact, or `kind=` prefix: the
    /// values).
    pub fn weaken_values(&self, kind: &str) -> Vec<&str> {
        self.test_weaken
            .iter()
            .filter_map(|w| {
                if w == kind {
                    Some("")
                } else {
                    w.strip_prefix(kind)?.strip_prefix('=')
                }
            })
            .collect()
    }

    /// Reads and validates a plan from JSON bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Plan, PlanError> {
        if bytes.len() > MAX_PLAN_BYTES {
            return Err(PlanError::TooLarge);
        }
        let plan: Plan =
            serde_json::from_slice(bytes).map_err(|e| PlanError::Json(e.to_string()))?;
        plan.validate()?;
        Ok(plan)
    }

    /// The sizes in bytes of the call's own `/tmp` and `/dev/shm` tmpfs (a share of the
    /// memory is taken of this machine's).
    pub fn tmpfs_sizes(&self) -> (u64, u64) {
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

    /// The shell that runs the line.
    pub fn shell(&self) -> &str {
        self.shell.as_deref().unwrap_or("/bin/sh")
    }

    /// Checks the plan's shape (not the file system: see [`Plan::check_host`]).
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.version != PLAN_VERSION {
            return Err(PlanError::Version(self.version));
        }
        if self.line.len() > MAX_LINE_BYTES {
            return Err(invalid("line is too long"));
        }
        if self.line.contains('\0') {
            return Err(invalid("line holds a NUL byte"));
        }
        check_path("shell", self.shell())?;
        check_path("cwd", &self.cwd)?;
        if let Some(h) = &self.home {
            check_path("home", h)?;
        }
        if let Some(s) = &self.scratch {
            check_path("scratch", s)?;
        }
        if let Some(t) = &self.tmp {
            check_path("tmp", t)?;
        }
        for (what, s) in [("tmp_size", &self.tmp_size), ("shm_size", &self.shm_size)] {
            if let Some(s) = s {
                Size::parse(s).map_err(|e| invalid(format!("{what}: {e}")))?;
            }
        }
        check_list("projects", &self.projects)?;
        check_list("read_only_inside", &self.read_only_inside)?;
        if self.protect_names.len() > MAX_LIST {
            return Err(invalid("protect_names: too many entries"));
        }
        for n in &self.protect_names {
            if n.is_empty() || n.len() > MAX_PATH || n.contains('\0') || n.starts_with('/') {
                return Err(invalid(format!(
                    "protect_names: {n:?} is not a relative pattern"
                )));
            }
        }
        crate::supervise::Rules::new(&[], &[], &self.protect_names).map_err(invalid)?;
        check_list("masks", &self.masks)?;
        if self.scrubbed.len() > MAX_SCRUBBED {
            return Err(invalid(format!(
                "scrubbed: more than {MAX_SCRUBBED} copies"
            )));
        }
        let mut total = 0;
        for f in &self.scrubbed {
            let p = f.path.trim_end_matches('/');
            if !self.masks.iter().any(|m| m.trim_end_matches('/') == p) {
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
        if self.caches.len() > 64 {
            return Err(invalid("caches: more than 64 entries"));
        }
        for c in &self.caches {
            c.validate()?;
        }
        if self.cache_files.len() > 64 {
            return Err(invalid("cache_files: more than 64 entries"));
        }
        for f in &self.cache_files {
            check_path("cache file", &f.path)?;
            check_path("cache file", &f.private)?;
        }
        if self.env_keep.len() > MAX_LIST {
            return Err(invalid("env_keep: too many entries"));
        }
        if let Some(p) = &self.env_policy {
            if p.keep.len() > MAX_LIST
                || p.drop.len() > MAX_LIST
                || p.secret_values.len() > MAX_LIST
            {
                return Err(invalid("env_policy: too many entries"));
            }
            p.compile()
                .map_err(|e| invalid(format!("env_policy: {e}")))?;
        }
        if let Some(env) = &self.env {
            check_env("env", env)?;
        }
        check_env("env_set", &self.env_set)?;
        if self.test_weaken.len() > 16 {
            return Err(invalid("test_weaken: too many entries"));
        }
        for w in &self.test_weaken {
            let known = TEST_WEAKEN_KINDS.iter().any(|k| {
                if let Some(prefix) = k.strip_suffix('=') {
                    w.strip_prefix(prefix)
                        .and_then(|r| r.strip_prefix('='))
                        .is_some_and(|v| !v.is_empty() && !v.contains('\0'))
                } else {
                    w == k
                }
            });
            if !known {
                return Err(invalid(format!("test_weaken: unknown entry {w:?}")));
            }
        }
        if self.grants.len() > MAX_LIST {
            return Err(invalid("grants: too many entries"));
        }
        for g in &self.grants {
            match g {
                Grant::Write { path }
                | Grant::Socket { path }
                | Grant::Device { path }
                | Grant::Unmask { path } => check_path(g.kind_str(), path)?,
                Grant::OpenNetwork | Grant::NetView | Grant::Bus { .. } | Grant::Desktop { .. } => {
                }
                Grant::Host { .. } | Grant::BusFilter { .. } => {
                    // Carried by the proxy and the bus filter, which the service runs; the
                    // launcher only needs the plan's env_set and socket grants for them.
                }
                Grant::Unknown => return Err(invalid("grant of an unknown kind")),
            }
        }
        if self.grants.iter().any(|g| matches!(g, Grant::OpenNetwork))
            && self.grants.iter().any(|g| matches!(g, Grant::NetView))
        {
            return Err(invalid("open_network and net_view together"));
        }
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

    /// Checks what the plan names on the host: project roots, cwd, scratch and tmp must be
    /// directories; write, device and socket grants must exist.
    pub fn check_host(&self) -> Result<(), PlanError> {
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
                        std::fs::symlink_metadata(path)
                            .map_err(|e| invalid(format!("{} grant {path}: {e}", g.kind_str())))?;
                    }
                    _ => {}
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

    /// The grants' net mode.
    pub fn net(&self) -> NetMode {
        if self.grants.iter().any(|g| matches!(g, Grant::OpenNetwork)) {
            NetMode::Open
        } else if self.grants.iter().any(|g| matches!(g, Grant::NetView)) {
            NetMode::View
        } else {
            NetMode::Own
        }
    }
}

/// The network a contained call gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    /// Its own namespace with only loopback.
    Own,
    /// The host's namespace, only Unix and netlink sockets.
    View,
    /// The host's network as it is.
    Open,
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
    fn version_checked() {
        let mut v = ok_plan();
        v["version"] = 2.into();
        assert_eq!(
            Plan::from_json(v.to_string().as_bytes()),
            Err(PlanError::Version(2))
        );
    }
}
