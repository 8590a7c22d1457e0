//! `launch` and `grant`: how a call runs and what a contained call gets beyond the default
//! view.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `launch`: how one shell call runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Launch {
    /// The hidden shell runs the line itself, with no sandbox (full mode).
    Direct,
    /// Through the launcher, in the sandbox, with these grants on top of the default view.
    Contained {
        /// Absent when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        grants: Vec<Grant>,
    },
    /// Through the launcher, outside the sandbox (an approved exit); the launcher still owns
    /// the process tree.
    Unsandboxed,
}

/// Which D-Bus bus a grant names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bus {
    /// The user's session bus (`$DBUS_SESSION_BUS_ADDRESS`).
    Session,
    /// The system bus (`/run/dbus/system_bus_socket`).
    System,
}

impl Bus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Bus::Session => "session",
            Bus::System => "system",
        }
    }
}

/// The desktop whose one control socket a `desktop` grant binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Desktop {
    /// The Wayland compositor's socket (`$WAYLAND_DISPLAY` in the runtime dir).
    Wayland,
    /// The X server's socket of `$DISPLAY` (`/tmp/.X11-unix/XN`).
    X11,
    /// Hyprland's two sockets of `$HYPRLAND_INSTANCE_SIGNATURE`.
    Hyprland,
    /// Sway's IPC socket (`$SWAYSOCK`).
    Sway,
    /// i3's IPC socket (`$I3SOCK`).
    I3,
    /// Niri's IPC socket (`$NIRI_SOCKET`).
    Niri,
}

impl Desktop {
    /// Every desktop, in wire order.
    pub const ALL: [Desktop; 6] = [
        Desktop::Wayland,
        Desktop::X11,
        Desktop::Hyprland,
        Desktop::Sway,
        Desktop::I3,
        Desktop::Niri,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Desktop::Wayland => "wayland",
            Desktop::X11 => "x11",
            Desktop::Hyprland => "hyprland",
            Desktop::Sway => "sway",
            Desktop::I3 => "i3",
            Desktop::Niri => "niri",
        }
    }
}

/// `grant`: one thing a contained call gets beyond the default view. A reader takes a kind
/// it does not know as `unknown`; the launcher refuses a plan that holds one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Grant {
    /// Write access to a path (and below it, for a directory).
    Write {
        /// The path: absolute, or `~/...` for one in the home.
        path: String,
    },
    /// Egress through the proxy to one host.
    Host {
        /// A host name, or `*.suffix` for every name below it (an IP address needs
        /// `open_network`).
        host: String,
        /// 443 when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// Plain HTTP to this host is fine (false when absent).
        #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
        plain_http: bool,
        /// Plain TCP to the host's own loopback port: the call's connections to its
        /// `127.0.0.1:PORT` (and `[::1]:PORT`) are relayed to the host's same address and
        /// port, whatever they carry (false when absent). Only with a loopback `host`
        /// (`localhost`, `127.0.0.1`, `::1`) and a `port`, without `plain_http`
        /// ([`Grant::tcp_relay`]).
        #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
        tcp: bool,
    },
    /// The host's network as it is.
    OpenNetwork,
    /// Connect to one host Unix socket.
    Socket {
        /// The socket's path: absolute, or `~/...` for one in the home.
        path: String,
    },
    /// The real socket of a bus and its address.
    Bus {
        /// The bus.
        bus: Bus,
    },
    /// The call's own filtered socket of a bus.
    BusFilter {
        /// The bus the filter stands in front of.
        bus: Bus,
    },
    /// One device node.
    Device {
        /// The device node's path, such as `/dev/kvm`.
        path: String,
    },
    /// Lift one mask.
    Unmask {
        /// The masked path to lift, as the mask names it: absolute, or `~/...`.
        path: String,
    },
    /// A bind of the one control socket of a desktop, with its variables.
    Desktop {
        /// The desktop whose socket is bound.
        desktop: Desktop,
    },
    /// The host's network namespace with only Unix and netlink sockets.
    NetView,
    /// One configured credential (`[[credential]]` of the config, or a built-in profile):
    /// the call holds a placeholder of its secret, and the proxy swaps the placeholder for the
    /// secret in requests to the credential's bound hosts only. The grant adds nothing to the
    /// view by itself.
    Credential {
        /// The credential's name, `[A-Za-z0-9_.-]{1,64}`.
        name: String,
    },
    /// A kind this reader does not know.
    #[serde(other)]
    Unknown,
}

