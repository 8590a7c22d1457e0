//! The plan: everything `efr-launch` needs to run one line, as the service (efr-call) writes
//! it and the launcher reads it (a file or an fd). Moved here from `efr_launcher::plan`,
//! which re-exports these types; the JSON is unchanged (the fixtures `plan.json` and
//! `plan_minimal.json` were read back byte for byte through the launcher's own types before
//! the move).
//!
//! A plan is JSON with unknown fields refused. Its *validation* (bounds, absolute paths, the
//! grants this launcher knows, what must exist on the host) stays in the launcher
//! (`efr_launcher::plan::PlanCheck`): the launcher is the trust boundary and re-checks every
//! plan it is handed, whoever wrote it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::envfilter::EnvPolicy;
use crate::launch::Grant;
use crate::status::Backend;

/// The plan format this launcher reads.
pub const PLAN_VERSION: u32 = 1;

/// The relay's port on 127.0.0.1 when the plan names none.
pub const DEFAULT_RELAY_PORT: u16 = 3128;

/// How the line runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanMode {
    /// In the sandbox: namespaces, read-only view, Landlock, seccomp.
    Contained,
    /// Outside the sandbox; the launcher still owns the process tree.
    Unsandboxed,
}

/// One variable the service sets for the line (after scrubbing, so it is kept as given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value, as the line gets it.
    pub value: String,
}

impl From<(String, String)> for EnvVar {
    /// A variable from its `(name, value)` pair.
    fn from((name, value): (String, String)) -> EnvVar {
        EnvVar { name, value }
    }
}

/// The complete input of one launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// [`PLAN_VERSION`].
    pub version: u32,
    /// Contained or unsandboxed.
    pub mode: PlanMode,
    /// The backend of a contained launch (ignored for an unsandboxed one).
    #[serde(default = "default_backend")]
    pub backend: Backend,
    /// The shell line.
    pub line: String,
    /// The shell that runs it as `SHELL -c LINE`; `/bin/sh` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// The shell's command line after its name, run instead of `SHELL -c LINE` when not
    /// empty (`efr-sandbox shell`: bash's options, `-c LINE`, `$0` and the arguments as the
    /// caller gave them); `line` is then only what the call is recorded as.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shell_args: Vec<String>,
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
    /// or a share of the memory such as `25%` (`crate::size`); the launcher's
    /// `DEFAULT_TMP_SIZE` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp_size: Option<String>,
    /// The size of the call's `/dev/shm` tmpfs; the launcher's `DEFAULT_SHM_SIZE` when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_size: Option<String>,
    /// The line's `RLIMIT_NPROC` (soft and hard): a background job's process bound when it
    /// has no cgroup of its own. In the call's own user namespace the kernel counts the
    /// processes of that namespace's user (its `ucounts`), so it bounds the job, not every
    /// process of the user. Absent: unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes_max: Option<u64>,
    /// Paths inside writable roots that stay read-only (existing or not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only_inside: Vec<String>,
    /// Name patterns (`*` within a component, `**` across) kept read-only relative to each
    /// writable root and each repository below one, existing or not, whatever the host does
    /// to them during the call (the init supervises the writes; see `efr_launcher::supervise`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect_names: Vec<String>,
    /// The git config keys that run nothing (the config's `git.safe_config_keys`): the
    /// write supervisor lets a call put a config where git reads one only when every key is
    /// on it; the launcher's own short list when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_safe_keys: Option<Vec<String>>,
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
    /// Caches that got no layer for this call because it could not be made (a full disk,
    /// a read-only state dir): each stays read-only in the call, and the finish says so in
    /// `cache_refused`. One line each: the cache and why. The launcher mounts nothing for
    /// them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches_read_only: Vec<String>,
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
    /// service), only the launcher's fallback list (`efr_launcher::env::FALLBACK_KEEP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_policy: Option<EnvPolicy>,
    /// Hide the host's listening path sockets (true when absent).
    #[serde(default = "yes")]
    pub hide_sockets: bool,
    /// Fail the launch when Landlock cannot be enforced at all (false when absent).
    #[serde(default)]
    pub require_landlock: bool,
    /// The call's egress proxy (a contained call with its own network only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyPlan>,
    /// The credential broker's CA in the call's trust (a call with a credential grant
    /// only): the files the service wrote, bound read-only ([`TrustPlan`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustPlan>,
    /// TESTS ONLY: weaken one layer on purpose, so the probe's tests can see the matching
    /// check fail ([`TestWeaken`], written as its string, so that an entry the launcher does
    /// not know reaches it and is refused there with its name). Honored only when the launcher's environment allows it
    /// (`efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV=1`); otherwise a plan that holds any is
    /// a setup error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_weaken: Vec<String>,
}

