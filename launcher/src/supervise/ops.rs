//! The supervised calls, made by the init on the caller's behalf.
//!
//! Each call's path is read once from the caller's memory, resolved here to a directory
//! fd and a last component (links followed the way the call would follow them, the last
//! one by hand so that the rules see where it leads), checked by [`Rules`], and the call is
//! then made on that fd with `O_NOFOLLOW` (a link swapped in meanwhile fails, it is not
//! followed). `/proc/self`, `/dev/fd` and `/dev/std*` are the caller's, not the init's.

use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::rules::{Act, Fs, Refusal};
use super::{MAX_MADE, Supervisor, sys};

/// What a handler answers.
pub(super) enum Reply {
    Val(i64),
    Err(i32),
    Fd(OwnedFd, bool),
    /// The caller is gone (or the answer was sent already).
    None,
}

/// At most this many opens that may block (FIFOs, devices) wait on threads of the init at
/// once; past that a call is answered EAGAIN.
const MAX_WAITING_OPENS: usize = 64;
static WAITING_OPENS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The longest path read from a caller.
const PATH_MAX: usize = 4096;
/// The most links followed in one resolution (the kernel's limit).
const MAX_LINKS: usize = 40;

/// A resolved target: a directory fd, the last component, and the absolute path.
pub(super) struct At {
    pub(super) dir: OwnedFd,
    pub(super) name: CString,
    pub(super) path: Vec<u8>,
    /// What the resolution saw at `name` without following it, when it looked: `Some(None)`
    /// for nothing there.
    seen: Option<Option<libc::stat>>,
}

/// Where a resolution ended.
pub(super) enum Target {
    At(At),
    /// `/proc/PID/fd/N` of a process of the call: its open file.
    ProcFd(OwnedFd),
}

pub(super) fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn c(b: &[u8]) -> Result<CString, i32> {
    CString::new(b).map_err(|_| libc::EINVAL)
}

fn dot() -> CString {
    CString::new(".").expect("no NUL")
}

/// The caller's process (thread group) id.
pub(super) fn tgid(tid: libc::pid_t) -> Option<libc::pid_t> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

pub(super) struct Call<'a> {
    pub(super) sup: &'a Supervisor,
    pub(super) n: &'a libc::seccomp_notif,
    /// The last path the rules let through, and what was done to it: where a failure of
    /// the call itself (the view's read-only mounts, Landlock) is reported.
    acted: Option<(&'static str, Vec<u8>)>,
    /// The supervisor's git lock, held from the decision of an act on a name that matters
    /// to git until the call is answered (see `super::gitdir`).
    pub(super) git_lock: Option<std::sync::MutexGuard<'a, ()>>,
    /// What the git rule left to do once the act is made (see `super::git_io`).
    pub(super) git_post: Vec<super::git_io::Post>,
}

impl Fs for HashSet<(u64, u64)> {
    fn has_git(&self, dir: &[u8]) -> bool {
        let mut p = dir.to_vec();
        p.extend_from_slice(b"/.git");
        std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(&p)).is_ok()
    }
    fn made_by_call(&self, dir: &[u8]) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(dir))
            .is_ok_and(|m| m.is_dir() && self.contains(&(m.dev(), m.ino())))
    }
}

