//! The supervisor's side of [`super::gitdir`]: the lookups in the directories of a call's
//! path (through the directory fds its resolution gave, never by the path again), the
//! checks of what a directory holds before it becomes git-like, and the checked rename of
//! a git config. Every step is made by the init for the call, under the supervisor's git
//! lock, with calls the line could make itself (the init is under the same Landlock domain
//! and view).

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;

use super::gitdir::{self, CONFIGS, Checked, Dirs, Kind, Verdict};
use super::ops::{At, Call, Reply, errno, result};
use super::rules::{self, Act, Refusal};
use super::sys;
use efr_sandbox_wire::gitconfig::MAX_CONFIG;

/// Most entries of a hooks dir read before a directory becomes git-like (git's own
/// templates hold 14).
const MAX_HOOKS: usize = 4096;

/// The kind of `name` in `dir`, links not followed; `None` when nothing is there (or it
/// cannot be looked at).
fn kind_at(dir: BorrowedFd<'_>, name: &[u8]) -> Option<Kind> {
    let n = CString::new(name).ok()?;
    let st = sys::fstatat(dir, &n, libc::AT_SYMLINK_NOFOLLOW).ok()?;
    Some(match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFLNK => Kind::Link,
        _ => Kind::Other,
    })
}

/// Who asks [`Call::git_rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum By {
    /// The target of a rename.
    Rename,
    /// An open for writing.
    Open,
    /// A change of mode (no byte changes).
    Chmod,
    /// Any other call.
    Other,
}

/// What is left to do once a call's act is made (see [`Call::after_git`]).
#[derive(Debug)]
pub(super) enum Post {
    /// A write of a code name in a directory that was not git-like: undone when it is.
    Undo {
        /// The directory of the name.
        dir: OwnedFd,
        /// The name.
        name: CString,
        /// The path, for the report.
        path: Vec<u8>,
        /// Where git reads that name from.
        code: gitdir::Code,
        /// The act made the name (rather than writing what was there).
        created: bool,
    },
    /// The act made `dir` git-like: its configs and hooks dir are put anew.
    Fresh {
        /// The directory.
        dir: OwnedFd,
        /// Its path with a trailing `/`, for the reports.
        path: Vec<u8>,
    },
}

/// Whether the directory of a code name (a config, a todo list, a hook) is now one that
/// git reads it from.
fn undo_needed(dir: BorrowedFd<'_>, code: gitdir::Code) -> bool {
    match code {
        gitdir::Code::Config => gitdir::git_like(|n| kind_at(dir, n).is_some()),
        gitdir::Code::InSubdir => {
            match sys::openat(
                dir,
                c"..",
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                0,
            ) {
                Ok(up) => gitdir::git_like(|n| kind_at(up.as_fd(), n).is_some()),
                // Cannot tell: undone.
                Err(_) => true,
            }
        }
    }
}

/// The parent directory of a path acted on (and its parent, opened when a hook asks).
struct FdDirs {
    parent: OwnedFd,
    grand: OnceLock<Option<OwnedFd>>,
}

impl Dirs for FdDirs {
    fn in_parent(&self, name: &[u8]) -> Option<Kind> {
        kind_at(self.parent.as_fd(), name)
    }
    fn in_grandparent(&self, name: &[u8]) -> Option<Kind> {
        let g = self.grand.get_or_init(|| {
            sys::openat(
                self.parent.as_fd(),
                c"..",
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                0,
            )
            .ok()
        });
        g.as_ref().and_then(|g| kind_at(g.as_fd(), name))
    }
}

/// A name for a file of the supervisor's own in a directory of the call (made with
/// `O_EXCL` or `mkdir`, so never through a link the call left there).
fn temp_name() -> CString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    CString::new(format!(".efr-git-{}-{n}", crate::sys::getpid())).expect("no NUL")
}

/// The bytes of the plain file `name` of `dir` (no link followed) and its mode, when it is
/// one of at most [`MAX_CONFIG`] bytes (a config or a todo list).
fn read_config(dir: BorrowedFd<'_>, name: &CString) -> Result<(Vec<u8>, libc::stat), String> {
    let f = sys::openat(
        dir,
        name,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        0,
    )
    .map_err(|e| format!("cannot read it: {e}"))?;
    let st = sys::fstat(f.as_fd()).map_err(|e| format!("cannot read it: {e}"))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err("a git config or todo list that is not a plain file".into());
    }
    let mut text = Vec::new();
    std::fs::File::from(f)
        .take(MAX_CONFIG as u64 + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if text.len() > MAX_CONFIG {
        return Err(format!(
            "a git config or todo list of more than {MAX_CONFIG} bytes"
        ));
    }
    Ok((text, st))
}

