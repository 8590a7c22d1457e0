//! The supervisor of a contained call's writes inside its writable roots.
//!
//! A read-only bind on a protected path (`.git/config`, `.envrc`, ...) holds only as long
//! as the host keeps the dentry it is mounted on: a rename over it, an unlink, another
//! call's end detach it in every mount namespace, and the path is open for the rest of the
//! call. So the calls that create, write, rename, link, remove or chmod a path are not left
//! to the mount view: the line's last seccomp filter sends them to the init
//! (`SECCOMP_RET_USER_NOTIF`), which decides by the path as the call names it *now*
//! ([`rules`]) and then makes the call itself, on the directory fd it resolved, and hands
//! the result back (an opened file through `SECCOMP_IOCTL_NOTIF_ADDFD`). Nothing is read
//! twice from the call's memory and the kernel never runs the original call, so a thread
//! that rewrites the path meanwhile changes nothing. The init runs under the same Landlock
//! domain and mount view as the line: it can do nothing the line could not, except refuse.
//!
//! Reads are not supervised (an `open` without a write flag never reaches the init).

pub mod filter;
mod git_io;
pub mod gitdir;
mod locks;
mod net;
mod ops;
pub mod rules;
mod sys;
mod umask;

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

pub use locks::MadeLocks;
pub use net::SocketRules;
pub use rules::Rules;

/// What the init needs to supervise a call: the writable roots, the absolute protected
/// paths and the relative protected name patterns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuperviseSpec {
    /// The writable roots (projects, write grants, scratch): only inside them do the
    /// supervisor's rules refuse anything (elsewhere the view's read-only mounts do).
    pub roots: Vec<String>,
    /// The absolute protected paths (the plan's `read_only_inside`, where those that are
    /// links lead, masks inside a root): the line may not create, write or remove them.
    pub paths: Vec<String>,
    /// The protected name patterns (`protect_names`), taken relative to every root and to
    /// every nested repository below one.
    pub names: Vec<String>,
    /// The call's own places for path sockets (its writable roots, `/tmp`, `/dev`).
    #[serde(default)]
    pub socket_dirs: Vec<String>,
    /// The path sockets its grants name.
    #[serde(default)]
    pub sockets: Vec<String>,
    /// The call has a network namespace of its own, whose loopback is the call's: a
    /// refused connect there is reported (`loopback_refused`). False for a call on the
    /// host's network (`net_view`, `open_network`), whose loopback is the host's.
    #[serde(default)]
    pub own_loopback: bool,
    /// The git config keys that run nothing (`git.safe_config_keys`): what a config of a
    /// directory git takes as a git dir may hold ([`gitdir`]); the launcher's
    /// [`FALLBACK_GIT_SAFE_KEYS`] when `None`.
    #[serde(default)]
    pub git_safe_keys: Option<Vec<String>>,
    /// The host's read-only mounts (and the writable ones below them), read before the
    /// view was made: a write that fails there failed on the host's own file system, which
    /// no grant changes (a note, `host_refused`, not a refusal).
    #[serde(default)]
    pub host_mounts: crate::view::host_mounts::HostMounts,
    /// The files the call was granted to write that it may write by lock file and rename
    /// (`FILE.lock` made by an open, written, renamed onto `FILE`; see the `locks` module): the write
    /// grants of plain files inside another writable root.
    #[serde(default)]
    pub locks: Vec<String>,
}

/// The git config keys that run nothing when a plan names none (a plan written by hand or
/// by an older service): what `git init` and `git clone` write, so that they work.
pub const FALLBACK_GIT_SAFE_KEYS: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
    "extensions.refstorage",
    "remote.*.url",
    "remote.*.fetch",
    "branch.*.remote",
    "branch.*.merge",
];

/// At most this many threads receive the call's notifications.
const MAX_THREADS: usize = 8;
/// Their stacks: the calls they make need little.
const THREAD_STACK: usize = 256 * 1024;
/// At most this many distinct refused paths are reported.
const MAX_REPORTED: usize = 256;
/// At most this many directories made by the call are remembered (for the exceptions of
/// [`rules`]: the config of a git dir the call made).
const MAX_MADE: usize = 1 << 16;

