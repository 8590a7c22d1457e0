//! The probe (efr-probe) run with calls of [`efr_call::Call`] built from the config: shared
//! by `admin.sandbox_check`, `sandbox.status` and `efr-sandbox check`.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use efr_call::launch::CallParams;
use efr_call::{Ctx, ProxyWhen};
use efr_launcher::backend::resolve as resolve_backend;
use efr_policy::config::{Config, Env};
use efr_probe::check::{CheckOptions, ProbeCall};
use efr_sandbox_wire::SandboxCheck;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};

/// The hidden subcommand under which `efr-sandbox` runs the probe inside a contained call.
pub const PROBE_SUBCOMMAND: &str = "__probe";

/// The probe's command: `$EFR_PROBE` when set (an `efr-probe` binary), else this executable's
/// hidden `__probe` subcommand.
fn probe_command() -> Vec<String> {
    if let Some(p) = std::env::var_os("EFR_PROBE").filter(|p| !p.is_empty()) {
        return vec![p.to_string_lossy().into_owned()];
    }
    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("efr-sandbox"));
    vec![me.to_string_lossy().into_owned(), PROBE_SUBCOMMAND.into()]
}

/// The probe's executable staged where a contained call sees it: a private host directory
/// that the check's calls get as their `/tmp`. Removed when dropped.
#[derive(Debug)]
struct StagedProbe {
    dir: PathBuf,
}

