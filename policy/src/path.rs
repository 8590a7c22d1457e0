//! Paths: the one place for canonical paths and home expansion.
//!
//! `resolve` and `canonical` resolve a path as the kernel does: every link followed, `..`
//! taken physically, and the part that does not exist appended lexically. [`expand_home`]
//! expands a leading `~` or `~/` as the shell does. The explanation, the config's view and
//! the classifier take paths from here, and so do the crates above (efr-call, the service's
//! CLI): [`expand_home`] is the workspace's one home expansion. This module imports no
//! other module of the crate.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
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

/// What one path component is, as [`resolve`] needs it.
#[derive(Debug, Clone)]
enum Step {
    /// A link, and what it says (`None`: it could not be read).
    Link(Option<PathBuf>),
    /// Something that is not a link; whether it is a directory.
    Entry {
        dir: bool,
    },
    Missing,
}

thread_local! {
    /// The steps looked up while [`memoized`] runs on this thread.
    /// Keyed by the path's bytes: `Path`'s own hash walks its components, which cost more
    /// than the lookup saved.
    static MEMO: RefCell<Option<HashMap<OsString, Step>>> = const { RefCell::new(None) };
}

/// Runs `f` with every component `resolve` looks up remembered until `f` returns: one
/// view of a launch resolves hundreds of paths below a few directories (each mask and
/// rule, for each root), and looked the same ones up again and again (822 `statx` calls
/// for 165 paths in one `run`). The answers are those of one moment, as a single walk's
/// are; nested calls share the outer memo.
pub fn memoized<T>(f: impl FnOnce() -> T) -> T {
    let outer = MEMO.with(|m| {
        let mut m = m.borrow_mut();
        let had = m.is_some();
        if !had {
            *m = Some(HashMap::new());
        }
        had
    });
    // Cleared on the way out, also when `f` unwinds.
    struct Clear(bool);
    impl Drop for Clear {
        fn drop(&mut self) {
            if !self.0 {
                MEMO.with(|m| *m.borrow_mut() = None);
            }
        }
    }
    let _clear = Clear(outer);
    f()
}

/// The step at `path`: from the memo when one is active, else from the file system.
fn step(path: &Path) -> Step {
    let look = || match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Step::Link(fs::read_link(path).ok()),
        Ok(m) => Step::Entry { dir: m.is_dir() },
        Err(_) => Step::Missing,
    };
    MEMO.with(|m| match m.borrow_mut().as_mut() {
        None => look(),
        Some(memo) => {
            if let Some(s) = memo.get(path.as_os_str()) {
                return s.clone();
            }
            let s = look();
            memo.insert(path.as_os_str().to_os_string(), s.clone());
            s
        }
    })
}

/// Whether something is at `path` itself, a link included (`symlink_metadata` succeeds),
/// through the memo of [`memoized`] when one runs.
pub(crate) fn lexists(path: &Path) -> bool {
    !matches!(step(path), Step::Missing)
}

/// Whether `path` is a directory, links followed (as [`Path::is_dir`]), through the memo of
/// [`memoized`] when one runs: a view asks it of the same root for each of its rules (37
/// `statx` calls of one project directory in one plan).
pub(crate) fn is_dir(path: &Path) -> bool {
    // [`resolve`] takes `..` lexically, also after a name that is not a directory, where
    // the kernel says ENOTDIR: such a path is asked of the file system.
    if !path.is_absolute()
        || path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        return path.is_dir();
    }
    let w = resolve(path);
    // The walk looked up each step of the canonical path, its last one too.
    w.exists && matches!(step(&w.canonical), Step::Entry { dir: true })
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
                match step(&next) {
                    Step::Link(target) => {
                        let target = match target {
                            Some(t) if links.len() < MAX_LINKS => t,
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
                    Step::Entry { dir } => {
                        cur_is_dir = dir;
                        cur = next;
                    }
                    Step::Missing => {
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

/// Lexical normalisation: `.` dropped, `..` pops (never above `/`).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// The canonical form of an absolute path that exists (as `std::fs::canonicalize`, but
/// through the memo of [`memoized`] when one runs: a call's plan asks about the same few
/// directories from several places); `None` when it does not exist.
pub fn canonical_existing(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return std::fs::canonicalize(path).ok();
    }
    let w = resolve(path);
    w.exists.then_some(w.canonical)
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

    /// Inside [`memoized`] a path resolves as outside it (links, missing rest), a change
    /// made meanwhile is not seen until the memo ends, and after it the file system is read
    /// again.
    #[test]
    fn the_memo_answers_as_the_file_system_and_ends_with_its_scope() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink("real", root.join("link")).unwrap();
        let asked = root.join("link/later/x");
        let plain = canonical(&asked);
        assert_eq!(plain, root.join("real/later/x"));
        memoized(|| {
            assert_eq!(canonical(&asked), plain);
            assert_eq!(canonical(&asked), plain);
            // Made while the memo runs: the memo still has `real/later` as missing.
            std::fs::create_dir(root.join("real/later")).unwrap();
            std::os::unix::fs::symlink("/elsewhere", root.join("real/later/x")).unwrap();
            assert_eq!(canonical(&asked), plain);
            // Nested: the same memo.
            memoized(|| assert_eq!(canonical(&asked), plain));
            assert_eq!(canonical(&asked), plain);
        });
        assert_eq!(canonical(&asked), PathBuf::from("/elsewhere"));
        MEMO.with(|m| assert!(m.borrow().is_none()));
    }

    /// The memoized `is_dir` says what `Path::is_dir` says, links followed, for every kind
    /// of path, inside the memo and outside it.
    #[test]
    fn is_dir_answers_as_the_file_system() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::fs::write(root.join("file"), "").unwrap();
        std::os::unix::fs::symlink("dir", root.join("to-dir")).unwrap();
        std::os::unix::fs::symlink("file", root.join("to-file")).unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        std::os::unix::fs::symlink(&root, root.join("dir/up")).unwrap();
        let asked: Vec<PathBuf> = [
            "",
            "dir",
            "file",
            "to-dir",
            "to-file",
            "dangling",
            "loop",
            "missing",
            "dir/up",
            "dir/up/dir",
            "dir/../file",
            "file/..",
            "to-file/..",
            "missing/..",
            "to-dir/up/to-dir",
            "file/x",
            "to-dir/..",
            "dir/../file",
            "file/..",
            "to-file/..",
            "missing/..",
        ]
        .iter()
        .map(|n| root.join(n))
        .collect();
        for p in &asked {
            assert_eq!(is_dir(p), p.is_dir(), "{}", p.display());
        }
        memoized(|| {
            for p in &asked {
                assert_eq!(is_dir(p), p.is_dir(), "{} in the memo", p.display());
            }
        });
        assert!(!is_dir(Path::new("relative-and-missing")));
    }

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
