//! After a contained call: the git code it left where the view could not protect it.
//!
//! The view keeps the hooks and config of every repository it finds at launch read-only
//! (the project roots and repositories up to a few levels below them). A repository the
//! call made itself (`git init`, a clone), one deeper than the launch walk, or one in a
//! build output directory is writable, and a hook or a program-running config key put
//! there would run outside the sandbox at the user's next git command. So after the call,
//! every repository under the project roots (up to [`GUARD_DEPTH`] levels down; in a build
//! output directory only one the call made) is looked at, its git dirs found the way git
//! finds them ([`crate::git_dirs`]):
//!
//! - a repository the call made, or one whose config files (those git reads, includes
//!   too) it changed: every key not on `git.safe_config_keys` is taken out of each config
//!   file the view did not protect;
//! - hooks: every file in the hooks dir git uses (`core.hooksPath` included), at any
//!   depth and under any name but `*.sample`, that the call wrote, or all of them when the
//!   call made the repository or pointed it at that git dir (a new `.git` file or
//!   `commondir`);
//! - a `commondir` the call wrote in a main repository (git honours it: the config and
//!   hooks of the dir it names), or one naming a dir outside the project;
//! - a rebase or sequencer todo list (`rebase-merge/git-rebase-todo`, `sequencer/todo`)
//!   the call wrote that holds an `exec` line (`git rebase --continue` would run it);
//! - the git dirs of submodules (`<common>/modules/**`), whether or not `.gitmodules`
//!   names them: their hooks and config, as above.
//!
//! "The call wrote it" is read from the ctime (and, for "the call made it", the birth
//! time) of the file: the kernel sets the ctime on every change and no call can set it
//! back (utimensat sets the mtime and atime only), so a file written during the call has a
//! ctime at or after its start. A snapshot of each repository at launch would need the
//! service to walk and hash every repository under the roots before each call (up to
//! thousands of directories on the launch path); the ctime gives the same answer for every
//! write. Nothing is deleted: a hook moves to a new `efr-quarantine-<random>/` in its git
//! dir, a config keeps every other line and its original is copied there. Each one is
//! reported in the summary's `quarantined`. Nothing the call left (links named like our
//! files) can steer where these writes go: the quarantine is a fresh directory, files are
//! made with O_EXCL, and git dirs outside the project roots are never touched.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use efr_policy::config::Config;
use efr_policy::git::strip_config;

use crate::git_dirs::{self, Located};

/// How deep below a project root repositories are looked for after a call (the launch
/// walk goes three levels; see docs/threat-model.md).
pub const GUARD_DEPTH: usize = 12;

/// How deep below a build output directory (`node_modules`, `dist`, ...) a repository the
/// call made is looked for.
const BUILD_OUTPUT_DEPTH: usize = 3;

/// Directories walked at most below one root.
const MAX_WALK: usize = 8192;

/// How deep a hooks dir and `modules/` are walked, and how many entries at most.
const HOOKS_DEPTH: usize = 8;
const MAX_ENTRIES: usize = 4096;

/// The largest config or todo file read.
const MAX_FILE: u64 = 1 << 20;

/// The quarantine directory inside a git dir.
const QUARANTINE: &str = "efr-quarantine";

fn ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        // Saturating: `u64::MAX` milliseconds are 584 million years.
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Whether `p` changed at or after `since_ms` (milliseconds since the epoch), by ctime.
fn changed_since(p: &Path, since_ms: u64) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| {
        // A time before the epoch counts as the epoch.
        let secs = u64::try_from(m.ctime()).unwrap_or(0);
        let ms = secs * 1000 + u64::try_from(m.ctime_nsec()).unwrap_or(0) / 1_000_000;
        ms >= since_ms
    })
}

/// Whether `p` was made at or after `since_ms`: its birth time, or its ctime where the
/// file system keeps no birth time (which can only say yes more often).
fn made_since(p: &Path, since_ms: u64) -> bool {
    match std::fs::symlink_metadata(p) {
        Ok(m) => match m.created() {
            Ok(t) => ms(t) >= since_ms,
            Err(_) => changed_since(p, since_ms),
        },
        Err(_) => false,
    }
}

