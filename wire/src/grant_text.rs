//! The text form of a grant, `KIND[=VALUE]` as `run --grant` reads it and every command
//! shows it back ([`Grant`]'s `FromStr` and `Display`), and [`GRANT_KINDS`], the one table
//! of kinds the CLI's help, its errors and its checklist test read.
//!
//! The parser reads the form only: a path stays as written (the CLI makes a relative one
//! absolute against its working directory) and a host name stays as written (the proxy's
//! normaliser, which holds the IDNA rules, makes it canonical and refuses one that can never
//! match). Everything else (kinds, values, ports, the `tcp` rules) is decided here.

use std::fmt;
use std::str::FromStr;

use crate::launch::{Bus, Desktop, Grant, TcpGrantError};

/// One kind of grant as the user types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantKind {
    /// The kind's name before `=`, as [`Grant::kind_str`] names it.
    pub name: &'static str,
    /// What it grants, in one line.
    pub grants: &'static str,
    /// Its forms as `--grant`'s help lists them.
    pub usage: &'static str,
}

/// Every kind `--grant` takes, in the order `run --help` lists them.
pub const GRANT_KINDS: [GrantKind; 11] = [
    GrantKind {
        name: "write",
        grants: "write access to a path (and below it, for a directory)",
        usage: "write=PATH",
    },
    GrantKind {
        name: "unmask",
        grants: "one masked path lifted",
        usage: "unmask=PATH",
    },
    GrantKind {
        name: "device",
        grants: "one device node",
        usage: "device=PATH",
    },
    GrantKind {
        name: "socket",
        grants: "a connection to one host Unix socket",
        usage: "socket=PATH",
    },
    GrantKind {
        name: "bus",
        grants: "the real socket of a bus and its address",
        usage: "bus=session|system",
    },
    GrantKind {
        name: "bus_filter",
        grants: "the call's own filtered socket of a bus",
        usage: "bus_filter=session|system (the bus through a filter of the config's rules)",
    },
    GrantKind {
        name: "desktop",
        grants: "the one control socket of a desktop, with its variables",
        usage: "desktop=wayland|x11|hyprland|sway|i3|niri",
    },
    GrantKind {
        name: "host",
        grants: "egress through the proxy to one host, or a relay to a host loopback port",
        usage: "host=NAME[:PORT][:http], host=HOST:PORT:tcp (HOST localhost, 127.0.0.1 or \
                [::1]: the host's own loopback port, any protocol)",
    },
    GrantKind {
        name: "net_view",
        grants: "the host's network namespace with only Unix and netlink sockets",
        usage: "net_view",
    },
    GrantKind {
        name: "open_network",
        grants: "the host's network as it is",
        usage: "open_network",
    },
    GrantKind {
        name: "credential",
        grants: "one configured credential: the call holds a placeholder the proxy swaps for \
                 the secret on the credential's hosts only",
        usage: "credential=NAME",
    },
];

/// The longest credential name.
pub const CREDENTIAL_NAME_MAX: usize = 64;