/// The host loopback a `tcp` host grant names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Loopback {
    /// `localhost`: `127.0.0.1` and `::1`.
    Localhost,
    /// `127.0.0.1` only.
    V4,
    /// `::1` only.
    V6,
}

impl Loopback {
    /// The loopback `host` names: `localhost` (any case, one trailing dot), `127.0.0.1`,
    /// `::1` or `[::1]`; `None` for anything else (another address of 127/8 included: the
    /// relay listens on these two addresses only).
    pub fn parse(host: &str) -> Option<Loopback> {
        let h = host.strip_suffix('.').unwrap_or(host);
        if h.eq_ignore_ascii_case("localhost") {
            return Some(Loopback::Localhost);
        }
        match host {
            "127.0.0.1" => Some(Loopback::V4),
            "::1" | "[::1]" => Some(Loopback::V6),
            _ => None,
        }
    }

    /// The addresses it names, IPv4 first.
    pub fn addrs(self) -> &'static [std::net::IpAddr] {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        const BOTH: [IpAddr; 2] = [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ];
        match self {
            Loopback::Localhost => &BOTH,
            Loopback::V4 => &BOTH[..1],
            Loopback::V6 => &BOTH[1..],
        }
    }

    /// Whether it names `ip` (an IPv4-mapped `::ffff:127.0.0.1` is `127.0.0.1`).
    pub fn names(self, ip: std::net::IpAddr) -> bool {
        self.addrs().contains(&ip.to_canonical())
    }
}

/// What a `tcp` host grant opens: the host's loopback `host` (its addresses) on `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRelay {
    /// The loopback addresses.
    pub host: Loopback,
    /// The port.
    pub port: u16,
}

/// How a grant reaches its host path ([`Grant::host_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathReach {
    /// What is at the path and below it (a `write`, `device` or `socket` grant).
    AtOrBelow,
    /// What is at or below the path, and what is above it as well: an `unmask` lifts every
    /// mask it names or lies below.
    AtBelowOrAbove,
}

/// Why a `host` grant with `tcp` cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TcpGrantError {
    /// The host is not the host's loopback.
    #[error(
        "grant host={0} with tcp: a tcp grant names the host's loopback (localhost, \
         127.0.0.1 or ::1)"
    )]
    NotLoopback(String),
    /// No port (or port 0).
    #[error("grant host={0} with tcp: a tcp grant names its port (host=localhost:PORT:tcp)")]
    NoPort(String),
    /// `plain_http` as well.
    #[error("grant host={0} with tcp: tcp and plain_http together (tcp relays any protocol)")]
    PlainHttp(String),
}

impl Grant {
    /// The relay a `host` grant with `tcp` opens: `Ok(None)` for any other grant (a `host`
    /// grant without `tcp` included), an error for a `tcp` one that names no loopback host,
    /// no port (or 0), or says `plain_http` too.
    pub fn tcp_relay(&self) -> Result<Option<TcpRelay>, TcpGrantError> {
        let Grant::Host {
            host,
            port,
            plain_http,
            tcp: true,
        } = self
        else {
            return Ok(None);
        };
        let lo = Loopback::parse(host).ok_or_else(|| TcpGrantError::NotLoopback(host.clone()))?;
        let port = port
            .filter(|&p| p != 0)
            .ok_or_else(|| TcpGrantError::NoPort(host.clone()))?;
        if *plain_http {
            return Err(TcpGrantError::PlainHttp(host.clone()));
        }
        Ok(Some(TcpRelay { host: lo, port }))
    }

