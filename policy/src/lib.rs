//! Policy of the efr sandbox.
//!
//! - [`config`]: the built-in defaults (masks, read-only-inside paths, floors, hosts, each
//!   with its reason) with the user's TOML on top, and where each value came from.
//! - [`explain`]: what a contained call gets at any path, and which rule says so.
//! - [`shell`]: a parser that reads a shell line as bash does.
//! - [`classify`]: turns a shell line into exit records.
//! - [`control`]: the sandbox's own control plane, which no call sees, reaches or is granted.
//! - [`secrets`]: the one secret detector (the reviewed shapes of `data/secrets.toml`).
//! - [`path`]: canonical paths and the one home expansion ([`path::expand_home`]).

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
pub mod control;
pub mod explain;
pub mod path;
pub mod secrets;
pub mod shell;
