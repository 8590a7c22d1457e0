//! `efr-sandbox classify`: the classifier of efr-policy on the command line.

use anyhow::bail;
use clap::Args;
use efr_policy::classify::{self, ClassifyRequest, ClassifyResult};
use efr_policy::config::{Config, Env};
use efr_policy::context::Context;
use efr_sandbox_wire::Mode;
use std::path::PathBuf;

use crate::cli::dirs::cli_dirs_as_run;

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// Print the wire JSON (`{launch, exits}`, the result of sandbox.classify) instead of text.
    #[arg(long)]
    pub json: bool,
    /// The directory the line runs in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// A project root of the turn (writable to a contained call); may be repeated.
    #[arg(long = "project", value_name = "DIR")]
    pub projects: Vec<PathBuf>,
    /// The permission mode of the turn.
    #[arg(long, value_enum, default_value = "auto")]
    pub mode: ModeArg,
    /// The shell line (after `--`; several words are joined with spaces).
    #[arg(required = true, last = true, value_name = "LINE")]
    pub line: Vec<String>,
}

/// `efr-sandbox classify`: classifies a line in this process and prints the launch and
/// each exit in plain words, or the wire JSON with `--json`.
pub fn classify_cli(args: ClassifyArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    let config = efr_call::launch::with_surface_answers(&Config::load(&env)?, &env)
        .map_err(anyhow::Error::msg)?;
    let (cwd, project_roots) = cli_dirs_as_run(args.cwd, args.projects, &env.home)?;
    let line = args.line.join(" ");
    if line.trim().is_empty() {
        bail!("the line to classify is empty");
    }
    let mut req = ClassifyRequest::new(line, Some(cwd), args.mode.into());
    req.project_roots = project_roots;
    let ctx = Context::new(&config, &env).with_call_env(&config, std::env::vars());
    let result: ClassifyResult = classify::classify(&req, &ctx);
    if args.json {
        outln!(
            "{}",
            crate::cli::term::json(
                crate::cli::term::Stream::Stdout,
                &serde_json::to_string_pretty(&result)?
            )
        );
    } else {
        let text = classify::render_text(&result);
        crate::cli::term::print_lines(&text);
        if !text.ends_with('\n') {
            outln!();
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
