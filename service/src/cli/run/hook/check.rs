//! `efr-sandbox hook check AGENT`: reads the agent's config back (user, project and
//! managed layers) and says whether its shell calls will really be contained, naming each
//! thing that makes them run outside the sandbox. Exit status 0 only when contained.
//!
//! The project layers are those of the current directory (run it where the agent runs).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::files::{self, Setup, Target};

/// What the check found: what holds, and what makes calls fail open.
#[derive(Debug, Default)]
pub struct Findings {
    pub ok: Vec<String>,
    pub open: Vec<String>,
}

impl Findings {
    fn ok(&mut self, s: impl Into<String>) {
        self.ok.push(s.into());
    }
    fn open(&mut self, s: impl Into<String>) {
        self.open.push(s.into());
    }
}

/// `efr-sandbox hook check AGENT`.
pub fn run(t: Target) -> anyhow::Result<i32> {
    report(t, &Setup::from_process()?)
}

/// Prints the findings for `t`; the exit status (0 only when contained).
pub fn report(t: Target, s: &Setup) -> anyhow::Result<i32> {
    let here = std::env::current_dir()?;
    let f = check(t, s, &here);
    for o in &f.ok {
        outln!("ok: {o}");
    }
    for o in &f.open {
        outln!("fails open: {o}");
    }
    if f.open.is_empty() {
        outln!("{}: its shell calls run contained", t.name());
        Ok(0)
    } else {
        outln!(
            "{}: its shell calls are NOT all contained (fix the lines above; `efr-sandbox hook install {}` writes the user's part)",
            t.name(),
            t.name()
        );
        Ok(1)
    }
}

/// The versions the route was read from and tested with (`docs/agents.md`): an older agent
/// may lack a field the route relies on.
const CHECKED: &[(Target, &str, [u64; 3])] = &[
    (Target::Claude, "claude", [2, 1, 332]),
    (Target::Codex, "codex", [0, 171, 0]),
    (Target::Gemini, "gemini", [0, 61, 0]),
    (Target::Opencode, "opencode", [1, 18, 33]),
];

/// The first `N.N.N` of a `--version` line.
fn version_of(text: &str) -> Option<[u64; 3]> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find_map(|w| {
            let mut it = w.split('.').map(|n| n.parse::<u64>().ok());
            let v = [it.next()??, it.next()??, it.next()??];
            Some(v)
        })
}

/// The agent's executable on `PATH` and its version, when it answers `--version` within
/// ten seconds.
fn installed_version(s: &Setup, exe: &str) -> Option<(PathBuf, String)> {
    let path = s.vars.get("PATH")?;
    let bin = path
        .split(':')
        .map(|d| Path::new(d).join(exe))
        .find(|p| super::is_executable(p))?;
    let spawn = || {
        std::process::Command::new(&bin)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
    };
    // A file just written can be busy for a moment (another process forked while it was
    // open for writing): asked again, not taken as missing.
    let mut child = (0..20)
        .find_map(|_| match spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                None
            }
            other => Some(other),
        })?
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().ok()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    Some((bin, out.trim().to_string()))
}

/// The agent on `PATH`: older than the version the route was checked with fails.
fn version(t: Target, s: &Setup, f: &mut Findings) {
    let Some((_, exe, min)) = CHECKED.iter().find(|(x, _, _)| *x == t) else {
        return;
    };
    let Some((bin, text)) = installed_version(s, exe) else {
        return;
    };
    let want = format!("{}.{}.{}", min[0], min[1], min[2]);
    match version_of(&text) {
        Some(v) if v >= *min => f.ok(format!(
            "{} is {text} (the route is checked with {want})",
            bin.display()
        )),
        Some(_) => f.open(format!(
            "{} is {text}, older than {want}, the version the route was checked with: update it",
            bin.display()
        )),
        None => f.open(format!(
            "{} --version says {text:?}: not a version",
            bin.display()
        )),
    }
}

/// The findings for `t` with setup `s`, for an agent run in `here`.
pub fn check(t: Target, s: &Setup, here: &Path) -> Findings {
    let mut f = Findings::default();
    version(t, s, &mut f);
    let projects = project_dirs(here);
    match t {
        Target::Claude => claude(s, &projects, &mut f),
        Target::Codex => codex(s, &projects, &mut f),
        Target::Gemini => gemini(s, &projects, &mut f),
        Target::Opencode => opencode(s, &projects, &mut f),
    }
    f
}

