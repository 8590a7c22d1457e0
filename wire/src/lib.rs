//! Wire types of the efr sandbox protocol.
//!
//! Every type that crosses a process boundary between efrd, the sandbox service, the
//! launcher and the probe lives here: launches and grants, exit records, summaries, the
//! sandbox status, the RPC frames and their codec. The names follow efr's protocol page.
//! `fixtures` holds the frozen example of every type (written to `fixtures/v1/` and compared
//! byte for byte by the tests) and `schema` the JSON Schema of all of them.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod always;
pub mod approval;
pub mod backend;
pub mod call;
pub mod classify;
pub mod envfilter;
pub mod exit;
pub mod explain;
pub mod fixtures;
pub mod frame;
pub mod gitconfig;
pub mod gitenv;
pub mod grant_text;
pub mod job;
pub mod launch;
pub mod launcher_status;
pub mod mode;
pub mod pattern;
pub mod plan;
pub mod rpc;
pub mod schema;
mod serde_util;
pub mod size;
pub mod status;
pub mod summary;
pub mod surface;

pub use always::{AlwaysOutcome, NotSavedReason};
pub use approval::{
    Approval, ApprovalDecideParams, ApprovalDecideResult, ApprovalDecision, ApprovalRecordParams,
    ApprovalRecordResult, ApprovalRef, ApprovalStore, ApprovalsResult, StandingGrants,
    StandingGrantsParams, StandingGrantsResult,
};
pub use backend::{BackendChoice, RunBackend};
pub use call::{
    CallParams, FinishParams, LaunchItem, OutputData, OutputStream, PlanParams, PlanResult,
    RunParams, Started,
};
pub use classify::{ClassifyRequest, ClassifyResult};
pub use exit::{
    Action, Edit, ExitInfo, ExitKind, ExitRecord, ExitSource, Facts, GitCode, GitCodeItem,
    HostFact, JudgedBy, Judgement, Needs, Target, TargetClass, TargetOp, Verdict,
};
pub use explain::{Access, ExplainParams, ExplainResult, FileKind, GrantHint, LinkInfo, RuleHit};
pub use launch::{Bus, Desktop, Grant, Launch, PathReach};
pub use launcher_status::{CgroupKind, Enforcement, GitDenial, LandlockReport, StatusLine};
pub use mode::Mode;
pub use plan::{
    CacheFile, CacheLayer, EnvVar, NetMode, Plan, PlanMode, ProxyPlan, ScrubbedFile, TestWeaken,
};
pub use status::{
    Backend, BusProxyOff, CheckOutcome, CheckTest, ModeFallback, SandboxCheck, SandboxPaths,
    SandboxStatus, SelfTest,
};
pub use summary::{
    BlockReason, Blocked, BusRefused, Finish, IndexFlag, IndexFlagSet, SandboxSummary,
};
pub use surface::{
    FloorWriteParams, FloorWriteResult, HomeFileChanged, QuestionId, ReportedFile, SurfaceChange,
    SurfaceChangeKind, SurfaceParams, SurfacePartial, SurfaceRespondParams, SurfaceRespondResult,
    SurfaceResult,
};

/// The version both sides send in `hello`. Additive changes do not bump it.
pub const PROTOCOL_VERSION: u32 = 1;

/// The host name of every contained call (its own UTS namespace); its DNS lookup is the
/// call's own name, not a host.
pub const CALL_HOSTNAME: &str = "efr-sandbox";
