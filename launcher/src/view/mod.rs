//! The contained view as a list of mount operations, computed once from the plan on the
//! host and applied by either backend (our own mounts, or bubblewrap arguments).

pub mod handoff;
pub mod host_mounts;
pub mod host_sockets;
pub(crate) mod listing;

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;

use efr_sandbox_wire::{Bus, Desktop, Grant};

use crate::plan::{NetMode, Plan, PlanCheck};
use crate::restrict::lockdown::LandlockSpec;

/// One mount operation, in order. Sources are host paths; destinations are view paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Bind a host path (writable when `rw`).
    Bind {
        /// The host path.
        src: String,
        /// Where the view shows it.
        dst: String,
        /// Bound writable (else read-only).
        rw: bool,
    },
    /// Bind a device node.
    Dev {
        /// The device node's path, the same on the host and in the view.
        path: String,
    },
    /// An empty directory (tmpfs, made read-only by a later [`Op::SealDir`]).
    MaskDir {
        /// The directory masked.
        path: String,
    },
    /// An empty read-only file over a file, socket or other non-directory.
    MaskFile {
        /// The file masked.
        path: String,
    },
    /// A read-only file holding `content` over a masked file: its copy with the secrets
    /// removed ([`crate::plan::Plan::scrubbed`]).
    MaskWith {
        /// The file masked.
        path: String,
        /// What the line reads there instead: the file's text with its secrets removed.
        content: String,
    },
    /// Make a [`Op::MaskDir`] read-only once what is bound inside it is in place.
    SealDir {
        /// The masked directory made read-only.
        path: String,
    },
    /// A real cache shown writable through its per-call layer: overlayfs with the cache
    /// `path` as the lower dir, mounted on `path` (native backend); bubblewrap's backend
    /// mounts it before bubblewrap runs and binds it writable.
    Overlay {
        /// The real cache: the overlay's lower dir, and where the overlay is mounted.
        path: String,
        /// The call's layer: the upper dir, where what the line adds, changes or deletes
        /// lands.
        upper: String,
        /// Overlayfs's work dir, on the same file system as `upper`.
        work: String,
        /// The conversation's layer of the cache: a lower dir above the real cache.
        conversation: Option<String>,
    },
}

/// The mount options of a cache's layer (`userxattr`: the layer is mounted in a user
/// namespace, where overlayfs keeps its whiteout and opaque marks in `user.overlay.*`).
/// `conversation`, the conversation's layer, lies between the call's upper dir and the
/// real cache `lower`: its whiteouts and opaque dirs hide what they hid when it was a
/// call's upper dir.
pub fn overlay_options(lower: &str, conversation: Option<&str>, upper: &str, work: &str) -> String {
    match conversation {
        Some(c) => format!("lowerdir={c}:{lower},upperdir={upper},workdir={work},userxattr"),
        None => format!("lowerdir={lower},upperdir={upper},workdir={work},userxattr"),
    }
}

/// The view of one contained call.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Host directory shown at `/tmp` (a fresh tmpfs of `tmp_size` bytes when none).
    pub tmp: Option<String>,
    /// The size in bytes of the fresh `/tmp` tmpfs.
    pub tmp_size: u64,
    /// The size in bytes of the `/dev/shm` tmpfs.
    pub shm_size: u64,
    /// Scratch directory, at its own path.
    pub scratch: Option<String>,
    /// The mount operations, in the order the backend applies them.
    pub ops: Vec<Op>,
    /// The Landlock rules the line runs under, as paths of this view.
    pub landlock: LandlockSpec,
    /// Share the host's network namespace.
    pub host_net: bool,
    /// The host path of the call's proxy socket, bound at
    /// [`crate::plan::INSIDE_PROXY_SOCKET`]; `/etc/resolv.conf` then names the call's DNS
    /// server ([`RESOLV_CONF`]).
    pub proxy_socket: Option<String>,
    /// The broker's trust files of the plan ([`crate::plan::TrustPlan`]): the bundle bound
    /// at [`crate::plan::INSIDE_CA_BUNDLE`], the CA alone at [`crate::plan::INSIDE_CA`]
    /// (the bundle's binds over the system bundles are among `ops`).
    pub trust: Option<crate::plan::TrustPlan>,
}