/// The supervisor of one call, run by its init.
#[derive(Debug)]
pub struct Supervisor {
    listener: OwnedFd,
    /// `/` of the view, for absolute paths.
    root: OwnedFd,
    rules: Rules,
    /// (dev, ino) of the directories this call made under a `.git`.
    made: Mutex<HashSet<(u64, u64)>>,
    /// (dev, ino) of the protected files that had more than one link at launch.
    linked: HashSet<(u64, u64)>,
    report_fd: RawFd,
    reported: Mutex<HashSet<Vec<u8>>>,
    /// The receiving threads, and how many of them wait now.
    threads: AtomicUsize,
    idle: AtomicUsize,
    /// The callers' umasks.
    umasks: umask::Umasks,
    /// Where path sockets may be reached.
    sockets: SocketRules,
    /// Held while an act on a name that matters to git is decided and made
    /// ([`gitdir`]): no other thread makes a directory git-like meanwhile.
    git: Mutex<()>,
    /// The git config keys that run nothing (`git.safe_config_keys`).
    git_safe_keys: Vec<String>,
    /// The host's read-only mounts: where a failed write is the host's refusal.
    host_mounts: crate::view::host_mounts::HostMounts,
    /// The lock files of granted files the call made (removed at its end by the init).
    locks: std::sync::Arc<MadeLocks>,
}

/// Whether this kernel can supervise: user notification with ADDFD_FLAG_SEND (5.14).
pub fn available() -> bool {
    sys::notif_sizes_fit()
}

