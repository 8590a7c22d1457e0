//! `sandbox_check`: runs the probe inside real contained calls (each backend, the network
//! view), adds what the host explains, and folds it all into the wire `SandboxCheck` and its
//! `SandboxStatus`.

use efr_launcher::api::Io;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use efr_launcher::plan::EnvVar;
use efr_launcher::status::{LandlockReport, StatusLine};
use efr_sandbox_wire::{
    Backend, BusProxyOff, CheckOutcome, CheckTest, Grant, Mode, ModeFallback, SandboxCheck,
    SandboxStatus, SelfTest,
};

use crate::host;
use crate::inside::{InsideArgs, InsideReport};

/// The variable set (to a fake secret) in the environment the line starts from; the `env`
/// test fails if it reaches the call.
pub const CANARY: &str = "EFR_PROBE_CANARY_API_TOKEN";

/// How long one contained probe may take before it is killed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The tests a working contained call needs (with `backend_<the backend in force>`).
pub const REQUIRED: &[SelfTest] = &[
    SelfTest::Userns,
    SelfTest::Mounts,
    SelfTest::Masks,
    SelfTest::Pidns,
    SelfTest::Netns,
    SelfTest::Landlock,
    SelfTest::Seccomp,
    SelfTest::Caps,
    SelfTest::NoNewPrivs,
    SelfTest::Env,
];

/// The name of the `proxy` check's test host (granted to its call, mapped to the loopback
/// test host for that call only).
pub const PROXY_TEST_NAME: &str = "efr-check.test";
/// A name the `proxy` check's call is not granted (`.invalid`: no config allows it by
/// accident).
pub const PROXY_DENIED_NAME: &str = "efr-check-denied.invalid";

/// TESTS ONLY: the `test_weaken` entries of the proxy, honored by the check and the
/// service (not the launcher), only with `EFR_LAUNCH_ALLOW_TEST_WEAKEN=1`:
/// `proxy_down` (the call's proxy is stopped before the call: its socket is there, nobody
/// answers) and `proxy_open` (the proxy also grants the name the call must be refused).
pub const PROXY_WEAKEN_KINDS: &[&str] = &["proxy_down", "proxy_open"];

/// One contained call the check asks for.
#[derive(Debug, Clone)]
pub struct ProbeCall {
    /// The shell line the call runs (`exec` of the probe's command and its tests).
    pub line: String,
    /// Where it runs (absolute): the check's own project dir.
    pub cwd: String,
    /// The call's project roots (writable).
    pub projects: Vec<String>,
    /// Grants on top of the default view.
    pub grants: Vec<Grant>,
    /// The backend the call runs on.
    pub backend: Backend,
    /// Names mapped for this call's proxy only (on top of the config's `[network.resolve]`).
    pub resolve: Vec<(String, IpAddr)>,
    /// TESTS ONLY: the [`PROXY_WEAKEN_KINDS`] asked for (the service honors `proxy_down`).
    pub test_weaken: Vec<String>,
}

/// Makes a call the way the service makes every call (its plan from the config), with its
/// proxy when it has a host grant.
pub type MakeCall = dyn Fn(&ProbeCall) -> Result<efr_call::Call, String> + Send + Sync;

/// The bus filter's self-test: `Ok(detail)`, or why the filter is off with the detail.
pub type BusTest = dyn Fn() -> Result<String, (BusProxyOff, String)> + Send + Sync;

/// What the check runs with.
pub struct CheckOptions {
    /// The probe's command (`efr-probe`, or `efr-sandbox __probe`); `inside ...` follows.
    pub probe: Vec<String>,
    /// Makes each call of the check, as the service makes its calls.
    pub make_call: Box<MakeCall>,
    /// The backend the config (or `--backend`) puts in force.
    pub backend: Backend,
    /// The config's `network.netview`.
    pub netview: bool,
    /// The config's `bus.filter`.
    pub bus_filter: bool,
    /// The bus filter's self-test (the service runs it: a private dbus-daemon and a
    /// filtered call to it): its detail when it passes, else why the filter is off.
    pub bus_test: Option<Box<BusTest>>,
    /// What the config's `[bus]` rules leave out or open anyway (one sentence each).
    pub bus_warnings: Vec<String>,
    /// TESTS ONLY: the plans' `test_weaken` (the launcher honors it only with
    /// `EFR_LAUNCH_ALLOW_TEST_WEAKEN=1`).
    pub test_weaken: Vec<String>,
}

