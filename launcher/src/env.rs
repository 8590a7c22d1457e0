//! The scrubbed environment of a line: the variables the plan's `env_policy` keeps (the
//! config's `[environment]`, `policy/defaults.toml`), minus the names its `drop` refuses
//! (secrets, agent sockets, desktop and bus addresses, unless a grant asks for them) and the
//! values that look like a secret (dropped and reported, see [`scrub_report`]). A plan
//! without a policy keeps [`FALLBACK_KEEP`] only.

use efr_sandbox_wire::Grant;
use efr_sandbox_wire::envfilter::glob_matches;

use crate::plan::Plan;

/// What a plan without an `env_policy` (an older service, or a plan written by hand) keeps:
/// a few ordinary names that carry no secret, each with why. The list of a current plan is
/// the config's `[environment] keep` (`policy/defaults.toml`, the one reviewed place, with a
/// reason each); every name here is one of its entries (the consistency test
/// `tests/consistency.rs` checks it), so the fallback only ever keeps less.
pub const FALLBACK_KEEP: &[(&str, &str)] = &[
    ("PATH", "where programs are found"),
    ("HOME", "the home directory"),
    ("USER", "the user's name"),
    ("LOGNAME", "the user's name"),
    ("SHELL", "the user's shell"),
    ("TERM", "the terminal type: programs need it to draw"),
    ("LANG", "the locale"),
    ("LANGUAGE", "the languages of messages"),
    ("LC_*", "the locale's parts"),
    ("TZ", "the time zone"),
];

/// The variable every contained line gets, set to `1`: it is inside a call. It can only
/// ever remove nesting (`efr-sandbox shell` runs bash directly under it, a nested
/// `efr-sandbox run` says the call is already contained): whoever sets it is already
/// contained. Taken from what a line inherits, so an unsandboxed line never has it.
pub const CONTAINED_ENV: &str = "EFR_SANDBOX_CONTAINED";

/// Which grant keeps a variable [`GRANT_VARS`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantedBy {
    /// Any `desktop` grant.
    Desktop,
    /// A `bus` grant of the session bus.
    SessionBus,
    /// A `bus` grant of the system bus.
    SystemBus,
}

/// The variables a grant keeps whatever the policy's `drop` says (the policy drops each of
/// them without the grant: `policy/defaults.toml`'s `[environment] drop`; the consistency
/// test checks that none is kept without its grant). They are the grant's mechanism, not a
/// choice of the policy: the launcher binds the sockets they name.
pub const GRANT_VARS: &[(GrantedBy, &str, &str)] = &[
    (
        GrantedBy::Desktop,
        "WAYLAND_DISPLAY",
        "the Wayland socket's name",
    ),
    (GrantedBy::Desktop, "DISPLAY", "the X11 display"),
    (
        GrantedBy::Desktop,
        "XAUTHORITY",
        "the X11 server's key file",
    ),
    (
        GrantedBy::Desktop,
        "XDG_RUNTIME_DIR",
        "where the desktop's sockets are",
    ),
    (
        GrantedBy::Desktop,
        "HYPRLAND_INSTANCE_SIGNATURE",
        "Hyprland's socket directory",
    ),
    (GrantedBy::Desktop, "SWAYSOCK", "sway's IPC socket"),
    (GrantedBy::Desktop, "I3SOCK", "i3's IPC socket"),
    (GrantedBy::Desktop, "NIRI_SOCKET", "niri's IPC socket"),
    (
        GrantedBy::Desktop,
        "XDG_SESSION_TYPE",
        "toolkits pick Wayland or X11 by it",
    ),
    (
        GrantedBy::Desktop,
        "XDG_CURRENT_DESKTOP",
        "toolkits pick the desktop's portal and theme by it",
    ),
    (
        GrantedBy::SessionBus,
        "DBUS_SESSION_BUS_ADDRESS",
        "where the session bus is",
    ),
    (
        GrantedBy::SessionBus,
        "XDG_RUNTIME_DIR",
        "the session bus's default place",
    ),
    (
        GrantedBy::SystemBus,
        "DBUS_SYSTEM_BUS_ADDRESS",
        "where the system bus is",
    ),
];

/// A kept variable dropped because its value looks like a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The variable's name.
    pub name: String,
    /// Why: the secret pattern its value matched, or a value too long to check.
    pub why: efr_sandbox_wire::envfilter::DropReason,
}

/// The environment of the line, as `NAME=value` strings.
pub fn scrub(plan: &Plan, inherited: &[(String, String)]) -> Vec<String> {
    scrub_report(plan, inherited).0
}

