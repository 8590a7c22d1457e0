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

/// Makes the lock file `path` (a new file, 0600) and holds its lock.
pub fn hold(path: &Path) -> io::Result<Held> {
    let f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| io::Error::from(e))
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
