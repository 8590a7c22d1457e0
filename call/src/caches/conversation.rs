//! A conversation's own layer of each cache: what its calls left in the cache that was not
//! merged into the real cache (installed programs, unverified downloads, build caches),
//! kept for its next calls and for no one else.
//!
//! The layer is `<state>/conversations/ID/KEY/` (KEY the cache's key), in the service's
//! private state dir, on the file system of the calls' upper dirs. A call of the
//! conversation mounts it as the upper lower dir of its overlay (`lowerdir=CONV:REAL`);
//! after the call, under a lock per conversation and cache, what its upper dir holds is
//! moved (renamed, never copied) into it: a whiteout or an opaque directory replaces what
//! the layer had there, so that the next call sees what this one left. Layers not used for
//! `sandbox.conversation_cache_days` are removed by the merge.
//!
//! A layer is a directory on the host (in the state dir), so a `.git` file anywhere could
//! name a directory of it as a git dir. Each call's writes there were held to the
//! supervisor's git rule in its own view, but two calls of one conversation at once may
//! each leave half of a git dir (one a `config`, the other a `HEAD`): where a move puts a
//! name that makes or feeds a git dir, the layer's directory is held to the same rule after
//! the move ([`settle_git`]): a config git would run something from, a linked config or
//! hooks dir, a hook, is taken out.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::OFlag;

/// The file whose change time says when a conversation's layers were last used.
const LAST_USE: &str = "last-use";
/// The file naming each layer's cache (`KEY\tPATH` lines).
const CACHES: &str = "caches";

/// The dir of a conversation's layers.
pub fn dir(state: &Path, id: &str) -> PathBuf {
    state.join("conversations").join(id)
}

/// The conversation's layer of the cache `cache` (made, 0700, when missing), its use
/// stamped.
pub fn layer(state: &Path, id: &str, cache: &Path) -> std::io::Result<PathBuf> {
    let d = dir(state, id);
    let key = super::key(cache);
    let l = d.join(&key);
    super::private_dirs(&l)?;
    let names = d.join(CACHES);
    let line = format!("{key}\t{}\n", cache.display());
    let known = std::fs::read_to_string(&names).unwrap_or_default();
    if !known.lines().any(|l| format!("{l}\n") == line) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&names)?;
        f.write_all(line.as_bytes())?;
    }
    stamp(&d);
    Ok(l)
}

fn stamp(d: &Path) {
    let _ = std::fs::write(d.join(LAST_USE), b"");
}

/// Whether `p` is an overlayfs whiteout (a character device 0/0).
fn whiteout(md: &std::fs::Metadata) -> bool {
    md.file_type().is_char_device() && md.rdev() == 0
}

fn opaque(p: &Path) -> bool {
    crate::sys::lgetxattr(p, super::OPAQUE_XATTR)
        .ok()
        .flatten()
        .is_some_and(|v| v == b"y")
}

/// Removes `p` whatever it is (a directory with everything in it); nothing there is fine.
fn remove(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(md) if md.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Moves what the upper dir `upper` holds below `rel` into the conversation's layer
/// `conv`: renames only (both are in the state dir). `real` is the real cache's root: a
/// whiteout of a name it does not have hides nothing and is dropped. Where a git name lands
/// in a directory the layer had, that directory is held to the git rule (`safe`: the keys a
/// config may hold); what it took out is added to `out`, one line each.
pub fn move_in(
    upper: &Path,
    conv: &Path,
    rel: &Path,
    real: &std::os::fd::OwnedFd,
    safe: &[String],
    out: &mut Vec<String>,
) -> std::io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(upper.join(rel))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    let git = names
        .iter()
        .any(|n| GIT_NAMES.iter().any(|g| n.as_encoded_bytes() == *g))
        || rel.file_name().is_some_and(|n| n == "hooks");
    let level = conv.join(rel);
    for name in names {
        let r = rel.join(&name);
        let (u, c) = (upper.join(&r), conv.join(&r));
        let md = std::fs::symlink_metadata(&u)?;
        if whiteout(&md) {
            remove(&c)?;
            let in_real = crate::sys::open_beneath(real, &r, OFlag::O_PATH, 0).is_ok();
            if in_real {
                std::fs::rename(&u, &c)?;
            }
            continue;
        }
        if md.is_dir() && !opaque(&u) {
            let cm = std::fs::symlink_metadata(&c).ok();
            if cm.as_ref().is_some_and(|m| m.is_dir()) {
                move_in(upper, conv, &r, real, safe, out)?;
                continue;
            }
        }
        remove(&c)?;
        std::fs::rename(&u, &c)?;
    }
    if git {
        settle_git(&level, safe, out);
        if rel.file_name().is_some_and(|n| n == "hooks") {
            if let Some(p) = level.parent() {
                settle_git(p, safe, out);
            }
        }
    }
    Ok(())
}