impl std::fmt::Debug for CheckOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckOptions")
            .field("probe", &self.probe)
            .field("backend", &self.backend)
            .field("netview", &self.netview)
            .field("test_weaken", &self.test_weaken)
            .finish_non_exhaustive()
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What one contained probe gave.
#[derive(Debug, Default)]
struct Run {
    report: Option<InsideReport>,
    landlock: Option<LandlockReport>,
    seccomp_loaded: bool,
    supervised: bool,
    backend: Option<efr_sandbox_wire::RunBackend>,
    /// Why no report came back (setup error, crash, bad output).
    error: Option<String>,
}

fn is_proxy_knob(w: &str) -> bool {
    w.starts_with("proxy_")
}

/// The call of one probe: `exec` of the probe's command with `args`, in `project`, with
/// the check's proxy knobs.
fn probe_call(
    opts: &CheckOptions,
    backend: Backend,
    args: &InsideArgs,
    grants: Vec<Grant>,
    resolve: Vec<(String, IpAddr)>,
    project: &str,
) -> ProbeCall {
    let mut argv: Vec<String> = opts.probe.clone();
    argv.extend(args.to_args());
    let line = format!(
        "exec {}",
        argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
    );
    ProbeCall {
        line,
        cwd: project.to_string(),
        projects: vec![project.to_string()],
        grants,
        backend,
        resolve,
        test_weaken: opts
            .test_weaken
            .iter()
            .filter(|w| is_proxy_knob(w))
            .cloned()
            .collect(),
    }
}

/// The probe's changes to its call's plan: the backend, the masked directory, the
/// environment with the canary, the launcher's test knobs.
fn probe_plan(
    plan: &mut efr_launcher::plan::Plan,
    opts: &CheckOptions,
    backend: Backend,
    args: &InsideArgs,
) {
    plan.backend = backend;
    if let Some(m) = &args.masked {
        plan.masks.push(m.clone());
    }
    let mut env: Vec<EnvVar> = std::env::vars()
        .map(|(name, value)| EnvVar { name, value })
        .collect();
    env.push(EnvVar {
        name: CANARY.into(),
        value: "efr-probe-canary-not-a-real-secret".into(),
    });
    plan.env = Some(env);
    plan.test_weaken = opts
        .test_weaken
        .iter()
        .filter(|w| !is_proxy_knob(w))
        .cloned()
        .collect();
}

/// What the launcher's status and the probe's output (`stdout`, the tail of `stderr`)
/// say of one probe.
fn probe_run(outcome: efr_launcher::status::Outcome, stdout: &str, stderr: &str) -> Run {
    let mut run = Run::default();
    if let Some(StatusLine::Started {
        backend,
        landlock,
        seccomp,
        supervised,
        ..
    }) = &outcome.started
    {
        run.backend = Some(*backend);
        run.landlock = landlock.clone();
        run.seccomp_loaded = *seccomp;
        run.supervised = *supervised;
    }
    if let Some(e) = outcome.setup_error {
        run.error = Some(e);
        return run;
    }
    match serde_json::from_str::<InsideReport>(stdout.trim()) {
        Ok(r) => run.report = Some(r),
        Err(_) => {
            let tail: String = stderr
                .lines()
                .last()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            run.error = Some(format!(
                "the probe gave no report (exit status {}){}",
                outcome.exit_status(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }
            ));
        }
    }
    run
}