/// A masked file's copy with its secrets removed ([`Plan::scrubbed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScrubbedFile {
    /// The masked path (absolute).
    pub path: String,
    /// What the call reads there.
    pub content: String,
}

impl From<(String, String)> for ScrubbedFile {
    /// A copy from its `(path, content)` pair.
    fn from((path, content): (String, String)) -> ScrubbedFile {
        ScrubbedFile { path, content }
    }
}

/// One real cache of the call and its per-call layer: `path` is the cache (the overlay's
/// lower dir, and where the merged view is mounted), `upper` and `work` are empty
/// directories of a private (0700) per-call directory of the service, outside every
/// writable root. Paths hold no `,`, `:` or `\\` (overlayfs option syntax).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheLayer {
    /// The real cache (absolute): the overlay's lower dir and where the merged view is
    /// mounted.
    pub path: String,
    /// The layer's upper dir: what the call adds, changes or deletes lands here.
    pub upper: String,
    /// Overlayfs's work dir, on the same file system as `upper`.
    pub work: String,
    /// The call's conversation's own layer of this cache (absolute, in the service's
    /// private state dir, on the file system of `upper`): the overlay's upper lower dir,
    /// above the real cache, so that a call sees what the earlier calls of its
    /// conversation left there. Absent for a call without a conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
}

/// A file a cache's tool writes beside the cache (`~/.cargo/.package-cache`), shown as the
/// call's own: the service's empty per-call file `private`, bound writable at `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheFile {
    /// Where the call sees the file (absolute).
    pub path: String,
    /// The service's empty per-call file bound there.
    pub private: String,
}

/// The credential broker's CA in the call's trust: the proxy of a call holding a credential
/// terminates its TLS with leaves of that CA, so the call's tools must trust it. The
/// service writes two files in the call's private directory; the launcher binds them
/// read-only at [`INSIDE_CA_BUNDLE`] and [`INSIDE_CA`], and the bundle over each of the
/// host's system bundles in `system` (where tools that read no variable look).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustPlan {
    /// The host's system roots followed by the broker's CA (a plain file, absolute).
    pub bundle: String,
    /// The broker's CA alone (a plain file, absolute): for the tools that add a file to
    /// their own roots (`NODE_EXTRA_CA_CERTS`).
    pub ca: String,
    /// The host's system bundle files (absolute, existing plain files) the bundle is bound
    /// over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<String>,
    /// The git config of the credentials' helpers (a plain file, absolute), bound at
    /// [`INSIDE_GIT_CONFIG`], which the call's `GIT_CONFIG_SYSTEM` names: it includes the
    /// host's system config and answers git's credential requests for the bound hosts
    /// with the placeholder. Absent when no granted credential has `git = true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_config: Option<String>,
}

/// Where a call finds [`TrustPlan::bundle`].
pub const INSIDE_CA_BUNDLE: &str = "/dev/efr/ca-bundle.pem";
/// Where a call finds [`TrustPlan::ca`].
pub const INSIDE_CA: &str = "/dev/efr/ca.pem";
/// Where a call finds [`TrustPlan::git_config`].
pub const INSIDE_GIT_CONFIG: &str = "/dev/efr/gitconfig";

/// The call's egress proxy (design section 7): the launcher binds its socket into the view
/// (`efr_launcher::plan::INSIDE_PROXY_SOCKET`), points `/etc/resolv.conf` at the call's
/// DNS server, sets the proxy variables, and the init binds (inside the call's network
/// namespace) the relay's listener on `127.0.0.1:relay_port`, the DNS socket on
/// `127.0.0.1:53` and the synthetic listeners on port 443 and `ports`, and hands them to
/// the proxy, which serves them (the names the DNS answers are the proxy's, from its own
/// policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

fn yes() -> bool {
    true
}

fn default_backend() -> Backend {
    Backend::Native
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
}

/// The network a contained call gets (from its grants: [`Plan::net`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    /// Its own namespace with only loopback.
    Own,
    /// The host's namespace, only Unix and netlink sockets.
    View,
    /// The host's network as it is.
    Open,
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
            shell_args: Vec::new(),
            cwd: cwd.into(),
            home: None,
            projects: Vec::new(),
            scratch: None,
            tmp: None,
            tmp_size: None,
            shm_size: None,
            processes_max: None,
            read_only_inside: Vec::new(),
            protect_names: Vec::new(),
            git_safe_keys: None,
            masks: Vec::new(),
            scrubbed: Vec::new(),
            grants: Vec::new(),
            caches: Vec::new(),
            cache_files: Vec::new(),
            caches_read_only: Vec::new(),
            env: None,
            env_set: Vec::new(),
            env_keep: Vec::new(),
            env_policy: None,
            hide_sockets: true,
            require_landlock: false,
            proxy: None,
            trust: None,
            test_weaken: Vec::new(),
        }
    }

    /// The shell that runs the line.
    pub fn shell(&self) -> &str {
        self.shell.as_deref().unwrap_or("/bin/sh")
    }

    /// The line's command line: `SHELL -c LINE`, or `SHELL SHELL_ARGS...`.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = vec![self.shell().to_string()];
        if self.shell_args.is_empty() {
            argv.extend(["-c".to_string(), self.line.clone()]);
        } else {
            argv.extend(self.shell_args.iter().cloned());
        }
        argv
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

