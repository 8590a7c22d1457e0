//! A per-call directory's owner lock: a file the process that owns the directory holds
//! locked (`flock`) for as long as the directory lives. Another process can then tell a
//! live owner from one that died (SIGKILL, the OOM killer) and left the directory behind:
//! the lock of a dead owner can be taken. The call's cache layers ([`crate::caches`]) and
//! its proxy's socket directory ([`crate::egress`]) use it.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A lock held: let go when dropped (or when the process ends, however it ends).
pub type Held = nix::fcntl::Flock<File>;

/// Makes the lock file `path` (a new file, 0600) and holds its lock. The file is made and
/// locked under a name of its own first and then linked in as `path`: a sweep of another
/// process that opened `path` between its creation and its lock would have found the lock
/// free, taken it and removed a live call's directory (seen in CI: the owner's own lock
/// then failed with EAGAIN). A sweep sees no lock file, or a held one.
pub fn hold(path: &Path) -> io::Result<Held> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".new-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    let held = match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(h) => h,
        Err((_, e)) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    // Linked in only once held; the temporary name goes either way.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    linked.map(|()| held)
}

/// The lock at `path` when its owner is gone (it could be taken), held until dropped;
/// `Ok(None)` while its owner holds it; an error when there is no lock file to open (a
/// link is not followed).
pub fn take_if_free(path: &Path) -> io::Result<Option<Held>> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    Ok(nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).ok())
}

#[cfg(test)]
mod tests {
    use super::{hold, take_if_free};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// A sweeper that probes the lock while its owner makes it never takes it from the
    /// owner: the owner's `hold` never fails, and no probe made while one owner held the
    /// lock throughout finds it free.
    #[test]
    fn a_sweeper_never_takes_a_lock_being_made() {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("owner.lock"));
        let stop = Arc::new(AtomicBool::new(false));
        // Odd while the owner holds the lock (its generation).
        let held_gen = Arc::new(AtomicU64::new(0));
        let took = Arc::new(AtomicBool::new(false));
        let sweeper = {
            let (path, stop, generation, took) =
                (path.clone(), stop.clone(), held_gen.clone(), took.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let before = generation.load(Ordering::SeqCst);
                    if let Ok(Some(_)) = take_if_free(&path) {
                        if before % 2 == 1 && generation.load(Ordering::SeqCst) == before {
                            took.store(true, Ordering::SeqCst);
                        }
                    }
                }
            })
        };
        let mut failed = 0;
        for _ in 0..3000 {
            match hold(&path) {
                Ok(held) => {
                    held_gen.fetch_add(1, Ordering::SeqCst);
                    held_gen.fetch_add(1, Ordering::SeqCst);
                    // Let go as an owner does: the file first, then the lock.
                    std::fs::remove_file(&*path).unwrap();
                    drop(held);
                }
                Err(_) => {
                    failed += 1;
                    let _ = std::fs::remove_file(&*path);
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        sweeper.join().unwrap();
        assert_eq!(failed, 0, "hold failed while a sweeper probed");
        assert!(
            !took.load(Ordering::SeqCst),
            "a sweeper took a live owner's lock"
        );
    }
}
