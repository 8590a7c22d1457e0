//! Floor-file writes with a backup first (an approved write must be undoable): a write to a floor file the user
//! approved (`sandbox.floor_write`) copies the file to `<state dir>/backups/` (mode 0600,
//! a new `O_EXCL` name each time, at most [`MAX_BACKUPS`] per file, the oldest removed),
//! then writes the new content atomically (a temp file beside the real file, fsynced,
//! renamed over it). Through a link, the real file is written and backed up, and it must be
//! inside the home: a link out of the home is refused before anything is written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use efr_sandbox_wire::HomeFileChanged;

use crate::state::private_dir;

/// The largest edit or line, in bytes (efr's exit record carries at most this much).
pub const MAX_EDIT: usize = 8 * 1024;
/// Backups kept per file.
pub const MAX_BACKUPS: usize = 10;
/// The largest floor file backed up and rewritten (floor files are small configs).
pub const MAX_FILE: u64 = 4 << 20;
/// The directory of the backups in the state directory.
pub const BACKUPS_DIR: &str = "backups";

/// What to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// The file's new content (a file tool's edit).
    Edit(String),
    /// One line appended (the approved line).
    Line(String),
}

/// Why a floor write was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FloorWriteError {
    /// The edit or line is over [`MAX_EDIT`] bytes.
    #[error("the edit of {path} is {len} bytes, over the {MAX_EDIT} allowed")]
    TooLarge {
        /// The floor file asked.
        path: PathBuf,
        /// The edit's or line's length, in bytes.
        len: usize,
    },
    /// The line to append holds a line break (`\n`, `\r`) or a NUL.
    #[error("the line for {path} holds a newline or a NUL: one line only")]
    BadLine {
        /// The floor file asked.
        path: PathBuf,
    },
    /// The path is not absolute, holds `.` or `..`, or names no file.
    #[error("{path} is not an absolute path without `..`")]
    NotAbsolute {
        /// The path asked.
        path: PathBuf,
    },
    /// The path is not below the home.
    #[error("{path} is not inside the home {home}")]
    OutsideHome {
        /// The path asked.
        path: PathBuf,
        /// The home.
        home: PathBuf,
    },
    /// The path leads through a link to a file outside the home; nothing was written.
    #[error("{path} reaches {real} through a link, outside the home: refused")]
    LinkOutOfHome {
        /// The path asked.
        path: PathBuf,
        /// Where its links lead.
        real: PathBuf,
    },
    /// Neither the path nor its real file is a floor (`floors.paths`).
    #[error("{path} is not a floor file (floors.paths)")]
    NotAFloor {
        /// The path asked.
        path: PathBuf,
    },
    /// The real file exists and is not a regular file.
    #[error("{path} is not a regular file")]
    NotAFile {
        /// The real file.
        path: PathBuf,
    },
    /// The file is over [`MAX_FILE`] bytes.
    #[error("{path} is over {MAX_FILE} bytes: not a floor file to rewrite")]
    FileTooLarge {
        /// The real file.
        path: PathBuf,
    },
    /// Reading the file, the home or a directory on the way failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// What could not be read.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Making the backup failed; the file was not written.
    #[error("cannot back up {path}: {source}")]
    Backup {
        /// The real file being backed up.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Writing the new content failed; the old file stays as it was.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The real file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl FloorWriteError {
    /// The request was at fault (an `invalid` answer), not the file system.
    pub fn is_input(&self) -> bool {
        !matches!(
            self,
            FloorWriteError::Read { .. }
                | FloorWriteError::Backup { .. }
                | FloorWriteError::Write { .. }
        )
    }
}

/// Whether `path` is one of `floors` (absolute paths or `*` patterns, as
/// `floors.paths` expands against the home): the path itself, or inside a floor directory.
/// The config's own pattern rules (`efr_sandbox_wire::pattern`: `*` within a component,
/// `**` across them), as the launch view and `explain` read the same entries.
pub fn is_floor(path: &Path, floors: &[PathBuf]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    floors.iter().any(|f| {
        efr_sandbox_wire::pattern::covers(f.as_os_str().as_bytes(), path.as_os_str().as_bytes())
    })
}

