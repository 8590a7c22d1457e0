//! The contained view as a list of mount operations, computed once from the plan on the
//! host and applied by either backend (our own mounts, or bubblewrap arguments).

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;

use efr_sandbox_wire::{Bus, Desktop, Grant};

use crate::lockdown::LandlockSpec;
use crate::plan::{NetMode, Plan};

/// One mount operation, in order. Sources are host paths; destinations are view paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Bind a host path (writable when `rw`).
    Bind { src: String, dst: String, rw: bool },
    /// Bind a device node.
    Dev { path: String },
    /// An empty directory (tmpfs, made read-only by a later [`Op::SealDir`]).
    MaskDir { path: String },
    /// An empty read-only file over a file, socket or other non-directory.
    MaskFile { path: String },
    /// Make a [`Op::MaskDir`] read-only once what is bound inside it is in place.
    SealDir { path: String },
}

/// The view of one contained call.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Host directory shown at `/tmp` (a fresh tmpfs when none).
    pub tmp: Option<String>,
    /// Scratch directory, at its own path.
    pub scratch: Option<String>,
    pub ops: Vec<Op>,
    pub landlock: LandlockSpec,
    /// Share the host's network namespace.
    pub host_net: bool,
    /// The host path of the call's proxy socket, bound at
    /// [`crate::plan::INSIDE_PROXY_SOCKET`]; `/etc/resolv.conf` then names the call's DNS
    /// server ([`RESOLV_CONF`]).
    pub proxy_socket: Option<String>,
}

/// The `/etc/resolv.conf` of a call with a proxy: the DNS server the init runs on its
/// loopback (allowed names only, nothing forwarded).
pub const RESOLV_CONF: &str =
    "# efr sandbox: the call's own DNS server (allowed names only)\nnameserver 127.0.0.1\n";

/// `p` is `root` or below it.
pub(crate) fn under(p: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    root.is_empty() || p == root || p.starts_with(&format!("{root}/"))
}

