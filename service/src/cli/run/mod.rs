//! `efr-sandbox run [--project DIR]... [--cwd DIR] [--conversation ID] [--grant
//! KIND=VALUE]... [--backend native|bwrap] [--env NAME[=VALUE]]... [--unsandboxed]
//! [--summary FILE] [--json [FILE]] [--shell SHELL] -- LINE`: one line through the launcher,
//! with this stdio passed through (on a terminal, a contained line gets a pty of its own,
//! which the launcher relays to it: see `efr_launcher::pty`). The exit status is the line's (128+N for a
//! signal), 125 when the sandbox could not start, 2 for a bad command line or config.
//!
//! `shell` (`efr-sandbox shell`, `efr-bash`) is this command with bash's own command line;
//! `contained` tells both whether they already run inside a call; `approvals` is the user's
//! answer to their refusals (`efr-sandbox approvals`, `approve`, `deny`).

pub mod approvals;
pub mod contained;
pub mod hook;
pub mod shell;

use clap::Args;
use std::path::{Path, PathBuf};

use efr_policy::config::{Config, Env};
use efr_sandbox_wire::grant_text::GrantParseError;
use efr_sandbox_wire::{ExitRecord, Finish, Grant, LaunchItem, Needs, Verdict};

use crate::handoff::{self, NotTaken, Ran};
use efr_call::launch::CallParams;
use efr_call::{Ctx, LauncherEnd, PrepareError, ProxyWhen, setup_error_finish};

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
    #[arg(long = "grant", value_name = "KIND[=VALUE]", help = grant_help())]
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
    /// Run the line as a background job of your service, which owns it: prints its id
    /// (`efr-sandbox jobs` lists it, `jobs logs ID` shows its output, `jobs stop ID` ends
    /// it); needs --max-minutes.
    #[arg(long)]
    pub background: bool,
    /// The job ends this many minutes after it started (fractions taken), its whole tree
    /// with it.
    #[arg(long, value_name = "N", requires = "background")]
    pub max_minutes: Option<f64>,
    /// A pattern matched against each line of the job's output (`sandbox.job_events`).
    #[arg(long, value_name = "REGEX", requires = "background")]
    pub watch: Option<String>,
    /// Say less on stderr: not the project taken by default, nor the variables of the
    /// environment not passed to the call (its summary still lists them, `env_dropped`).
    #[arg(long, short)]
    pub quiet: bool,
    /// The shell that runs the line: bash, sh, or an absolute path (default: the config's
    /// sandbox.shell, bash).
    #[arg(long, value_name = "SHELL")]
    pub shell: Option<String>,
    /// The shell line: one word is the line as it is; several words are a command and its
    /// arguments, each passed as given (shell-quoted when joined).
    #[arg(last = true, required = true, value_name = "LINE")]
    pub line: Vec<String>,
    /// Who reads the refusals: the user who typed `run`, or the model behind an agent's
    /// shell (`efr-sandbox shell`), which must not grant itself.
    #[arg(skip)]
    pub route: Route,
}

/// Who reads a call's refusal lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Route {
    /// `efr-sandbox run`, typed by a user: the `--grant`s to retry with.
    #[default]
    Run,
    /// An agent's shell (`efr-sandbox shell`, `efr-bash`): its model reads them, and only
    /// the user may approve.
    Shell,
}

impl RunArgs {
    /// The arguments of a plain contained call of `line` (what `efr-sandbox shell` takes).
    pub fn plain(line: Vec<String>) -> RunArgs {
        RunArgs {
            projects: Vec::new(),
            conversation: None,
            cwd: None,
            grants: Vec::new(),
            env: Vec::new(),
            backend: None,
            unsandboxed: false,
            summary: None,
            json: None,
            plan_out: None,
            background: false,
            max_minutes: None,
            watch: None,
            shell: None,
            quiet: false,
            line,
            route: Route::Shell,
        }
    }
}

/// The line of `run -- WORD...`: one word is a line as it is (`run -- 'echo $HOME'`);
/// several are a command and its arguments, each quoted for the shell as needed so that the
/// shell reads back exactly these words (`run -- touch "my file.txt"` touches one file).
pub fn line_of_words(words: &[String]) -> Result<String, String> {
    match words {
        [one] => Ok(one.clone()),
        _ => shlex::try_join(words.iter().map(String::as_str))
            .map_err(|e| format!("the command's words cannot be quoted: {e}")),
    }
}

/// `run --help`'s text of `--grant`: the kinds of wire's grant table.
fn grant_help() -> String {
    format!(
        "A grant: {}. May be repeated",
        efr_sandbox_wire::grant_text::kinds_text()
    )
}

/// `p` made absolute against `here`, `.` and `..` taken lexically (as the shell's `cd`).
fn normal(p: &Path, here: &Path) -> String {
    let mut out = PathBuf::from("/");
    for c in here.join(p).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out.to_string_lossy().into_owned()
}

