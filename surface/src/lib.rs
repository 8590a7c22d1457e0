//! The surface: what a contained call could still read that looks like a secret.
//!
//! Masks are a list, and a list never keeps up with the credential stores of a real home.
//! So the sandbox looks: [`scan()`] walks the places a call can read (the caller says which
//! with a predicate, by the same rules as the launch view), bounded in depth, files, bytes
//! per file and time, and reports each file whose name, first bytes or contents match one of
//! the reviewed [`patterns`] (`patterns.toml`, a reason per entry). It never follows a link,
//! never opens what is not a plain file, and skips build outputs and caches.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod floor;
pub mod patterns;
pub mod questions;
pub mod run;
pub mod scan;
pub mod state;

pub use patterns::{Class, Patterns, PatternsError, shipped};
pub use scan::{Budget, Finding, Partial, Scan, file_hosts, scan};
