//! Whether this process runs inside a contained call: then `shell` runs bash directly and
//! `run` says the call is contained already, instead of nesting a sandbox.

/// Inside a contained call: the launcher's marker ([`efr_launcher::env::CONTAINED_ENV`])
/// is `1`, and the kernel says this process runs under no_new_privs and a seccomp filter, as
/// every contained line does under both backends. The marker alone only ever removes
/// nesting (whoever sets it inside a call is contained already); the kernel's word keeps a
/// marker that reached a process outside a call (a project's `.envrc`, a user's typo) from
/// turning `shell` into plain bash there.
pub fn inside_call() -> bool {
    let marked = std::env::var_os(efr_launcher::env::CONTAINED_ENV).is_some_and(|v| v == "1");
    marked && std::fs::read_to_string("/proc/self/status").is_ok_and(|s| restricted_status(&s))
}

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
