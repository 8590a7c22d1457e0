//! Where a repository's git dirs are and which config it reads, as git itself says.
//!
//! Git's own rules decide which directory a `.git` file, a `commondir` or `core.hooksPath`
//! names (it keeps blanks, follows links before `..`, reads bytes that are not UTF-8), and
//! which files its config includes. A reader of our own gets these wrong in ways a call
//! can use, so git is asked:
//!
//! - `git rev-parse --path-format=absolute --absolute-git-dir --git-common-dir --git-path
//!   hooks`: the git dir, the common dir and the hooks dir git runs hooks from
//!   (`core.hooksPath` included);
//! - `git config --list --show-origin -z`: every key git reads for the repository, with the
//!   file it comes from (includes and `includeIf` decided by git), as bytes.
//!
//! Both run with every code-running feature off: no system or global config
//! (`GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`), `-c core.fsmonitor=` (no
//! fsmonitor daemon or hook), `GIT_OPTIONAL_LOCKS=0`, no pager, no prompt, a clean
//! environment (no `GIT_DIR` and the like from ours), `GIT_CEILING_DIRECTORIES` set to the
//! repository's parent so that git looks at that directory only, stdin closed and a time
//! limit (a config that is a FIFO must not hang the service). Checked by experiment with
//! git 2.39.5 and 2.47.3: in a repository whose config sets `core.fsmonitor`,
//! `core.pager`, `core.editor` (through an `include.path`), `core.sshCommand`, an alias
//! named `rev-parse`, `diff.*.textconv` with a matching `.gitattributes`, and whose hooks
//! dir (`core.hooksPath=.husky/_`) and `.git/hooks` hold `post-checkout` and
//! `reference-transaction` hooks that write a marker, neither command wrote a marker.
//! (`core.hooksPath` is not overridden for `rev-parse`: its answer is the point, and
//! `rev-parse` runs no hook.)
//!
//! When git is missing or its answer cannot be read, [`lookup`] and [`config_files`] fall
//! back to the built-in reader of `efr_policy::git` and say so. That reader
//! follows git's rules for `.git` files and `commondir` (checked against git by
//! `tests/git_dirs_diff.rs` and the `git_dirs` fuzz target) and answers "unknown" where it
//! cannot tell them as git would: never a different dir.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one git command may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The git dirs of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Its own git dir.
    pub git_dir: PathBuf,
    /// The common dir (the main repository's git dir for a linked worktree).
    pub common: PathBuf,
    /// The directory git runs hooks from.
    pub hooks: PathBuf,
    /// Found by git itself (false: by the built-in reader, git being missing or failing).
    pub by_git: bool,
}

/// One key git reads, and the file it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue {
    /// The config file that sets it (absolute; git's relative origins read from the
    /// repository).
    pub file: PathBuf,
    /// `section[.sub].name` as git writes it (section and name lower case).
    pub key: String,
    /// Its value's bytes as git lists them (empty for a key with no `=`).
    pub value: Vec<u8>,
}

/// Whether `git` runs here.
pub fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        run(Path::new("/"), &["--version"]).is_some_and(|o| o.starts_with(b"git version"))
    })
}

/// The stdout of `git -C dir <args>` run as the module doc says; None when git is missing,
/// fails or takes too long.
fn run(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    Pending::spawn(dir, args)?.wait()
}

/// Sets up `c` (a `git` command) as the module doc says, for the repository at `dir`: a
/// clean environment, no system or global config, no fsmonitor, no pager, no prompt, no
/// optional locks, git looking at `dir` only; `-C dir` and those options given. The
/// caller adds the subcommand.
pub(crate) fn quiet_env(c: &mut Command, dir: &Path) {
    c.env_clear();
    for k in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(k) {
            c.env(k, v);
        }
    }
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("LC_ALL", "C");
    if let Some(parent) = dir.parent() {
        c.env("GIT_CEILING_DIRECTORIES", parent);
    }
    c.arg("-C")
        .arg(dir)
        .args(["--no-pager", "-c", "core.fsmonitor="]);
}

