//! The system calls of jobs that std does not wrap. The pidfd and tokio-registration
//! wrappers are efr-call's (`efr_call::sys`, where a call uses them too); this crate adds
//! no `unsafe` of its own.

pub use efr_call::sys::{async_owned, pidfd_open, pidfd_send_signal};

/// The service's effective uid.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}
