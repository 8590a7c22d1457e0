//! `efr-sandbox surface`: what a contained call could read that looks like a secret, with
//! the question ids to answer, and `efr-sandbox surface respond QID --keep|--mask`. Runs
//! in this process (no service needed), as the conversation [`CLI_CONVERSATION`].

use std::path::PathBuf;

use clap::{Args, Subcommand};
use efr_policy::config::{Config, Env};
use efr_sandbox_wire::{QuestionId, SurfaceChangeKind};
use efr_surface::run::SurfaceRespondError;
use efr_surface::state::Store;

use crate::cli::dirs::cli_dirs;
use crate::cli::term::{Stream, inline, json};

/// The conversation of the command line's questions: their ids and changes are its own,
/// apart from any conversation of efr (the answers are the same for all).
pub const CLI_CONVERSATION: &str = "cli";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SurfaceArgs {
    #[command(subcommand)]
    pub command: Option<SurfaceCommand>,
    /// A project root to scan besides the home; may be repeated.
    #[arg(long = "project", value_name = "DIR")]
    pub projects: Vec<PathBuf>,
    /// Print the wire JSON (the result of sandbox.surface) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SurfaceCommand {
    /// Answer a question of `efr-sandbox surface`: --keep leaves the file visible (no
    /// more questions while what it holds stays the same), --mask hides it from every
    /// contained call from now on.
    Respond(RespondArgs),
}

#[derive(Debug, Args)]
pub struct RespondArgs {
    /// The question id (q1, q2, ...) that `efr-sandbox surface` printed.
    #[arg(value_parser = parse_qid)]
    pub question_id: QuestionId,
    /// Leave the file visible.
    #[arg(long, conflicts_with = "mask", required_unless_present = "mask")]
    pub keep: bool,
    /// Mask the file in contained calls.
    #[arg(long)]
    pub mask: bool,
}

fn parse_qid(s: &str) -> Result<QuestionId, String> {
    QuestionId::new(s).map_err(|e| e.to_string())
}

/// `efr-sandbox surface`; exit status 1 when an answer names no open question.
pub fn run(args: SurfaceArgs) -> anyhow::Result<i32> {
    let env = Env::from_process();
    let store = Store::for_home(&env.home);
    if let Some(SurfaceCommand::Respond(r)) = args.command {
        return match efr_surface::run::surface_respond(
            &store,
            CLI_CONVERSATION,
            &r.question_id,
            r.keep,
        ) {
            Ok(a) => {
                let what = if a.masked {
                    "masked in contained calls from now on"
                } else {
                    "kept visible; not asked again while what it holds stays the same"
                };
                outln!("{}: {what}", inline(Stream::Stdout, &a.path));
                Ok(0)
            }
            Err(e @ SurfaceRespondError::NotFound(_)) => {
                eprintln!("efr-sandbox: {e} (run efr-sandbox surface first)");
                Ok(1)
            }
            Err(e) => Err(e.into()),
        };
    }
    let config = Config::load(&env)?;
    let (_, projects) = cli_dirs(None, args.projects)?;
    let projects: Vec<String> = projects.iter().map(|p| p.display().to_string()).collect();
    let r = efr_surface::run::surface(
        &config,
        &env,
        &store,
        CLI_CONVERSATION,
        &projects,
        &efr_surface::Budget::default(),
    )?;
    if args.json {
        outln!(
            "{}",
            json(Stream::Stdout, &serde_json::to_string_pretty(&r)?)
        );
        return Ok(0);
    }
    if r.files.is_empty() {
        outln!("nothing that looks like a secret is readable in a contained call");
    }
    for f in &r.files {
        outln!(
            "{}: {}",
            inline(Stream::Stdout, &f.path),
            inline(Stream::Stdout, &f.what)
        );
        match &f.question_id {
            Some(q) => outln!(
                "  {q}: efr-sandbox surface respond {q} --keep|--mask",
                q = q.as_str()
            ),
            None if f.kept => outln!("  kept visible (your answer)"),
            None => {}
        }
    }
    for c in &r.changes {
        let kind = match c.change {
            SurfaceChangeKind::Appeared => "appeared",
            SurfaceChangeKind::Disappeared => "disappeared",
            SurfaceChangeKind::Changed => "changed",
        };
        outln!(
            "since the last scan: {} {kind}: {}",
            inline(Stream::Stdout, &c.path),
            inline(Stream::Stdout, &c.why)
        );
    }
    if let Some(p) = &r.partial {
        outln!(
            "partial: the scan stopped at {} ({} bound); what is listed is what it saw",
            inline(Stream::Stdout, &p.at),
            p.why
        );
    }
    let masks = store.read()?.masks();
    if !masks.is_empty() {
        outln!(
            "masked by your answers: {}",
            inline(Stream::Stdout, &masks.join(", "))
        );
    }
    Ok(0)
}