/// The directories whose project config an agent reads: `here` and each one above it up to
/// its git top level (`here` alone outside a repository).
fn project_dirs(here: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for d in here.ancestors() {
        dirs.push(d.to_path_buf());
        if d.join(".git").exists() {
            return dirs;
        }
    }
    vec![here.to_path_buf()]
}

/// A JSON file's object: `Ok(None)` when there is no file, `Err` with why it cannot be read.
fn json_file(path: &Path) -> Result<Option<Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => Ok(None),
        Ok(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| format!("cannot read {} as JSON ({e})", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The `(group, handler, hook)` of each command hook on `event` of `root` whose matcher
/// selects `tool`.
fn hooks_on<'a>(root: &'a Value, event: &str, tool: &str) -> Vec<(usize, usize, &'a Value)> {
    let Some(groups) = root
        .get("hooks")
        .and_then(|h| h.get(event))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        if !matcher_selects(g.get("matcher").and_then(Value::as_str), tool) {
            continue;
        }
        for (hi, h) in g
            .get("hooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            out.push((gi, hi, h));
        }
    }
    out
}

/// Whether a hook matcher selects `tool`: absent, empty or `*`, the name, an alternation
/// holding it, or the name anchored (`^NAME$`).
fn matcher_selects(m: Option<&str>, tool: &str) -> bool {
    match m {
        None | Some("" | "*" | ".*") => true,
        Some(m) => {
            let m = m.trim_start_matches('^').trim_end_matches('$');
            m == tool || m.split('|').any(|p| p == tool)
        }
    }
}

fn command_of(h: &Value) -> &str {
    h.get("command").and_then(Value::as_str).unwrap_or("")
}

/// The sandbox's hook of `agent` among `hooks`, checked: its executable is there and
/// `efr-bash` is beside it. `None` when there is none.
fn our_hook<'a>(
    hooks: &[(usize, usize, &'a Value)],
    agent: &str,
    f: &mut Findings,
) -> Option<(usize, usize, &'a Value)> {
    let found = hooks
        .iter()
        .find(|(_, _, h)| files::is_our_hook(command_of(h), agent))
        .copied();
    if let Some((_, _, h)) = found {
        executables(command_of(h), f);
    }
    found
}

/// The executable of a hook command (its first word) and `efr-bash` beside it.
fn executables(command: &str, f: &mut Findings) {
    let exe = shlex::split(command)
        .and_then(|w| w.into_iter().next())
        .map(PathBuf::from);
    match exe {
        Some(p) if super::is_executable(&p) => {
            let bash = p.with_file_name("efr-bash");
            if super::is_executable(&bash) {
                f.ok(format!("the hook runs {} with {} beside it", p.display(), bash.display()));
            } else {
                f.open(format!(
                    "{} is missing: the rewritten calls cannot run (reinstall efr-sandbox)",
                    bash.display()
                ));
            }
        }
        Some(p) => f.open(format!(
            "the hook's executable {} does not exist: the agent's hook fails and the call runs as it was",
            p.display()
        )),
        None => f.open(format!("the hook command {command:?} cannot be read")),
    }
}

/// Other hooks on the shell tool in a layer the user did not write: each could rewrite
/// the line after ours.
fn foreign_hooks(
    root: &Value,
    event: &str,
    tool: &str,
    agent: &str,
    path: &Path,
    f: &mut Findings,
) {
    for (_, _, h) in hooks_on(root, event, tool) {
        if !files::is_our_hook(command_of(h), agent) {
            f.open(format!(
                "{} has another {event} hook on {tool} ({:?}): it can change the line after the sandbox's rewrite",
                path.display(),
                command_of(h)
            ));
        }
    }
}

fn truthy(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool) == Some(true)
}