/// Why the supervisor could not be set up: the line's fork with its filter, or the
/// supervisor's start. Each variant names the step (the messages are the
/// ones the init and the line report as their `setup_error`).
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// A step that failed with a system error (`what`: the seccomp listener, the line's
    /// fork, ...).
    #[error("{what}: {source}")]
    Io {
        /// The step.
        what: &'static str,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The protected name patterns do not compile.
    #[error(transparent)]
    Rules(#[from] rules::RulesError),
    /// The view's root could not be opened (an errno).
    #[error("the view's root: errno {0}")]
    Root(i32),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> SuperviseError {
    move |source| SuperviseError::Io { what, source }
}

/// Forks the line with its notification filter already in force, and returns its pid and
/// the filter's listener to come, which is the init's from the start: no hand-over, so the
/// line never waits for the init before its exec. (The hand-over that was here, the line
/// writing its listener's number and waiting for the init to take it with `pidfd_getfd`,
/// was a trip through the scheduler on every launch: measured at load 2, a launch took
/// 1.27x the same launch without the supervisor.)
///
/// A filter is a thread's and its children's: the init must not have it (the supervisor's
/// own calls would be sent to itself), so the line's child loads it, having been forked
/// with the init's fd table shared (`CLONE_FILES`): the listener the kernel makes lands in
/// the init's table. The child loads `pre_load` (the line's own refusals under
/// bubblewrap, [`filter::line_only`]) and `prog` (the notification filter,
/// [`filter::program`], or the EPERM filter with the table merged in,
/// `crate::restrict::seccomp::program_with`), leaves the shared table for a copy without the
/// listener (`close_range(CLOSE_RANGE_UNSHARE)`, which no filter refuses), writes the
/// listener's number on a pipe (`write` is not supervised) and runs `line` (it never
/// returns). The program the line runs never holds the listener.
///
/// Until [`PendingListener::take`] has the child's word, the child may still be in the
/// init's table: the init must close no fd the child needs (what `line` uses, such as the
/// call's pty), and it does not wait for the word either (the child is on its way to its
/// exec meanwhile). (Before, a thread of the init loaded the filters and forked: measured,
/// that thread took 0.09-0.13 ms to start in the init, whose pages are all copy-on-write,
/// on every launch.)
pub fn fork_supervised<F>(
    prog: &crate::restrict::seccomp::Program,
    pre_load: Option<&crate::restrict::seccomp::Program>,
    line: F,
) -> Result<(libc::pid_t, PendingListener), SuperviseError>
where
    F: FnOnce() -> std::convert::Infallible,
{
    use std::os::fd::AsRawFd;
    let (r, w) = crate::sys::pipe_owned().map_err(io("the line's listener pipe"))?;
    // An fd the init opens while the table is shared (the capability drop, the linked-file
    // check) takes the lowest free number, which the line's copy then holds: never one of
    // 0-2 (open in every process of ours: Rust's runtime puts /dev/null on a closed one at
    // start), and 3 up are the line's to replace or close before its exec (see
    // `crate::child::init::exec_line`).
    let pid = crate::sys::clone_fork(libc::CLONE_FILES).map_err(io("fork of the line"))?;
    if pid != 0 {
        return Ok((pid, PendingListener { r, _w: w }));
    }
    // The line's child, sharing the init's fd table until `load_line_filters` has left it:
    // it closes nothing before that, and never returns from here.
    let word = match load_line_filters(prog, pre_load) {
        Ok(n) => ForkWord::Listener(n),
        Err((step, errno)) => ForkWord::Failed(step, errno),
    };
    let sent = crate::sys::write_all(w.as_raw_fd(), &word.encode());
    if !matches!(word, ForkWord::Listener(_)) || sent.is_err() {
        crate::sys::exit_now(crate::exit_code::INIT_FAILED)
    }
    // A panic must not unwind out of here into the init's frames, in the child.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(line)) {
        Ok(never) => match never {},
        Err(_) => crate::sys::exit_now(crate::exit_code::INIT_FAILED),
    }
}

/// The listener of a line forked by [`fork_supervised`], until its child has said where
/// it is. Dropping it closes the pipe (only the init's copy once the child left the table).
#[derive(Debug)]
pub struct PendingListener {
    r: OwnedFd,
    /// Kept open until the word is read: closing it while the table is shared would close
    /// the child's too.
    _w: OwnedFd,
}

impl PendingListener {
    /// The pipe to poll for `POLLIN`: the child's word is there.
    pub fn fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.r.as_raw_fd()
    }

    /// The listener, once [`Self::fd`] is readable (blocks until then): the child has left
    /// the init's table by then, and the fds it needed are the init's alone. The error names
    /// the child's step that failed.
    pub fn take(self) -> Result<OwnedFd, SuperviseError> {
        use std::os::fd::AsRawFd;
        let mut b = [0u8; 8];
        let n = loop {
            match crate::sys::read(self.r.as_raw_fd(), &mut b) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                r => break r.map_err(io("reading the line's listener"))?,
            }
        };
        if n != b.len() {
            return Err(SuperviseError::Io {
                what: "the line's fork",
                source: std::io::Error::other("it said nothing of its listener"),
            });
        }
        match ForkWord::decode(b) {
            ForkWord::Listener(n) => sys::owned_listener(n).map_err(io("the line's listener")),
            ForkWord::Failed(step, errno) => Err(SuperviseError::Io {
                what: FORK_STEPS.get(step).copied().unwrap_or("the line's fork"),
                source: std::io::Error::from_raw_os_error(errno),
            }),
        }
    }
}

/// The steps of the line's child before it leaves the shared fd table, by the number it
/// sends when one fails.
const FORK_STEPS: [&str; 4] = [
    "no_new_privs of the line's fork",
    "the line's own refusals",
    "seccomp listener",
    "the line leaving the init's fd table",
];

/// What the line's child tells the init on the pipe: its listener's number, or the step
/// that failed and its errno. Eight bytes, one write (atomic on a pipe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ForkWord {
    Listener(RawFd),
    Failed(usize, i32),
}

impl ForkWord {
    fn encode(self) -> [u8; 8] {
        let (a, b) = match self {
            ForkWord::Listener(n) => (-1i32, n),
            ForkWord::Failed(step, errno) => (i32::try_from(step).unwrap_or(i32::MAX), errno),
        };
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&a.to_ne_bytes());
        out[4..].copy_from_slice(&b.to_ne_bytes());
        out
    }

    fn decode(b: [u8; 8]) -> Self {
        let a = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        let v = i32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
        match usize::try_from(a) {
            Ok(step) => ForkWord::Failed(step, v),
            Err(_) => ForkWord::Listener(v),
        }
    }
}