/// Runs the probe with `args` in one contained call: made as the service makes its
/// calls ([`probe_call`]), its plan changed ([`probe_plan`]), killed after
/// [`PROBE_TIMEOUT`], its output read ([`probe_run`]).
fn run_probe(
    opts: &CheckOptions,
    backend: Backend,
    args: &InsideArgs,
    grants: Vec<Grant>,
    resolve: Vec<(String, IpAddr)>,
    project: &str,
) -> Run {
    let call = probe_call(opts, backend, args, grants, resolve, project);
    // The call (and its proxy) lives until it has ended.
    let mut c = match (opts.make_call)(&call) {
        Ok(c) => c,
        Err(e) => {
            return Run {
                error: Some(e),
                ..Default::default()
            };
        }
    };
    probe_plan(c.plan_mut(), opts, backend, args);
    let mut running = match c.spawn(Io::null(), Io::piped(), Io::piped()) {
        Ok(r) => r,
        Err(e) => {
            return Run {
                error: Some(e.to_string()),
                ..Default::default()
            };
        }
    };
    #[allow(
        clippy::cast_possible_wrap,
        reason = "a pid: at most the kernel's pid_max (2^22), always a positive pid_t"
    )]
    let pid = running.child().id() as libc::pid_t;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(PROBE_TIMEOUT).is_err() {
            // Our own child, not yet waited for (the sender is dropped after wait).
            let _ = crate::sys::kill(pid, libc::SIGKILL);
        }
    });
    let mut out = running.child().stdout.take();
    let mut err = running.child().stderr.take();
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.take(64 * 1024).read_to_string(&mut s);
        }
        s
    });
    let mut stdout = String::new();
    if let Some(o) = out.as_mut() {
        let _ = o.take(1 << 20).read_to_string(&mut stdout);
    }
    let waited = running.wait();
    let _ = done_tx.send(());
    let _ = watchdog.join();
    let stderr = err_thread.join().unwrap_or_default();
    match waited {
        Ok((outcome, _)) => probe_run(outcome, &stdout, &stderr),
        Err(e) => Run {
            error: Some(format!("the launcher could not be waited for: {e}")),
            ..Default::default()
        },
    }
}

fn test(name: SelfTest, pass: bool, ms: u64, detail: String, required: bool) -> CheckTest {
    CheckTest {
        name,
        outcome: if pass {
            CheckOutcome::Pass
        } else {
            CheckOutcome::Fail
        },
        ms,
        detail,
        required,
    }
}

fn skip(name: SelfTest, detail: &str) -> CheckTest {
    CheckTest {
        name,
        outcome: CheckOutcome::Skip,
        ms: 0,
        detail: detail.into(),
        required: false,
    }
}

/// Explains a backend's setup error with what the host says.
fn explain_setup(backend: Backend, e: &str) -> String {
    let mut d = format!("the sandbox did not start: {e}");
    match backend {
        Backend::Native => {
            if let Some(b) = host::userns_blocker() {
                d = format!("{d}; {b}");
            }
        }
        Backend::Bwrap => {
            d.push_str("; `bwrap --unshare-user --ro-bind / / true` shows bubblewrap's own error")
        }
    }
    d
}

/// The check's own project: a fresh directory with a masked directory and a `.git/hooks`,
/// a loopback listener, and the probe's arguments naming them. The directory and the
/// listener live until the check ends.
struct Project {
    _dir: tempfile::TempDir,
    path: String,
    listener: Option<TcpListener>,
    args: InsideArgs,
}

impl Project {
    fn make() -> Result<Project, String> {
        let dir = tempfile::Builder::new()
            .prefix("efr-probe-")
            .tempdir()
            .map_err(|e| format!("probe: cannot make a temporary project: {e}"))?;
        let project = dir.path().to_string_lossy().into_owned();
        let masked = format!("{project}/masked");
        let hooks = format!("{project}/.git/hooks");
        let _ = std::fs::create_dir_all(&masked);
        let _ = std::fs::write(format!("{masked}/secret"), "not empty\n");
        let _ = std::fs::create_dir_all(&hooks);
        let listener = TcpListener::bind("127.0.0.1:0").ok();
        let port = listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|a| a.port());
        let args = InsideArgs {
            port,
            project: Some(project.clone()),
            masked: Some(masked),
            hooks: Some(hooks),
            canary: Some(CANARY.into()),
            ..Default::default()
        };
        Ok(Project {
            _dir: dir,
            path: project,
            listener,
            args,
        })
    }
}

