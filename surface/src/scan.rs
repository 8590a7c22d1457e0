//! The bounded walk: every visible plain file under the roots, tried against the patterns.

use std::collections::HashSet;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::patterns::{Class, Patterns};

/// How far a scan goes.
#[derive(Debug, Clone)]
pub struct Budget {
    /// Directories below a root, at most.
    pub max_depth: usize,
    /// Directory entries looked at, at most.
    pub max_entries: usize,
    /// Bytes read from the start of each file, at most.
    pub max_bytes: usize,
    /// Time, at most; after it the scan says `partial` and where it was.
    pub time: Duration,
    /// Whether a directory on another file system than its root is left out (a network
    /// mount in a home may hang or hold a million files).
    pub one_file_system: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_depth: 16,
            max_entries: 500_000,
            max_bytes: 64 * 1024,
            time: Duration::from_secs(1),
            one_file_system: true,
        }
    }
}

/// A file that looks like a secret.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The file, as the scan reached it (below a root it was given).
    pub path: PathBuf,
    /// What the file looks like.
    pub class: Class,
    /// The pattern that matched, as [`crate::patterns::Match::pattern`].
    pub pattern: String,
    /// The host a token of its kind is for, when the pattern names one.
    pub host: Option<String>,
    /// Every host a token in the file's first bytes is for ([`Patterns::hosts`]): what
    /// the proxy denies while the file is visible. Also read for a file found by its name.
    pub hosts: Vec<String>,
}

/// Where a scan stopped before it was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    /// `time` or `entries`.
    pub why: &'static str,
    /// The directory it was in.
    pub at: PathBuf,
}

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Sorted by path.
    pub findings: Vec<Finding>,
    /// Set when a bound cut the scan short.
    pub partial: Option<Partial>,
    /// Entries looked at.
    pub entries: usize,
    /// Files read.
    pub read: usize,
    /// Files whose name is a secret store's (a dotenv, a token file) that hold none now:
    /// not asked about, but watched (a token written into one later is its host's).
    pub watched: Vec<PathBuf>,
}

/// The directory names of a cache (the Cache Directory Tagging Specification): a
/// directory holding this file is a cache and is not entered.
const CACHE_TAG: &str = "CACHEDIR.TAG";

/// How often the clock is read (entries; and at each directory).
const CLOCK_EVERY: usize = 256;

/// The marker of a Python virtual environment (of any name): installed packages.
const VENV_MARKER: &str = "pyvenv.cfg";

/// Trees a link out of the home is never followed into: the system's own (a call sees them
/// read-only like everyone; they hold no secret of the user's that the masks do not name)
/// and `/tmp` (a call has its own).
const SYSTEM_TREES: [&str; 15] = [
    "/usr", "/etc", "/proc", "/sys", "/dev", "/run", "/boot", "/bin", "/sbin", "/lib", "/lib32",
    "/lib64", "/libx32", "/snap", "/tmp",
];

/// Where the scan goes next: a directory, at a depth.
type Stack = Vec<(PathBuf, usize)>;

