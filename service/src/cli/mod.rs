//! The command line: the arguments of every command and [`run()`], which runs one; one file
//! per command (`serve` is [`crate::rpc::server::run`]). A command imports this module,
//! [`crate::state`]'s shared parts, `dirs` and `term` (what it prints of a call's) and the
//! crates below; never another command or a handler.

use clap::{Parser, Subcommand};

pub mod cache;
pub mod check;
pub mod classify;
pub mod config;
pub mod dirs;
pub mod explain;
pub mod grants;
pub mod jobs;
pub mod log;
pub mod manual;
pub mod run;
pub mod serve;
pub mod surface;
pub mod term;

/// The efr sandbox: its RPC service and the user's commands.
#[derive(Debug, Parser)]
#[command(name = "efr-sandbox", version, about)]
pub struct Cli {
    /// Print what a call controls (a job's output, command lines, paths) as it is, also on
    /// a terminal: by default, on a terminal it goes through the filter of the call's own
    /// terminal (no clipboard writes, no title reports, no cursor moves inside a line).
    #[arg(long, global = true)]
    pub raw: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What a contained call gets at a path, and which rule says so.
    Explain(explain::ExplainArgs),
    /// The effective config, and where each value comes from.
    Config(config::ConfigArgs),
    /// Classify a shell line: how it would run and every way it would leave the sandbox.
    Classify(classify::ClassifyArgs),
    /// Run the RPC service on a Unix socket.
    Serve(serve::ServeArgs),
    /// Run one shell line contained (or unsandboxed), with stdio passed through (on a
    /// terminal, a contained line gets a pty of its own relayed to it); the exit status is
    /// the line's (128+N for a signal, 125 when the sandbox could not start). With no
    /// terminal on stdio, a contained call goes to your running service (started when none
    /// runs; EFR_SANDBOX_NO_SERVICE=1 keeps it here).
    Run(Box<run::RunArgs>),
    /// Run bash's command line in a contained call: `shell [BASH OPTIONS] [-c LINE [NAME
    /// [ARG...]]]`, read as bash reads it (without -c: a script file, or the script on
    /// stdin); the status and output are the line's. Also installed as `efr-bash`. Settings
    /// from the environment: EFR_SANDBOX_PROJECT (roots joined by `:`),
    /// EFR_SANDBOX_CONVERSATION (default: the calling process's), EFR_SANDBOX_GRANTS
    /// (`KIND=VALUE` separated by blanks).
    #[command(disable_help_flag = true)]
    Shell {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// A standalone egress proxy for a listener path and a grant list (debugging,
    /// benchmarks): `efr-sandbox proxy --listen PATH --grant host=NAME[:PORT][:http]...`;
    /// `efr-sandbox proxy --help` lists the options.
    #[command(disable_help_flag = true)]
    Proxy {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run the sandbox's self-tests now, from inside real contained calls: one line per
    /// test and a verdict; exit status 0 only when every required test passes.
    Check(check::CheckArgs),
    /// The deletes contained calls made in real caches, held: `cache list`, and
    /// `cache apply PATH...` to apply approved ones.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// What a contained call could read that looks like a secret, with a question id each:
    /// `surface [--project DIR] [--json]`, and `surface respond QID --keep|--mask`.
    Surface(surface::SurfaceArgs),
    /// The background jobs of your service: `jobs [--json]`, `jobs stop ID`, `jobs logs ID
    /// [--follow]` (start one with `run --background --max-minutes N -- LINE`).
    Jobs(jobs::JobsArgs),
    /// The refused calls of `run` and `shell`/`efr-bash` waiting for you: id, age,
    /// conversation, line, what each needs and why. `approve ID` gives the call's grants to
    /// its conversation (its retry then works), `deny ID` drops it. Only you can: no
    /// contained call reaches the service.
    Approvals(run::approvals::ApprovalsArgs),
    /// Approve a refused call: its grants go to the later calls of its conversation
    /// (`--always`: also saved as always rules in your config).
    Approve(run::approvals::ApproveArgs),
    /// Drop a refused call's approval.
    Deny(run::approvals::DenyArgs),
    /// A coding agent's route through the sandbox: `hook claude|codex|gemini` is the
    /// agent's pre-tool hook (its JSON on stdin, its answer on stdout; exit 2 blocks);
    /// `hook install AGENT [--yes]` writes the agent's config for it (claude, codex, gemini,
    /// opencode), printing the diff; `hook check AGENT` says whether its shell calls will
    /// really be contained.
    Hook(run::hook::HookArgs),
    /// The call log: the latest calls (id, time, status, duration, project, line), `log ID`
    /// one call whole, `--json` one JSON object per call. Every finished call is in it (of
    /// `run`, `shell`, the service and efrd), never its output or a secret.
    Log(log::LogArgs),
    /// The shell completion script, on stdout: `efr-sandbox completions bash >
    /// ~/.local/share/bash-completion/completions/efr-sandbox` (zsh: a file `_efr-sandbox`
    /// in a dir of $fpath; fish: ~/.config/fish/completions/efr-sandbox.fish).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual page (roff), on stdout: `efr-sandbox man | man -l -`; `man COMMAND` is the
    /// page of one command with its options (`efr-sandbox man run | man -l -`).
    Man {
        #[arg(value_name = "COMMAND")]
        command: Option<String>,
    },
}

/// The commands whose line goes after `--` (and nothing else is a word of theirs).
const LINE_AFTER_DASHES: &[&str] = &["run", "classify"];

/// This process's command line; clap's error (and exit) for a bad one, with the tip that a
/// line goes after `--` when a word of it came before (`run ls`).
pub fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|e| with_line_tip(e, std::env::args().skip(1)).exit())
}

