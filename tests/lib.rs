//! Helpers shared by the cross-crate integration tests in this directory.

pub mod common;