impl Call<'_> {
    #[allow(
        clippy::cast_possible_wrap,
        reason = "a tid: at most the kernel's pid_max (2^22), always a positive pid_t"
    )]
    pub(super) fn tid(&self) -> libc::pid_t {
        self.n.pid as libc::pid_t
    }

    /// `mode` as the caller's umask leaves it (the init's own umask is 0: its threads make
    /// calls for several callers at once, and a umask is the whole process's).
    fn masked(&self, mode: u32) -> u32 {
        mode & !self.sup.umasks.of(self.tid())
    }

    fn arg(&self, i: usize) -> u64 {
        self.n.data.args[i]
    }

    /// The root of the call's view (the init's own: the call cannot change its root).
    fn root(&self) -> Result<OwnedFd, i32> {
        self.sup.root.try_clone().map_err(errno)
    }

    /// Whether the caller still waits in this call. (Only a caller that died since is
    /// not: its path was read from a process of the same call, which could make the same
    /// call itself, so this guards against wasted work, not against a privilege.)
    pub(super) fn valid(&self) -> bool {
        sys::notif_id_valid(self.sup.listener.as_fd(), self.n.id)
    }

    /// The NUL-terminated string at `addr` in the caller.
    pub(super) fn string(&self, addr: u64) -> Result<Vec<u8>, i32> {
        if addr == 0 {
            return Err(libc::EFAULT);
        }
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < PATH_MAX {
            // Up to the end of the page: the next one may not be mapped.
            // At most 4096: always converts.
            let room = usize::try_from(4096 - at % 4096).unwrap_or(4096);
            let mut buf = vec![0u8; room.min(PATH_MAX - out.len()).max(1)];
            let n = sys::read_mem(self.tid(), at, &mut buf).map_err(|_| libc::EFAULT)?;
            if n == 0 {
                return Err(libc::EFAULT);
            }
            if let Some(z) = buf[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..z]);
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
            at += n as u64;
        }
        Err(libc::ENAMETOOLONG)
    }

    /// The caller's directory fd `dirfd` (its cwd for AT_FDCWD).
    fn dir(&self, dirfd: i32) -> Result<OwnedFd, i32> {
        if dirfd == libc::AT_FDCWD {
            let p = c(format!("/proc/{}/cwd", self.tid()).as_bytes())?;
            return sys::openat(sys::at_fdcwd(), &p, libc::O_PATH | libc::O_DIRECTORY, 0)
                .map_err(errno);
        }
        self.fd(dirfd)
    }

    /// The caller's open file `fd`.
    pub(super) fn fd(&self, fd: i32) -> Result<OwnedFd, i32> {
        let pidfd = sys::pidfd_open(self.tid()).map_err(|_| libc::ESRCH)?;
        sys::pidfd_getfd(pidfd.as_fd(), fd).map_err(|e| match errno(e) {
            libc::EBADF => libc::EBADF,
            _ => libc::EACCES,
        })
    }

    /// `path` with the caller's `/proc/self`, `/proc/thread-self`, `/dev/fd` and
    /// `/dev/std*` in place of the init's.
    fn own_proc(&self, path: &[u8]) -> Vec<u8> {
        if !path.starts_with(b"/proc/") && !path.starts_with(b"/dev/") && path != b"/proc" {
            return path.to_vec();
        }
        let Some(pid) = tgid(self.tid()) else {
            return path.to_vec();
        };
        let tid = self.tid();
        let table: [(&[u8], String); 6] = [
            (b"/proc/self", format!("/proc/{pid}")),
            (b"/proc/thread-self", format!("/proc/{pid}/task/{tid}")),
            (b"/dev/fd", format!("/proc/{pid}/fd")),
            (b"/dev/stdin", format!("/proc/{pid}/fd/0")),
            (b"/dev/stdout", format!("/proc/{pid}/fd/1")),
            (b"/dev/stderr", format!("/proc/{pid}/fd/2")),
        ];
        for (from, to) in table {
            if path.starts_with(from) && (path.len() == from.len() || path[from.len()] == b'/') {
                let mut v = to.into_bytes();
                v.extend_from_slice(&path[from.len()..]);
                return v;
            }
        }
        path.to_vec()
    }

    /// Resolves `path` from the caller's `dirfd`; `follow` follows a link in the last place.
    pub(super) fn resolve(&self, dirfd: i32, path: &[u8], follow: bool) -> Result<Target, i32> {
        if path.is_empty() {
            return Err(libc::ENOENT);
        }
        let path = self.own_proc(path);
        match self.resolve_plain(dirfd, &path, follow) {
            Some(r) => r.map(Target::At),
            None => self.resolve_links(dirfd, path, follow),
        }
    }

    /// The common case in a few calls: an absolute path, or one relative to the caller's
    /// cwd, with no `..` and no link on the way (`RESOLVE_NO_SYMLINKS`), outside /proc.
    /// Its absolute path is then the caller's words (joined to the cwd's path, which the
    /// kernel gives without links), with no lookup of the directory's path afterwards.
    /// `None` when it is not that case: [`Self::resolve_links`] decides.
    fn resolve_plain(&self, dirfd: i32, path: &[u8], follow: bool) -> Option<Result<At, i32>> {
        let mut full: Vec<u8> = if path[0] == b'/' {
            Vec::with_capacity(path.len())
        } else if dirfd == libc::AT_FDCWD {
            let cwd = c(format!("/proc/{}/cwd", self.tid()).as_bytes()).ok()?;
            let mut p = sys::readlinkat(sys::at_fdcwd(), &cwd).ok()?;
            // A cwd removed or out of the view's reach has no path to join to.
            if p.first() != Some(&b'/') || p.ends_with(b" (deleted)") {
                return None;
            }
            if p == b"/" {
                p.clear();
            }
            p
        } else {
            return None;
        };
        let trailing = path.ends_with(b"/");
        let mut last = 0;
        for comp in path.split(|&b| b == b'/') {
            match comp {
                b"" | b"." => {}
                b".." => return None,
                _ => {
                    last = full.len() + 1;
                    full.push(b'/');
                    full.extend_from_slice(comp);
                }
            }
        }
        if last == 0 || in_proc(&full) {
            return None;
        }
        // A last component that names a directory the path goes on in (`a/.`) was left
        // out above; then the target is the directory itself, for the other path.
        if path.ends_with(b"/.") {
            return None;
        }
        let dirpart = &full[..last - 1];
        let name = &full[last..];
        let rel: &[u8] = if dirpart.is_empty() {
            b"."
        } else {
            &dirpart[1..]
        };
        let dir = match sys::openat2(
            self.sup.root.as_fd(),
            &c(rel).ok()?,
            libc::O_PATH | libc::O_DIRECTORY,
            0,
            libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
        ) {
            Ok(d) => d,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return None,
            Err(e) => return Some(Err(errno(e))),
        };
        let cname = c(name).ok()?;
        let mut seen = None;
        if follow || trailing {
            match sys::fstatat(dir.as_fd(), &cname, libc::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => return None,
                Ok(st) => seen = Some(Some(st)),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => seen = Some(None),
                Err(_) => {}
            }
        }
        Some(Ok(At {
            dir,
            name: cname,
            path: full,
            seen,
        }))
    }

    /// Resolves `path` step by step, following links as the call would (the last one by
    /// hand, so that the rules see where it leads).
    fn resolve_links(&self, dirfd: i32, path: Vec<u8>, follow: bool) -> Result<Target, i32> {
        let mut path = path;
        let mut start = if path[0] == b'/' {
            self.root()?
        } else {
            self.dir(dirfd)?
        };
        for _ in 0..=MAX_LINKS {
            let trailing = path.len() > 1 && path.ends_with(b"/");
            let trimmed: &[u8] = {
                let mut t: &[u8] = &path;
                while t.len() > 1 && t.ends_with(b"/") {
                    t = &t[..t.len() - 1];
                }
                t
            };
            let (dirpart, name): (&[u8], &[u8]) = match trimmed.iter().rposition(|&b| b == b'/') {
                Some(0) => (b"/", &trimmed[1..]),
                Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
                None => (b".", trimmed),
            };
            let name: &[u8] = if name.is_empty() { b"." } else { name };
            let dir = open_dir(start.as_fd(), dirpart)?;
            if name == b"." || name == b".." {
                let d = open_dir(dir.as_fd(), name)?;
                let p = sys::fd_path(d.as_fd()).map_err(errno)?;
                if in_proc(&p) {
                    return Err(libc::EACCES);
                }
                return Ok(Target::At(At {
                    dir: d,
                    name: dot(),
                    path: p,
                    seen: None,
                }));
            }
            let cname = c(name)?;
            if follow || trailing {
                if let Ok(st) = sys::fstatat(dir.as_fd(), &cname, libc::AT_SYMLINK_NOFOLLOW) {
                    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                        if sys::fd_path(dir.as_fd()).is_ok_and(|p| in_proc(&p)) {
                            return self.proc_fd(&dir, name).map(Target::ProcFd);
                        }
                        let target = sys::readlinkat(dir.as_fd(), &cname).map_err(errno)?;
                        if target.is_empty() {
                            return Err(libc::ENOENT);
                        }
                        let mut next = target;
                        if trailing {
                            next.push(b'/');
                        }
                        start = if next[0] == b'/' { self.root()? } else { dir };
                        path = self.own_proc(&next);
                        continue;
                    }
                }
            }
            let mut p = sys::fd_path(dir.as_fd()).map_err(errno)?;
            // Nothing else in /proc: the init would open it as itself (`/proc/1/mem`). (The
            // call's only procfs is its /proc: it can mount none elsewhere.)
            if in_proc(&p) {
                return Err(libc::EACCES);
            }
            if p != b"/" {
                p.push(b'/');
            }
            p.extend_from_slice(name);
            return Ok(Target::At(At {
                dir,
                name: cname,
                path: p,
                seen: None,
            }));
        }
        Err(libc::ELOOP)
    }

    /// The open file behind `/proc/PID/fd/N` (`dir` is `/proc/PID/fd`), when PID is a
    /// process of the call other than the init.
    fn proc_fd(&self, dir: &OwnedFd, name: &[u8]) -> Result<OwnedFd, i32> {
        let p = sys::fd_path(dir.as_fd()).map_err(errno)?;
        let s = std::str::from_utf8(&p).map_err(|_| libc::EACCES)?;
        let fd: i32 = std::str::from_utf8(name)
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or(libc::EACCES)?;
        let parts: Vec<&str> = s.trim_start_matches('/').split('/').collect();
        let pid: libc::pid_t = match parts.as_slice() {
            ["proc", pid, "fd"] | ["proc", _, "task", pid, "fd"] => {
                pid.parse().map_err(|_| libc::EACCES)?
            }
            _ => return Err(libc::EACCES),
        };
        // Never the init's own fds (its report pipe, its listener): not through pid 1, nor
        // through a thread of it (a tid under /proc is reachable though not listed).
        let me = crate::sys::getpid();
        match tgid(pid) {
            Some(t) if t > 1 && t != me && pid > 1 && pid != me => {}
            _ => return Err(libc::EACCES),
        }
        let pidfd = sys::pidfd_open(pid).map_err(|_| libc::ENOENT)?;
        sys::pidfd_getfd(pidfd.as_fd(), fd).map_err(|_| libc::ENOENT)
    }

    /// The rules of [`super::rules`] and of [`super::gitdir`] for `act` on `path`, whose
    /// parent directory is `dir` (looked up by the path when `None`).
    fn check(
        &mut self,
        what: &'static str,
        dir: Option<BorrowedFd<'_>>,
        path: &[u8],
        act: Act,
    ) -> Result<(), i32> {
        self.check_rules(what, path, act)?;
        // A chmod changes no byte git reads: a config or todo list may take one.
        let by = if what == "chmod" {
            super::git_io::By::Chmod
        } else {
            super::git_io::By::Other
        };
        self.git_rule(what, dir, path, act, by).map(|_| ())
    }

    fn check_rules(&mut self, what: &'static str, path: &[u8], act: Act) -> Result<(), i32> {
        // The lock file of a granted file that this call made (see `super::locks`): written,
        // chmodded, renamed onto its file or removed.
        if matches!(act, Act::Write | Act::Remove)
            && self.sup.rules.granted_lock(path)
            && self.sup.locks.holds(path)
        {
            self.acted = Some((what, path.to_vec()));
            return Ok(());
        }
        let made = self.sup.made.lock().unwrap_or_else(|e| e.into_inner());
        match self.sup.rules.check(path, act, &*made) {
            Ok(()) => {
                self.acted = Some((what, path.to_vec()));
                Ok(())
            }
            Err(r) => {
                drop(made);
                self.sup.refuse(what, path, &r);
                Err(libc::EROFS)
            }
        }
    }

    /// Refuses `st`, named `path`, when it is a protected file that had several links at
    /// launch (its other names would write it).
    fn check_inode(&mut self, what: &'static str, path: &[u8], st: &libc::stat) -> Result<(), i32> {
        if self.sup.linked.contains(&(st.st_dev, st.st_ino)) {
            self.sup.refuse(
                what,
                path,
                &Refusal::Protected("a hard link to a protected file".into()),
            );
            return Err(libc::EROFS);
        }
        Ok(())
    }

    /// The inode check of an open file alone (see [`Self::check_file`]).
    fn check_linked(&mut self, what: &'static str, f: BorrowedFd<'_>) -> Result<(), i32> {
        let st = sys::fstat(f).map_err(errno)?;
        let p = sys::fd_path(f).unwrap_or_default();
        self.check_inode(what, &p, &st)
    }

    /// The check of an open file: by its path now, and by inode for a protected file with
    /// several links.
    fn check_file(&mut self, what: &'static str, f: BorrowedFd<'_>) -> Result<(), i32> {
        let st = sys::fstat(f).map_err(errno)?;
        let kind = st.st_mode & libc::S_IFMT;
        let p = sys::fd_path(f).unwrap_or_default();
        self.check_inode(what, &p, &st)?;
        if (kind == libc::S_IFREG || kind == libc::S_IFDIR)
            && p.first() == Some(&b'/')
            && !p.ends_with(b" (deleted)")
        {
            return self.check(what, None, &p, Act::Write);
        }
        Ok(())
    }

    fn open(&mut self, dirfd: i32, addr: u64, flags: i32, mode: u32) -> Reply {
        let path = match self.string(addr) {
            Ok(p) => p,
            Err(e) => return Reply::Err(e),
        };
        if !self.valid() {
            return Reply::None;
        }
        let cloexec = flags & libc::O_CLOEXEC != 0;
        if flags & libc::O_TMPFILE == libc::O_TMPFILE {
            return self.open_tmpfile(dirfd, &path, flags, mode, cloexec);
        }
        let creat = flags & libc::O_CREAT != 0;
        let follow = flags & libc::O_NOFOLLOW == 0 && !(creat && flags & libc::O_EXCL != 0);
        match self.resolve(dirfd, &path, follow) {
            Err(e) => Reply::Err(e),
            Ok(Target::ProcFd(f)) => self.open_proc_fd(&f, flags, cloexec),
            Ok(Target::At(at)) => self.open_at(at, flags, mode, cloexec),
        }
    }

    /// An unnamed file in a directory (`O_TMPFILE`): it gets a name only through linkat,
    /// which is checked.
    fn open_tmpfile(
        &mut self,
        dirfd: i32,
        path: &[u8],
        flags: i32,
        mode: u32,
        cloexec: bool,
    ) -> Reply {
        let r = self.dir_or_root(dirfd, path).and_then(|d| {
            let cp = c(path)?;
            sys::openat(d.as_fd(), &cp, flags, self.masked(mode)).map_err(errno)
        });
        match r {
            Ok(f) => Reply::Fd(f, cloexec),
            Err(e) => Reply::Err(e),
        }
    }

    /// The open of `/proc/PID/fd/N` of a process of the call: its open file, checked, then
    /// reopened (truncated when asked).
    fn open_proc_fd(&mut self, f: &OwnedFd, flags: i32, cloexec: bool) -> Reply {
        if let Err(e) = self.check_file("open", f.as_fd()) {
            return Reply::Err(e);
        }
        let reopen_flags =
            flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_NOFOLLOW);
        match sys::reopen(f.as_fd(), reopen_flags | libc::O_NOCTTY) {
            Ok(g) => {
                if flags & libc::O_TRUNC != 0 && is_reg(g.as_fd()) {
                    if let Err(e) = sys::ftruncate(g.as_fd(), 0) {
                        return Reply::Err(errno(e));
                    }
                }
                Reply::Fd(g, cloexec)
            }
            Err(e) => Reply::Err(errno(e)),
        }
    }

    /// The open of a name in a checked directory: a granted lock file, the rules and the
    /// git guard, a device or fifo on a thread of its own, else the open itself (with the
    /// inode check of a protected file with several links).
    fn open_at(&mut self, at: At, flags: i32, mode: u32, cloexec: bool) -> Reply {
        let creat = flags & libc::O_CREAT != 0;
        let st = match at.seen {
            Some(seen) => seen,
            None => sys::fstatat(at.dir.as_fd(), &at.name, libc::AT_SYMLINK_NOFOLLOW).ok(),
        };
        let act = if st.is_none() && creat {
            Act::Create
        } else {
            Act::Write
        };
        if self.sup.rules.granted_lock(&at.path) {
            if act == Act::Create {
                return self.open_lock(&at, flags, mode, cloexec);
            }
            // Another's lock is there (the host's git holds it): the lock taker's open fails
            // as the kernel's would, and it says `File exists` as on the host (not a refusal
            // whose grant the call has already).
            if creat && flags & libc::O_EXCL != 0 {
                return Reply::Err(libc::EEXIST);
            }
        }
        let git = self.check_rules("open", &at.path, act).and_then(|()| {
            self.git_rule(
                "open",
                Some(at.dir.as_fd()),
                &at.path,
                act,
                super::git_io::By::Open,
            )
        });
        match git {
            Err(e) => return Reply::Err(e),
            Ok(Some(_)) => {
                let mode = self.masked(mode);
                return self.open_empty_config(&at, st, mode, cloexec);
            }
            Ok(None) => {}
        }
        let kind = st.map(|s| s.st_mode & libc::S_IFMT);
        if matches!(
            kind,
            Some(libc::S_IFIFO) | Some(libc::S_IFCHR) | Some(libc::S_IFBLK)
        ) && !quick_device(&at.path)
        {
            // May block until a peer opens it: opened on a thread of its own.
            return self.open_on_thread(at, flags, mode, cloexec);
        }
        // The kernel truncates with the open unless the file must be checked by inode first
        // (a protected file with several links at launch). A separate ftruncate would also
        // cost a flush on close on ext4 (`auto_da_alloc`).
        let check_inode = st.is_some() && !self.sup.linked.is_empty();
        let keep = if check_inode { !libc::O_TRUNC } else { !0 };
        let open_flags = (flags & keep) | libc::O_NOFOLLOW | libc::O_NOCTTY;
        let mode = if creat { self.masked(mode) } else { mode };
        let f = match sys::openat(at.dir.as_fd(), &at.name, open_flags, mode) {
            Ok(f) => f,
            Err(e) => return Reply::Err(errno(e)),
        };
        // The file opened is `name` in the directory checked (O_NOFOLLOW: a link swapped in
        // fails). A protected file with several links at launch is also refused by inode,
        // whatever name it is opened by.
        if check_inode {
            if let Err(e) = self.check_linked("open", f.as_fd()) {
                return Reply::Err(e);
            }
            if flags & libc::O_TRUNC != 0 && is_reg(f.as_fd()) {
                if let Err(e) = sys::ftruncate(f.as_fd(), 0) {
                    return Reply::Err(errno(e));
                }
            }
        }
        Reply::Fd(f, cloexec)
    }

    /// Makes the lock file of a granted file (the open of `FILE.lock` with `O_CREAT`, none
    /// there): a plain file, recorded so that the call may write it, rename it onto `FILE`
    /// or remove it, and so that the init removes it if it is left at the call's end.
    fn open_lock(&mut self, at: &At, flags: i32, mode: u32, cloexec: bool) -> Reply {
        self.acted = Some(("open", at.path.clone()));
        // `O_EXCL`: the lock recorded is one this open made, never a file that took the
        // name since it was looked at (the host's git's own lock).
        let open_flags = flags | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_NOCTTY;
        let mode = self.masked(mode) & 0o777;
        let r = self.sup.locks.make(&at.dir, &at.name, || {
            sys::openat(at.dir.as_fd(), &at.name, open_flags, mode).map_err(errno)
        });
        match r {
            Ok(f) => Reply::Fd(f, cloexec),
            Err(e) => Reply::Err(e),
        }
    }

    fn dir_or_root(&self, dirfd: i32, path: &[u8]) -> Result<OwnedFd, i32> {
        if path.first() == Some(&b'/') {
            self.root()
        } else {
            self.dir(dirfd)
        }
    }

    fn open_on_thread(&mut self, at: At, flags: i32, mode: u32, cloexec: bool) -> Reply {
        let Ok(listener) = self.sup.listener.try_clone() else {
            return Reply::Err(libc::EMFILE);
        };
        use std::sync::atomic::Ordering;
        if WAITING_OPENS.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING_OPENS {
            WAITING_OPENS.fetch_sub(1, Ordering::SeqCst);
            return Reply::Err(libc::EAGAIN);
        }
        let id = self.n.id;
        let spawned = std::thread::Builder::new()
            .name("efr-open".into())
            .spawn(move || {
                let r = sys::openat(
                    at.dir.as_fd(),
                    &at.name,
                    flags | libc::O_NOFOLLOW | libc::O_NOCTTY,
                    mode,
                );
                let _ = match r {
                    Ok(f) => {
                        sys::notif_addfd_send(listener.as_fd(), id, f.as_fd(), cloexec).map(|_| ())
                    }
                    Err(e) => sys::notif_send(listener.as_fd(), id, 0, errno(e)),
                };
            });
        match spawned {
            Ok(_) => Reply::None,
            Err(_) => Reply::Err(libc::EAGAIN),
        }
    }

    fn truncate(&mut self, addr: u64, len: i64) -> Reply {
        let path = match self.string(addr) {
            Ok(p) => p,
            Err(e) => return Reply::Err(e),
        };
        if !self.valid() {
            return Reply::None;
        }
        let f = match self.resolve(libc::AT_FDCWD, &path, true) {
            Err(e) => return Reply::Err(e),
            Ok(Target::ProcFd(f)) => sys::reopen(f.as_fd(), libc::O_WRONLY | libc::O_NONBLOCK),
            Ok(Target::At(at)) => {
                if let Err(e) = self.check("truncate", Some(at.dir.as_fd()), &at.path, Act::Write) {
                    return Reply::Err(e);
                }
                sys::openat(
                    at.dir.as_fd(),
                    &at.name,
                    libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
                    0,
                )
            }
        };
        let f = match f {
            Ok(f) => f,
            Err(e) => return Reply::Err(errno(e)),
        };
        if let Err(e) = self.check_file("truncate", f.as_fd()) {
            return Reply::Err(e);
        }
        if !is_reg(f.as_fd()) {
            return Reply::Err(libc::EINVAL);
        }
        result(sys::ftruncate(f.as_fd(), len))
    }

    /// A path argument resolved without following its last link (the object itself).
    fn at_nofollow(&self, dirfd: i32, addr: u64) -> Result<At, i32> {
        let path = self.string(addr)?;
        match self.resolve(dirfd, &path, false)? {
            Target::At(at) => Ok(at),
            Target::ProcFd(_) => Err(libc::EPERM),
        }
    }

    fn rename(&mut self, od: i32, oa: u64, nd: i32, na: u64, flags: u32) -> Reply {
        let (o, n) = match (self.at_nofollow(od, oa), self.at_nofollow(nd, na)) {
            (Ok(o), Ok(n)) => (o, n),
            (Err(e), _) | (_, Err(e)) => return Reply::Err(e),
        };
        if !self.valid() {
            return Reply::None;
        }
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let n_exists = sys::fstatat(n.dir.as_fd(), &n.name, libc::AT_SYMLINK_NOFOLLOW).is_ok();
        // (path, its directory, act, wanted, whether it is where the renamed file lands)
        let checks = [
            (&o, Act::Remove, true, false),
            (&n, Act::Create, true, true),
            (&n, Act::Remove, n_exists, false),
            (&o, Act::Create, exchange, false),
        ];
        let mut checked = None;
        for (at, act, wanted, target) in checks {
            if !wanted {
                continue;
            }
            let r = self.check_rules("rename", &at.path, act).and_then(|()| {
                let by = if target {
                    super::git_io::By::Rename
                } else {
                    super::git_io::By::Other
                };
                self.git_rule("rename", Some(at.dir.as_fd()), &at.path, act, by)
            });
            match r {
                Ok(c) => checked = checked.or(c),
                Err(e) => return Reply::Err(e),
            }
        }
        if let Some(what) = checked {
            return self.checked_rename(&o, &n, flags, what);
        }
        result(sys::renameat2(
            o.dir.as_fd(),
            &o.name,
            n.dir.as_fd(),
            &n.name,
            flags,
        ))
    }

    fn link(&mut self, od: i32, oa: u64, nd: i32, na: u64, flags: i32) -> Reply {
        let n = match self.at_nofollow(nd, na) {
            Ok(n) => n,
            Err(e) => return Reply::Err(e),
        };
        // A link never replaces: over an existing name it fails as the kernel would, with
        // no rule asked (libgit2 tries a link before its rename of a lock file).
        if sys::fstatat(n.dir.as_fd(), &n.name, libc::AT_SYMLINK_NOFOLLOW).is_ok() {
            return Reply::Err(libc::EEXIST);
        }
        if flags & libc::AT_EMPTY_PATH != 0 {
            let path = match self.string(oa) {
                Ok(p) => p,
                Err(e) => return Reply::Err(e),
            };
            if path.is_empty() {
                let f = match self.fd(od) {
                    Ok(f) => f,
                    Err(e) => return Reply::Err(e),
                };
                if !self.valid() {
                    return Reply::None;
                }
                if let Err(e) = self
                    .check_file("link", f.as_fd())
                    .and_then(|()| self.check("link", Some(n.dir.as_fd()), &n.path, Act::Create))
                {
                    return Reply::Err(e);
                }
                let empty = CString::default();
                return result(sys::linkat(
                    f.as_fd(),
                    &empty,
                    n.dir.as_fd(),
                    &n.name,
                    libc::AT_EMPTY_PATH,
                ));
            }
        }
        let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
        let path = match self.string(oa) {
            Ok(p) => p,
            Err(e) => return Reply::Err(e),
        };
        if !self.valid() {
            return Reply::None;
        }
        let o = match self.resolve(od, &path, follow) {
            Ok(Target::At(o)) => o,
            Ok(Target::ProcFd(_)) => return Reply::Err(libc::EPERM),
            Err(e) => return Reply::Err(e),
        };
        if let Err(e) = self
            .check("link", Some(o.dir.as_fd()), &o.path, Act::Write)
            .and_then(|()| self.check("link", Some(n.dir.as_fd()), &n.path, Act::Create))
        {
            return Reply::Err(e);
        }
        // The source's inode too: a second name of a protected file with several links.
        if let Ok(st) = sys::fstatat(o.dir.as_fd(), &o.name, libc::AT_SYMLINK_NOFOLLOW) {
            if let Err(e) = self.check_inode("link", &o.path, &st) {
                return Reply::Err(e);
            }
        }
        result(sys::linkat(
            o.dir.as_fd(),
            &o.name,
            n.dir.as_fd(),
            &n.name,
            0,
        ))
    }

    /// The path argument at `addr` (from `dirfd`, its last link not followed), checked for
    /// `act`: what the simple calls (remove, mkdir, mknod, symlink) act on.
    fn checked_at(
        &mut self,
        what: &'static str,
        dirfd: i32,
        addr: u64,
        act: Act,
    ) -> Result<At, Reply> {
        let at = self.at_nofollow(dirfd, addr).map_err(Reply::Err)?;
        if !self.valid() {
            return Err(Reply::None);
        }
        self.check(what, Some(at.dir.as_fd()), &at.path, act)
            .map_err(Reply::Err)?;
        Ok(at)
    }

    fn unlink(&mut self, dirfd: i32, addr: u64, flags: i32) -> Reply {
        match self.checked_at("remove", dirfd, addr, Act::Remove) {
            Ok(at) => result(sys::unlinkat(
                at.dir.as_fd(),
                &at.name,
                flags & libc::AT_REMOVEDIR,
            )),
            Err(r) => r,
        }
    }

    fn mkdir(&mut self, dirfd: i32, addr: u64, mode: u32) -> Reply {
        let at = match self.checked_at("mkdir", dirfd, addr, Act::Mkdir) {
            Ok(at) => at,
            Err(r) => return r,
        };
        let r = sys::mkdirat(at.dir.as_fd(), &at.name, self.masked(mode));
        if r.is_ok() && under_git(&at.path) {
            if let Ok(st) = sys::fstatat(at.dir.as_fd(), &at.name, libc::AT_SYMLINK_NOFOLLOW) {
                let mut made = self.sup.made.lock().unwrap_or_else(|e| e.into_inner());
                if made.len() < MAX_MADE {
                    made.insert((st.st_dev, st.st_ino));
                }
            }
        }
        result(r)
    }

    fn mknod(&mut self, dirfd: i32, addr: u64, mode: u32, dev: u64) -> Reply {
        match self.checked_at("mknod", dirfd, addr, Act::Create) {
            Ok(at) => result(sys::mknodat(
                at.dir.as_fd(),
                &at.name,
                self.masked(mode),
                dev,
            )),
            Err(r) => r,
        }
    }

    fn symlink(&mut self, taddr: u64, dirfd: i32, addr: u64) -> Reply {
        let target = match self.string(taddr).and_then(|t| c(&t)) {
            Ok(t) => t,
            Err(e) => return Reply::Err(e),
        };
        match self.checked_at("symlink", dirfd, addr, Act::Create) {
            Ok(at) => result(sys::symlinkat(&target, at.dir.as_fd(), &at.name)),
            Err(r) => r,
        }
    }

    fn chmod(&mut self, dirfd: i32, addr: u64, mode: u32, flags: i32) -> Reply {
        let path = match self.string(addr) {
            Ok(p) => p,
            Err(e) => return Reply::Err(e),
        };
        if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
            return self.fchmod(dirfd, mode);
        }
        if !self.valid() {
            return Reply::None;
        }
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        match self.resolve(dirfd, &path, follow) {
            Err(e) => Reply::Err(e),
            Ok(Target::ProcFd(f)) => {
                if let Err(e) = self.check_file("chmod", f.as_fd()) {
                    return Reply::Err(e);
                }
                result(sys::fchmod(f.as_fd(), mode))
            }
            Ok(Target::At(at)) => {
                if let Err(e) = self.check("chmod", Some(at.dir.as_fd()), &at.path, Act::Write) {
                    return Reply::Err(e);
                }
                let f = if at.name.as_bytes() == b"." {
                    libc::AT_EMPTY_PATH
                } else {
                    0
                };
                if f != 0 {
                    let empty = CString::default();
                    return result(sys::fchmodat(at.dir.as_fd(), &empty, mode, f));
                }
                let nofollow = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
                result(sys::fchmodat(at.dir.as_fd(), &at.name, mode, nofollow))
            }
        }
    }

    fn fchmod(&mut self, fd: i32, mode: u32) -> Reply {
        let f = match self.fd(fd) {
            Ok(f) => f,
            Err(e) => return Reply::Err(e),
        };
        if !self.valid() {
            return Reply::None;
        }
        if let Err(e) = self.check_file("chmod", f.as_fd()) {
            return Reply::Err(e);
        }
        // An O_PATH fd cannot fchmod; through /proc/self/fd it can (as fchmodat2 does).
        match sys::fchmod(f.as_fd(), mode) {
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                let p = CString::new(format!(
                    "/proc/self/fd/{}",
                    std::os::fd::AsRawFd::as_raw_fd(&f)
                ))
                .expect("no NUL");
                result(sys::fchmodat(root_fd_borrow(), &p, mode, 0))
            }
            r => result(r),
        }
    }
}