fn abs(p: &str, here: &Path) -> String {
    if p == "~" || p.starts_with("~/") {
        p.to_string()
    } else {
        normal(Path::new(p), here)
    }
}

/// Reads one `--grant KIND[=VALUE]`: wire's text form, then a relative path made absolute
/// against `here` and a host name normalised by the proxy (which refuses one that can never
/// match).
pub fn parse_grant(s: &str, here: &Path) -> Result<Grant, String> {
    let g: Grant = s.parse().map_err(|e: GrantParseError| e.to_string())?;
    Ok(match g {
        Grant::Write { path } => Grant::Write {
            path: abs(&path, here),
        },
        Grant::Unmask { path } => Grant::Unmask {
            path: abs(&path, here),
        },
        Grant::Device { path } => Grant::Device {
            path: abs(&path, here),
        },
        Grant::Socket { path } => Grant::Socket {
            path: abs(&path, here),
        },
        Grant::Host {
            host,
            port,
            plain_http,
            tcp: false,
        } => {
            let r = efr_proxy::HostRule::new(&host, port, plain_http).ok_or_else(|| {
                GrantParseError::Host(s.strip_prefix("host=").unwrap_or(s).to_string()).to_string()
            })?;
            Grant::Host {
                host: r.pattern,
                port: r.port,
                plain_http: r.plain_http,
                tcp: false,
            }
        }
        // Nothing to resolve: a tcp host grant's host is the loopback (checked by the
        // parser), the rest hold no path or name.
        g @ (Grant::Host { tcp: true, .. }
        | Grant::Bus { .. }
        | Grant::BusFilter { .. }
        | Grant::Desktop { .. }
        | Grant::NetView
        | Grant::OpenNetwork
        | Grant::Credential { .. }
        | Grant::Unknown) => g,
    })
}

/// `g`, or what to do first when it is a write grant of a path that does not exist (the
/// launcher refuses to start a call with one: a write grant names what exists).
fn missing_write(g: Grant, env: &Env) -> Result<Grant, String> {
    if let Grant::Write { path } = &g {
        let real = efr_policy::path::expand_home(path, &env.home);
        if let Err(e) = std::fs::symlink_metadata(&real) {
            return Err(match e.kind() {
                std::io::ErrorKind::NotFound => format!(
                    "{} does not exist; create it first (a directory: `mkdir -p {w}`, a \
                     file: `touch {w}`), then retry: a write grant names a path that exists",
                    real.display(),
                    w = shell_word(&real.to_string_lossy())
                ),
                _ => format!("{}: {e}", real.display()),
            });
        }
    }
    Ok(g)
}

/// `arg` as one shell word: as is when it holds only plain characters, else in single
/// quotes.
fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,~".contains(&b));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

pub use crate::cli::grants::grant_arg;