/// The names that make or feed a git dir (see `efr_launcher::supervise::gitdir`).
const GIT_NAMES: [&[u8]; 6] = [
    b"HEAD",
    b"objects",
    b"refs",
    b"config",
    b"config.worktree",
    b"hooks",
];

/// Holds the directory `d` of a layer to the supervisor's git rule when git would take it
/// as a git dir: each config must be a plain file of keys on `safe` in the subset of git's
/// syntax git writes, the hooks dir a directory of `*.sample` files; what is not is
/// removed and said in `out`.
pub fn settle_git(d: &Path, safe: &[String], out: &mut Vec<String>) {
    use efr_launcher::supervise::gitdir;
    let fallback: Vec<String>;
    let safe = if safe.is_empty() {
        fallback = efr_launcher::supervise::FALLBACK_GIT_SAFE_KEYS
            .iter()
            .map(|k| k.to_string())
            .collect();
        &fallback[..]
    } else {
        safe
    };
    if !gitdir::git_like(|n| {
        std::fs::symlink_metadata(d.join(std::ffi::OsStr::from_bytes(n))).is_ok()
    }) {
        return;
    }
    let mut take = |p: PathBuf, why: &str| {
        let done = remove(&p);
        out.push(match done {
            Ok(()) => format!(
                "{}: {why}: removed from the conversation's layer",
                p.display()
            ),
            Err(e) => format!("{}: {why}: cannot remove it: {e}", p.display()),
        });
    };
    for name in gitdir::CONFIGS {
        let p = d.join(std::ffi::OsStr::from_bytes(name));
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            continue;
        }
        let why = if !md.is_file() || md.len() > efr_sandbox_wire::gitconfig::MAX_CONFIG as u64 {
            Some("a git config that is not a plain file of at most 1 MiB".to_string())
        } else {
            match std::fs::read(&p) {
                Ok(text) => gitdir::config_text(&text, safe),
                Err(e) => Some(format!("a git config that cannot be read: {e}")),
            }
        };
        if let Some(why) = why {
            take(p, &why);
        }
    }
    let hooks = d.join("hooks");
    match std::fs::symlink_metadata(&hooks) {
        Ok(md) if md.is_dir() => {
            let names: Vec<_> = std::fs::read_dir(&hooks)
                .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            for n in names {
                if !n.as_encoded_bytes().ends_with(b".sample") {
                    take(hooks.join(n), "a hook of a git dir");
                }
            }
        }
        Ok(_) => take(hooks, "a hooks dir that is not a directory"),
        Err(_) => {}
    }
}

/// One conversation layer, for `efr-sandbox cache list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The conversation.
    pub conversation: String,
    /// The cache it is a layer of.
    pub cache: String,
    /// Its size: the bytes of its plain files.
    pub bytes: u64,
    /// When the conversation last used its layers.
    pub last_use: Option<SystemTime>,
}

fn size(p: &Path) -> u64 {
    let Ok(md) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if md.is_dir() {
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| size(&e.path())).sum())
            .unwrap_or(0)
    } else if md.is_file() {
        md.len()
    } else {
        0
    }
}

