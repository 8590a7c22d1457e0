//! The launcher's process: reads the plan, starts the backend, relays signals, ends the
//! call when its caller dies, and writes the status lines. The line's stdio are the
//! launcher's own fds, passed straight through (the launcher copies none of its output),
//! except when they hold a terminal: then the line gets its own pty, which the launcher
//! relays (see [`crate::pty`]).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use efr_sandbox_wire::Backend;

use crate::caller::Caller;
use crate::child::init::InnerSpec;
use crate::child::report::Report;
use crate::plan::{NetMode, Plan, PlanCheck, PlanMode, TestWeaken};
use crate::status::{CgroupKind, StatusLine};
use crate::sys;
use crate::view::Op;

/// Exit status of the launcher when the line did not run.
pub const SETUP_ERROR_EXIT: i32 = crate::exit_code::SETUP_ERROR;

/// Where status lines go.
#[derive(Debug)]
pub struct StatusOut(pub Option<RawFd>);

impl StatusOut {
    /// Writes `s` as one JSON line on the status fd (nothing without one; a failed write
    /// is ignored).
    pub fn emit(&self, s: &StatusLine) {
        if let Some(fd) = self.0 {
            let mut l = s.to_line();
            l.push('\n');
            let _ = sys::write_all(fd, l.as_bytes());
        }
    }

    /// The launch is over and its last status line written: closes the status fd and the
    /// launcher's copies of the call's stdio (`/dev/null` in their place), so that the
    /// caller reading them sees their end now, not after this process's teardown.
    pub fn hang_up(&self) {
        if let Some(fd) = self.0 {
            sys::close(fd);
        }
        sys::stdio_to_null();
    }