fn claude(s: &Setup, projects: &[PathBuf], f: &mut Findings) {
    let user_path = s.claude_settings();
    let user = match json_file(&user_path) {
        Ok(v) => v.unwrap_or(Value::Null),
        Err(e) => return f.open(e),
    };
    match our_hook(&hooks_on(&user, "PreToolUse", "Bash"), "claude", f) {
        Some(_) => f.ok(format!(
            "{} has the PreToolUse hook on Bash",
            user_path.display()
        )),
        None => f.open(format!(
            "{} has no efr-sandbox PreToolUse hook on Bash: Bash calls run on the host",
            user_path.display()
        )),
    }
    let managed = PathBuf::from("/etc/claude-code/managed-settings.json");
    let mut layers = vec![(user_path, user)];
    for p in projects {
        for n in [".claude/settings.json", ".claude/settings.local.json"] {
            layers.push((p.join(n), Value::Null));
        }
    }
    layers.push((managed.clone(), Value::Null));
    for (path, v) in &mut layers {
        if v.is_null() {
            match json_file(path) {
                Ok(Some(x)) => *v = x,
                Ok(None) => continue,
                Err(e) => {
                    f.open(format!("{e}: cannot tell whether it turns hooks off"));
                    continue;
                }
            }
        }
        if truthy(v.get("disableAllHooks")) {
            f.open(format!(
                "{} sets disableAllHooks: no hook runs",
                path.display()
            ));
        }
        if *path != s.claude_settings() {
            foreign_hooks(v, "PreToolUse", "Bash", "claude", path, f);
        }
        if *path == managed && truthy(v.get("allowManagedHooksOnly")) {
            f.open(format!(
                "{} sets allowManagedHooksOnly: the user's hook is ignored",
                path.display()
            ));
        }
    }
    let env_on = |name: &str| {
        s.vars.get(name).is_some_and(|v| {
            !matches!(
                v.trim().to_lowercase().as_str(),
                "" | "0" | "false" | "no" | "off" | "none"
            )
        })
    };
    if env_on("CLAUDE_CODE_PERSONAL_HOOKS_OFF") {
        f.open("CLAUDE_CODE_PERSONAL_HOOKS_OFF is set: the user's hooks do not run");
    }
    if env_on("CLAUDE_CODE_RESTRICT_PERSONAL_CONFIG") {
        f.open(
            "CLAUDE_CODE_RESTRICT_PERSONAL_CONFIG is set: a user hook may not rewrite a call, so every Bash call is refused",
        );
    }
}