/// The variables of `inherited` a line keeps, and the kept ones dropped for their value
/// (what the service tells the user).
fn kept(plan: &Plan, inherited: &[(String, String)]) -> (Vec<(String, String)>, Vec<Dropped>) {
    let granted_by = |by: GrantedBy| {
        plan.grants.iter().any(|g| match (by, g) {
            (GrantedBy::Desktop, Grant::Desktop { .. }) => true,
            (GrantedBy::SessionBus, Grant::Bus { bus }) => *bus == efr_sandbox_wire::Bus::Session,
            (GrantedBy::SystemBus, Grant::Bus { bus }) => *bus == efr_sandbox_wire::Bus::System,
            _ => false,
        })
    };
    let granted_vars: Vec<&str> = GRANT_VARS
        .iter()
        .filter(|(by, _, _)| granted_by(*by))
        .map(|&(_, name, _)| name)
        .collect();
    // The plan was validated, so its policy compiles; a policy that would not keeps
    // nothing but what the grants need.
    let policy = plan.env_policy.as_ref().map(|p| p.compile().ok());
    let mut out: Vec<(String, String)> = Vec::new();
    let mut dropped = Vec::new();
    for (k, v) in inherited {
        if granted_vars.contains(&k.as_str()) {
            out.push((k.clone(), v.clone()));
            continue;
        }
        match &policy {
            None => {
                if FALLBACK_KEEP.iter().any(|(g, _)| glob_matches(g, k, false)) {
                    out.push((k.clone(), v.clone()));
                }
            }
            Some(None) => {}
            Some(Some(p)) => {
                let listed = p.listed(k) || plan.env_keep.iter().any(|x| x == k);
                if !listed || p.dropped_name(k).is_some() {
                    continue;
                }
                match p.secret_value(v) {
                    Some(why) => dropped.push(Dropped {
                        name: k.clone(),
                        why,
                    }),
                    None => out.push((k.clone(), v.clone())),
                }
            }
        }
    }
    (out, dropped)
}

/// [`scrub`], and the kept variables dropped because their value looks like a secret.
pub fn scrub_report(plan: &Plan, inherited: &[(String, String)]) -> (Vec<String>, Vec<Dropped>) {
    let (mut out, dropped) = kept(plan, inherited);
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
    out.retain(|(k, _)| k != CONTAINED_ENV);
    if plan.mode == crate::plan::PlanMode::Contained {
        out.push((CONTAINED_ENV.into(), "1".into()));
    }
    (
        out.into_iter().map(|(k, v)| format!("{k}={v}")).collect(),
        dropped,
    )
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
    fn contained_marker_only_inside() {
        let mut plan = Plan::contained("true", "/");
        plan.env_keep = vec![CONTAINED_ENV.into()];
        let inh = [(CONTAINED_ENV.to_string(), "0".to_string())];
        let marker = |env: &[String]| {
            env.iter()
                .filter(|e| e.starts_with(&format!("{CONTAINED_ENV}=")))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(marker(&scrub(&plan, &inh)), [format!("{CONTAINED_ENV}=1")]);
        // An unsandboxed line is not contained: what it inherited of the marker is dropped.
        plan.mode = crate::plan::PlanMode::Unsandboxed;
        let inh = [(CONTAINED_ENV.to_string(), "1".to_string())];
        assert!(marker(&scrub(&plan, &inh)).is_empty());
    }

    fn policy() -> efr_sandbox_wire::envfilter::EnvPolicy {
        efr_sandbox_wire::envfilter::EnvPolicy {
            keep: vec!["PATH".into(), "npm_config_*".into(), "PIP_INDEX_URL".into()],
            drop: vec!["*TOKEN*".into()],
            secret_values: vec![
                "[a-z]+://[^/@: ]*:[^/@ ]+@".into(),
                "ghp_[A-Za-z0-9]{20,}".into(),
            ],
        }
    }

    #[test]
    fn policy_keeps_drops_and_reports() {
        let mut plan = Plan::contained("true", "/");
        plan.env_policy = Some(policy());
        plan.env_keep = vec!["MINE".into(), "MY_TOKEN".into(), "GH".into()];
        let inh: Vec<(String, String)> = [
            ("PATH", "/bin"),
            ("npm_config_registry", "https://r.example/"),
            ("npm_config__authToken", "x"),
            ("PIP_INDEX_URL", "https://u:secret@host/simple"),
            ("MINE", "1"),
            ("MY_TOKEN", "x"),
            ("GH", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            ("OTHER", "x"),
            ("TERM", "xterm"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let (env, dropped) = scrub_report(&plan, &inh);
        for want in [
            "PATH=/bin",
            "npm_config_registry=https://r.example/",
            "MINE=1",
        ] {
            assert!(env.contains(&want.to_string()), "{want} missing: {env:?}");
        }
        for bad in ["authToken", "PIP_INDEX", "MY_TOKEN", "GH=", "OTHER", "TERM"] {
            assert!(!env.iter().any(|e| e.contains(bad)), "{bad} kept: {env:?}");
        }
        let names: Vec<&str> = dropped.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["PIP_INDEX_URL", "GH"]);
    }

    #[test]
    fn no_policy_keeps_the_fallback_only() {
        let mut plan = Plan::contained("true", "/");
        plan.env_keep = vec!["CI".into()];
        let inh = [
            ("CI".to_string(), "1".to_string()),
            ("LANG".to_string(), "C".to_string()),
        ];
        let env = scrub(&plan, &inh);
        assert!(env.contains(&"LANG=C".to_string()));
        assert!(!env.iter().any(|e| e.starts_with("CI=")), "{env:?}");
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
