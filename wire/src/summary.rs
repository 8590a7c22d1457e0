//! `sandbox_summary`: what the sandbox saw of one call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::launch::Bus;
use crate::serde_util::{is_false, is_one, is_zero, one};

/// `block_reason`: why the proxy refused a connection. A reader takes a reason it does not
/// know as `unknown`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BlockReason {
    /// No grant or allow rule names the host (or the port).
    NotAllowed,
    /// An IP literal instead of a name.
    IpLiteral,
    /// The tunnel did not start with a TLS ClientHello (or plain HTTP without a grant).
    NotTls,
    /// A malformed request, or an SNI that differs from the CONNECT host.
    BadRequest,
    /// Over the call's connection or byte limits.
    Limit,
    /// The deny list holds the host, or the call could hold a token for it.
    Denied,
    /// The host's loopback port a `tcp` host grant relays to refused the connection
    /// (nothing listens there on the host).
    HostRefused,
    /// The request carried a credential's placeholder (in a header, the URL, the body, a
    /// DNS name or a tunnel's first bytes) to a host that credential is not bound to.
    Credential,
    /// A reason this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}

impl BlockReason {
    /// Every reason, in wire order.
    pub const ALL: [BlockReason; 9] = [
        BlockReason::NotAllowed,
        BlockReason::IpLiteral,
        BlockReason::NotTls,
        BlockReason::BadRequest,
        BlockReason::Limit,
        BlockReason::Denied,
        BlockReason::HostRefused,
        BlockReason::Credential,
        BlockReason::Unknown,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockReason::NotAllowed => "not_allowed",
            BlockReason::IpLiteral => "ip_literal",
            BlockReason::NotTls => "not_tls",
            BlockReason::BadRequest => "bad_request",
            BlockReason::Limit => "limit",
            BlockReason::Denied => "denied",
            BlockReason::HostRefused => "host_refused",
            BlockReason::Credential => "credential",
            BlockReason::Unknown => "unknown",
        }
    }
}

/// `blocked`: the connections the proxy refused for one host, port and reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Blocked {
    /// The host the call tried to reach, as the proxy saw it.
    pub host: String,
    /// The port it asked for.
    pub port: u16,
    /// Why the proxy refused it.
    pub reason: BlockReason,
    /// 1 when absent; sent only when it is not 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
}

/// `credentials_used`: the requests in which the credential broker put one credential's
/// secret in place of its placeholder, per host, method and path. Never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CredentialUse {
    /// The credential's name (`credential=NAME`).
    pub name: String,
    /// The host the secret was sent to.
    pub host: String,
    /// The request's method.
    pub method: String,
    /// The request's path, without its query string.
    pub path: String,
    /// 1 when absent; sent only when it is not 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
}

/// `bus_refused`: what the bus filter refused for one name, member and path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BusRefused {
    /// The bus the filter stands in front of.
    pub bus: Bus,
    /// The bus name the refused call was sent to (`(no dest)` when it named none); at most
    /// 255 bytes.
    pub name: String,
    /// The interface and member called, such as `org.example.Iface.Ping`; absent when the
    /// log names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// The object path called; absent when the log names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// 1 when absent.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// Set when the filter cut the name's rule rather than a message: why (its connection
    /// also owns a never name; when the filter started, or during the call, when the filter
    /// was then ended). `member` and `path` are absent then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

/// `index_flag`: an index flag that makes git take a tracked file as unchanged, so that
/// `git status` and `git diff` do not show its changes. A reader takes a flag it does not
/// know as `unknown`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IndexFlag {
    /// `git update-index --skip-worktree` (also what sparse checkout sets).
    SkipWorktree,
    /// `git update-index --assume-unchanged`.
    AssumeUnchanged,
    /// A flag this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}

impl IndexFlag {
    /// Every flag, in wire order.
    pub const ALL: [IndexFlag; 3] = [
        IndexFlag::SkipWorktree,
        IndexFlag::AssumeUnchanged,
        IndexFlag::Unknown,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexFlag::SkipWorktree => "skip_worktree",
            IndexFlag::AssumeUnchanged => "assume_unchanged",
            IndexFlag::Unknown => "unknown",
        }
    }
}

/// `index_flags`: a file of a repository's index that gained an [`IndexFlag`] during the
/// call (review evasion: `git status` would not show its changes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IndexFlagSet {
    /// The repository: the top of its work tree.
    pub repo: String,
    /// The file, as the index names it (relative to `repo`).
    pub path: String,
    /// The flag it gained.
    pub flag: IndexFlag,
    /// The flag was taken off again after the call: `git status` shows the file's changes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub undone: bool,
    /// Why the flag was left set, when it was (sparse checkout set it, git could not
    /// write the index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// `sandbox_summary`: what the sandbox saw of one call. Every member is absent when