fn toml_file(path: &Path) -> Result<Option<toml::Table>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => t
            .parse::<toml::Table>()
            .map(Some)
            .map_err(|e| format!("cannot read {} as TOML ({e})", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

fn codex(s: &Setup, projects: &[PathBuf], f: &mut Findings) {
    let home = s.codex_home();
    let hooks_path = home.join("hooks.json");
    let hooks = match json_file(&hooks_path) {
        Ok(v) => v.unwrap_or(Value::Null),
        Err(e) => return f.open(e),
    };
    let config_path = home.join("config.toml");
    let config = match toml_file(&config_path) {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => return f.open(e),
    };
    let found = our_hook(&hooks_on(&hooks, "PreToolUse", "Bash"), "codex", f);
    match found {
        Some((g, h, hook)) => {
            f.ok(format!(
                "{} has the PreToolUse hook on Bash",
                hooks_path.display()
            ));
            codex_trust(&config, &config_path, &hooks_path, &hooks, (g, h, hook), f);
        }
        None => f.open(format!(
            "{} has no efr-sandbox PreToolUse hook on Bash: shell calls run on the host",
            hooks_path.display()
        )),
    }
    let off = |t: &toml::Table| {
        t.get("features")
            .and_then(|x| x.get("hooks"))
            .and_then(toml::Value::as_bool)
            == Some(false)
    };
    if off(&config) {
        f.open(format!(
            "{} sets features.hooks = false: no hook runs",
            config_path.display()
        ));
    }
    for sys in ["/etc/codex/config.toml", "/etc/codex/managed_config.toml"] {
        if let Ok(Some(t)) = toml_file(Path::new(sys)) {
            if off(&t) {
                f.open(format!("{sys} sets features.hooks = false: no hook runs"));
            }
        }
    }
    if let Ok(Some(t)) = toml_file(Path::new("/etc/codex/requirements.toml")) {
        if t.get("allow_managed_hooks_only")
            .and_then(toml::Value::as_bool)
            == Some(true)
        {
            f.open("/etc/codex/requirements.toml sets allow_managed_hooks_only: the user's hook is ignored");
        }
    }
    for p in projects {
        let path = p.join(".codex/hooks.json");
        if let Ok(Some(v)) = json_file(&path) {
            foreign_hooks(&v, "PreToolUse", "Bash", "codex", &path, f);
        }
    }
}

/// The trust entry of the hook at `(group, handler)`: present, of the hook's current
/// hash, and not disabled.
fn codex_trust(
    config: &toml::Table,
    config_path: &Path,
    hooks_path: &Path,
    hooks: &Value,
    (g, h, hook): (usize, usize, &Value),
    f: &mut Findings,
) {
    let key = files::codex_trust_key(hooks_path, g, h);
    let matcher = hooks["hooks"]["PreToolUse"][g]
        .get("matcher")
        .and_then(Value::as_str)
        .unwrap_or("");
    let timeout = hook
        .get("timeout")
        .and_then(Value::as_u64)
        .unwrap_or(600)
        .max(1);
    let want = files::codex_trust_hash("pre_tool_use", matcher, command_of(hook), timeout);
    let state = config
        .get("hooks")
        .and_then(|x| x.get("state"))
        .and_then(|x| x.get(&key));
    let trusted = state
        .and_then(|x| x.get("trusted_hash"))
        .and_then(toml::Value::as_str);
    match trusted {
        Some(t) if t == want => f.ok(format!("{} trusts the hook", config_path.display())),
        Some(_) => f.open(format!(
            "{}: the trust entry of {key} is of another version of the hook: Codex skips it",
            config_path.display()
        )),
        None => f.open(format!(
            "{} has no trust entry for {key}: Codex skips an untrusted hook in silence",
            config_path.display()
        )),
    }
    if state
        .and_then(|x| x.get("enabled"))
        .and_then(toml::Value::as_bool)
        == Some(false)
    {
        f.open(format!(
            "{} disables the hook ({key})",
            config_path.display()
        ));
    }
}

fn gemini(s: &Setup, projects: &[PathBuf], f: &mut Findings) {
    let user_path = s.gemini_settings();
    let user = match json_file(&user_path) {
        Ok(v) => v.unwrap_or(Value::Null),
        Err(e) => return f.open(format!("{e}; with comments, check it by hand")),
    };
    let ours = our_hook(
        &hooks_on(&user, "BeforeTool", "run_shell_command"),
        "gemini",
        f,
    );
    match ours {
        Some(_) => f.ok(format!(
            "{} has the BeforeTool hook on run_shell_command",
            user_path.display()
        )),
        None => f.open(format!(
            "{} has no efr-sandbox BeforeTool hook on run_shell_command: shell calls run on the host",
            user_path.display()
        )),
    }
    let system = s
        .vars
        .get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/gemini-cli/settings.json"));
    let mut layers = vec![user_path.clone(), system];
    layers.extend(projects.iter().map(|p| p.join(".gemini/settings.json")));
    for path in layers {
        let v = match json_file(&path) {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                f.open(format!("{e}: cannot tell whether it turns hooks off"));
                continue;
            }
        };
        let hc = v.get("hooksConfig");
        if hc.and_then(|h| h.get("enabled")).and_then(Value::as_bool) == Some(false) {
            f.open(format!(
                "{} sets hooksConfig.enabled = false: no hook runs",
                path.display()
            ));
        }
        let disabled = hc.and_then(|h| h.get("disabled")).and_then(Value::as_array);
        if disabled
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|d| d == "efr-sandbox" || files::is_our_hook(d, "gemini"))
        {
            f.open(format!(
                "{} lists the hook in hooksConfig.disabled",
                path.display()
            ));
        }
        if path != user_path {
            foreign_hooks(&v, "BeforeTool", "run_shell_command", "gemini", &path, f);
        }
    }
}