fn root_fd_borrow() -> BorrowedFd<'static> {
    // AT_FDCWD is ignored for an absolute path.
    sys::at_fdcwd()
}

pub(super) fn result(r: std::io::Result<()>) -> Reply {
    match r {
        Ok(()) => Reply::Val(0),
        Err(e) => Reply::Err(errno(e)),
    }
}

fn is_reg(f: BorrowedFd<'_>) -> bool {
    sys::fstat(f).is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFREG)
}

/// The directory `path` from `start` (O_PATH; links followed, magic links refused).
fn open_dir(start: BorrowedFd<'_>, path: &[u8]) -> Result<OwnedFd, i32> {
    sys::openat2(
        start,
        &c(path)?,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
        libc::RESOLVE_NO_MAGICLINKS,
    )
    .map_err(errno)
}

/// Whether `p` is `/proc` or below it.
fn in_proc(p: &[u8]) -> bool {
    p == b"/proc" || p.starts_with(b"/proc/")
}

/// Devices that open at once, whoever opens them (or fail at once).
fn quick_device(p: &[u8]) -> bool {
    matches!(
        p,
        b"/dev/null" | b"/dev/zero" | b"/dev/full" | b"/dev/random" | b"/dev/urandom" | b"/dev/tty"
    )
}

/// Whether `p` has a `.git` component (the directories remembered as made by the call).
fn under_git(p: &[u8]) -> bool {
    p.split(|&b| b == b'/').any(|c| c == b".git")
}