/// One test-only weakening knob of a plan's `test_weaken` (written there as its string:
/// `no_landlock`, `seccomp_drop=keyctl`). The launcher honours them only when its
/// environment allows it, and refuses a plan holding one it does not know
/// ([`UnknownWeaken`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TestWeaken {
    /// `no_landlock`: Landlock is not applied.
    NoLandlock,
    /// `no_masks`: masks are not mounted.
    NoMasks,
    /// `seccomp_drop=NAME`: the EPERM program loses the entry of that system call (such as
    /// `keyctl`), or the `socket` rule.
    SeccompDrop(String),
    /// `bwrap=PATH`: bubblewrap is run from PATH (such as `/bin/false`).
    Bwrap(String),
    /// `no_supervise`: the init does not supervise writes (the tests of the post-call
    /// guard, the layer behind it).
    NoSupervise,
    /// `no_proxy`: the service gives a call with its own network no egress proxy (its
    /// share of a launch, measured by `scripts/bench-proxy-launch.sh`); the launcher does
    /// nothing of its own for it.
    NoProxy,
}

/// A `test_weaken` entry that names no knob (or a knob without its value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "test_weaken: unknown entry {0:?} (known: no_landlock, no_masks, seccomp_drop=NAME, \
     bwrap=PATH, no_supervise, no_proxy)"
)]
pub struct UnknownWeaken(pub String);

impl TestWeaken {
    /// The knobs' names (a `=` ends one that takes a value).
    pub const NAMES: [&'static str; 6] = [
        "no_landlock",
        "no_masks",
        "seccomp_drop=",
        "bwrap=",
        "no_supervise",
        "no_proxy",
    ];

    /// Reads one entry.
    pub fn parse(s: &str) -> Result<TestWeaken, UnknownWeaken> {
        let value = |prefix: &str| {
            s.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('='))
                .filter(|v| !v.is_empty() && !v.contains('\0'))
                .map(String::from)
        };
        Ok(match s {
            "no_landlock" => TestWeaken::NoLandlock,
            "no_masks" => TestWeaken::NoMasks,
            "no_supervise" => TestWeaken::NoSupervise,
            "no_proxy" => TestWeaken::NoProxy,
            _ => {
                if let Some(v) = value("seccomp_drop") {
                    TestWeaken::SeccompDrop(v)
                } else if let Some(v) = value("bwrap") {
                    TestWeaken::Bwrap(v)
                } else {
                    return Err(UnknownWeaken(s.chars().take(256).collect()));
                }
            }
        })
    }
}

impl std::fmt::Display for TestWeaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TestWeaken::NoLandlock => f.write_str("no_landlock"),
            TestWeaken::NoMasks => f.write_str("no_masks"),
            TestWeaken::SeccompDrop(v) => write!(f, "seccomp_drop={v}"),
            TestWeaken::Bwrap(v) => write!(f, "bwrap={v}"),
            TestWeaken::NoSupervise => f.write_str("no_supervise"),
            TestWeaken::NoProxy => f.write_str("no_proxy"),
        }
    }
}

impl std::str::FromStr for TestWeaken {
    type Err = UnknownWeaken;
    fn from_str(s: &str) -> Result<TestWeaken, UnknownWeaken> {
        TestWeaken::parse(s)
    }
}

impl Plan {
    /// The plan's `test_weaken` knobs, typed; the first unknown entry is an error.
    pub fn weakenings(&self) -> Result<Vec<TestWeaken>, UnknownWeaken> {
        self.test_weaken
            .iter()
            .map(|w| TestWeaken::parse(w))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weakening_knobs_read_and_write_as_their_strings() {
        for s in [
            "no_landlock",
            "no_masks",
            "seccomp_drop=keyctl",
            "bwrap=/bin/false",
            "no_supervise",
        ] {
            let w = TestWeaken::parse(s).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(w.to_string(), s);
        }
        for bad in [
            "",
            "no_landlock=1",
            "seccomp_drop",
            "seccomp_drop=",
            "bwrap",
            "bwrapx=/bin/false",
            "no_seccomp",
            "NO_MASKS",
            "bwrap=/a\0b",
        ] {
            let e = TestWeaken::parse(bad).expect_err(bad);
            assert!(e.to_string().contains("unknown entry"), "{e}");
        }
    }
}
