//! The deletes a call made in a real cache, held (not applied) in the state dir's store
//! until the user applies them (`efr-sandbox cache apply`, `sandbox.cache_delete_apply`):
//! what a delete was (inode, type, change time) so that a stale one is refused, the store
//! written whole and renamed, the apply by file descriptor so that no link is followed.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use efr_sandbox_wire::{
    Action, ExitKind, ExitRecord, ExitSource, Facts, JudgedBy, Judgement, Needs, Target,
    TargetClass, TargetOp, Verdict,
};
use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};

use super::{ApplyError, MAX_HELD, lock, private_dirs};

/// One delete a call made in a real cache, held until applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldDelete {
    /// The path deleted (absolute, in the real cache).
    pub path: String,
    /// The cache it is in.
    pub cache: String,
    /// What it was when the call deleted it: its inode, type and change time, so that a
    /// delete of something that changed since is stale. This is its inode.
    pub ino: u64,
    /// Whether it was a directory.
    pub dir: bool,
    /// Its change time's seconds since the epoch.
    pub ctime: i64,
    /// Its change time's nanoseconds.
    pub ctime_nsec: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    deletes: Vec<HeldDelete>,
}

/// The file of the held deletes in the state dir `state`.
pub fn store_path(state: &Path) -> PathBuf {
    state.join("cache-deletes.json")
}

fn read_store(state: &Path) -> std::io::Result<Store> {
    match std::fs::read(store_path(state)) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
        Err(e) => Err(e),
    }
}

fn write_store(state: &Path, s: &Store) -> std::io::Result<()> {
    private_dirs(state)?;
    let p = store_path(state);
    let tmp = state.join(format!(".cache-deletes.{}.tmp", crate::sys::random_hex(8)?));
    let r = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &p)?;
        File::open(state)?.sync_all()
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Remembers held deletes (a path held again replaces its older record).
pub(super) fn hold(state: &Path, new: &[HeldDelete]) -> Result<(), ApplyError> {
    let store_err = |e| ApplyError::Store {
        path: store_path(state).display().to_string(),
        source: e,
    };
    let _l = lock(state, "cache-deletes.lock").map_err(store_err)?;
    let mut s = read_store(state).map_err(store_err)?;
    s.deletes.retain(|d| !new.iter().any(|n| n.path == d.path));
    s.deletes.extend(new.iter().cloned());
    if s.deletes.len() > MAX_HELD {
        let cut = s.deletes.len() - MAX_HELD;
        s.deletes.drain(..cut);
    }
    write_store(state, &s).map_err(store_err)
}

/// The held deletes.
pub fn held(state: &Path) -> std::io::Result<Vec<HeldDelete>> {
    Ok(read_store(state)?.deletes)
}

/// What applying held deletes did.
#[derive(Debug, Default)]
pub struct Applied {
    /// The paths removed, in the order asked.
    pub paths: Vec<String>,
    /// The bytes freed: the sizes of the plain files removed that had no other link.
    pub freed_bytes: u64,
}

