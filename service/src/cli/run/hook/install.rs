//! `efr-sandbox hook install AGENT [--yes]`: writes the agent's user config for the
//! sandbox's route, with absolute paths, keeping every key the user had, and prints the
//! diff of each file. A second install changes nothing and says so.
//!
//! - claude: `hooks.PreToolUse` of `~/.claude/settings.json` gets the hook on `Bash`;
//! - codex: `PreToolUse` of `~/.codex/hooks.json` gets the hook on `Bash`, and
//!   `~/.codex/config.toml` its trust entry (`[hooks.state."KEY"] trusted_hash`: Codex skips
//!   an untrusted user hook in silence);
//! - gemini: `hooks.BeforeTool` of `~/.gemini/settings.json` gets the hook on
//!   `run_shell_command`;
//! - opencode: `shell` of its global config is `efr-bash` (opencode runs `SHELL -c LINE`
//!   for a shell it does not know by name).
//!
//! A JSON file with comments is refused (serde_json reads plain JSON only; the installer
//! does not drop a user's comments): the error says what to add by hand.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

use super::files::{self, Setup, Target};

/// One file the install writes: its text before (none when new) and after.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub path: PathBuf,
    pub old: Option<String>,
    pub new: String,
}

/// `efr-sandbox hook install AGENT`.
pub fn run(t: Target, yes: bool) -> anyhow::Result<i32> {
    let setup = Setup::from_process()?;
    let changes = plan(t, &setup)?;
    if changes.is_empty() {
        outln!("{}: already installed; nothing to change", t.name());
        return super::check::report(t, &setup);
    }
    for c in &changes {
        out!("{}", diff(c));
    }
    if !yes && !confirm()? {
        outln!("nothing written (pass --yes to write without asking)");
        return Ok(1);
    }
    for c in &changes {
        write(c)?;
        outln!("wrote {}", c.path.display());
    }
    super::check::report(t, &setup)
}

fn confirm() -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    out!("write these changes? [y/N] ");
    std::io::stdout().flush()?;
    let mut a = String::new();
    std::io::stdin().read_line(&mut a)?;
    Ok(matches!(a.trim(), "y" | "Y" | "yes"))
}

/// The changes that install `t` (none when it is installed).
pub fn plan(t: Target, s: &Setup) -> anyhow::Result<Vec<Change>> {
    let changes = match t {
        Target::Claude => vec![json_change(&s.claude_settings(), |root| {
            add_hook(root, "PreToolUse", files::claude_entry(s), "claude").map(|_| ())
        })?],
        Target::Gemini => vec![json_change(&s.gemini_settings(), |root| {
            add_hook(root, "BeforeTool", files::gemini_entry(s), "gemini").map(|_| ())
        })?],
        Target::Opencode => vec![json_change(&s.opencode_config(), |root| {
            root.insert(
                "shell".into(),
                Value::String(s.efr_bash.to_string_lossy().into_owned()),
            );
            Ok(())
        })?],
        Target::Codex => codex(s)?,
    };
    Ok(changes
        .into_iter()
        .filter(|c| c.old.as_deref() != Some(&c.new))
        .collect())
}

/// Codex: the hook in `hooks.json`, and its trust entry in `config.toml` (keyed on the
/// hook's place in `hooks.json`).
fn codex(s: &Setup) -> anyhow::Result<Vec<Change>> {
    let home = s.codex_home();
    let hooks_json = home.join("hooks.json");
    let mut group = 0;
    let hooks = json_change(&hooks_json, |root| {
        group = add_hook(root, "PreToolUse", files::codex_entry(s), "codex")?;
        Ok(())
    })?;
    let key = files::codex_trust_key(&hooks_json, group, 0);
    let hash = files::codex_trust_hash("pre_tool_use", "Bash", &s.hook_command("codex"), 60);
    let config = home.join("config.toml");
    let old = read(&config)?;
    let mut doc: toml_edit::DocumentMut = old
        .as_deref()
        .unwrap_or("")
        .parse()
        .with_context(|| format!("cannot read {} as TOML", config.display()))?;
    set_trust(&mut doc, &key, &hash)
        .with_context(|| format!("cannot add the hook's trust entry to {}", config.display()))?;
    let trust = Change {
        path: config,
        old,
        new: doc.to_string(),
    };
    Ok(vec![hooks, trust])
}

