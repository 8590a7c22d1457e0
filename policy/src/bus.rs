//! The rules of a bus filter (`bus_filter` grants, design section 8): the config's `[bus]`
//! `talk`, `see`, `call` and `broadcast` lists as xdg-dbus-proxy arguments, less every
//! rule that reaches a `bus.never` entry the user did not name in `bus.allow_never`.

use crate::config::{BusConfig, Entry};

/// Why a `bus` grant (the real bus) is for the user to approve: the fact the classifier
/// puts in the record of a line that needs it.
pub const REAL_BUS_RUNS_CODE: &str = "the real bus can run code outside the sandbox: \
    systemd-run --user (org.freedesktop.systemd1), Flatpak's HostCommand \
    (org.freedesktop.Flatpak) and GNOME Shell's Eval (org.gnome.Shell) are on a desktop's \
    session bus, and its secret service hands out every stored password; a bus_filter grant \
    gives only the names of the config's [bus] rules";

/// A `talk` or `call` rule of the filter: xdg-dbus-proxy applies it to the connection that
/// owns its name, by any name that connection owns and by its unique name. So it is also
/// checked against the other names of that connection ([`reaches_through`]), when the
/// filter starts and again on every `NameOwnerChanged` (`efr_call::bus_owners`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionRule {
    /// `talk` or `call`.
    pub kind: &'static str,
    /// The rule as the config writes it: `NAME` (talk) or `NAME=METHOD@PATH` (call).
    pub value: String,
}

impl ConnectionRule {
    /// The rule as xdg-dbus-proxy takes it (`--talk=NAME`, `--call=NAME=RULE`).
    pub fn arg(&self) -> String {
        format!("--{}={}", self.kind, self.value)
    }

    /// The rule in words (`talk org.example.Name`).
    pub fn shown(&self) -> String {
        format!("{} {}", self.kind, self.value)
    }

    /// The bus name part (`NAME`, or `prefix.*`).
    pub fn name(&self) -> &str {
        self.value.split('=').next().unwrap_or("")
    }

    /// The method part of a call rule (`iface.member`, `iface.*`, `*`, or empty).
    fn method(&self) -> &str {
        match self.value.split_once('=') {
            Some((_, r)) => r.split('@').next().unwrap_or(""),
            None => "",
        }
    }

    /// Whether the rule is for the bus name `name`, as xdg-dbus-proxy matches it (a
    /// `prefix.*` rule is for `prefix` and every name below it).
    pub fn for_name(&self, name: &str) -> bool {
        let n = self.name();
        match n.strip_suffix(".*") {
            Some(prefix) => {
                name == prefix
                    || (name.len() > prefix.len()
                        && name.starts_with(prefix)
                        && name[prefix.len()..].starts_with('.'))
            }
            None => n == name,
        }
    }
}

/// `name` is `root` or a name below it.
fn at_or_below(name: &str, root: &str) -> bool {
    name == root
        || (name.len() > root.len()
            && name.starts_with(root)
            && name[root.len()..].starts_with('.'))
}

/// The standard interface whose `Get`, `Set` and `GetAll` act on any interface's
/// properties: a rule that opens it opens every interface of the object.
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// The never entry `rule` reaches on a connection that also owns the well-known name
/// `other`: xdg-dbus-proxy passes the rule's messages to the connection's unique name,
/// which serves `other` too. A `talk` rule reaches any never entry of `other` (every
/// method of the connection); a `call` rule reaches it when its method is `*` or empty,
/// an interface of `org.freedesktop.DBus.Properties` (which reads and sets any
/// interface's properties), an interface named in the never name's namespace
/// (`org.gnome.Shell.Eval` for `org.gnome.Shell`), or the never entry's interface.
pub fn reaches_through<'a>(
    rule: &ConnectionRule,
    other: &str,
    never: &'a [Entry],
) -> Option<&'a Entry> {
    let method = rule.method();
    let interface = match method.rsplit_once('.') {
        Some((iface, _)) => iface,
        None => "",
    };
    let open = rule.kind == "talk" || method.is_empty() || method == "*";
    let props = at_or_below(interface, PROPERTIES);
    never.iter().find(|e| match e.value.split_once('=') {
        None => at_or_below(other, &e.value) && (open || props || at_or_below(interface, &e.value)),
        Some((n, iface)) => {
            at_or_below(other, n) && (open || props || method_reaches(method, iface))
        }
    })
}

