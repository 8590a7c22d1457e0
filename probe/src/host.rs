//! Facts of the host that explain a known failure: user namespaces turned off, no Landlock,
//! an old bubblewrap, a seccomp filter already on the service, running as root. Each gives
//! a line the user can act on.

fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Why unprivileged user namespaces do not work here, and what to do; `None` when nothing
/// the probe knows of turns them off.
pub fn userns_blocker() -> Option<String> {
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Some(
            "unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0): run \
             `sysctl kernel.unprivileged_userns_clone=1` (and set it in /etc/sysctl.d), or use \
             backend bwrap if it is setuid"
                .into(),
        );
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Some(
            "user namespaces are off (user.max_user_namespaces=0): run `sysctl \
             user.max_user_namespaces=15000` (and set it in /etc/sysctl.d)"
                .into(),
        );
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Some(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10+): add an AppArmor \
             profile with `userns,` for efr-launch (see docs/probe.md) or run `sysctl \
             kernel.apparmor_restrict_unprivileged_userns=0`"
                .into(),
        );
    }
    None
}

/// Why Landlock is missing, and what to do.
pub fn landlock_missing() -> String {
    let rel = read("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = rel.split(['.', '-']).map(|x| x.parse::<u32>().unwrap_or(0));
    let (maj, min) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    if (maj, min) < (5, 13) {
        return format!(
            "the kernel ({rel}) is older than 5.13 and has no Landlock: upgrade the kernel \
             (6.12 or later gives every layer)"
        );
    }
    match read("/sys/kernel/security/lsm") {
        Some(l) if !l.split(',').any(|x| x == "landlock") => format!(
            "Landlock is built but not enabled (active LSMs: {l}): add `landlock` to the \
             kernel's lsm= boot parameter, e.g. lsm=landlock,{l}"
        ),
        Some(_) => "Landlock is listed but answers no ABI: check the kernel's config".into(),
        None => format!(
            "the kernel ({rel}) answers no Landlock ABI: it is not built in (CONFIG_SECURITY_LANDLOCK) \
             or not in the lsm= boot list; add `landlock` to lsm= or upgrade the kernel"
        ),
    }
}

/// The `Seccomp` mode of the calling process (0 none, 2 filter).
pub fn own_seccomp_mode() -> u32 {
    read("/proc/self/status")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Whether the service runs as root.
pub fn is_root() -> bool {
    crate::sys::geteuid() == 0
}

/// bubblewrap at `path`: its version text when it is new enough, else why not.
pub fn bwrap_ok(path: &str) -> Result<String, String> {
    if !std::path::Path::new(path).exists() {
        return Err(format!(
            "bubblewrap is not installed ({path} is missing): install the `bubblewrap` package, \
             or use backend native"
        ));
    }
    let Some((v, text)) = efr_launcher::backend::bwrap::version(path) else {
        return Err(format!(
            "`{path} --version` gave no version: reinstall bubblewrap, or use backend native"
        ));
    };
    let m = efr_launcher::backend::bwrap::MIN_VERSION;
    if v < m {
        return Err(format!(
            "{text} is older than {}.{}.{} (needed for --disable-userns): upgrade bubblewrap, \
             or use backend native",
            m.0, m.1, m.2
        ));
    }
    Ok(text)
}