    /// The host path the grant opens and how it reaches it, for the checks that keep a
    /// grant off the sandbox's control plane; `None` for a grant that names no host path.
    pub fn host_path(&self) -> Option<(&str, PathReach)> {
        match self {
            Grant::Write { path } | Grant::Device { path } | Grant::Socket { path } => {
                Some((path, PathReach::AtOrBelow))
            }
            Grant::Unmask { path } => Some((path, PathReach::AtBelowOrAbove)),
            // A bus, a desktop's socket and the network are found by the launcher, not
            // named by the grant; an unknown kind is refused before any check.
            Grant::Host { .. }
            | Grant::OpenNetwork
            | Grant::Bus { .. }
            | Grant::BusFilter { .. }
            | Grant::Desktop { .. }
            | Grant::NetView
            | Grant::Credential { .. }
            | Grant::Unknown => None,
        }
    }

    /// The wire name of the grant's kind.
    pub fn kind_str(&self) -> &'static str {
        match self {
            Grant::Write { .. } => "write",
            Grant::Host { .. } => "host",
            Grant::OpenNetwork => "open_network",
            Grant::Socket { .. } => "socket",
            Grant::Bus { .. } => "bus",
            Grant::BusFilter { .. } => "bus_filter",
            Grant::Device { .. } => "device",
            Grant::Unmask { .. } => "unmask",
            Grant::Desktop { .. } => "desktop",
            Grant::NetView => "net_view",
            Grant::Credential { .. } => "credential",
            Grant::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str, port: Option<u16>, plain_http: bool, tcp: bool) -> Grant {
        Grant::Host {
            host: h.into(),
            port,
            plain_http,
            tcp,
        }
    }

    #[test]
    fn a_tcp_grant_names_a_loopback_host_and_a_port() {
        let ok = |h: &str, lo: Loopback| {
            assert_eq!(
                host(h, Some(5432), false, true).tcp_relay(),
                Ok(Some(TcpRelay {
                    host: lo,
                    port: 5432
                })),
                "{h}"
            );
        };
        ok("localhost", Loopback::Localhost);
        ok("LocalHost.", Loopback::Localhost);
        ok("127.0.0.1", Loopback::V4);
        ok("::1", Loopback::V6);
        ok("[::1]", Loopback::V6);
        for h in [
            "db.test",
            "127.0.0.2",
            "127.1",
            "0.0.0.0",
            "::",
            "10.0.0.1",
            "",
        ] {
            assert_eq!(
                host(h, Some(5432), false, true).tcp_relay(),
                Err(TcpGrantError::NotLoopback(h.into())),
                "{h}"
            );
        }
        for port in [None, Some(0)] {
            let e = host("localhost", port, false, true)
                .tcp_relay()
                .unwrap_err();
            assert_eq!(e, TcpGrantError::NoPort("localhost".into()));
            assert!(e.to_string().contains("names its port"), "{e}");
        }
        assert_eq!(
            host("localhost", Some(80), true, true).tcp_relay(),
            Err(TcpGrantError::PlainHttp("localhost".into()))
        );
        // Not a tcp grant: nothing to check here.
        assert_eq!(host("localhost", None, false, false).tcp_relay(), Ok(None));
        assert_eq!(Grant::OpenNetwork.tcp_relay(), Ok(None));
    }

    #[test]
    fn a_loopback_names_its_addresses() {
        let v4: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let v6: std::net::IpAddr = "::1".parse().unwrap();
        let mapped: std::net::IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let other: std::net::IpAddr = "127.0.0.2".parse().unwrap();
        assert!(Loopback::Localhost.names(v4) && Loopback::Localhost.names(v6));
        assert!(Loopback::V4.names(v4) && Loopback::V4.names(mapped) && !Loopback::V4.names(v6));
        assert!(Loopback::V6.names(v6) && !Loopback::V6.names(v4));
        assert!(!Loopback::Localhost.names(other));
        assert_eq!(Loopback::Localhost.addrs(), &[v4, v6]);
    }

    #[test]
    fn tcp_is_absent_when_false_and_read_when_present() {
        let g = host("localhost", Some(5432), false, true);
        let j = serde_json::to_string(&g).unwrap();
        assert_eq!(
            j,
            r#"{"kind":"host","host":"localhost","port":5432,"tcp":true}"#
        );
        assert_eq!(serde_json::from_str::<Grant>(&j).unwrap(), g);
        let plain = host("a.test", None, false, false);
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"kind":"host","host":"a.test"}"#
        );
    }
}