/// Whether `name` is a credential's name: 1 to 64 of `A-Z a-z 0-9 _ . -`.
pub fn is_credential_name(name: &str) -> bool {
    (1..=CREDENTIAL_NAME_MAX).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The kinds `--grant` takes, for messages: every kind's usage, comma-separated.
pub fn kinds_text() -> String {
    GRANT_KINDS
        .iter()
        .map(|k| k.usage)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The desktops a `desktop` grant takes, for its error: `a, b ... or z`.
fn desktops_text() -> String {
    let names: Vec<&str> = Desktop::ALL.iter().map(|d| d.as_str()).collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Why a `--grant` text is not a grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantParseError {
    /// A path kind without its path.
    #[error("grant {0} needs a path: {0}=PATH")]
    NeedsPath(&'static str),
    /// `bus` or `bus_filter` with another value.
    #[error("grant {0} takes session or system: {0}=session")]
    Bus(&'static str),
    /// `desktop` with another value.
    #[error("grant desktop takes {}", desktops_text())]
    Desktop,
    /// A kind without value given one.
    #[error("grant {0} takes no value")]
    NoValue(&'static str),
    /// A `host` value of neither form.
    #[error(
        "grant host takes NAME[:PORT][:http] (a name or *.suffix), or HOST:PORT:tcp (HOST \
         localhost, 127.0.0.1 or [::1]): host={0}"
    )]
    Host(String),
    /// A `host=...:tcp` that breaks a rule of the tcp relay.
    #[error(transparent)]
    Tcp(#[from] TcpGrantError),
    /// A `credential` value that is not a credential's name.
    #[error(
        "grant credential takes a credential's name, 1 to 64 of A-Z a-z 0-9 _ . - \
         (credential=NAME): credential={0}"
    )]
    Credential(String),
    /// A kind not in [`GRANT_KINDS`].
    #[error("unknown grant kind {0:?}; the kinds: {kinds}", kinds = kinds_text())]
    UnknownKind(String),
}

impl FromStr for Grant {
    type Err = GrantParseError;

    /// Reads one `--grant KIND[=VALUE]` (paths and host names as written: see the module).
    fn from_str(s: &str) -> Result<Grant, GrantParseError> {
        let (kind, value) = match s.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (s, None),
        };
        let path = |what: &'static str| match value {
            Some(v) if !v.is_empty() => Ok(v.to_string()),
            _ => Err(GrantParseError::NeedsPath(what)),
        };
        let bus = |what: &'static str| match value {
            Some("session") => Ok(Bus::Session),
            Some("system") => Ok(Bus::System),
            _ => Err(GrantParseError::Bus(what)),
        };
        Ok(match kind {
            "write" => Grant::Write {
                path: path("write")?,
            },
            "unmask" => Grant::Unmask {
                path: path("unmask")?,
            },
            "device" => Grant::Device {
                path: path("device")?,
            },
            "socket" => Grant::Socket {
                path: path("socket")?,
            },
            "bus" => Grant::Bus { bus: bus("bus")? },
            "bus_filter" => Grant::BusFilter {
                bus: bus("bus_filter")?,
            },
            "desktop" => Grant::Desktop {
                desktop: *Desktop::ALL
                    .iter()
                    .find(|d| Some(d.as_str()) == value)
                    .ok_or(GrantParseError::Desktop)?,
            },
            "net_view" if value.is_some() => return Err(GrantParseError::NoValue("net_view")),
            "open_network" if value.is_some() => {
                return Err(GrantParseError::NoValue("open_network"));
            }
            "net_view" => Grant::NetView,
            "open_network" => Grant::OpenNetwork,
            "host" => parse_host(value.unwrap_or_default())?,
            "credential" => match value {
                Some(v) if is_credential_name(v) => Grant::Credential {
                    name: v.to_string(),
                },
                v => {
                    return Err(GrantParseError::Credential(
                        v.unwrap_or_default().to_string(),
                    ));
                }
            },
            other => return Err(GrantParseError::UnknownKind(other.to_string())),
        })
    }
}

