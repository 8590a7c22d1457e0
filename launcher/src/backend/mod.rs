//! How the call's namespaces come to be: the native backend (clone with user namespaces,
//! the view built by the clone child), bubblewrap (the init execs inside it), and the
//! unsandboxed launch (a cgroup around an ordinary child, still owning its process tree).

pub mod bwrap;
pub mod native;
pub mod unsandboxed;
pub mod warm;

use efr_sandbox_wire::{Backend, BackendChoice};

/// `auto` → native when user namespaces work here, else bwrap when installed, else native
/// (whose setup error then says why).
pub fn resolve(c: BackendChoice) -> Backend {
    match c {
        BackendChoice::Native => Backend::Native,
        BackendChoice::Bwrap => Backend::Bwrap,
        BackendChoice::Auto => {
            let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
                .map(|s| s.trim() != "0")
                .unwrap_or(false)
                && std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
                    .map(|s| s.trim() != "0")
                    .unwrap_or(true)
                && std::fs::read_to_string(
                    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                )
                .map(|s| s.trim() == "0")
                .unwrap_or(true);
            if userns || !bwrap::available() {
                Backend::Native
            } else {
                Backend::Bwrap
            }
        }
    }
}
