//! The hook route of the coding agents: what an agent sends its pre-tool hook (Claude Code's
//! and Codex's `PreToolUse`, Gemini CLI's `BeforeTool`) read into one [`ToolCall`], and the
//! [`Answer`] written back in that agent's own words.
//!
//! The schemas are the agents' own, read from their shipped sources at the pinned versions
//! (the fixtures in `service/tests/fixtures/hook/` are their real messages):
//! - Claude Code: stdin `{session_id, cwd, hook_event_name: "PreToolUse", tool_name,
//!   tool_input, tool_use_id, ...}`; stdout `{"hookSpecificOutput": {"hookEventName":
//!   "PreToolUse", "permissionDecision": "allow"|"ask"|"deny", "permissionDecisionReason",
//!   "updatedInput"}}`; an approved `ask` runs `updatedInput`.
//! - Codex: the same input (its shell tool is `Bash`, `tool_input: {command}`); of the
//!   decisions only `allow` (which must carry `updatedInput`) and `deny` (with a reason): an
//!   `ask` is an invalid answer, and an invalid answer runs the call as it was.
//! - Gemini CLI: stdin `{session_id, cwd, hook_event_name: "BeforeTool", tool_name:
//!   "run_shell_command", tool_input: {command, description?, dir_path?}}`; stdout
//!   `{"decision": "allow"|"ask"|"deny", "reason", "systemMessage", "hookSpecificOutput":
//!   {"hookEventName": "BeforeTool", "tool_input": {...}}}` (`tool_input` replaces the
//!   model's arguments before the user is asked, so it is sent whole).
//!
//! In all three an exit status of 2 blocks the call (its stderr is the reason); every other
//! failure of the hook lets the call run unchanged, so a hook that cannot answer exits 2.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

/// The agents with a pre-tool hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code.
    Claude,
    /// Codex CLI.
    Codex,
    /// Gemini CLI.
    Gemini,
}

impl Agent {
    /// Every agent with a hook, in the order the docs list them.
    pub const ALL: [Agent; 3] = [Agent::Claude, Agent::Codex, Agent::Gemini];

    /// The name on the command line (`efr-sandbox hook NAME`), also the prefix of the
    /// conversations of its sessions.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The agent of a command-line name.
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The event the hook answers.
    pub fn event(self) -> &'static str {
        match self {
            Agent::Claude | Agent::Codex => "PreToolUse",
            Agent::Gemini => "BeforeTool",
        }
    }

    /// The names of the agent's shell tools, whose `tool_input.command` is a shell line.
    pub fn shell_tools(self) -> &'static [&'static str] {
        match self {
            Agent::Claude | Agent::Codex => &["Bash"],
            Agent::Gemini => &["run_shell_command"],
        }
    }

    /// Whether the agent's `ask` is the user's prompt that, approved, runs the rewritten
    /// input, and never a wait nobody can end (else a line that needs a grant is denied and
    /// waits for the user's approval). Claude Code: yes (headless, an `ask` is a denial the
    /// model reads). Codex takes no `ask` (it would run the line as it was). Gemini CLI
    /// forces a confirmation on a hook's `ask` even when run headless (`-p`, also with
    /// `--approval-mode yolo`), where nobody can answer it: the agent hangs, with no tool
    /// timeout.
    pub fn asks_with_rewrite(self) -> bool {
        matches!(self, Agent::Claude)
    }
}

/// One tool call an agent is about to make.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The agent's session (a conversation of the sandbox is keyed on it).
    pub session_id: String,
    /// The agent's working directory.
    pub cwd: PathBuf,
    /// The tool's name.
    pub tool_name: String,
    /// The id of this call, when the agent gives one.
    pub tool_use_id: Option<String>,
    /// The tool's input as the agent sent it (kept whole: the rewrite changes one key).
    pub input: Map<String, Value>,
}

impl ToolCall {
    /// The shell line of a shell tool's call; `None` for another tool.
    pub fn shell_line(&self, agent: Agent) -> Option<&str> {
        if !agent.shell_tools().contains(&self.tool_name.as_str()) {
            return None;
        }
        self.input.get("command").and_then(Value::as_str)
    }

    /// The directory the line runs in: Gemini's `dir_path` (taken from `cwd` when
    /// relative), else the agent's `cwd`.
    pub fn line_dir(&self, agent: Agent) -> PathBuf {
        match (agent, self.input.get("dir_path").and_then(Value::as_str)) {
            (Agent::Gemini, Some(d)) if !d.is_empty() => self.cwd.join(d),
            _ => self.cwd.clone(),
        }
    }
}

