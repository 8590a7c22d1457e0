//! `efr-call`: the one owner of a call of the efr sandbox.
//!
//! - [`call`]: [`Call`], the owner: a call from its params to its finish, and the only
//!   code that spawns `efr-launch` (see its module's page for the steps);
//! - [`launch`]: a call's params checked and its plan built from the config (the only plan
//!   builder of the workspace), the launcher located, the finish folded from the
//!   launcher's status lines; [`denials`]: the exit records of what the sandbox refused;
//! - [`after`]: the after-call effects on the host (the git guard, the cache merge, the
//!   floor watch) behind the one entry point the finish calls;
//! - [`egress`]: the call's egress proxy; [`bus`]: its bus filters; [`caches`]: its cache
//!   layers and their merge; [`git_guard`] and [`git_dirs`]: the git code a call left;
//!   [`index_flags`]: the index flags it set (`skip-worktree`, `assume-unchanged`);
//! - [`standby`]: the service's launcher started ahead of its next call;
//! - [`end`]: what is known of a call's end when its launcher did not say, and the finish
//!   of a call that never ran; [`dirs`]: the crate's private directories;
//! - [`sys`]: every `unsafe` of the crate.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod after;
pub mod broker;
pub mod bus;
pub mod bus_owners;
pub mod bus_relay;
pub mod cache_paths;
pub mod caches;
pub mod call;
pub mod cpu_share;
pub mod denials;
pub mod dirs;
pub mod egress;
pub mod end;
pub mod floor_watch;
pub mod fresh_caches;
pub mod git_dirs;
pub mod git_guard;
pub mod history;
pub mod index_flags;
pub mod launch;
pub mod owner;
pub mod standby;
pub mod sys;

pub use call::{
    Call, CallStream, Ctx, Event, LAUNCHER_LOST, LauncherEnd, Planned, PlannedCall, PrepareError,
    ProxyWhen, SpawnError, Spawned, Stopper, fallback, setup_error_finish,
};