fn last_use(d: &Path) -> Option<SystemTime> {
    std::fs::metadata(d.join(LAST_USE))
        .or_else(|_| std::fs::metadata(d))
        .and_then(|m| m.modified())
        .ok()
}

/// The conversations' layers, with their sizes.
pub fn list(state: &Path) -> Vec<Listed> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(state.join("conversations")) else {
        return out;
    };
    let mut ids: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
    ids.sort();
    for id in ids {
        let d = state.join("conversations").join(&id);
        let names = std::fs::read_to_string(d.join(CACHES)).unwrap_or_default();
        for line in names.lines() {
            let Some((key, cache)) = line.split_once('\t') else {
                continue;
            };
            if !d.join(key).is_dir() {
                continue;
            }
            out.push(Listed {
                conversation: id.to_string_lossy().into_owned(),
                cache: cache.to_string(),
                bytes: size(&d.join(key)),
                last_use: last_use(&d),
            });
        }
    }
    out
}

/// Removes a conversation's layers (under each cache's conversation lock); whether there
/// were any.
pub fn clear(state: &Path, id: &str) -> std::io::Result<bool> {
    let d = dir(state, id);
    if !d.is_dir() {
        return Ok(false);
    }
    let names = std::fs::read_to_string(d.join(CACHES)).unwrap_or_default();
    let mut locks = Vec::new();
    for line in names.lines() {
        if let Some((key, _)) = line.split_once('\t') {
            locks.push(super::lock(state, &lock_name(id, key))?);
        }
    }
    std::fs::remove_dir_all(&d)?;
    drop(locks);
    Ok(true)
}

/// The lock of a conversation's layer of one cache.
pub fn lock_name(id: &str, key: &str) -> String {
    format!("conversation-{id}-{key}.lock")
}

/// Removes the conversations whose layers were not used for `days` days; the ids removed.
pub fn expire(state: &Path, days: u64) -> Vec<String> {
    let mut gone = Vec::new();
    let Ok(rd) = std::fs::read_dir(state.join("conversations")) else {
        return gone;
    };
    let limit = Duration::from_secs(days.saturating_mul(86_400));
    for e in rd.flatten() {
        let d = e.path();
        let old = last_use(&d)
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > limit);
        let id = e.file_name().to_string_lossy().into_owned();
        if old && clear(state, &id).unwrap_or(false) {
            gone.push(id);
        }
    }
    gone
}

