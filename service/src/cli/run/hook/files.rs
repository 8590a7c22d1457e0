//! Where each agent keeps its config, and the entries of the sandbox's route in it: what
//! `hook install` writes and `hook check` looks for. The paths honour each agent's own
//! variables (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GEMINI_CLI_HOME`, `XDG_CONFIG_HOME`,
//! `OPENCODE_CONFIG`), read as the agents read them at the pinned versions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The agents `install` and `check` know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Claude,
    Codex,
    Gemini,
    Opencode,
}

impl Target {
    pub fn from_name(name: &str) -> anyhow::Result<Target> {
        Ok(match name {
            "claude" => Target::Claude,
            "codex" => Target::Codex,
            "gemini" => Target::Gemini,
            "opencode" => Target::Opencode,
            _ => bail!("unknown agent {name:?}: claude, codex, gemini or opencode"),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Claude => "claude",
            Target::Codex => "codex",
            Target::Gemini => "gemini",
            Target::Opencode => "opencode",
        }
    }
}

/// What the paths depend on: the home, the variables, and the two executables.
#[derive(Debug, Clone)]
pub struct Setup {
    /// `$HOME`.
    pub home: PathBuf,
    /// The environment (the agents' variables are read from it).
    pub vars: HashMap<String, String>,
    /// The absolute path of `efr-sandbox` (the hook's command).
    pub sandbox: PathBuf,
    /// The absolute path of `efr-bash` (opencode's shell).
    pub efr_bash: PathBuf,
}

impl Setup {
    /// This process's.
    pub fn from_process() -> anyhow::Result<Setup> {
        let vars: HashMap<String, String> = std::env::vars().collect();
        let Some(home) = vars.get("HOME").filter(|h| h.starts_with('/')) else {
            bail!("$HOME is not set to an absolute path");
        };
        let efr_bash = super::efr_bash_path()?;
        Ok(Setup {
            home: PathBuf::from(home),
            sandbox: efr_bash.with_file_name("efr-sandbox"),
            efr_bash,
            vars,
        })
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// `$NAME` as a directory, else `default` under the home.
    fn dir(&self, name: &str, default: &str) -> PathBuf {
        match self.var(name) {
            Some(v) => self.home.join(v),
            None => self.home.join(default),
        }
    }

    /// The hook's command line for `agent` (the path quoted for the agent's shell).
    pub fn hook_command(&self, agent: &str) -> String {
        format!(
            "{} hook {agent}",
            super::answer::quote(&self.sandbox.to_string_lossy())
        )
    }

    /// Claude Code's user settings.
    pub fn claude_settings(&self) -> PathBuf {
        self.dir("CLAUDE_CONFIG_DIR", ".claude")
            .join("settings.json")
    }

    /// Codex's home (`$CODEX_HOME`, else `~/.codex`).
    pub fn codex_home(&self) -> PathBuf {
        self.dir("CODEX_HOME", ".codex")
    }

    /// Gemini CLI's user settings (`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`).
    pub fn gemini_settings(&self) -> PathBuf {
        match self.var("GEMINI_CLI_HOME") {
            Some(h) => self.home.join(h).join(".gemini/settings.json"),
            None => self.home.join(".gemini/settings.json"),
        }
    }

    /// opencode's global config dir.
    pub fn opencode_dir(&self) -> PathBuf {
        self.dir("XDG_CONFIG_HOME", ".config").join("opencode")
    }

    /// opencode's global config file: the one of its names that exists (`opencode.jsonc`,
    /// `opencode.json`, `config.json`, the last of them wins in opencode), else
    /// `opencode.json`.
    pub fn opencode_config(&self) -> PathBuf {
        let dir = self.opencode_dir();
        ["config.json", "opencode.json", "opencode.jsonc"]
            .iter()
            .map(|n| dir.join(n))
            .rfind(|p| p.exists())
            .unwrap_or_else(|| dir.join("opencode.json"))
    }
}

/// The hook entry of Claude Code's `hooks.PreToolUse` (timeout in seconds).
pub fn claude_entry(s: &Setup) -> Value {
    json!({
        "matcher": "Bash",
        "hooks": [{ "type": "command", "command": s.hook_command("claude"), "timeout": 60 }]
    })
}

/// The hook entry of Codex's `hooks.json` `PreToolUse` (timeout in seconds).
pub fn codex_entry(s: &Setup) -> Value {
    json!({
        "matcher": "Bash",
        "hooks": [{ "type": "command", "command": s.hook_command("codex"), "timeout": 60 }]
    })
}

/// The hook entry of Gemini CLI's `hooks.BeforeTool` (its matcher is a regular expression;
/// timeout in milliseconds).
pub fn gemini_entry(s: &Setup) -> Value {
    json!({
        "matcher": "^run_shell_command$",
        "hooks": [{
            "type": "command",
            "name": "efr-sandbox",
            "command": s.hook_command("gemini"),
            "timeout": 60000
        }]
    })
}

/// The hash Codex trusts a command hook by: SHA-256 of the canonical JSON (keys sorted,
/// no blanks) of `{event_name, matcher, hooks: [the handler with its timeout]}`, as
/// `sha256:HEX` (Codex's `version_for_toml` of the hook's identity; checked against the
/// `currentHash` that `codex app-server`'s `hooks/list` reports).
pub fn codex_trust_hash(event: &str, matcher: &str, command: &str, timeout: u64) -> String {
    let identity = json!({
        "event_name": event,
        "matcher": matcher,
        "hooks": [{ "type": "command", "command": command, "timeout": timeout, "async": false }],
    });
    let canonical = canonical(&identity).to_string();
    let hex: String = Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// `v` with the keys of every object sorted.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The key of Codex's trust state for the handler `handler` of group `group` of the
/// `PreToolUse` hooks in `hooks_json`.
pub fn codex_trust_key(hooks_json: &Path, group: usize, handler: usize) -> String {
    format!("{}:pre_tool_use:{group}:{handler}", hooks_json.display())
}

/// Whether a hook command is the sandbox's hook of `agent` (any install of it).
pub fn is_our_hook(command: &str, agent: &str) -> bool {
    command.contains("efr-sandbox") && command.trim_end().ends_with(&format!(" hook {agent}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_hash_matches_codex() {
        // The currentHash `codex app-server` (0.171.0) reported for this hook in hooks/list.
        assert_eq!(
            codex_trust_hash(
                "pre_tool_use",
                "Bash",
                "/usr/local/bin/efr-sandbox hook codex",
                30
            ),
            "sha256:038d4e51fe715a98c157446df404d58b4ced2820950d242ba0bdf507b0c4158e"
        );
    }

    #[test]
    fn paths_honour_the_agents_variables() {
        let mut s = Setup {
            home: "/h".into(),
            vars: HashMap::new(),
            sandbox: "/opt/x y/efr-sandbox".into(),
            efr_bash: "/opt/x y/efr-bash".into(),
        };
        assert_eq!(
            s.claude_settings(),
            PathBuf::from("/h/.claude/settings.json")
        );
        assert_eq!(s.codex_home(), PathBuf::from("/h/.codex"));
        assert_eq!(
            s.gemini_settings(),
            PathBuf::from("/h/.gemini/settings.json")
        );
        assert_eq!(s.opencode_dir(), PathBuf::from("/h/.config/opencode"));
        for (k, v) in [
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GEMINI_CLI_HOME", "/g"),
            ("XDG_CONFIG_HOME", "/cfg"),
        ] {
            s.vars.insert(k.into(), v.into());
        }
        assert_eq!(s.claude_settings(), PathBuf::from("/c/settings.json"));
        assert_eq!(s.codex_home(), PathBuf::from("/x"));
        assert_eq!(
            s.gemini_settings(),
            PathBuf::from("/g/.gemini/settings.json")
        );
        assert_eq!(s.opencode_dir(), PathBuf::from("/cfg/opencode"));
        assert_eq!(s.hook_command("codex"), "'/opt/x y/efr-sandbox' hook codex");
        assert!(is_our_hook(&s.hook_command("codex"), "codex"));
        assert!(!is_our_hook(&s.hook_command("codex"), "claude"));
    }
}
