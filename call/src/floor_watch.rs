//! The floor files of the home that a call may write (each runs code outside the sandbox
//! later, so a change by an approved line is told to the user: the protocol's phase A
//! `home_file_changed`): before an unsandboxed call, or a contained one
//! with a `write` grant that covers a floor file or reaches into a floor directory, the
//! floor files it could write are read (bounded); after it, each one it changed, made or
//! removed is reported in the summary's `home_file_changed`, and the content from before is
//! kept as a backup (efr-surface's backups: a new `O_EXCL` name each time, mode 0600, at
//! most ten per file, in the state directory every contained call has masked).
//!
//! A call that can write no floor (every contained call without such a grant: floors are
//! read-only in it) costs nothing here. A change is told by each file's metadata (device,
//! inode, size, mode, times); the bytes of small files (1 MiB each, 16 MiB in all) are
//! read before the call, so the backup is the file as it was even when the call rewrote it
//! in place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use efr_launcher::plan::{Plan, PlanMode};
use efr_policy::config::{Config, Env};
use efr_sandbox_wire::{Grant, HomeFileChanged, SandboxSummary};

/// Most files watched for one call (floor directories such as `~/.local/bin` may be large).
pub const MAX_WATCHED: usize = 512;
/// Deepest level a floor directory is walked to.
pub const MAX_DEPTH: usize = 4;
/// Most bytes kept from before the call, all files together; a file past it (or larger
/// than [`MAX_KEPT_FILE`]) is compared by its metadata and reported without a backup.
pub const MAX_KEPT: usize = 16 << 20;
/// The largest file whose bytes are kept (a program in `~/.local/bin` may be tens of MiB:
/// it is only stat'ed).
pub const MAX_KEPT_FILE: u64 = 1 << 20;
/// Most entries of the summary's `home_file_changed` (then `home_file_changed_more`).
pub const MAX_SUMMARY: usize = 16;

/// One file as it was before the call.
#[derive(Debug)]
struct Before {
    meta: Meta,
    /// Its bytes, when small enough and while [`MAX_KEPT`] allows.
    bytes: Option<Vec<u8>>,
}

/// What tells a file changed without reading it: its device, inode, size, mode and times
/// (through links).
type Meta = (u64, u64, u64, u32, i64, i64, i64, i64);

fn meta(p: &Path) -> Option<Meta> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    m.is_file().then(|| {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mode(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    })
}

/// The floor files a call may write, as they were before it.
#[derive(Debug)]
pub struct FloorWatch {
    home: PathBuf,
    /// The floor entries watched (expanded; may hold `*` patterns).
    floors: Vec<PathBuf>,
    before: BTreeMap<PathBuf, Before>,
    /// The walk stopped at [`MAX_WATCHED`].
    cut: bool,
}

/// Whether a floor entry is a pattern: a `*` in it (the config's pattern rules,
/// `efr_sandbox_wire::pattern`).
fn has_glob(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes().contains(&b'*')
}

/// The part of `p` before its first component with a glob.
fn literal_prefix(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        if has_glob(Path::new(c.as_os_str())) {
            break;
        }
        out.push(c);
    }
    out
}

impl FloorWatch {
    /// The watch for `plan`: every floor of the home for an unsandboxed call, the floors its
    /// `write` grants reach for a contained one; `None` when it can write none.
    pub fn for_plan(plan: &Plan, config: &Config, env: &Env) -> Option<FloorWatch> {
        let home = env.home.clone();
        if home.as_os_str().is_empty() || !home.is_absolute() {
            return None;
        }
        // The write grants of a contained call (checked first: most calls have none, and
        // then nothing else is done here on the call's path).
        let grants: Vec<PathBuf> = plan
            .grants
            .iter()
            .filter_map(|g| match g {
                Grant::Write { path } => env.expand(path),
                // Only a write grant lets the call write below a floor.
                _ => None,
            })
            .collect();
        if plan.mode != PlanMode::Unsandboxed && grants.is_empty() {
            return None;
        }
        let floors: Vec<PathBuf> = config
            .floors
            .paths
            .iter()
            .filter_map(|e| env.expand(&e.value))
            .filter(|p| p.is_absolute() && p.starts_with(&home) && p != &home)
            .collect();
        let watched: Vec<PathBuf> = match plan.mode {
            PlanMode::Unsandboxed => floors,
            _ => floors
                .into_iter()
                .filter(|f| {
                    let lit = literal_prefix(f);
                    grants
                        .iter()
                        .any(|g| lit.starts_with(g) || g.starts_with(&lit))
                })
                .collect(),
        };
        if watched.is_empty() {
            return None;
        }
        let mut w = FloorWatch {
            home,
            floors: watched,
            before: BTreeMap::new(),
            cut: false,
        };
        let mut kept = 0usize;
        for p in w.files() {
            let Some(m) = meta(&p) else { continue };
            let bytes = if m.2 <= MAX_KEPT_FILE
                && usize::try_from(m.2).is_ok_and(|n| kept + n <= MAX_KEPT)
            {
                read(&p).inspect(|b| kept += b.len())
            } else {
                None
            };
            w.before.insert(p, Before { meta: m, bytes });
        }
        Some(w)
    }

