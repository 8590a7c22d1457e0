//! Capabilities: the init drops every one before the line runs (the native backend's init
//! is root of the call's user namespace; bubblewrap drops them itself with `--cap-drop
//! ALL`). The order matters: the bounding set first (so nothing can be regained on exec),
//! the ambient set, the securebits locked (root gains none on exec), then the effective,
//! permitted and inheritable sets cleared. Every step's result is checked: a failure fails
//! the launch with a `setup_error` naming the step. The one `unsafe` call (`capset`) is in
//! the crate's `sys`.

use std::io;

use crate::sys;

/// `CAP_SETPCAP` (linux/capability.h; libc does not name it).
pub const CAP_SETPCAP: u32 = 8;

/// The securebits locked: SECBIT_NOROOT | NOROOT_LOCKED | NO_SETUID_FIXUP |
/// NO_SETUID_FIXUP_LOCKED | KEEP_CAPS_LOCKED | NO_CAP_AMBIENT_RAISE |
/// NO_CAP_AMBIENT_RAISE_LOCKED.
const SECUREBITS: libc::c_ulong = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80;

/// Why the capabilities could not be dropped.
#[derive(Debug, thiserror::Error)]
pub enum CapsError {
    /// `PR_CAPBSET_DROP` of one capability.
    #[error("dropping capability {cap} from the bounding set: {source}")]
    Bounding {
        /// The capability's number.
        cap: u64,
        /// What `prctl` said.
        #[source]
        source: io::Error,
    },
    /// `PR_CAP_AMBIENT_CLEAR_ALL`.
    #[error("clearing the ambient capabilities: {0}")]
    Ambient(#[source] io::Error),
    /// `PR_SET_SECUREBITS` (with `CAP_SETPCAP` held, or another error than `EPERM`).
    #[error("locking the securebits: {0}")]
    Securebits(#[source] io::Error),
    /// `capset` of the three sets.
    #[error("clearing the capability sets (capset): {0}")]
    Capset(#[source] io::Error),
}

/// Drops every capability of the calling process (see the module doc).
pub fn drop_all() -> Result<(), CapsError> {
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(40);
    for cap in 0..=last {
        match sys::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0) {
            Ok(_) => {}
            // Not a capability of this kernel.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(source) => return Err(CapsError::Bounding { cap, source }),
        }
    }
    match sys::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    ) {
        Ok(_) => {}
        // A kernel without ambient capabilities (before 4.3) has no ambient set to clear.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        Err(e) => return Err(CapsError::Ambient(e)),
    }
    // Needs CAP_SETPCAP; without it (a non-root user without a user namespace) the bits are
    // moot: such a process gains nothing on exec anyway. Any other failure fails the drop.
    if let Err(e) = sys::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0) {
        let has_setpcap = std::fs::read_to_string("/proc/self/status")
            .map(|s| effective_cap(&s, CAP_SETPCAP))
            .unwrap_or(true);
        if !securebits_failure_is_moot(&e, has_setpcap) {
            return Err(CapsError::Securebits(e));
        }
    }
    sys::capset_clear().map_err(CapsError::Capset)
}

/// Whether the `CapEff:` line of a `/proc/PID/status` text holds capability `cap` (true
/// when the line is missing or unreadable: the caller then treats a failure as real).
pub fn effective_cap(status: &str, cap: u32) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_none_or(|bits| cap < 64 && bits & (1u64 << cap) != 0)
}

/// Whether a failed `PR_SET_SECUREBITS` may be passed over: only `EPERM` of a process that
/// lacks `CAP_SETPCAP` (it gains nothing on exec anyway).
pub fn securebits_failure_is_moot(e: &io::Error, has_setpcap: bool) -> bool {
    e.raw_os_error() == Some(libc::EPERM) && !has_setpcap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_caps_are_read_from_the_status_text() {
        let root = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        let user = "Name:\tx\nCapEff:\t0000000000000000\n";
        let setpcap = CAP_SETPCAP;
        assert!(effective_cap(root, setpcap));
        assert!(!effective_cap(user, setpcap));
        assert!(effective_cap("CapEff:\t0000000000000100\n", setpcap));
        // Unreadable: assumed held, so that a failure counts.
        assert!(effective_cap("Name:\tx\n", setpcap));
        assert!(effective_cap("CapEff:\tzz\n", setpcap));
    }

    #[test]
    fn only_eperm_without_setpcap_passes_over_the_securebits() {
        let eperm = io::Error::from_raw_os_error(libc::EPERM);
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        assert!(securebits_failure_is_moot(&eperm, false));
        assert!(!securebits_failure_is_moot(&eperm, true));
        assert!(!securebits_failure_is_moot(&einval, false));
        assert!(!securebits_failure_is_moot(&einval, true));
    }

    /// In a child process (never in the harness), root of a user namespace of its own as
    /// the call's init is: after the drop, the effective, permitted, bounding and ambient
    /// sets are empty.
    #[test]
    fn the_drop_leaves_no_capability() {
        let pid = sys::fork().expect("fork");
        if pid == 0 {
            if sys::unshare(libc::CLONE_NEWUSER).is_err() {
                sys::exit_now(2);
            }
            let ok = drop_all().is_ok()
                && std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
                    ["CapEff:", "CapPrm:", "CapBnd:", "CapAmb:"]
                        .iter()
                        .all(|k| {
                            s.lines()
                                .find_map(|l| l.strip_prefix(k))
                                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
                                == Some(0)
                        })
                });
            sys::exit_now(if ok { 0 } else { 1 });
        }
        let st = sys::waitpid(pid, 0).expect("waitpid").expect("a status").1;
        if libc::WIFEXITED(st)
            && libc::WEXITSTATUS(st) == 2
            && std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none()
        {
            eprintln!("skipped: no user namespace here");
            return;
        }
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "status {st:#x}"
        );
    }
}
