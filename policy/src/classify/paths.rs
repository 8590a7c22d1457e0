//! The class of a path a line touches, as a contained call of the turn sees it.

use std::path::{Component, Path, PathBuf};

use efr_sandbox_wire::TargetClass;

use crate::config::rules::{RulePath, pattern_covers};
use crate::context::{Context, PathRule, rule_covers};

/// What efr knows of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathInfo {
    /// Where the path lies, as an exit record names it (project, scratch, home, masked,
    /// ...).
    pub class: TargetClass,
    /// A contained call of the turn can write it.
    pub writable: bool,
    /// The mask that hides it.
    pub masked: Option<String>,
    /// The floor it is.
    pub floor: Option<String>,
    /// The read-only-inside rule that protects it in a writable root.
    pub read_only: Option<String>,
    /// The project root it is in.
    pub root: Option<PathBuf>,
}

fn first_covering<'a>(
    rules: &'a [PathRule],
    path: &Path,
    roots: &[PathBuf],
) -> Option<&'a PathRule> {
    rules.iter().find(|r| rule_covers(r, path, roots))
}

/// The class of an absolute, normalised path. `granted` are write grants of the call.
pub fn classify_path(
    ctx: &Context,
    roots: &[PathBuf],
    granted: &[PathBuf],
    path: &Path,
) -> PathInfo {
    let mut info = PathInfo {
        class: TargetClass::System,
        writable: false,
        masked: None,
        floor: None,
        read_only: None,
        root: None,
    };
    if let Some(m) = first_covering(&ctx.masks, path, roots) {
        info.masked = Some(m.reason.clone());
    }
    if let Some(f) = first_covering(&ctx.floor_paths, path, roots) {
        info.floor = Some(f.reason.clone());
    }
    let root = roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len());
    if let Some(root) = root {
        info.root = Some(root.clone());
        let rel = path.strip_prefix(root).unwrap_or(Path::new(""));
        let ro = ctx.read_only_inside.iter().find(|r| match &r.path {
            RulePath::InRoot(p) => pattern_covers(p, rel),
            RulePath::Abs(p) => path.starts_with(p),
            RulePath::Unset => false,
        });
        info.read_only = ro.map(|r| r.reason.clone());
        let build = rel.components().any(|c| match c {
            Component::Normal(n) => ctx.build_output.iter().any(|b| n == b.as_str()),
            _ => false,
        });
        info.class = if build {
            TargetClass::BuildOutput
        } else {
            TargetClass::Project
        };
        info.writable = info.read_only.is_none() && info.masked.is_none() && info.floor.is_none();
    } else if ctx.scratch.as_ref().is_some_and(|s| path.starts_with(s)) {
        info.class = TargetClass::Scratch;
        info.writable = true;
    } else if path.starts_with(&ctx.tmp) && path != ctx.tmp {
        info.class = TargetClass::Tmp;
        info.writable = true;
    } else if first_covering(&ctx.trash, path, roots).is_some() {
        info.class = TargetClass::Trash;
    } else if first_covering(&ctx.caches, path, roots).is_some() {
        info.class = TargetClass::Cache;
    } else if path.starts_with(&ctx.home) {
        info.class = TargetClass::Home;
    }
    if root.is_none() && first_covering(&ctx.writable, path, roots).is_some() {
        info.writable = info.masked.is_none() && info.floor.is_none();
    }
    if granted.iter().any(|g| path.starts_with(g)) && info.floor.is_none() {
        info.writable = true;
    }
    if info.floor.is_some() {
        info.class = TargetClass::Floor;
    } else if info.masked.is_some() {
        info.class = TargetClass::Masked;
    }
    info
}

/// `path` with the home written as `~`.
pub fn display(ctx: &Context, path: &Path) -> String {
    if let Ok(rest) = path.strip_prefix(&ctx.home) {
        if rest.as_os_str().is_empty() {
            return "~".into();
        }
        return format!("~/{}", rest.display());
    }
    path.display().to_string()
}

/// A device node whose write wipes a disk.
pub fn is_disk_device(path: &Path) -> bool {
    let s = path.to_string_lossy();
    let Some(name) = s.strip_prefix("/dev/") else {
        return false;
    };
    [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "dm-", "md", "loop", "mapper/", "disk/", "sr",
        "nbd", "zd", "rbd",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// A device every contained call has (or a name for the call's own streams).
pub fn is_harmless_device(path: &Path) -> bool {
    let s = path.to_string_lossy();
    matches!(
        s.as_ref(),
        "/dev/null"
            | "/dev/zero"
            | "/dev/full"
            | "/dev/random"
            | "/dev/urandom"
            | "/dev/tty"
            | "/dev/stdout"
            | "/dev/stderr"
            | "/dev/stdin"
            | "/dev/ptmx"
    ) || s.starts_with("/dev/fd/")
        || s.starts_with("/dev/pts/")
        || s.starts_with("/dev/shm/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::normalize;

    #[test]
    fn classes() {
        let ctx = Context::defaults("/home/u");
        let roots = vec![PathBuf::from("/home/u/p")];
        let c = |p: &str| classify_path(&ctx, &roots, &[], Path::new(p));
        assert_eq!(c("/home/u/p/src/a.rs").class, TargetClass::Project);
        assert!(c("/home/u/p/src/a.rs").writable);
        assert_eq!(
            c("/home/u/p/target/debug/x").class,
            TargetClass::BuildOutput
        );
        assert!(!c("/home/u/p/.git/hooks/pre-push").writable);
        assert_eq!(c("/home/u/p/.git/hooks/pre-push").class, TargetClass::Floor);
        assert!(!c("/home/u/p/.git/config").writable);
        assert_eq!(c("/home/u/.bashrc").class, TargetClass::Floor);
        assert_eq!(c("/home/u/.ssh/id_rsa").class, TargetClass::Masked);
        assert_eq!(c("/home/u/.cache/pip").class, TargetClass::Cache);
        assert_eq!(c("/home/u/notes").class, TargetClass::Home);
        assert_eq!(c("/etc/hosts").class, TargetClass::System);
        assert_eq!(c("/tmp/x").class, TargetClass::Tmp);
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
    }
}
