//! `efr-jobs`: the background jobs of the efr sandbox service, apart from the RPC that
//! asks for them.
//!
//! - [`cgroup`]: the cgroups of jobs: found once, made per job with its limits, joined by
//!   the launcher (through `cgroup.procs` fds that efr-call hands it as plain fds), read for
//!   usage, removed with nothing left;
//! - [`forward`]: the port forwards of a background job, host loopback to the job's;
//! - [`registry`]: the service's jobs ([`Jobs`]): each [`Job`] started from a running call
//!   of efr-call, the task that owns it to its end (output, watch, time limit, cgroup,
//!   forwards, the after-call checks while it lives), their events and the record a next
//!   service reads;
//! - [`sys`]: the system calls it needs (efr-call's pidfd and tokio wrappers; no `unsafe` here).

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod cgroup;
pub mod forward;
pub mod registry;
pub mod sys;

pub use registry::{
    CallGuard, FindError, Hooks, Job, JobSpec, Jobs, MinutesError, MoveError, MoveRequest,
    RoomError, WatchError, now_ms,
};
