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

/// The filter's arguments and what was left out or opened anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterRules {
    /// `--talk=NAME`, `--see=NAME`, `--call=NAME=RULE`, `--broadcast=NAME=RULE`.
    pub args: Vec<String>,
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
        }
    }
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

    #[test]
    fn a_line_that_needs_the_real_bus_is_for_the_user() {
        use crate::classify::{ClassifyRequest, Context, classify};
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