/// The line `run` prints at its end for one exit record: what was refused, then the exact
/// `--grant`s to retry with (on `run`'s route), or why no grant opens it; and when the
/// service keeps the call as the pending approval `approval`, how the user approves it.
/// On the shell route the model reads it: no `--grant`, only what it needs and that the
/// user can approve it.
pub fn refusal_line(r: &ExitRecord, approval: Option<&str>, route: Route) -> String {
    // A reason's lines after its first are a config hint, which `report` prints once for
    // the whole call, as lines to paste.
    let why = r
        .judgement
        .reasons
        .first()
        .and_then(|w| w.lines().next())
        .unwrap_or_default()
        .to_string();
    let args: Option<Vec<String>> = match &r.needs {
        Needs::Contained { grants } if !grants.is_empty() => grants
            .iter()
            .map(|g| grant_arg(g).map(|a| shell_word(&a)))
            .collect(),
        _ => None,
    };
    let approve = approval.map(|id| {
        format!("ask the user to run 'efr-sandbox approve {id}' (then retry the same command)")
    });
    if route == Route::Shell
        && let Some(a) = &args
    {
        let then = approve.unwrap_or_else(|| {
            "the user can approve it only through their service, and none was reached \
             (approvals need XDG_RUNTIME_DIR)"
                .into()
        });
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(": {why}")
        };
        return format!("refused: {}{why}: needs {}; {then}", r.summary, a.join(" "));
    }
    let grants: Option<Vec<String>> =
        args.map(|a| a.iter().map(|w| format!("--grant {w}")).collect());
    let approve = approve.map(|a| format!("; or {a}")).unwrap_or_default();
    // A write grant names a path that exists (the launcher refuses to start otherwise).
    let missing: Vec<&str> = match &r.needs {
        Needs::Contained { grants } => grants
            .iter()
            .filter_map(|g| match g {
                Grant::Write { path } if std::fs::symlink_metadata(path).is_err() => {
                    Some(path.as_str())
                }
                // Only a write grant must name a path that exists before the launch.
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let first = if missing.is_empty() {
        String::new()
    } else {
        format!(
            " (create {} first: a write grant names a path that exists)",
            missing.join(", ")
        )
    };
    match grants {
        Some(g) if r.judgement.verdict == Verdict::UserOnly => format!(
            "refused: {}: {why}; retry with {}{first}{approve}",
            r.summary,
            g.join(" ")
        ),
        Some(g) => format!(
            "refused: {}; retry with {}{first}{approve}",
            r.summary,
            g.join(" ")
        ),
        None if why.is_empty() => format!("refused: {}", r.summary),
        None => format!("refused: {}: {why}", r.summary),
    }
}

/// The config hints of the call's refusals, merged (one table header, one line per entry)
/// and printed as lines to paste into the user's config file.
fn config_hints(fin: &efr_sandbox_wire::Finish) {
    use crate::cli::term::{Stream, inline};
    let text = hint_text(&fin.exits);
    if text.is_empty() {
        return;
    }
    let file = efr_policy::config::Env::from_process().config_file();
    crate::cli::term::say(&format!(
        "to allow on purpose what the refusals above name, add these lines to {} (a table \
         it already has takes the entries under its own header):",
        file.display()
    ));
    for l in text.lines() {
        eprintln!("{}", inline(Stream::Stderr, l));
    }
}

/// The config hints the reasons of `exits` carry, merged: the text to paste (empty for
/// none).
fn hint_text(exits: &[ExitRecord]) -> String {
    let reasons = exits
        .iter()
        .flat_map(|r| r.judgement.reasons.iter().map(String::as_str));
    efr_policy::config::ConfigHint::gather(reasons)
        .iter()
        .map(efr_policy::config::ConfigHint::render)
        .collect()
}

fn usage_error(m: impl std::fmt::Display) -> i32 {
    eprintln!("efr-sandbox: error: {m}");
    2
}

/// `run --background`: the call goes to the user's service as a job; its id on stdout.
/// Exit status 0 when the job runs, 125 when its sandbox did not start, 2 when the service
/// refused it or could not be had.
fn background(p: CallParams) -> i32 {
    let Some(socket) = crate::handoff::socket() else {
        return usage_error(
            "--background needs your service: set XDG_RUNTIME_DIR (or EFR_SANDBOX_SOCKET)",
        );
    };
    let mut s = match crate::handoff::Session::open(&socket) {
        Ok(s) => s,
        Err(e) => return usage_error(format!("cannot reach the service: {e}")),
    };
    let asked = serde_json::to_value(&p).unwrap_or_default();
    if let Err(e) = s.request(efr_sandbox_wire::rpc::method::LAUNCH, asked) {
        return usage_error(e);
    }
    let mut end = None;
    loop {
        match s.next(&mut end) {
            Ok(Some(item)) => {
                if let Ok(LaunchItem::Exit { record }) = serde_json::from_value(item) {
                    crate::cli::term::say(&format!("refused: {}", record.summary));
                }
            }
            Ok(None) => break,
            Err(e) => return usage_error(e),
        }
    }
    let end = end.unwrap_or_default();
    match serde_json::from_value::<efr_sandbox_wire::job::JobHandedOff>(end.clone()) {
        Ok(h) => {
            outln!("{}", h.job_id);
            0
        }
        Err(_) => {
            let why = serde_json::from_value::<Finish>(end)
                .ok()
                .and_then(|f| f.sandbox_summary.setup_error)
                .unwrap_or_else(|| "the service's answer does not read".into());
            crate::cli::term::say(&format!("the job did not start: {why}"));
            125
        }
    }
}

/// The words `run` prints when it runs inside a contained call (exit status 125): a
/// nested sandbox could not set itself up there, and the call is contained already.
pub const ALREADY_CONTAINED: &str = "already contained: this runs inside a contained call \
     (EFR_SANDBOX_CONTAINED is set), whose sandbox applies to everything it starts; run the \
     line directly, or ask the user to run `efr-sandbox run` outside the call for other grants";

/// Runs `efr-sandbox run`.
pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    if contained::inside_call() {
        eprintln!("efr-sandbox: {ALREADY_CONTAINED}");
        return Ok(efr_launcher::run::SETUP_ERROR_EXIT);
    }
    let line = match line_of_words(&a.line) {
        Ok(l) => l,
        Err(e) => return Ok(usage_error(e)),
    };
    let here = std::env::current_dir()?;
    let (p, env, runtime) = match call_params(&a, &here, line, true) {
        Ok(x) => x,
        Err(code) => return Ok(code),
    };
    launch(a, p, env, runtime)
}

/// The call of `a` running `line`, with the environment and the conversations' runtime dir
/// it needs; the exit status of a bad command line as the error. `say_project` prints the
/// project taken by default and why (`run` does; `shell` keeps stderr the line's).
pub fn call_params(
    a: &RunArgs,
    here: &Path,
    line: String,
    say_project: bool,
) -> Result<(CallParams, Env, Option<PathBuf>), i32> {
    let env = Env::from_process();
    let mut grants = Vec::new();
    for g in &a.grants {
        match parse_grant(g, here).and_then(|p| missing_write(p, &env)) {
            Ok(g) => grants.push(g),
            Err(e) => return Err(usage_error(format!("--grant {g}: {e}"))),
        }
    }
    let cwd = a
        .cwd
        .as_ref()
        .map(|c| normal(c, here))
        .unwrap_or_else(|| normal(Path::new("."), here));
    let mut env = env;
    let runtime = match &a.conversation {
        None => None,
        Some(id) => match conversation_runtime(id, &env) {
            Ok(rt) => {
                env.scratch = Some(rt.join("scratch"));
                Some(rt)
            }
            Err(e) => return Err(usage_error(format!("--conversation {id:?}: {e}"))),
        },
    };
    let mut projects: Vec<String> = a.projects.iter().map(|p| normal(p, here)).collect();
    if projects.is_empty() {
        let home = normal(&env.home, here);
        match default_project(Path::new(&cwd), Path::new(&home)) {
            Ok((dir, why)) => {
                if say_project && !a.quiet {
                    eprintln!("efr-sandbox: project: {} ({why})", dir.display());
                }
                projects.push(dir.to_string_lossy().into_owned());
            }
            Err(why) => eprintln!("efr-sandbox: project: none ({why}); pass --project DIR"),
        }
    }
    let p = CallParams {
        line,
        cwd: Some(cwd),
        projects,
        grants,
        backend: a.backend.clone(),
        unsandboxed: a.unsandboxed,
        conversation: a.conversation.clone(),
        background: None,
        shell: a.shell.clone(),
        shell_args: Vec::new(),
    };
    Ok((p, env, runtime))
}

/// Runs the call `p` of `a` (in the background, through the service, or here) and reports
/// its end as `run` does; the exit status.
pub fn launch(
    a: RunArgs,
    p: CallParams,
    env: Env,
    runtime: Option<PathBuf>,
) -> anyhow::Result<i32> {
    if a.background {
        let Some(max_minutes) = a.max_minutes else {
            return Ok(usage_error("--background needs --max-minutes N"));
        };
        if a.unsandboxed {
            return Ok(usage_error(
                "--background runs in the sandbox only: drop --unsandboxed",
            ));
        }
        let mut p = p;
        p.background = Some(efr_sandbox_wire::job::Background {
            max_minutes,
            watch: a.watch.clone(),
            max_wakes: None,
        });
        return Ok(background(p));
    }
    let forwarded = efr_launcher::signals::forwarded_signals();
    // With no terminal on its stdio, the call goes to the user's running service (started
    // when none runs), whose launcher waits in standby: see `crate::handoff`.
    if let Some(socket) = handoff_socket(&a) {
        efr_call::sys::forward_signals(&forwarded)?;
        efr_call::sys::forward_kernel_signals(true);
        let ran = handoff::run(&socket, p.clone(), &a.env, &env, a.quiet);
        efr_call::sys::stop_forwarding(&forwarded);
        efr_call::sys::forward_kernel_signals(false);
        match ran {
            Ok(Ran::Finished(fin)) => return report(&a, &fin),
            Ok(Ran::Invalid(m)) => return Ok(usage_error(m)),
            Ok(Ran::Lost(m)) => {
                eprintln!("efr-sandbox: {m}");
                return Ok(efr_launcher::run::SETUP_ERROR_EXIT);
            }
            // A service that could not be had: said, and the call runs here.
            Err(NotTaken::Failed(why)) => {
                eprintln!("efr-sandbox: not through the service: {why}; the call runs here");
            }
            Err(NotTaken::Elsewhere) => {}
        }
    }
    // Run here, the call still gets its conversation's approved grants, and its refusals
    // still wait as approvals, when a service runs (none is started for it).
    let mut p = p;
    if a.plan_out.is_none() && !a.unsandboxed {
        p.grants.extend(approved_grants(&p));
    }
    let config = match Config::load(&env) {
        Ok(c) => c,
        Err(e) => return Ok(usage_error(e)),
    };
    // The call's proxy, served by a small runtime of its own while the line runs; its
    // socket and the bus filters' below `$XDG_RUNTIME_DIR/efr`.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let sockets = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("efr"))
        .filter(|d| efr_call::launch::private_dir(d).is_ok());
    let config = std::sync::Arc::new(config);
    let ctx = Ctx {
        config: config.clone(),
        env: env.clone(),
        conversations: runtime,
        sockets,
        handle: rt.handle().clone(),
        standby: None,
    };
    let call = match efr_call::Call::prepare(&p, &ctx) {
        Err(PrepareError::Params(e)) => return Ok(usage_error(e.message)),
        Err(setup) => Err(setup.to_string()),
        Ok(c) => Ok(c),
    };
    // `--env`, and what of the environment is not passed because it looks like a secret.
    let mut env_dropped = Vec::new();
    let call = match call {
        Ok(mut c) => match c.env_args(&a.env) {
            Ok(refused) => {
                env_dropped = c.note_env_dropped(refused);
                Ok(c)
            }
            Err(e) => return Ok(usage_error(format!("--env {e}"))),
        },
        other => other,
    };
    if !a.quiet {
        for (name, why) in &env_dropped {
            handoff::say_env_dropped(name, why);
        }
    }
    // The call's proxy and bus filters (`bus_filter` grants), ended with the call.
    let call = match call {
        Ok(mut c) if a.plan_out.is_none() => {
            let pol = c.proxy_policy(ProxyWhen::Wanted);
            c.attach(pol, &ctx).map(|()| c).map_err(|e| e.to_string())
        }
        other => other,
    };
    if let Some(f) = &a.plan_out {
        match &call {
            Ok(c) => std::fs::write(f, serde_json::to_vec_pretty(c.plan())?)?,
            Err(e) => return Ok(usage_error(format!("no plan: {e}"))),
        }
        return Ok(0);
    }
    // This process waits for the launcher's verdict. The signals of
    // `efr_launcher::signals::FORWARDED_SIGNALS` sent to it (a harness's timeout,
    // `Popen.terminate()`, a signal to its group) go to the launcher, which hands them to
    // the line: the call ends with the line's status. Whatever else ends this process
    // (SIGKILL), the launcher sees it and kills the call.
    efr_call::sys::forward_signals(&forwarded)?;
    // A contained call with no terminal on stdio: the launcher in a process group of its
    // own, so that a signal sent to this process's group reaches the line once (through
    // this process and the launcher), and the kernel's (a ^C with stdio redirected) are
    // handed on too. With a terminal, the launcher must be in the terminal's foreground
    // group to relay it; an unsandboxed line must stay there for `/dev/tty` (sudo's
    // prompt).
    let own_group = call
        .as_ref()
        .is_ok_and(|c| c.plan().mode == efr_launcher::plan::PlanMode::Contained)
        && !{
            use std::io::IsTerminal;
            std::io::stdin().is_terminal()
                || std::io::stdout().is_terminal()
                || std::io::stderr().is_terminal()
        };
    efr_call::sys::forward_kernel_signals(own_group);
    let mut fin = match call {
        Err(setup) => {
            efr_call::sys::stop_forwarding(&forwarded);
            let mut fin = setup_error_finish(setup);
            fin.sandbox_summary.env_dropped = env_dropped.into_iter().map(|(n, _)| n).collect();
            efr_call::history::append_unprepared(&p, &fin, &config, &env);
            fin
        }
        Ok(c) => {
            let (outcome, end) = match c.run_inherited(own_group) {
                Ok((o, st)) => (o, LauncherEnd::Waited(Ok(st))),
                Err(e) => (
                    efr_launcher::status::Outcome {
                        setup_error: Some(format!("cannot start efr-launch: {}", e.source)),
                        ..Default::default()
                    },
                    LauncherEnd::Unknown,
                ),
            };
            efr_call::sys::stop_forwarding(&forwarded);
            let mut fin = c.fold(outcome, &end);
            c.close(&mut fin);
            fin
        }
    };
    drop(rt);
    fin.approvals = record_approvals(&p, &fin.exits);
    report(&a, &fin)
}

/// Whether an exit record is one a grant opens (the service keeps it as an approval).
fn approvable(r: &ExitRecord) -> bool {
    matches!(&r.needs, Needs::Contained { grants } if !grants.is_empty())
}

/// The running service, when there is one (none is started).
fn running_service() -> Option<handoff::Session> {
    handoff::Session::open_running(&handoff::socket()?).ok()
}

/// The grants the user approved for the conversation of `p` that it does not have yet
/// (`sandbox.standing_grants`); none when no service runs.
fn approved_grants(p: &CallParams) -> Vec<Grant> {
    let Some(conversation) = &p.conversation else {
        return Vec::new();
    };
    let Some(mut s) = running_service() else {
        return Vec::new();
    };
    standing_grants(&mut s, conversation)
        .into_iter()
        .filter(|g| !p.grants.contains(g))
        .collect()
}

/// The grants the user approved for `conversation` (`sandbox.standing_grants`); none when
/// the service does not answer.
fn standing_grants(s: &mut handoff::Session, conversation: &str) -> Vec<Grant> {
    let asked = serde_json::json!({ "conversation": conversation });
    s.call(efr_sandbox_wire::rpc::method::STANDING_GRANTS, asked)
        .ok()
        .and_then(|v| serde_json::from_value::<efr_sandbox_wire::StandingGrantsResult>(v).ok())
        .map(|r| r.grants)
        .unwrap_or_default()
}

/// The refusals of a call run here, kept by the running service as a pending approval
/// (`sandbox.approval_record`); none when no service runs.
fn record_approvals(p: &CallParams, exits: &[ExitRecord]) -> Vec<efr_sandbox_wire::ApprovalRef> {
    if !exits.iter().any(approvable) {
        return Vec::new();
    }
    let Some(mut s) = running_service() else {
        return Vec::new();
    };
    let asked = efr_sandbox_wire::ApprovalRecordParams {
        line: p.line.clone(),
        conversation: p.conversation.clone(),
        projects: p.projects.clone(),
        exits: exits.to_vec(),
    };
    record_with(&mut s, asked)
}

/// `asked`'s exit records a grant opens, kept by the service as a pending approval
/// (`sandbox.approval_record`); none when the service does not answer.
fn record_with(
    s: &mut handoff::Session,
    mut asked: efr_sandbox_wire::ApprovalRecordParams,
) -> Vec<efr_sandbox_wire::ApprovalRef> {
    asked.exits.retain(approvable);
    if asked.exits.is_empty() {
        return Vec::new();
    }
    let Ok(asked) = serde_json::to_value(&asked) else {
        return Vec::new();
    };
    s.call(efr_sandbox_wire::rpc::method::APPROVAL_RECORD, asked)
        .ok()
        .and_then(|v| serde_json::from_value::<efr_sandbox_wire::ApprovalRecordResult>(v).ok())
        .map(|r| r.approvals)
        .unwrap_or_default()
}

/// The service's socket when this call goes to it: a contained call (an unsandboxed line
/// stays in this process's session, for the `/dev/tty` a `sudo` prompt opens), no terminal
/// on stdio (the call's terminal is relayed by this process's launcher), no `--plan-out`,
/// and `EFR_SANDBOX_NO_SERVICE` unset.
fn handoff_socket(a: &RunArgs) -> Option<PathBuf> {
    use std::io::IsTerminal;
    let terminal = std::io::stdin().is_terminal()
        || std::io::stdout().is_terminal()
        || std::io::stderr().is_terminal();
    let off = std::env::var_os("EFR_SANDBOX_NO_SERVICE").is_some_and(|v| !v.is_empty());
    if terminal || off || a.unsandboxed || a.plan_out.is_some() {
        return None;
    }
    handoff::socket()
}

/// What `run` prints at the call's end (its setup error, its refusals with the grants to
/// retry with, the floor files it changed, `--summary`, `--json`); the exit status.
fn report(a: &RunArgs, fin: &efr_sandbox_wire::Finish) -> anyhow::Result<i32> {
    // Paths and summaries in these lines are the call's: shown safe on a terminal.
    use crate::cli::term::say;
    if let Some(e) = &fin.sandbox_summary.setup_error {
        if e.starts_with(efr_call::LAUNCHER_LOST) {
            say(e);
        } else {
            say(&format!("the sandbox could not start: {e}"));
        }
    }
    // One line per distinct refusal, with the exact `--grant` to retry with (or why none).
    let mut said = std::collections::HashSet::new();
    for r in &fin.exits {
        let approval = fin
            .approvals
            .iter()
            .find(|x| x.exit == r.id)
            .map(|x| x.approval.as_str());
        let l = refusal_line(r, approval, a.route);
        if said.insert(l.clone()) {
            say(&l);
        }
    }
    config_hints(fin);
    for l in &fin.sandbox_summary.linked_protected {
        say(&format!(
            "{l} is protected and has other hard links: writes through any of its names were refused (find them with `find -samefile {l}`)"
        ));
    }
    for c in &fin.sandbox_summary.home_file_changed {
        let via = c
            .real
            .as_deref()
            .map(|r| format!(" (the file {r})"))
            .unwrap_or_default();
        match &c.backup {
            Some(b) => say(&format!(
                "changed {}{via}; what it held before: {b}",
                c.path
            )),
            None => say(&format!(
                "made {}{via} (a floor file: it runs outside the sandbox)",
                c.path
            )),
        }
    }
    for f in &fin.sandbox_summary.index_flags {
        let what = format!(
            "the call set {} on {} in {} (git status would not show its changes)",
            f.flag.as_str().replace('_', "-"),
            f.path,
            f.repo
        );
        match (&f.kept, f.undone) {
            (_, true) => eprintln!("efr-sandbox: {what}; taken off again"),
            (Some(why), false) => eprintln!("efr-sandbox: {what}; left set: {why}"),
            (None, false) => eprintln!("efr-sandbox: {what}"),
        }
    }
    if fin.sandbox_summary.index_flags_more > 0 {
        eprintln!(
            "efr-sandbox: and {} more index flags the call set",
            fin.sandbox_summary.index_flags_more
        );
    }
    for l in &fin.sandbox_summary.index_unchecked {
        eprintln!("efr-sandbox: index flags not compared: {l}");
    }
    if fin.sandbox_summary.home_file_changed_more > 0 {
        eprintln!(
            "efr-sandbox: and {} more floor files changed",
            fin.sandbox_summary.home_file_changed_more
        );
    }
    if let Some(f) = &a.summary {
        let json = serde_json::to_string_pretty(&fin.sandbox_summary)?;
        std::fs::write(f, json + "\n")
            .map_err(|e| anyhow::anyhow!("--summary {}: {e}", f.display()))?;
    }
    // The finish, one line: after everything else on stderr, or alone in FILE.
    match &a.json {
        None => {}
        Some(None) => eprintln!(
            "{}",
            crate::cli::term::json(
                crate::cli::term::Stream::Stderr,
                &serde_json::to_string(fin)?
            )
        ),
        Some(Some(f)) => std::fs::write(f, serde_json::to_string(fin)? + "\n")
            .map_err(|e| anyhow::anyhow!("--json {}: {e}", f.display()))?,
    }
    Ok(fin.exit_status)
}

/// The project `run` takes without `--project`: the git top level of `cwd`, else `cwd`
/// itself, with why (for the hint); never `/`, the home or a directory above it (a
/// dotfiles repository in the home must not make the home writable). The top level is
/// found by the policy's own reader of `.git` (no git runs: no hook, fsmonitor or config
/// of the repository can run code here); a `.git` it cannot read as git would still marks
/// the top level.
pub(crate) fn default_project(
    cwd: &Path,
    home: &Path,
) -> Result<(PathBuf, &'static str), &'static str> {
    use efr_policy::git::{GitLookup, lookup_git_dir};
    let too_wide = |d: &Path| d == Path::new("/") || home.starts_with(d);
    let top = match lookup_git_dir(cwd) {
        GitLookup::Found(g) => Some(g.worktree),
        GitLookup::Unknown { worktree, .. } => Some(worktree),
        GitLookup::NotFound => None,
    };
    match top {
        Some(t) if !too_wide(&t) => Ok((t, "the git top level of the working directory")),
        Some(_) if !too_wide(cwd) => Ok((
            cwd.to_path_buf(),
            "the working directory: its git top level is the home or /, not taken",
        )),
        None if !too_wide(cwd) => Ok((
            cwd.to_path_buf(),
            "the working directory, not in a git repository",
        )),
        _ => Err("the working directory is the home, /, or in a repository there"),
    }
}

/// Where a conversation's `/tmp` and `$SCRATCH` live: `$XDG_RUNTIME_DIR/efr` (the
/// service's own runtime dir, masked in every call), made private.
fn conversation_runtime(id: &str, env: &Env) -> Result<PathBuf, String> {
    efr_call::launch::check_conversation(id)
        .map_err(|_| "expected 1 to 128 of A-Z a-z 0-9 . _ - (not . or ..)".to_string())?;
    let Some(rt) = &env.runtime_dir else {
        return Err(
            "needs $XDG_RUNTIME_DIR (usually /run/user/$UID), under which the \
                    conversation's /tmp and $SCRATCH are kept"
                .into(),
        );
    };
    let dir = rt.join("efr");
    efr_call::launch::private_dir(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use efr_sandbox_wire::{Bus, Desktop};

    #[test]
    fn grants() {
        let h = Path::new("/h");
        assert_eq!(
            parse_grant("write=x", h).unwrap(),
            Grant::Write {
                path: "/h/x".into()
            }
        );
        assert_eq!(
            parse_grant("bus=session", h).unwrap(),
            Grant::Bus { bus: Bus::Session }
        );
        assert_eq!(parse_grant("net_view", h).unwrap(), Grant::NetView);
        assert_eq!(
            parse_grant("host=Registry.Test:8443:http", h).unwrap(),
            Grant::Host {
                host: "registry.test".into(),
                port: Some(8443),
                plain_http: true,
                tcp: false
            }
        );
        assert_eq!(
            parse_grant("host=localhost:5432:tcp", h).unwrap(),
            Grant::Host {
                host: "localhost".into(),
                port: Some(5432),
                plain_http: false,
                tcp: true
            }
        );
        assert_eq!(
            parse_grant("host=[::1]:6379:tcp", h).unwrap(),
            Grant::Host {
                host: "::1".into(),
                port: Some(6379),
                plain_http: false,
                tcp: true
            }
        );
        let e = parse_grant("host=db.test:5432:tcp", h).unwrap_err();
        assert!(e.contains("the host's loopback"), "{e}");
        let e = parse_grant("host=localhost:tcp", h).unwrap_err();
        assert!(e.contains("names its port"), "{e}");
        assert_eq!(
            parse_grant("desktop=wayland", h).unwrap(),
            Grant::Desktop {
                desktop: Desktop::Wayland
            }
        );
        for bad in [
            "write",
            "write=",
            "bus=x",
            "desktop=gnome",
            "nope=1",
            "host=",
            "host=1.2.3.4",
            "host=a.com:0",
            "net_view=1",
        ] {
            assert!(parse_grant(bad, h).is_err(), "{bad}");
        }
    }

    #[test]
    fn retry_grants_read_back() {
        let h = Path::new("/elsewhere");
        for g in [
            Grant::Write {
                path: "/p/a b/it's".into(),
            },
            Grant::Unmask {
                path: "/home/u/.ssh".into(),
            },
            Grant::Host {
                host: "registry.test".into(),
                port: Some(8443),
                plain_http: false,
                tcp: false,
            },
            Grant::Host {
                host: "*.crates.test".into(),
                port: None,
                plain_http: true,
                tcp: false,
            },
            Grant::Host {
                host: "localhost".into(),
                port: Some(5432),
                plain_http: false,
                tcp: true,
            },
            Grant::Host {
                host: "::1".into(),
                port: Some(6379),
                plain_http: false,
                tcp: true,
            },
            Grant::Host {
                host: "127.0.0.1".into(),
                port: Some(8000),
                plain_http: false,
                tcp: true,
            },
            Grant::Bus { bus: Bus::System },
            Grant::OpenNetwork,
            Grant::NetView,
        ] {
            let arg = grant_arg(&g).unwrap();
            assert_eq!(parse_grant(&arg, h).unwrap(), g, "{arg}");
            // The word the retry line prints, as a shell reads it back (single quotes).
            let w = shell_word(&arg);
            let read = std::process::Command::new("sh")
                .args(["-c", &format!("printf %s {w}")])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&read.stdout), arg, "{w}");
        }
        assert_eq!(grant_arg(&Grant::Unknown), None);
    }

    #[test]
    fn refusal_lines() {
        let p = efr_proxy::ProxyPolicy::default();
        let r = efr_proxy::Refusal::new(
            "nope.test",
            443,
            efr_sandbox_wire::summary::BlockReason::NotAllowed,
        );
        let rec = efr_call::egress::host_record(1, &r, "curl https://nope.test", &p);
        assert_eq!(
            refusal_line(&rec, None, Route::Run),
            "refused: reach nope.test:443 (refused by the proxy: not_allowed); retry with \
             --grant host=nope.test"
        );
        let r = efr_proxy::Refusal {
            special: Some(efr_proxy::Special {
                address: "10.0.0.7".parse().unwrap(),
                range: "private",
            }),
            ..efr_proxy::Refusal::new(
                "mirror.corp.test",
                8443,
                efr_sandbox_wire::summary::BlockReason::Denied,
            )
        };
        let rec = efr_call::egress::host_record(2, &r, "x", &p);
        let l = refusal_line(&rec, None, Route::Run);
        assert!(
            l.starts_with("refused: reach mirror.corp.test:8443 (refused by the proxy: denied): ")
                && l.contains("10.0.0.7, in the private range")
                && l.contains("the [network.resolve] table of the config")
                && !l.contains('\n'),
            "{l}"
        );
    }

    /// A special-address refusal of `host` (resolved to `addr`) as the call records it.
    fn special(n: usize, host: &str, addr: &str) -> ExitRecord {
        let r = efr_proxy::Refusal {
            special: Some(efr_proxy::Special {
                address: addr.parse().unwrap(),
                range: "private",
            }),
            ..efr_proxy::Refusal::new(host, 443, efr_sandbox_wire::summary::BlockReason::Denied)
        };
        efr_call::egress::host_record(n, &r, "x", &efr_proxy::ProxyPolicy::default())
    }

    #[test]
    fn the_resolve_hint_of_a_call_pastes_into_a_config() {
        let exits = [
            special(1, "mirror.corp.test", "10.0.0.7"),
            special(2, "Registry.LOCAL", "127.0.0.1"),
            special(3, "v6.corp.test", "fd00::7"),
            // The same name again (another port): one entry.
            special(4, "mirror.corp.test", "10.0.0.8"),
            // A name the config cannot hold: its record says so, no entry.
            special(5, "under_score.test", "10.0.0.9"),
        ];
        assert!(
            exits[4].judgement.reasons[0].contains("the config cannot map under_score.test"),
            "{:?}",
            exits[4].judgement.reasons
        );
        let text = hint_text(&exits);
        assert_eq!(
            text,
            "[network.resolve]\n\"mirror.corp.test\" = \"10.0.0.7\"\n\
             \"registry.local\" = \"127.0.0.1\"\n\"v6.corp.test\" = \"fd00::7\"\n"
        );
        // Pasted at the end of a user's file that has other tables, it loads with the
        // service's own config parser, and the names map as proposed.
        for base in [
            "",
            "[sandbox]\nbackend = \"native\"\n[network]\nnetview = false\n",
            "[network]\nallow = [\"crates.example\"]\n[jobs]\nmax_running = 4\n",
        ] {
            let file = std::path::Path::new("/home/u/.config/efr/config.toml");
            let c = efr_policy::config::Config::from_toml_str(&format!("{base}{text}"), file)
                .unwrap_or_else(|e| panic!("{base:?} + {text:?}: {e}"));
            for (name, addr) in [
                ("mirror.corp.test", "10.0.0.7"),
                ("registry.local", "127.0.0.1"),
                ("v6.corp.test", "fd00::7"),
            ] {
                assert!(
                    c.network
                        .resolve
                        .iter()
                        .any(|r| r.name == name && r.address.to_string() == addr),
                    "{name} in {base:?} + {text:?}"
                );
            }
        }
        // A call with no such refusal prints no hint.
        assert_eq!(hint_text(&exits[4..]), "");
    }
}