/// A `host=` value: `HOST:PORT:tcp`, or `NAME[:PORT][:http]`.
fn parse_host(v: &str) -> Result<Grant, GrantParseError> {
    if let Some(rest) = v.strip_suffix(":tcp") {
        return Ok(parse_tcp(rest)?);
    }
    let bad = || GrantParseError::Host(v.to_string());
    let mut parts: Vec<&str> = v.split(':').collect();
    let mut plain_http = false;
    if parts.len() > 1 && parts.last() == Some(&"http") {
        plain_http = true;
        parts.pop();
    }
    let port = match parts.as_slice() {
        [_] => None,
        [_, p] => Some(p.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    if parts[0].is_empty() {
        return Err(bad());
    }
    Ok(Grant::Host {
        host: parts[0].to_string(),
        port,
        plain_http,
        tcp: false,
    })
}

/// `HOST:PORT` of a `tcp` host grant (`HOST` in brackets for `::1`, lower-cased): the
/// grant, or why it cannot be one.
pub fn parse_tcp(rest: &str) -> Result<Grant, TcpGrantError> {
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()),
        None => (rest, None),
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .to_ascii_lowercase();
    let g = Grant::Host {
        host,
        port,
        plain_http: false,
        tcp: true,
    };
    g.tcp_relay()?;
    Ok(g)
}

impl fmt::Display for Grant {
    /// The `--grant` text that [`Grant`]'s `FromStr` reads back (`unknown` for a kind this
    /// reader does not know, which no text names).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Write { path } => write!(f, "write={path}"),
            Grant::Unmask { path } => write!(f, "unmask={path}"),
            Grant::Device { path } => write!(f, "device={path}"),
            Grant::Socket { path } => write!(f, "socket={path}"),
            Grant::Bus { bus } => write!(f, "bus={}", bus.as_str()),
            Grant::BusFilter { bus } => write!(f, "bus_filter={}", bus.as_str()),
            Grant::Desktop { desktop } => write!(f, "desktop={}", desktop.as_str()),
            Grant::Host {
                host,
                port,
                plain_http,
                tcp,
            } => {
                // `::1` in brackets: the port follows a colon.
                if host.contains(':') && !host.starts_with('[') {
                    write!(f, "host=[{host}]")?;
                } else {
                    write!(f, "host={host}")?;
                }
                if let Some(p) = port {
                    write!(f, ":{p}")?;
                }
                if *plain_http {
                    f.write_str(":http")?;
                }
                if *tcp {
                    f.write_str(":tcp")?;
                }
                Ok(())
            }
            Grant::NetView => f.write_str("net_view"),
            Grant::OpenNetwork => f.write_str("open_network"),
            Grant::Credential { name } => write!(f, "credential={name}"),
            Grant::Unknown => f.write_str("unknown"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One grant of every kind (and every form of `host`), by an exhaustive match: a new kind
    /// does not compile here until it has a sample.
    fn samples() -> Vec<Grant> {
        let mut out = Vec::new();
        for kind in GRANT_KINDS {
            let g: Grant = match kind.name {
                "host" => "host=registry.test".parse().unwrap(),
                "write" | "unmask" | "device" | "socket" => {
                    format!("{}=/p/a b", kind.name).parse().unwrap()
                }
                "bus" | "bus_filter" => format!("{}=system", kind.name).parse().unwrap(),
                "desktop" => "desktop=niri".parse().unwrap(),
                "credential" => "credential=github".parse().unwrap(),
                other => other.parse().unwrap(),
            };
            match &g {
                Grant::Write { .. }
                | Grant::Unmask { .. }
                | Grant::Device { .. }
                | Grant::Socket { .. }
                | Grant::Bus { .. }
                | Grant::BusFilter { .. }
                | Grant::Desktop { .. }
                | Grant::Host { .. }
                | Grant::NetView
                | Grant::OpenNetwork
                | Grant::Credential { .. } => {}
                Grant::Unknown => panic!("{} parsed as unknown", kind.name),
            }
            out.push(g);
        }
        for h in [
            "host=registry.test:8443",
            "host=*.crates.test:http",
            "host=localhost:5432:tcp",
            "host=[::1]:6379:tcp",
            "host=127.0.0.1:8000:tcp",
            "credential=my.forge_token-2",
        ] {
            out.push(h.parse().unwrap());
        }
        out
    }

    #[test]
    fn round_trip() {
        for g in samples() {
            let text = g.to_string();
            assert_eq!(text.parse::<Grant>(), Ok(g.clone()), "{text}");
            assert_eq!(text.split('=').next(), Some(g.kind_str()), "{text}");
        }
        assert_eq!(Grant::Unknown.to_string(), "unknown");
        assert!("unknown".parse::<Grant>().is_err());
    }

    #[test]
    fn the_table_names_every_kind_once() {
        let names: Vec<&str> = GRANT_KINDS.iter().map(|k| k.name).collect();
        let kinds: Vec<&str> = samples().iter().map(Grant::kind_str).collect();
        for n in &names {
            assert_eq!(names.iter().filter(|m| *m == n).count(), 1, "{n}");
            assert!(kinds.contains(n), "{n}");
        }
    }

    #[test]
    fn messages_as_the_cli_printed_them() {
        assert_eq!(
            kinds_text(),
            "write=PATH, unmask=PATH, device=PATH, socket=PATH, bus=session|system, \
             bus_filter=session|system (the bus through a filter of the config's rules), \
             desktop=wayland|x11|hyprland|sway|i3|niri, host=NAME[:PORT][:http], \
             host=HOST:PORT:tcp (HOST localhost, 127.0.0.1 or [::1]: the host's own loopback \
             port, any protocol), net_view, open_network, credential=NAME"
        );
        let e = |s: &str| s.parse::<Grant>().unwrap_err().to_string();
        assert_eq!(e("write"), "grant write needs a path: write=PATH");
        assert_eq!(e("socket="), "grant socket needs a path: socket=PATH");
        assert_eq!(e("bus=x"), "grant bus takes session or system: bus=session");
        assert_eq!(
            e("bus_filter"),
            "grant bus_filter takes session or system: bus_filter=session"
        );
        assert_eq!(
            e("desktop=gnome"),
            "grant desktop takes wayland, x11, hyprland, sway, i3 or niri"
        );
        assert_eq!(e("net_view=1"), "grant net_view takes no value");
        assert_eq!(e("open_network="), "grant open_network takes no value");
        assert_eq!(
            e("host=a.com:0"),
            "grant host takes NAME[:PORT][:http] (a name or *.suffix), or HOST:PORT:tcp \
             (HOST localhost, 127.0.0.1 or [::1]): host=a.com:0"
        );
        assert_eq!(
            e("nope=1"),
            format!("unknown grant kind \"nope\"; the kinds: {}", kinds_text())
        );
        assert!(e("host=db.test:5432:tcp").contains("the host's loopback"));
        assert!(e("host=localhost:tcp").contains("names its port"));
        assert_eq!(
            e("credential=a b"),
            "grant credential takes a credential's name, 1 to 64 of A-Z a-z 0-9 _ . - \
             (credential=NAME): credential=a b"
        );
        for bad in [
            "credential",
            "credential=",
            "credential=a/b",
            "credential=a=b",
            "credential=é",
            &format!("credential={}", "a".repeat(65)),
        ] {
            assert!(
                matches!(bad.parse::<Grant>(), Err(GrantParseError::Credential(_))),
                "{bad}"
            );
        }
        assert!(
            format!("credential={}", "a".repeat(64))
                .parse::<Grant>()
                .is_ok()
        );
        for bad in ["host=", "host=:80", "host=a:b:c", "host=a:1:2", "=x", ""] {
            assert!(bad.parse::<Grant>().is_err(), "{bad}");
        }
    }
}
