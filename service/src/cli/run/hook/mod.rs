//! `efr-sandbox hook AGENT`: the pre-tool hook of a coding agent (Claude Code, Codex,
//! Gemini CLI). It reads the agent's hook input on stdin and prints the agent's answer: a
//! shell call is classified as `efr-sandbox classify` would and allowed rewritten to run
//! through `efr-bash`, asked about with the grants it needs, or denied with the reason
//! ([`answer`]); any other tool gets `{}`. Bad input or any failure here exits 2 with the
//! message on stderr: in all three agents 2 is the only status that blocks the call (every
//! other one lets it run as it was).
//!
//! `efr-sandbox hook install AGENT [--yes]` writes the agent's user config for its route
//! ([`install`]); `efr-sandbox hook check AGENT` reads the agent's config back and says
//! whether its shell calls will really be contained ([`check`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use efr_policy::agent_hook::{self, Agent, Answer, ToolCall};
use efr_policy::classify::{self, ClassifyRequest};
use efr_policy::config::{Config, Env};
use efr_policy::context::Context;
use efr_sandbox_wire::Mode;

pub mod answer;
pub mod check;
pub mod files;
pub mod install;

/// The most hook input read (an agent's tool call is a few KiB; a line of a MiB is not one
/// to run).
const MAX_INPUT: u64 = 4 << 20;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// `claude`, `codex` or `gemini` (the hook itself), or `install` or `check`.
    #[arg(value_name = "AGENT|install|check")]
    pub what: String,
    /// The agent of `install` and `check`: claude, codex, gemini or opencode.
    #[arg(value_name = "AGENT")]
    pub agent: Option<String>,
    /// `install`: write without asking (the diff is still printed).
    #[arg(long)]
    pub yes: bool,
}

/// Runs `efr-sandbox hook ...`; the exit status.
pub fn run(a: HookArgs) -> anyhow::Result<i32> {
    match (a.what.as_str(), a.agent.as_deref()) {
        ("install", Some(agent)) => install::run(files::Target::from_name(agent)?, a.yes),
        ("check", Some(agent)) => check::run(files::Target::from_name(agent)?),
        ("install" | "check", None) => {
            bail!(
                "hook {} needs an agent: claude, codex, gemini or opencode",
                a.what
            )
        }
        (name, None) => match Agent::from_name(name) {
            Some(agent) => Ok(hook(agent)),
            // Exit 2 as the hook's own failures do: a mistyped agent in an agent's config
            // must block its calls, not let them run on the host.
            None => {
                eprintln!(
                    "efr-sandbox hook: unknown agent {name:?}: the hook takes claude, codex or gemini"
                );
                Ok(2)
            }
        },
        (name, Some(_)) => {
            eprintln!("efr-sandbox hook {name}: takes no further argument");
            Ok(2)
        }
    }
}

/// The hook: stdin to stdout, exit 2 (message on stderr) on any failure.
fn hook(agent: Agent) -> i32 {
    match answer_stdin(agent) {
        Ok(out) => {
            outln!("{out}");
            0
        }
        Err(e) => {
            eprintln!("efr-sandbox hook {}: {e:#}", agent.name());
            2
        }
    }
}

fn answer_stdin(agent: Agent) -> anyhow::Result<String> {
    let mut input = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut input)
        .context("cannot read the hook input")?;
    if input.len() as u64 > MAX_INPUT {
        bail!("the hook input is larger than {MAX_INPUT} bytes");
    }
    let call = agent_hook::parse(agent, &input)?;
    let answer = decide_call(agent, &call)?;
    Ok(agent_hook::render(agent, &call, &answer).to_string())
}

/// The answer for `call`: `Pass` for a tool that is not a shell, else the classified line's.
pub fn decide_call(agent: Agent, call: &ToolCall) -> anyhow::Result<Answer> {
    let Some(line) = call.shell_line(agent) else {
        return Ok(Answer::Pass);
    };
    let env = Env::from_process();
    let config = Config::load(&env)?;
    let dir = call.line_dir(agent);
    let project = super::default_project(&project_base(agent, call), &env.home)
        .ok()
        .map(|(p, _)| p);
    let route = route(agent, call, project, &env)?;
    if line.trim().is_empty() {
        // Nothing to classify; bash runs an empty line as success, and so does the rewrite.
        return Ok(Answer::Allow {
            command: answer::rewrite(line, &route, &[]),
            reason: "efr-sandbox runs this line contained".into(),
        });
    }
    let mut req = ClassifyRequest::new(line, Some(dir), Mode::Auto);
    req.project_roots = route.project.iter().cloned().collect();
    let ctx = Context::new(&config, &env).with_call_env(&config, std::env::vars());
    let mut result = classify::classify(&req, &ctx);
    let mut service = Service::open(&route);
    answer::settle(&mut result, &service.standing());
    Ok(answer::decide(agent, line, &result, &route, &mut service))
}