/// Waits for `child` at most [`TIMEOUT`], its stdout and stderr (when piped) read by
/// threads of their own (at most 8 MiB each); None when it took longer (then it is killed).
pub(crate) fn wait_bounded(mut child: std::process::Child) -> Option<std::process::Output> {
    fn drain(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(r) = r {
                let _ = r.take(8 << 20).read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if start.elapsed() < TIMEOUT => std::thread::sleep(Duration::from_millis(1)),
            _ => {
                // Our own child: ended by its handle.
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    status.map(|status| std::process::Output {
        status,
        stdout,
        stderr,
    })
}

/// A git command started as the module doc says, its stdout read by a thread of its own.
struct Pending {
    child: std::process::Child,
    reader: std::thread::JoinHandle<Vec<u8>>,
}

impl Pending {
    /// Starts `git -C dir <args>`; None when it cannot start.
    fn spawn(dir: &Path, args: &[&str]) -> Option<Pending> {
        let mut c = Command::new("git");
        quiet_env(&mut c, dir);
        c.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().ok()?;
        let Some(mut stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        };
        let reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = (&mut stdout).take(8 << 20).read_to_end(&mut buf);
            buf
        });
        Some(Pending { child, reader })
    }

    /// Its stdout once it has ended well; None when it failed or took longer than
    /// [`TIMEOUT`] (then it is killed).
    fn wait(mut self) -> Option<Vec<u8>> {
        let start = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) if start.elapsed() < TIMEOUT => {
                    std::thread::sleep(Duration::from_micros(200))
                }
                _ => {
                    // Our own child: ended by its handle.
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let out = self.reader.join().ok()?;
        status.filter(|s| s.success()).map(|_| out)
    }
}

fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// Whether the repository at `repo` is one whose git dirs need no asking: `.git` is a
/// directory (no link), without `commondir`, whose config (a regular file of at most
/// 64 KiB, or none) names no `hooksPath`, `include`, `worktree` or `gitdir` anywhere (case
/// aside). Git's answer for it is `.git`, `.git`, `.git/hooks`, as the built-in reader's.
/// (What the launch asks for every root and nested repository: running git for each costs
/// milliseconds on every call.)
pub fn plain(repo: &Path) -> bool {
    let dotgit = repo.join(".git");
    if !std::fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    if std::fs::symlink_metadata(dotgit.join("commondir")).is_ok() {
        return false;
    }
    let cfg = dotgit.join("config");
    match std::fs::symlink_metadata(&cfg) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Ok(m) if m.is_file() && m.len() <= 64 << 10 => std::fs::read(&cfg).is_ok_and(|b| {
            let lower = b.to_ascii_lowercase();
            !["hookspath", "include", "worktree", "gitdir"]
                .iter()
                .any(|w| lower.windows(w.len()).any(|x| x == w.as_bytes()))
        }),
        _ => false,
    }
}

/// The `rev-parse` arguments of [`ask_git`].
const REV_PARSE: &[&str] = &[
    "rev-parse",
    "--path-format=absolute",
    "--absolute-git-dir",
    "--git-common-dir",
    "--git-path",
    "hooks",
];

/// The `config` arguments of [`config_list`].
const CONFIG_LIST: &[&str] = &["config", "--list", "--show-origin", "-z"];

/// The git dirs of the repository at `repo` (a directory holding `.git`) as git itself
/// says; None when git is missing, refuses the repository or its answer cannot be read (a
/// path with a newline).
pub fn ask_git(repo: &Path) -> Option<Located> {
    parse_located(&run(repo, REV_PARSE)?)
}

/// [`ask_git`] and [`config_list`] at once (the two git commands run side by side: the
/// launch asks both of every repository that is not [`plain`]). The config list is None
/// when git could not say.
pub fn ask_git_with_config(repo: &Path) -> Option<(Located, Option<Vec<ConfigValue>>)> {
    let dirs = Pending::spawn(repo, REV_PARSE)?;
    let config = Pending::spawn(repo, CONFIG_LIST);
    let located = dirs.wait().and_then(|o| parse_located(&o));
    let list = config
        .and_then(Pending::wait)
        .and_then(|o| parse_config_list(repo, &o));
    Some((located?, list))
}

/// `rev-parse`'s answer of [`ask_git`].
fn parse_located(out: &[u8]) -> Option<Located> {
    let lines: Vec<&[u8]> = out
        .strip_suffix(b"\n")
        .unwrap_or(out)
        .split(|b| *b == b'\n')
        .collect();
    // A path with a newline in it makes more lines: then git's answer cannot be read.
    match lines[..] {
        [g, c, h] if g.starts_with(b"/") && c.starts_with(b"/") && h.starts_with(b"/") => {
            Some(Located {
                git_dir: path_of(g),
                common: path_of(c),
                hooks: path_of(h),
                by_git: true,
            })
        }
        _ => None,
    }
}