/// `[hooks.state."KEY"] trusted_hash = HASH` in `doc`, keeping the rest as it is.
fn set_trust(doc: &mut toml_edit::DocumentMut, key: &str, hash: &str) -> anyhow::Result<()> {
    let table = |item: &mut toml_edit::Item, name: &str| -> anyhow::Result<()> {
        if item.is_none() {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            *item = toml_edit::Item::Table(t);
        }
        if !item.is_table_like() {
            bail!("{name} is not a table");
        }
        Ok(())
    };
    let hooks = &mut doc["hooks"];
    table(hooks, "hooks")?;
    let state = &mut hooks["state"];
    table(state, "hooks.state")?;
    let entry = &mut state[key];
    table(entry, "the hook's state")?;
    entry["trusted_hash"] = toml_edit::value(hash);
    Ok(())
}

/// The change of the JSON object in `path` (an empty object when there is no file) made by
/// `edit`.
fn json_change(
    path: &Path,
    edit: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<()>,
) -> anyhow::Result<Change> {
    let old = read(path)?;
    let mut root = match old.as_deref() {
        None => Map::new(),
        Some(text) if text.trim().is_empty() => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => bail!("{} is not a JSON object", path.display()),
            Err(e) => bail!(
                "cannot read {} as plain JSON ({e}); if it has comments, the installer will \
                 not drop them: add the entry `efr-sandbox hook check` names by hand",
                path.display()
            ),
        },
    };
    edit(&mut root).with_context(|| format!("cannot add the entry to {}", path.display()))?;
    let mut new = serde_json::to_string_pretty(&Value::Object(root))?;
    new.push('\n');
    Ok(Change {
        path: path.to_path_buf(),
        old,
        new,
    })
}

/// The file's text; `None` when there is none.
fn read(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Adds `entry` (a matcher group with one hook) to `hooks.EVENT` of `root`: kept as it is
/// when it is there, else appended after removing any other install of the sandbox's hook
/// of `agent` (an old path). The index of the group in `hooks.EVENT`.
pub fn add_hook(
    root: &mut Map<String, Value>,
    event: &str,
    entry: Value,
    agent: &str,
) -> anyhow::Result<usize> {
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        bail!("\"hooks\" is not an object");
    };
    let groups = hooks
        .entry(event)
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(groups) = groups else {
        bail!("\"hooks\".{event:?} is not a list");
    };
    if let Some(i) = groups.iter().position(|g| *g == entry) {
        return Ok(i);
    }
    for g in groups.iter_mut() {
        if let Some(Value::Array(hs)) = g.get_mut("hooks") {
            hs.retain(|h| {
                !h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| files::is_our_hook(c, agent))
            });
        }
    }
    groups.retain(|g| {
        g.get("hooks")
            .and_then(Value::as_array)
            .is_none_or(|hs| !hs.is_empty())
    });
    groups.push(entry);
    Ok(groups.len() - 1)
}

/// The unified diff of `c`.
pub fn diff(c: &Change) -> String {
    let old = c.old.as_deref().unwrap_or("");
    let name = c.path.display().to_string();
    let from = if c.old.is_some() {
        name.clone()
    } else {
        "/dev/null".into()
    };
    similar::TextDiff::from_lines(old, &c.new)
        .unified_diff()
        .header(&from, &name)
        .to_string()
}