    /// The files of the watched floors now: plain files and links to files (never a link
    /// followed into a directory), at most [`MAX_WATCHED`].
    fn files(&mut self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let floors = self.floors.clone();
        for f in &floors {
            let (start, pattern) = if has_glob(f) {
                (literal_prefix(f), Some(f.clone()))
            } else {
                (f.clone(), None)
            };
            let mut stack = vec![(start, 0usize)];
            while let Some((p, depth)) = stack.pop() {
                if out.len() >= MAX_WATCHED {
                    self.cut = true;
                    return out;
                }
                let Ok(m) = std::fs::symlink_metadata(&p) else {
                    continue;
                };
                let matches = pattern
                    .as_ref()
                    .is_none_or(|pat| efr_surface::floor::is_floor(&p, std::slice::from_ref(pat)));
                if m.is_dir() {
                    if depth >= MAX_DEPTH {
                        continue;
                    }
                    if let Ok(rd) = std::fs::read_dir(&p) {
                        for e in rd.flatten() {
                            stack.push((e.path(), depth + 1));
                        }
                    }
                } else if matches && (m.is_file() || m.file_type().is_symlink()) {
                    out.push(p);
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// After the call: what changed, with a backup of each changed or removed file, into
    /// `summary`.
    pub fn finish(mut self, summary: &mut SandboxSummary) {
        let state = efr_surface::state::state_dir(&self.home);
        let now = self.files();
        let mut changed: Vec<(PathBuf, Option<&Before>)> = Vec::new();
        for p in &now {
            match (self.before.get(p), meta(p)) {
                (Some(b), Some(m)) if m != b.meta => changed.push((p.clone(), Some(b))),
                (None, Some(_)) => changed.push((p.clone(), None)),
                _ => {}
            }
        }
        for (p, b) in &self.before {
            if !now.contains(p) && !self.cut {
                changed.push((p.clone(), Some(b)));
            }
        }
        changed.sort_by(|a, b| a.0.cmp(&b.0));
        for (p, b) in changed {
            let real = std::fs::canonicalize(&p).ok().filter(|r| r != &p);
            let backup = b.and_then(|b| b.bytes.as_deref()).and_then(|bytes| {
                let target = real.clone().unwrap_or_else(|| p.clone());
                efr_surface::floor::back_up(&state, &target, bytes)
                    .ok()
                    .map(|b| b.display().to_string())
            });
            if summary.home_file_changed.len() >= MAX_SUMMARY {
                summary.home_file_changed_more = summary.home_file_changed_more.saturating_add(1);
                continue;
            }
            summary.home_file_changed.push(HomeFileChanged {
                path: p.display().to_string(),
                floor: true,
                real: real.map(|r| r.display().to_string()),
                backup,
            });
        }
    }
}

/// A file's bytes (through a link to a file inside or outside the home: what the user's
/// next shell reads), at most [`MAX_KEPT_FILE`]; `None` for what is not a file.
fn read(p: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut b = Vec::new();
    f.take(efr_surface::floor::MAX_FILE)
        .read_to_end(&mut b)
        .ok()?;
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_prefix_stops_at_the_first_glob() {
        assert_eq!(
            literal_prefix(Path::new("/h/.local/lib/python3*/site-packages/*.pth")),
            PathBuf::from("/h/.local/lib")
        );
        assert_eq!(
            literal_prefix(Path::new("/h/.bashrc")),
            PathBuf::from("/h/.bashrc")
        );
    }
}
