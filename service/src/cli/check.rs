//! `efr-sandbox check`: the self-tests now, one line per test and a verdict.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use efr_policy::config::{Config, Env};

use crate::probe::options;

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
    /// bwrap=PATH, proxy_down, proxy_open); honored only with EFR_LAUNCH_ALLOW_TEST_WEAKEN=1.
    #[arg(long = "test-weaken", value_name = "WHAT", hide = true)]
    pub test_weaken: Vec<String>,
}

/// `efr-sandbox check`: exit status 0 only when every required check passes.
pub fn run(a: CheckArgs) -> anyhow::Result<i32> {
    let env = Env::from_process();
    let config = Config::load(&env)?;
    // The proxy of the check's call is served by a small runtime of its own.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("efr"))
        .filter(|d| efr_call::launch::private_dir(d).is_ok());
    let opts = options(
        Arc::new(config),
        env,
        a.backend.as_deref(),
        a.test_weaken,
        runtime,
        rt.handle().clone(),
    )
    .map_err(anyhow::Error::msg)?;
    let c = efr_probe::check::run(&opts);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        out!("{}", efr_probe::check::render(&c));
    }
    Ok(if efr_probe::check::verdict(&c) { 0 } else { 1 })
}