/// What is wrong with a hook's input.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HookInputError {
    /// Not JSON.
    #[error("the hook input is not JSON: {0}")]
    Json(String),
    /// Not a JSON object.
    #[error("the hook input is not a JSON object")]
    NotObject,
    /// A field is missing or of the wrong type.
    #[error("the hook input has no {0} string")]
    Field(&'static str),
    /// `tool_input` is not an object.
    #[error("the hook input's tool_input is not an object")]
    ToolInput,
    /// Another event than the one this hook answers.
    #[error("the hook input is a {got:?} event; this hook answers {want}")]
    Event {
        /// The event in the input.
        got: String,
        /// The event this agent's hook answers.
        want: &'static str,
    },
    /// A shell tool's call without a command string.
    #[error("the {0} call has no command string")]
    NoCommand(String),
    /// A relative working directory.
    #[error("the hook input's cwd {0:?} is not absolute")]
    RelativeCwd(String),
}

/// Reads `agent`'s hook input.
pub fn parse(agent: Agent, input: &[u8]) -> Result<ToolCall, HookInputError> {
    let v: Value =
        serde_json::from_slice(input).map_err(|e| HookInputError::Json(e.to_string()))?;
    let Value::Object(mut o) = v else {
        return Err(HookInputError::NotObject);
    };
    let text = |o: &Map<String, Value>, k: &'static str| -> Result<String, HookInputError> {
        o.get(k)
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or(HookInputError::Field(k))
    };
    let event = text(&o, "hook_event_name")?;
    if event != agent.event() {
        return Err(HookInputError::Event {
            got: event,
            want: agent.event(),
        });
    }
    let cwd = text(&o, "cwd")?;
    if !cwd.starts_with('/') {
        return Err(HookInputError::RelativeCwd(cwd));
    }
    let call = ToolCall {
        session_id: text(&o, "session_id")?,
        cwd: PathBuf::from(cwd),
        tool_name: text(&o, "tool_name")?,
        tool_use_id: o
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(String::from),
        input: match o.remove("tool_input") {
            Some(Value::Object(m)) => m,
            _ => return Err(HookInputError::ToolInput),
        },
    };
    if agent.shell_tools().contains(&call.tool_name.as_str()) && call.shell_line(agent).is_none() {
        return Err(HookInputError::NoCommand(call.tool_name));
    }
    Ok(call)
}

/// The hook's decision on one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Not a shell call: the agent decides as it would without the hook.
    Pass,
    /// Run `command` (the rewritten line) with no question.
    Allow {
        /// The rewritten line.
        command: String,
        /// Why (shown in the agent's log; not needed).
        reason: String,
    },
    /// Ask the user; when approved, run `command`.
    Ask {
        /// The rewritten line, with the grants the line needs.
        command: String,
        /// What the sandbox would refuse without the grants, one line each.
        reason: String,
    },
    /// Do not run it; `reason` goes to the model.
    Deny {
        /// What the sandbox refuses and how the user can let it run.
        reason: String,
    },
}

/// The JSON `agent` reads from its hook's stdout for `answer` on `call`.
pub fn render(agent: Agent, call: &ToolCall, answer: &Answer) -> Value {
    let rewritten = |command: &str| {
        let mut input = call.input.clone();
        input.insert("command".into(), Value::String(command.into()));
        Value::Object(input)
    };
    match agent {
        Agent::Claude | Agent::Codex => {
            let out = match answer {
                Answer::Pass => return json!({}),
                Answer::Allow { command, reason } => json!({
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "permissionDecisionReason": reason,
                    "updatedInput": rewritten(command),
                }),
                Answer::Ask { command, reason } => json!({
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "ask",
                    "permissionDecisionReason": reason,
                    "updatedInput": rewritten(command),
                }),
                Answer::Deny { reason } => json!({
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }),
            };
            json!({ "hookSpecificOutput": out })
        }
        Agent::Gemini => {
            // The whole input with `command` replaced: one of Gemini's paths merges
            // `tool_input` over the model's arguments, the other builds the call from it
            // alone (and would drop `dir_path`).
            let input = |command: &str| json!({ "hookEventName": "BeforeTool", "tool_input": rewritten(command) });
            match answer {
                Answer::Pass => json!({}),
                Answer::Allow { command, .. } => json!({
                    "decision": "allow",
                    "hookSpecificOutput": input(command),
                }),
                Answer::Ask { command, reason } => json!({
                    "decision": "ask",
                    "systemMessage": reason,
                    "hookSpecificOutput": input(command),
                }),
                Answer::Deny { reason } => json!({ "decision": "deny", "reason": reason }),
            }
        }
    }
}

