//! The scrubbed environment of a line: the variables the plan's `env_policy` keeps (the
//! config's `[environment]`, `policy/defaults.toml`), minus the names its `drop` refuses
//! (secrets, agent sockets, desktop and bus addresses, unless a grant asks for them) and the
//! values that look like a secret (dropped and reported, see [`scrub_report`]). A plan
//! without a policy keeps [`FALLBACK_KEEP`] only.

use efr_sandbox_wire::Grant;
use efr_sandbox_wire::envfilter::{DropReason, glob_matches};
use efr_sandbox_wire::gitenv;

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

/// A kept variable dropped because its name or value looks like a secret, or a variable of
/// a `GIT_CONFIG_*` set the set rule drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The variable's name.
    pub name: String,
    /// Why: the drop glob its name matched, the secret pattern its value matched, or a
    /// value too long to check.
    pub why: DropReason,
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
            // Only these grants keep a variable of GRANT_VARS (the table says which).
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
                if !listed {
                    continue;
                }
                // The GIT_CONFIG_* set is judged as one by `git_config_set` (its names
                // are no secret names; its keys and values are checked there).
                if gitenv::is_member(k) {
                    out.push((k.clone(), v.clone()));
                    continue;
                }
                if let Some(glob) = p.dropped_name(k) {
                    dropped.push(Dropped {
                        name: k.clone(),
                        why: DropReason::Name(glob.to_string()),
                    });
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
    let (mut out, mut dropped) = kept(plan, inherited);
    for e in &plan.env_set {
        out.retain(|(k, _)| *k != e.name);
        out.push((e.name.clone(), e.value.clone()));
    }
    dropped.extend(git_config_set(plan, &mut out));
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

/// Applies the `GIT_CONFIG_*` set rule ([`gitenv`]) to `out` (the kept and set
/// variables): the set stays whole or goes whole, and members git never reads go. Gives
/// what went, with why. The safe keys are the plan's `git_safe_keys` (the config's
/// `git.safe_config_keys`), or the supervisor's fallback list for a plan without them.
fn git_config_set(plan: &Plan, out: &mut Vec<(String, String)>) -> Vec<Dropped> {
    if !out.iter().any(|(k, _)| gitenv::is_member(k)) {
        return Vec::new();
    }
    let safe: Vec<String> = match &plan.git_safe_keys {
        Some(k) => k.clone(),
        None => crate::supervise::FALLBACK_GIT_SAFE_KEYS
            .iter()
            .map(|k| k.to_string())
            .collect(),
    };
    let policy = plan.env_policy.as_ref().and_then(|p| p.compile().ok());
    let secret = |v: &str| policy.as_ref().and_then(|p| p.secret_value(v));
    let count_dropped = policy
        .as_ref()
        .and_then(|p| p.dropped_name(gitenv::COUNT).map(str::to_string));
    let judged = gitenv::judge(
        out.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        &safe,
        secret,
        count_dropped.as_deref(),
    );
    out.retain(|(k, _)| !gitenv::is_member(k) || judged.pass.contains(k));
    judged
        .dropped
        .into_iter()
        .map(|(name, why)| Dropped {
            name,
            why: DropReason::GitConfigSet(Box::new(why)),
        })
        .collect()
}

/// The editor git gets in a contained call without a terminal unless the line's
/// environment sets `GIT_EDITOR`: git would otherwise start `core.editor`, `VISUAL`,
/// `EDITOR` or `vi`, which (a terminal editor, the usual case) waits for a terminal that
/// never comes and hangs the agent. This one says why and fails at once, so `git commit`
/// without `-m` ends with an error. Git runs it through `sh -c` (it holds shell
/// characters) with the file as an argument, which `false` ignores.
pub const NO_TERMINAL_EDITOR: &str = "printf '%s\\n' 'efr-sandbox: no editor in a contained call without a terminal (set GIT_EDITOR, or use git commit -m or --no-edit)' >&2; false";

/// The name that decides git's editor before every other (`core.editor`, `VISUAL`,
/// `EDITOR`): an agent that sets it (Claude Code's `true`) has chosen for its calls.
pub const EDITOR_VAR: &str = "GIT_EDITOR";

/// Gives `env` (`NAME=value` strings) [`NO_TERMINAL_EDITOR`] as `GIT_EDITOR` when it sets
/// no [`EDITOR_VAR`]: a `VISUAL` or `EDITOR` from the user's shell, or the user's
/// `core.editor`, names a terminal editor far more often than not. The launcher calls it
/// for a contained call that has no pty.
pub fn no_terminal_editor(env: &mut Vec<String>) {
    let named = env.iter().any(|e| {
        e.strip_prefix(EDITOR_VAR)
            .is_some_and(|r| r.starts_with('='))
    });
    if !named {
        env.push(format!("{EDITOR_VAR}={NO_TERMINAL_EDITOR}"));
    }
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
    use crate::plan::EnvVar;

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
        // In the environment's order: each with why (a drop rule of its name, or a secret
        // shape of its value); never what is simply not kept (OTHER, TERM).
        let names: Vec<(&str, bool)> = dropped
            .iter()
            .map(|d| (d.name.as_str(), matches!(d.why, DropReason::Name(_))))
            .collect();
        assert_eq!(
            names,
            [
                ("npm_config__authToken", true),
                ("PIP_INDEX_URL", false),
                ("MY_TOKEN", true),
                ("GH", false)
            ]
        );
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

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn git_policy() -> efr_sandbox_wire::envfilter::EnvPolicy {
        let mut p = policy();
        p.keep.extend(
            ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_*", "GIT_CONFIG_VALUE_*"].map(String::from),
        );
        p.drop.push("*_KEY_*".into());
        p
    }

    #[test]
    fn git_config_set_passes_whole_despite_key_names() {
        let mut plan = Plan::contained("true", "/");
        plan.env_policy = Some(git_policy());
        plan.git_safe_keys = Some(vec!["user.name".into()]);
        let inh = pairs(&[
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "core.hooksPath"),
            ("GIT_CONFIG_VALUE_0", ""),
            ("GIT_CONFIG_KEY_1", "user.name"),
            ("GIT_CONFIG_VALUE_1", "a"),
            ("GIT_CONFIG_KEY_7", "core.pager"),
            ("GIT_CONFIG_VALUE_7", "less"),
        ]);
        let (env, dropped) = scrub_report(&plan, &inh);
        for want in [
            "GIT_CONFIG_COUNT=2",
            "GIT_CONFIG_KEY_0=core.hooksPath",
            "GIT_CONFIG_VALUE_1=a",
        ] {
            assert!(env.contains(&want.to_string()), "{want} missing: {env:?}");
        }
        assert!(!env.iter().any(|e| e.contains("_7=")), "{env:?}");
        let names: Vec<&str> = dropped.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["GIT_CONFIG_KEY_7", "GIT_CONFIG_VALUE_7"]);
    }

    #[test]
    fn git_config_set_with_a_program_or_a_secret_goes_whole() {
        let mut plan = Plan::contained("true", "/");
        plan.env_policy = Some(git_policy());
        plan.git_safe_keys = Some(vec!["user.name".into(), "http.extraheader".into()]);
        for (k, v) in [
            ("core.sshCommand", "ssh -i /k"),
            (
                "http.extraHeader",
                "Authorization: token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            ),
        ] {
            let inh = pairs(&[
                ("GIT_CONFIG_COUNT", "2"),
                ("GIT_CONFIG_KEY_0", "user.name"),
                ("GIT_CONFIG_VALUE_0", "a"),
                ("GIT_CONFIG_KEY_1", k),
                ("GIT_CONFIG_VALUE_1", v),
                ("PATH", "/bin"),
            ]);
            let (env, dropped) = scrub_report(&plan, &inh);
            assert!(!env.iter().any(|e| e.starts_with("GIT_CONFIG")), "{env:?}");
            assert!(env.contains(&"PATH=/bin".to_string()));
            assert_eq!(dropped.len(), 5, "{dropped:?}");
            assert!(
                dropped
                    .iter()
                    .all(|d| matches!(d.why, DropReason::GitConfigSet(_)))
            );
        }
    }

    #[test]
    fn git_config_set_set_by_the_caller_is_judged_with_the_inherited() {
        // `run --env GIT_CONFIG_COUNT=1` over an inherited key and value.
        let mut plan = Plan::contained("true", "/");
        plan.env_policy = Some(git_policy());
        plan.env_set.push(EnvVar {
            name: "GIT_CONFIG_COUNT".into(),
            value: "1".into(),
        });
        let inh = pairs(&[
            ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
            ("GIT_CONFIG_VALUE_0", ""),
        ]);
        let (env, dropped) = scrub_report(&plan, &inh);
        assert!(dropped.is_empty(), "{dropped:?}");
        assert!(env.contains(&"GIT_CONFIG_KEY_0=core.fsmonitor".to_string()));
        // A count left without its pair never reaches git.
        let (env, dropped) = scrub_report(&plan, &[]);
        assert!(!env.iter().any(|e| e.starts_with("GIT_CONFIG")), "{env:?}");
        assert_eq!(dropped.len(), 1);
    }

    #[test]
    fn editor_unless_git_editor_is_set() {
        let mut env = vec!["PATH=/bin".to_string(), "EDITORX=1".to_string()];
        no_terminal_editor(&mut env);
        assert_eq!(
            env.last().unwrap(),
            &format!("GIT_EDITOR={NO_TERMINAL_EDITOR}")
        );
        let mut env = vec!["GIT_EDITOR=true".to_string()];
        no_terminal_editor(&mut env);
        assert_eq!(env, ["GIT_EDITOR=true"]);
        // The user's shell's editor is a terminal one: git does not get it without a pty.
        for shells in ["VISUAL=vim", "EDITOR=nano"] {
            let mut env = vec![shells.to_string()];
            no_terminal_editor(&mut env);
            assert_eq!(env[1], format!("GIT_EDITOR={NO_TERMINAL_EDITOR}"));
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