/// The `/etc/resolv.conf` of a call with a proxy: the DNS server the init runs on its
/// loopback (allowed names only, nothing forwarded).
pub const RESOLV_CONF: &str =
    "# efr sandbox: the call's own DNS server (allowed names only)\nnameserver 127.0.0.1\n";

/// What the view reads of the host besides the paths the plan names: who the call runs as,
/// where the host keeps its system sockets, which Unix sockets listen. [`Host::real`] is the
/// machine's; a test gives its own (a fixed uid, the system paths under a directory of its
/// own, its own listening sockets) so that the view of a plan is the same on every machine.
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// The uid the call runs as (its runtime dir is `/run/user/UID`; uid 0 hides only the
    /// sockets a root's call could reach).
    pub uid: u32,
    /// The prefix of the host's own system paths (`/run/...`, `/tmp/.X11-unix`): empty on
    /// the real host.
    pub system_root: String,
    /// The host's listening Unix sockets; `None`: asked of the kernel
    /// ([`host_sockets::listening`]) when the plan hides sockets.
    pub listening: Option<Vec<String>>,
}

impl Host {
    /// The machine the launcher runs on.
    pub fn real() -> Host {
        Host {
            uid: crate::sys::ids().0,
            system_root: String::new(),
            listening: None,
        }
    }

    /// The host path of the system path `p` (absolute).
    fn system(&self, p: &str) -> String {
        format!("{}{p}", self.system_root)
    }

    /// The host's listening Unix sockets.
    fn listening(&self) -> Vec<String> {
        match &self.listening {
            Some(v) => v.clone(),
            None => host_sockets::listening(),
        }
    }
}

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

/// The host socket paths a grant names (bus and desktop sockets follow the environment).
fn grant_sockets(plan: &Plan, host: &Host, g: &Grant) -> Vec<String> {
    let rt = env_of(plan, "XDG_RUNTIME_DIR")
        .unwrap_or_else(|| host.system(&format!("/run/user/{}", host.uid)));
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
        Grant::Bus { bus: Bus::System } => vec![host.system("/run/dbus/system_bus_socket")],
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
                vec![host.system(&format!("/tmp/.X11-unix/X{n}"))]
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
        // No host socket bound: a bus filter's socket is the call's own, the network
        // grants and a credential go through the proxy or the namespace, the rest bind
        // paths of their own.
        Grant::Write { .. }
        | Grant::Credential { .. }
        | Grant::Unmask { .. }
        | Grant::Device { .. }
        | Grant::Host { .. }
        | Grant::OpenNetwork
        | Grant::BusFilter { .. }
        | Grant::NetView
        | Grant::Unknown => vec![],
    }
}

/// The masks every contained call gets on top of the plan's (runtime dir and system
/// sockets).
pub fn system_masks(plan: &Plan) -> Vec<String> {
    system_masks_on(plan, &Host::real())
}

/// [`system_masks`] on `host`.
fn system_masks_on(plan: &Plan, host: &Host) -> Vec<String> {
    let mut v: Vec<String> = [
        format!("/run/user/{}", host.uid).as_str(),
        "/run/docker.sock",
        "/run/dbus",
        "/run/containerd",
        "/run/podman",
    ]
    .into_iter()
    .map(|p| host.system(p))
    .collect();
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
    let (tmp_size, shm_size) = plan.tmpfs_sizes();
    let mut v = View {
        tmp: plan.tmp.clone(),
        tmp_size,
        shm_size,
        scratch: plan.scratch.clone(),
        ..Default::default()
    };
    v.host_net = plan.net() != NetMode::Own;
    if !v.host_net {
        v.proxy_socket = plan.proxy.as_ref().map(|p| p.socket.clone());
        v.trust = plan.trust.clone().filter(|_| v.proxy_socket.is_some());
    }
    for g in &plan.grants {
        if let Grant::Device { path } = g {
            v.ops.push(Op::Dev { path: path.clone() });
        }
    }
    v
}