/// `id` made a safe piece of a conversation id (`A-Z a-z 0-9 . _ -`, at most `max` long):
/// each other character becomes `-`.
pub fn id_piece(id: &str, max: usize) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(max)
        .collect()
}

/// The conversation of `agent`'s session `session_id`: `<agent>-<session>`, at most 128
/// characters of `A-Z a-z 0-9 . _ -`.
pub fn conversation(agent: Agent, session_id: &str) -> String {
    let prefix = agent.name();
    let piece = id_piece(session_id, 127 - prefix.len());
    let piece = if piece.is_empty() {
        "none".into()
    } else {
        piece
    };
    format!("{prefix}-{piece}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(event: &str, tool: &str, tool_input: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "session_id": "s-1",
            "cwd": "/home/u/p",
            "hook_event_name": event,
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": "toolu_1",
        }))
        .unwrap()
    }

    #[test]
    fn bad_inputs_are_named() {
        let c = Agent::Claude;
        assert!(matches!(parse(c, b"{"), Err(HookInputError::Json(_))));
        assert_eq!(parse(c, b"[]"), Err(HookInputError::NotObject));
        assert_eq!(
            parse(c, b"{}"),
            Err(HookInputError::Field("hook_event_name"))
        );
        let gem = input("BeforeTool", "run_shell_command", json!({"command": "ls"}));
        assert_eq!(
            parse(c, &gem),
            Err(HookInputError::Event {
                got: "BeforeTool".into(),
                want: "PreToolUse"
            })
        );
        let no_cmd = input("PreToolUse", "Bash", json!({"description": "x"}));
        assert_eq!(
            parse(c, &no_cmd),
            Err(HookInputError::NoCommand("Bash".into()))
        );
        let not_obj = input("PreToolUse", "Bash", json!("ls"));
        assert_eq!(parse(c, &not_obj), Err(HookInputError::ToolInput));
        let mut rel: Value =
            serde_json::from_slice(&input("PreToolUse", "Bash", json!({"command": "ls"}))).unwrap();
        rel["cwd"] = json!("p");
        assert_eq!(
            parse(c, &serde_json::to_vec(&rel).unwrap()),
            Err(HookInputError::RelativeCwd("p".into()))
        );
    }

    #[test]
    fn other_tools_have_no_line() {
        let call = parse(
            Agent::Claude,
            &input(
                "PreToolUse",
                "Write",
                json!({"file_path": "/x", "content": "y"}),
            ),
        )
        .unwrap();
        assert_eq!(call.shell_line(Agent::Claude), None);
        let call = parse(
            Agent::Gemini,
            &input(
                "BeforeTool",
                "run_shell_command",
                json!({"command": "ls", "dir_path": "sub"}),
            ),
        )
        .unwrap();
        assert_eq!(call.shell_line(Agent::Gemini), Some("ls"));
        assert_eq!(call.line_dir(Agent::Gemini), PathBuf::from("/home/u/p/sub"));
    }

    #[test]
    fn rewrites_keep_the_other_keys() {
        let call = parse(
            Agent::Claude,
            &input(
                "PreToolUse",
                "Bash",
                json!({"command": "ls", "description": "list", "timeout": 5000}),
            ),
        )
        .unwrap();
        let a = Answer::Allow {
            command: "X".into(),
            reason: "r".into(),
        };
        let out = render(Agent::Claude, &call, &a);
        assert_eq!(
            out["hookSpecificOutput"]["updatedInput"],
            json!({"command": "X", "description": "list", "timeout": 5000})
        );
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "allow");
        assert_eq!(render(Agent::Claude, &call, &Answer::Pass), json!({}));
        let call = parse(
            Agent::Gemini,
            &input(
                "BeforeTool",
                "run_shell_command",
                json!({"command": "ls", "dir_path": "sub"}),
            ),
        )
        .unwrap();
        let out = render(Agent::Gemini, &call, &a);
        assert_eq!(
            out["hookSpecificOutput"]["tool_input"],
            json!({"command": "X", "dir_path": "sub"})
        );
    }

    #[test]
    fn conversation_ids_are_safe() {
        assert_eq!(conversation(Agent::Claude, "ab/c d"), "claude-ab-c-d");
        assert_eq!(conversation(Agent::Codex, ""), "codex-none");
        let long = conversation(Agent::Gemini, &"x".repeat(400));
        assert_eq!(long.len(), 128);
    }
}
