//! `sandbox.classify`, `sandbox.always_save` and `efr-sandbox classify`: the classifier of
//! efr-policy behind the service and the command line.

use std::sync::{Arc, Mutex};

use anyhow::bail;
use efr_policy::classify::{self, ClassifyRequest, ClassifyResult, Context};
use efr_policy::config::{AlwaysRule, Config, Env};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{AlwaysOutcome, Mode};
use serde::{Deserialize, Serialize};

use crate::cli::ClassifyArgs;
use crate::dispatch::{Call, HandlerFuture, boxed, params};
use crate::server::Service;

/// The classifier's context, built once per config in force (it reads the token files
/// and git configs it needs when it is built).
#[derive(Debug, Default)]
pub struct ContextCache {
    cached: Mutex<Option<(Arc<Config>, Arc<Context>)>>,
}

impl ContextCache {
    /// The context for `config`: the cached one when the config is the same.
    pub fn get(&self, config: &Arc<Config>, env: &Env) -> Arc<Context> {
        let mut c = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((cfg, ctx)) = c.as_ref() {
            if Arc::ptr_eq(cfg, config) {
                return ctx.clone();
            }
        }
        let ctx = Arc::new(Context::new(config, env).with_call_env(config, std::env::vars()));
        *c = Some((config.clone(), ctx.clone()));
        ctx
    }
}

/// Runs blocking policy work off the async threads; a panic goes on to the connection,
/// which answers `internal`.
async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorBody> {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ErrorBody::new(
            ErrorCode::Internal,
            format!("{what} did not finish: {e}"),
        )),
    }
}

fn check_request(req: &ClassifyRequest) -> Result<(), ErrorBody> {
    let invalid = |m: String| Err(ErrorBody::new(ErrorCode::Invalid, m));
    if let Some(cwd) = &req.cwd {
        if !cwd.is_absolute() {
            return invalid(format!("cwd {} is not absolute", cwd.display()));
        }
    }
    for p in &req.project_roots {
        if !p.is_absolute() {
            return invalid(format!("project root {} is not absolute", p.display()));
        }
    }
    Ok(())
}

/// `sandbox.classify`: a line, its cwd, mode, project roots, granted launch and counters
/// in; `{launch, exits}` out. A line the parser cannot read (too long, too deep, broken)
/// is opaque: an exit for review, never an error and never "safe".
pub fn classify(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let req: ClassifyRequest = params(call.params)?;
        check_request(&req)?;
        let config = svc.policy.config();
        let ctx = svc.classifier.get(&config, svc.policy.env());
        let result = blocking("classify", move || classify::classify(&req, &ctx)).await?;
        serde_json::to_value(&result).map_err(|e| {
            ErrorBody::new(
                ErrorCode::Internal,
                format!("result does not serialize: {e}"),
            )
        })
    })
}

/// Params of `sandbox.always_save`.
#[derive(Debug, Deserialize)]
struct AlwaysSaveParams {
    rule: AlwaysRule,
    /// The config file's text as the caller read it; the save is `changed` when the file
    /// differs now. Absent: only a change while the service writes is caught.
    #[serde(default)]
    expected: Option<String>,
}

/// Result of `sandbox.always_save`.
#[derive(Debug, Serialize)]
struct AlwaysSaveResult {
    outcome: AlwaysOutcome,
}

/// `sandbox.always_save`: writes an "allow always" rule into the user's config file.
pub fn always_save(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: AlwaysSaveParams = params(call.params)?;
        if p.rule.command.is_empty() && p.rule.host.is_none() && p.rule.path.is_none() {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                "an always rule needs a command, a host or a path",
            ));
        }
        let path = svc.policy.env().config_file();
        let outcome = blocking("always_save", move || {
            classify::always::save_always(&path, p.expected.as_deref(), &p.rule)
        })
        .await?;
        if matches!(outcome, AlwaysOutcome::Saved { .. }) {
            // Read the new file now, so the next classification matches the rule.
            let _ = svc.policy.config();
        }
        serde_json::to_value(AlwaysSaveResult { outcome }).map_err(|e| {
            ErrorBody::new(
                ErrorCode::Internal,
                format!("result does not serialize: {e}"),
            )
        })
    })
}

/// `efr-sandbox classify`: classifies a line in this process and prints the launch and
/// each exit in plain words, or the wire JSON with `--json`.
pub fn classify_cli(args: ClassifyArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    let config = Config::load(&env)?;
    let (cwd, project_roots) = crate::policy::cli_dirs(args.cwd, args.projects)?;
    let line = args.line.join(" ");
    if line.trim().is_empty() {
        bail!("the line to classify is empty");
    }
    let mut req = ClassifyRequest::new(line, Some(cwd), args.mode.into());
    req.project_roots = project_roots;
    let ctx = Context::new(&config, &env).with_call_env(&config, std::env::vars());
    let result: ClassifyResult = classify::classify(&req, &ctx);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        let text = classify::render_text(&result);
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}

/// `--mode` of `efr-sandbox classify`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ModeArg {
    Manual,
    Cautious,
    Auto,
    Full,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Manual => Mode::Manual,
            ModeArg::Cautious => Mode::Cautious,
            ModeArg::Auto => Mode::Auto,
            ModeArg::Full => Mode::Full,
        }
    }
}