/// The paths of the plan's `unmask` grants, without a trailing `/`.
fn unmasked(plan: &Plan) -> Vec<String> {
    plan.grants
        .iter()
        .filter_map(|g| match g {
            Grant::Unmask { path } => Some(path.trim_end_matches('/').to_string()),
            // Only an unmask lifts a mask.
            _ => None,
        })
        .collect()
}

/// The masks in force: the plan's and [`system_masks`], without a trailing `/`, once
/// each, but those an `unmask` grant lifts (one naming the mask or a directory above it).
pub fn masks_in_force(plan: &Plan) -> Vec<String> {
    masks_in_force_on(plan, &Host::real())
}

/// [`masks_in_force`] on `host`.
fn masks_in_force_on(plan: &Plan, host: &Host) -> Vec<String> {
    let lifted = unmasked(plan);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for m in plan
        .masks
        .iter()
        .cloned()
        .chain(system_masks_on(plan, host))
    {
        let m = m.trim_end_matches('/').to_string();
        if m.is_empty() || !seen.insert(m.clone()) || lifted.iter().any(|u| under(&m, u)) {
            continue;
        }
        out.push(m);
    }
    out
}

/// The mask an `unmask` grant of `path` cannot show without lifting it: the mask above
/// `path` when `path` does not exist (below a mask, only what exists at launch is bound
/// back in), `None` when the grant works.
pub fn unmask_refused(plan: &Plan, path: &str) -> Option<String> {
    let u = path.trim_end_matches('/');
    let above = masks_in_force(plan)
        .into_iter()
        .filter(|m| under(u, m) && u != m)
        .min_by_key(|m| m.len())?;
    let shown =
        std::fs::symlink_metadata(u).is_ok() && std::fs::metadata(&above).is_ok_and(|m| m.is_dir());
    (!shown).then_some(above)
}

/// Paths with their links resolved as far as they exist (the rest as written): the paths
/// the view's walk meets. Directories are resolved once for all the paths below them.
#[derive(Default)]
struct Resolver {
    dirs: std::collections::HashMap<std::path::PathBuf, std::path::PathBuf>,
}

impl Resolver {
    fn dir(&mut self, d: &std::path::Path) -> std::path::PathBuf {
        if let Some(c) = self.dirs.get(d) {
            return c.clone();
        }
        let c = match (d.parent(), d.file_name()) {
            (Some(parent), Some(name)) => {
                let here = self.dir(parent).join(name);
                match std::fs::symlink_metadata(&here) {
                    Ok(m) if m.file_type().is_symlink() => {
                        std::fs::canonicalize(&here).unwrap_or(here)
                    }
                    _ => here,
                }
            }
            _ => d.to_path_buf(),
        };
        self.dirs.insert(d.to_path_buf(), c.clone());
        c
    }

    /// `p` resolved, its last component a link when `is_link` (its directories as
    /// [`Resolver::dir`] finds them).
    fn resolve(&mut self, p: &str, is_link: bool) -> String {
        let path = std::path::Path::new(p);
        let r = if is_link {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.into())
        } else {
            match (path.parent(), path.file_name()) {
                (Some(parent), Some(name)) => self.dir(parent).join(name),
                _ => path.to_path_buf(),
            }
        };
        r.to_string_lossy().into_owned()
    }
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

