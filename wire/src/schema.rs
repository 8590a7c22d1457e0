//! The JSON Schema (draft 2020-12, one root with `$defs`) of every wire type, as
//! `docs/sandbox.schema.json` holds it.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// Builds the schema document.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    macro_rules! add {
        ($($t:ty),* $(,)?) => {{ $( let _ = generator.subschema_for::<$t>(); )* }};
    }
    add!(
        crate::Mode,
        crate::Launch,
        crate::Grant,
        crate::ExitKind,
        crate::ExitSource,
        crate::Needs,
        crate::ExitInfo,
        crate::ExitRecord,
        crate::ModeFallback,
        crate::SandboxStatus,
        crate::SandboxCheck,
        crate::SandboxPaths,
        crate::SandboxSummary,
        crate::Finish,
        crate::Blocked,
        crate::BlockReason,
        crate::BusRefused,
        crate::IndexFlag,
        crate::IndexFlagSet,
        crate::SurfaceChange,
        crate::ReportedFile,
        crate::QuestionId,
        crate::SurfaceParams,
        crate::SurfaceResult,
        crate::SurfaceRespondParams,
        crate::SurfaceRespondResult,
        crate::FloorWriteParams,
        crate::FloorWriteResult,
        crate::AlwaysOutcome,
        crate::ExplainParams,
        crate::ExplainResult,
        crate::rpc::ClientFrame,
        crate::rpc::ServerFrame,
        crate::rpc::HelloParams,
        crate::rpc::HelloResult,
        crate::rpc::StatusResult,
        crate::rpc::CacheDeleteApplyParams,
        crate::rpc::CacheDeleteApplyResult,
        crate::call::CallParams,
        crate::call::PlanParams,
        crate::call::RunParams,
        crate::call::PlanResult,
        crate::call::FinishParams,
        crate::call::LaunchItem,
        crate::StatusLine,
        crate::ClassifyRequest,
        crate::ClassifyResult,
        crate::plan::Plan,
        crate::BackendChoice,
        crate::RunBackend,
        crate::Enforcement,
        crate::job::JobInfo,
        crate::job::JobHandedOff,
        crate::job::JobsParams,
        crate::job::JobsResult,
        crate::job::JobStopParams,
        crate::job::JobStopResult,
        crate::job::JobOutputParams,
        crate::job::JobOutputItem,
        crate::job::JobOutputEnd,
        crate::job::JobEventsParams,
        crate::job::JobEvent,
        crate::job::CallBackgroundParams,
        crate::job::CallBackgroundResult,
        crate::Approval,
        crate::ApprovalStore,
        crate::ApprovalsResult,
        crate::ApprovalDecideParams,
        crate::ApprovalDecideResult,
        crate::ApprovalRecordParams,
        crate::ApprovalRecordResult,
        crate::StandingGrantsParams,
        crate::StandingGrantsResult,
    );
    let defs: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://efr.dev/schemas/sandbox.schema.json",
        "title": "efr sandbox protocol",
        "description": format!("Wire types of the efr sandbox protocol, version {}.", crate::PROTOCOL_VERSION),
        "$defs": defs,
    })
}

/// The document as the file holds it.
pub fn render() -> String {
    crate::fixtures::render(&document())
}