/// What is known of the git dirs of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Its git dirs, by git or by the built-in reader (git's rules).
    Found(Located),
    /// A `.git` whose git dirs git could not say and the built-in reader cannot tell the
    /// way git would: to be treated conservatively.
    Unknown,
    /// No repository git would use.
    NotFound,
}

/// The git dirs of the repository at `repo` (a directory holding `.git`), as git finds
/// them; by the built-in reader when git cannot say (and [`Lookup::Unknown`] where that
/// reader cannot tell them as git would).
pub fn lookup(repo: &Path) -> Lookup {
    use efr_policy::git::{GitLookup, lookup_git_dir};
    if let Some(l) = ask_git(repo) {
        return Lookup::Found(l);
    }
    if available()
        && std::fs::symlink_metadata(repo.join(".git")).is_ok()
        && run(repo, &["rev-parse", "--git-dir"]).is_none()
    {
        // Git runs: when it says this is no repository it would use, there is none.
        return Lookup::NotFound;
    }
    match lookup_git_dir(repo) {
        GitLookup::Found(d) => {
            let hooks = d.common.join("hooks");
            Lookup::Found(Located {
                git_dir: d.git_dir,
                common: d.common,
                hooks,
                by_git: false,
            })
        }
        GitLookup::Unknown { .. } => Lookup::Unknown,
        GitLookup::NotFound => Lookup::NotFound,
    }
}

/// The config files every repository of `loc` has (or may have), before includes.
pub fn standard_config_files(loc: &Located) -> Vec<PathBuf> {
    vec![
        loc.common.join("config"),
        loc.git_dir.join("config"),
        loc.git_dir.join("config.worktree"),
    ]
}

/// The git dirs of the repository at `repo`, when known ([`lookup`]).
pub fn locate(repo: &Path) -> Option<Located> {
    match lookup(repo) {
        Lookup::Found(l) => Some(l),
        Lookup::Unknown | Lookup::NotFound => None,
    }
}

/// Every key git reads for the repository at `repo` from its own files (not the system or
/// global ones), each with its file; None when git cannot say.
pub fn config_list(repo: &Path) -> Option<Vec<ConfigValue>> {
    parse_config_list(repo, &run(repo, CONFIG_LIST)?)
}

/// The answer of `git config --list --show-origin -z` in `repo`: each key with its file
/// (relative origins read from `repo`); None when it cannot be read.
pub fn parse_config_list(repo: &Path, out: &[u8]) -> Option<Vec<ConfigValue>> {
    let mut items = Vec::new();
    let mut parts = out.split(|b| *b == 0);
    while let Some(origin) = parts.next() {
        if origin.is_empty() {
            continue;
        }
        let kv = parts.next()?;
        let Some(file) = origin.strip_prefix(b"file:") else {
            // `command line:` (our own -c), `blob:`, ...
            continue;
        };
        let (k, v) = match kv.iter().position(|b| *b == b'\n') {
            Some(i) => (&kv[..i], kv[i + 1..].to_vec()),
            None => (kv, Vec::new()),
        };
        let f = path_of(file);
        items.push(ConfigValue {
            file: if f.is_absolute() { f } else { repo.join(f) },
            key: String::from_utf8_lossy(k).into_owned(),
            value: v,
        });
    }
    Some(items)
}

/// The config files git reads for the repository (its own, not the system or global ones),
/// with the keys git reads from each (`None` when git could not say: the built-in reader
/// found the files).
pub fn config_files(repo: &Path, loc: &Located) -> (Vec<PathBuf>, Option<Vec<ConfigValue>>) {
    let mut files = standard_config_files(loc);
    let list = if loc.by_git { config_list(repo) } else { None };
    match &list {
        Some(list) => files.extend(list.iter().map(|v| v.file.clone())),
        None => {
            // Includes as the built-in reader follows them.
            let mut entries = Vec::new();
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            for f in files.clone() {
                efr_policy::git::read_config(&f, &home, Some(&loc.git_dir), &mut entries, 0);
            }
            files.extend(entries.into_iter().map(|e| e.file));
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for f in files {
        if !out.contains(&f) {
            out.push(f);
        }
    }
    (out, list)
}