/// The `user` test: as root, full mode is refused.
fn user_test(root: bool) -> CheckTest {
    test(
        SelfTest::User,
        !root,
        0,
        if root {
            "running as root: full mode is refused (`root`); run efr as your own user".into()
        } else {
            "not root".into()
        },
        false,
    )
}

/// The `backend_<b>` test: a contained call on backend `b` (bubblewrap's own check first)
/// and whether every layer held in it; with the probe's run when the call ran.
fn backend_test(opts: &CheckOptions, b: Backend, p: &Project) -> (CheckTest, Option<Run>) {
    let name = SelfTest::backend(b);
    let required = b == opts.backend;
    let t0 = Instant::now();
    let mut bwrap_text = None;
    if b == Backend::Bwrap {
        match host::bwrap_ok(efr_launcher::backend::bwrap::BWRAP) {
            Ok(t) => bwrap_text = Some(t),
            Err(e) => {
                let ms = crate::elapsed_ms(t0);
                let t = if required {
                    test(name, false, ms, e, true)
                } else {
                    CheckTest {
                        outcome: CheckOutcome::Skip,
                        ..test(name, false, ms, e, false)
                    }
                };
                return (t, None);
            }
        }
    }
    let r = run_probe(opts, b, &p.args, Vec::new(), Vec::new(), &p.path);
    let ms = crate::elapsed_ms(t0);
    let prefix = bwrap_text.map(|t| format!("{t}: ")).unwrap_or_default();
    let (pass, detail) = match (&r.error, &r.report) {
        (Some(e), _) => (false, format!("{prefix}{}", explain_setup(b, e))),
        (None, Some(rep)) => {
            let failed: Vec<&str> = rep
                .tests
                .iter()
                .filter(|t| !t.pass)
                .map(|t| t.name.as_str())
                .collect();
            if failed.is_empty() {
                (
                    true,
                    format!("{prefix}a contained call ran and every layer held"),
                )
            } else {
                (
                    false,
                    format!(
                        "{prefix}a contained call ran but these layers failed: {}",
                        failed.join(", ")
                    ),
                )
            }
        }
        (None, None) => (false, format!("{prefix}no report")),
    };
    (test(name, pass, ms, detail, required), Some(r))
}

/// The test of one required layer, as the backend in force saw it (`run`), with what the
/// host explains; the status's Landlock ABI, seccomp and socket mediation follow it.
fn layer_test(
    opts: &CheckOptions,
    name: SelfTest,
    run: &Run,
    status: &mut SandboxStatus,
) -> CheckTest {
    let inside = run.report.as_ref().and_then(|r| r.get(name));
    let (ms, mut pass, mut detail) = match (inside, &run.error) {
        (Some(t), _) => (t.ms, t.pass, t.detail.clone()),
        (None, Some(e)) => (
            0,
            false,
            format!(
                "not tested: the {} sandbox did not start ({e})",
                opts.backend.as_str()
            ),
        ),
        (None, None) => (0, false, "not tested: the probe gave no result".into()),
    };
    match name {
        SelfTest::Userns if !pass => {
            if let Some(b) = host::userns_blocker() {
                detail = format!("{detail}; {b}");
            }
        }
        SelfTest::Landlock => landlock_layer(run, status, &mut pass, &mut detail),
        SelfTest::Seccomp => seccomp_layer(run, status, &mut pass, &mut detail),
        _ => {}
    }
    test(name, pass, ms, detail, true)
}

/// The `landlock` layer: what the launcher reported applying, beside the probe's view.
fn landlock_layer(run: &Run, status: &mut SandboxStatus, pass: &mut bool, detail: &mut String) {
    match &run.landlock {
        None if run.report.is_some() => {
            *pass = false;
            *detail = format!("the launcher applied no Landlock to the call; inside: {detail}");
        }
        Some(l) if l.abi == 0 || l.status == efr_sandbox_wire::Enforcement::NotEnforced => {
            *pass = false;
            *detail = format!(
                "Landlock {} (ABI {}): {}",
                l.status,
                l.abi,
                host::landlock_missing()
            );
        }
        Some(l) => {
            *detail = format!(
                "{} ({}){}; {detail}",
                l.status,
                abi_line(l),
                if l.abi < 6 {
                    "; signal and abstract-socket scopes need ABI 6 (kernel 6.12)"
                } else {
                    ""
                }
            );
            status.landlock_abi = Some(l.abi);
        }
        None => {}
    }
}

