//! What the hook answers for a shell line: the classifier's result turned into allow, ask or
//! deny ([`decide`]), and the line rewritten to run through `efr-bash` ([`rewrite`]).

use std::path::{Path, PathBuf};

use efr_policy::agent_hook::{Agent, Answer};
use efr_sandbox_wire::{ClassifyResult, ExitRecord, Grant, Launch, Needs, Verdict};

use crate::cli::grants::grant_arg;
use crate::cli::run::shell::{CONVERSATION_ENV, GRANTS_ENV, PROJECT_ENV};

/// How the rewritten line reaches `efr-bash`.
#[derive(Debug, Clone)]
pub struct Route {
    /// The absolute path of `efr-bash` (beside this executable).
    pub efr_bash: PathBuf,
    /// The conversation of the agent's session (none without a runtime dir).
    pub conversation: Option<String>,
    /// The project root, when there is one.
    pub project: Option<PathBuf>,
    /// Where the line's last working directory is left for the agent's shell to `cd` to
    /// (Claude Code only): the host path, and the same file's name inside `$SCRATCH`.
    pub cwd_file: Option<(PathBuf, String)>,
}

/// `s` as one shell word: as it is when it holds only plain characters, else in single
/// quotes (what a user reads in an approval prompt most easily).
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `line` rewritten to run contained by `efr-bash` with `grants`: the settings as variables
/// of the command, absolute paths only (Codex runs the line under `bash -lc`, which resets
/// `PATH`), and the `command` builtin so that no function or alias of the agent's shell
/// stands in for it. With a `cwd_file`, the contained line leaves its last directory there
/// (an `EXIT` trap, so also after `exit N`) and the agent's shell `cd`s to it afterwards
/// when it exists on the host, keeping the line's exit status.
pub fn rewrite(line: &str, route: &Route, grants: &[String]) -> String {
    let mut vars: Vec<String> = route
        .conversation
        .iter()
        .map(|c| format!("{CONVERSATION_ENV}={}", quote(c)))
        .collect();
    if let Some(p) = &route.project {
        vars.push(format!("{PROJECT_ENV}={}", quote(&p.to_string_lossy())));
    }
    if !grants.is_empty() {
        vars.push(format!("{GRANTS_ENV}={}", quote(&grants.join(" "))));
    }
    let bash = quote(&route.efr_bash.to_string_lossy());
    let vars: String = vars.iter().map(|v| format!("{v} ")).collect();
    let Some((host, name)) = &route.cwd_file else {
        return format!("{vars}command {bash} -c -- {}", quote(line));
    };
    let inner = format!(
        "trap {} EXIT\n{line}",
        quote(&format!("pwd -P >| \"$SCRATCH\"/{}", quote(name)))
    );
    let f = quote(&host.to_string_lossy());
    format!(
        "command rm -f -- {f}; {vars}command {bash} -c -- {}; __efr_status=$?; \
         if [ -s {f} ]; then IFS= read -r __efr_dir < {f}; command rm -f -- {f}; \
         [ -d \"$__efr_dir\" ] && builtin cd -- \"$__efr_dir\"; fi; (exit $__efr_status)",
        quote(&inner)
    )
}

/// The grant words (`KIND=VALUE`, as `EFR_SANDBOX_GRANTS` takes them) of `grants`; `Err`
/// with the first that cannot be one (a kind `run` does not take, or a value with a blank).
fn grant_words(grants: &[Grant]) -> Result<Vec<String>, String> {
    grants
        .iter()
        .map(|g| match grant_arg(g) {
            Some(a) if !a.chars().any(char::is_whitespace) => Ok(a),
            Some(a) => Err(a),
            None => Err(format!("{g:?}")),
        })
        .collect()
}

/// The grants of an exit record, as words.
fn exit_grants(r: &ExitRecord) -> Vec<String> {
    match &r.needs {
        Needs::Contained { grants } => grants.iter().filter_map(grant_arg).collect(),
        _ => Vec::new(),
    }
}

/// One line for an exit: what the sandbox refuses and why, with the grant that opens it.
fn exit_line(r: &ExitRecord) -> String {
    let why = r
        .judgement
        .reasons
        .first()
        .map(|w| format!(" ({w})"))
        .unwrap_or_default();
    let grants = exit_grants(r);
    match &r.needs {
        Needs::Contained { .. } if !grants.is_empty() => {
            format!("- {}{why}; grant {}", r.summary, grants.join(" "))
        }
        Needs::Unsandboxed => format!("- {}{why}; runs only outside the sandbox", r.summary),
        _ => format!("- {}{why}; no grant opens it", r.summary),
    }
}

/// Where a line the hook denies waits for the user: the service's pending approvals.
pub trait Approvals {
    /// Keeps the exits of `line` a grant opens as a pending approval; its id, or `None`
    /// when none could be kept (no service, no conversation).
    fn record(&mut self, line: &str, exits: &[ExitRecord]) -> Option<String>;
}

/// `result` with the exits the user already approved for the conversation (`approved`:
/// its standing grants) taken as given: an exit for review or for the user alone whose
/// grants are all approved is dropped, and its grants stay in the launch. An exit a rule
/// refuses stays.
pub fn settle(result: &mut ClassifyResult, approved: &[Grant]) {
    result.exits.retain(|r| {
        let given = matches!(&r.needs, Needs::Contained { grants }
            if !grants.is_empty() && grants.iter().all(|g| approved.contains(g)));
        let open = matches!(r.judgement.verdict, Verdict::Review | Verdict::UserOnly);
        !(given && open)
    });
}