fn opencode(s: &Setup, projects: &[PathBuf], f: &mut Findings) {
    // Lowest precedence first: the global files, $OPENCODE_CONFIG, the project's (from the
    // top level down), $OPENCODE_CONFIG_DIR's, $OPENCODE_CONFIG_CONTENT, the managed ones.
    let mut layers: Vec<PathBuf> = ["config.json", "opencode.json", "opencode.jsonc"]
        .iter()
        .map(|n| s.opencode_dir().join(n))
        .collect();
    if let Some(p) = s.vars.get("OPENCODE_CONFIG") {
        layers.push(PathBuf::from(p));
    }
    for p in projects.iter().rev() {
        for n in [
            "opencode.json",
            "opencode.jsonc",
            ".opencode/opencode.json",
            ".opencode/opencode.jsonc",
        ] {
            layers.push(p.join(n));
        }
    }
    if let Some(d) = s.vars.get("OPENCODE_CONFIG_DIR") {
        layers.push(Path::new(d).join("opencode.json"));
        layers.push(Path::new(d).join("opencode.jsonc"));
    }
    let mut shell: Option<(String, String)> = None;
    for path in layers {
        match json_file(&path) {
            Ok(Some(v)) => {
                if let Some(sh) = v.get("shell").and_then(Value::as_str) {
                    shell = Some((sh.to_string(), path.display().to_string()));
                }
            }
            Ok(None) => {}
            Err(e) => f.open(format!("{e}: cannot tell whether it sets the shell")),
        }
    }
    if let Some(content) = s.vars.get("OPENCODE_CONFIG_CONTENT") {
        match serde_json::from_str::<Value>(content) {
            Ok(v) => {
                if let Some(sh) = v.get("shell").and_then(Value::as_str) {
                    shell = Some((sh.to_string(), "$OPENCODE_CONFIG_CONTENT".into()));
                }
            }
            Err(e) => f.open(format!(
                "cannot read $OPENCODE_CONFIG_CONTENT as JSON ({e})"
            )),
        }
    }
    match shell {
        None => f.open("no opencode config sets shell: opencode runs $SHELL or bash on the host"),
        Some((sh, from)) if Path::new(&sh).file_name() == Some("efr-bash".as_ref()) => {
            if super::is_executable(Path::new(&sh)) {
                f.ok(format!("the shell is {sh} (from {from})"));
                if !super::is_executable(&Path::new(&sh).with_file_name("efr-sandbox")) {
                    f.open(format!(
                        "{sh} has no efr-sandbox beside it: every call fails"
                    ));
                }
            } else {
                f.open(format!(
                    "the shell {sh} (from {from}) does not exist: opencode falls back to bash on the host"
                ));
            }
        }
        Some((sh, from)) => f.open(format!(
            "{from} sets the shell to {sh}: it runs on the host"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A setup whose executables exist (`efr-sandbox` and `efr-bash` in `bin`).
    fn setup(home: &Path) -> Setup {
        use std::os::unix::fs::PermissionsExt;
        let bin = home.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for n in ["efr-sandbox", "efr-bash"] {
            std::fs::write(bin.join(n), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(bin.join(n), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Setup {
            home: home.to_path_buf(),
            vars: HashMap::new(),
            sandbox: bin.join("efr-sandbox"),
            efr_bash: bin.join("efr-bash"),
        }
    }

    fn install(t: Target, s: &Setup) {
        for c in super::super::install::plan(t, s).unwrap() {
            std::fs::create_dir_all(c.path.parent().unwrap()).unwrap();
            std::fs::write(&c.path, &c.new).unwrap();
        }
    }

    fn project(home: &Path) -> PathBuf {
        let p = home.join("proj");
        std::fs::create_dir_all(p.join(".git")).unwrap();
        p
    }

    fn has(f: &Findings, s: &str) -> bool {
        f.open.iter().any(|o| o.contains(s))
    }

    #[test]
    fn each_agent_is_open_before_and_contained_after_install() {
        for t in [
            Target::Claude,
            Target::Codex,
            Target::Gemini,
            Target::Opencode,
        ] {
            let home = tempfile::tempdir().unwrap();
            let s = setup(home.path());
            let p = project(home.path());
            assert!(!check(t, &s, &p).open.is_empty(), "{t:?}");
            install(t, &s);
            let f = check(t, &s, &p);
            assert!(f.open.is_empty(), "{t:?}: {:?}", f.open);
        }
    }

    #[test]
    fn versions_older_than_the_checked_ones_fail() {
        assert_eq!(version_of("2.1.332 (Claude Code)"), Some([2, 1, 332]));
        assert_eq!(version_of("codex-cli 0.171.0"), Some([0, 171, 0]));
        assert_eq!(version_of("v1.2"), None);
        let home = tempfile::tempdir().unwrap();
        let mut s = setup(home.path());
        let bin = home.path().join("agents");
        std::fs::create_dir_all(&bin).unwrap();
        let codex = bin.join("codex");
        std::fs::write(&codex, "#!/bin/sh\necho codex-cli 0.170.9\n").unwrap();
        std::fs::set_permissions(&codex, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        s.vars.insert("PATH".into(), bin.display().to_string());
        let p = project(home.path());
        install(Target::Codex, &s);
        assert!(has(&check(Target::Codex, &s, &p), "older than 0.171.0"));
        std::fs::write(&codex, "#!/bin/sh\necho codex-cli 0.171.0\n").unwrap();
        let f = check(Target::Codex, &s, &p);
        assert!(f.open.is_empty(), "{:?}", f.open);
    }

    #[test]
    fn claude_fail_open_causes_are_named() {
        let home = tempfile::tempdir().unwrap();
        let mut s = setup(home.path());
        let p = project(home.path());
        install(Target::Claude, &s);
        std::fs::create_dir_all(p.join(".claude")).unwrap();
        std::fs::write(
            p.join(".claude/settings.local.json"),
            r#"{"disableAllHooks": true, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/x/rewrite"}]}]}}"#,
        )
        .unwrap();
        s.vars
            .insert("CLAUDE_CODE_PERSONAL_HOOKS_OFF".into(), "launch".into());
        s.vars
            .insert("CLAUDE_CODE_RESTRICT_PERSONAL_CONFIG".into(), "1".into());
        let f = check(Target::Claude, &s, &p);
        assert!(has(&f, "sets disableAllHooks"), "{:?}", f.open);
        assert!(has(&f, "another PreToolUse hook on Bash"), "{:?}", f.open);
        assert!(has(&f, "CLAUDE_CODE_PERSONAL_HOOKS_OFF"), "{:?}", f.open);
        assert!(has(&f, "every Bash call is refused"), "{:?}", f.open);
        std::fs::remove_file(s.efr_bash.clone()).unwrap();
        assert!(has(&check(Target::Claude, &s, &p), "efr-bash is missing"));
        std::fs::remove_file(s.sandbox.clone()).unwrap();
        assert!(has(&check(Target::Claude, &s, &p), "does not exist"));
    }

    #[test]
    fn codex_fail_open_causes_are_named() {
        let home = tempfile::tempdir().unwrap();
        let s = setup(home.path());
        let p = project(home.path());
        install(Target::Codex, &s);
        let cfg = s.codex_home().join("config.toml");
        let text = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(&cfg, text.replace("sha256:", "sha256:0")).unwrap();
        assert!(has(
            &check(Target::Codex, &s, &p),
            "another version of the hook"
        ));
        std::fs::write(
            &cfg,
            text.replace("trusted_hash", "enabled = false\ntrusted_hash"),
        )
        .unwrap();
        std::fs::create_dir_all(p.join(".codex")).unwrap();
        std::fs::write(
            p.join(".codex/hooks.json"),
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "/x/y"}]}]}}"#,
        )
        .unwrap();
        let f = check(Target::Codex, &s, &p);
        assert!(has(&f, "another PreToolUse hook on Bash"), "{:?}", f.open);
        assert!(has(&f, "disables the hook"), "{:?}", f.open);
        std::fs::write(&cfg, "[features]\nhooks = false\n").unwrap();
        let f = check(Target::Codex, &s, &p);
        assert!(has(&f, "no trust entry"), "{:?}", f.open);
        assert!(has(&f, "features.hooks = false"), "{:?}", f.open);
    }

    #[test]
    fn gemini_and_opencode_project_layers_are_read() {
        let home = tempfile::tempdir().unwrap();
        let s = setup(home.path());
        let p = project(home.path());
        install(Target::Gemini, &s);
        install(Target::Opencode, &s);
        std::fs::create_dir_all(p.join(".gemini")).unwrap();
        std::fs::write(
            p.join(".gemini/settings.json"),
            r#"{"hooksConfig": {"enabled": false, "disabled": ["efr-sandbox"]}}"#,
        )
        .unwrap();
        let f = check(Target::Gemini, &s, &p);
        assert!(has(&f, "hooksConfig.enabled = false"), "{:?}", f.open);
        assert!(has(&f, "hooksConfig.disabled"), "{:?}", f.open);
        std::fs::write(p.join("opencode.json"), r#"{"shell": "/bin/bash"}"#).unwrap();
        let f = check(Target::Opencode, &s, &p);
        assert!(has(&f, "sets the shell to /bin/bash"), "{:?}", f.open);
        std::fs::write(p.join("opencode.json"), "{ // c\n}").unwrap();
        assert!(has(
            &check(Target::Opencode, &s, &p),
            "cannot tell whether it sets the shell"
        ));
    }
}
