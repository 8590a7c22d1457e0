//! The lock files of granted files that the call made, and their removal at the call's end.
//!
//! git (and libgit2, npm, many editors) write a file by lock file and rename: `FILE.lock`
//! made with `O_CREAT|O_EXCL`, written, renamed onto `FILE`. A grant to write `FILE` lets a
//! call do the same ([`super::rules::Rules::granted_lock`]): the supervisor lets an open
//! make `FILE.lock` and records the inode it made here; then it lets the call write, chmod,
//! rename away or remove that inode only (a lock the host's own git holds at that name is
//! not the call's to touch). A lock the call made and left (its writer killed between the
//! create and the rename) would make the user's next `git config` fail with `File exists`:
//! at the call's end the init removes each lock it made that is still there, by inode.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use super::sys;

/// One lock file the call made.
#[derive(Debug)]
struct Made {
    /// Its directory, as the supervisor resolved it.
    dir: OwnedFd,
    name: CString,
    dev: u64,
    ino: u64,
}

#[derive(Debug, Default)]
struct Inner {
    /// Set at the call's end: no lock is made after the removal.
    closed: bool,
    made: Vec<Made>,
}

/// The lock files of granted files made by one call (shared by its supervisor's threads and
/// its init, which removes what is left at the end).
#[derive(Debug, Default)]
pub struct MadeLocks(Mutex<Inner>);

/// At most this many lock files are remembered (a call that makes more gets `EMFILE` for
/// the next: each holds its directory's fd).
const MAX_LOCKS: usize = 256;

impl MadeLocks {
    /// Makes the lock file `name` in `dir` with `make` (the open, `O_CREAT` without a file
    /// there) and records the inode it made; refused with `EROFS` once the call has ended.
    pub(super) fn make(
        &self,
        dir: &OwnedFd,
        name: &CString,
        make: impl FnOnce() -> Result<OwnedFd, i32>,
    ) -> Result<OwnedFd, i32> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if g.closed {
            return Err(libc::EROFS);
        }
        if g.made.len() >= MAX_LOCKS {
            return Err(libc::EMFILE);
        }
        let dup = dir.try_clone().map_err(super::ops::errno)?;
        let f = make()?;
        if let Ok(st) = sys::fstat(f.as_fd()) {
            g.made.push(Made {
                dir: dup,
                name: name.clone(),
                dev: st.st_dev,
                ino: st.st_ino,
            });
        }
        Ok(f)
    }

    /// Whether the file at the absolute path `path` now is a lock file this call made.
    pub(super) fn holds(&self, path: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(path)) else {
            return false;
        };
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.made.iter().any(|l| l.dev == m.dev() && l.ino == m.ino())
    }

    /// The call has ended: removes each lock file it made that is still at its name (the
    /// same inode), and makes no more. Returns how many it removed.
    pub fn remove_left(&self) -> usize {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.closed = true;
        let mut removed = 0;
        for l in g.made.drain(..) {
            let there = sys::fstatat(l.dir.as_fd(), &l.name, libc::AT_SYMLINK_NOFOLLOW);
            if there.is_ok_and(|st| st.st_dev == l.dev && st.st_ino == l.ino)
                && sys::unlinkat(l.dir.as_fd(), &l.name, 0).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_fd(p: &std::path::Path) -> OwnedFd {
        std::fs::File::open(p).unwrap().into()
    }

    fn make_in(locks: &MadeLocks, d: &std::path::Path, name: &str) -> Result<OwnedFd, i32> {
        let dir = dir_fd(d);
        let n = CString::new(name).unwrap();
        locks.make(&dir, &n, || {
            sys::openat(
                dir.as_fd(),
                &n,
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                0o600,
            )
            .map_err(super::super::ops::errno)
        })
    }

    #[test]
    fn the_locks_left_are_removed_and_no_other_file() {
        let d = tempfile::tempdir().unwrap();
        let locks = MadeLocks::default();
        let _left = make_in(&locks, d.path(), "config.lock").unwrap();
        let _renamed = make_in(&locks, d.path(), "other.lock").unwrap();
        assert!(locks.holds(d.path().join("config.lock").as_os_str().as_encoded_bytes()));
        // One was renamed onto its file (the normal end); another file took its name (the
        // host's git, after the call's lock went): neither is the call's lock any more.
        std::fs::rename(d.path().join("other.lock"), d.path().join("other")).unwrap();
        std::fs::write(d.path().join("other.lock"), "the host's").unwrap();
        assert!(!locks.holds(d.path().join("other.lock").as_os_str().as_encoded_bytes()));
        assert_eq!(locks.remove_left(), 1);
        assert!(!d.path().join("config.lock").exists());
        assert!(d.path().join("other").exists());
        assert_eq!(
            std::fs::read_to_string(d.path().join("other.lock")).unwrap(),
            "the host's"
        );
        // Once the call has ended, no lock is made.
        assert_eq!(
            make_in(&locks, d.path(), "late.lock").err(),
            Some(libc::EROFS)
        );
        assert!(!d.path().join("late.lock").exists());
    }
}
