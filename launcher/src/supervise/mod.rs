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
}

/// At most this many threads receive the call's notifications.
const MAX_THREADS: usize = 8;
/// Their stacks: the calls they make need little.
const THREAD_STACK: usize = 256 * 1024;
/// The stack of the thread that forks the line, on which the line's setup runs until its
/// exec.
const LINE_FORK_STACK: usize = 1024 * 1024;
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
/// the filter's listener, which is the init's from the start: no hand-over, so the line
/// never waits for the init before its exec. (The hand-over that was here, the line
/// writing its listener's number and waiting for the init to take it with `pidfd_getfd`,
/// was a trip through the scheduler on every launch: measured at load 2, a launch took
/// 1.27x the same launch without the supervisor.)
///
/// A filter is a thread's: a thread of the init loads `pre_load` (the line's own
/// refusals under bubblewrap, [`filter::line_only`]) and `prog` (the notification filter,
/// [`filter::program`], or the EPERM filter with the table merged in,
/// `crate::seccomp::program_with`), then forks. The child, which runs `line` (it never
/// returns), inherits the filters; the init's other threads never have them (the
/// supervisor's own calls must not be sent to itself). The listener is close-on-exec: the
/// program the line runs never holds it. The init's main thread waits in `join`
/// meanwhile, holding no lock the child could need.
pub fn fork_supervised<F>(
    prog: &crate::seccomp::Program,
    pre_load: Option<&crate::seccomp::Program>,
    line: F,
) -> Result<(libc::pid_t, OwnedFd), SuperviseError>
where
    F: FnOnce() -> std::convert::Infallible + Send,
{
    std::thread::scope(|s| {
        let t = std::thread::Builder::new()
            .name("efr-line-fork".into())
            .stack_size(LINE_FORK_STACK)
            .spawn_scoped(s, move || {
                // Per thread, as the filters: the init's main thread keeps what it had.
                crate::sys::no_new_privs().map_err(io("no_new_privs of the line's fork"))?;
                if let Some(p) = pre_load {
                    crate::sys::seccomp_filter(p).map_err(io("the line's own refusals"))?;
                }
                let l = sys::seccomp_listener(prog).map_err(io("seccomp listener"))?;
                match crate::sys::fork().map_err(io("fork of the line"))? {
                    // A panic must not end this thread, the child's only one: its process
                    // would exit 0, as a line that ran and succeeded.
                    0 => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(line)) {
                        Ok(never) => match never {},
                        Err(_) => crate::sys::exit_now(crate::exit_code::INIT_FAILED),
                    },
                    pid => Ok((pid, l)),
                }
            })
            .map_err(io("the line's fork thread"))?;
        t.join().unwrap_or_else(|_| {
            Err(SuperviseError::Io {
                what: "the line's fork thread",
                source: std::io::Error::other("it panicked"),
            })
        })
    })
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
            crate::inner::report(report_fd, &line);
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
/// init now goes back to its loop at once, polls [`Lazy::fd`] for `POLLIN` (a
/// notification waits) and then calls [`Lazy::start`].
#[derive(Debug)]
pub struct Lazy {
    listener: OwnedFd,
    spec: SuperviseSpec,
    sockets: SocketRules,
    report_fd: RawFd,
    linked: Linked,
}

impl Lazy {
    /// The listener of `spec`'s call, its path sockets `sockets`, the protected files
    /// found `linked`, reporting to `report_fd`.
    pub fn new(
        listener: OwnedFd,
        spec: SuperviseSpec,
        sockets: SocketRules,
        linked: Linked,
        report_fd: RawFd,
    ) -> Self {
        Lazy {
            listener,
            spec,
            sockets,
            report_fd,
            linked,
        }
    }

    /// The listener, to poll for `POLLIN`.
    pub fn fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.listener.as_raw_fd()
    }

    /// Compiles the rules and serves the call's notifications on threads of their own
    /// ([`Supervisor::spawn`]).
    pub fn start(self) -> Result<(), SuperviseError> {
        let sv = &self.spec;
        let rules = Rules::new(&sv.roots, &sv.paths, &sv.names)?;
        Supervisor::new(rules, self.listener, self.linked, self.report_fd)?
            .with_sockets(self.sockets)
            .spawn()
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
        })
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
        crate::inner::report(self.report_fd, &line);
    }

    /// Whether `key` is reported for the first time (and within [`MAX_REPORTED`]).
    fn first_report(&self, key: Vec<u8>) -> bool {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        reported.len() < MAX_REPORTED && reported.insert(key)
    }

    fn refuse(&self, what: &str, path: &[u8], why: &rules::Refusal) {
        if !self.first_report(path.to_vec()) {
            return;
        }
        let why = match why {
            rules::Refusal::Protected(r) => format!("protected by {r}"),
            rules::Refusal::HoldsProtected(r) => format!("holds the protected {r}"),
            rules::Refusal::GitLink => "a .git that is not a directory".to_string(),
            rules::Refusal::NotWritable => "not writable in this call".to_string(),
        };
        // One line per refusal: `denied PATH\tOP\tWHY` (the path as bytes, lossily).
        let line = format!("denied {}\t{what}\t{why}", report_path(path));
        crate::inner::report(self.report_fd, &line);
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
