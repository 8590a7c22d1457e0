//! The command line: `explain`, `config`, `classify`, `serve`, `run`, `check`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::conn::Limits;
use crate::server::{self, MAX_CONNECTIONS, ServeOptions};

/// The efr sandbox: its RPC service and the user's commands.
#[derive(Debug, Parser)]
#[command(name = "efr-sandbox", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What a contained call gets at a path, and which rule says so.
    Explain(ExplainArgs),
    /// The effective config, and where each value comes from.
    Config(ConfigArgs),
    /// Classify a shell line: how it would run and every way it would leave the sandbox.
    Classify(ClassifyArgs),
    /// Run the RPC service on a Unix socket.
    Serve(ServeArgs),
    /// Run one shell line contained (or unsandboxed), with stdio passed through (on a
    /// terminal, a contained line gets a pty of its own relayed to it); the exit status is the line's (128+N for a signal, 125 when the sandbox could not
    /// start).
    Run(RunArgs),
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
    Check(crate::check::CheckArgs),
    /// The deletes contained calls made in real caches, held: `cache list`, and
    /// `cache apply PATH...` to apply approved ones.
    #[command(subcommand)]
    Cache(crate::cache_cmd::CacheCommand),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A project root (writable to the call); may be repeated. Default: the git top level
    /// of the working directory, else the working directory itself (never `/` or the
    /// home), said on stderr.
    #[arg(long = "project", value_name = "DIR")]
    pub projects: Vec<PathBuf>,
    /// The conversation (1 to 128 of A-Z a-z 0-9 . _ -): calls of the same ID share their
    /// `/tmp` and `$SCRATCH`, kept under `$XDG_RUNTIME_DIR/efr`. Default: a fresh `/tmp`
    /// and no `$SCRATCH`.
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// Where the line runs (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// A grant: write=PATH, unmask=PATH, device=PATH, socket=PATH, bus=session|system,
    /// desktop=wayland|x11|hyprland|sway|i3|niri, host=NAME[:PORT][:http], net_view, open_network.
    /// May be repeated.
    #[arg(long = "grant", value_name = "KIND[=VALUE]")]
    pub grants: Vec<String>,
    /// A variable for the call: NAME keeps this environment's value, NAME=VALUE sets it
    /// (either is refused when its name or value looks like a secret). May be repeated.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// native or bwrap (default: the config's sandbox.backend).
    #[arg(long, value_name = "BACKEND")]
    pub backend: Option<String>,
    /// Run outside the sandbox; the launcher still owns (and ends) the process tree.
    #[arg(long)]
    pub unsandboxed: bool,
    /// Write the call's sandbox_summary (JSON) to FILE.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Print the call's finish (`{sandbox_summary, exits, exit_status, ...}`, as
    /// sandbox.launch ends) as one JSON line: the last line on stderr, or to FILE. The
    /// line's stdout stays the line's (FILE is the sure way: the line shares stderr).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub json: Option<Option<PathBuf>>,
    /// Write the launcher plan to FILE and exit without running (benchmarks, debugging).
    #[arg(long, value_name = "FILE", hide = true)]
    pub plan_out: Option<PathBuf>,
    /// The shell line (several words are joined with spaces).
    #[arg(last = true, required = true, value_name = "LINE")]
    pub line: Vec<String>,
}

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
    pub mode: crate::classify::ModeArg,
    /// The shell line (after `--`; several words are joined with spaces).
    #[arg(required = true, last = true, value_name = "LINE")]
    pub line: Vec<String>,
}

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

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print the effective config as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The socket to listen on (default: $XDG_RUNTIME_DIR/efr/sandbox.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Tests only: the uids allowed to connect, instead of the service's own uid. May be
    /// repeated. Lets a test be "a peer of another uid" without privileges.
    #[arg(long = "allow-uid", value_name = "UID", hide = true)]
    pub allow_uids: Vec<u32>,
    /// Tests only: also answer debug.sleep, debug.panic and debug.stream.
    #[arg(long, hide = true)]
    pub test_methods: bool,
    /// Tests only: how long a client may leave its answers unread (default 10000).
    #[arg(long, value_name = "MS", hide = true)]
    pub slow_reader_ms: Option<u64>,
    /// Tests only: connections served at once (default 64).
    #[arg(long, value_name = "N", hide = true)]
    pub max_connections: Option<usize>,
}

/// Runs the command line; the exit status.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Explain(a) => crate::policy::explain_cli(a).map(|()| 0),
        Command::Config(a) => crate::policy::config_cli(a).map(|()| 0),
        Command::Run(a) => crate::run::run(a),
        Command::Proxy { args } => match efr_proxy::run_standalone(args) {
            Ok(()) => Ok(0),
            Err(e) => {
                eprintln!("efr-sandbox proxy: {e}");
                Ok(2)
            }
        },
        Command::Check(a) => crate::check::check_cli(a),
        Command::Cache(c) => crate::cache_cmd::cache_cli(c),
        Command::Classify(a) => crate::classify::classify_cli(a).map(|()| 0),
        Command::Serve(a) => {
            let mut limits = Limits::default();
            if let Some(ms) = a.slow_reader_ms {
                limits.slow_reader = Duration::from_millis(ms.max(1));
            }
            server::run(ServeOptions {
                socket: a.socket,
                allow_uids: a.allow_uids,
                test_methods: a.test_methods,
                limits,
                max_connections: a.max_connections.unwrap_or(MAX_CONNECTIONS),
            })
            .map(|()| 0)
        }
    }
}