fn env_of(plan: &Plan, name: &str) -> Option<String> {
    crate::env::source(plan)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// The host path sockets that listen in the launcher's network namespace.
pub fn host_path_sockets() -> Vec<String> {
    let Ok(text) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let mut out = BTreeSet::new();
    for l in text.lines().skip(1) {
        if let Some(p) = l.split_whitespace().nth(7) {
            if p.starts_with('/') {
                out.insert(p.to_string());
            }
        }
    }
    out.into_iter().collect()
}

/// The host socket paths a grant names (bus and desktop sockets follow the environment).
fn grant_sockets(plan: &Plan, g: &Grant) -> Vec<String> {
    let uid = crate::sys::ids().0;
    let rt = env_of(plan, "XDG_RUNTIME_DIR").unwrap_or_else(|| format!("/run/user/{uid}"));
    let in_rt = |v: Option<String>| -> Vec<String> {
        v.map(|v| {
            if v.starts_with('/') {
                v
            } else {
                format!("{rt}/{v}")
            }
        })
        .into_iter()
        .collect()
    };
    match g {
        Grant::Socket { path } => vec![path.clone()],
        Grant::Bus { bus: Bus::Session } => {
            let addr = env_of(plan, "DBUS_SESSION_BUS_ADDRESS").unwrap_or_default();
            match addr.split(',').find_map(|p| p.strip_prefix("unix:path=")) {
                Some(p) => vec![p.to_string()],
                None => vec![format!("{rt}/bus")],
            }
        }
        Grant::Bus { bus: Bus::System } => vec!["/run/dbus/system_bus_socket".into()],
        Grant::Desktop { desktop } => match desktop {
            Desktop::Wayland => in_rt(Some(
                env_of(plan, "WAYLAND_DISPLAY").unwrap_or_else(|| "wayland-0".into()),
            )),
            Desktop::X11 => {
                let d = env_of(plan, "DISPLAY").unwrap_or_else(|| ":0".into());
                let n = d
                    .trim_start_matches(':')
                    .split('.')
                    .next()
                    .unwrap_or("0")
                    .to_string();
                vec![format!("/tmp/.X11-unix/X{n}")]
            }
            Desktop::Hyprland => match env_of(plan, "HYPRLAND_INSTANCE_SIGNATURE") {
                Some(sig) => vec![
                    format!("{rt}/hypr/{sig}/.socket.sock"),
                    format!("{rt}/hypr/{sig}/.socket2.sock"),
                ],
                None => vec![],
            },
            Desktop::Sway => in_rt(env_of(plan, "SWAYSOCK")),
            Desktop::I3 => in_rt(env_of(plan, "I3SOCK")),
            Desktop::Niri => in_rt(env_of(plan, "NIRI_SOCKET")),
        },
        _ => vec![],
    }
}

/// The masks every contained call gets on top of the plan's (runtime dir and system
/// sockets).
pub fn system_masks(plan: &Plan) -> Vec<String> {
    let uid = crate::sys::ids().0;
    let mut v = vec![
        format!("/run/user/{uid}"),
        "/run/docker.sock".into(),
        "/run/dbus".into(),
        "/run/containerd".into(),
        "/run/podman".into(),
    ];
    if let Some(rt) = env_of(plan, "XDG_RUNTIME_DIR") {
        if rt.starts_with('/') {
            v.push(rt);
        }
    }
    v
}

/// The part of the view a native child needs before the rest is known (the launcher
/// computes the rest while the child builds the base of its view): `/tmp`, the scratch
/// dir, the network mode, the proxy socket and the granted devices ([`Op::Dev`] only; the
/// same as [`build`] gives).
pub fn base(plan: &Plan) -> View {
    let mut v = View {
        tmp: plan.tmp.clone(),
        scratch: plan.scratch.clone(),
        ..Default::default()
    };
    v.host_net = plan.net() != NetMode::Own;
    if !v.host_net {
        v.proxy_socket = plan.proxy.as_ref().map(|p| p.socket.clone());
    }
    for g in &plan.grants {
        if let Grant::Device { path } = g {
            v.ops.push(Op::Dev { path: path.clone() });
        }
    }
    v
}

/// The writable paths of a plan: its project roots and write grants.
fn writable(plan: &Plan) -> Vec<String> {
    let mut w: Vec<String> = plan.projects.clone();
    for g in &plan.grants {
        if let Grant::Write { path } = g {
            w.push(path.clone());
        }
    }
    w
}

/// Computes the view.
pub fn build(plan: &Plan) -> View {
    let mut v = base(plan);
    // The devices come again below, in their place among the binds.
    v.ops.clear();
    let net = plan.net();
    let writable = writable(plan);
    for w in &writable {
        v.ops.push(Op::Bind {
            src: w.clone(),
            dst: w.clone(),
            rw: true,
        });
    }
    let mut roots = writable.clone();
    roots.extend(plan.scratch.iter().cloned());
    // The paths kept read-only inside the writable roots get no mount: a mount on a path the
    // host may replace (git rewrites its config by rename) is detached in every namespace
    // with it. The init refuses the writes instead (`crate::supervise`).
    // Masks.
    let unmasked: Vec<&String> = plan
        .grants
        .iter()
        .filter_map(|g| {
            if let Grant::Unmask { path } = g {
                Some(path)
            } else {
                None
            }
        })
        .collect();
    let mut masks: Vec<String> = plan.masks.clone();
    masks.extend(system_masks(plan));
    let mut seen = BTreeSet::new();
    let mut mask_dirs = Vec::new();
    for m in masks {
        let m = m.trim_end_matches('/').to_string();
        if m.is_empty()
            || !seen.insert(m.clone())
            || unmasked
                .iter()
                .any(|u| under(&m, u) || m == u.trim_end_matches('/'))
        {
            continue;
        }
        let Ok(md) = std::fs::metadata(&m) else {
            continue;
        };
        if md.is_dir() {
            v.ops.push(Op::MaskDir { path: m.clone() });
            mask_dirs.push(m);
        } else {
            v.ops.push(Op::MaskFile { path: m });
        }
    }
    // Writable roots (and the scratch dir) inside a masked directory are bound again on top
    // of the mask (a conversation's scratch lives under the masked runtime dir).
    for r in &roots {
        let r = r.trim_end_matches('/');
        if !mask_dirs.iter().any(|m| under(r, m) && r != m) {
            continue;
        }
        v.ops.push(Op::Bind {
            src: r.to_string(),
            dst: r.to_string(),
            rw: true,
        });
    }
    // Grants that bind host objects back in.
    let mut sockets = Vec::new();
    for g in &plan.grants {
        if let Grant::Device { path } = g {
            v.ops.push(Op::Dev { path: path.clone() });
            v.landlock.dev.push(path.clone());
        }
        for s in grant_sockets(plan, g) {
            if std::fs::symlink_metadata(&s).is_ok() {
                v.ops.push(Op::Bind {
                    src: s.clone(),
                    dst: s.clone(),
                    rw: false,
                });
                sockets.push(s);
            }
        }
    }
    // Host sockets hidden, except the granted ones and those in writable roots.
    if plan.hide_sockets {
        for s in host_path_sockets() {
            if sockets.contains(&s)
                || roots.iter().any(|w| under(&s, w))
                || under(&s, "/tmp")
                || mask_dirs.iter().any(|m| under(&s, m))
            {
                continue;
            }
            if std::fs::symlink_metadata(&s)
                .map(|m| m.file_type().is_socket())
                .unwrap_or(false)
            {
                v.ops.push(Op::MaskFile { path: s });
            }
        }
    }
    for m in mask_dirs {
        v.ops.push(Op::SealDir { path: m });
    }
    let mut write = roots.clone();
    write.push("/tmp".into());
    write.push("/dev/shm".into());
    v.landlock = LandlockSpec {
        read: vec!["/".into()],
        write,
        dev: {
            let mut d = vec!["/dev".into()];
            d.append(&mut v.landlock.dev);
            d
        },
        sockets,
        deny_tcp: net == NetMode::View,
        scopes: true,
    };
    v
}

/// What the init supervises for a contained plan: the writable roots (projects, write
/// grants, scratch), the absolute protected paths and the protected name patterns.
pub fn supervise_spec(plan: &Plan) -> crate::supervise::SuperviseSpec {
    let mut roots = writable(plan);
    roots.extend(plan.scratch.iter().cloned());
    // A protected path that is a link protects where it leads too (`.vscode` -> `conf/`):
    // the tool that reads it follows the link.
    let mut paths = plan.read_only_inside.clone();
    for p in &plan.read_only_inside {
        let is_link = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        if let (true, Ok(c)) = (is_link, std::fs::canonicalize(p)) {
            let c = c.to_string_lossy().into_owned();
            if !paths.contains(&c) {
                paths.push(c);
            }
        }
    }
    // Path sockets: the call's own places, and those its grants name.
    let mut socket_dirs = roots.clone();
    socket_dirs.extend(["/tmp".to_string(), "/dev".to_string()]);
    let sockets = plan
        .grants
        .iter()
        .flat_map(|g| grant_sockets(plan, g))
        .collect();
    crate::supervise::SuperviseSpec {
        roots,
        paths,
        names: plan.protect_names.clone(),
        socket_dirs,
        sockets,
    }
}