/// Whether the launch view kept `p` read-only (it, or a directory above it, is listed).
/// A path that is not UTF-8 matches no listed path: it is checked.
fn protected(p: &Path, view: &[String]) -> bool {
    view.iter()
        .any(|v| p.starts_with(Path::new(v.trim_end_matches('/'))))
}

/// A free name for `name` in `dir`.
fn free_name(dir: &Path, name: &str) -> PathBuf {
    let first = dir.join(name);
    if std::fs::symlink_metadata(&first).is_err() {
        return first;
    }
    (1..)
        .map(|n| dir.join(format!("{name}.{n}")))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or(first)
}

/// A new quarantine directory in `git_dir`: `efr-quarantine-<random>`, made with mkdir
/// (which never follows a link), so that nothing the call planted in the git dir (a link
/// named like the quarantine, pointing anywhere) decides where its files go.
fn quarantine_dir(git_dir: &Path) -> std::io::Result<PathBuf> {
    for _ in 0..8 {
        let dir = git_dir.join(format!("{QUARANTINE}-{}", crate::sys::random_hex(6)?));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free quarantine directory name"))
}

/// The file name of `p`, as bytes (a name that is not UTF-8 is kept as it is).
fn name_of(p: &Path) -> OsString {
    p.file_name()
        .map(OsStr::to_os_string)
        .unwrap_or_else(|| "item".into())
}

/// Moves `p` into a new quarantine directory of `git_dir`; the new path. The rename moves
/// the entry itself (a link stays a link; its target is not touched).
fn move_aside(git_dir: &Path, p: &Path) -> std::io::Result<PathBuf> {
    let dir = quarantine_dir(git_dir)?;
    let to = dir.join(name_of(p));
    std::fs::rename(p, &to)?;
    Ok(to)
}

/// Writes a file that must not exist yet (O_EXCL: a link in its place is refused).
fn new_file(p: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(p)?;
    f.write_all(data)?;
    f.sync_all()
}

/// A regular file's bytes, when it is one and at most [`MAX_FILE`] long.
fn read_regular(p: &Path) -> Option<(Vec<u8>, std::fs::Metadata)> {
    let meta = std::fs::symlink_metadata(p).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return None;
    }
    Some((std::fs::read(p).ok()?, meta))
}

/// A repository found below a root; `in_build_output` when a directory on the way is a
/// build output name; `bare` when the directory is itself a git dir (a `HEAD`, or
/// `objects` and `refs`: what git's discovery takes for a bare repository) rather than a
/// work tree holding `.git`.
struct Found {
    dir: PathBuf,
    in_build_output: bool,
    bare: bool,
}

/// The repositories at `root` and below it: up to [`GUARD_DEPTH`] levels down, and in a
/// build output directory up to [`BUILD_OUTPUT_DEPTH`] levels below it; a walk of at most
/// [`MAX_WALK`] directories that follows no link and skips `.git` dirs.
///
/// Each directory is listed through a handle of its own, and its entries are looked up
/// relative to it (`fstatat`): a lookup of `X/.git` walks two names, not the eight or more
/// of an absolute path. Most of the walk's time was the kernel's path walk
/// (`__d_lookup_rcu`, `link_path_walk`: 43% of `after_call`'s samples on this
/// repository's tree with its `target/`).
fn find_repos(root: &Path, skip: &[String]) -> Vec<Found> {
    let mut out = Vec::new();
    if std::fs::symlink_metadata(root.join(".git")).is_ok() {
        out.push(Found {
            dir: root.to_path_buf(),
            in_build_output: false,
            bare: false,
        });
    }
    // (dir, level, levels left below a build output name)
    let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), 0usize, None)]);
    let mut walked = 0;
    while let Some((dir, level, bo_left)) = queue.pop_front() {
        walked += 1;
        if walked > MAX_WALK {
            break;
        }
        // The root as given (a project may be reached through a link); below it, no link.
        let Some(listed) = Listed::open(&dir, level == 0) else {
            continue;
        };
        // A git dir in its own right: checked as one, and not walked into (as `.git` is
        // not), but a root, which is walked whatever it holds (git finds a root's `.git`
        // before the root itself).
        if listed.git_like && (level > 0 || !listed.has_dot_git) {
            out.push(Found {
                dir: dir.clone(),
                in_build_output: bo_left.is_some(),
                bare: true,
            });
        }
        if listed.git_like && level > 0 {
            continue;
        }
        for name in &listed.subdirs {
            let bo = match bo_left {
                Some(n) => Some(n),
                None if skip.iter().any(|n| OsStr::new(n) == name.as_os_str()) => {
                    Some(BUILD_OUTPUT_DEPTH + 1)
                }
                None => None,
            };
            if listed.holds_git(name) {
                out.push(Found {
                    dir: dir.join(name),
                    in_build_output: bo.is_some(),
                    bare: false,
                });
            }
            let below = bo.map(|n: usize| n.saturating_sub(1));
            // A directory whose link count is 2 has no subdirectory (ext4, xfs, tmpfs keep
            // the count; btrfs says 1 and is read): not listed.
            if level + 1 < GUARD_DEPTH && below != Some(0) && listed.nlink(name) != Some(2) {
                queue.push_back((dir.join(name), level + 1, below));
            }
        }
    }
    out
}

