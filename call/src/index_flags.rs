//! The index flags a contained call sets: `git update-index --skip-worktree FILE` (or
//! `--assume-unchanged`) makes git take a tracked file as unchanged, so that an edit of it
//! does not show in `git status` or `git diff`: a review evasion. The index is writable in
//! a call (git writes it all the time), so the flags are compared after the call with
//! those the call started with, and the ones it added are taken off again.
//!
//! Kept cheaply: before the launch, [`Snapshot::take`] opens the index file of each
//! repository the launch view found and holds the fd, reading nothing. Git replaces the
//! index by writing `index.lock` and renaming it over `index`, so the inode the call
//! started with stays readable through the fd whatever the call does to the name. After the
//! call (and, for a background job, as often as its owner asks), [`Snapshot::check`] looks
//! at the index file there is now: the same inode with the same ctime means nothing
//! changed and nothing is read; else both are read (at most [`MAX_INDEX`] bytes each) and
//! decoded by `gix-index`, and every entry that has `skip-worktree` or `assume-unchanged`
//! now but did not at the start is a [`Gained`]. An index written in place (same inode,
//! new ctime: no git tool does that) leaves no start to compare with: every flag it holds
//! counts as the call's, and the repository is named in `index_unchecked`. The last 32
//! bytes of the index (its checksum, which git checks at every read) are kept at launch
//! too: an index written in place and then replaced by git (its inode no longer the
//! index's) is caught by them. Where the checksum is all zero (`index.skipHash`) the
//! flags are read at launch instead.
//!
//! [`Snapshot::settle`] undoes them with git itself, every code-running feature off as
//! [`crate::git_dirs`] runs it, hooks too (`post-index-change`): `git update-index
//! --no-skip-worktree` and `--no-assume-unchanged`, the paths on stdin. One exception:
//! in a repository with sparse checkout on, a `skip-worktree` entry whose file is not in
//! the work tree is what `git sparse-checkout` sets (it removes the file), so it is
//! reported and kept. A file that is there is undone even then: sparse checkout never
//! leaves a file it skips in the work tree (git clears the flag of such a file itself), and
//! only a file that is there can hide an edit.
//!
//! A split index (`core.splitIndex`, entries in a shared index beside it) is listed by git
//! itself (`git ls-files -v`), the held one through a copy in the temp dir.
//!
//! Repositories made during the call are not here (no start to compare with; the git guard
//! looks at them); flags the user set before the call are left alone.

use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use efr_sandbox_wire::{IndexFlag, IndexFlagSet, SandboxSummary};

/// The largest index read (a repository of 400,000 files has an index of about 40 MiB).
pub const MAX_INDEX: u64 = 256 << 20;

/// The most memory the decoder may take for one index (its own bound on what the entry
/// count and sizes in the file ask for).
const ALLOC_LIMIT: usize = 1 << 30;

/// Most entries of the summary's `index_flags` (then `index_flags_more`).
pub const MAX_SUMMARY: usize = 32;

/// A repository whose index is kept: its work tree's top and its own git dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The top of the work tree.
    pub top: PathBuf,
    /// The git dir that holds its `index`.
    pub git_dir: PathBuf,
}

/// What tells an index file from another, or a changed one, without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// The same inode (its ctime says nothing once git renamed a new index over it: the
    /// old inode's link count dropped, which sets its ctime).
    fn same_file(&self, o: &Stamp) -> bool {
        self.dev == o.dev && self.ino == o.ino
    }
}

/// How many bytes of an index's end are kept at launch: its trailing checksum (sha1 or
/// sha256).
const TAIL: u64 = 32;

/// The index file a call started with.
#[derive(Debug)]
struct Start {
    file: File,
    stamp: Stamp,
    /// Its last [`TAIL`] bytes: the checksum of its content, which git checks at every
    /// read. Written in place with anything git would read, they differ.
    tail: Vec<u8>,
    /// Its flags, read at launch when its checksum is all zero (`index.skipHash`: the tail
    /// tells nothing then).
    flags: Option<Vec<(Vec<u8>, IndexFlag)>>,
}

impl Start {
    fn take(f: File) -> Option<Start> {
        let m = f.metadata().ok()?;
        if !m.is_file() {
            return None;
        }
        let tail = tail_of(&f, m.len());
        let flags = tail
            .iter()
            .all(|b| *b == 0)
            .then(|| read_all(&f).and_then(|d| flagged(&d)).ok())
            .flatten();
        Some(Start {
            file: f,
            stamp: Stamp::of(&m),
            tail,
            flags,
        })
    }