/// The `seccomp` layer: the launcher's report of its filter, the service's own filter, the
/// supervisor.
fn seccomp_layer(run: &Run, status: &mut SandboxStatus, pass: &mut bool, detail: &mut String) {
    if *pass && !run.seccomp_loaded {
        *pass = false;
        *detail = format!("the launcher did not report its filter loaded; {detail}");
    }
    if host::own_seccomp_mode() == 2 {
        detail.push_str(
            " (the service itself runs under a seccomp filter: ours stack on top, which is fine)",
        );
    }
    status.seccomp = *pass;
    if *pass && run.supervised {
        detail.push_str(
            "; writes in the writable roots and path sockets supervised by the \
             init (seccomp user notification; Landlock's RESOLVE_UNIX needs ABI 9)",
        );
        status.socket_mediation = Some(efr_sandbox_wire::status::SocketMediation::Supervisor);
    }
}

/// The `netview` test: a call with a `net_view` grant (skipped when the config refuses
/// them).
fn netview_test(opts: &CheckOptions, project: &str, status: &mut SandboxStatus) -> CheckTest {
    if !opts.netview {
        status.netview_off = true;
        return skip(
            SelfTest::Netview,
            "network.netview is false in the config: net_view grants are refused",
        );
    }
    let t0 = Instant::now();
    let nv = InsideArgs {
        netview: true,
        ..Default::default()
    };
    let r = run_probe(
        opts,
        opts.backend,
        &nv,
        vec![Grant::NetView],
        Vec::new(),
        project,
    );
    let ms = crate::elapsed_ms(t0);
    let (pass, detail) = match (
        &r.error,
        r.report.as_ref().and_then(|x| x.get(SelfTest::Netview)),
    ) {
        (Some(e), _) => (false, explain_setup(opts.backend, e)),
        (None, Some(t)) => (t.pass, t.detail.clone()),
        (None, None) => (false, "the probe gave no result".into()),
    };
    status.netview = pass;
    test(SelfTest::Netview, pass, ms, detail, false)
}

/// The `proxy` test: the egress proxy, from inside a call with a host grant
/// ([`proxy_check`]).
fn proxy_test(opts: &CheckOptions, project: &str, status: &mut SandboxStatus) -> CheckTest {
    let t0 = Instant::now();
    let (pass, detail) = proxy_check(opts, project);
    status.proxy = pass;
    test(SelfTest::Proxy, pass, crate::elapsed_ms(t0), detail, false)
}

/// The `bus_proxy` test: the bus filter's self-test, run by the service (a private
/// dbus-daemon), when the program is there and the config wants the filter.
fn bus_proxy_test(opts: &CheckOptions, status: &mut SandboxStatus) -> CheckTest {
    let t0 = Instant::now();
    let bus_program =
        std::path::Path::new("/usr/bin/xdg-dbus-proxy").exists() || which_on_path("xdg-dbus-proxy");
    let bus = if !bus_program {
        Err((
            BusProxyOff::NoProgram,
            "xdg-dbus-proxy is not installed: install it for bus_filter grants".to_string(),
        ))
    } else if !opts.bus_filter {
        Err((
            BusProxyOff::Config,
            "bus.filter is false in the config".to_string(),
        ))
    } else {
        match &opts.bus_test {
            Some(t) => t(),
            None => Err((
                BusProxyOff::SelfTest,
                "no bus self-test was given to this check".to_string(),
            )),
        }
    };
    let ms = crate::elapsed_ms(t0);
    let warn = |d: String| {
        if opts.bus_warnings.is_empty() {
            d
        } else {
            format!("{d}; warning: {}", opts.bus_warnings.join("; "))
        }
    };
    match bus {
        Ok(detail) => {
            status.bus_proxy = true;
            status.bus_proxy_off = None;
            test(SelfTest::BusProxy, true, ms, warn(detail), false)
        }
        Err((off, detail)) => {
            status.bus_proxy = false;
            status.bus_proxy_off = Some(off);
            CheckTest {
                outcome: if matches!(off, BusProxyOff::SelfTest | BusProxyOff::OldVersion) {
                    CheckOutcome::Fail
                } else {
                    CheckOutcome::Skip
                },
                ..test(SelfTest::BusProxy, false, ms, warn(detail), false)
            }
        }
    }
}