/// A directory open for the walk: its subdirectories' names, whether it is itself git-like
/// (from the same listing: no lookup more), and lookups relative to it.
struct Listed {
    dir: nix::dir::Dir,
    subdirs: Vec<std::ffi::OsString>,
    git_like: bool,
    has_dot_git: bool,
}

impl Listed {
    /// Lists `dir` (its subdirectories but `.git`, no link); `None` when it cannot be opened
    /// as a directory (a link to one is followed only when `follow`).
    fn open(dir: &Path, follow: bool) -> Option<Listed> {
        use nix::dir::{Dir, Type};
        use nix::fcntl::OFlag;
        use nix::sys::stat::Mode;
        use std::os::unix::ffi::OsStrExt;
        let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        if !follow {
            flags |= OFlag::O_NOFOLLOW;
        }
        let mut d = Dir::open(dir, flags, Mode::empty()).ok()?;
        let mut names: Vec<(std::ffi::OsString, Option<Type>)> = Vec::new();
        let mut has_dot_git = false;
        for e in d.iter().flatten() {
            let n = e.file_name().to_bytes();
            has_dot_git |= n == b".git";
            if n == b"." || n == b".." || n == b".git" {
                continue;
            }
            names.push((OsStr::from_bytes(n).to_os_string(), e.file_type()));
        }
        let has = |n: &str| names.iter().any(|(name, _)| name == n);
        let git_like = has("HEAD") || (has("objects") && has("refs"));
        let mut l = Listed {
            dir: d,
            subdirs: Vec::new(),
            git_like,
            has_dot_git,
        };
        for (name, kind) in names {
            // The file system may not say the type in its listing: asked then, as
            // `DirEntry::file_type` asks.
            let is_dir = match kind {
                Some(t) => t == Type::Directory,
                None => l.stat(&name).is_some_and(|st| {
                    use nix::sys::stat::SFlag;
                    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
                }),
            };
            if is_dir {
                l.subdirs.push(name);
            }
        }
        Some(l)
    }

    /// `name/.git` exists (a dir, a file or a link).
    fn holds_git(&self, name: &OsStr) -> bool {
        let mut git = name.to_os_string();
        git.push("/.git");
        self.stat(&git).is_some()
    }

    /// The link count of `name`, when it can be read.
    fn nlink(&self, name: &OsStr) -> Option<libc::nlink_t> {
        self.stat(name).map(|st| st.st_nlink)
    }

    /// `fstatat` of `rel` in the directory, links not followed.
    fn stat(&self, rel: &OsStr) -> Option<nix::sys::stat::FileStat> {
        nix::sys::stat::fstatat(&self.dir, rel, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).ok()
    }
}

/// Whether a todo list holds an `exec` (`x`) line, as git reads it (leading blanks
/// trimmed).
fn has_exec(todo: &[u8]) -> bool {
    todo.split(|b| *b == b'\n').any(|l| {
        let l = l.trim_ascii_start();
        let word = l
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .map_or(l, |i| &l[..i]);
        word == b"exec" || word == b"x"
    })
}

struct Guard<'a> {
    roots: Vec<PathBuf>,
    view: &'a [String],
    since_ms: u64,
    config: &'a Config,
    out: Vec<String>,
    seen: Vec<PathBuf>,
    fallback: bool,
}

