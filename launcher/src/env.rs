//! The scrubbed environment of a line: an allow-list of ordinary variables, minus anything
//! that looks like a secret, agent socket or desktop/bus address unless a grant asks for it.

use efr_sandbox_wire::Grant;

use crate::plan::Plan;

/// Names kept as they are.
const KEEP: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "SHELL",
    "TZ",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "LESS",
    "MANPAGER",
    "HOSTNAME",
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "FORCE_COLOR",
    "TERM_PROGRAM",
    "TERMINFO",
    "TERMINFO_DIRS",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "GOPATH",
    "GOROOT",
    "GOFLAGS",
    "GOCACHE",
    "GOMODCACHE",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYENV_ROOT",
    "NVM_DIR",
    "NODE_PATH",
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
    "MAKEFLAGS",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    "MAIL",
    "SHLVL",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CONDA_PREFIX",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "RUST_BACKTRACE",
    "RUST_LOG",
];

/// Prefixes kept.
const KEEP_PREFIX: &[&str] = &["LC_"];

/// Variables a `desktop` grant keeps.
const DESKTOP_VARS: &[&str] = &[
    "WAYLAND_DISPLAY",
    "DISPLAY",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "SWAYSOCK",
    "I3SOCK",
    "NIRI_SOCKET",
    "XDG_SESSION_TYPE",
    "XDG_CURRENT_DESKTOP",
];

/// Whether a name looks like a secret (matched case-insensitively). These are dropped even
/// when allow-listed or named by `env_keep`.
pub fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_TOKEN")
        || n.contains("TOKEN")
        || n.ends_with("_API_KEY")
        || n.contains("APIKEY")
        || n.contains("_KEY_")
        || n.ends_with("_KEY")
        || n.contains("SECRET")
        || n.contains("PASSWORD")
        || n.contains("PASSWD")
        || n.contains("CREDENTIAL")
        || n.starts_with("AWS_")
        || n.starts_with("AZURE_")
        || n.starts_with("GOOGLE_APPLICATION")
        || n == "SSH_AUTH_SOCK"
        || n == "SSH_AGENT_PID"
        || n == "GPG_AGENT_INFO"
        || n.starts_with("DBUS_")
        || n == "WAYLAND_DISPLAY"
        || n == "DISPLAY"
        || n == "XAUTHORITY"
        || n == "XDG_RUNTIME_DIR"
}

/// The environment of the line, as `NAME=value` strings.
pub fn scrub(plan: &Plan, inherited: &[(String, String)]) -> Vec<String> {
    let desktop = plan
        .grants
        .iter()
        .any(|g| matches!(g, Grant::Desktop { .. }));
    let bus_session = plan.grants.iter().any(|g| {
        matches!(
            g,
            Grant::Bus {
                bus: efr_sandbox_wire::Bus::Session
            }
        )
    });
    let bus_system = plan.grants.iter().any(|g| {
        matches!(
            g,
            Grant::Bus {
                bus: efr_sandbox_wire::Bus::System
            }
        )
    });
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in inherited {
        let granted = (desktop && DESKTOP_VARS.contains(&k.as_str()))
            || (bus_session && (k == "DBUS_SESSION_BUS_ADDRESS" || k == "XDG_RUNTIME_DIR"))
            || (bus_system && k == "DBUS_SYSTEM_BUS_ADDRESS");
        let listed = KEEP.contains(&k.as_str())
            || KEEP_PREFIX.iter().any(|p| k.starts_with(p))
            || plan.env_keep.iter().any(|x| x == k);
        if granted || (listed && !looks_secret(k)) {
            out.push((k.clone(), v.clone()));
        }
    }
    for e in &plan.env_set {
        out.retain(|(k, _)| *k != e.name);
        out.push((e.name.clone(), e.value.clone()));
    }
    if let Some(p) = &plan.proxy {
        for (k, v) in proxy_vars(p.relay_port) {
            out.retain(|(n, _)| *n != k);
            out.push((k.to_string(), v));
        }
    }
    if let Some(h) = &plan.home {
        if !out.iter().any(|(k, _)| k == "HOME") {
            out.push(("HOME".into(), h.clone()));
        }
    }
    if !out.iter().any(|(k, _)| k == "PATH") {
        out.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    if let Some(s) = &plan.scratch {
        if !out.iter().any(|(k, _)| k == "SCRATCH") {
            out.push(("SCRATCH".into(), s.clone()));
        }
    }
    out.retain(|(k, _)| k != "PWD" && k != "OLDPWD" && k != "TMPDIR");
    out.push(("PWD".into(), plan.cwd.clone()));
    if plan.tmp.is_some() && plan.mode == crate::plan::PlanMode::Contained {
        out.push(("TMPDIR".into(), "/tmp".into()));
    }
    out.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The launcher's own environment (or the plan's), as pairs.
pub fn source(plan: &Plan) -> Vec<(String, String)> {
    match &plan.env {
        Some(v) => v
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        None => std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
    }
}

/// Loopback names the proxy variables leave alone (`NO_PROXY`): the call's own local
/// servers keep working; every other name, the synthetic addresses' included, goes through
/// the proxy.
pub const NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// The variables of a call with a proxy whose relay listens on `127.0.0.1:port`: the
/// common proxy variables (and lower-case twins), `NO_PROXY`, and the package managers' own
/// where they do not read those (npm, yarn, pip, cargo; git, go, curl, wget, python and
/// node's undici read the common ones).
pub fn proxy_vars(port: u16) -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut v: Vec<(&'static str, String)> = [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "PIP_PROXY",
        "CARGO_HTTP_PROXY",
    ]
    .into_iter()
    .map(|k| (k, url.clone()))
    .collect();
    v.push(("NO_PROXY", NO_PROXY.into()));
    v.push(("no_proxy", NO_PROXY.into()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_dropped_ordinary_kept() {
        let plan = Plan::contained("true", "/");
        let inh: Vec<(String, String)> = [
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "x"),
            ("OPENAI_API_KEY", "x"),
            ("AWS_ACCESS_KEY_ID", "x"),
            ("SSH_AUTH_SOCK", "/s"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/b"),
            ("WAYLAND_DISPLAY", "w"),
            ("LC_ALL", "C"),
            ("MY_PASSWORD", "x"),
            ("RANDOM_THING", "x"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let env = scrub(&plan, &inh);
        assert!(env.contains(&"PATH=/bin".to_string()));
        assert!(env.contains(&"LC_ALL=C".to_string()));
        for bad in [
            "GITHUB", "OPENAI", "AWS", "SSH_AUTH", "DBUS", "WAYLAND", "PASSWORD", "RANDOM",
        ] {
            assert!(!env.iter().any(|e| e.contains(bad)), "{bad} kept: {env:?}");
        }
    }

    #[test]
    fn desktop_grant_keeps_display() {
        let mut plan = Plan::contained("true", "/");
        plan.grants.push(Grant::Desktop {
            desktop: efr_sandbox_wire::Desktop::Wayland,
        });
        let env = scrub(&plan, &[("WAYLAND_DISPLAY".into(), "wayland-0".into())]);
        assert!(env.contains(&"WAYLAND_DISPLAY=wayland-0".to_string()));
    }
}