    /// Whether its inode holds what it held at launch (same size and checksum).
    fn intact(&self) -> bool {
        self.file
            .metadata()
            .is_ok_and(|m| m.len() == self.stamp.size && tail_of(&self.file, m.len()) == self.tail)
    }
}

/// The last [`TAIL`] bytes of `f` (of `len` bytes), or fewer.
fn tail_of(f: &File, len: u64) -> Vec<u8> {
    let at = len.saturating_sub(TAIL);
    let mut buf = vec![0u8; usize::try_from(len - at).unwrap_or(0)];
    match f.read_at(&mut buf, at) {
        Ok(n) => buf.truncate(n),
        Err(_) => buf.clear(),
    }
    buf
}

/// One repository's index as the call started with it.
#[derive(Debug)]
struct Held {
    repo: Repo,
    /// The index file the call started with (None: there was none).
    start: Option<Start>,
    /// The stamp of the last index a check found nothing in (not read again).
    clean: Mutex<Option<Stamp>>,
}

/// The index flags of the repositories of a call, as it started.
#[derive(Debug, Default)]
pub struct Snapshot {
    held: Vec<Held>,
}

/// A file that gained a flag during the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gained {
    /// The repository (its work tree's top).
    pub repo: PathBuf,
    /// The path as the index names it (relative to the top, bytes).
    pub path: Vec<u8>,
    /// The flag.
    pub flag: IndexFlag,
}

/// What a [`Snapshot::check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// The flags the call added.
    pub gained: Vec<Gained>,
    /// The repositories whose index could not be compared, with why (one line each).
    pub unchecked: Vec<String>,
}

/// Why an index could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Reading it failed.
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// It is not a regular file.
    #[error("not a regular file")]
    NotAFile,
    /// Past [`MAX_INDEX`].
    #[error("it is larger than {} MiB", MAX_INDEX >> 20)]
    TooLarge,
    /// Its trailing checksum matches neither sha1 nor sha256.
    #[error("its checksum does not match (not an index git wrote)")]
    Checksum,
    /// The decoder refused it.
    #[error("it does not decode: {0}")]
    Decode(String),
    /// A split index (`core.splitIndex`): its entries are in a shared index beside it
    /// (then git lists them).
    #[error("it is a split index (core.splitIndex)")]
    Split,
}

/// Opens an index file to read: no link followed, no wait on a FIFO.
fn open_index(p: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
}

/// The bytes of an open index, from its start, at most [`MAX_INDEX`].
fn read_all(f: &File) -> Result<Vec<u8>, IndexError> {
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(IndexError::NotAFile);
    }
    if m.len() > MAX_INDEX {
        return Err(IndexError::TooLarge);
    }
    let len = usize::try_from(m.len()).map_err(|_| IndexError::TooLarge)?;
    let mut buf = vec![0u8; len];
    let mut at = 0usize;
    while at < len {
        let n = f.read_at(&mut buf[at..], at as u64)?;
        if n == 0 {
            break;
        }
        at += n;
    }
    buf.truncate(at);
    Ok(buf)
}

/// The hash kind whose checksum ends `data`: the trailing hash of the content before it
/// (all zero when git was told to skip it, `index.skipHash`: then sha1, the common kind).
fn hash_kind(data: &[u8]) -> Result<gix_index::hash::Kind, IndexError> {
    use gix_index::hash::Kind;
    let mut zero = None;
    for kind in [Kind::Sha1, Kind::Sha256] {
        let n = kind.len_in_bytes();
        if data.len() < 12 + n {
            continue;
        }
        let (body, sum) = data.split_at(data.len() - n);
        if sum.iter().all(|b| *b == 0) {
            zero.get_or_insert(kind);
            continue;
        }
        let mut h = gix_index::hash::hasher(kind);
        h.update(body);
        if h.try_finalize().is_ok_and(|id| id.as_bytes() == sum) {
            return Ok(kind);
        }
    }
    zero.ok_or(IndexError::Checksum)
}

