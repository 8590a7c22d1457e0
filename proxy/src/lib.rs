//! The egress proxy of the efr sandbox (design section 7): one DNS + TLS proxy per
//! contained call that checks every connection against the call's host grants and refuses
//! with a reason.
//!
//! - [`ProxyPolicy`] and its pure [`ProxyPolicy::decide`]: the documented order of checks;
//! - [`Proxy`]: the tokio server of one call (Unix listener; TCP for tests and benchmarks;
//!   the sockets a call's init hands it), its [`Proxy::summary`] and refusal events
//!   ([`Proxy::subscribe`]);
//! - [`dns`]: the DNS answers of the call (synthetic addresses for allowed names);
//! - [`fdpass`] and [`inside`] (re-exported from the `efr-fdpass` crate, which the launcher
//!   uses too): the hand-over of the sockets the launcher's init binds in the call's network
//!   namespace (relay listener, DNS socket, synthetic listeners);
//! - [`run_standalone`]: `efr-sandbox proxy` / the `efr-proxy` binary;
//! - [`splice`]: the zero-copy copy of a tunnel, also the relay of a job's port forward
//!   (`efr_jobs::forward`).
//!
//! docs/proxy.md describes the decision order, the refusal answers, the limits and the DNS path.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod addr;
pub mod broker;
pub mod buslog;
pub mod dns;
pub use efr_fdpass as fdpass;
pub mod head;
pub use efr_fdpass::inside;
pub mod name;
mod pace;
pub mod policy;
pub mod report;
pub mod server;
pub mod splice;
mod standalone;
mod sys;
pub mod tls;

pub use policy::{Decision, HostRule, Kind, Limits, ProxyPolicy};
pub use report::{MAX_BLOCKED, MAX_ENTRIES, Refusal, Report, Special};
pub use server::{ANY_HOST, Proxy, REASON_HEADER, Resolver, Stats, set_process_budget};
pub use splice::Stream;
pub use standalone::{StandaloneArgs, run_standalone};
