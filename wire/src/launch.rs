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
    /// A kind this reader does not know.
    #[serde(other)]
    Unknown,
}

impl Grant {
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
            Grant::Unknown => "unknown",
        }
    }
}
