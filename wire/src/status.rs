//! The sandbox status, the self-check report and the paths the service uses.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::mode::Mode;
use crate::serde_util::is_false;

/// `mode_fallback`: the mode a turn asked for could not be had, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModeFallback {
    /// The mode the turn asked for.
    pub asked: Mode,
    /// Why it could not be had: `sandbox_unavailable` (a required self-test failed) or
    /// `root` (the service runs as root).
    pub reason: String,
}

/// Which backend builds the contained view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Our own clone, mounts and pivot_root.
    Native,
    /// bubblewrap, with our Landlock and seccomp.
    Bwrap,
}

impl Backend {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Bwrap => "bwrap",
        }
    }
}

/// `bus_proxy_off`: why the bus filter is off. A reader takes a reason it does not know as
/// `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BusProxyOff {
    /// The config turns it off.
    Config,
    /// xdg-dbus-proxy is not installed.
    NoProgram,
    /// Its self-test failed.
    SelfTest,
    /// The installed xdg-dbus-proxy is too old.
    OldVersion,
    /// A reason this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}

impl BusProxyOff {
    /// Every reason, in wire order.
    pub const ALL: [BusProxyOff; 5] = [
        BusProxyOff::Config,
        BusProxyOff::NoProgram,
        BusProxyOff::SelfTest,
        BusProxyOff::OldVersion,
        BusProxyOff::Unknown,
    ];
}

/// `socket_mediation`: what keeps a contained call from the host's path sockets. A reader
/// takes a value it does not know as `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SocketMediation {
    /// Landlock's `LANDLOCK_ACCESS_FS_RESOLVE_UNIX` (ABI 9).
    Landlock,
    /// The init's supervisor (seccomp user notification of connect and the sends).
    Supervisor,
    /// A value this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}

impl SocketMediation {
    /// Every value, in wire order.
    pub const ALL: [SocketMediation; 3] = [
        SocketMediation::Landlock,
        SocketMediation::Supervisor,
        SocketMediation::Unknown,
    ];
}

/// `sandbox_status`: the summary admin.status carries, from the last check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxStatus {
    /// A contained call can run.
    pub available: bool,
    /// Absent when no backend works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// When the status was last checked (RFC 3339); absent when never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<String>,
    /// The Landlock ABI in force; absent when Landlock is not there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock_abi: Option<u32>,
    /// The seccomp self-test passed: the filter loads and refuses what it should (false
    /// when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub seccomp: bool,
    /// The network view self-test passed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub netview: bool,
    /// The user's `network.netview` is false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub netview_off: bool,
    /// The proxy self-test passed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub proxy: bool,
    /// The filtered bus proxy runs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bus_proxy: bool,
    /// Absent when the filter is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_proxy_off: Option<BusProxyOff>,
    /// The mode that applies when a layer the asked mode needs is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<ModeFallback>,
    /// Why the sandbox is unavailable, one line; absent when available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// What keeps path sockets of the host from a call; absent when not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_mediation: Option<SocketMediation>,
}

/// The result of one self-test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// The test passed.
    Pass,
    /// The test failed; `detail` says why.
    Fail,
    /// Not run here (such as a backend that is not installed).
    Skip,
}

/// The self-tests of `sandbox_check`, by name. A reader takes a name it does not know as
/// `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SelfTest {
    /// Who the service runs as (root is refused full mode).
    User,
    /// A contained call on the native backend ran and every layer inside held.
    BackendNative,
    /// A contained call under bubblewrap ran and every layer inside held.
    BackendBwrap,
    /// Inside: the call has a user namespace of its own.
    Userns,
    /// Inside: the project is writable, its `.git/hooks` read-only, the rest of the view
    /// read-only.
    Mounts,
    /// Inside: a masked directory looks empty.
    Masks,
    /// Inside: the call has a pid namespace of its own (no host process is visible).
    Pidns,
    /// Inside: the call has a network namespace of its own (the host's loopback is out of
    /// reach).
    Netns,
    /// Inside: Landlock is enforced.
    Landlock,
    /// Inside: the seccomp filter refuses what it should.
    Seccomp,
    /// Inside: the call holds no capability.
    Caps,
    /// Inside: no_new_privs is set.
    NoNewPrivs,
    /// Inside: a secret-looking variable of the caller's environment is gone.
    Env,
    /// A `net_view` call sees the host's network with only Unix and netlink sockets.
    Netview,
    /// A call with a host grant reaches its granted host through its proxy, and no other.
    Proxy,
    /// The bus filter (xdg-dbus-proxy) passes what its rules allow and refuses the rest.
    BusProxy,
    /// A test this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}

impl SelfTest {
    /// Every value, in wire order.
    pub const ALL: [SelfTest; 17] = [
        SelfTest::User,
        SelfTest::BackendNative,
        SelfTest::BackendBwrap,
        SelfTest::Userns,
        SelfTest::Mounts,
        SelfTest::Masks,
        SelfTest::Pidns,
        SelfTest::Netns,
        SelfTest::Landlock,
        SelfTest::Seccomp,
        SelfTest::Caps,
        SelfTest::NoNewPrivs,
        SelfTest::Env,
        SelfTest::Netview,
        SelfTest::Proxy,
        SelfTest::BusProxy,
        SelfTest::Unknown,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SelfTest::User => "user",
            SelfTest::BackendNative => "backend_native",
            SelfTest::BackendBwrap => "backend_bwrap",
            SelfTest::Userns => "userns",
            SelfTest::Mounts => "mounts",
            SelfTest::Masks => "masks",
            SelfTest::Pidns => "pidns",
            SelfTest::Netns => "netns",
            SelfTest::Landlock => "landlock",
            SelfTest::Seccomp => "seccomp",
            SelfTest::Caps => "caps",
            SelfTest::NoNewPrivs => "no_new_privs",
            SelfTest::Env => "env",
            SelfTest::Netview => "netview",
            SelfTest::Proxy => "proxy",
            SelfTest::BusProxy => "bus_proxy",
            SelfTest::Unknown => "unknown",
        }
    }

    /// The test of a backend.
    pub fn backend(b: Backend) -> SelfTest {
        match b {
            Backend::Native => SelfTest::BackendNative,
            Backend::Bwrap => SelfTest::BackendBwrap,
        }
    }

    /// Whether it is the test of a backend.
    pub fn is_backend(self) -> bool {
        matches!(self, SelfTest::BackendNative | SelfTest::BackendBwrap)
    }
}

impl std::fmt::Display for SelfTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`: a width in the format (`{:13}`) applies.
        f.pad(self.as_str())
    }
}

/// One self-test of `sandbox_check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckTest {
    /// Which test.
    pub name: SelfTest,
    /// How the test went.
    pub outcome: CheckOutcome,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// One line a person can act on.
    pub detail: String,
    /// The mode in force needs it (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
}

/// `sandbox_check`: the self-tests, run now from inside a contained call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxCheck {
    /// The status the tests give.
    pub status: SandboxStatus,
    /// Every self-test, in the order run.
    pub tests: Vec<CheckTest>,
    /// The whole check, in milliseconds.
    pub ms: u64,
}

/// `sandbox_paths`: the roots the service uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxPaths {
    /// The service's runtime dir (`$XDG_RUNTIME_DIR/efr`, or the directory of `--socket`).
    pub runtime_dir: String,
    /// The service's socket (`<runtime dir>/sandbox.sock` by default).
    pub socket: String,
    /// The root of the conversations' `$SCRATCH` directories (`<runtime dir>/scratch`).
    pub scratch: String,
    /// The user's config file (`$XDG_CONFIG_HOME/efr/config.toml`).
    pub config_file: String,
}