/// Writes `c` whole: a new file beside it renamed over it (mode kept; 0600 when new, in a
/// directory made 0700).
fn write(c: &Change) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = c.path.parent().context("a config path has a parent")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let mode = std::fs::metadata(&c.path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    let tmp = tempfile_in(dir)?;
    let result = (|| {
        std::fs::write(&tmp, &c.new)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &c.path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", c.path.display()))
}

fn tempfile_in(dir: &Path) -> anyhow::Result<PathBuf> {
    for n in 0..100 {
        let p = dir.join(format!(".efr-sandbox-install.{}.{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", p.display())),
        }
    }
    bail!("cannot create a temporary file in {}", dir.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn setup(home: &Path) -> Setup {
        Setup {
            home: home.to_path_buf(),
            vars: HashMap::new(),
            sandbox: "/opt/efr/efr-sandbox".into(),
            efr_bash: "/opt/efr/efr-bash".into(),
        }
    }

    fn apply(t: Target, s: &Setup) -> Vec<Change> {
        let changes = plan(t, s).unwrap();
        for c in &changes {
            write(c).unwrap();
        }
        changes
    }

    #[test]
    fn claude_keeps_the_users_settings_and_is_idempotent() {
        let home = tempfile::tempdir().unwrap();
        let s = setup(home.path());
        let path = s.claude_settings();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let user = r#"{"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "/bin/true"}]}], "Stop": []}, "env": {"A": "1"}}"#;
        std::fs::write(&path, user).unwrap();
        let changes = apply(Target::Claude, &s);
        assert_eq!(changes.len(), 1);
        let d = diff(&changes[0]);
        assert!(
            d.lines().any(|l| l.starts_with('+')
                && l.contains("\"command\": \"/opt/efr/efr-sandbox hook claude\"")),
            "{d}"
        );
        assert!(
            d.lines()
                .any(|l| l.starts_with('-') && l.contains("\"model\": \"opus\"")),
            "{d}"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["model"], "opus");
        assert_eq!(v["env"]["A"], "1");
        assert_eq!(v["hooks"]["Stop"], serde_json::json!([]));
        assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "Write");
        assert_eq!(v["hooks"]["PreToolUse"][1], files::claude_entry(&s));
        assert!(plan(Target::Claude, &s).unwrap().is_empty());
    }

    #[test]
    fn an_old_install_is_replaced() {
        let home = tempfile::tempdir().unwrap();
        let mut s = setup(home.path());
        s.sandbox = "/old/efr-sandbox".into();
        apply(Target::Gemini, &s);
        s.sandbox = "/new/efr-sandbox".into();
        apply(Target::Gemini, &s);
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(s.gemini_settings()).unwrap()).unwrap();
        let groups = v["hooks"]["BeforeTool"].as_array().unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0], files::gemini_entry(&s));
    }

    #[test]
    fn comments_are_refused_not_lost() {
        let home = tempfile::tempdir().unwrap();
        let s = setup(home.path());
        let path = s.gemini_settings();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = "{\n  // my theme\n  \"theme\": \"dark\"\n}\n";
        std::fs::write(&path, text).unwrap();
        let e = plan(Target::Gemini, &s).unwrap_err().to_string();
        assert!(e.contains("comments"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn codex_gets_hook_and_trust_keeping_toml_comments() {
        let home = tempfile::tempdir().unwrap();
        let s = setup(home.path());
        let ch = s.codex_home();
        std::fs::create_dir_all(&ch).unwrap();
        std::fs::write(
            ch.join("config.toml"),
            "# mine\nmodel = \"o3\"\n\n[tui]\nx = 1\n",
        )
        .unwrap();
        let changes = apply(Target::Codex, &s);
        assert_eq!(changes.len(), 2);
        let cfg = std::fs::read_to_string(ch.join("config.toml")).unwrap();
        assert!(cfg.starts_with("# mine\nmodel = \"o3\"\n"), "{cfg}");
        let t: toml::Table = cfg.parse().unwrap();
        let key = files::codex_trust_key(&ch.join("hooks.json"), 0, 0);
        assert_eq!(
            t["hooks"]["state"][&key]["trusted_hash"].as_str(),
            Some(
                files::codex_trust_hash("pre_tool_use", "Bash", &s.hook_command("codex"), 60)
                    .as_str()
            )
        );
        assert_eq!(t["tui"]["x"].as_integer(), Some(1));
        assert!(plan(Target::Codex, &s).unwrap().is_empty());
    }

    #[test]
    fn opencode_shell_is_efr_bash() {
        let home = tempfile::tempdir().unwrap();
        let s = setup(home.path());
        let dir = s.opencode_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("opencode.json"),
            r#"{"theme": "x", "shell": "/bin/zsh"}"#,
        )
        .unwrap();
        apply(Target::Opencode, &s);
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("opencode.json")).unwrap())
                .unwrap();
        assert_eq!(v["shell"], "/opt/efr/efr-bash");
        assert_eq!(v["theme"], "x");
        assert!(plan(Target::Opencode, &s).unwrap().is_empty());
    }
}
