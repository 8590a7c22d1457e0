//! The launcher of the efr sandbox: the part that holds the privilege. It reads a plan,
//! builds the call's view, starts the line through a backend, restricts it and reports how
//! it ended on a status fd; the `efr-launch` binary runs one shell line contained or
//! unsandboxed.
//!
//! # Modules, by what they do (in the manner of youki's libcontainer)
//!
//! * [`backend`]: how the call's namespaces come to be: [`backend::native`] (clone with
//!   user namespaces), [`backend::bwrap`] (bubblewrap), [`backend::unsandboxed`] (a cgroup
//!   around an ordinary child).
//! * [`child`]: what runs inside the call: [`child::init`] (pid 1 of the call: forks the
//!   line, reaps, forwards signals; and the line's process up to its exec),
//!   [`child::egress`] (the proxy's sockets bound in the call's network namespace) and
//!   [`child::report`] (the one codec of what the call's processes tell the launcher).
//! * [`restrict`]: what the line may do: [`restrict::lockdown`] (Landlock) and
//!   [`restrict::seccomp`] (the filter's reviewed tables); capabilities and no_new_privs
//!   are dropped by the init through `sys`.
//! * [`view`]: what the line sees: the mount view built from the plan, the masks and
//!   excludes, the compact hand-off of the view to the backend ([`view::handoff`]).
//! * [`supervise`]: the init's supervisor of the line's writes (seccomp user notification).
//! * [`pty`]: the call's own terminal, relayed by the launcher.
//! * [`run`]: the launcher's process (one call, in named steps); [`standby`]: a launcher
//!   started ahead of its call, its init waiting in fresh namespaces
//!   ([`backend::warm`]); [`signals`]: the signal tables (forwarded, ignored, the one
//!   that ends a call), a leaf that `run`, `child::init` and the backends read;
//!   [`ns_sockets`]: the socket maker of a job's network namespace (for its port
//!   forwards); [`cli`]: `efr-launch`'s command line; [`caller`]: the launch ends with its
//!   caller; [`join_cgroup`]: the job's cgroups, joined before anything is made;
//!   [`exit_code`]: the launcher's own exit statuses.
//! * [`plan`] (the plan JSON, the wire from the service), [`status`] (the status lines,
//!   the wire back), [`mod@env`] (the line's environment), [`api`] (the library API below).
//! * [`setup`]: the one error of the call's setup inside its namespaces
//!   ([`setup::SetupError`]: every variant names the operation and the path).
//! * `sys`: every `unsafe` of the crate, each block with its `SAFETY` comment.
//!
//! Each module has one path: `efr_launcher::backend::bwrap`, `efr_launcher::child::report`
//! and so on (no flat re-export gives a module a second name).
//!
//! # Library API (for the service and the CLI)
//!
//! * [`plan::Plan`]: the wire's one plan shape, built by efr-call from a call's params and
//!   the policy's view, its paths absolute (the launcher expands no `~`).
//! * [`api`]: the client side, a leaf of the crate (it imports only `sys` and `status`).
//! * [`api::Launcher`]: finds `efr-launch` and either gives the command line for a call
//!   efrd runs itself ([`api::Launcher::command`], for `sandbox.plan`) or spawns it
//!   ([`api::Launcher::spawn`] → [`api::Running`]; started by `posix_spawn`, not a fork of
//!   the caller, see [`api::spawned`]; its status pipe yields
//!   [`status::StatusLine`]s and whose [`api::Running::wait`] folds them into a
//!   [`status::Outcome`] with [`status::Outcome::summary`] giving the `sandbox_summary`).
//! * [`status::Outcome::from_lines`]: folds status lines a caller collected itself (for
//!   `sandbox.finish`).
//! * [`backend::resolve`]: `auto` → native when user namespaces work, else bwrap.
//!
//! # efr-launch
//!
//! `efr-launch (--plan FILE | --plan-fd N) [--status-fd N] [--caller-pid PID] [--join-cgroup-fd N]...`:
//! the cgroups named by `--join-cgroup-fd` are joined first ([`join_cgroup`]); status lines are JSON
//! ([`status::StatusLine`]): `started`, `setup_error` (exit status 125, the line did not
//! run), `exited` (code or signal, duration, denials, survivors). The launcher's exit status
//! is the line's (128+N for a signal). The launch ends with the process that started it
//! (its parent; `--caller-pid` names it, see [`caller`]): when that process dies, by any
//! signal, the launcher kills the whole call.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod api;
pub mod backend;
pub mod caller;
pub mod child;
pub mod cli;
pub mod env;
pub mod exit_code;
pub mod join_cgroup;
pub mod ns_sockets;
pub mod plan;
pub mod pty;
pub mod restrict;
pub mod run;
pub mod setup;
pub mod signals;
pub mod standby;
pub mod status;
pub mod supervise;
mod sys;
pub mod view;
