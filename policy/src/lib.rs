//! Policy of the efr sandbox.
//!
//! - [`config`]: the built-in defaults (masks, read-only-inside paths, floors, hosts, each
//!   with its reason) with the user's TOML on top, and where each value came from.
//! - [`explain`]: what a contained call gets at any path, and which rule says so.
//! - [`shell`]: a parser that reads a shell line as bash does.
//! - [`classify`]: turns a shell line into exit records.
//! - [`context`]: the config's rules expanded against the environment, which the classifier
//!   and the credential knowledge judge with.
//! - [`tokens`]: the credential knowledge: the hosts a call could hold a token for, and the
//!   settings files shown scrubbed.
//! - [`git`]: the repository reader (git dirs, config files with includes, the keys that
//!   run programs).
//! - [`knowledge`]: the command knowledge (`policy/data/commands.toml`).
//! - [`url`]: hosts (and ports) of URLs and git remotes.
//! - [`control`]: the sandbox's own control plane, which no call sees, reaches or is granted.
//! - [`secrets`]: the one secret detector (the reviewed shapes of `data/secrets.toml`).
//! - [`path`]: canonical paths and the one home expansion ([`path::expand_home`]).
//! - [`credential`] (part of `config`): the `[[credential]]` entries and built-in profiles,
//!   their secrets' sources, placeholders, and the source files every call has masked.
//!
//! The policy reads and judges; it writes nothing of the user's (the service saves an
//! "allow always" rule). Its modules form layers, no two importing each other (the crate's
//! `no_import_circle` test): `path`, `url`, `secrets`, `shell`, `knowledge` and `git` (the
//! repository reader) at the bottom; `config` on them; `context`, `bus` and `control` on
//! `config`; `tokens` (the credential knowledge) on `context`; `classify` and `explain` on
//! top. `agent_hook` stands alone.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod agent_hook;
pub mod bus;
pub mod classify;
pub mod config;
pub mod context;
pub mod control;
pub use config::credential;
pub mod explain;
pub mod git;
pub mod knowledge;
pub mod path;
pub mod secrets;
pub mod shell;
pub mod tokens;
pub mod url;