/// `e` with the tip that the line goes after `--` when `e` is an unexpected word of a
/// command of [`LINE_AFTER_DASHES`] in `args` (the command line, without the program).
fn with_line_tip(mut e: clap::Error, args: impl Iterator<Item = String>) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let Some(ContextValue::String(word)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let word = word.clone();
    let args: Vec<String> = args.collect();
    let command = args.iter().find(|a| !a.starts_with('-'));
    let Some(command) = command.filter(|c| LINE_AFTER_DASHES.contains(&c.as_str())) else {
        return e;
    };
    if word.starts_with('-') {
        return e;
    }
    // The words from the first unexpected one on, as they would follow `--`.
    let from = args.iter().position(|a| *a == word).unwrap_or(args.len());
    let line = args[from..].join(" ");
    let tip = format!("the line goes after `--`: 'efr-sandbox {command} [OPTIONS] -- {line}'");
    e.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    e
}

/// Runs the command line; the exit status.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    term::set_raw(cli.raw);
    match cli.command {
        Command::Explain(a) => explain::run(a).map(|()| 0),
        Command::Config(a) => config::run(a).map(|()| 0),
        Command::Run(a) => run::run(*a),
        Command::Shell { args } => run::shell::run("efr-sandbox shell", args),
        Command::Proxy { args } => match efr_proxy::run_standalone(args) {
            Ok(()) => Ok(0),
            Err(e) => {
                eprintln!("efr-sandbox proxy: {e}");
                Ok(2)
            }
        },
        Command::Check(a) => check::run(a),
        Command::Cache(c) => cache::cache_cli(c),
        Command::Classify(a) => classify::classify_cli(a).map(|()| 0),
        Command::Serve(a) => serve::run(a),
        Command::Surface(a) => surface::run(a),
        Command::Jobs(a) => jobs::run(a),
        Command::Approvals(a) => Ok(run::approvals::list(a)),
        Command::Approve(a) => Ok(run::approvals::approve(a)),
        Command::Deny(a) => Ok(run::approvals::deny(a)),
        Command::Hook(a) => run::hook::run(a),
        Command::Log(a) => log::run(a),
        Command::Completions { shell } => manual::completions(shell).map(|()| 0),
        Command::Man { command } => manual::man(command.as_deref()).map(|()| 0),
    }
}
