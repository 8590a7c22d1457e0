//! The callers' umasks, read from `/proc/TID/status` once per thread rather than on every
//! file the supervisor makes for it (that read costs about 16 µs, more than the rest of a
//! create's round trip).
//!
//! An entry holds the umask read for a thread, the epoch it was read in and a pidfd of that
//! thread (`PIDFD_THREAD`): a thread id that was reused after its thread ended has an entry
//! whose pidfd says so, and is read again. Every `umask` call of the line is notified too
//! (and let through): it starts a change, which bumps the epoch, turns the cache off while
//! it is under way, waits until the caller's status shows the new mask, and bumps the epoch
//! again. A umask read while a change was under way, or in another epoch than the one it is
//! stored for, is never kept. Whichever processes share the umask (`CLONE_FS`), every entry
//! of the old epoch is dropped, so the answer is always a value the caller's umask had
//! during its call. A change that is never seen (the caller set another mask at once, or
//! stopped) leaves the cache off for the rest of the call: slower, never wrong.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::sys;

/// At most this many threads are remembered (each entry holds an fd).
const MAX_ENTRIES: usize = 128;
/// How long a change is waited for before the cache is turned off for good.
const CHANGE_WAIT: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct Entry {
    mask: u32,
    epoch: u64,
    pidfd: OwnedFd,
}

/// The umasks of a call's threads.
#[derive(Debug, Default)]
pub struct Umasks {
    epoch: AtomicU64,
    /// Changes under way (or never seen to end).
    pending: AtomicUsize,
    entries: Mutex<HashMap<libc::pid_t, Entry>>,
}

impl Umasks {
    /// The umask of thread `tid`, which is waiting in a supervised call.
    pub fn of(&self, tid: libc::pid_t) -> u32 {
        let epoch = self.epoch.load(Ordering::SeqCst);
        if self.pending.load(Ordering::SeqCst) == 0 {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = entries.get(&tid) {
                if e.epoch == epoch && !sys::pidfd_exited(e.pidfd.as_fd()) {
                    return e.mask;
                }
            }
        }
        // The pidfd first: it names the thread whose status is read next.
        let pidfd = sys::pidfd_open(tid).ok();
        let Some(mask) = read(tid) else {
            return 0o022;
        };
        if let Some(pidfd) = pidfd {
            if self.pending.load(Ordering::SeqCst) == 0
                && self.epoch.load(Ordering::SeqCst) == epoch
            {
                let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
                entries.insert(tid, Entry { mask, epoch, pidfd });
            }
        }
        mask
    }

    /// Thread `tid` calls `umask(new)`: `let_through` answers its call (the kernel then
    /// makes it), and the cache stays off until the new mask is seen.
    pub fn change(&self, tid: libc::pid_t, new: u32, let_through: impl FnOnce()) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let_through();
        let want = new & 0o777;
        let start = Instant::now();
        loop {
            match read(tid) {
                Some(m) if m == want => break,
                // The caller is gone: its change no longer matters, or it was made (a
                // process that shares the umask read later is read in a later epoch).
                None => break,
                Some(_) if start.elapsed() > CHANGE_WAIT => return,
                Some(_) => std::thread::yield_now(),
            }
        }
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The umask in `/proc/TID/status` (its `Umask:` line, near the head).
fn read(tid: libc::pid_t) -> Option<u32> {
    use std::io::Read;
    let mut buf = [0u8; 512];
    let n = std::fs::File::open(format!("/proc/{tid}/status"))
        .and_then(|mut f| f.read(&mut buf))
        .ok()?;
    parse(&buf[..n])
}

fn parse(status: &[u8]) -> Option<u32> {
    status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Umask:"))
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_umask_line() {
        assert_eq!(parse(b"Name:\tsh\nUmask:\t0077\nState:\tS\n"), Some(0o077));
        assert_eq!(parse(b"Name:\tsh\nState:\tS\n"), None);
        assert_eq!(parse(b"Umask:\tzz\n"), None);
    }

    /// A thread's umask through the cache, then after a change made meanwhile. (In a
    /// child process: the umask is the whole process's, and tests run in threads.)
    #[test]
    fn sees_a_change() {
        let ok = sys::in_child(|| {
            let u = Umasks::default();
            let tid = sys::gettid();
            sys::umask(0o022);
            let before = u.of(tid) == 0o022 && u.of(tid) == 0o022;
            u.change(tid, 0o077, || {
                sys::umask(0o077);
            });
            before && u.of(tid) == 0o077 && u.of(tid) == 0o077
        });
        assert!(ok);
    }
}
