//! RPC frames and the small method types of the service.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::status::{SandboxPaths, SandboxStatus};

/// Method names.
pub mod method {
    /// The first request of a connection: agrees on the protocol version.
    pub const HELLO: &str = "hello";
    /// The sandbox's status from its last self-check, and the service's paths.
    pub const STATUS: &str = "sandbox.status";
    /// What a contained call gets at one path, and which rule says so.
    pub const EXPLAIN: &str = "sandbox.explain";
    /// Runs every self-test now and answers the `sandbox_check`.
    pub const CHECK: &str = "admin.sandbox_check";
    /// A shell line's launch and exit records.
    pub const CLASSIFY: &str = "sandbox.classify";
    /// Runs a call: a stream of its items, ended by a finish.
    pub const LAUNCH: &str = "sandbox.launch";
    /// Runs a call of `efr-sandbox run` with the caller's stdio (fds sent with the request).
    pub const RUN: &str = "sandbox.run";
    /// Plans a call for efrd to run itself (on its own terminal).
    pub const PLAN: &str = "sandbox.plan";
    /// Ends a planned call from the launcher's status lines.
    pub const FINISH: &str = "sandbox.finish";
    /// Scans what a contained call could read that looks like a secret.
    pub const SURFACE: &str = "sandbox.surface";
    /// Records the user's answer to a question of the surface.
    pub const SURFACE_RESPOND: &str = "sandbox.surface_respond";
    /// Writes a floor file the user approved a write to.
    pub const FLOOR_WRITE: &str = "sandbox.floor_write";
    /// Saves an "allow always" rule in the user's config file.
    pub const ALWAYS_SAVE: &str = "sandbox.always_save";
    /// Applies held cache deletes the user approved.
    pub const CACHE_DELETE_APPLY: &str = "sandbox.cache_delete_apply";
    /// Lists the background jobs, newest first.
    pub const JOBS: &str = "sandbox.jobs";
    /// Stops one job.
    pub const JOB_STOP: &str = "sandbox.job_stop";
    /// Streams a job's output from an offset.
    pub const JOB_OUTPUT: &str = "sandbox.job_output";
    /// Streams a conversation's job events.
    pub const JOB_EVENTS: &str = "sandbox.job_events";
    /// Turns a running contained call into a job.
    pub const CALL_BACKGROUND: &str = "sandbox.call_background";
    /// Lists the pending approvals of the CLI routes' refused calls (the service's own uid
    /// only).
    pub const APPROVALS: &str = "sandbox.approvals";
    /// Approves or denies a pending approval (the service's own uid only).
    pub const APPROVAL_DECIDE: &str = "sandbox.approval_decide";
    /// Records a call the CLI ran itself as a pending approval (the service's own uid only).
    pub const APPROVAL_RECORD: &str = "sandbox.approval_record";
    /// A conversation's standing grants, for a call the CLI runs itself (the service's own
    /// uid only).
    pub const STANDING_GRANTS: &str = "sandbox.standing_grants";
}

/// A frame from the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ClientFrame {
    /// Ends the request with this id.
    Cancel {
        /// The id of the request to end.
        cancel: u64,
    },
    /// Calls a method.
    Request {
        /// Chosen by the client; the service's answers carry it.
        id: u64,
        /// The method's name, such as `sandbox.launch`.
        method: String,
        /// The method's params: an object, or null when absent.
        #[serde(default)]
        params: Value,
    },
}

/// The efr error names the service answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The frame, the method or its params are not valid.
    Invalid,
    /// What the request names does not exist (an unknown or finished token, an unknown
    /// question id).
    NotFound,
    /// The request clashes with the connection's state (a second `hello`, the id of a
    /// request still running).
    Conflict,
    /// Too many connections or running requests; try later.
    Busy,
    /// The caller may not do this (efr's name; no method of this service answers it yet).
    Forbidden,
    /// A method before a good `hello`.
    Unauthorized,
    /// The two sides speak different protocol versions.
    ProtocolMismatch,
    /// The client cancelled the request.
    Cancelled,
    /// The service failed; the message says where.
    Internal,
    /// A code this reader does not know (a newer service's).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// Every code, in wire order.
    pub const ALL: [ErrorCode; 10] = [
        ErrorCode::Invalid,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::Busy,
        ErrorCode::Forbidden,
        ErrorCode::Unauthorized,
        ErrorCode::ProtocolMismatch,
        ErrorCode::Cancelled,
        ErrorCode::Internal,
        ErrorCode::Unknown,
    ];
}

/// The body of an error frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// The kind of failure, by efr's name.
    pub code: ErrorCode,
    /// Lower case, says what failed.
    pub message: String,
    /// More about the failure, such as `{client, service}` for `protocol_mismatch`; absent
    /// when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorBody {
    /// An error with a message and no data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A frame from the service. `id` is null only for an error about a frame whose id could
/// not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ServerFrame {
    /// One item of a stream.
    Item {
        /// The request's id.
        id: u64,
        /// The item, as the method's stream defines it.
        item: Value,
    },
    /// The request ended: the result of a unary method, the last word of a stream.
    End {
        /// The request's id.
        id: u64,
        /// The method's result, or the stream's last word.
        end: Value,
    },
    /// The request failed and ended.
    Error {
        /// The request's id; null when the frame's id could not be read.
        id: Option<u64>,
        /// What failed.
        error: ErrorBody,
    },
}

/// Params of `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HelloParams {
    /// The client's [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION).
    pub protocol: u32,
    /// Who calls, for the log (such as `efrd 0.0.6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// Result of `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HelloResult {
    /// The service's [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION).
    pub protocol: u32,
    /// `efr-sandbox`.
    pub server: String,
    /// The service's version.
    pub version: String,
    /// The methods this service answers.
    pub methods: Vec<String>,
}

/// Result of `sandbox.status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StatusResult {
    /// The sandbox's status, as its last self-check found it.
    pub status: SandboxStatus,
    /// The socket, runtime dir, scratch root and config file the service uses.
    pub paths: SandboxPaths,
}

/// Params of `sandbox.cache_delete_apply`: held cache deletes (paths of a finish's
/// `cache_deletes`, or of its `cache_delete` exits) the user approved. An unknown path, or
/// one whose file changed since the call deleted it (stale), is `invalid` and nothing is
/// applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheDeleteApplyParams {
    /// The held deletes to apply, as the finish named them.
    pub paths: Vec<String>,
}

/// Result of `sandbox.cache_delete_apply`: the paths removed and the bytes of the plain
/// files removed with them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CacheDeleteApplyResult {
    /// The paths removed.
    pub paths: Vec<String>,
    /// The bytes of the plain files removed.
    pub freed_bytes: u64,
}
