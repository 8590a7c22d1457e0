//! The probe of the efr sandbox (design section 9): self-tests of every layer, run from the
//! inside of real contained calls, and the `sandbox_check` / `sandbox_status` they give.
//!
//! - [`inside`]: the tests the probe program runs inside a call (`efr-probe inside ...`,
//!   or `efr-sandbox __probe inside ...`), reported as JSON on stdout;
//! - [`check`]: runs the probe through the launcher on each backend and the network view,
//!   explains known failures with [`host`], and builds the wire `SandboxCheck`;
//! - [`testhost`]: the loopback TLS test host of the `proxy` check;
//! - [`bus`]: the bus filter's self-test (the check's `bus_proxy`), a call on a private bus;
//! - [`sys`]: the safe wrappers of every system call the modules above make.
//!
//! docs/probe.md lists each check, what it proves, and what a failure means.

#![warn(missing_docs)]
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

pub mod bus;
pub mod check;
pub mod host;
pub mod inside;
pub mod sys;
pub mod testhost;

/// The milliseconds since `t`, saturating (`u64::MAX` milliseconds are 584 million years).
pub(crate) fn elapsed_ms(t: std::time::Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}
