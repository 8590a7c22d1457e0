//! The contained view as a list of mount operations, computed once from the plan on the
//! host and applied by either backend (our own mounts, or bubblewrap arguments).

use std::collections::BTreeSet;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

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
    /// Bind a path of the view onto itself, writable: pins it (a mount point cannot be
    /// renamed or removed).
    Pin { path: String },
    /// Bind a path of the view onto itself, read-only.
    ReadOnly { path: String },
    /// An empty directory (tmpfs, made read-only by a later [`Op::SealDir`]).
    MaskDir { path: String },
    /// An empty read-only file over a file, socket or other non-directory.
    MaskFile { path: String },
    /// Make a [`Op::MaskDir`] read-only once what is bound inside it is in place.
    SealDir { path: String },
    /// A repository's `info/exclude` shown read-only with `content`: the file as it is, and
    /// the placeholders in that repository's root, so git in the call neither lists them
    /// as untracked nor adds them (`git add -A`).
    Exclude { path: String, content: String },
}

/// An empty file (mode 0444) the launcher creates on the host where a protected path is
/// missing, so a read-only bind can cover it; removed once the line has ended, if still
/// empty. A file even where the protected path is a directory (`.vscode/`): bound read-only,
/// it refuses the directory and anything below it just as well, and a file costs a
/// fraction of a directory to make and remove (the removal is on every call's path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub path: String,
}

/// The view of one contained call.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Host directory shown at `/tmp` (a fresh tmpfs when none).
    pub tmp: Option<String>,
    /// Scratch directory, at its own path.
    pub scratch: Option<String>,
    pub ops: Vec<Op>,
    pub placeholders: Vec<Placeholder>,
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

/// The placeholder a missing protected path needs: its first missing component below the
/// existing part. Nothing is created here: see [`make_placeholders`].
fn placeholder_for(path: &str) -> Option<Placeholder> {
    let mut cur = std::path::PathBuf::from("/");
    for c in Path::new(path).components().skip(1) {
        cur.push(c);
        if std::fs::symlink_metadata(&cur).is_err() {
            return Some(Placeholder {
                path: cur.to_string_lossy().into_owned(),
            });
        }
    }
    None
}

/// Creates the view's placeholders on the host; returns the ones it created, the only ones
/// [`remove_placeholders`] may remove. One that cannot be created (it appeared meanwhile,
/// or its directory is not writable) is left out: the bind of an existing path then covers
/// it, and a path this user cannot create the call cannot create either.
pub fn make_placeholders(ph: &[Placeholder]) -> Vec<Placeholder> {
    let mut made = Vec::new();
    for p in ph {
        let made_one = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(&p.path)
            .is_ok();
        if made_one {
            made.push(p.clone());
        }
    }
    made
}

/// The most of a repository's `info/exclude` shown with the placeholders added (a bigger
/// one is left alone: the call's git then lists the placeholders).
const MAX_EXCLUDE: usize = 64 << 10;
/// The most repositories whose `info/exclude` is shown so, and the most bytes of them all
/// (the native child stages them in its 1 MiB base tmpfs).
const MAX_EXCLUDES: usize = 16;
const MAX_EXCLUDE_TOTAL: usize = 512 << 10;

/// The content of `ROOT/.git/info/exclude` when each of `.git`, `info` and `exclude` is what
/// it should be and no link: opened one component at a time without following links (a
/// link planted by a call, even one swapped in while this runs, must not show another
/// file's content to a call), the file a regular file of one link, at most [`MAX_EXCLUDE`]
/// bytes and no NUL (opened non-blocking: a FIFO there must not hang the launcher).
fn read_exclude(root: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::File::open(root).ok()?;
    let git =
        crate::sys::openat_nofollow(&root, ".git", libc::O_DIRECTORY | libc::O_RDONLY).ok()?;
    let info =
        crate::sys::openat_nofollow(&git, "info", libc::O_DIRECTORY | libc::O_RDONLY).ok()?;
    let mut f =
        crate::sys::openat_nofollow(&info, "exclude", libc::O_RDONLY | libc::O_NONBLOCK).ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.nlink() != 1 || m.len() > MAX_EXCLUDE as u64 {
        return None;
    }
    let mut s = String::new();
    f.by_ref()
        .take(MAX_EXCLUDE as u64 + 1)
        .read_to_string(&mut s)
        .ok()?;
    (s.len() <= MAX_EXCLUDE && !s.contains('\0')).then_some(s)
}

/// [`Op::Exclude`] for each repository whose worktree root holds a placeholder (see
/// [`read_exclude`] for what is read), at most [`MAX_EXCLUDES`] of them.
fn excludes(placeholders: &[Placeholder]) -> Vec<Op> {
    // The placeholders by the directory that holds them, as `/name` patterns with git's
    // pattern characters escaped.
    let mut by_root: Vec<(&Path, Vec<String>)> = Vec::new();
    for ph in placeholders {
        let p = Path::new(&ph.path);
        let (Some(root), Some(name)) = (p.parent(), p.file_name()) else {
            continue;
        };
        let mut pat = String::from("/");
        for c in name.to_string_lossy().chars() {
            if matches!(c, '*' | '?' | '[' | '\\') {
                pat.push('\\');
            }
            pat.push(c);
        }
        match by_root.iter_mut().find(|(r, _)| *r == root) {
            Some((_, names)) => names.push(pat),
            None => by_root.push((root, vec![pat])),
        }
    }
    let mut ops = Vec::new();
    let mut total = 0;
    for (root, names) in by_root {
        if ops.len() == MAX_EXCLUDES {
            break;
        }
        let Some(mut content) = read_exclude(root) else {
            continue;
        };
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str("# efr sandbox: this call's placeholders for missing protected paths\n");
        for n in names {
            content.push_str(&n);
            content.push('\n');
        }
        total += content.len();
        if total > MAX_EXCLUDE_TOTAL {
            break;
        }
        ops.push(Op::Exclude {
            path: root
                .join(".git/info/exclude")
                .to_string_lossy()
                .into_owned(),
            content,
        });
    }
    ops
}