/// empty, false or zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxSummary {
    /// The call ran with a proxy plan.
    #[serde(default, skip_serializing_if = "is_false")]
    pub proxied: bool,
    /// At most 32 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<Blocked>,
    /// The refusals `blocked` leaves out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub blocked_more: u32,
    /// The connections a `tcp` host grant relayed to the host's loopback port (each reached
    /// the host's server).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tcp_relayed: u32,
    /// At most 16 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bus_refused: Vec<BusRefused>,
    /// The refused messages `bus_refused` leaves out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bus_refused_more: u32,
    /// The paths the call deleted in real caches: held, not applied (each is also an exit
    /// of source `cache_delete`); at most 32 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_deletes: Vec<String>,
    /// The held deletes `cache_deletes` leaves out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_deletes_more: u32,
    /// What the merge of the call's cache layers refused or could not do, one line each
    /// (the path and why: a link, a device, a setuid bit, content that does not verify, a
    /// full disk that kept the layer), and the caches left read-only for the call because
    /// their layer could not be made (a full disk: `PATH: read-only in this call: why`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_refused: Vec<String>,
    /// Paths whose writes the sandbox refused while the call ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_writes: Vec<String>,
    /// Writes the sandbox let through that the host's own file systems refused, one line
    /// each (`OP PATH: WHY`: a read-only mount of the host, a full disk, a file's own
    /// mode). No grant changes them, so they are neither `denied_writes` nor exit records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_refused: Vec<String>,
    /// Git code the call left where the view could not protect it (a hook or a
    /// program-running config key in a repository it made, or one below the launch walk),
    /// taken out of git's way after the call: one line each, what and where it went.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<String>,
    /// Files of the repositories the call started with whose index entry gained
    /// `skip-worktree` or `assume-unchanged` during the call (hidden from `git status`);
    /// each is undone unless `kept` says why not. At most 32 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index_flags: Vec<IndexFlagSet>,
    /// The entries `index_flags` leaves out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub index_flags_more: u32,
    /// Repositories whose index could not be compared with the one the call started with,
    /// one line each (the repository and why: too large, unreadable, rewritten in place).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index_unchecked: Vec<String>,
    /// The call's own file systems (`/tmp`, `/dev/shm`) that were full while it ran: a
    /// write there failed for want of space (their sizes are `sandbox.tmp_size` and
    /// `sandbox.shm_size`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub full_tmpfs: Vec<String>,
    /// Protected files (a repository's config, a hook, a floor) that had more than one
    /// hard link when the call started: a second name, made before the file was protected,
    /// would write it, so writes through any of its names were refused. Remove the other
    /// names (`find -samefile PATH`) to end it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linked_protected: Vec<String>,
    /// Floor files of the home that the call changed, made or removed (an unsandboxed
    /// call, or a `write` grant that reaches a floor), each with the backup of what it held
    /// before; at most 16 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub home_file_changed: Vec<crate::HomeFileChanged>,
    /// The changed floor files `home_file_changed` leaves out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub home_file_changed_more: u32,
    /// Programs of an approved exit's descendants that efr could not end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<String>,
    /// The names of the variables of the caller's environment (or given for the call) that
    /// the config's `[environment]` would keep but that were not passed because their value
    /// (or, for one given for the call, their name) looks like a secret. Names only, never
    /// values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_dropped: Vec<String>,
    /// Why the sandbox could not start, one line; the command did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_error: Option<String>,
    /// Each credential the broker sent for the call: name, host, method, path and count
    /// (at most 32 entries; further ones are counted in `credentials_used_more`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials_used: Vec<CredentialUse>,
    /// The uses `credentials_used` leaves out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub credentials_used_more: u32,
}

/// A finish: the `end` of `sandbox.launch`, the result of `sandbox.finish`, and what
/// `efr-sandbox run --json` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Finish {
    /// What the sandbox saw of the call.
    pub sandbox_summary: SandboxSummary,
    /// The exit records of the call's refusals (a refused write: source `denial`; a
    /// refused host: source `host`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exits: Vec<crate::ExitRecord>,
    /// The line's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// The signal that ended the line, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The shell-style status: the code, 128+N for a signal, 125 for a setup error.
    pub exit_status: i32,
    /// How long the call took, in milliseconds.
    pub duration_ms: u64,
    /// The pending approvals the service made of the refused exit records (`sandbox.run`
    /// only); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<crate::approval::ApprovalRef>,
}
