//! Paths: the one place for canonical paths and home expansion.
//!
//! `resolve` and `canonical` resolve a path as the kernel does: every link followed, `..`
//! taken physically, and the part that does not exist appended lexically. [`expand_home`]
//! expands a leading `~` or `~/` as the shell does. The explanation, the config's view and
//! the classifier take paths from here, and so do the crates above (efr-call, the service's
//! CLI): [`expand_home`] is the workspace's one home expansion. This module imports no
//! other module of the crate.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

use efr_sandbox_wire::FileKind;

/// Links followed before the resolution gives up (as the kernel's `ELOOP`).
const MAX_LINKS: usize = 40;

/// One link passed on the way.
#[derive(Debug, Clone)]
pub(crate) struct LinkStep {
    /// Where the link is (its parent resolved).
    pub at: PathBuf,
    /// What it says.
    pub points_to: PathBuf,
    /// The index of the asked path's component it stands for; `None` for a link met inside
    /// another link's target.
    pub orig: Option<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Walk {
    pub canonical: PathBuf,
    /// Every component exists (the canonical path is there).
    pub exists: bool,
    pub links: Vec<LinkStep>,
    /// The number of components of the asked path.
    pub orig_len: usize,
}

enum Part {
    Root,
    Parent,
    Name(OsString),
}

fn parts(path: &Path) -> Vec<Part> {
    path.components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(Part::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Parent),
            Component::Normal(n) => Some(Part::Name(n.to_os_string())),
        })
        .collect()
}

/// Resolves an absolute path.
pub(crate) fn resolve(path: &Path) -> Walk {
    let mut queue: VecDeque<(Part, Option<usize>)> = VecDeque::new();
    let mut n = 0usize;
    for p in parts(path) {
        let idx = match p {
            Part::Root => None,
            _ => {
                n += 1;
                Some(n - 1)
            }
        };
        queue.push_back((p, idx));
    }
    let mut cur = PathBuf::from("/");
    let mut exists = true;
    let mut cur_is_dir = true;
    let mut links = Vec::new();
    while let Some((part, orig)) = queue.pop_front() {
        match part {
            Part::Root => {
                cur = PathBuf::from("/");
                cur_is_dir = true;
            }
            Part::Parent => {
                cur.pop();
                cur_is_dir = true;
            }
            Part::Name(name) => {
                let next = cur.join(&name);
                if !exists || !cur_is_dir {
                    exists = false;
                    cur = next;
                    continue;
                }
                match fs::symlink_metadata(&next) {
                    Ok(m) if m.file_type().is_symlink() => {
                        let target = match fs::read_link(&next) {
                            Ok(t) if links.len() < MAX_LINKS => t,
                            _ => {
                                exists = false;
                                cur = next;
                                continue;
                            }
                        };
                        links.push(LinkStep {
                            at: next,
                            points_to: target.clone(),
                            orig,
                        });
                        for p in parts(&target).into_iter().rev() {
                            queue.push_front((p, None));
                        }
                    }
                    Ok(m) => {
                        cur_is_dir = m.is_dir();
                        cur = next;
                    }
                    Err(_) => {
                        exists = false;
                        cur = next;
                    }
                }
            }
        }
    }
    Walk {
        canonical: cur,
        exists,
        links,
        orig_len: n,
    }
}

/// The canonical form of an absolute path (every link resolved, the missing rest lexical).
pub(crate) fn canonical(path: &Path) -> PathBuf {
    resolve(path).canonical
}

/// What a file type is.
pub(crate) fn kind_of(m: &fs::Metadata) -> FileKind {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_symlink() {
        FileKind::Symlink
    } else if t.is_dir() {
        FileKind::Dir
    } else if t.is_socket() {
        FileKind::Socket
    } else if t.is_fifo() {
        FileKind::Fifo
    } else if t.is_block_device() {
        FileKind::BlockDevice
    } else if t.is_char_device() {
        FileKind::CharDevice
    } else {
        FileKind::File
    }
}

/// The kind of what is at `path` without following a last link; `Missing` when nothing is.
pub(crate) fn lkind(path: &Path) -> FileKind {
    fs::symlink_metadata(path)
        .map(|m| kind_of(&m))
        .unwrap_or(FileKind::Missing)
}

/// The kind of what `path` leads to, every link followed; `Missing` when nothing is.
pub(crate) fn kind(path: &Path) -> FileKind {
    fs::metadata(path)
        .map(|m| kind_of(&m))
        .unwrap_or(FileKind::Missing)
}

/// Home expansion, the one copy of the workspace: `~` is `home`, `~/rest` is `home/rest`,
/// anything else (`~user/...`, a relative or an absolute path) is returned as it is.
///
/// Slashes after `~/` are taken off, so `~//etc/x` is `home/etc/x`: a path written under the
/// home stays under it (joining `/etc/x` onto the home would give `/etc/x`). `$HOME//x` of a
/// config path reads the same ([`crate::config::Env::expand`]).
pub fn expand_home(text: &str, home: &Path) -> PathBuf {
    expand_home_path(Path::new(text), home)
}

/// [`expand_home`] of a path that need not be UTF-8.
pub fn expand_home_path(p: &Path, home: &Path) -> PathBuf {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bytes = p.as_os_str().as_bytes();
    if bytes == b"~" {
        return home.to_path_buf();
    }
    match bytes.strip_prefix(b"~/") {
        Some(rest) => {
            let rest = &rest[rest.iter().take_while(|b| **b == b'/').count()..];
            if rest.is_empty() {
                home.to_path_buf()
            } else {
                home.join(OsStr::from_bytes(rest))
            }
        }
        None => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_expansion() {
        let h = Path::new("/home/u");
        for (text, want) in [
            ("~", "/home/u"),
            ("~/", "/home/u"),
            ("~/x", "/home/u/x"),
            ("~/.config/efr", "/home/u/.config/efr"),
            // under the home, never the root's /etc
            ("~//etc/x", "/home/u/etc/x"),
            ("~///etc", "/home/u/etc"),
            ("~//", "/home/u"),
            // not a home path
            ("~user/x", "~user/x"),
            ("~x", "~x"),
            ("/etc/x", "/etc/x"),
            ("rel/x", "rel/x"),
            ("", ""),
            ("a/~/b", "a/~/b"),
        ] {
            assert_eq!(expand_home(text, h), PathBuf::from(want), "{text}");
        }
    }
}