/// Applies the held deletes of `paths`: every one must be held and unchanged since the
/// call deleted it (else nothing is applied); each is removed without following a link
/// (from its cache's directory, opened beneath the cache).
pub fn apply(state: &Path, paths: &[String]) -> Result<Applied, ApplyError> {
    let store_err = |e| ApplyError::Store {
        path: store_path(state).display().to_string(),
        source: e,
    };
    let _l = lock(state, "cache-deletes.lock").map_err(store_err)?;
    let mut s = read_store(state).map_err(store_err)?;
    let mut todo = Vec::new();
    let mut seen = BTreeSet::new();
    for p in paths {
        if !seen.insert(p.trim_end_matches('/')) {
            continue;
        }
        let p = p.trim_end_matches('/');
        let Some(d) = s.deletes.iter().find(|d| d.path == p) else {
            return Err(ApplyError::Unknown {
                path: p.to_string(),
            });
        };
        let (root, rel) = open_held(d).map_err(|_| ApplyError::Stale {
            path: p.to_string(),
        })?;
        let parent = crate::sys::open_beneath(
            &root,
            rel.parent().unwrap_or(Path::new("")),
            OFlag::O_DIRECTORY | OFlag::O_RDONLY,
            0,
        )
        .map_err(|_| ApplyError::Stale {
            path: p.to_string(),
        })?;
        let name = rel.file_name().unwrap_or_default().to_os_string();
        let st = nix::sys::stat::fstatat(
            &parent,
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|_| ApplyError::Stale {
            path: p.to_string(),
        })?;
        let dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if st.st_ino != d.ino
            || dir != d.dir
            || st.st_ctime != d.ctime
            || st.st_ctime_nsec != d.ctime_nsec
        {
            return Err(ApplyError::Stale {
                path: p.to_string(),
            });
        }
        todo.push((p.to_string(), parent, name, dir));
    }
    let mut out = Applied::default();
    for (p, parent, name, dir) in todo {
        let io = |e: std::io::Error| ApplyError::Io {
            path: p.clone(),
            source: e,
        };
        out.freed_bytes += remove_at(&parent, &name, dir).map_err(io)?;
        out.paths.push(p.clone());
        s.deletes.retain(|d| d.path != p);
        write_store(state, &s).map_err(store_err)?;
    }
    Ok(out)
}

fn open_held(d: &HeldDelete) -> std::io::Result<(OwnedFd, PathBuf)> {
    let cache = Path::new(&d.cache);
    let rel = Path::new(&d.path)
        .strip_prefix(cache)
        .map_err(|_| std::io::Error::other("not in its cache"))?
        .to_path_buf();
    if rel.as_os_str().is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(std::io::Error::other("not below its cache"));
    }
    let root = File::open(cache)?.into();
    Ok((root, rel))
}

/// Removes `name` of the directory `dir` (a directory with everything in it), links never
/// followed; the bytes freed (the sizes of the plain files).
fn remove_at(dir: &OwnedFd, name: &std::ffi::OsStr, is_dir: bool) -> std::io::Result<u64> {
    use nix::unistd::{UnlinkatFlags, unlinkat};
    if !is_dir {
        let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
        unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?;
        let size = if st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_nlink <= 1 {
            // A plain file's size is never negative.
            u64::try_from(st.st_size).unwrap_or(0)
        } else {
            0
        };
        return Ok(size);
    }
    let sub = crate::sys::open_beneath(
        dir,
        Path::new(name),
        OFlag::O_DIRECTORY | OFlag::O_RDONLY,
        0,
    )?;
    let mut names = Vec::new();
    let mut d = nix::dir::Dir::from_fd(sub.try_clone()?)?;
    for e in d.iter() {
        let e = e?;
        let n = std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
        if n == "." || n == ".." {
            continue;
        }
        let is_dir = matches!(e.file_type(), Some(nix::dir::Type::Directory));
        names.push((n, is_dir));
    }
    let mut freed = 0;
    for (n, is_dir) in names {
        freed += remove_at(&sub, &n, is_dir)?;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)?;
    Ok(freed)
}

/// The exit record of one held delete.
pub fn delete_record(n: usize, d: &HeldDelete, line: &str) -> ExitRecord {
    ExitRecord {
        id: format!("cache-delete-{}", n + 1),
        source: ExitSource::CacheDelete,
        kind: ExitKind::CacheDelete,
        summary: format!("delete {} in the cache {} (held)", d.path, d.cache),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            targets: vec![Target {
                path: d.path.clone(),
                class: TargetClass::Cache,
                op: TargetOp::Delete,
                backup_before_write: false,
                masked: false,
            }],
            ..Default::default()
        },
        needs: Needs::Contained { grants: Vec::new() },
        judgement: Judgement {
            verdict: Verdict::Review,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the call deleted {} in a real cache; the delete was held, not applied: \
                 `efr-sandbox cache apply {}` (or sandbox.cache_delete_apply) applies it",
                d.path, d.path
            )],
        },
    }
}
