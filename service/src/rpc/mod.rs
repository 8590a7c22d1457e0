//! The RPC service (docs/protocol.md): [`server`] (the socket, the peer check, the accept
//! loop), [`conn`] (one connection: frames, hello, requests as tasks, cancel, the writer),
//! [`dispatch`] (the method table), [`handler`] (what a handler gets), and one file per
//! handler. A handler imports [`handler`], [`crate::state`] and the crates below; never
//! another handler, the connection or a command.

pub mod conn;
pub mod dispatch;
pub mod handler;
pub mod server;

pub mod always_save;
pub mod approval_decide;
pub mod approval_record;
pub mod approvals;
pub mod cache_delete_apply;
pub mod call_background;
pub mod check;
pub mod classify;
pub mod debug;
pub mod explain;
pub mod finish;
pub mod floor_write;
pub mod job_events;
pub mod job_output;
pub mod job_stop;
pub mod jobs;
pub mod launch;
pub mod plan;
pub mod run;
pub mod standing_grants;
pub mod status;
pub mod surface;
pub mod surface_respond;