/// The entries of an index (its bytes) that have `skip-worktree` or `assume-unchanged`:
/// path and flag, one item per flag. Any bytes give an answer or an error, never a panic.
pub fn flagged(data: &[u8]) -> Result<Vec<(Vec<u8>, IndexFlag)>, IndexError> {
    use gix_index::entry::Flags;
    let kind = hash_kind(data)?;
    let opts = gix_index::decode::Options {
        thread_limit: Some(1),
        min_extension_block_in_bytes_for_threading: 0,
        expected_checksum: None,
        alloc_limit_bytes: Some(ALLOC_LIMIT),
    };
    let decoded = std::panic::catch_unwind(|| {
        gix_index::State::from_bytes(data, filetime::FileTime::zero(), kind, opts)
    })
    .map_err(|_| IndexError::Decode("the decoder failed".into()))?;
    let (state, _) = decoded.map_err(|e| IndexError::Decode(e.to_string()))?;
    if state.link().is_some() {
        return Err(IndexError::Split);
    }
    let mut out = Vec::new();
    for e in state.entries() {
        let path: &[u8] = e.path(&state);
        if e.flags.contains(Flags::SKIP_WORKTREE) {
            out.push((path.to_vec(), IndexFlag::SkipWorktree));
        }
        if e.flags.contains(Flags::ASSUME_VALID) {
            out.push((path.to_vec(), IndexFlag::AssumeUnchanged));
        }
    }
    Ok(out)
}

impl Snapshot {
    /// Holds the index file each repository has now (nothing is read).
    pub fn take(repos: &[Repo]) -> Snapshot {
        let held = repos
            .iter()
            .map(|r| {
                let start = open_index(&r.git_dir.join("index"))
                    .ok()
                    .and_then(Start::take);
                Held {
                    repo: r.clone(),
                    start,
                    clean: Mutex::new(None),
                }
            })
            .collect();
        Snapshot { held }
    }

    /// The repositories held.
    pub fn repos(&self) -> impl Iterator<Item = &Repo> {
        self.held.iter().map(|h| &h.repo)
    }

    /// The flags the call added since [`Self::take`], in every repository held (see the
    /// module doc). Reads nothing of an index that did not change; may run any number of
    /// times (a background job's owner runs it while the job lives).
    pub fn check(&self) -> Check {
        let mut c = Check::default();
        for h in &self.held {
            h.check(&mut c);
        }
        c
    }

    /// [`Self::check`], then every flag found taken off again (but those sparse checkout
    /// set), as the summary reports them.
    pub fn settle(&self) -> Settled {
        let c = self.check();
        let mut sets = Vec::new();
        for h in &self.held {
            let mine: Vec<&Gained> = c.gained.iter().filter(|g| g.repo == h.repo.top).collect();
            if !mine.is_empty() {
                sets.extend(undo(&h.repo, &mine));
            }
        }
        Settled {
            sets,
            unchecked: c.unchecked,
        }
    }
}

impl Held {
    /// The flagged entries of the index `data` of this repository: by [`flagged`], or, for
    /// a split index (whose entries live in a shared index beside it), by git's own
    /// listing (`git ls-files -v`, which reads the shared index from the git dir); `held`:
    /// `data` is the index the call started with, handed to git as a copy.
    fn flags_of(&self, data: Vec<u8>, held: bool) -> Result<Vec<(Vec<u8>, IndexFlag)>, IndexError> {
        match flagged(&data) {
            Err(IndexError::Split) if held => {
                let copy = TempIndex::write(&data)?;
                flagged_by_git(&self.repo.top, Some(&copy.0))
            }
            Err(IndexError::Split) => flagged_by_git(&self.repo.top, None),
            r => r,
        }
    }

    fn check(&self, c: &mut Check) {
        let top = &self.repo.top;
        let name = |why: String| format!("{}: {why}", top.display());
        let now = match open_index(&self.repo.git_dir.join("index")) {
            Ok(f) => f,
            // No index now: no flag either.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                c.unchecked
                    .push(name(format!("the index cannot be opened: {e}")));
                return;
            }
        };
        let Ok(m) = now.metadata() else { return };
        let stamp = Stamp::of(&m);
        let clean = self.clean.lock().unwrap_or_else(|p| p.into_inner());
        if self.start.as_ref().is_some_and(|st| st.stamp == stamp) || *clean == Some(stamp) {
            return;
        }
        drop(clean);
        let mut before: Vec<(Vec<u8>, IndexFlag)> = Vec::new();
        if let Some(st) = &self.start {
            // Written in place: the start's own inode is the index now with a new ctime,
            // or (replaced by git since) holds another size or checksum than at launch.
            let in_place = st.stamp.same_file(&stamp) || (st.flags.is_none() && !st.intact());
            if in_place {
                c.unchecked.push(name(
                    "the index was written in place (git writes a new file and renames it), \
                     so its flags at the start are unknown: every flag it holds is taken as \
                     the call's"
                        .into(),
                ));
            } else if let Some(f) = &st.flags {
                before = f.clone();
            } else {
                match read_all(&st.file).and_then(|d| self.flags_of(d, true)) {
                    Ok(v) => before = v,
                    Err(e) => {
                        c.unchecked
                            .push(name(format!("the index the call started with: {e}")));
                        return;
                    }
                }
            }
        }
        let after = match read_all(&now).and_then(|d| self.flags_of(d, false)) {
            Ok(v) => v,
            Err(e) => {
                c.unchecked.push(name(format!("the index: {e}")));
                return;
            }
        };
        let mut found = false;
        for (path, flag) in after {
            if !before.iter().any(|(p, f)| *p == path && *f == flag) {
                found = true;
                c.gained.push(Gained {
                    repo: top.clone(),
                    path,
                    flag,
                });
            }
        }
        if !found {
            *self.clean.lock().unwrap_or_else(|p| p.into_inner()) = Some(stamp);
        }
    }
}

