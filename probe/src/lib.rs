//! The probe of the efr sandbox (design section 9): self-tests of every layer, run from the
//! inside of real contained calls, and the `sandbox_check` / `sandbox_status` they give.
//!
//! - [`inside`]: the tests the probe program runs inside a call (`efr-probe inside ...`,
//!   or `efr-sandbox __probe inside ...`), reported as JSON on stdout;
//! - [`check`]: runs the probe through the launcher on each backend and the network view,
//!   explains known failures with [`host`], and builds the wire `SandboxCheck`;
//! - [`testhost`]: the loopback TLS test host of the `proxy` check;
//! - [`sys`]: the safe wrappers of every system call the modules above make.
//!
//! docs/probe.md lists each check, what it proves, and what a failure means.

pub mod check;
pub mod host;
pub mod inside;
pub mod sys;
pub mod testhost;