    /// Reports a setup error and gives the launcher's exit status.
    pub fn setup_error(&self, msg: impl Into<String>) -> i32 {
        let message: String = msg.into().replace('\n', " ");
        self.emit(&StatusLine::SetupError { message });
        SETUP_ERROR_EXIT
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        // Saturating: `u64::MAX` milliseconds are 584 million years.
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The first child of `pid` (the line under the init).
fn first_child(pid: libc::pid_t) -> Option<u32> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    t.split_whitespace().next()?.parse().ok()
}

/// The most of bubblewrap's `--info-fd` JSON read (a few hundred bytes).
const MAX_INFO: usize = 64 * 1024;

/// How many times a bwrap launch is tried when a path it was to hide vanished meanwhile.
const BWRAP_ATTEMPTS: u32 = 10;

/// One try of a launch.
enum Try {
    /// The launch ran (or failed for good): the launcher's exit status.
    Done(i32),
    /// bubblewrap failed before the line started because a path of the view it was to
    /// cover (a host socket) vanished after the view was computed: try again with a new
    /// view. Nothing was written to the status fd and the line did not run.
    Again,
}

/// Runs a validated plan to the end (or until `caller` dies: then the whole call is
/// killed); returns the launcher's exit status.
pub fn run(plan: &Plan, out: &StatusOut, caller: &Caller) -> i32 {
    run_prepared(plan, out, caller, None)
}

/// [`run`], with an init made ahead ([`crate::backend::warm`]) for the call when it is a
/// native contained one with its own network (any other call drops it and starts as
/// [`run`] does).
pub fn run_prepared(
    plan: &Plan,
    out: &StatusOut,
    caller: &Caller,
    mut warm: Option<crate::backend::warm::Prepared>,
) -> i32 {
    let mut attempt = 1;
    loop {
        match run_once(plan, out, caller, attempt < BWRAP_ATTEMPTS, warm.take()) {
            Try::Done(status) => return status,
            Try::Again => attempt += 1,
        }
    }
}

/// A path the view hides by covering it that is gone now: bubblewrap cannot create the
/// mount point on the read-only root, so its setup fails.
fn covered_path_vanished(view: &crate::view::View) -> bool {
    view.ops.iter().any(|o| {
        matches!(o, crate::view::Op::MaskFile { path } if std::fs::symlink_metadata(path).is_err())
    })
}

/// How long the launcher waits for the processes it killed when its caller died (the
/// call must be gone within a second of its caller).
const KILL_WAIT: std::time::Duration = std::time::Duration::from_millis(800);

/// Waits for child `pid` until `deadline`; its wait status, if it ended.
fn wait_until(pid: libc::pid_t, deadline: Instant) -> Option<libc::c_int> {
    loop {
        match sys::waitpid(pid, libc::WNOHANG) {
            Ok(Some((_, st))) => return Some(st),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
}

/// Reaps every child until none is left or `deadline`: the launcher is a child subreaper,
/// so what its backend leaves behind (bubblewrap's init when bubblewrap died first) comes
/// to it.
fn reap_orphans(deadline: Instant) {
    loop {
        match sys::waitpid(-1, libc::WNOHANG) {
            Ok(Some(_)) => {}
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    }
}

/// How long a contained call's init gets to end the call itself when its caller died (it
/// kills the line's processes and removes the lock files they left, then exits) before
/// the launcher kills it.
const INIT_END_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// The caller is gone: kills the call now, whatever it is doing. `child` is the backend's
/// process (the native init, bubblewrap, the unsandboxed line), `init` the contained
/// call's init when it is another process (bubblewrap's child), `contained` whether the
/// call is a contained one. A contained call's init is
/// first told to end the call itself (`LAUNCHER_DEATH_SIGNAL`, within `INIT_END_WAIT`:
/// it removes the lock files the line left, which a killed init would leave on the host),
/// then killed. The init's death takes its pid namespace with it; an unsandboxed tree is
/// ended through its cgroup. Returns the survivors (unsandboxed).
fn kill_call(
    child: libc::pid_t,
    init: libc::pid_t,
    contained: bool,
    cgroup: Option<&crate::backend::unsandboxed::Cgroup>,
) -> Vec<String> {
    let deadline = Instant::now() + KILL_WAIT;
    if contained
        && sys::kill(init, crate::signals::LAUNCHER_DEATH_SIGNAL).is_ok()
        && wait_until(child, Instant::now() + INIT_END_WAIT).is_some()
    {
        reap_orphans(deadline);
        return Vec::new();
    }
    if init != child {
        let _ = sys::kill(init, libc::SIGKILL);
    }
    let _ = sys::kill(child, libc::SIGKILL);
    let _ = wait_until(child, deadline);
    let survivors = cgroup
        .map(crate::backend::unsandboxed::end_tree)
        .unwrap_or_default();
    reap_orphans(deadline);
    survivors
}

/// Step 1: what must hold before anything starts (the host, the test knobs, the caller, the
/// launcher as the reaper of what its backend leaves). `Err` is the launcher's exit status
/// (the setup error is written).
fn preflight(plan: &Plan, out: &StatusOut, caller: &Caller) -> Result<(), i32> {
    if let Err(e) = plan.check_host() {
        return Err(out.setup_error(e.to_string()));
    }
    if !plan.test_weaken.is_empty()
        && std::env::var(crate::plan::ALLOW_TEST_WEAKEN_ENV).as_deref() != Ok("1")
    {
        return Err(out.setup_error(format!(
            "the plan asks to weaken the sandbox ({}), a test knob honored only with {}=1",
            plan.test_weaken.join(", "),
            crate::plan::ALLOW_TEST_WEAKEN_ENV
        )));
    }
    if caller.gone() {
        return Err(out.setup_error(format!(
            "the caller (pid {}) ended before the line started",
            caller.pid()
        )));
    }
    // What the backend leaves when it dies first comes to the launcher, which reaps it.
    if let Err(e) = sys::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0) {
        return Err(out.setup_error(format!(
            "prctl(PR_SET_CHILD_SUBREAPER) of the launcher: {e}"
        )));
    }
    Ok(())
}

/// Step 2: the init's spec of the line, before the backend adds its part.
fn line_spec(plan: &Plan) -> InnerSpec {
    InnerSpec {
        shell: plan.shell().to_string(),
        argv: plan.argv(),
        processes_max: plan.processes_max,
        cwd: plan.cwd.clone(),
        env: crate::env::scrub(plan, &crate::env::source(plan)),
        require_landlock: plan.require_landlock,
        ..Default::default()
    }
}

/// What a backend started (step 3): the first process of the call, or why it did not start,
/// and what the launcher keeps of it until the end.
struct Spawned {
    backend_name: efr_sandbox_wire::RunBackend,
    pid: Result<libc::pid_t, crate::setup::SetupError>,
    /// The contained call's view (for the retry check at the end).
    view: Option<crate::view::View>,
    /// Bubblewrap's stage directory, removed at the end.
    stage: Option<crate::backend::bwrap::Stage>,
    /// Bubblewrap's info pipe (read end, write end): the init's pid comes on it.
    info: Option<(OwnedFd, OwnedFd)>,
    /// The unsandboxed line's cgroup.
    cgroup: Option<crate::backend::unsandboxed::Cgroup>,
}

/// The test knobs of a contained launch (validated with the plan: an unknown knob never
/// gets here).
struct Knobs {
    no_masks: bool,
    with_landlock: bool,
    /// bubblewrap's path.
    bwrap: String,
}

/// Step 3a: the test knobs of the plan, and the init's spec completed for a contained call
/// (seccomp entries dropped by a test, capabilities, the watched file systems, the
/// supervisor, the egress).
fn contained_spec(plan: &Plan, spec: &mut InnerSpec) -> Knobs {
    let weaken = plan.weakenings().unwrap_or_default();
    spec.seccomp_drop = weaken
        .iter()
        .filter_map(|w| match w {
            TestWeaken::SeccompDrop(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    let bwrap = weaken
        .iter()
        .find_map(|w| match w {
            TestWeaken::Bwrap(path) => Some(path.clone()),
            _ => None,
        })
        .unwrap_or_else(|| crate::backend::bwrap::BWRAP.to_string());
    spec.drop_caps = true;
    spec.watch_full = vec!["/tmp".into(), "/dev/shm".into()];
    if !weaken.contains(&TestWeaken::NoSupervise) {
        spec.supervise = Some(crate::view::supervise_spec(plan));
    }
    Knobs {
        no_masks: weaken.contains(&TestWeaken::NoMasks),
        with_landlock: !weaken.contains(&TestWeaken::NoLandlock),
        bwrap,
    }
}

/// The whole view (without its masks when a test asks).
fn full_view(plan: &Plan, knobs: &Knobs) -> crate::view::View {
    let mut v = crate::view::build(plan);
    if knobs.no_masks {
        v.ops.retain(|op| {
            !matches!(
                op,
                Op::MaskDir { .. } | Op::MaskFile { .. } | Op::SealDir { .. }
            )
        });
    }
    v
}

/// Step 3, contained: computes the view (weakened when a test asks), completes the init's
/// spec and starts the plan's backend.
fn spawn_contained(
    plan: &Plan,
    spec: &mut InnerSpec,
    report_w: RawFd,
    warm: Option<crate::backend::warm::Waiting>,
) -> Spawned {
    let knobs = contained_spec(plan, spec);
    let base = crate::view::base(plan);
    if let (Some(_), Some(p)) = (&base.proxy_socket, &plan.proxy) {
        spec.egress = Some(crate::child::egress::EgressSpec {
            socket: crate::plan::INSIDE_PROXY_SOCKET.into(),
            relay_port: p.relay_port,
            ports: p.ports.clone(),
            tcp: crate::child::egress::EgressSpec::tcp_of(&plan.grants),
        });
    }
    match plan.backend {
        Backend::Native => spawn_native(plan, &knobs, &base, spec, report_w, warm),
        Backend::Bwrap => spawn_bwrap(plan, &knobs, spec, report_w),
    }
}

/// Step 3b, native: the child builds the base of its view while the launcher computes the
/// rest (see `native::spawn`).
fn spawn_native(
    plan: &Plan,
    knobs: &Knobs,
    base: &crate::view::View,
    spec: &mut InnerSpec,
    report_w: RawFd,
    warm: Option<crate::backend::warm::Waiting>,
) -> Spawned {
    spec.seccomp = Some(plan.net() == NetMode::View);
    let mut full = None;
    let pid = crate::backend::native::spawn(
        base,
        spec,
        report_w,
        || {
            let v = full_view(plan, knobs);
            let rest = crate::view::handoff::Rest {
                ops: v.ops.clone(),
                landlock: knobs.with_landlock.then(|| v.landlock.clone()),
            };
            full = Some(v);
            rest
        },
        warm,
    );
    Spawned {
        backend_name: efr_sandbox_wire::RunBackend::Native,
        pid,
        view: full,
        stage: None,
        info: None,
        cgroup: None,
    }
}

/// Step 3b, bubblewrap: the view staged, bubblewrap started with its info pipe.
fn spawn_bwrap(plan: &Plan, knobs: &Knobs, spec: &mut InnerSpec, report_w: RawFd) -> Spawned {
    let mut s = Spawned {
        backend_name: efr_sandbox_wire::RunBackend::Bwrap,
        pid: Ok(0),
        view: None,
        stage: None,
        info: None,
        cgroup: None,
    };
    spec.seccomp_preloaded = true;
    spec.drop_caps = false;
    if !std::path::Path::new(&knobs.bwrap).exists() {
        s.pid = Err(crate::setup::SetupError::Missing {
            what: "backend bwrap unavailable:",
            path: knobs.bwrap.clone(),
        });
        return s;
    }
    let v = full_view(plan, knobs);
    if knobs.with_landlock {
        spec.landlock = Some(v.landlock.clone());
    }
    s.pid = match (crate::backend::bwrap::Stage::new(&v), sys::pipe_owned()) {
        (Ok(st), Ok((ir, iw))) => {
            let r =
                crate::backend::bwrap::spawn(&knobs.bwrap, &v, spec, &st, report_w, iw.as_raw_fd());
            s.info = Some((ir, iw));
            s.stage = Some(st);
            r
        }
        (Err(e), _) | (_, Err(e)) => Err(crate::setup::SetupError::sys("bwrap stage")(e)),
    };
    s.view = Some(v);
    s
}

/// Step 3, unsandboxed: the line's process in a cgroup of its own (when one can be made).
fn spawn_unsandboxed(spec: &InnerSpec, report_w: RawFd) -> Spawned {
    let cg = crate::backend::unsandboxed::create();
    let me = sys::getpid();
    let r = match sys::fork() {
        Ok(0) => {
            if let Err(e) = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0) {
                crate::child::report::setup_error(
                    report_w,
                    format!("prctl(PR_SET_PDEATHSIG) of the line: {e}"),
                );
                sys::exit_now(crate::exit_code::INIT_FAILED);
            }
            // The launcher died before the death signal was set: nothing would end us.
            if sys::getppid() != me {
                sys::exit_now(crate::exit_code::INIT_FAILED);
            }
            if let Err(e) = crate::backend::unsandboxed::join(&cg) {
                crate::child::report::send(
                    report_w,
                    &crate::child::report::Report::CgroupFailed(e.to_string()),
                );
            }
            crate::child::init::exec_line(spec, report_w, Default::default())
        }
        Ok(p) => Ok(p),
        Err(e) => Err(crate::setup::SetupError::sys("fork")(e)),
    };
    Spawned {
        backend_name: efr_sandbox_wire::RunBackend::Unsandboxed,
        pid: r,
        view: None,
        stage: None,
        info: None,
        cgroup: Some(cg),
    }
}

/// What the call's report said (step 4), folded as it comes.
#[derive(Debug, Default)]
struct Harvest {
    /// The first setup error.
    setup_error: Option<String>,
    /// The line's process reported `ready` (the launcher wrote `started`).
    started: bool,
    /// Paths the init's supervisor refused (a source the line cannot forge).
    supervised_denials: Vec<String>,
    socket_denials: Vec<String>,
    /// The call's own file systems the init found full.
    full_tmpfs: Vec<String>,
    /// Protected files with several links, as the init's supervisor found them at launch.
    linked_protected: Vec<String>,
    /// Ports of the call's loopback where the supervisor saw a connect refused.
    loopback_refused: Vec<u16>,
    /// The supervisor's refusals of git code, with why.
    git_denials: Vec<efr_sandbox_wire::GitDenial>,
    /// The writes the host's own file systems refused (`OP PATH: WHY`).
    host_refused: Vec<String>,
    /// The line's code or signal, once the init reported it.
    line_status: Option<(Option<i32>, Option<i32>)>,
}

impl Harvest {
    /// Folds a report that only adds to what is collected; gives back the others (`ready`,
    /// `stopped`, `cgroup_failed`), which the launcher acts on.
    fn take(&mut self, r: Report) -> Option<Report> {
        fn once(v: &mut Vec<String>, p: String) {
            if !v.contains(&p) {
                v.push(p);
            }
        }
        match r {
            Report::SetupError(m) => {
                self.setup_error.get_or_insert(m);
            }
            Report::ExitCode(c) => self.line_status = Some((Some(c), None)),
            Report::ExitSignal(s) => self.line_status = Some((None, Some(s))),
            Report::DeniedSocket { path, .. } => once(&mut self.socket_denials, path),
            Report::Denied { path, .. } => once(&mut self.supervised_denials, path),
            Report::DeniedGit { path, detail } => {
                let reason = detail.split_once('\t').map_or(&detail[..], |(_, w)| w);
                if !self.git_denials.iter().any(|g| g.path == path) {
                    self.git_denials.push(efr_sandbox_wire::GitDenial {
                        path: path.clone(),
                        reason: reason.to_string(),
                    });
                }
                once(&mut self.supervised_denials, path);
            }
            Report::Linked { path, .. } => once(&mut self.linked_protected, path),
            Report::HostRefused { path, detail } => {
                let (op, why) = detail.split_once('\t').unwrap_or(("write", &detail[..]));
                once(&mut self.host_refused, format!("{op} {path}: {why}"));
            }
            Report::Full(p) => once(&mut self.full_tmpfs, p),
            Report::LoopbackRefused(port) => {
                if !self.loopback_refused.contains(&port) {
                    self.loopback_refused.push(port);
                }
            }
            other => return Some(other),
        }
        None
    }

    /// The `exited` status line of the call (step 5).
    fn exited(
        self,
        code: Option<i32>,
        signal: Option<i32>,
        start: Instant,
        survivors: Vec<String>,
    ) -> StatusLine {
        StatusLine::Exited {
            code,
            signal,
            duration_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
            denials: self.supervised_denials,
            full_tmpfs: self.full_tmpfs,
            survivors,
            socket_denials: self.socket_denials,
            linked_protected: self.linked_protected,
            loopback_refused: self.loopback_refused,
            git_denials: self.git_denials,
            host_refused: self.host_refused,
        }
    }
}

/// The parts of an init made ahead ([`crate::backend::warm`]): the init itself, which
/// serves only a native contained call, the report pipe and the launcher's pidfd it holds.
struct WarmParts {
    init: Option<crate::backend::warm::Waiting>,
    report: Option<(OwnedFd, OwnedFd)>,
    pidfd: Option<OwnedFd>,
}

/// Step 0: splits an init made ahead; another call than a native contained one drops the
/// init here (its copies of the pipe's write end and of the pidfd go with it).
fn split_warm(plan: &Plan, warm: Option<crate::backend::warm::Prepared>) -> WarmParts {
    match warm {
        Some(w) => WarmParts {
            init: Some(w.init)
                .filter(|_| plan.mode == PlanMode::Contained && plan.backend == Backend::Native),
            report: Some(w.report),
            pidfd: Some(w.launcher_pidfd),
        },
        None => WarmParts {
            init: None,
            report: None,
            pidfd: None,
        },
    }
}

/// The launcher's ends of the call, made before the backend starts (step 2).
struct CallIo {
    /// The call's own pty when stdio holds a terminal (see [`crate::pty`]).
    relay: Option<crate::pty::Relay>,
    /// The report pipe. Owned: both ends are closed on every way out of this attempt (a
    /// retry included).
    report_r: OwnedFd,
    report_w: OwnedFd,
    /// The read end of the launcher's signal pipe.
    sig_r: RawFd,
    /// The launcher's pidfd, which a contained call's init watches.
    own_pidfd: Option<OwnedFd>,
}

/// Step 2: the call's pty, the report pipe, the launcher's signals and its pidfd, each put
/// in the init's spec. `Err` is the launcher's exit status (the setup error is written).
fn open_call_io(
    contained: bool,
    spec: &mut InnerSpec,
    out: &StatusOut,
    warm_report: Option<(OwnedFd, OwnedFd)>,
    warm_pidfd: Option<OwnedFd>,
) -> Result<CallIo, i32> {
    // The call's own pty when stdio holds a terminal (see crate::pty).
    let relay = match contained.then(crate::pty::Relay::detect).transpose() {
        Ok(r) => r.flatten(),
        Err(e) => return Err(out.setup_error(e.to_string())),
    };
    spec.terminal = relay.as_ref().map(|r| r.spec());
    if contained && relay.is_none() {
        crate::env::no_terminal_editor(&mut spec.env);
    }
    let (report_r, report_w) = match warm_report.map_or_else(sys::pipe_owned, Ok) {
        Ok(p) => p,
        Err(e) => return Err(out.setup_error(format!("pipe: {e}"))),
    };
    for &(sig, _) in crate::signals::IGNORED_SIGNALS {
        sys::ignore_signals(&[sig]);
    }
    let mut caught = crate::signals::forwarded_signals();
    caught.push(libc::SIGCHLD);
    let sig_r = match sys::signal_pipe(&caught) {
        Ok(r) => r,
        Err(e) => return Err(out.setup_error(format!("signals: {e}"))),
    };
    // The contained call's init watches the launcher through this pidfd: where no death
    // signal reaches (the launcher died before the init's PR_SET_PDEATHSIG), the init
    // still ends the call.
    let own_pidfd: Option<OwnedFd> = if contained {
        warm_pidfd.or_else(|| sys::pidfd_open(sys::getpid()).and_then(sys::owned).ok())
    } else {
        None
    };
    spec.launcher_pidfd = own_pidfd.as_ref().map(AsRawFd::as_raw_fd);
    Ok(CallIo {
        relay,
        report_r,
        report_w,
        sig_r,
        own_pidfd,
    })
}

/// How the watch of a running call ended (step 4).
enum Ended {
    /// The call's report and its first process are done (or the drain time passed).
    Over,
    /// The caller died: the call is to be killed now.
    CallerGone,
}

/// The watch of a running call (step 4): the launcher's signals handed on, the call's
/// report folded, bubblewrap's info read for the init's pid, the first process reaped.
struct Watch<'a> {
    out: &'a StatusOut,
    contained: bool,
    backend_name: efr_sandbox_wire::RunBackend,
    start_ms: u64,
    /// The backend's process (the native init, bubblewrap, the unsandboxed line).
    child: libc::pid_t,
    /// Where signals go: the call's init once known (bubblewrap's child), else `child`.
    sig_target: libc::pid_t,
    sig_r: RawFd,
    report_r: RawFd,
    report_open: bool,
    report_buf: Vec<u8>,
    /// Bubblewrap's info pipe's read end.
    info: Option<OwnedFd>,
    info_open: bool,
    info_buf: Vec<u8>,
    /// Signals to forward once the init's pid is known (bubblewrap).
    held: Vec<libc::c_int>,
    h: Harvest,
    child_status: Option<libc::c_int>,
    cg_kind: Option<CgroupKind>,
    drain_deadline: Option<Instant>,
    /// Bubblewrap's stage directory.
    stage: Option<crate::backend::bwrap::Stage>,
}

impl Watch<'_> {
    /// Watches until the call is over or its caller is gone.
    fn run(&mut self, caller: &Caller, relay: Option<&crate::pty::Relay>) -> Ended {
        let mut buf = vec![0u8; 65536];
        loop {
            if self.child_status.is_some() && !self.report_open {
                return Ended::Over;
            }
            // A contained line's end is final once the init reports it: the init reports
            // only after every other process of the call is killed and reaped. Do not wait
            // for the init's own exit (the kernel tearing down the call's namespaces, which
            // bubblewrap's monitor does not wait for either).
            if self.contained && self.h.line_status.is_some() {
                return Ended::Over;
            }
            if self.drain_deadline.is_some_and(|d| Instant::now() > d) {
                return Ended::Over;
            }
            let fds = self.poll_set(caller);
            // Without a pidfd of the caller, its end is seen by getppid on a wake.
            let timeout = match (self.drain_deadline, caller.fd()) {
                (Some(_), _) => 50,
                (None, Some(_)) => 1000,
                (None, None) => 100,
            };
            let revents = sys::poll(&fds, timeout);
            if caller.gone() {
                return Ended::CallerGone;
            }
            let Ok(revents) = revents else {
                continue;
            };
            for (i, &(fd, _)) in fds.iter().enumerate() {
                if revents[i] == 0 || Some(fd) == caller.fd() {
                    continue;
                }
                if fd == self.sig_r {
                    let n = sys::read(self.sig_r, &mut buf[..64]).unwrap_or(0);
                    self.hand_on_signals(&buf[..n]);
                    continue;
                }
                let n = match sys::read(fd, &mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => 0,
                };
                if fd == self.report_r {
                    self.on_report(&buf[..n], relay);
                } else if self.info.as_ref().map(AsRawFd::as_raw_fd) == Some(fd) {
                    self.on_info(&buf[..n], relay);
                }
            }
            if self.child_status.is_none() {
                if let Ok(Some((_, st))) = sys::waitpid(self.child, libc::WNOHANG) {
                    self.child_status = Some(st);
                    self.drain_deadline = Some(Instant::now() + std::time::Duration::from_secs(2));
                }
            }
        }
    }

    /// The fds the watch polls: the signal pipe, the report while open, bubblewrap's info
    /// while open, the caller's pidfd.
    fn poll_set(&self, caller: &Caller) -> Vec<(RawFd, libc::c_short)> {
        let mut fds = vec![(self.sig_r, libc::POLLIN)];
        if self.report_open {
            fds.push((self.report_r, libc::POLLIN));
        }
        if let (true, Some(ir)) = (self.info_open, &self.info) {
            fds.push((ir.as_raw_fd(), libc::POLLIN));
        }
        if let Some(c) = caller.fd() {
            fds.push((c, libc::POLLIN));
        }
        fds
    }

    /// The signals the launcher caught (pairs of number and from-the-kernel), handed on.
    fn hand_on_signals(&mut self, pairs: &[u8]) {
        for pair in pairs.chunks_exact(2) {
            let (sig, from_kernel) = (libc::c_int::from(pair[0]), pair[1] == 1);
            // A contained line gets every forwarded signal through its init; an
            // unsandboxed one is in the caller's group and got group signals.
            let hand_on = if self.contained {
                sig != libc::SIGCHLD
            } else {
                crate::signals::UNSANDBOXED_FORWARDED.contains(&sig) && !from_kernel
            };
            if hand_on {
                // Under bubblewrap the init's pid comes on the info fd; until then the
                // signal waits (bubblewrap's own process ignores it).
                if self.info.is_some() && self.sig_target == self.child {
                    self.held.push(sig);
                } else {
                    let _ = sys::kill(self.sig_target, sig);
                }
            }
        }
    }

    /// Bytes of the call's report (none: its end), folded line by line.
    fn on_report(&mut self, data: &[u8], relay: Option<&crate::pty::Relay>) {
        if data.is_empty() {
            self.report_open = false;
        } else if self.stage.is_some() {
            // The init runs, so bubblewrap has made every mount from the stage: the mounts
            // hold its files, and the dir goes now rather than at the end (a launcher
            // killed by SIGKILL leaves nothing in /tmp).
            self.stage = None;
        }
        self.report_buf.extend_from_slice(data);
        while let Some(p) = self.report_buf.iter().position(|&b| b == b'\n') {
            let l: Vec<u8> = self.report_buf.drain(..=p).collect();
            let l = String::from_utf8_lossy(&l);
            // A line that does not decode is passed over, as an unknown one always was
            // (the init and the launcher are one binary).
            let Ok(r) = Report::decode(&l) else {
                continue;
            };
            match self.h.take(r) {
                Some(Report::Ready(ready)) => self.started(ready),
                Some(Report::Stopped(s)) => {
                    if let Some(r) = relay {
                        r.line_stopped(s);
                    }
                }
                Some(Report::CgroupFailed(_)) => self.cg_kind = Some(CgroupKind::None),
                _ => {}
            }
        }
    }

    /// The line's process is ready: the `started` status line.
    fn started(&mut self, ready: crate::child::report::Ready) {
        let pid = if self.contained {
            first_child(self.sig_target).unwrap_or(0)
        } else {
            // 0 when not known, as above (a child's pid is positive).
            u32::try_from(self.child).unwrap_or(0)
        };
        self.h.started = true;
        self.out.emit(&StatusLine::Started {
            launcher_pid: std::process::id(),
            start_time_ms: self.start_ms,
            pid,
            backend: self.backend_name,
            landlock: ready.landlock,
            seccomp: ready.seccomp,
            supervised: ready.supervised,
            cgroup: self.cg_kind,
        });
    }

    /// Bytes of bubblewrap's info (none: its end): its JSON, written in several writes,
    /// read whole for the init's pid, to which the held signals then go.
    fn on_info(&mut self, data: &[u8], relay: Option<&crate::pty::Relay>) {
        if data.is_empty() {
            self.info_open = false;
            return;
        }
        if self.info_buf.len() >= MAX_INFO {
            return;
        }
        self.info_buf.extend_from_slice(data);
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&self.info_buf) else {
            return;
        };
        // A pid past pid_t is no pid: not taken.
        if let Some(p) = v["child-pid"]
            .as_i64()
            .and_then(|p| libc::pid_t::try_from(p).ok())
        {
            self.sig_target = p;
            if let Some(r) = relay {
                r.set_init(self.sig_target);
            }
            for sig in self.held.drain(..) {
                let _ = sys::kill(self.sig_target, sig);
            }
        }
    }
}

/// Step 5: the backend's first process ended or is ended now: its wait status. A
/// contained call whose init reported the line's end is ending on its own (whoever
/// inherits the init reaps it); another is killed.
fn settle_child(w: &Watch<'_>) -> Option<libc::c_int> {
    if w.child_status.is_some() {
        return w.child_status;
    }
    if w.contained && w.h.line_status.is_some() {
        sys::waitpid(w.child, libc::WNOHANG)
            .ok()
            .flatten()
            .map(|x| x.1)
    } else {
        let _ = sys::kill(w.child, libc::SIGKILL);
        sys::waitpid(w.child, 0).ok().flatten().map(|x| x.1)
    }
}

/// Step 6: the call's end as the launcher reports it: a retry (`retry`: bubblewrap met a
/// vanished path before the line started), a setup error, or the `exited` line and the line's
/// exit status.
fn conclude(
    plan: &Plan,
    out: &StatusOut,
    mut h: Harvest,
    child_status: Option<libc::c_int>,
    retry: bool,
    start: Instant,
    survivors: Vec<String>,
) -> Try {
    let contained = plan.mode == PlanMode::Contained;
    if !contained {
        if let Some(st) = child_status {
            h.line_status = Some(if libc::WIFSIGNALED(st) {
                (None, Some(libc::WTERMSIG(st)))
            } else {
                (Some(libc::WEXITSTATUS(st)), None)
            });
        }
    }
    if retry {
        return Try::Again;
    }
    // Also after the line started: the init reports one only when it killed the line for
    // it (its supervisor or the call's proxy failed), so the line's end is not its own.
    if let Some(e) = h.setup_error.take() {
        return Try::Done(out.setup_error(e));
    }
    // The sandbox ended under a running line (its init was killed, or died): the kernel's
    // teardown of the call's pid namespace killed the line with SIGKILL.
    if h.started && h.line_status.is_none() && contained {
        h.line_status = Some((None, Some(libc::SIGKILL)));
    }
    let Some((code, signal)) = h.line_status else {
        let st = child_status.unwrap_or(0);
        return Try::Done(out.setup_error(format!(
            "the sandbox ended before the line did (wait status {st:#x}, signal {})",
            if libc::WIFSIGNALED(st) {
                libc::WTERMSIG(st)
            } else {
                0
            }
        )));
    };
    // Only what the sandbox itself refused (the line cannot forge it): its stderr is not
    // read at all.
    out.emit(&h.exited(code, signal, start, survivors));
    Try::Done(line_exit(code, signal))
}

/// One try of a launch, as a list of steps: the init made ahead split (0), the preflight
/// (1), the line's spec (2) and the launcher's ends of the call, the backend started (3),
/// the call watched to its end (4), its first process settled and what it left ended (5),
/// the end reported (6).
fn run_once(
    plan: &Plan,
    out: &StatusOut,
    caller: &Caller,
    may_retry: bool,
    warm: Option<crate::backend::warm::Prepared>,
) -> Try {
    let warm = split_warm(plan, warm);
    if let Err(code) = preflight(plan, out, caller) {
        return Try::Done(code);
    }
    let start = Instant::now();
    let start_ms = now_ms();
    let contained = plan.mode == PlanMode::Contained;
    let mut spec = line_spec(plan);
    let io = match open_call_io(contained, &mut spec, out, warm.report, warm.pidfd) {
        Ok(io) => io,
        Err(code) => return Try::Done(code),
    };
    let CallIo {
        mut relay,
        report_r,
        report_w,
        sig_r,
        own_pidfd,
    } = io;
    let Spawned {
        backend_name,
        pid: spawned,
        view,
        stage,
        info,
        cgroup,
    } = if contained {
        spawn_contained(plan, &mut spec, report_w.as_raw_fd(), warm.init)
    } else {
        spawn_unsandboxed(&spec, report_w.as_raw_fd())
    };
    // The write ends are the children's now: the reads below see their end.
    drop(report_w);
    drop(own_pidfd);
    let info: Option<OwnedFd> = info.map(|(r, _w)| r);
    let child = match spawned {
        Ok(p) => p,
        Err(e) => return Try::Done(out.setup_error(e.to_string())),
    };
    if let Some(Err(e)) = relay.as_mut().map(|r| r.start(child)) {
        let _ = sys::kill(child, libc::SIGKILL);
        let _ = sys::waitpid(child, 0);
        return Try::Done(out.setup_error(e.to_string()));
    }
    let mut w = Watch {
        out,
        contained,
        backend_name,
        start_ms,
        child,
        sig_target: child,
        sig_r,
        // `report_r` closes the read end when this attempt returns.
        report_r: report_r.as_raw_fd(),
        report_open: true,
        report_buf: Vec::new(),
        info_open: info.is_some(),
        info,
        info_buf: Vec::new(),
        held: Vec::new(),
        h: Harvest::default(),
        child_status: None,
        cg_kind: cgroup.as_ref().map(|c| c.kind),
        drain_deadline: None,
        stage,
    };
    if let Ended::CallerGone = w.run(caller, relay.as_ref()) {
        let survivors = kill_call(child, w.sig_target, contained, cgroup.as_ref());
        drop(w.stage.take());
        out.emit(&std::mem::take(&mut w.h).exited(None, Some(libc::SIGKILL), start, survivors));
        return Try::Done(crate::exit_code::of_signal(libc::SIGKILL));
    }
    // The call's last output to the user's terminal, and its settings back.
    drop(relay);
    let child_status = settle_child(&w);
    let survivors = match &cgroup {
        Some(cg) => crate::backend::unsandboxed::end_tree(cg),
        None => Vec::new(),
    };
    drop(w.stage.take());
    let retry = may_retry
        && !w.h.started
        && plan.backend == Backend::Bwrap
        && view.as_ref().is_some_and(covered_path_vanished);
    conclude(plan, out, w.h, child_status, retry, start, survivors)
}

/// `efr-launch`'s exit status for a line that ended with `code` or `signal` (both absent:
/// the init's report was lost).
pub(crate) fn line_exit(code: Option<i32>, signal: Option<i32>) -> i32 {
    crate::exit_code::of_end(code, signal)
}
