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

/// One self-test of `sandbox_check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckTest {
    /// Such as `userns`, `landlock`, `seccomp`, `netview`, `proxy`.
    pub name: String,
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