/// The filter's arguments and what was left out or opened anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterRules {
    /// `--talk=NAME`, `--see=NAME`, `--call=NAME=RULE`, `--broadcast=NAME=RULE`.
    pub args: Vec<String>,
    /// The `talk` and `call` rules among `args`: checked against the connection that owns
    /// their name ([`reaches_through`]).
    pub connection: Vec<ConnectionRule>,
    /// The never entries in force (those `allow_never` does not open), for that check.
    pub never: Vec<Entry>,
    /// Rules left out: the rule (`talk org.freedesktop.systemd1`) and the never entry's
    /// reason.
    pub refused: Vec<(String, String)>,
    /// Rules passed although they reach a never entry that `allow_never` opens.
    pub opened: Vec<(String, String)>,
}

impl FilterRules {
    /// One sentence per rule left out or opened anyway (what `config` and `check` say).
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self
            .refused
            .iter()
            .map(|(r, why)| {
                format!(
                    "bus rule {r} is left out of the bus filter: {why} (bus.allow_never opens it)"
                )
            })
            .collect();
        w.extend(self.opened.iter().map(|(r, why)| {
            format!("bus rule {r} is in the bus filter through bus.allow_never, although {why}")
        }));
        w
    }
}

/// `name` covers `other`: equal, one below the other, or a `prefix.*` pattern over it.
fn covers(pattern: &str, name: &str) -> bool {
    let below =
        |a: &str, b: &str| a.len() > b.len() && a.starts_with(b) && a[b.len()..].starts_with('.');
    match pattern.strip_suffix(".*") {
        Some(prefix) => name == prefix || below(name, prefix) || below(prefix, name),
        None => pattern == name || below(pattern, name) || below(name, pattern),
    }
}

/// A call rule's method (`iface.member`, `iface.*`, `*` or empty) reaches `interface`.
fn method_reaches(method: &str, interface: &str) -> bool {
    if method.is_empty() || method == "*" {
        return true;
    }
    match method.strip_suffix(".*") {
        Some(prefix) => covers(&format!("{prefix}.*"), interface),
        None => method
            .rsplit_once('.')
            .is_some_and(|(iface, _)| iface == interface),
    }
}

/// The never entry a rule reaches: `kind` is `talk` or `call`, `rule` its value.
fn reaches<'a>(kind: &str, rule: &str, never: &'a [Entry]) -> Option<&'a Entry> {
    let (name, method) = match rule.split_once('=') {
        Some((n, r)) => (n, r.split('@').next().unwrap_or("")),
        None => (rule, ""),
    };
    never.iter().find(|e| match e.value.split_once('=') {
        None => covers(name, &e.value),
        Some((n, iface)) => covers(name, n) && (kind == "talk" || method_reaches(method, iface)),
    })
}