/// The reason of a denial the user can turn around: approving `id` gives the line's
/// grants to the conversation, and the same command then runs.
fn approvable_reason(id: &str, words: &[String], lines: &[String]) -> String {
    format!(
        "efr-sandbox: this line needs {}, which only the user can give. Ask the user to run \
         `efr-sandbox approve {id}`, then run the same command again:\n{}",
        words.join(" "),
        lines.join("\n")
    )
}

/// The decision for `line` of `agent`, classified as `result`, rewritten with `route`.
///
/// - no exit: `allow`, rewritten;
/// - an exit nothing opens (refused by a floor, or one only the host runs: `efr-bash`
///   never runs a line outside the sandbox): `deny` with the reasons;
/// - an exit only the user may approve: `deny`, naming the approval that waits for the user
///   in `approvals` (else the command with which the user runs it): the agent's approval
///   would be the model's way around the rule;
/// - exits for review: the agent's `ask` with the grants in the rewritten line, where an
///   approved ask runs the rewrite; elsewhere `deny` naming the approval (or the grants);
/// - exits the policy allows: `allow` with their grants.
pub fn decide(
    agent: Agent,
    line: &str,
    result: &ClassifyResult,
    route: &Route,
    approvals: &mut dyn Approvals,
) -> Answer {
    let exits = &result.exits;
    let lines = |pick: &dyn Fn(&ExitRecord) -> bool| -> Vec<String> {
        exits.iter().filter(|r| pick(r)).map(exit_line).collect()
    };
    let closed = lines(&|r| {
        r.judgement.verdict == Verdict::Refuse || !matches!(r.needs, Needs::Contained { .. })
    });
    if !closed.is_empty() {
        return Answer::Deny {
            reason: format!(
                "efr-sandbox refuses this line, and no approval can let it run in the sandbox:\n{}",
                closed.join("\n")
            ),
        };
    }
    let grants = match &result.launch {
        Launch::Contained { grants } => grants.clone(),
        _ => Vec::new(),
    };
    let words = match grant_words(&grants) {
        Ok(w) => w,
        Err(g) => {
            return Answer::Deny {
                reason: format!(
                    "efr-sandbox cannot pass the grant {g} through the agent's shell; \
                     the user can run the line with `efr-sandbox run`:\n{}",
                    lines(&|_| true).join("\n")
                ),
            };
        }
    };
    let user_only = lines(&|r| r.judgement.verdict == Verdict::UserOnly);
    let review = lines(&|r| r.judgement.verdict == Verdict::Review);
    let asks = review.is_empty() || agent.asks_with_rewrite();
    if !user_only.is_empty() || !asks {
        let waiting: Vec<String> = user_only.iter().chain(&review).cloned().collect();
        if let Some(id) = approvals.record(line, exits) {
            return Answer::Deny {
                reason: approvable_reason(&id, &words, &waiting),
            };
        }
    }
    if !user_only.is_empty() {
        return Answer::Deny {
            reason: format!(
                "efr-sandbox: only the user may approve this; the user can run it with \
                 `efr-sandbox run {}-- {}`:\n{}",
                grant_flags(&words),
                quote(line),
                user_only.join("\n")
            ),
        };
    }
    if review.is_empty() {
        return Answer::Allow {
            command: rewrite(line, route, &words),
            reason: allow_reason(&words),
        };
    }
    if agent.asks_with_rewrite() {
        return Answer::Ask {
            command: rewrite(line, route, &words),
            reason: format!(
                "efr-sandbox runs this line contained; it needs {} (approving grants it for \
                 this call only):\n{}",
                words.join(" "),
                review.join("\n")
            ),
        };
    }
    Answer::Deny {
        reason: format!(
            "efr-sandbox would refuse part of this line; {} has no approval prompt for a \
             rewritten call, so the user can run it with `efr-sandbox run {}-- {}`:\n{}",
            agent.name(),
            grant_flags(&words),
            quote(line),
            review.join("\n")
        ),
    }
}

fn grant_flags(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("--grant {} ", quote(w)))
        .collect()
}

fn allow_reason(words: &[String]) -> String {
    if words.is_empty() {
        "efr-sandbox runs this line contained".into()
    } else {
        format!(
            "efr-sandbox runs this line contained, with {} (allowed by its policy)",
            words.join(" ")
        )
    }
}

/// The host path and the `$SCRATCH` name of the file a call of `conversation` leaves its
/// last directory in, under the runtime dir `runtime` (`$XDG_RUNTIME_DIR`, where the
/// conversations' scratch dirs are): one file per tool call, so parallel calls do not meet.
pub fn cwd_file(runtime: &Path, conversation: &str, tool_use_id: &str) -> (PathBuf, String) {
    let name = format!(
        ".efr-cwd-{}",
        efr_policy::agent_hook::id_piece(tool_use_id, 100)
    );
    let host = runtime
        .join("efr")
        .join("scratch")
        .join(conversation)
        .join(&name);
    (host, name)
}