fn lexically_absolute(p: &Path) -> bool {
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// The real file `path` names: every link resolved (the file itself may be missing; its
/// directory may not).
fn real_path(path: &Path) -> Result<PathBuf, FloorWriteError> {
    if fs::symlink_metadata(path).is_ok() {
        return fs::canonicalize(path).map_err(|source| FloorWriteError::Read {
            path: path.to_path_buf(),
            source,
        });
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(FloorWriteError::NotAbsolute {
            path: path.to_path_buf(),
        });
    };
    let parent = fs::canonicalize(parent).map_err(|source| FloorWriteError::Read {
        path: parent.to_path_buf(),
        source,
    })?;
    Ok(parent.join(name))
}

/// Writes `content` to the floor file `path` (absolute, inside `home`) after backing it up
/// under `state_dir`; `floors` are the config's floor paths, expanded.
pub fn floor_write(
    home: &Path,
    state_dir: &Path,
    floors: &[PathBuf],
    path: &Path,
    content: &Content,
) -> Result<HomeFileChanged, FloorWriteError> {
    let p = || path.to_path_buf();
    let text = match content {
        Content::Edit(s) | Content::Line(s) => s,
    };
    if text.len() > MAX_EDIT {
        return Err(FloorWriteError::TooLarge {
            path: p(),
            len: text.len(),
        });
    }
    if matches!(content, Content::Line(l) if l.contains(['\n', '\r', '\0'])) {
        return Err(FloorWriteError::BadLine { path: p() });
    }
    if !lexically_absolute(path) {
        return Err(FloorWriteError::NotAbsolute { path: p() });
    }
    let home_real = fs::canonicalize(home).map_err(|source| FloorWriteError::Read {
        path: home.to_path_buf(),
        source,
    })?;
    if !path.starts_with(home) && !path.starts_with(&home_real) {
        return Err(FloorWriteError::OutsideHome {
            path: p(),
            home: home.to_path_buf(),
        });
    }
    let real = real_path(path)?;
    if !real.starts_with(&home_real) {
        return Err(FloorWriteError::LinkOutOfHome { path: p(), real });
    }
    // A floor by the name asked for or by the real file (a link to ~/.bashrc).
    let in_home = |q: &Path| -> PathBuf {
        q.strip_prefix(&home_real)
            .map(|r| home.join(r))
            .unwrap_or_else(|_| q.to_path_buf())
    };
    if !is_floor(path, floors) && !is_floor(&in_home(&real), floors) && !is_floor(&real, floors) {
        return Err(FloorWriteError::NotAFloor { path: p() });
    }
    let old = match fs::symlink_metadata(&real) {
        Ok(m) if !m.is_file() => return Err(FloorWriteError::NotAFile { path: real }),
        Ok(m) if m.len() > MAX_FILE => return Err(FloorWriteError::FileTooLarge { path: real }),
        Ok(m) => Some((read_no_follow(&real)?, m.mode() & 0o7777)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(source) => return Err(FloorWriteError::Read { path: real, source }),
    };
    let backup = match &old {
        Some((bytes, _)) => Some(back_up(state_dir, &real, bytes)?),
        None => None,
    };
    let new: Vec<u8> = match content {
        Content::Edit(s) => s.as_bytes().to_vec(),
        Content::Line(l) => {
            let mut b = old.as_ref().map(|(b, _)| b.clone()).unwrap_or_default();
            if !b.is_empty() && !b.ends_with(b"\n") {
                b.push(b'\n');
            }
            b.extend_from_slice(l.as_bytes());
            b.push(b'\n');
            b
        }
    };
    let mode = old.as_ref().map(|(_, m)| *m).unwrap_or(0o644);
    replace(&real, &new, mode)?;
    Ok(HomeFileChanged {
        path: path.display().to_string(),
        floor: true,
        real: (real != path).then(|| real.display().to_string()),
        backup: backup.map(|b| b.display().to_string()),
    })
}

fn read_no_follow(path: &Path) -> Result<Vec<u8>, FloorWriteError> {
    let err = |source| FloorWriteError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(err)?;
    if !f.metadata().map_err(err)?.is_file() {
        return Err(FloorWriteError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let mut b = Vec::new();
    Read::by_ref(&mut f)
        .take(MAX_FILE + 1)
        .read_to_end(&mut b)
        .map_err(err)?;
    Ok(b)
}

/// The backup name's stem for a real path: the path with `%` and `/` escaped.
pub fn backup_stem(real: &Path) -> String {
    real.to_string_lossy()
        .replace('%', "%25")
        .replace('/', "%2F")
}

/// The backups of the real file `real`, oldest first.
pub fn backups_of(state_dir: &Path, real: &Path) -> Vec<PathBuf> {
    let dir = state_dir.join(BACKUPS_DIR);
    let stem = format!("{}.", backup_stem(real));
    let mut v: Vec<((u128, u64), PathBuf)> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let rest = name.strip_prefix(&stem)?;
            let (t, n) = rest.split_once('.')?;
            Some(((t.parse().ok()?, n.parse().ok()?), e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Copies `bytes` (the file `real` before the write) to a new backup: `O_EXCL` (an older
/// backup is never overwritten), `O_NOFOLLOW`, 0600, fsynced; then removes the oldest past
/// [`MAX_BACKUPS`].
pub fn back_up(state_dir: &Path, real: &Path, bytes: &[u8]) -> Result<PathBuf, FloorWriteError> {
    let dir = state_dir.join(BACKUPS_DIR);
    let err = |source| FloorWriteError::Backup {
        path: real.to_path_buf(),
        source,
    };
    private_dir(&dir).map_err(|e| err(io::Error::other(e.to_string())))?;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let stem = backup_stem(real);
    let mut n = 1u64;
    let (mut f, path) = loop {
        let path = dir.join(format!("{stem}.{t}.{n}"));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => break (f, path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(err(e)),
        }
    };
    crate::state::write_all_synced(&mut f, bytes).map_err(err)?;
    drop(f);
    let all = backups_of(state_dir, real);
    if all.len() > MAX_BACKUPS {
        for old in &all[..all.len() - MAX_BACKUPS] {
            let _ = fs::remove_file(old);
        }
    }
    File::open(&dir).and_then(|d| d.sync_all()).map_err(err)?;
    Ok(path)
}

/// Replaces the file `real` with `bytes` atomically: a temp file beside it (`O_EXCL`,
/// the old mode), fsynced, renamed over it, the directory fsynced. A writer killed
/// halfway leaves the old file whole (and a temp file).
fn replace(real: &Path, bytes: &[u8], mode: u32) -> Result<(), FloorWriteError> {
    let err = |source| FloorWriteError::Write {
        path: real.to_path_buf(),
        source,
    };
    let (Some(dir), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(err(io::Error::other("no parent directory")));
    };
    // A name of this write's own: two writes of one file at once each have theirs.
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.efr-tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(err)?;
    let res = f
        .set_permissions(fs::Permissions::from_mode(mode))
        .and_then(|()| crate::state::write_all_synced(&mut f, bytes));
    drop(f);
    if let Err(e) = res.and_then(|()| fs::rename(&tmp, real)) {
        let _ = fs::remove_file(&tmp);
        return Err(err(e));
    }
    File::open(dir).and_then(|d| d.sync_all()).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T {
        _t: tempfile::TempDir,
        home: PathBuf,
        state: PathBuf,
        floors: Vec<PathBuf>,
    }

    fn t() -> T {
        let t = tempfile::tempdir().unwrap();
        let home = fs::canonicalize(t.path()).unwrap().join("home");
        fs::create_dir_all(&home).unwrap();
        let state = home.join(".local/state/efr");
        let floors = vec![
            home.join(".bashrc"),
            home.join(".config/fish"),
            home.join(".local/lib/python3*/site-packages/*.pth"),
        ];
        T {
            _t: t,
            home,
            state,
            floors,
        }
    }

    #[test]
    fn a_line_is_appended_after_a_backup_of_the_old_file() {
        let t = t();
        let rc = t.home.join(".bashrc");
        fs::write(&rc, "alias ll='ls -l'").unwrap();
        fs::set_permissions(&rc, fs::Permissions::from_mode(0o640)).unwrap();
        let c = floor_write(
            &t.home,
            &t.state,
            &t.floors,
            &rc,
            &Content::Line("export A=1".into()),
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(&rc).unwrap(),
            "alias ll='ls -l'\nexport A=1\n"
        );
        assert_eq!(fs::metadata(&rc).unwrap().mode() & 0o777, 0o640);
        assert!(c.floor && c.real.is_none());
        let b = PathBuf::from(c.backup.unwrap());
        assert_eq!(fs::read_to_string(&b).unwrap(), "alias ll='ls -l'");
        assert_eq!(fs::metadata(&b).unwrap().mode() & 0o777, 0o600);
        assert!(b.starts_with(t.state.join(BACKUPS_DIR)));
    }

    #[test]
    fn backups_are_bounded_per_file_and_never_overwritten() {
        let t = t();
        let rc = t.home.join(".bashrc");
        fs::write(&rc, "0\n").unwrap();
        let mut seen = Vec::new();
        for i in 1..=(MAX_BACKUPS + 3) {
            let c = floor_write(
                &t.home,
                &t.state,
                &t.floors,
                &rc,
                &Content::Edit(format!("{i}\n")),
            )
            .unwrap();
            let b = c.backup.unwrap();
            assert!(!seen.contains(&b), "a backup name twice: {b}");
            seen.push(b);
        }
        let all = backups_of(&t.state, &rc);
        assert_eq!(all.len(), MAX_BACKUPS);
        // The newest backups are kept: the last holds what was there before the last write.
        assert_eq!(
            fs::read_to_string(all.last().unwrap()).unwrap(),
            format!("{}\n", MAX_BACKUPS + 2)
        );
        assert_eq!(fs::read_to_string(&all[0]).unwrap(), "3\n");
    }

    #[test]
    fn through_a_link_the_real_file_is_backed_up_and_written() {
        let t = t();
        let real = t.home.join("dotfiles/bashrc");
        fs::create_dir_all(real.parent().unwrap()).unwrap();
        fs::write(&real, "old\n").unwrap();
        let rc = t.home.join(".bashrc");
        std::os::unix::fs::symlink(&real, &rc).unwrap();
        let c = floor_write(
            &t.home,
            &t.state,
            &t.floors,
            &rc,
            &Content::Edit("new\n".into()),
        )
        .unwrap();
        assert_eq!(c.real.as_deref(), Some(real.to_str().unwrap()));
        assert!(fs::symlink_metadata(&rc).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new\n");
        assert_eq!(fs::read_to_string(c.backup.unwrap()).unwrap(), "old\n");
    }

    #[test]
    fn refusals_say_why_and_write_nothing() {
        let t = t();
        let outside = t.home.parent().unwrap().join("outside");
        fs::write(&outside, "keep\n").unwrap();
        let rc = t.home.join(".bashrc");
        std::os::unix::fs::symlink(&outside, &rc).unwrap();
        let e = floor_write(
            &t.home,
            &t.state,
            &t.floors,
            &rc,
            &Content::Edit("x".into()),
        )
        .unwrap_err();
        assert!(matches!(e, FloorWriteError::LinkOutOfHome { .. }), "{e}");
        assert_eq!(fs::read_to_string(&outside).unwrap(), "keep\n");
        assert!(!t.state.join(BACKUPS_DIR).exists());
        let cases: Vec<(PathBuf, Content, &str)> = vec![
            (
                t.home.join("notes.txt"),
                Content::Edit("x".into()),
                "not a floor",
            ),
            (
                outside.clone(),
                Content::Edit("x".into()),
                "not inside the home",
            ),
            (
                t.home.join("x/../.bashrc"),
                Content::Edit("x".into()),
                "not an absolute path",
            ),
            (
                t.home.join(".config/fish/config.fish"),
                Content::Line("a\nb".into()),
                "one line only",
            ),
            (
                t.home.join(".config/fish/config.fish"),
                Content::Edit("x".repeat(MAX_EDIT + 1)),
                "over the 8192",
            ),
        ];
        for (p, c, want) in cases {
            let e = floor_write(&t.home, &t.state, &t.floors, &p, &c).unwrap_err();
            assert!(e.is_input(), "{e}");
            assert!(e.to_string().contains(want), "{}: {e}", p.display());
        }
        fs::create_dir_all(t.home.join(".config/fish")).unwrap();
        let e = floor_write(
            &t.home,
            &t.state,
            &t.floors,
            &t.home.join(".config/fish"),
            &Content::Edit("x".into()),
        )
        .unwrap_err();
        assert!(matches!(e, FloorWriteError::NotAFile { .. }), "{e}");
    }

    #[test]
    fn concurrent_writes_of_one_file_each_back_up_and_land_whole() {
        let t = t();
        let rc = t.home.join(".bashrc");
        fs::write(&rc, "0\n").unwrap();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (home, state, floors, rc) = (
                    t.home.clone(),
                    t.state.clone(),
                    t.floors.clone(),
                    rc.clone(),
                );
                std::thread::spawn(move || {
                    floor_write(
                        &home,
                        &state,
                        &floors,
                        &rc,
                        &Content::Edit(format!("{i}\n")),
                    )
                    .unwrap()
                })
            })
            .collect();
        let mut backups: Vec<String> = threads
            .into_iter()
            .map(|h| h.join().unwrap().backup.unwrap())
            .collect();
        backups.sort();
        backups.dedup();
        assert_eq!(backups.len(), 8);
        let now = fs::read_to_string(&rc).unwrap();
        assert!(now.len() == 2 && now.ends_with('\n'), "{now:?}");
        let left: Vec<_> = fs::read_dir(&t.home)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("efr-tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_new_floor_file_has_no_backup_and_patterns_match() {
        let t = t();
        let d = t.home.join(".local/lib/python3.11/site-packages");
        fs::create_dir_all(&d).unwrap();
        let c = floor_write(
            &t.home,
            &t.state,
            &t.floors,
            &d.join("x.pth"),
            &Content::Line("import os".into()),
        )
        .unwrap();
        assert!(c.backup.is_none());
        assert_eq!(fs::read_to_string(d.join("x.pth")).unwrap(), "import os\n");
        assert_eq!(fs::metadata(d.join("x.pth")).unwrap().mode() & 0o777, 0o644);
        assert!(!is_floor(&d.join("x.py"), &t.floors));
    }
}