/// Scans `roots` for files that look like secrets by `patterns`, within `budget`.
/// `visible` says whether a contained call can read a path (a directory it says no to is
/// not entered); only plain files are opened (without blocking: a FIFO named like a key is
/// never read). A link is followed only out of the roots (a directory or file of the
/// user's linked into the home, which a call reaches through the link), never into the
/// system's trees nor back inside. A `.git` directory is not walked, but its `config` is
/// read, and the files of a `credential.helper = store --file PATH` it or the user's git
/// config names.
pub fn scan(
    roots: &[PathBuf],
    visible: &dyn Fn(&Path) -> bool,
    patterns: &Patterns,
    budget: &Budget,
) -> Scan {
    let start = Instant::now();
    let mut out = Scan::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut buf = vec![0u8; budget.max_bytes];
    let canon_roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    // The home is the last root (`run::surface` puts it after the projects): where the
    // user's git config is and what `~/` of a credential store names.
    let home = canon_roots.last().cloned().unwrap_or_default();
    let mut stores: Vec<PathBuf> = [".gitconfig", ".config/git/config"]
        .iter()
        .flat_map(|f| helper_stores(&home.join(f), &home))
        .collect();
    'roots: for root in &canon_roots {
        let Ok(md) = std::fs::symlink_metadata(root) else {
            continue;
        };
        if !md.is_dir() || !visible(root) {
            continue;
        }
        let dev = md.dev();
        let mut stack: Stack = vec![(root.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            if start.elapsed() >= budget.time {
                out.partial = Some(Partial {
                    why: "time",
                    at: dir,
                });
                break 'roots;
            }
            let Ok(dmd) = std::fs::symlink_metadata(&dir) else {
                continue;
            };
            if !seen.insert((dmd.dev(), dmd.ino())) {
                continue;
            }
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                out.entries += 1;
                if out.entries % CLOCK_EVERY == 0 && start.elapsed() >= budget.time {
                    out.partial = Some(Partial {
                        why: "time",
                        at: dir.clone(),
                    });
                    break 'roots;
                }
                if out.entries > budget.max_entries {
                    out.partial = Some(Partial {
                        why: "entries",
                        at: dir.clone(),
                    });
                    break 'roots;
                }
                let Ok(ft) = e.file_type() else { continue };
                let path = e.path();
                if ft.is_symlink() {
                    let Some(target) = followed(&path, &canon_roots, visible) else {
                        continue;
                    };
                    if target.is_dir() {
                        if depth < budget.max_depth {
                            stack.push((target, depth + 1));
                        }
                    } else if target.is_file() {
                        let len = std::fs::metadata(&target).map(|m| m.len()).unwrap_or(0);
                        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        let name = name.to_string();
                        examine(&mut out, path, &target, &name, len, patterns, &mut buf);
                    }
                    continue;
                }
                if ft.is_dir() {
                    if depth + 1 > budget.max_depth || !visible(&path) {
                        continue;
                    }
                    if e.file_name() == ".git" {
                        // git's store is not walked; its config is read, and the stores
                        // its credential helpers name.
                        let config = path.join("config");
                        stores.extend(helper_stores(&config, &home));
                        if visible(&config)
                            && std::fs::symlink_metadata(&config).is_ok_and(|m| m.is_file())
                        {
                            let len = std::fs::metadata(&config).map(|m| m.len()).unwrap_or(0);
                            examine(
                                &mut out,
                                config.clone(),
                                &config,
                                "config",
                                len,
                                patterns,
                                &mut buf,
                            );
                        }
                        continue;
                    }
                    let comps: Vec<&str> = path
                        .components()
                        .filter_map(|c| c.as_os_str().to_str())
                        .collect();
                    if patterns.skips_dir(&comps)
                        || path.join(CACHE_TAG).exists()
                        || path.join(VENV_MARKER).exists()
                    {
                        continue;
                    }
                    if budget.one_file_system
                        && std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() != dev)
                    {
                        continue;
                    }
                    stack.push((path, depth + 1));
                    continue;
                }
                if !ft.is_file() || !visible(&path) {
                    continue;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                examine(
                    &mut out,
                    path.clone(),
                    &path,
                    &name,
                    len,
                    patterns,
                    &mut buf,
                );
            }
        }
    }
    // The credential helpers' stores, wherever they are, when a call can read them.
    for s in stores {
        if visible(&s) && std::fs::symlink_metadata(&s).is_ok_and(|m| m.is_file()) {
            let len = std::fs::metadata(&s).map(|m| m.len()).unwrap_or(0);
            let before = out.findings.len();
            examine(&mut out, s.clone(), &s, "", len, patterns, &mut buf);
            if out.findings.len() == before && len > 0 {
                // A store is credentials by what it is, whatever its lines look like.
                out.findings.push(Finding {
                    path: s,
                    class: Class::Credentials,
                    pattern: "git:credential.helper store".into(),
                    host: None,
                    hosts: Vec::new(),
                });
            }
        }
    }
    out.findings.sort();
    out.findings.dedup();
    out
}