/// The rules of the config's filter.
pub fn filter_rules(cfg: &BusConfig) -> FilterRules {
    let mut out = FilterRules::default();
    let lists: [(&str, &[Entry], bool); 4] = [
        ("talk", &cfg.talk, true),
        ("call", &cfg.call, true),
        ("see", &cfg.see, false),
        ("broadcast", &cfg.broadcast, false),
    ];
    for (kind, list, checked) in lists {
        for e in list {
            let rule = format!("{kind} {}", e.value);
            if checked {
                if let Some(n) = reaches(kind, &e.value, &cfg.never) {
                    if cfg.allow_never.iter().any(|a| a.value == n.value) {
                        out.opened.push((rule, n.reason.clone()));
                    } else {
                        out.refused.push((rule, n.reason.clone()));
                        continue;
                    }
                }
            }
            out.args.push(format!("--{kind}={}", e.value));
            if checked {
                out.connection.push(ConnectionRule {
                    kind,
                    value: e.value.clone(),
                });
            }
        }
    }
    out.never = cfg
        .never
        .iter()
        .filter(|n| !cfg.allow_never.iter().any(|a| a.value == n.value))
        .cloned()
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Source;

    fn e(v: &str) -> Entry {
        Entry {
            value: v.into(),
            reason: format!("why {v}"),
            source: Source::Default,
            merge: None,
        }
    }

    fn cfg(talk: &[&str], call: &[&str], allow: &[&str]) -> BusConfig {
        BusConfig {
            filter: crate::config::Setting {
                value: true,
                source: Source::Default,
            },
            talk: talk.iter().map(|v| e(v)).collect(),
            see: vec![e("org.freedesktop.systemd1")],
            call: call.iter().map(|v| e(v)).collect(),
            broadcast: Vec::new(),
            never: [
                "org.freedesktop.systemd1",
                "org.gnome.Shell",
                "org.freedesktop.portal.Desktop=org.freedesktop.portal.Background",
            ]
            .iter()
            .map(|v| e(v))
            .collect(),
            allow_never: allow.iter().map(|v| e(v)).collect(),
        }
    }

    #[test]
    fn never_names_are_left_out_unless_allowed() {
        let c = cfg(
            &[
                "org.freedesktop.Notifications",
                "org.freedesktop.systemd1",
                "org.freedesktop.*",
                "org.gnome.Shell.Extensions",
                "org.freedesktop.portal.Desktop",
            ],
            &[
                "org.freedesktop.portal.Desktop=org.freedesktop.portal.OpenURI.OpenURI@/org/freedesktop/portal/desktop",
                "org.freedesktop.portal.Desktop=org.freedesktop.portal.Background.RequestBackground",
                "org.freedesktop.portal.Desktop=org.freedesktop.portal.*",
                "org.freedesktop.portal.Desktop=*@/org/freedesktop/portal/desktop",
                "org.freedesktop.systemd1=org.freedesktop.DBus.Properties.Get",
            ],
            &[],
        );
        let r = filter_rules(&c);
        assert_eq!(
            r.args,
            [
                "--talk=org.freedesktop.Notifications",
                "--call=org.freedesktop.portal.Desktop=org.freedesktop.portal.OpenURI.OpenURI@/org/freedesktop/portal/desktop",
                "--see=org.freedesktop.systemd1",
            ]
        );
        assert_eq!(r.refused.len(), 8, "{:?}", r.refused);
        assert!(r.warnings()[0].contains("talk org.freedesktop.systemd1"));
        let c = cfg(
            &["org.freedesktop.systemd1"],
            &[],
            &["org.freedesktop.systemd1"],
        );
        let r = filter_rules(&c);
        assert_eq!(
            r.args,
            [
                "--talk=org.freedesktop.systemd1",
                "--see=org.freedesktop.systemd1"
            ]
        );
        assert_eq!(r.opened.len(), 1);
        assert!(r.warnings()[0].contains("allow_never"));
    }

    /// A rule opens the connection that owns its name: a talk rule reaches every never
    /// name of that connection; a call rule only what its method names.
    #[test]
    fn rules_reach_the_never_names_of_their_connection() {
        let c = cfg(&[], &[], &[]);
        let never = &c.never;
        let talk = ConnectionRule {
            kind: "talk",
            value: "org.freedesktop.Notifications".into(),
        };
        let notify = ConnectionRule {
            kind: "call",
            value: "org.freedesktop.Notifications=org.freedesktop.Notifications.*@/org/freedesktop/Notifications".into(),
        };
        let any = |m: &str| ConnectionRule {
            kind: "call",
            value: format!("org.freedesktop.Notifications={m}"),
        };
        let hit = |r: &ConnectionRule, other: &str| {
            reaches_through(r, other, never).map(|e| e.value.clone())
        };
        assert_eq!(
            hit(&talk, "org.gnome.Shell").as_deref(),
            Some("org.gnome.Shell")
        );
        assert_eq!(
            hit(&talk, "org.gnome.Shell.Extensions").as_deref(),
            Some("org.gnome.Shell")
        );
        assert_eq!(hit(&talk, "org.example.Other"), None);
        assert_eq!(hit(&notify, "org.gnome.Shell"), None);
        for m in [
            "*",
            "",
            "@/org/gnome/Shell",
            "org.freedesktop.DBus.Properties.Set",
            "org.gnome.Shell.Eval",
            "org.gnome.Shell.Extensions.*",
        ] {
            assert_eq!(
                hit(&any(m), "org.gnome.Shell").as_deref(),
                Some("org.gnome.Shell"),
                "{m}"
            );
        }
        // A never interface of a name the connection owns.
        let portal = "org.freedesktop.portal.Desktop";
        assert!(
            hit(
                &any("org.freedesktop.portal.Background.RequestBackground"),
                portal
            )
            .is_some()
        );
        assert!(hit(&any("org.freedesktop.portal.OpenURI.OpenURI"), portal).is_none());
        assert!(hit(&talk, portal).is_some());
        // The rules the filter checks this way, and the never entries in force.
        let c = cfg(
            &["org.freedesktop.Notifications"],
            &["org.a.B=org.a.B.Ping@/o"],
            &["org.gnome.Shell"],
        );
        let r = filter_rules(&c);
        assert_eq!(
            r.connection
                .iter()
                .map(ConnectionRule::arg)
                .collect::<Vec<_>>(),
            [
                "--talk=org.freedesktop.Notifications",
                "--call=org.a.B=org.a.B.Ping@/o"
            ]
        );
        assert!(!r.never.iter().any(|e| e.value == "org.gnome.Shell"));
        assert!(r.connection[0].for_name("org.freedesktop.Notifications"));
        let p = ConnectionRule {
            kind: "talk",
            value: "org.a.*".into(),
        };
        assert!(p.for_name("org.a") && p.for_name("org.a.b") && !p.for_name("org.ab"));
    }

    #[test]
    fn a_line_that_needs_the_real_bus_is_for_the_user() {
        use crate::classify::{ClassifyRequest, classify};
        use crate::context::Context;
        use efr_sandbox_wire::{Bus, ExitKind, Grant, Mode, Needs, Verdict};
        let home = std::env::temp_dir();
        let ctx = Context::defaults(&home);
        let bus_exit = |line: &str| {
            let r = classify(
                &ClassifyRequest::new(line, Some(home.clone()), Mode::Auto),
                &ctx,
            );
            r.exits
                .into_iter()
                .find(|e| e.kind == ExitKind::Bus)
                .unwrap_or_else(|| panic!("no bus exit for {line}"))
        };
        let real = bus_exit("gsettings set org.gnome.desktop.interface gtk-theme Adwaita");
        assert_eq!(real.judgement.verdict, Verdict::UserOnly, "{real:?}");
        assert!(
            real.judgement
                .reasons
                .iter()
                .any(|r| r == REAL_BUS_RUNS_CODE),
            "{real:?}"
        );
        assert_eq!(
            real.needs,
            Needs::Contained {
                grants: vec![Grant::Bus { bus: Bus::Session }]
            }
        );
        let filtered = bus_exit("notify-send 'build done'");
        assert_eq!(filtered.judgement.verdict, Verdict::Review, "{filtered:?}");
        assert_eq!(
            filtered.needs,
            Needs::Contained {
                grants: vec![Grant::BusFilter { bus: Bus::Session }]
            }
        );
    }
}