/// The write grants of plain files inside another writable root, which the call may write
/// by lock file and rename (`FILE.lock` next to it, renamed onto it; see
/// `crate::supervise::MadeLocks`): they get no mount of their own (a rename onto a mount
/// point fails with `EBUSY`), the root's mount holds them already.
pub fn lock_grants(plan: &Plan) -> Vec<String> {
    let writable = writable(plan);
    plan.grants
        .iter()
        .filter_map(|g| match g {
            Grant::Write { path } => Some(path.trim_end_matches('/')),
            // Only a write grant makes a file writable.
            _ => None,
        })
        .filter(|p| {
            writable
                .iter()
                .map(|r| r.trim_end_matches('/'))
                .any(|r| r != *p && under(p, r))
        })
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
        .map(String::from)
        .collect()
}

/// Computes the view.
pub fn build(plan: &Plan) -> View {
    build_on(plan, &Host::real())
}

/// Computes the view on `host` ([`build`] is this on [`Host::real`]), in steps: the caches'
/// layers, the writable roots, the masks, what is bound again on top of a mask, the
/// granted devices and sockets, the host's sockets hidden, the masked dirs sealed, and the
/// Landlock rules.
pub fn build_on(plan: &Plan, host: &Host) -> View {
    let mut v = base(plan);
    // The devices come again below, in their place among the binds.
    v.ops.clear();
    let writable = writable(plan);
    // The caches' layers come first: a mask inside a cache (a token under `~/.cache`) is
    // mounted on top of its layer below.
    push_caches(plan, &mut v);
    let locks = lock_grants(plan);
    for w in writable.iter().filter(|w| !locks.contains(w)) {
        v.ops.push(Op::Bind {
            src: w.clone(),
            dst: w.clone(),
            rw: true,
        });
    }
    let mut roots = writable;
    roots.extend(plan.scratch.iter().cloned());
    // The paths kept read-only inside the writable roots get no mount: a mount on a path the
    // host may replace (git rewrites its config by rename) is detached in every namespace
    // with it. The init refuses the writes instead (`crate::supervise`).
    let masks = masks_in_force_on(plan, host);
    let masked = push_masks(plan, &masks, &mut v);
    push_rebinds(plan, &roots, &masked.dirs, &mut v);
    push_trust(&mut v);
    let sockets = push_grants(plan, host, &mut v);
    if plan.hide_sockets {
        push_hidden_sockets(host, &roots, &masked.dirs, &sockets, &mut v);
    }
    for m in &masked.dirs {
        v.ops.push(Op::SealDir { path: m.clone() });
    }
    v.landlock = landlock_of(
        plan,
        &roots,
        &masks,
        masked.resolved,
        sockets,
        &mut v.landlock.dev,
    );
    v
}

/// The caches' layers and private files.
fn push_caches(plan: &Plan, v: &mut View) {
    for c in &plan.caches {
        v.ops.push(Op::Overlay {
            path: c.path.clone(),
            upper: c.upper.clone(),
            work: c.work.clone(),
            conversation: c.conversation.clone(),
        });
    }
    for f in &plan.cache_files {
        v.ops.push(Op::Bind {
            src: f.private.clone(),
            dst: f.path.clone(),
            rw: true,
        });
    }
}

/// The broker's bundle bound read-only over each of the host's system bundles: the tools
/// that read no variable (curl's and git's compiled-in path, OpenSSL's default file) trust
/// the broker's CA too.
fn push_trust(v: &mut View) {
    let Some(t) = &v.trust else {
        return;
    };
    let binds: Vec<Op> = t
        .system
        .iter()
        .map(|s| Op::Bind {
            src: t.bundle.clone(),
            dst: s.clone(),
            rw: false,
        })
        .collect();
    v.ops.extend(binds);
}

/// The masks as the view made them.
struct Masked {
    /// The masked directories (sealed once what is bound inside is in place).
    dirs: Vec<String>,
    /// Each mask of [`masks_in_force`], in its order, as the view resolves it.
    resolved: Vec<String>,
}