/// Removes placeholders that are still empty files (what is not ours to remove stays).
pub fn remove_placeholders(ph: &[Placeholder]) {
    for p in ph.iter().rev() {
        if std::fs::symlink_metadata(&p.path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            let _ = std::fs::remove_file(&p.path);
        }
    }
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

/// Computes the view. The placeholders it lists are made by the caller
/// ([`make_placeholders`]) before the backend binds them.
pub fn build(plan: &Plan) -> View {
    let mut v = base(plan);
    // The devices come again below, in their place among the binds.
    v.ops.clear();
    let net = plan.net();
    let mut writable: Vec<String> = plan.projects.clone();
    for g in &plan.grants {
        if let Grant::Write { path } = g {
            writable.push(path.clone());
        }
    }
    for w in &writable {
        v.ops.push(Op::Bind {
            src: w.clone(),
            dst: w.clone(),
            rw: true,
        });
    }
    let mut roots = writable.clone();
    roots.extend(plan.scratch.iter().cloned());
    // Read-only inside writable roots: pin the parents, cover the path.
    let mut pinned = BTreeSet::new();
    for r in &plan.read_only_inside {
        let r = r.trim_end_matches('/').to_string();
        let Some(root) = roots
            .iter()
            .filter(|w| under(&r, w))
            .max_by_key(|w| w.len())
        else {
            continue;
        };
        if r == root.trim_end_matches('/') {
            continue;
        }
        let exists = std::fs::symlink_metadata(&r).is_ok();
        let target = if exists {
            r.clone()
        } else {
            match placeholder_for(&r) {
                // Covered already by the placeholder of another path (`a/` for `a/b`).
                Some(ph) if v.placeholders.iter().any(|q| under(&ph.path, &q.path)) => continue,
                Some(ph) => {
                    let t = ph.path.clone();
                    v.placeholders.push(ph);
                    t
                }
                None => continue,
            }
        };
        // Ancestors strictly between the root and the target.
        let mut anc = Vec::new();
        let mut cur = Path::new(&target).parent();
        while let Some(a) = cur {
            let s = a.to_string_lossy().into_owned();
            if !under(&s, root) || s == root.trim_end_matches('/') {
                break;
            }
            anc.push(s);
            cur = a.parent();
        }
        for a in anc.into_iter().rev() {
            if pinned.insert(a.clone()) {
                v.ops.push(Op::Pin { path: a });
            }
        }
        v.ops.push(Op::ReadOnly { path: target });
    }
    v.ops.extend(excludes(&v.placeholders));
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
    // of the mask, with their read-only paths (a conversation's scratch lives under the
    // masked runtime dir).
    let ro_ops: Vec<Op> = v
        .ops
        .iter()
        .filter(|o| matches!(o, Op::Pin { .. } | Op::ReadOnly { .. }))
        .cloned()
        .collect();
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
        for o in &ro_ops {
            if let Op::Pin { path } | Op::ReadOnly { path } = o {
                if under(path, r) {
                    v.ops.push(o.clone());
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(root: &Path, exclude: &str) {
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        std::fs::write(root.join(".git/info/exclude"), exclude).unwrap();
    }

    fn ph(p: &Path) -> Placeholder {
        Placeholder {
            path: p.to_string_lossy().into_owned(),
        }
    }

    #[test]
    fn excludes_add_the_placeholders_of_each_repository_root() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        repo(&a, "target/");
        repo(&b, "");
        let ops = excludes(&[
            ph(&a.join(".envrc")),
            ph(&a.join(".vscode")),
            ph(&a.join("we*ird[1]")),
            ph(&a.join(".git/config.worktree")),
            ph(&b.join(".idea")),
            ph(&d.path().join("norepo/.envrc")),
        ]);
        let mut got: Vec<(String, String)> = ops
            .into_iter()
            .map(|o| match o {
                Op::Exclude { path, content } => (path, content),
                other => panic!("{other:?}"),
            })
            .collect();
        got.sort();
        let head = "# efr sandbox: this call's placeholders for missing protected paths\n";
        assert_eq!(
            got,
            vec![
                (
                    a.join(".git/info/exclude").to_string_lossy().into_owned(),
                    format!("target/\n{head}/.envrc\n/.vscode\n/we\\*ird\\[1]\n")
                ),
                (
                    b.join(".git/info/exclude").to_string_lossy().into_owned(),
                    format!("{head}/.idea\n")
                ),
            ]
        );
    }

    #[test]
    fn excludes_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let big = "x".repeat(60 << 10);
        let mut phs = Vec::new();
        for i in 0..20 {
            let r = d.path().join(format!("r{i}"));
            repo(&r, &big);
            phs.push(ph(&r.join(".envrc")));
        }
        let ops = excludes(&phs);
        let total: usize = ops
            .iter()
            .map(|o| match o {
                Op::Exclude { content, .. } => content.len(),
                _ => 0,
            })
            .sum();
        assert!(!ops.is_empty() && ops.len() < 16, "{}", ops.len());
        assert!(total <= MAX_EXCLUDE_TOTAL, "{total}");
        // Over the per-file bound: left alone.
        let r = d.path().join("huge");
        repo(&r, &"y".repeat(MAX_EXCLUDE + 1));
        assert!(excludes(&[ph(&r.join(".envrc"))]).is_empty());
    }
}