/// In the line's child: no_new_privs, the filters, then out of the shared table with the
/// listener left in the init's. The listener's number, or the failed step and its errno.
fn load_line_filters(
    prog: &crate::restrict::seccomp::Program,
    pre_load: Option<&crate::restrict::seccomp::Program>,
) -> Result<RawFd, (usize, i32)> {
    let errno = |step: usize| move |e: std::io::Error| (step, e.raw_os_error().unwrap_or(0));
    crate::sys::no_new_privs().map_err(errno(0))?;
    if let Some(p) = pre_load {
        crate::sys::seccomp_filter(p).map_err(errno(1))?;
    }
    // Not dropped here: closing it now would close the init's.
    let n = std::os::fd::IntoRawFd::into_raw_fd(sys::seccomp_listener(prog).map_err(errno(2))?);
    crate::sys::close_range_unshare(n).map_err(errno(3))?;
    Ok(n)
}

/// The protected files of a call that had more than one link at launch, by inode: writes
/// through any of their names are refused.
#[derive(Debug, Default)]
pub struct Linked(HashSet<(u64, u64)>);

impl Linked {
    /// Finds the protected files of `spec` with more than one link and reports each
    /// (`linked PATH\tLINKS`, at most `MAX_REPORTED`) on `report_fd`. The init does this
    /// once the line is forked, while the line goes on to its exec.
    pub fn find(spec: &SuperviseSpec, report_fd: RawFd) -> Self {
        let protected: Vec<Vec<u8>> = spec.paths.iter().map(|p| rules::trim(p)).collect();
        let ops::Linked { inodes, paths } = ops::linked_protected(&protected);
        for (path, n) in paths.iter().take(MAX_REPORTED) {
            let line = format!("linked {}\t{n}", report_path(path));
            crate::child::init::report(report_fd, &line);
        }
        Linked(inodes)
    }
}

/// A line's listener, held by the init until the line makes its first supervised call.
///
/// A line that writes nothing (`git status`, a test run that only reads) never needs the
/// rules compiled or a thread started, and a line that does waits for them on its first
/// call only. Before, the init did both right after it took the listener, while the line went on
/// to its exec: the init's answer wakes the line on the init's own CPU (a socket's wake-up
/// tells the scheduler the waker is about to sleep), so the line waited for that work. The
/// init now goes back to its loop at once, polls [`Lazy::fd`] for `POLLIN` (first the
/// line's child's word of where its listener is, then a notification that waits) and calls
/// [`Lazy::ready`] for each.
#[derive(Debug)]
pub struct Lazy {
    listener: Listener,
    spec: SuperviseSpec,
    sockets: SocketRules,
    report_fd: RawFd,
    linked: Linked,
    locks: std::sync::Arc<MadeLocks>,
}

/// Where a [`Lazy`]'s listener is.
#[derive(Debug)]
enum Listener {
    /// The line's child has not said yet (it may still share the init's fd table).
    Pending(PendingListener),
    /// In the init's own table.
    Ready(OwnedFd),
}

impl Lazy {
    /// The listener to come of `spec`'s call, its path sockets `sockets`, the protected
    /// files found `linked`, reporting to `report_fd`.
    pub fn new(
        listener: PendingListener,
        spec: SuperviseSpec,
        sockets: SocketRules,
        linked: Linked,
        report_fd: RawFd,
    ) -> Self {
        Lazy {
            listener: Listener::Pending(listener),
            spec,
            sockets,
            report_fd,
            linked,
            locks: std::sync::Arc::default(),
        }
    }

    /// The lock files of granted files the call makes: the init removes those left at the
    /// call's end ([`MadeLocks::remove_left`]).
    pub fn locks(&self) -> std::sync::Arc<MadeLocks> {
        self.locks.clone()
    }