/// The masks: an empty dir over a directory, the scrubbed copy or an empty file over a
/// file, nothing over a missing path.
fn push_masks(plan: &Plan, masks: &[String], v: &mut View) -> Masked {
    let mut dirs = Vec::new();
    // Each mask as the view resolves it (for Landlock), from the one lookup of the mask
    // itself and the directories above it (looked up once for all masks).
    let mut resolver = Resolver::default();
    let mut resolved = Vec::with_capacity(masks.len());
    // Which masks exist, and their types: one listing of each of their directories (most
    // of the hundred do not exist on a given machine).
    let found: std::collections::HashMap<std::path::PathBuf, std::fs::FileType> =
        crate::view::listing::existing(masks).into_iter().collect();
    for m in masks {
        let t = found.get(std::path::Path::new(m));
        let is_link = t.is_some_and(|t| t.is_symlink());
        resolved.push(resolver.resolve(m, is_link));
        let is_dir = match t {
            None => continue,
            Some(t) if t.is_symlink() => match std::fs::metadata(m) {
                Ok(md) => md.is_dir(),
                Err(_) => continue,
            },
            Some(t) => t.is_dir(),
        };
        if is_dir {
            v.ops.push(Op::MaskDir { path: m.clone() });
            dirs.push(m.clone());
        } else if let Some(s) = plan
            .scrubbed
            .iter()
            .find(|s| s.path.trim_end_matches('/') == m)
        {
            v.ops.push(Op::MaskWith {
                path: m.clone(),
                content: s.content.clone(),
            });
        } else {
            v.ops.push(Op::MaskFile { path: m.clone() });
        }
    }
    Masked { dirs, resolved }
}

/// Writable roots (and the scratch dir) inside a masked directory are bound again on top
/// of the mask (a conversation's scratch lives under the masked runtime dir), and so is
/// what an `unmask` grant names below a mask (read-only, as it is at launch; a missing one
/// is refused by `Plan::check_host`).
fn push_rebinds(plan: &Plan, roots: &[String], mask_dirs: &[String], v: &mut View) {
    let unmasked_below: Vec<String> = unmasked(plan)
        .into_iter()
        .filter(|u| mask_dirs.iter().any(|m| under(u, m) && u != m))
        .filter(|u| std::fs::symlink_metadata(u).is_ok())
        .collect();
    for (r, rw) in roots
        .iter()
        .map(|r| (r.trim_end_matches('/').to_string(), true))
        .chain(unmasked_below.into_iter().map(|u| (u, false)))
    {
        if !mask_dirs.iter().any(|m| under(&r, m) && r != *m) {
            continue;
        }
        v.ops.push(Op::Bind {
            src: r.clone(),
            dst: r,
            rw,
        });
    }
}