/// A copy of an index in the temp dir (mode 0600, a new random name), removed on drop.
struct TempIndex(PathBuf);

impl TempIndex {
    fn write(data: &[u8]) -> Result<TempIndex, IndexError> {
        let name = format!("efr-index-{}", crate::sys::random_hex(8)?);
        let p = std::env::temp_dir().join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)?;
        let t = TempIndex(p);
        f.write_all(data)?;
        Ok(t)
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The flagged entries of the index of the repository at `top` (or of `index`, read as
/// that repository's) as git lists them: `git ls-files -v -z`, whose tag is `S` (or `s`)
/// for skip-worktree and lower case for assume-unchanged; git run as
/// [`crate::git_dirs`] runs it.
fn flagged_by_git(
    top: &Path,
    index: Option<&Path>,
) -> Result<Vec<(Vec<u8>, IndexFlag)>, IndexError> {
    let mut c = Command::new("git");
    crate::git_dirs::quiet_env(&mut c, top);
    if let Some(i) = index {
        c.env("GIT_INDEX_FILE", i);
    }
    c.args(["ls-files", "-v", "-z"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let child = c.spawn()?;
    let out = crate::git_dirs::wait_bounded(child)
        .filter(|o| o.status.success())
        .ok_or_else(|| IndexError::Decode("git ls-files could not list it".into()))?;
    let mut v = Vec::new();
    for item in out.stdout.split(|b| *b == 0).filter(|i| i.len() > 2) {
        let (tag, path) = (item[0], item[2..].to_vec());
        if tag == b'S' || tag == b's' {
            v.push((path.clone(), IndexFlag::SkipWorktree));
        }
        if tag.is_ascii_lowercase() {
            v.push((path, IndexFlag::AssumeUnchanged));
        }
    }
    Ok(v)
}

/// What [`Snapshot::settle`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// Each flag the call added, undone or why not.
    pub sets: Vec<IndexFlagSet>,
    /// The repositories whose index could not be compared, with why.
    pub unchecked: Vec<String>,
}

impl Settled {
    /// Puts it in a summary: at most [`MAX_SUMMARY`] entries of `index_flags`, the rest
    /// counted in `index_flags_more`.
    pub fn into_summary(self, s: &mut SandboxSummary) {
        let more = self.sets.len().saturating_sub(MAX_SUMMARY);
        s.index_flags = self.sets.into_iter().take(MAX_SUMMARY).collect();
        s.index_flags_more = u32::try_from(more).unwrap_or(u32::MAX);
        s.index_unchecked = self.unchecked;
    }
}

/// Whether sparse checkout is on in the repository at `top` (git's answer, its own config
/// files only).
fn sparse_checkout(top: &Path) -> bool {
    crate::git_dirs::config_list(top).is_some_and(|l| {
        l.iter()
            .rev()
            .find(|v| v.key == "core.sparsecheckout")
            .is_some_and(|v| v.value.eq_ignore_ascii_case(b"true") || v.value == b"1")
    })
}

/// Takes the flags of `gained` off in `repo` with git; each as the summary reports it.
fn undo(repo: &Repo, gained: &[&Gained]) -> Vec<IndexFlagSet> {
    let sparse =
        gained.iter().any(|g| g.flag == IndexFlag::SkipWorktree) && sparse_checkout(&repo.top);
    let mut out: Vec<IndexFlagSet> = Vec::new();
    for flag in [IndexFlag::SkipWorktree, IndexFlag::AssumeUnchanged] {
        let mut paths: Vec<&[u8]> = Vec::new();
        let mut sets: Vec<IndexFlagSet> = Vec::new();
        for g in gained.iter().filter(|g| g.flag == flag) {
            let in_tree =
                std::fs::symlink_metadata(repo.top.join(std::ffi::OsStr::from_bytes(&g.path)))
                    .is_ok();
            let kept = (sparse && flag == IndexFlag::SkipWorktree && !in_tree).then(|| {
                "sparse checkout is on and the file is not in the work tree: git \
                 sparse-checkout set it"
                    .to_string()
            });
            if kept.is_none() {
                paths.push(&g.path);
            }
            sets.push(IndexFlagSet {
                repo: repo.top.to_string_lossy().into_owned(),
                path: String::from_utf8_lossy(&g.path).into_owned(),
                flag,
                undone: false,
                kept,
            });
        }
        if !paths.is_empty() {
            let r = update_index(&repo.top, flag, &paths);
            for s in sets.iter_mut().filter(|s| s.kept.is_none()) {
                match &r {
                    Ok(()) => s.undone = true,
                    Err(e) => s.kept = Some(format!("git could not take the flag off: {e}")),
                }
            }
        }
        out.extend(sets);
    }
    out
}

/// `git update-index --no-skip-worktree` (or `--no-assume-unchanged`) of `paths` in the
/// repository at `top`, the paths NUL-separated on stdin; git run as [`crate::git_dirs`]
/// runs it, its hooks off too.
fn update_index(top: &Path, flag: IndexFlag, paths: &[&[u8]]) -> Result<(), String> {
    let arg = match flag {
        IndexFlag::AssumeUnchanged => "--no-assume-unchanged",
        _ => "--no-skip-worktree",
    };
    let mut c = Command::new("git");
    crate::git_dirs::quiet_env(&mut c, top);
    c.args([
        "-c",
        "core.hooksPath=/dev/null",
        "update-index",
        arg,
        "-z",
        "--stdin",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p);
        input.push(0);
    }
    let stdin = child.stdin.take();
    // Written by a thread: git may answer before it has read everything.
    let writer = std::thread::spawn(move || {
        if let Some(mut s) = stdin {
            let _ = s.write_all(&input);
        }
    });
    let out = crate::git_dirs::wait_bounded(child).ok_or("git took too long")?;
    let _ = writer.join();
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err.lines().next().unwrap_or("failed").trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=u", "-c", "user.email=u@x"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A flag set after the snapshot is found (again at every check until it is undone),
    /// one set before is not; settle takes it off.
    #[test]
    fn flags_set_after_the_snapshot_are_found_and_undone() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("r");
        std::fs::create_dir_all(&top).unwrap();
        git(&top, &["init", "-q"]);
        for f in ["a", "b", "c"] {
            std::fs::write(top.join(f), f).unwrap();
        }
        git(&top, &["add", "a", "b", "c"]);
        git(&top, &["commit", "-qm", "x"]);
        git(&top, &["update-index", "--skip-worktree", "a"]);
        let repo = Repo {
            top: top.clone(),
            git_dir: top.join(".git"),
        };
        let snap = Snapshot::take(std::slice::from_ref(&repo));
        assert_eq!(snap.check(), Check::default());
        git(&top, &["update-index", "--skip-worktree", "b"]);
        git(&top, &["update-index", "--assume-unchanged", "c"]);
        for _ in 0..2 {
            let c = snap.check();
            let got: Vec<(&[u8], IndexFlag)> =
                c.gained.iter().map(|g| (&g.path[..], g.flag)).collect();
            assert_eq!(
                got,
                [
                    (&b"b"[..], IndexFlag::SkipWorktree),
                    (&b"c"[..], IndexFlag::AssumeUnchanged)
                ]
            );
        }
        let s = snap.settle();
        assert_eq!(s.sets.len(), 2, "{s:?}");
        assert!(s.sets.iter().all(|x| x.undone && x.kept.is_none()), "{s:?}");
        assert_eq!(snap.check(), Check::default());
        let data = std::fs::read(top.join(".git/index")).unwrap();
        assert_eq!(
            flagged(&data).unwrap(),
            [(b"a".to_vec(), IndexFlag::SkipWorktree)]
        );
    }

    #[test]
    fn bad_bytes_are_errors() {
        for data in [
            &b""[..],
            b"DIRC",
            &[0u8; 40],
            &[0xffu8; 100],
            b"DIRC\0\0\0\x02\0\0\0\x01xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ] {
            assert!(flagged(data).is_err(), "{data:?}");
        }
    }
}