    /// What to poll for `POLLIN`: the line's child's word, then the listener.
    pub fn fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        match &self.listener {
            Listener::Pending(p) => p.fd(),
            Listener::Ready(l) => l.as_raw_fd(),
        }
    }

    /// Whether the line's child has not said yet where its listener is: until then the
    /// init must close no fd the child needs (see [`fork_supervised`]).
    pub fn pending(&self) -> bool {
        matches!(self.listener, Listener::Pending(_))
    }

    /// [`Self::fd`] is readable: the child's word is in (the listener, which is then
    /// polled; `Some`), or a supervised call waits, and the rules are compiled and the
    /// call's notifications served on threads of their own ([`Supervisor::spawn`]; `None`).
    pub fn ready(mut self) -> Result<Option<Self>, SuperviseError> {
        match self.listener {
            Listener::Pending(p) => Ok(Some(Lazy {
                listener: Listener::Ready(p.take()?),
                ..self
            })),
            Listener::Ready(l) => {
                let sv = &self.spec;
                let rules = Rules::new(&sv.roots, &sv.paths, &sv.names)?.with_locks(&sv.locks);
                let keys = self.spec.git_safe_keys.clone();
                let host = std::mem::take(&mut self.spec.host_mounts);
                Supervisor::new(rules, l, self.linked, self.report_fd)?
                    .with_locks(self.locks)
                    .with_sockets(self.sockets)
                    .with_git_safe_keys(keys)
                    .with_host_mounts(host)
                    .spawn()
                    .map(|()| None)
            }
        }
    }
}

impl Supervisor {
    /// The supervisor of `rules` (from a [`SuperviseSpec`]), serving `listener`, with the
    /// protected files `linked` ([`Linked::find`]); refusals go to `report_fd` as `denied
    /// PATH` lines.
    pub fn new(
        rules: Rules,
        listener: OwnedFd,
        linked: Linked,
        report_fd: RawFd,
    ) -> Result<Self, SuperviseError> {
        let linked = linked.0;
        let root = ops::root_fd().map_err(SuperviseError::Root)?;
        Ok(Supervisor {
            listener,
            root,
            rules,
            made: Mutex::new(HashSet::new()),
            linked,
            report_fd,
            reported: Mutex::new(HashSet::new()),
            threads: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            umasks: umask::Umasks::default(),
            sockets: SocketRules::default(),
            git: Mutex::new(()),
            git_safe_keys: FALLBACK_GIT_SAFE_KEYS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            host_mounts: crate::view::host_mounts::HostMounts::default(),
            locks: std::sync::Arc::default(),
        })
    }

    /// The same supervisor recording the lock files the call makes in `locks`.
    pub fn with_locks(mut self, locks: std::sync::Arc<MadeLocks>) -> Self {
        self.locks = locks;
        self
    }

    /// The same supervisor with `host` as the host's read-only mounts (none by default:
    /// every failed write where the rules let it is then the sandbox's).
    pub fn with_host_mounts(mut self, host: crate::view::host_mounts::HostMounts) -> Self {
        self.host_mounts = host;
        self
    }

    /// The same supervisor with `keys` as the git config keys that run nothing (the plan's
    /// `git.safe_config_keys`; [`FALLBACK_GIT_SAFE_KEYS`] when it names none).
    pub fn with_git_safe_keys(mut self, keys: Option<Vec<String>>) -> Self {
        if let Some(k) = keys {
            self.git_safe_keys = k;
        }
        self
    }

    /// The same supervisor with `sockets` as where path sockets may be reached (none
    /// outside by default).
    pub fn with_sockets(mut self, sockets: SocketRules) -> Self {
        self.sockets = sockets;
        self
    }

    /// Serves the call's notifications until no process has the filter any more, on
    /// threads of its own: one at first, and one more whenever a thread takes a
    /// notification while another one waits to be taken and no thread is free (up to
    /// `MAX_THREADS`), so that calls made at once by several processes or threads of the
    /// line (npm's thread pool, `make -j`) each get a thread, and a line that makes its
    /// calls one after another costs one thread: every waiting thread is woken by each
    /// notification (the kernel's wake-up of the listener is not exclusive), so a thread
    /// more than the line needs costs a wake-up per call. The init's umask is set to 0
    /// first: modes are masked with each caller's own.
    pub fn spawn(self) -> Result<(), SuperviseError> {
        sys::umask(0);
        // A caller wakes a receiver on its own CPU (`SYNC_WAKE_UP`, 6.6; else as usual).
        sys::notif_sync_wake_up(self.listener.as_fd());
        let me = std::sync::Arc::new(self);
        me.threads.store(1, Ordering::SeqCst);
        me.clone().start_thread().map_err(io("supervisor thread"))
    }