/// The summary: available when every required test passed; else the first failed layer
/// (rather than the backend's summary of it) names why, and calls fall back.
fn summarize(opts: &CheckOptions, tests: &[CheckTest], root: bool, status: &mut SandboxStatus) {
    let failed: Vec<&CheckTest> = tests
        .iter()
        .filter(|t| t.required && t.outcome != CheckOutcome::Pass)
        .collect();
    status.available = failed.is_empty();
    if status.available {
        status.backend = Some(opts.backend);
    }
    let first = failed
        .iter()
        .find(|t| !t.name.is_backend() && !t.detail.starts_with("not tested"))
        .or(failed.first());
    if let Some(f) = first {
        status.unavailable = Some(format!("{}: {}", f.name, f.detail));
        status.fallback = Some(ModeFallback {
            asked: Mode::Auto,
            reason: "sandbox_unavailable".into(),
        });
    } else if root {
        status.fallback = Some(ModeFallback {
            asked: Mode::Full,
            reason: "root".into(),
        });
    }
}

/// Runs the whole check, one self-test after the other: the user, each backend, the
/// layers as the backend in force saw them, the network view, the proxy, the bus filter;
/// then the summary.
pub fn run(opts: &CheckOptions) -> SandboxCheck {
    let start = Instant::now();
    let mut tests = Vec::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut status = SandboxStatus {
        checked_at: Some(rfc3339(now)),
        ..Default::default()
    };
    let p = match Project::make() {
        Ok(p) => p,
        Err(e) => {
            status.unavailable = Some(e);
            return SandboxCheck {
                status,
                tests,
                ms: crate::elapsed_ms(start),
            };
        }
    };
    let root = host::is_root();
    tests.push(user_test(root));
    let mut primary_run = None;
    for b in [Backend::Native, Backend::Bwrap] {
        let (t, r) = backend_test(opts, b, &p);
        tests.push(t);
        if b == opts.backend {
            primary_run = r;
        }
    }
    let run = primary_run.unwrap_or_default();
    for name in REQUIRED {
        tests.push(layer_test(opts, *name, &run, &mut status));
    }
    tests.push(netview_test(opts, &p.path, &mut status));
    tests.push(proxy_test(opts, &p.path, &mut status));
    tests.push(bus_proxy_test(opts, &mut status));
    summarize(opts, &tests, root, &mut status);
    drop(p.listener);
    SandboxCheck {
        status,
        tests,
        ms: crate::elapsed_ms(start),
    }
}