/// The user's service as the hook meets it (started when none runs, as the call it
/// precedes would start it): the grants the user approved for the session's conversation,
/// and the pending approval of a line the hook denies.
struct Service {
    session: Option<crate::handoff::Session>,
    conversation: Option<String>,
    projects: Vec<String>,
}

impl Service {
    /// Nothing to ask without a conversation (approving would give its grants to none);
    /// with `EFR_SANDBOX_NO_SERVICE` set, only a service that already runs is asked, as
    /// `run` does.
    fn open(route: &answer::Route) -> Service {
        let start = std::env::var_os("EFR_SANDBOX_NO_SERVICE").is_none_or(|v| v.is_empty());
        let session = route
            .conversation
            .as_ref()
            .and_then(|_| crate::handoff::socket())
            .and_then(|s| match start {
                true => crate::handoff::Session::open(&s).ok(),
                false => crate::handoff::Session::open_running(&s).ok(),
            });
        Service {
            session,
            conversation: route.conversation.clone(),
            projects: route
                .project
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
        }
    }

    /// The grants the user approved for the conversation.
    fn standing(&mut self) -> Vec<efr_sandbox_wire::Grant> {
        match (&mut self.session, &self.conversation) {
            (Some(s), Some(c)) => super::standing_grants(s, c),
            _ => Vec::new(),
        }
    }
}

impl answer::Approvals for Service {
    fn record(&mut self, line: &str, exits: &[efr_sandbox_wire::ExitRecord]) -> Option<String> {
        let s = self.session.as_mut()?;
        let asked = efr_sandbox_wire::ApprovalRecordParams {
            line: line.to_string(),
            conversation: self.conversation.clone(),
            projects: self.projects.clone(),
            exits: exits.to_vec(),
        };
        super::record_with(s, asked)
            .into_iter()
            .next()
            .map(|r| r.approval)
    }
}

/// Where the project is looked for: the agent's own project directory, never the line's
/// directory (Gemini's `dir_path` is the model's choice, and Claude Code's `cwd` follows
/// the `cd`s of earlier lines): Claude Code's `CLAUDE_PROJECT_DIR` (set for its hooks),
/// else the session's `cwd`. A line that `cd`s elsewhere so runs there with the same
/// project, and cannot make another directory writable for the next call.
fn project_base(agent: Agent, call: &ToolCall) -> PathBuf {
    let claude_dir = std::env::var_os("CLAUDE_PROJECT_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match (agent, claude_dir) {
        (Agent::Claude, Some(d)) => d,
        _ => call.cwd.clone(),
    }
}

/// The route of `agent`'s call: `efr-bash` beside this executable, the conversation of its
/// session, and for Claude Code the file its last directory comes back through. With no
/// `$XDG_RUNTIME_DIR` (where conversations live) there is no conversation: `efr-bash` then
/// says that `/tmp` does not last between calls, and the calls still run.
fn route(
    agent: Agent,
    call: &ToolCall,
    project: Option<PathBuf>,
    env: &Env,
) -> anyhow::Result<answer::Route> {
    let efr_bash = efr_bash_path()?;
    let Some(rt) = &env.runtime_dir else {
        return Ok(answer::Route {
            efr_bash,
            conversation: None,
            project,
            cwd_file: None,
        });
    };
    let conversation = agent_hook::conversation(agent, &call.session_id);
    let cwd_file = (agent == Agent::Claude).then(|| {
        answer::cwd_file(
            rt,
            &conversation,
            call.tool_use_id.as_deref().unwrap_or("call"),
        )
    });
    Ok(answer::Route {
        efr_bash,
        conversation: Some(conversation),
        project,
        cwd_file,
    })
}

/// `efr-bash` beside this executable (the same `cargo install` puts both there).
pub fn efr_bash_path() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find this executable")?;
    let bash = me.with_file_name(crate::cli::run::shell::EFR_BASH);
    if !is_executable(&bash) {
        bail!(
            "{} is missing: install efr-bash and efr-sandbox together (cargo install --path service)",
            bash.display()
        );
    }
    Ok(bash)
}

/// Whether `p` is a file someone may execute.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