    fn start_thread(self: std::sync::Arc<Self>) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("efr-supervise".into())
            .stack_size(THREAD_STACK)
            .spawn(move || self.receive_loop())
            .map(|_| ())
    }

    fn receive_loop(self: std::sync::Arc<Self>) {
        loop {
            // Waiting in the receive itself: the kernel wakes the receivers on the caller's
            // CPU (`SYNC_WAKE_UP`), and one that finds the notification taken by another
            // sleeps again without coming back here.
            self.idle.fetch_add(1, Ordering::SeqCst);
            let got = sys::notif_recv(self.listener.as_fd());
            self.idle.fetch_sub(1, Ordering::SeqCst);
            match got {
                Ok(n) => {
                    // A call on a socket may block for as long as its peer likes (a full
                    // backlog, a full buffer): another thread is free before it is made.
                    self.grow(!may_block(n.data.nr));
                    ops::serve(&self, &n);
                    if self.shrink() {
                        return;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // A caller that died before its call was read, or no process left with
                // the filter (the listener says POLLHUP, and the thread is done).
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    if sys::hung_up(self.listener.as_fd()) {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Starts one more receiving thread when none is free now and (`if_pending`) another
    /// notification waits to be taken.
    fn grow(self: &std::sync::Arc<Self>, if_pending: bool) {
        if self.idle.load(Ordering::SeqCst) > 0 {
            return;
        }
        let n = self.threads.load(Ordering::SeqCst);
        if n >= MAX_THREADS || if_pending && !sys::pending(self.listener.as_fd()) {
            return;
        }
        if self
            .threads
            .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return;
        }
        if self.clone().start_thread().is_err() {
            self.threads.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether this thread ends now: when two others wait already, the calls come fewer at
    /// once than there are threads (eight writers are done, a sequential phase follows),
    /// and each thread more costs a wake-up per call. Two, not one, so that a line whose
    /// calls come two at a time does not start and end a thread for every pair; the last
    /// thread never ends here (it needs two others waiting).
    fn shrink(&self) -> bool {
        if self.idle.load(Ordering::SeqCst) < 2 {
            return false;
        }
        self.threads.fetch_sub(1, Ordering::SeqCst);
        true
    }

    /// Reports a path socket the call may not reach: `denied_socket PATH\tOP`.
    fn refuse_socket(&self, what: &str, path: &[u8]) {
        let mut key = b"socket:".to_vec();
        key.extend_from_slice(path);
        if !self.first_report(key) {
            return;
        }
        let line = format!("denied_socket {}\t{what}", report_path(path));
        crate::child::init::report(self.report_fd, &line);
    }

    /// Reports a connect to the call's own loopback on `port` that was refused, once per
    /// port: `loopback_refused PORT`.
    fn refuse_loopback(&self, port: u16) {
        if self.first_report(format!("loopback:{port}").into_bytes()) {
            crate::child::report::send(
                self.report_fd,
                &crate::child::report::Report::LoopbackRefused(port),
            );
        }
    }

    /// Whether `key` is reported for the first time (and within [`MAX_REPORTED`]).
    fn first_report(&self, key: Vec<u8>) -> bool {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        reported.len() < MAX_REPORTED && reported.insert(key)
    }

    /// Reports a write the host's own file system refused where the sandbox let it
    /// (`host_refused PATH\tOP\tWHY`): a note, no refusal of the sandbox, once per path.
    fn host_refused(&self, what: &str, path: &[u8], why: &str) {
        let mut key = b"host:".to_vec();
        key.extend_from_slice(path);
        if !self.first_report(key) {
            return;
        }
        let line = format!("host_refused {}\t{what}\t{why}", report_path(path));
        crate::child::init::report(self.report_fd, &line);
    }

    fn refuse(&self, what: &str, path: &[u8], why: &rules::Refusal) {
        if !self.first_report(path.to_vec()) {
            return;
        }
        // One line per refusal: `denied PATH\tOP\tWHY` (the path as bytes, lossily), or
        // `denied_git` for git code (its own exit: no write grant lets it through).
        let kind = if matches!(why, rules::Refusal::Git(_)) {
            "denied_git"
        } else {
            "denied"
        };
        let why = match why {
            rules::Refusal::Protected(r) => format!("protected by {r}"),
            rules::Refusal::HoldsProtected(r) => format!("holds the protected {r}"),
            rules::Refusal::GitLink => "a .git that is not a directory".to_string(),
            rules::Refusal::NotWritable => "not writable in this call".to_string(),
            rules::Refusal::Git(why) => why.clone(),
        };
        let why = why.replace(['\n', '\t'], " ");
        let line = format!("{kind} {}\t{what}\t{why}", report_path(path));
        crate::child::init::report(self.report_fd, &line);
    }
}

/// Whether a supervised call may block on its peer (the socket calls), not only on the
/// file system.
fn may_block(nr: i32) -> bool {
    [
        libc::SYS_connect,
        libc::SYS_sendto,
        libc::SYS_sendmsg,
        libc::SYS_sendmmsg,
    ]
    .iter()
    .any(|&b| i64::from(nr) == b)
}

/// A path as a report line carries it: lossily as text, with no newline or tab (the line's
/// end and its field separator).
fn report_path(path: &[u8]) -> String {
    String::from_utf8_lossy(path).replace(['\n', '\t'], " ")
}

#[cfg(test)]
mod tests {
    use super::{ForkWord, fork_supervised};
    use std::os::fd::AsRawFd;

    #[test]
    fn the_fork_word_says_the_listener_or_the_failed_step() {
        for w in [
            ForkWord::Listener(0),
            ForkWord::Listener(17),
            ForkWord::Failed(0, libc::EPERM),
            ForkWord::Failed(3, libc::ENOSYS),
        ] {
            assert_eq!(ForkWord::decode(w.encode()), w);
        }
    }

    /// The line's child loads the filter and the listener is the caller's, in its own table:
    /// a seccomp listener, which hangs up once the child (its filter's only user) is gone.
    #[test]
    fn the_listener_lands_in_the_forking_process() {
        if !super::available() {
            assert!(
                std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
                "no seccomp user notification here"
            );
            return;
        }
        let prog = super::filter::program();
        let (pid, pending) =
            fork_supervised(&prog, None, || crate::sys::exit_now(7)).expect("forked");
        let l = pending.take().expect("the child's listener");
        let link = std::fs::read_link(format!("/proc/self/fd/{}", l.as_raw_fd())).unwrap();
        assert!(
            link.to_string_lossy().contains("seccomp"),
            "not a listener: {link:?}"
        );
        let (_, st) = crate::sys::waitpid(pid, 0).unwrap().unwrap();
        assert_eq!(libc::WEXITSTATUS(st), 7);
        let ev = crate::sys::poll(&[(l.as_raw_fd(), libc::POLLIN)], 5000).unwrap();
        assert!(
            ev[0] & libc::POLLHUP != 0,
            "the listener did not hang up: {ev:?}"
        );
    }

    /// A filter the kernel refuses is the step's error, in the forking process.
    #[test]
    fn a_refused_filter_is_reported_with_its_step() {
        let (pid, pending) =
            fork_supervised(&Vec::new(), None, || crate::sys::exit_now(0)).expect("forked");
        let e = pending
            .take()
            .expect_err("an empty program must be refused");
        assert!(e.to_string().starts_with("seccomp listener: "), "{e}");
        let (_, st) = crate::sys::waitpid(pid, 0).unwrap().unwrap();
        assert_eq!(libc::WEXITSTATUS(st), crate::exit_code::INIT_FAILED);
    }
}