/// The `proxy` check: a loopback test host, a call granted [`PROXY_TEST_NAME`] on its port
/// (mapped to 127.0.0.1 for that call's proxy only), and the probe inside reaching it through
/// the proxy variables and being refused [`PROXY_DENIED_NAME`].
fn proxy_check(opts: &CheckOptions, project: &str) -> (bool, String) {
    let knobs: Vec<&String> = opts
        .test_weaken
        .iter()
        .filter(|w| is_proxy_knob(w))
        .collect();
    if let Some(k) = knobs
        .iter()
        .find(|k| !PROXY_WEAKEN_KINDS.contains(&k.as_str()))
    {
        return (false, format!("test_weaken: unknown entry {k:?}"));
    }
    if !knobs.is_empty()
        && std::env::var(efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV).as_deref() != Ok("1")
    {
        return (
            false,
            format!(
                "the plan asks to weaken the sandbox ({}) but {}=1 is not set",
                knobs
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV
            ),
        );
    }
    let nonce = crate::testhost::nonce();
    let host = match crate::testhost::TestHost::start(PROXY_TEST_NAME, nonce) {
        Ok(h) => h,
        Err(e) => {
            return (
                false,
                format!("cannot start the loopback test host on 127.0.0.1: {e}"),
            );
        }
    };
    let port = host.port();
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut grants = vec![Grant::Host {
        host: PROXY_TEST_NAME.into(),
        port: Some(port),
        plain_http: false,
        tcp: false,
    }];
    let mut resolve = vec![(PROXY_TEST_NAME.to_string(), lo)];
    if knobs.iter().any(|k| k.as_str() == "proxy_open") {
        grants.push(Grant::Host {
            host: PROXY_DENIED_NAME.into(),
            port: Some(port),
            plain_http: false,
            tcp: false,
        });
        resolve.push((PROXY_DENIED_NAME.to_string(), lo));
    }
    let args = InsideArgs {
        proxy: Some(format!("{PROXY_TEST_NAME}:{port}")),
        denied: Some(format!("{PROXY_DENIED_NAME}:{port}")),
        nonce: Some(crate::testhost::hex(&nonce)),
        ..Default::default()
    };
    let r = run_probe(opts, opts.backend, &args, grants, resolve, project);
    let seen = host.seen();
    drop(host);
    match (
        &r.error,
        r.report.as_ref().and_then(|x| x.get(SelfTest::Proxy)),
    ) {
        (Some(e), _) => (false, explain_setup(opts.backend, e)),
        (None, Some(t)) if !t.pass => (false, t.detail.clone()),
        (None, Some(t)) => {
            // The host's own log: the hello it answered was the probe's.
            if seen
                .iter()
                .any(|s| s.nonce && s.sni.as_deref() == Some(PROXY_TEST_NAME))
            {
                (true, t.detail.clone())
            } else {
                (
                    false,
                    format!(
                        "the probe got an answer, but the test host logged no ClientHello for \
                         {PROXY_TEST_NAME} with the check's nonce (it saw {seen:?}): something \
                         else answered"
                    ),
                )
            }
        }
        (None, None) => (false, "the probe gave no result".into()),
    }
}

fn abi_line(l: &LandlockReport) -> String {
    let mut v = vec![format!("ABI {}", l.abi)];
    if l.scopes {
        v.push("scopes".into());
    }
    if l.unix_sockets {
        v.push("path sockets".into());
    }
    if l.net {
        v.push("tcp".into());
    }
    v.join(", ")
}

fn which_on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

/// Whether every required test passed.
pub fn verdict(c: &SandboxCheck) -> bool {
    c.tests
        .iter()
        .all(|t| !t.required || t.outcome == CheckOutcome::Pass)
}

/// The check as text: one line per test, then the verdict.
pub fn render(c: &SandboxCheck) -> String {
    let mut s = String::new();
    for t in &c.tests {
        let o = match t.outcome {
            CheckOutcome::Pass => "pass",
            CheckOutcome::Fail => "FAIL",
            CheckOutcome::Skip => "skip",
        };
        s.push_str(&format!(
            "{o:4}  {:13} {:>5} ms{}  {}\n",
            t.name,
            t.ms,
            if t.required { " *" } else { "  " },
            t.detail
        ));
    }
    let ok = verdict(c);
    // Tests that are not required and failed: shown, but they do not make the verdict.
    let optional: Vec<&str> = c
        .tests
        .iter()
        .filter(|t| !t.required && t.outcome == CheckOutcome::Fail)
        .map(|t| t.name.as_str())
        .collect();
    s.push_str(&format!(
        "\n{} ({} ms; * = required){}{}\n",
        if ok {
            format!(
                "sandbox available: backend {}",
                c.status.backend.map(|b| b.as_str()).unwrap_or("?")
            )
        } else {
            "sandbox UNAVAILABLE".to_string()
        },
        c.ms,
        match &c.status.fallback {
            Some(f) => format!("; mode {} falls back ({})", f.asked.as_str(), f.reason),
            None => String::new(),
        },
        if optional.is_empty() {
            String::new()
        } else {
            format!(
                "\nnot required, failed (the verdict does not count them): {}",
                optional.join(", ")
            )
        }
    ));
    s
}

/// RFC 3339 (UTC, seconds) of a Unix time.
pub fn rfc3339(secs: u64) -> String {
    // Never saturates: u64::MAX / 86400 is under 2^48.
    let days = i64::try_from(secs / 86400).unwrap_or(i64::MAX);
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}