pub(super) fn root_fd() -> Result<OwnedFd, i32> {
    sys::openat(sys::at_fdcwd(), c"/", libc::O_PATH | libc::O_DIRECTORY, 0).map_err(errno)
}

/// The protected files that have more than one link at launch (a second name of one, made
/// before it was protected, would be written through): their (dev, ino), refused by inode
/// under any name, and their protected paths with the link count, reported.
#[derive(Debug, Default)]
pub struct Linked {
    pub inodes: HashSet<(u64, u64)>,
    pub paths: Vec<(Vec<u8>, u64)>,
}

/// The [`Linked`] files of `rules`: the protected paths that exist, and the files below the
/// protected directories (at most 4096 looked at). Most protected paths do not exist (a
/// hundred names at each root and repository): one listing of each of their directories
/// says which do ([`crate::view::listing`]), instead of a failed lookup for each.
pub fn linked_protected(protected: &[Vec<u8>]) -> Linked {
    use std::os::unix::fs::MetadataExt;
    let mut stack: Vec<std::path::PathBuf> = crate::view::listing::existing(protected)
        .into_iter()
        .filter(|(_, t)| !t.is_symlink())
        .map(|(p, _)| p)
        .collect();
    let mut out = Linked::default();
    let mut budget = 4096usize;
    while let Some(p) = stack.pop() {
        if budget == 0 {
            break;
        }
        budget -= 1;
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_file() && m.nlink() > 1 {
            if out.inodes.insert((m.dev(), m.ino())) {
                out.paths
                    .push((p.as_os_str().as_bytes().to_vec(), m.nlink()));
            }
        } else if m.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    out
}

/// Serves notification `n`.
pub fn serve(sup: &Supervisor, n: &libc::seccomp_notif) {
    let nr = i64::from(n.data.nr);
    let mut call = Call {
        sup,
        n,
        acted: None,
        git_lock: None,
        git_post: Vec::new(),
    };
    let a = |i: usize| call.arg(i);
    let (a0, a1, a2, a3, a4) = (a(0), a(1), a(2), a(3), a(4));
    #[allow(
        clippy::cast_possible_truncation,
        reason = "an int argument is the low 32 bits of its register, as the kernel reads it"
    )]
    let i = |v: u64| v as i32;
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        reason = "each argument as the kernel reads it: an unsigned int or mode the low 32 bits \
                  of its register, truncate's length a signed loff_t, sendto's a size_t"
    )]
    let reply = match nr {
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open => call.open(libc::AT_FDCWD, a0, i(a1), a2 as u32),
        libc::SYS_openat => call.open(i(a0), a1, i(a2), a3 as u32),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat => call.open(
            libc::AT_FDCWD,
            a0,
            libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            a1 as u32,
        ),
        libc::SYS_truncate => call.truncate(a0, a1 as i64),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_rename => call.rename(libc::AT_FDCWD, a0, libc::AT_FDCWD, a1, 0),
        libc::SYS_renameat => call.rename(i(a0), a1, i(a2), a3, 0),
        libc::SYS_renameat2 => call.rename(i(a0), a1, i(a2), a3, a4 as u32),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_link => call.link(libc::AT_FDCWD, a0, libc::AT_FDCWD, a1, 0),
        libc::SYS_linkat => call.link(i(a0), a1, i(a2), a3, i(a4)),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_unlink => call.unlink(libc::AT_FDCWD, a0, 0),
        libc::SYS_unlinkat => call.unlink(i(a0), a1, i(a2)),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_rmdir => call.unlink(libc::AT_FDCWD, a0, libc::AT_REMOVEDIR),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_mkdir => call.mkdir(libc::AT_FDCWD, a0, a1 as u32),
        libc::SYS_mkdirat => call.mkdir(i(a0), a1, a2 as u32),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_mknod => call.mknod(libc::AT_FDCWD, a0, a1 as u32, a2),
        libc::SYS_mknodat => call.mknod(i(a0), a1, a2 as u32, a3),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_symlink => call.symlink(a0, libc::AT_FDCWD, a1),
        libc::SYS_symlinkat => call.symlink(a0, i(a1), a2),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_chmod => call.chmod(libc::AT_FDCWD, a0, a1 as u32, 0),
        libc::SYS_fchmodat => call.chmod(i(a0), a1, a2 as u32, 0),
        libc::SYS_fchmodat2 => call.chmod(i(a0), a1, a2 as u32, i(a3)),
        libc::SYS_fchmod => call.fchmod(i(a0), a1 as u32),
        libc::SYS_connect => call.connect(i(a0), a1, a2 as u32),
        libc::SYS_sendto => call.sendto(i(a0), a1, a2 as usize, i(a3), a4, call.arg(5) as u32),
        libc::SYS_sendmsg => call.sendmsg(i(a0), a1, i(a2)),
        libc::SYS_sendmmsg => call.sendmmsg(i(a0), a1, a2 as u32, i(a3)),
        libc::SYS_umask => {
            let l = sup.listener.as_fd();
            sup.umasks.change(call.tid(), a0 as u32, || {
                let _ = sys::notif_continue(l, n.id);
            });
            Reply::None
        }
        _ => Reply::Err(libc::ENOSYS),
    };
    let reply = call.after_git(reply);
    if let (Reply::Err(e), Some((what, path))) = (&reply, &call.acted) {
        after_failed(sup, what, path, *e);
    }
    let l = call.sup.listener.as_fd();
    let _ = match reply {
        Reply::Val(v) => sys::notif_send(l, n.id, v, 0),
        Reply::Err(e) => sys::notif_send(l, n.id, 0, e),
        Reply::Fd(f, cloexec) => match sys::notif_addfd_send(l, n.id, f.as_fd(), cloexec) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => sys::notif_send(l, n.id, 0, errno(e)),
        },
        Reply::None => Ok(()),
    };
}