/// Puts a new file holding `text` (mode `mode`) at `name` of `dir`: written under a temp
/// name and renamed over (with `flags` of `renameat2`), so that no fd the call holds is on
/// the file git reads.
fn put_fresh(
    dir: BorrowedFd<'_>,
    name: &CString,
    text: &[u8],
    mode: u32,
    flags: u32,
) -> std::io::Result<()> {
    let tmp = temp_name();
    let f = sys::openat(
        dir,
        &tmp,
        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        mode & 0o777,
    )?;
    let written = std::fs::File::from(f)
        .write_all(text)
        .and_then(|()| sys::renameat2(dir, &tmp, dir, name, flags));
    if written.is_err() {
        let _ = sys::unlinkat(dir, &tmp, 0);
    }
    written
}

/// The names in the directory `name` of `dir` (no link followed), at most [`MAX_HOOKS`].
fn names_in(dir: BorrowedFd<'_>, name: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use std::os::unix::ffi::OsStrExt;
    let n = CString::new(name).map_err(|_| "a name with a NUL".to_string())?;
    let d = sys::openat(
        dir,
        &n,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        0,
    )
    .map_err(|e| format!("cannot list its hooks dir: {e}"))?;
    let rd = std::fs::read_dir(format!("/proc/self/fd/{}", d.as_raw_fd()))
        .map_err(|e| format!("cannot list its hooks dir: {e}"))?;
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| format!("cannot list its hooks dir: {e}"))?;
        if out.len() >= MAX_HOOKS {
            return Err("its hooks dir holds too many entries to check".into());
        }
        out.push(e.file_name().as_bytes().to_vec());
    }
    Ok(out)
}

/// Replaces the hooks dir of `dir` by a new one holding its `samples`: a fd or a path the
/// call resolved before reaches the old one, which is no hooks dir any more.
fn fresh_hooks(dir: BorrowedFd<'_>, samples: &[Vec<u8>]) -> std::io::Result<()> {
    let hooks = c"hooks";
    let old = sys::openat(
        dir,
        hooks,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        0,
    )?;
    let mode = sys::fstat(old.as_fd())?.st_mode & 0o777;
    let tmp = temp_name();
    sys::mkdirat(dir, &tmp, mode)?;
    let new = sys::openat(
        dir,
        &tmp,
        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        0,
    )?;
    for s in samples {
        if let Ok(n) = CString::new(s.as_slice()) {
            let _ = sys::renameat2(old.as_fd(), &n, new.as_fd(), &n, 0);
        }
    }
    sys::renameat2(dir, &tmp, dir, hooks, libc::RENAME_EXCHANGE)?;
    // The old one, now under the temp name: empty unless the call raced a file into it.
    let _ = sys::unlinkat(dir, &tmp, libc::AT_REMOVEDIR);
    Ok(())
}