/// The git code a contained call left in repositories under `roots`; what was done with
/// each, one line per item. `since_ms` is when the call started; `view` the read-only
/// paths of its launch view.
pub fn after_call(
    roots: &[PathBuf],
    view: &[String],
    since_ms: u64,
    config: &Config,
) -> Vec<String> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut g = Guard {
        roots: roots.iter().map(|r| canon(r)).collect(),
        view,
        since_ms,
        config,
        out: Vec::new(),
        seen: Vec::new(),
        fallback: false,
    };
    let skip = config.build_output_names();
    for root in roots {
        for found in find_repos(root, &skip) {
            // In build output, only a repository the call made.
            let made = if found.bare {
                made_since(&found.dir, since_ms)
            } else {
                made_since(&found.dir.join(".git"), since_ms)
            };
            if found.in_build_output && !made {
                continue;
            }
            if found.bare {
                g.bare(&found.dir);
            } else {
                g.repository(&found.dir);
            }
        }
    }
    if g.fallback {
        g.out.push(
            "git could not be run: git dirs were found by efr's own reader of .git files, \
             commondir and config (which may differ from git's)"
                .into(),
        );
    }
    g.out
}

impl Guard<'_> {
    fn canon(p: &Path) -> PathBuf {
        std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
    }

    /// Whether `p` (with every link resolved) is inside a project root.
    fn inside(&self, p: &Path) -> bool {
        let c = Self::canon(p);
        self.roots.iter().any(|r| c.starts_with(r))
    }

    fn locate(&mut self, repo: &Path) -> Option<Located> {
        let loc = git_dirs::locate(repo)?;
        if !loc.by_git {
            self.fallback = true;
        }
        Some(loc)
    }

    /// A repository whose git dirs neither git nor the built-in reader can tell: a `.git`
    /// file or link the call wrote is moved aside, as is a `commondir` it wrote in a `.git`
    /// dir; else it is reported as not checked.
    fn unknown(&mut self, repo: &Path) {
        self.fallback = true;
        let dotgit = repo.join(".git");
        let is_dir = std::fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir());
        let commondir = dotgit.join("commondir");
        let why = "git could not say which git dirs it names, nor can efr's reader";
        if !is_dir && !protected(&dotgit, self.view) && changed_since(&dotgit, self.since_ms) {
            let to = free_name(repo, ".git.efr-quarantine");
            let done = std::fs::rename(&dotgit, &to).map(|()| to);
            self.report(&dotgit, done, &format!("written by the call, {why}"));
        } else if is_dir
            && std::fs::symlink_metadata(&commondir).is_ok()
            && !protected(&commondir, self.view)
            && changed_since(&commondir, self.since_ms)
        {
            let done = move_aside(&dotgit, &commondir);
            self.report(&commondir, done, &format!("written by the call, {why}"));
        } else {
            self.out
                .push(format!("{}: {why}; not checked", dotgit.display()));
        }
    }

    fn report(&mut self, what: &Path, done: std::io::Result<PathBuf>, why: &str) {
        self.out.push(match done {
            Ok(to) => format!("{}: {why}, moved to {}", what.display(), to.display()),
            Err(e) => format!("{}: {why}, not moved: {e}", what.display()),
        });
    }

    /// The git dirs of `repo`: a plain one's without asking, else git's (or the built-in
    /// reader's); `None` when it has none, or when neither can tell (then handled as
    /// [`Self::unknown`]).
    fn lookup_dirs(&mut self, repo: &Path, plain: bool) -> Option<Located> {
        let dotgit = repo.join(".git");
        let found = if plain {
            git_dirs::Lookup::Found(Located {
                git_dir: dotgit.clone(),
                common: dotgit.clone(),
                hooks: dotgit.join("hooks"),
                by_git: true,
            })
        } else {
            git_dirs::lookup(repo)
        };
        match found {
            git_dirs::Lookup::Found(l) => {
                if !l.by_git {
                    self.fallback = true;
                }
                Some(l)
            }
            git_dirs::Lookup::Unknown => {
                self.unknown(repo);
                None
            }
            git_dirs::Lookup::NotFound => None,
        }
    }

    /// A `commondir` the call wrote points git at another dir's config and hooks. In a
    /// main repository (a `.git` dir) git has no use for one; in any git dir, one that
    /// names a dir outside the project would have this check skip the repository. Such a
    /// one is moved aside and reported; the git dirs as they are then (`None`: no longer
    /// found).
    fn commondir_aside(&mut self, repo: &Path, loc: Located, main_repo: bool) -> Option<Located> {
        let commondir = loc.git_dir.join("commondir");
        if self.inside(&loc.git_dir)
            && std::fs::symlink_metadata(&commondir).is_ok()
            && !protected(&commondir, self.view)
            && changed_since(&commondir, self.since_ms)
            && (main_repo || !self.inside(&loc.common))
        {
            let done = move_aside(&loc.git_dir, &commondir);
            let moved = done.is_ok();
            let why = format!(
                "written by the call, pointed git at the config and hooks of {}",
                loc.common.display()
            );
            self.report(&commondir, done, &why);
            if moved {
                return self.locate(repo);
            }
        }
        Some(loc)
    }

    /// A repository whose git dirs are outside the project roots: a `.git` file or link
    /// (not a real dir) that the call made is moved aside and reported.
    fn foreign_git_file(&mut self, repo: &Path, loc: &Located) {
        let dotgit = repo.join(".git");
        let is_file = std::fs::symlink_metadata(&dotgit).is_ok_and(|m| !m.is_dir());
        if is_file && !protected(&dotgit, self.view) && changed_since(&dotgit, self.since_ms) {
            let to = free_name(repo, ".git.efr-quarantine");
            self.out.push(match std::fs::rename(&dotgit, &to) {
                Ok(()) => format!(
                    "{}: made by the call, names the git dir {} outside the project; moved to {}",
                    dotgit.display(),
                    loc.git_dir.display(),
                    to.display()
                ),
                Err(e) => format!(
                    "{}: made by the call, names the git dir {} outside the project; not moved: {e}",
                    dotgit.display(),
                    loc.git_dir.display()
                ),
            });
        }
    }

    fn repository(&mut self, repo: &Path) {
        let dotgit = repo.join(".git");
        // A plain repository (most are: see `git_dirs::plain`) needs no asking, as at the
        // launch: git's answer for it is `.git`, `.git`, `.git/hooks`, and its config files
        // are the three below (no include). Git is asked for its values only when one of
        // those changed (two git runs saved on every call that left the repository alone).
        let plain = git_dirs::plain(repo);
        let Some(loc) = self.lookup_dirs(repo, plain) else {
            return;
        };
        let main_repo = std::fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir());
        let Some(mut loc) = self.commondir_aside(repo, loc, main_repo) else {
            return;
        };
        // Only git dirs inside the project roots are touched. A `.git` file that names one
        // elsewhere (a worktree or submodule points inside the project) would have this
        // check rewrite files that are not the project's: a `.git` file the call made that
        // way is moved aside instead, and reported.
        if !self.inside(&loc.git_dir) || !self.inside(&loc.common) {
            self.foreign_git_file(repo, &loc);
            return;
        }
        if self.seen.contains(&loc.git_dir) && self.seen.contains(&loc.common) {
            return;
        }
        // Pointed at this git dir by the call: a `.git` file (or link) or a `commondir` it
        // wrote. Then every hook there is the call's to answer for.
        let pointed = (!main_repo && changed_since(&dotgit, self.since_ms))
            || changed_since(&loc.git_dir.join("commondir"), self.since_ms);
        let made = made_since(&loc.git_dir, self.since_ms);
        let made_common = made_since(&loc.common, self.since_ms);
        let (files, mut list) = if plain {
            (git_dirs::standard_config_files(&loc), None)
        } else {
            git_dirs::config_files(repo, &loc)
        };
        let changed = files
            .iter()
            .any(|f| !protected(f, self.view) && self.inside(f) && changed_since(f, self.since_ms));
        if made || made_common || pointed || changed {
            let mut files = files;
            if plain {
                (files, list) = git_dirs::config_files(repo, &loc);
            }
            for f in &files {
                self.config_file(&loc.common, f, list.as_deref());
            }
            // Taking out `core.hooksPath` changes where git looks for hooks.
            if let Some(l) = self.locate(repo) {
                loc = l;
            }
        }
        let all_hooks = pointed || made_common || made_since(&loc.hooks, self.since_ms);
        self.hooks(&loc.common, &loc.hooks, all_hooks);
        self.todo(&loc.git_dir);
        for g in [loc.git_dir.clone(), loc.common.clone()] {
            if !self.seen.contains(&g) {
                self.seen.push(g);
            }
        }
        self.modules(&loc.common);
    }

    /// A directory git takes as a git dir by itself (a bare repository, or one a `.git`
    /// file or `commondir` could name): its config files and hooks by the rules of a
    /// repository's git dir, read by efr's own reader (git is not run in it: a bare
    /// repository's config could name a program for the very commands that would ask it).
    fn bare(&mut self, dir: &Path) {
        if self.seen.iter().any(|s| s == dir) || protected(dir, self.view) || !self.inside(dir) {
            return;
        }
        self.seen.push(dir.to_path_buf());
        let made = made_since(dir, self.since_ms);
        let loc = Located {
            git_dir: dir.to_path_buf(),
            common: dir.to_path_buf(),
            hooks: dir.join("hooks"),
            by_git: false,
        };
        let files = git_dirs::standard_config_files(&loc);
        let changed = files
            .iter()
            .any(|f| !protected(f, self.view) && changed_since(f, self.since_ms));
        if made || changed {
            for f in &files {
                self.config_file(dir, f, None);
            }
        }
        self.hooks(
            dir,
            &dir.join("hooks"),
            made || made_since(&dir.join("hooks"), self.since_ms),
        );
        self.todo(dir);
        self.modules(dir);
    }

    /// The git dirs below `<common>/modules` (submodules, initialised or not): their
    /// config and hooks, as a repository's.
    fn modules(&mut self, common: &Path) {
        let base = common.join("modules");
        let mut stack = vec![(base, 0usize)];
        let mut walked = 0;
        while let Some((dir, depth)) = stack.pop() {
            walked += 1;
            if walked > MAX_ENTRIES || depth > HOOKS_DEPTH {
                break;
            }
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name();
                let p = e.path();
                let looks_git = ["HEAD", "config", "hooks"]
                    .iter()
                    .any(|n| std::fs::symlink_metadata(p.join(n)).is_ok());
                if looks_git && !self.seen.contains(&p) && self.inside(&p) {
                    self.seen.push(p.clone());
                    let made = made_since(&p, self.since_ms);
                    let cfg = p.join("config");
                    if made || changed_since(&cfg, self.since_ms) {
                        self.config_file(&p, &cfg, None);
                    }
                    self.hooks(&p, &p.join("hooks"), made);
                    self.todo(&p);
                }
                // A submodule's name may hold `/`: look further down, but not into the
                // parts of a git dir.
                if !["objects", "refs", "logs", "hooks", "info", "lfs"]
                    .iter()
                    .any(|n| name == *n)
                {
                    stack.push((p, depth + 1));
                }
            }
        }
    }

    /// The hooks in `dir` (the hooks dir git uses), at any depth: each one the call wrote,
    /// or every one with `all`, is moved into a quarantine of `git_dir`.
    fn hooks(&mut self, git_dir: &Path, dir: &Path, all: bool) {
        if protected(dir, self.view) || !self.inside(dir) {
            return;
        }
        // A hooks dir that is itself a new link points git at hooks elsewhere.
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            if all || changed_since(dir, self.since_ms) {
                let done = move_aside(git_dir, dir);
                self.report(dir, done, "a link made by the call");
            }
            return;
        }
        let mut found = Vec::new();
        let mut stack = vec![(dir.to_path_buf(), 0usize)];
        let mut entries = 0;
        while let Some((d, depth)) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                entries += 1;
                if entries > MAX_ENTRIES {
                    break;
                }
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) && depth < HOOKS_DEPTH {
                    stack.push((p, depth + 1));
                    continue;
                }
                if e.file_name().as_bytes().ends_with(b".sample") || protected(&p, self.view) {
                    continue;
                }
                if all || changed_since(&p, self.since_ms) {
                    found.push(p);
                }
            }
        }
        found.sort();
        for p in found {
            let done = move_aside(git_dir, &p);
            self.report(&p, done, "a hook written by the call");
        }
    }

    /// A rebase or sequencer todo list the call wrote that runs a command.
    fn todo(&mut self, git_dir: &Path) {
        for rel in ["rebase-merge/git-rebase-todo", "sequencer/todo"] {
            let p = git_dir.join(rel);
            if protected(&p, self.view) || !changed_since(&p, self.since_ms) {
                continue;
            }
            let Some((text, _)) = read_regular(&p) else {
                continue;
            };
            if has_exec(&text) {
                let done = move_aside(git_dir, &p);
                self.report(
                    &p,
                    done,
                    "a todo list written by the call with an exec line (git rebase --continue runs it)",
                );
            }
        }
    }

    /// Takes every key not on `git.safe_config_keys` out of the config file `p`. `list`
    /// is what git reads from each file, when git said: a key git reads from `p` that the
    /// line reader did not take out has the whole file moved aside.
    fn config_file(&mut self, git_dir: &Path, p: &Path, list: Option<&[git_dirs::ConfigValue]>) {
        if protected(p, self.view) || !self.inside(p) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return;
        };
        if meta.file_type().is_symlink() {
            // A config that is a link: git would read whatever it names.
            if changed_since(p, self.since_ms) {
                let done = move_aside(git_dir, p);
                self.report(p, done, "a link made by the call");
            }
            return;
        }
        let Some((text, meta)) = read_regular(p) else {
            return;
        };
        let config = self.config;
        let (kept, mut removed) = strip_config(&text, |k, v| !config.git_key_is_safe(k, v));
        // What git reads from this file that the line reader kept: read differently,
        // so the file goes as a whole.
        let canon = Self::canon(p);
        let missed: Vec<String> = list
            .unwrap_or_default()
            .iter()
            .filter(|v| Self::canon(&v.file) == canon)
            .filter(|v| !config.git_key_is_safe(&v.key, &v.value))
            .filter(|v| !removed.iter().any(|r| r.eq_ignore_ascii_case(&v.key)))
            .map(|v| v.key.clone())
            .collect();
        if !missed.is_empty() {
            let done = move_aside(git_dir, p);
            let why = format!(
                "git reads {} from it where efr's reader does not see them, the whole file",
                missed.join(", ")
            );
            self.report(p, done, &why);
            return;
        }
        if removed.is_empty() {
            return;
        }
        removed.dedup();
        let copy = (|| -> std::io::Result<PathBuf> {
            let dir = quarantine_dir(git_dir)?;
            let name = name_of(p);
            let to = dir.join(&name);
            new_file(&to, &text, 0o600)?;
            // The new config goes into a file of ours (create_new: never through a link the
            // call left), then over the old one.
            let mut tmp_name = name.clone();
            tmp_name.push(".new");
            let tmp = dir.join(tmp_name);
            new_file(&tmp, &kept, meta.permissions().mode() & 0o777)?;
            std::fs::rename(&tmp, p)?;
            Ok(to)
        })();
        self.out.push(match copy {
            Ok(to) => format!(
                "{}: {} set by the call or in a repository it changed, not on git.safe_config_keys, taken out (the original is {})",
                p.display(),
                removed.join(", "),
                to.display()
            ),
            Err(e) => format!(
                "{}: {} not on git.safe_config_keys, could not be taken out: {e}",
                p.display(),
                removed.join(", ")
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk finds every repository up to its depths, through a root given as a link,
    /// and none through a link below it, past its depth, or inside a `.git`.
    #[test]
    fn the_walk_finds_the_repositories_it_should() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        let mk = |rel: &str| std::fs::create_dir_all(real.join(rel)).unwrap();
        for r in [
            ".git",
            "a/.git",
            "a/b/c/d/e/f/g/h/i/j/k/.git",
            "a/b/c/d/e/f/g/h/i/j/k/l/.git",
            "a/b/c/d/e/f/g/h/i/j/k/l/m/.git",
            "target/x/.git",
            "target/x/y/z/.git",
            "target/x/y/z/w/.git",
            "src/.git/inside/.git",
            "elsewhere/.git",
            "leaf/plain",
        ] {
            mk(r);
        }
        // A worktree's `.git` file.
        mk("wt");
        std::fs::write(real.join("wt/.git"), "gitdir: /nowhere\n").unwrap();
        // A link below the root to a directory holding a repository: not followed.
        std::os::unix::fs::symlink(real.join("elsewhere"), real.join("a/link")).unwrap();
        let root = d.path().join("root-link");
        std::os::unix::fs::symlink(&real, &root).unwrap();
        let skip = vec!["target".to_string()];
        // Each repository below the root, and whether in build output; sorted.
        let rel = |f: Vec<Found>| -> Vec<(String, bool)> {
            let mut v: Vec<(String, bool)> = f
                .into_iter()
                .map(|f| {
                    let r = f.dir.strip_prefix(&root).unwrap().display().to_string();
                    (r, f.in_build_output)
                })
                .collect();
            v.sort();
            v
        };
        let found = rel(find_repos(&root, &skip)
            .into_iter()
            .filter(|f| !f.bare)
            .collect());
        let want: Vec<(String, bool)> = [
            ("", false),
            ("a", false),
            ("a/b/c/d/e/f/g/h/i/j/k", false),
            ("a/b/c/d/e/f/g/h/i/j/k/l", false),
            ("elsewhere", false),
            ("src", false),
            ("target/x", true),
            ("target/x/y/z", true),
            ("wt", false),
        ]
        .iter()
        .map(|(p, b)| (p.to_string(), *b))
        .collect();
        assert_eq!(found, want);
        // The same as the walk by absolute paths it replaced (its oracle).
        assert_eq!(found, rel(find_repos_by_paths(&root, &skip)));
    }

    /// Directories git takes as git dirs by what they hold are found as git dirs (not
    /// walked into), under any name, in build output too; `objects` or `refs` alone is no
    /// git dir.
    #[test]
    fn the_walk_finds_git_dirs_by_what_they_hold() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for r in [
            "docs/objects",
            "docs/refs",
            "a/b/pair/objects",
            "a/b/pair/refs",
            "a/b/pair/inner/objects",
            "only/objects",
            "target/t/refs",
            "target/t/objects",
        ] {
            std::fs::create_dir_all(root.join(r)).unwrap();
        }
        std::fs::create_dir_all(root.join("h/sub")).unwrap();
        std::fs::write(root.join("h/HEAD"), "ref: refs/heads/main\n").unwrap();
        let mut bare: Vec<(String, bool)> = find_repos(root, &["target".to_string()])
            .into_iter()
            .filter(|f| f.bare)
            .map(|f| {
                let r = f.dir.strip_prefix(root).unwrap().display().to_string();
                (r, f.in_build_output)
            })
            .collect();
        bare.sort();
        let want: Vec<(String, bool)> = [
            ("a/b/pair", false),
            ("docs", false),
            ("h", false),
            ("target/t", true),
        ]
        .iter()
        .map(|(p, b)| (p.to_string(), *b))
        .collect();
        assert_eq!(bare, want);
    }

    /// The walk by absolute paths that the handles replaced (`find_repos` as of c2ba1a8): the
    /// oracle.
    fn find_repos_by_paths(root: &Path, skip: &[String]) -> Vec<Found> {
        let mut out = Vec::new();
        if std::fs::symlink_metadata(root.join(".git")).is_ok() {
            out.push(Found {
                dir: root.to_path_buf(),
                in_build_output: false,
                bare: false,
            });
        }
        let mut queue = std::collections::VecDeque::from([(root.to_path_buf(), 0usize, None)]);
        let mut walked = 0;
        while let Some((dir, level, bo_left)) = queue.pop_front() {
            walked += 1;
            if walked > MAX_WALK {
                break;
            }
            if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.nlink() == 2) {
                continue;
            }
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) || e.file_name() == ".git" {
                    continue;
                }
                let p = e.path();
                let bo = match bo_left {
                    Some(n) => Some(n),
                    None if skip.iter().any(|n| OsStr::new(n) == e.file_name()) => {
                        Some(BUILD_OUTPUT_DEPTH + 1)
                    }
                    None => None,
                };
                if std::fs::symlink_metadata(p.join(".git")).is_ok() {
                    out.push(Found {
                        dir: p.clone(),
                        in_build_output: bo.is_some(),
                        bare: false,
                    });
                }
                let below = bo.map(|n: usize| n.saturating_sub(1));
                if level + 1 < GUARD_DEPTH && below != Some(0) {
                    queue.push_back((p, level + 1, below));
                }
            }
        }
        out
    }

    #[test]
    fn exec_lines_as_git_reads_them() {
        assert!(has_exec(b"pick 1 a\n   exec touch x\n"));
        assert!(has_exec(b"\tx touch x\n"));
        assert!(!has_exec(b"pick 1 exec\n# exec x\nexecute\n"));
    }
}