/// A supervised call that failed where the rules let it: the sandbox's refusal (a read-only
/// mount of the view, Landlock outside the writable roots), reported as a denial that a
/// `write` grant can lift; or the host's (its read-only mount, a full disk, inside the
/// writable roots a file's own mode), which no grant changes: a note.
fn after_failed(sup: &Supervisor, what: &str, path: &[u8], e: i32) {
    match e {
        libc::EROFS if sup.host_mounts.read_only(path) => {
            sup.host_refused(what, path, "read-only file system (the host's mount)");
        }
        libc::EROFS => sup.refuse(what, path, &Refusal::NotWritable),
        libc::EACCES if !sup.rules.in_roots(path) => sup.refuse(what, path, &Refusal::NotWritable),
        libc::EACCES | libc::EPERM => {
            sup.host_refused(what, path, "permission denied (the file's own mode)")
        }
        // The call's own `/tmp` and `/dev/shm` are the sandbox's, of `sandbox.tmp_size`:
        // their being full is reported as `full_tmpfs`.
        libc::ENOSPC | libc::EDQUOT if !on_call_tmpfs(path) => {
            sup.host_refused(what, path, "no space left on device");
        }
        _ => {}
    }
}

/// Whether `path` is on the call's own `/tmp` or `/dev/shm`.
fn on_call_tmpfs(path: &[u8]) -> bool {
    [&b"/tmp"[..], b"/dev/shm"]
        .iter()
        .any(|d| path.starts_with(d) && matches!(path.get(d.len()), None | Some(b'/')))
}