impl<'a> Call<'a> {
    /// Holds the supervisor's git lock until this call is answered.
    fn lock_git(&mut self) {
        if self.git_lock.is_none() {
            self.git_lock = Some(self.sup.git.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// The git rule for `act` on `path`, whose parent is `dir` (opened again from the view's
    /// root by its path when `None`), asked `by` a rename's target, an open, or another
    /// call. `Ok(Some(_))`: a config or todo list of a git-like directory, which only a
    /// rename may put there (through [`Self::checked_rename`]); an open of a config gets
    /// the answer too, for [`Self::open_empty_config`].
    pub(super) fn git_rule(
        &mut self,
        what: &'static str,
        dir: Option<BorrowedFd<'_>>,
        path: &[u8],
        act: Act,
        by: By,
    ) -> Result<Option<Checked>, i32> {
        let (parent, name) = rules::split(path);
        let parent_name = rules::split(parent).1;
        if !gitdir::concerns(name, parent_name) {
            return Ok(None);
        }
        self.lock_git();
        let parent_fd = match dir {
            Some(d) => d.try_clone_to_owned().map_err(errno)?,
            None => match self.open_dir_path(parent) {
                Ok(d) => d,
                Err(_) => {
                    return Err(self.refuse_git(what, path, "its directory cannot be looked at"));
                }
            },
        };
        let dirs = FdDirs {
            parent: parent_fd,
            grand: OnceLock::new(),
        };
        match gitdir::judge(name, parent_name, act, &dirs) {
            Verdict::Free => {
                // A code name written where git reads none now: if the directory becomes
                // git-like before the act is made (another call's act, which this lock does
                // not order), the act is undone after it ([`Self::after_git`]).
                if let Some(code) = gitdir::code_name(name, parent_name) {
                    if matches!(act, Act::Create | Act::Write) {
                        self.git_post.push(Post::Undo {
                            dir: dirs.parent,
                            name: CString::new(name).map_err(|_| libc::EINVAL)?,
                            path: path.to_vec(),
                            code,
                            created: act == Act::Create,
                        });
                    }
                }
                Ok(None)
            }
            Verdict::Checked(c) if by == By::Rename => Ok(Some(c)),
            Verdict::Checked(_) if by == By::Chmod => Ok(None),
            Verdict::Checked(Checked::Config) if by == By::Open => Ok(Some(Checked::Config)),
            Verdict::Checked(_) => Err(self.refuse_git(
                what,
                path,
                "a config or todo list of a git dir, written other than by a rename the \
                 supervisor checks",
            )),
            Verdict::Refuse(why) => Err(self.refuse_git(what, path, why)),
            Verdict::Complete => match self.may_complete(dirs.parent.as_fd()) {
                Ok(()) => {
                    let mut dir_path = parent.to_vec();
                    dir_path.push(b'/');
                    self.git_post.push(Post::Fresh {
                        dir: dirs.parent,
                        path: dir_path,
                    });
                    Ok(None)
                }
                Err(why) => Err(self.refuse_git(
                    what,
                    path,
                    &format!("it would make its directory a git dir, and {why}"),
                )),
            },
        }
    }

    /// After the call's act (answered `reply`), what [`Self::git_rule`] left to do: an
    /// act on a code name whose directory became git-like meanwhile is undone (what it made
    /// removed, the fd it opened not handed out) and refused; a directory the act made
    /// git-like gets its configs and hooks dir anew. A failed act needs neither.
    pub(super) fn after_git(&mut self, reply: Reply) -> Reply {
        let posts = std::mem::take(&mut self.git_post);
        if matches!(reply, Reply::Err(_) | Reply::None) {
            return reply;
        }
        let mut reply = reply;
        for post in posts {
            match post {
                Post::Undo {
                    dir,
                    name,
                    path,
                    code,
                    created,
                } => {
                    if undo_needed(dir.as_fd(), code) {
                        if created {
                            let _ = sys::unlinkat(dir.as_fd(), &name, 0);
                        }
                        reply = Reply::Err(self.refuse_git(
                            "write",
                            &path,
                            "its directory became a git dir while the write was made",
                        ));
                    }
                }
                Post::Fresh { dir, path } => self.put_anew(dir.as_fd(), &path),
            }
        }
        reply
    }

    fn refuse_git(&mut self, what: &'static str, path: &[u8], why: &str) -> i32 {
        self.sup.refuse(what, path, &Refusal::Git(why.to_string()));
        libc::EROFS
    }

    /// The directory at the absolute `path` of the view, links followed as a lookup would.
    fn open_dir_path(&self, path: &[u8]) -> Result<OwnedFd, i32> {
        let rel: &[u8] = match path.strip_prefix(b"/") {
            Some(r) if !r.is_empty() => r,
            _ => b".",
        };
        let rel = CString::new(rel).map_err(|_| libc::EINVAL)?;
        sys::openat2(
            self.sup.root.as_fd(),
            &rel,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
            libc::RESOLVE_NO_MAGICLINKS,
        )
        .map_err(errno)
    }

    /// Before `dir` becomes git-like: refuses when what it holds would run (see
    /// [`gitdir::holdings`], [`gitdir::config_text`]).
    fn may_complete(&mut self, dir: BorrowedFd<'_>) -> Result<(), String> {
        let hooks = kind_at(dir, b"hooks");
        let hook_names = if hooks == Some(Kind::Dir) {
            names_in(dir, b"hooks")?
        } else {
            Vec::new()
        };
        let configs: Vec<Option<Kind>> = CONFIGS.iter().map(|n| kind_at(dir, n)).collect();
        if let Some(why) = gitdir::holdings(hooks, &hook_names, &configs) {
            return Err(why);
        }
        for (name, kind) in CONFIGS.iter().zip(&configs) {
            if *kind != Some(Kind::File) {
                continue;
            }
            let n = CString::new(*name).expect("no NUL");
            let (text, _) = read_config(dir, &n)?;
            if let Some(why) = gitdir::config_text(&text, &self.sup.git_safe_keys) {
                return Err(why);
            }
        }
        Ok(())
    }

    /// Once `dir` (at `path`, with a trailing `/`) is git-like: each config it holds is
    /// checked again and put anew as a fresh file (or removed when it would run: a writer
    /// that kept it open may have written since the check before the act), and its hooks
    /// dir is replaced by a fresh one holding only its samples. A fd or a path the call (or
    /// another call) resolved before reaches the old ones, which git no longer reads.
    fn put_anew(&mut self, dir: BorrowedFd<'_>, path: &[u8]) {
        for name in CONFIGS {
            let n = CString::new(name).expect("no NUL");
            let kind = kind_at(dir, name);
            let why = match kind {
                None | Some(Kind::Dir) => continue,
                Some(Kind::File) => match read_config(dir, &n) {
                    Ok((text, st)) => match gitdir::config_text(&text, &self.sup.git_safe_keys) {
                        None => match put_fresh(dir, &n, &text, st.st_mode, 0) {
                            Ok(()) => continue,
                            Err(e) => format!("cannot put it anew: {e}"),
                        },
                        Some(why) => why,
                    },
                    Err(why) => why,
                },
                Some(Kind::Link | Kind::Other) => "a git config that is not a plain file".into(),
            };
            let _ = sys::unlinkat(dir, &n, 0);
            let mut p = path.to_vec();
            p.extend_from_slice(name);
            self.refuse_git(
                "write",
                &p,
                &format!("removed as its directory became a git dir: {why}"),
            );
        }
        match kind_at(dir, b"hooks") {
            Some(Kind::Dir) => {
                let samples: Vec<Vec<u8>> = names_in(dir, b"hooks")
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|n| n.ends_with(b".sample"))
                    .collect();
                let _ = fresh_hooks(dir, &samples);
            }
            None => {}
            Some(_) => {
                let _ = sys::unlinkat(dir, c"hooks", 0);
            }
        }
    }

    /// An open for writing of the config `at` of a git-like directory (`seen`: what was
    /// there, `mode` for a new one). libgit2 makes a new repository's config this way,
    /// empty, before it writes it by lock file and rename, as git does: so a missing config
    /// is made empty, an empty one is left, and either is opened read-only (a write
    /// through it fails with EBADF: nothing reaches what git reads). A config with a text
    /// is never opened for writing.
    pub(super) fn open_empty_config(
        &mut self,
        at: &At,
        seen: Option<libc::stat>,
        mode: u32,
        cloexec: bool,
    ) -> Reply {
        let empty_file =
            |st: &libc::stat| st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_size == 0;
        match seen {
            Some(st) if !empty_file(&st) => {
                return Reply::Err(self.refuse_git(
                    "open",
                    &at.path,
                    "the config of a git dir, written other than by a rename the supervisor \
                     checks",
                ));
            }
            Some(_) => {}
            None => {
                let made = sys::openat(
                    at.dir.as_fd(),
                    &at.name,
                    libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_WRONLY
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    mode,
                );
                match made {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Reply::Err(errno(e)),
                }
            }
        }
        let f = match sys::openat(
            at.dir.as_fd(),
            &at.name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        ) {
            Ok(f) => f,
            Err(e) => return Reply::Err(errno(e)),
        };
        match sys::fstat(f.as_fd()) {
            Ok(st) if empty_file(&st) => Reply::Fd(f, cloexec),
            _ => Reply::Err(self.refuse_git(
                "open",
                &at.path,
                "the config of a git dir, written other than by a rename the supervisor checks",
            )),
        }
    }

    /// A rename of `o` onto the config or todo list `n` of a git-like directory: the text
    /// of `o` is read once and, when it runs nothing ([`gitdir::config_text`],
    /// [`gitdir::todo_text`] against the list at `n` now), a fresh copy of it is put at
    /// `n` and `o` goes (as the rename would take it); otherwise refused.
    pub(super) fn checked_rename(&mut self, o: &At, n: &At, flags: u32, what: Checked) -> Reply {
        if flags & (libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT) != 0 {
            return Reply::Err(self.refuse_git(
                "rename",
                &n.path,
                "an exchange with a config or todo list of a git dir",
            ));
        }
        let (text, st) = match read_config(o.dir.as_fd(), &o.name) {
            Ok(t) => t,
            Err(why) => return Reply::Err(self.refuse_git("rename", &n.path, &why)),
        };
        let why = match what {
            Checked::Config => {
                let old = read_config(n.dir.as_fd(), &n.name).map(|(t, _)| t).ok();
                gitdir::config_text_over(&text, old.as_deref(), &self.sup.git_safe_keys)
            }
            Checked::Todo => {
                let old = read_config(n.dir.as_fd(), &n.name)
                    .map(|(t, _)| t)
                    .unwrap_or_default();
                gitdir::todo_text(&text, &old)
            }
        };
        if let Some(why) = why {
            return Reply::Err(self.refuse_git("rename", &n.path, &why));
        }
        let noreplace = flags & libc::RENAME_NOREPLACE;
        if let Err(e) = put_fresh(n.dir.as_fd(), &n.name, &text, st.st_mode, noreplace) {
            return Reply::Err(errno(e));
        }
        // The source goes as a rename would take it: the file read, not one put there since.
        match sys::fstatat(o.dir.as_fd(), &o.name, libc::AT_SYMLINK_NOFOLLOW) {
            Ok(now) if now.st_ino == st.st_ino && now.st_dev == st.st_dev => {
                result(sys::unlinkat(o.dir.as_fd(), &o.name, 0))
            }
            _ => Reply::Val(0),
        }
    }
}
