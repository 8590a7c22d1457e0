//! `admin.sandbox_check`, `sandbox.status` and `efr-sandbox check`: the probe (efr-probe)
//! run with the plans this service builds from the config.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use efr_launcher::api::{BackendChoice, resolve_backend};
use efr_policy::config::{self, Config, Env};
use efr_probe::check::{CheckOptions, ProbeCall};
use efr_sandbox_wire::SandboxCheck;

use crate::launch::{CallParams, launcher, prepare};

/// The hidden subcommand under which `efr-sandbox` runs the probe inside a contained call.
pub const PROBE_SUBCOMMAND: &str = "__probe";

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the wire `sandbox_check` (JSON) instead of text.
    #[arg(long)]
    pub json: bool,
    /// The backend to check as the one in force: native or bwrap (default: the config's
    /// sandbox.backend; auto picks native when user namespaces work).
    #[arg(long, value_name = "BACKEND")]
    pub backend: Option<String>,
    /// TESTS ONLY: weaken a layer on purpose (no_landlock, no_masks, seccomp_drop=NAME,
    /// bwrap=PATH); the launcher honors it only with EFR_LAUNCH_ALLOW_TEST_WEAKEN=1.
    #[arg(long = "test-weaken", value_name = "WHAT", hide = true)]
    pub test_weaken: Vec<String>,
}

/// The probe's command: `$EFR_PROBE` when set (an `efr-probe` binary), else this executable's
/// hidden `__probe` subcommand.
fn probe_command() -> Vec<String> {
    if let Some(p) = std::env::var_os("EFR_PROBE").filter(|p| !p.is_empty()) {
        return vec![p.to_string_lossy().into_owned()];
    }
    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("efr-sandbox"));
    vec![me.to_string_lossy().into_owned(), PROBE_SUBCOMMAND.into()]
}

/// The options of a check with this config.
pub fn options(
    config: Arc<Config>,
    env: Env,
    backend: Option<&str>,
    test_weaken: Vec<String>,
) -> Result<CheckOptions, String> {
    let choice = match backend {
        None => match config.sandbox.backend.value {
            config::BackendChoice::Auto => BackendChoice::Auto,
            config::BackendChoice::Native => BackendChoice::Native,
            config::BackendChoice::Bwrap => BackendChoice::Bwrap,
        },
        Some("auto") => BackendChoice::Auto,
        Some("native") => BackendChoice::Native,
        Some("bwrap") => BackendChoice::Bwrap,
        Some(o) => return Err(format!("backend {o:?}: expected auto, native or bwrap")),
    };
    let netview = config.network.netview.value;
    let bus_filter = config.bus.filter.value;
    let make_plan = move |c: &ProbeCall| {
        let p = CallParams {
            line: c.line.clone(),
            cwd: Some(c.cwd.clone()),
            projects: c.projects.clone(),
            grants: c.grants.clone(),
            backend: Some(c.backend.as_str().into()),
            ..Default::default()
        };
        match prepare(&p, &config, &env, None, None) {
            Ok(r) => r,
            Err(e) => Err(e.message),
        }
    };
    Ok(CheckOptions {
        launcher: launcher(),
        probe: probe_command(),
        make_plan: Box::new(make_plan),
        backend: resolve_backend(choice),
        netview,
        bus_filter,
        test_weaken,
    })
}

/// `efr-sandbox check`: exit status 0 only when every required check passes.
pub fn check_cli(a: CheckArgs) -> anyhow::Result<i32> {
    let env = Env::from_process();
    let config = Config::load(&env)?;
    let opts = options(Arc::new(config), env, a.backend.as_deref(), a.test_weaken)
        .map_err(anyhow::Error::msg)?;
    let c = efr_probe::check::run(&opts);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!("{}", efr_probe::check::render(&c));
    }
    Ok(if efr_probe::check::verdict(&c) { 0 } else { 1 })
}

/// Runs a check for the service (blocking: call it off the async threads).
pub fn service_check(svc: &crate::server::Service) -> SandboxCheck {
    let config = svc.policy.config();
    let env = svc.policy.env().clone();
    match options(config, env, None, Vec::new()) {
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