/// Grants that bind host objects back in: devices, and the sockets that exist. Gives the
/// sockets bound.
fn push_grants(plan: &Plan, host: &Host, v: &mut View) -> Vec<String> {
    let mut sockets = Vec::new();
    for g in &plan.grants {
        if let Grant::Device { path } = g {
            v.ops.push(Op::Dev { path: path.clone() });
            v.landlock.dev.push(path.clone());
        }
        for s in grant_sockets(plan, host, g) {
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
    sockets
}

/// Host sockets hidden, except the granted ones (`sockets`), those in writable roots, in
/// the host's `/tmp` (the call has its own) and under a masked dir; as root, only those a
/// root's call could reach.
fn push_hidden_sockets(
    host: &Host,
    roots: &[String],
    mask_dirs: &[String],
    sockets: &[String],
    v: &mut View,
) {
    let as_root = host.uid == 0;
    for s in host.listening() {
        if sockets.contains(&s)
            || roots.iter().any(|w| under(&s, w))
            || under(&s, &host.system("/tmp"))
            || mask_dirs.iter().any(|m| under(&s, m))
        {
            continue;
        }
        if std::fs::symlink_metadata(&s)
            .map(|m| m.file_type().is_socket())
            .unwrap_or(false)
            && (!as_root || host_sockets::reachable_by_roots_call(std::path::Path::new(&s)))
        {
            v.ops.push(Op::MaskFile { path: s });
        }
    }
}

/// The Landlock rules of the view: read everywhere but the masks, write in the roots, the
/// caches, `/tmp` and `/dev/shm`, the granted devices (`dev`, taken) and sockets.
fn landlock_of(
    plan: &Plan,
    roots: &[String],
    masks: &[String],
    resolved: Vec<String>,
    sockets: Vec<String>,
    dev: &mut Vec<String>,
) -> LandlockSpec {
    let mut write = roots.to_vec();
    write.extend(plan.caches.iter().map(|c| c.path.clone()));
    write.extend(plan.cache_files.iter().map(|f| f.path.clone()));
    write.push("/tmp".into());
    write.push("/dev/shm".into());
    // Every mask, existing or not, is left out of Landlock's read rules (see
    // `crate::restrict::lockdown`), as the view resolves it; inside a writable path a write rule
    // covers it (there the init refuses its creation instead: `supervise_spec`).
    let mut hidden: Vec<String> = Vec::new();
    for (m, r) in masks.iter().zip(resolved) {
        for h in [m.clone(), r] {
            let private = ["/tmp", "/dev", "/proc"].iter().any(|d| under(&h, d));
            if !private && !write.iter().any(|w| under(&h, w)) && !hidden.contains(&h) {
                hidden.push(h);
            }
        }
    }
    let mut d = vec!["/dev".into()];
    d.append(dev);
    LandlockSpec {
        read: vec!["/".into()],
        write,
        dev: d,
        sockets,
        hidden,
        deny_tcp: plan.net() == NetMode::View,
        scopes: true,
    }
}

/// What the init supervises for a contained plan: the writable roots (projects, write
/// grants, scratch), the absolute protected paths and the protected name patterns.
pub fn supervise_spec(plan: &Plan) -> crate::supervise::SuperviseSpec {
    let host = Host::real();
    let mut roots = writable(plan);
    roots.extend(plan.scratch.iter().cloned());
    // A protected path that is a link protects where it leads too (`.vscode` -> `conf/`):
    // the tool that reads it follows the link.
    // (Which of them are links: one listing of each of their directories.)
    let mut paths = plan.read_only_inside.clone();
    let mut seen: BTreeSet<String> = paths.iter().cloned().collect();
    for (p, t) in crate::view::listing::existing(&plan.read_only_inside) {
        if let (true, Ok(c)) = (t.is_symlink(), std::fs::canonicalize(&p)) {
            let c = c.to_string_lossy().into_owned();
            if seen.insert(c.clone()) {
                paths.push(c);
            }
        }
    }
    // A mask inside a writable root (the home as a project): the call may not make it
    // (a planted `~/.aws/config` or `~/.kube/config` runs commands), nor write one the
    // host re-creates under the view's mask.
    for m in masks_in_force_on(plan, &host) {
        if roots
            .iter()
            .any(|r| under(&m, r) && m != r.trim_end_matches('/'))
            && seen.insert(m.clone())
        {
            paths.push(m);
        }
    }
    // Path sockets: the call's own places, and those its grants name.
    let mut socket_dirs = roots.clone();
    socket_dirs.extend(["/tmp".to_string(), "/dev".to_string()]);
    let sockets = plan
        .grants
        .iter()
        .flat_map(|g| grant_sockets(plan, &host, g))
        .collect();
    crate::supervise::SuperviseSpec {
        roots,
        paths,
        names: plan.protect_names.clone(),
        socket_dirs,
        sockets,
        own_loopback: plan.mode == crate::plan::PlanMode::Contained
            && plan.net() == crate::plan::NetMode::Own,
        git_safe_keys: plan.git_safe_keys.clone(),
        host_mounts: host_mounts::HostMounts::of_host(),
        locks: lock_grants(plan),
    }
}
