//! RPC frames and the small method types of the service.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::status::{SandboxPaths, SandboxStatus};

/// Method names.
pub mod method {
    pub const HELLO: &str = "hello";
    pub const STATUS: &str = "sandbox.status";
    pub const EXPLAIN: &str = "sandbox.explain";
    pub const CHECK: &str = "admin.sandbox_check";
    pub const CLASSIFY: &str = "sandbox.classify";
    pub const LAUNCH: &str = "sandbox.launch";
    pub const PLAN: &str = "sandbox.plan";
    pub const FINISH: &str = "sandbox.finish";
    pub const SURFACE: &str = "sandbox.surface";
    pub const SURFACE_RESPOND: &str = "sandbox.surface_respond";
    pub const FLOOR_WRITE: &str = "sandbox.floor_write";
    pub const ALWAYS_SAVE: &str = "sandbox.always_save";
    pub const CACHE_DELETE_APPLY: &str = "sandbox.cache_delete_apply";
}

/// A frame from the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ClientFrame {
    /// Ends the request with this id.
    Cancel { cancel: u64 },
    /// Calls a method.
    Request {
        id: u64,
        method: String,
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
    NotFound,
    Conflict,
    Busy,
    Forbidden,
    Unauthorized,
    /// The two sides speak different protocol versions.
    ProtocolMismatch,
    /// The client cancelled the request.
    Cancelled,
    /// The service failed; the message says where.
    Internal,
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
    pub code: ErrorCode,
    /// Lower case, says what failed.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorBody {
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
    Item { id: u64, item: Value },
    /// The request ended: the result of a unary method, the last word of a stream.
    End { id: u64, end: Value },
    /// The request failed and ended.
    Error { id: Option<u64>, error: ErrorBody },
}

/// Params of `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HelloParams {
    pub protocol: u32,
    /// Who calls, for the log (such as `efrd 0.0.6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// Result of `hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HelloResult {
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
    pub status: SandboxStatus,
    pub paths: SandboxPaths,
}

/// Params of `sandbox.cache_delete_apply`: held cache deletes (paths of a finish's
/// `cache_deletes`, or of its `cache_delete` exits) the user approved. An unknown path, or
/// one whose file changed since the call deleted it (stale), is `invalid` and nothing is
/// applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheDeleteApplyParams {
    pub paths: Vec<String>,
}

/// Result of `sandbox.cache_delete_apply`: the paths removed and the bytes of the plain
/// files removed with them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CacheDeleteApplyResult {
    pub paths: Vec<String>,
    pub freed_bytes: u64,
}