impl Drop for StagedProbe {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a contained call sees `exe` where the host has it: not under `/tmp` (a call
/// has its own) and not in a path the config masks.
fn visible_inside(exe: &Path, config: &Config, env: &Env) -> bool {
    if exe.starts_with("/tmp") {
        return false;
    }
    efr_policy::explain::explain_path(exe, None, &[], config, env)
        .is_ok_and(|e| e.access != efr_sandbox_wire::Access::None)
}

/// The probe command as a contained call can run it, and the staged copy it needs, if any:
/// an executable under `/tmp` or in a masked path (a build in a checkout under `/tmp`) is
/// hard-linked (or copied) into a fresh directory that becomes the call's `/tmp`.
fn probe_for_calls(
    config: &Config,
    env: &Env,
    runtime: Option<&Path>,
) -> Result<(Vec<String>, Option<StagedProbe>), String> {
    let mut cmd = probe_command();
    let exe = PathBuf::from(&cmd[0]);
    if visible_inside(&exe, config, env) {
        return Ok((cmd, None));
    }
    let base = runtime
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let name = efr_call::sys::random_hex(8).map_err(|e| format!("no random name: {e}"))?;
    let dir = base.join(format!("efr-probe-{name}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let staged = StagedProbe { dir };
    let to = staged.dir.join("efr-probe");
    if std::fs::hard_link(&exe, &to).is_err() {
        std::fs::copy(&exe, &to).map_err(|e| {
            format!(
                "cannot stage the probe {} in {}: {e}",
                exe.display(),
                to.display()
            )
        })?;
    }
    cmd[0] = "/tmp/efr-probe".into();
    Ok((cmd, Some(staged)))
}

/// Makes a call for the check (as every call is made) and, for a call with a host grant,
/// starts its proxy on `ctx.handle` with a socket below `ctx.sockets`.
fn make_call(c: &ProbeCall, ctx: &Ctx) -> Result<efr_call::Call, String> {
    let p = CallParams {
        line: c.line.clone(),
        cwd: Some(c.cwd.clone()),
        projects: c.projects.clone(),
        grants: c.grants.clone(),
        backend: Some(c.backend.as_str().into()),
        ..Default::default()
    };
    let mut call = efr_call::Call::prepare(&p, ctx).map_err(|e| e.to_string())?;
    // The probe's own calls keep a proxy only when they have a host grant (the proxy
    // self-test), as before every call got one: the other checks were written and measured
    // for a call's network without it.
    let Some(mut pol) = call.proxy_policy(ProxyWhen::HostGrants) else {
        return Ok(call);
    };
    for (name, addr) in &c.resolve {
        pol.map(name, vec![*addr]);
    }
    call.attach(Some(pol), ctx).map_err(|e| e.to_string())?;
    if c.test_weaken.iter().any(|w| w == "proxy_down") {
        // TESTS ONLY (the check honors it only with EFR_LAUNCH_ALLOW_TEST_WEAKEN=1): the
        // proxy stops serving; its socket stays, and nobody answers on it.
        if let Some(cp) = call.proxy() {
            cp.stop_serving();
        }
        let sock = call.plan().proxy.as_ref().map(|p| PathBuf::from(&p.socket));
        let t0 = Instant::now();
        while let Some(s) = &sock {
            if std::os::unix::net::UnixStream::connect(s).is_err()
                || t0.elapsed() > Duration::from_secs(1)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Ok(call)
}

/// The options of a check with this config; the proxies of its calls are served on `handle`
/// with their sockets below `runtime` (the temporary directory when `None`).
pub fn options(
    config: Arc<Config>,
    env: Env,
    backend: Option<&str>,
    test_weaken: Vec<String>,
    runtime: Option<PathBuf>,
    handle: tokio::runtime::Handle,
) -> Result<CheckOptions, String> {
    let choice = efr_call::launch::backend_choice(backend, &config).map_err(|e| e.message)?;
    let netview = config.network.netview.value;
    let bus_filter = config.bus.filter.value;
    let (probe, staged) = probe_for_calls(&config, &env, runtime.as_deref())?;
    let backend = resolve_backend(choice);
    let bus_warnings = efr_policy::bus::filter_rules(&config.bus).warnings();
    let bus_test: Box<efr_probe::check::BusTest> = {
        let (config, env, runtime) = (config.clone(), env.clone(), runtime.clone());
        let handle = handle.clone();
        let name = match backend {
            efr_sandbox_wire::Backend::Bwrap => "bwrap",
            _ => "native",
        };
        Box::new(move || {
            efr_probe::bus::self_test(&config, &env, name, runtime.as_deref(), &handle)
        })
    };
    // No conversations: a check's call names none.
    let ctx = Ctx {
        config,
        env,
        conversations: None,
        sockets: runtime,
        handle,
        standby: None,
    };
    let make_call = move |c: &ProbeCall| {
        let mut call = make_call(c, &ctx)?;
        if let Some(st) = &staged {
            // The staged probe's directory is the call's /tmp.
            call.plan_mut().tmp = Some(st.dir.to_string_lossy().into_owned());
        }
        Ok(call)
    };
    Ok(CheckOptions {
        probe,
        make_call: Box::new(make_call),
        backend,
        netview,
        bus_filter,
        bus_test: Some(bus_test),
        bus_warnings,
        test_weaken,
    })
}

/// Runs a check for the service (blocking: call it off the async threads, on a thread of
/// the service's runtime, which serves the proxy of the check's call).
pub fn service_check(svc: &crate::state::Service, handle: tokio::runtime::Handle) -> SandboxCheck {
    let config = svc.policy.config();
    let env = svc.policy.env().clone();
    let runtime = Some(svc.paths.runtime_dir.clone());
    match options(config, env, None, Vec::new(), runtime, handle) {
        Ok(o) => efr_probe::check::run(&o),
        Err(e) => SandboxCheck {
            status: efr_sandbox_wire::SandboxStatus {
                unavailable: Some(e),
                ..Default::default()
            },
            tests: Vec::new(),
            ms: 0,
        },
    }
}

/// Runs a check now (off the async threads) and caches it. The caller holds the lock.
pub async fn run_check(svc: &Arc<crate::state::Service>) -> Result<SandboxCheck, ErrorBody> {
    let s2 = svc.clone();
    let handle = tokio::runtime::Handle::current();
    match tokio::task::spawn_blocking(move || service_check(&s2, handle)).await {
        Ok(c) => Ok(c),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ErrorBody::new(
            ErrorCode::Internal,
            format!("the check did not finish: {e}"),
        )),
    }
}
