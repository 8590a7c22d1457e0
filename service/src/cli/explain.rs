//! `efr-sandbox explain`.

use clap::Args;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::bail;
use efr_policy::config::{Config, Env};
use efr_policy::explain;

use crate::cli::dirs::cli_dirs_as_run;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Print the wire JSON (the result of sandbox.explain) instead of text.
    #[arg(long)]
    pub json: bool,
    /// The directory a relative PATH is read from (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// A project root of the turn (writable to a contained call); may be repeated.
    #[arg(long = "project", value_name = "DIR")]
    pub projects: Vec<PathBuf>,
    /// The path to explain: absolute, relative, or starting with `~`.
    pub path: OsString,
}

/// `efr-sandbox explain`: runs explain in this process (no service needed) and prints
/// policy's text, or the wire JSON with `--json`. The path is taken as bytes, so a name
/// that is not UTF-8 is explained as it is. A broken config file, or a `--cwd` or
/// `--project` that is not a directory, is an error.
pub fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    let config = efr_call::launch::with_surface_answers(&Config::load(&env)?, &env)
        .map_err(anyhow::Error::msg)?;
    let (cwd, projects) = cli_dirs_as_run(args.cwd, args.projects, &env.home)?;
    if args.path.is_empty() {
        bail!("the path to explain is empty");
    }
    let result =
        explain::explain_path(Path::new(&args.path), Some(&cwd), &projects, &config, &env)?;
    if args.json {
        outln!(
            "{}",
            crate::cli::term::json(
                crate::cli::term::Stream::Stdout,
                &serde_json::to_string_pretty(&result)?
            )
        );
    } else {
        let text = explain::render_text(&result);
        crate::cli::term::print_lines(&text);
        if !text.ends_with('\n') {
            outln!();
        }
    }
    Ok(())
}