/// Marks a conversation's layers used now.
pub fn touch(state: &Path, id: &str) {
    let d = dir(state, id);
    if d.is_dir() {
        stamp(&d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    fn whiteout_at(p: &Path) {
        nix::sys::stat::mknod(
            p,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("mknod of a whiteout at {}: {e}", p.display()));
    }

    /// What a call's upper dir holds replaces what the conversation's layer had: a file, a
    /// whiteout of the real cache's entry (kept, so the entry stays hidden), a whiteout of
    /// a name only the layer had (the layer's entry goes, the whiteout with it), an opaque
    /// directory (the layer's directory replaced whole), a directory both have (merged).
    #[test]
    fn an_upper_dir_moves_into_the_layer_as_the_next_call_must_see_it() {
        // Not /tmp: a tmpfs may keep no user xattrs.
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let (upper, conv, real) = (d.path().join("u"), d.path().join("c"), d.path().join("r"));
        for p in [&upper, &conv, &real] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(real.join("hidden"), "r").unwrap();
        std::fs::create_dir_all(conv.join("only-conv")).unwrap();
        std::fs::write(conv.join("only-conv/f"), "c").unwrap();
        std::fs::create_dir_all(conv.join("opaque/old")).unwrap();
        std::fs::create_dir_all(conv.join("both")).unwrap();
        std::fs::write(conv.join("both/kept"), "c").unwrap();
        std::fs::write(conv.join("file"), "old").unwrap();
        whiteout_at(&upper.join("hidden"));
        whiteout_at(&upper.join("only-conv"));
        std::fs::create_dir_all(upper.join("opaque/new")).unwrap();
        crate::sys::lsetxattr(&upper.join("opaque"), crate::caches::OPAQUE_XATTR, b"y").unwrap();
        std::fs::create_dir_all(upper.join("both")).unwrap();
        std::fs::write(upper.join("both/added"), "u").unwrap();
        std::fs::write(upper.join("file"), "new").unwrap();
        let root: OwnedFd = std::fs::File::open(&real).unwrap().into();
        let mut out = Vec::new();
        move_in(&upper, &conv, Path::new(""), &root, &[], &mut out).unwrap();
        assert!(out.is_empty(), "{out:?}");
        let md = std::fs::symlink_metadata(conv.join("hidden")).unwrap();
        assert!(whiteout(&md), "the real entry stays hidden");
        assert!(std::fs::symlink_metadata(conv.join("only-conv")).is_err());
        assert!(conv.join("opaque/new").is_dir() && !conv.join("opaque/old").exists());
        assert!(opaque(&conv.join("opaque")));
        assert_eq!(
            std::fs::read_to_string(conv.join("both/kept")).unwrap(),
            "c"
        );
        assert_eq!(
            std::fs::read_to_string(conv.join("both/added")).unwrap(),
            "u"
        );
        assert_eq!(std::fs::read_to_string(conv.join("file")).unwrap(), "new");
    }

    /// Two calls of one conversation each leave half of a git dir in a cache: the first a
    /// config that runs code (no git dir then), the second `HEAD`, `objects`, `refs` and a
    /// hook. Once both are moved in, the layer's directory is a git dir holding neither the
    /// config nor the hook; a git dir's safe config and samples stay.
    #[test]
    fn halves_of_a_git_dir_from_two_calls_hold_no_code_in_the_layer() {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let (conv, real) = (d.path().join("c"), d.path().join("r"));
        for p in [&conv, &real] {
            std::fs::create_dir_all(p).unwrap();
        }
        let root: OwnedFd = std::fs::File::open(&real).unwrap().into();
        let first = d.path().join("u1");
        std::fs::create_dir_all(first.join("x")).unwrap();
        std::fs::write(
            first.join("x/config"),
            "[core]\n\tfsmonitor = touch /tmp/m\n",
        )
        .unwrap();
        let mut out = Vec::new();
        move_in(&first, &conv, Path::new(""), &root, &[], &mut out).unwrap();
        assert!(out.is_empty(), "no git dir yet: {out:?}");
        let second = d.path().join("u2");
        for p in [
            "x/objects",
            "x/refs",
            "x/hooks",
            "ok/objects",
            "ok/refs",
            "ok/hooks",
        ] {
            std::fs::create_dir_all(second.join(p)).unwrap();
        }
        std::fs::write(second.join("x/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(second.join("x/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(second.join("ok/config"), "[core]\n\tbare = true\n").unwrap();
        std::fs::write(second.join("ok/hooks/pre-commit.sample"), "").unwrap();
        move_in(&second, &conv, Path::new(""), &root, &[], &mut out).unwrap();
        assert!(!conv.join("x/config").exists(), "{out:?}");
        assert!(!conv.join("x/hooks/pre-commit").exists(), "{out:?}");
        assert!(conv.join("x/HEAD").exists());
        assert!(out.iter().any(|l| l.contains("core.fsmonitor")), "{out:?}");
        // A new directory moved whole is the call's own view, checked by the supervisor.
        assert!(
            conv.join("ok/config").exists() && conv.join("ok/hooks/pre-commit.sample").exists()
        );
        // A git dir the layer had that a later call feeds a hook.
        let third = d.path().join("u3");
        std::fs::create_dir_all(third.join("ok/hooks")).unwrap();
        std::fs::write(third.join("ok/hooks/post-checkout"), "#!/bin/sh\n").unwrap();
        move_in(&third, &conv, Path::new(""), &root, &[], &mut out).unwrap();
        assert!(!conv.join("ok/hooks/post-checkout").exists(), "{out:?}");
    }
}
