//! The launcher of the efr sandbox: the plan it reads, the native and bubblewrap backends,
//! mounts, Landlock and seccomp, and the `efr-launch` binary that runs one shell line
//! contained or unsandboxed and reports on a status fd.
//!
//! # Library API (for the service and the CLI)
//!
//! * [`api::LaunchRequest`] → [`api::build_plan`] → [`plan::Plan`]: the plan of one call
//!   (project roots, cwd, grants, scratch and tmp dirs, backend) with the default
//!   read-only-inside paths, floors and masks filled in.
//! * [`api::Launcher`]: finds `efr-launch` and either gives the command line for a call
//!   efrd runs itself ([`api::Launcher::command`], for `sandbox.plan`) or spawns it
//!   ([`api::Launcher::spawn`] → [`api::Running`], whose status pipe yields
//!   [`status::StatusLine`]s and whose [`api::Running::wait`] folds them into a
//!   [`status::Outcome`] with [`status::Outcome::summary`] giving the `sandbox_summary`).
//! * [`status::Outcome::from_lines`]: folds status lines a caller collected itself (for
//!   `sandbox.finish`).
//! * [`api::resolve_backend`]: `auto` → native when user namespaces work, else bwrap.
//!
//! # efr-launch
//!
//! `efr-launch (--plan FILE | --plan-fd N) [--status-fd N] [--caller-pid PID]`: status lines are JSON
//! ([`status::StatusLine`]): `started`, `setup_error` (exit status 125, the line did not
//! run), `exited` (code or signal, duration, denials, survivors). The launcher's exit status
//! is the line's (128+N for a signal). The launch ends with the process that started it
//! (its parent; `--caller-pid` names it, see [`caller`]): when that process dies, by any
//! signal, the launcher kills the whole call.

pub mod api;
pub mod bwrap;
pub mod caller;
pub mod cli;
pub mod egress;
pub mod env;
pub mod exit_code;
pub mod handoff;
pub mod inner;
mod listing;
pub mod lockdown;
pub mod native;
pub mod plan;
pub mod pty;
pub mod report;
pub mod run;
pub mod seccomp;
pub mod status;
pub mod supervise;
mod sys;
pub mod unsandboxed;
pub mod view;
