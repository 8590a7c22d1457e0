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
}

/// The directory names of a cache (the Cache Directory Tagging Specification): a
/// directory holding this file is a cache and is not entered.
const CACHE_TAG: &str = "CACHEDIR.TAG";

/// How often the clock is read (entries; and at each directory).
const CLOCK_EVERY: usize = 256;

/// Scans `roots` for files that look like secrets by `patterns`, within `budget`.
/// `visible` says whether a contained call can read a path (a directory it says no to is
/// not entered); links are never followed, and only plain files are opened (without
/// blocking: a FIFO named like a key is never read).
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
    'roots: for root in roots {
        let Ok(root) = std::fs::canonicalize(root) else {
            continue;
        };
        let Ok(md) = std::fs::symlink_metadata(&root) else {
            continue;
        };
        if !md.is_dir() || !visible(&root) {
            continue;
        }
        let dev = md.dev();
        let mut stack = vec![(root, 0usize)];
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
                if ft.is_dir() {
                    if depth + 1 > budget.max_depth || !visible(&path) {
                        continue;
                    }
                    let comps: Vec<&str> = path
                        .components()
                        .filter_map(|c| c.as_os_str().to_str())
                        .collect();
                    if patterns.skips_dir(&comps) || path.join(CACHE_TAG).exists() {
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
                let name = e.file_name();
                let by_name = name.to_str().and_then(|n| patterns.by_name(n));
                let head = read_head(&path, &mut buf);
                if head.is_some() {
                    out.read += 1;
                }
                let head = &buf[..head.unwrap_or(0)];
                let Some(m) = by_name.or_else(|| patterns.by_content(head)) else {
                    continue;
                };
                out.findings.push(Finding {
                    path,
                    class: m.class,
                    pattern: m.pattern,
                    host: m.host,
                    hosts: patterns.hosts(head),
                });
            }
        }
    }
    out.findings.sort();
    out.findings.dedup();
    out
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
