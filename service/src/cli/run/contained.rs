//! Whether this process runs inside a contained call: then `shell` runs bash directly and
//! `run` says the call is contained already, instead of nesting a sandbox.

/// Inside a contained call: the launcher's marker ([`efr_launcher::env::CONTAINED_ENV`])
/// is `1`, and the kernel says this process runs under no_new_privs and a seccomp filter in
/// a user namespace of its own, as every contained line does under both backends (as root
/// too). The marker alone only ever removes nesting (whoever sets it inside a call is
/// contained already); the kernel's word keeps a marker that reached a process outside a
/// call (a project's `.envrc`, a user's typo, an agent that carries a call's `export` to
/// its next call) from turning `shell` into plain bash there, also in a container whose
/// default profile gives no_new_privs and a seccomp filter (those run in the initial user
/// namespace).
pub fn inside_call() -> bool {
    let marked = std::env::var_os(efr_launcher::env::CONTAINED_ENV).is_some_and(|v| v == "1");
    marked
        && std::fs::read_to_string("/proc/self/status").is_ok_and(|s| restricted_status(&s))
        && std::fs::read_link("/proc/self/ns/user").is_ok_and(|l| l.as_os_str() != INITIAL_USER_NS)
}

/// What `/proc/self/ns/user` reads in the initial user namespace: its inode is fixed by the
/// kernel (`PROC_USER_INIT_INO`).
const INITIAL_USER_NS: &str = "user:[4026531837]";

/// `/proc/PID/status` says no_new_privs and a seccomp filter (mode 2).
fn restricted_status(status: &str) -> bool {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    field("NoNewPrivs") == Some("1") && field("Seccomp") == Some("2")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host this test runs on is in the initial user namespace, a call never is.
    #[test]
    fn the_initial_user_namespace_is_known() {
        let here = std::fs::read_link("/proc/self/ns/user").unwrap();
        let own_userns = std::fs::read_to_string("/proc/self/uid_map")
            .is_ok_and(|m| m.split_whitespace().collect::<Vec<_>>() != ["0", "0", "4294967295"]);
        assert_eq!(here.as_os_str() == INITIAL_USER_NS, !own_userns, "{here:?}");
    }

    #[test]
    fn status_fields() {
        let inside = "Name:\tbash\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert!(restricted_status(inside));
        for outside in [
            "NoNewPrivs:\t0\nSeccomp:\t0\n",
            "NoNewPrivs:\t1\nSeccomp:\t0\n",
            "NoNewPrivs:\t0\nSeccomp:\t2\n",
            "Seccomp_filters:\t2\nNoNewPrivs:\t1\n",
            "",
        ] {
            assert!(!restricted_status(outside), "{outside:?}");
        }
    }
}