/// The target of the link at `path` when the scan follows it: out of every root, not into
/// the system's trees, and visible to a call (the link and its target).
fn followed(path: &Path, roots: &[PathBuf], visible: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    let target = std::fs::canonicalize(path).ok()?;
    let inside = roots.iter().any(|r| target.starts_with(r));
    let system = target == Path::new("/")
        || SYSTEM_TREES.iter().any(|t| target.starts_with(t))
        || roots.iter().any(|r| r.starts_with(&target));
    (!inside && !system && visible(path) && visible(&target)).then_some(target)
}

/// Reads the plain file `file` (reached at `path`, named `name`, of `len` bytes) and
/// records it when it looks like a secret.
fn examine(
    out: &mut Scan,
    path: PathBuf,
    file: &Path,
    name: &str,
    len: u64,
    patterns: &Patterns,
    buf: &mut [u8],
) {
    let by_name = patterns.by_name(name);
    let head = read_head(file, buf);
    if head.is_some() {
        out.read += 1;
    }
    let head = &buf[..head.unwrap_or(0)];
    // A name that needs more (a key's body, a token) counts only with it; a dotenv or a
    // token file without one is watched.
    let unmet = by_name.as_ref().is_some_and(|(m, needs)| {
        needs.is_some_and(|n| !patterns.holds(n, head, len))
            && matches!(m.class, Class::Env | Class::Token | Class::Credentials)
    });
    let by_name = by_name
        .filter(|(_, needs)| needs.is_none_or(|n| patterns.holds(n, head, len)))
        .map(|(m, _)| m);
    let Some(m) = by_name.or_else(|| patterns.by_content(head)) else {
        if unmet {
            out.watched.push(path);
        }
        return;
    };
    out.findings.push(Finding {
        path,
        class: m.class,
        pattern: m.pattern,
        host: m.host,
        hosts: patterns.hosts(head),
    });
}

/// The files of the `store --file PATH` credential helpers a git config names (read as
/// text, no git run; `~/` against `home`).
fn helper_stores(config: &Path, home: &Path) -> Vec<PathBuf> {
    let Ok(m) = std::fs::symlink_metadata(config) else {
        return Vec::new();
    };
    if !m.is_file() || m.len() > 1 << 20 {
        return Vec::new();
    }
    let Ok(text) = std::fs::read_to_string(config) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim().eq_ignore_ascii_case("helper")).then_some(v.trim())
        })
        .filter_map(|v| {
            let words: Vec<&str> = v.trim_matches('"').split_whitespace().collect();
            let store = words
                .first()
                .is_some_and(|w| *w == "store" || w.ends_with("git-credential-store"));
            if !store {
                return None;
            }
            let file = words
                .iter()
                .position(|w| *w == "--file")
                .and_then(|i| words.get(i + 1).map(|s| s.to_string()))
                .or_else(|| {
                    words
                        .iter()
                        .find_map(|w| w.strip_prefix("--file=").map(String::from))
                })?;
            Some(match file.strip_prefix("~/") {
                Some(rest) => home.join(rest),
                None => PathBuf::from(file),
            })
        })
        .collect()
}

/// The hosts of the tokens in the first `max_bytes` of the plain file at `path`
/// ([`Patterns::hosts`]), read as the scan reads (no link, no FIFO); `None` when it is not
/// a plain file that can be read.
pub fn file_hosts(path: &Path, patterns: &Patterns, max_bytes: usize) -> Option<Vec<String>> {
    let mut buf = vec![0u8; max_bytes];
    let n = read_head(path, &mut buf)?;
    Some(patterns.hosts(&buf[..n]))
}

/// Reads the first bytes of the plain file at `path` into `buf`: opened without following
/// a link and without blocking, and checked to be a plain file once open (it may have been
/// replaced since it was listed).
fn read_head(path: &Path, buf: &mut [u8]) -> Option<usize> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Some(n)
}

/// Never a link, never waiting for a FIFO's writer, never a controlling terminal.
fn libc_flags() -> i32 {
    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY
}
