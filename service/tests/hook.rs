//! `efr-sandbox hook AGENT`: the real binary answering each agent's hook input (the
//! fixtures in `fixtures/hook/`), and the rewritten lines run for real the way each agent
//! runs them (Claude Code: `eval 'LINE' && pwd -P` in its bash; Codex: `bash -lc LINE`;
//! Gemini CLI: `bash -c LINE`), on each backend.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::backends;
use serde_json::Value;

const EFR_SANDBOX: &str = env!("CARGO_BIN_EXE_efr-sandbox");

/// A test's world outside `/tmp`: a home, a config naming the backend, a runtime dir and a
/// project that is a git repository.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new(backend: &str) -> World {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        for d in ["home", "config/efr", "run", "proj/.git", "proj/sub"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(
            dir.path().join("config/efr/config.toml"),
            format!("[sandbox]\nbackend = \"{backend}\"\n"),
        )
        .unwrap();
        let rt = dir.path().join("run");
        std::fs::set_permissions(&rt, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        World { dir }
    }

    fn proj(&self) -> PathBuf {
        self.dir.path().join("proj")
    }

    /// `exe ARGS` in `dir` with the world's settings (no service).
    fn cmd(&self, exe: &str, args: &[&str], dir: &Path) -> Command {
        let mut c = Command::new(exe);
        c.args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.dir.path().join("home"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("EFR_SANDBOX_NO_SERVICE", "1");
        c
    }

    /// The hook of `agent` on `input`.
    fn hook(&self, agent: &str, input: &str) -> Output {
        let mut c = self.cmd(EFR_SANDBOX, &["hook", agent], &self.proj());
        common::output_with_stdin(&mut c, input.as_bytes())
    }

    /// The fixture `name` for a call of `line` in `cwd`.
    fn fixture(&self, name: &str, line: &str, cwd: &Path) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hook")
            .join(name);
        std::fs::read_to_string(path)
            .unwrap()
            .replace("@CWD@", &cwd.to_string_lossy())
            .replace("@LINE@", &Value::String(line.into()).to_string())
    }

    /// The answer of `agent`'s hook for `line` in the project, from fixture `name`.
    fn answer(&self, agent: &str, name: &str, line: &str) -> Value {
        let o = self.hook(agent, &self.fixture(name, line, &self.proj()));
        assert_eq!(o.status.code(), Some(0), "{agent} {line}: {o:?}");
        serde_json::from_slice(&o.stdout).unwrap()
    }
}

fn text(o: &Output) -> (Option<i32>, String, String) {
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Claude's and Codex's decision and rewritten command.
fn pre_tool_use(v: &Value) -> (String, Option<String>, String) {
    let h = &v["hookSpecificOutput"];
    assert_eq!(h["hookEventName"], "PreToolUse", "{v}");
    (
        h["permissionDecision"].as_str().unwrap().into(),
        h["updatedInput"]["command"].as_str().map(String::from),
        h["permissionDecisionReason"].as_str().unwrap_or("").into(),
    )
}

#[test]
fn each_agents_answers() {
    let w = World::new("native");
    let host = "curl -sS https://example.com/";
    // Claude: allow rewritten (other keys kept), ask with the grant, deny user-only and
    // refused lines, `{}` for its file tools.
    let v = w.answer("claude", "claude-bash.json", "ls");
    let (d, cmd, _) = pre_tool_use(&v);
    assert_eq!(d, "allow");
    let cmd = cmd.unwrap();
    assert!(
        cmd.contains("EFR_SANDBOX_CONVERSATION=claude-9f2c1a7e-4b8d-4e55-9a0b-3c1d2e3f4a5b"),
        "{cmd}"
    );
    assert!(
        cmd.contains(&format!("EFR_SANDBOX_PROJECT={}", w.proj().display())),
        "{cmd}"
    );
    assert!(cmd.contains("/efr-bash -c -- "), "{cmd}");
    assert_eq!(v["hookSpecificOutput"]["updatedInput"]["timeout"], 120000);
    let (d, cmd, why) = pre_tool_use(&w.answer("claude", "claude-bash.json", host));
    assert_eq!(d, "ask");
    assert!(
        cmd.as_deref()
            .unwrap()
            .contains("EFR_SANDBOX_GRANTS=host=example.com"),
        "{cmd:?}"
    );
    assert!(
        why.contains("reaches example.com") && why.contains("grant host=example.com"),
        "{why}"
    );
    let (d, cmd, why) =
        pre_tool_use(&w.answer("claude", "claude-bash.json", "echo x >> ~/.bashrc"));
    assert_eq!((d.as_str(), cmd), ("deny", None));
    assert!(
        why.contains("only the user") && why.contains("--grant"),
        "{why}"
    );
    let (d, _, why) = pre_tool_use(&w.answer("claude", "claude-bash.json", "sudo id"));
    assert_eq!(d, "deny");
    assert!(why.contains("outside the sandbox"), "{why}");
    assert_eq!(
        w.answer("claude", "claude-write.json", ""),
        serde_json::json!({})
    );
    // Codex: allow rewritten; no ask (it would run the line as it was): deny naming the grant.
    let (d, cmd, _) = pre_tool_use(&w.answer("codex", "codex-bash.json", "ls"));
    assert_eq!(d, "allow");
    assert!(!cmd.as_deref().unwrap().contains("trap"), "{cmd:?}");
    let (d, cmd, why) = pre_tool_use(&w.answer("codex", "codex-bash.json", host));
    assert_eq!((d.as_str(), cmd), ("deny", None));
    assert!(why.contains("--grant host=example.com"), "{why}");
    assert_eq!(
        w.answer("codex", "codex-apply-patch.json", ""),
        serde_json::json!({})
    );
    // Gemini: its own words; the whole rewritten input. No ask (headless, it would wait
    // for ever): deny naming the grant (no service here to keep an approval).
    let v = w.answer("gemini", "gemini-shell.json", "ls");
    assert_eq!(v["decision"], "allow", "{v}");
    assert!(
        v["hookSpecificOutput"]["tool_input"]["command"]
            .as_str()
            .unwrap()
            .contains("efr-bash")
    );
    let v = w.answer("gemini", "gemini-shell.json", host);
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("--grant host=example.com"),
        "{v}"
    );
    let v = w.answer("gemini", "gemini-shell.json", "rm -rf /");
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(
        v["reason"].as_str().unwrap().contains("no grant opens it"),
        "{v}"
    );
    assert_eq!(
        w.answer("gemini", "gemini-read.json", ""),
        serde_json::json!({})
    );
}

#[test]
fn the_project_is_the_agents_not_the_lines_directory() {
    let w = World::new("native");
    let elsewhere = w.dir.path().join("home/.ssh");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let want = format!("EFR_SANDBOX_PROJECT={} ", w.proj().display());
    // Claude Code's cwd follows the lines' `cd`s; its project dir does not.
    let input = w.fixture("claude-bash.json", "ls", &elsewhere);
    let mut c = w.cmd(EFR_SANDBOX, &["hook", "claude"], &w.proj());
    c.env("CLAUDE_PROJECT_DIR", w.proj());
    let o = common::output_with_stdin(&mut c, input.as_bytes());
    let (_, cmd, _) = pre_tool_use(&serde_json::from_slice(&o.stdout).unwrap());
    assert!(cmd.as_deref().unwrap().contains(&want), "{cmd:?}");
    // Gemini's dir_path is the model's choice.
    let input = w.fixture("gemini-shell.json", "ls", &w.proj()).replace(
        r#""description":"#,
        &format!(r#""dir_path":"{}","description":"#, elsewhere.display()),
    );
    let o = w.hook("gemini", &input);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let cmd = v["hookSpecificOutput"]["tool_input"]["command"]
        .as_str()
        .unwrap();
    assert!(cmd.contains(&want), "{cmd}");
}

#[test]
fn without_a_runtime_dir_calls_run_with_no_conversation() {
    let w = World::new("native");
    let input = w.fixture("claude-bash.json", "echo ok", &w.proj());
    let mut c = w.cmd(EFR_SANDBOX, &["hook", "claude"], &w.proj());
    c.env_remove("XDG_RUNTIME_DIR");
    let o = common::output_with_stdin(&mut c, input.as_bytes());
    let (d, cmd, _) = pre_tool_use(&serde_json::from_slice(&o.stdout).unwrap());
    let cmd = cmd.unwrap();
    assert_eq!(d, "allow");
    assert!(
        cmd.starts_with("EFR_SANDBOX_PROJECT=") && !cmd.contains("CONVERSATION"),
        "{cmd}"
    );
    let mut c = w.cmd("/bin/bash", &["-c", &cmd], &w.proj());
    let (code, out, err) = text(&c.env_remove("XDG_RUNTIME_DIR").output().unwrap());
    assert_eq!((code, out.as_str()), (Some(0), "ok\n"), "{err}");
}

#[test]
fn bad_input_blocks_with_exit_2() {
    let w = World::new("native");
    let claude_input = w.fixture("claude-bash.json", "ls", &w.proj());
    for (agent, input) in [
        ("claude", "not json".to_string()),
        ("claude", "{}".to_string()),
        // Another agent's event: a hook installed for the wrong agent blocks, not passes.
        ("gemini", claude_input),
        ("codex", r#"{"hook_event_name":"PreToolUse","cwd":"/","session_id":"s","tool_name":"Bash","tool_input":{}}"#.into()),
        // A mistyped agent in an agent's config.
        ("claud", "{}".to_string()),
    ] {
        let (code, out, err) = text(&w.hook(agent, &input));
        assert_eq!(code, Some(2), "{agent} {input}: {out} {err}");
        assert!(out.is_empty() && err.starts_with("efr-sandbox hook"), "{err}");
    }
}

/// Lines no quoting may change: quotes of both kinds, a newline, `$(...)`, a `$` that must
/// stay for the inner shell, a leading `-`.
const HOSTILE: &[(&str, &str, i32)] = &[
    (
        r#"printf '<%s>' "it's" 'a"b' "$(echo sub)"; echo"#,
        "<it's><a\"b><sub>\n",
        0,
    ),
    ("echo one\necho 'two'\n(exit 4)", "one\ntwo\n", 4),
    ("x='$HOME'; echo \"$x\" \\$PATH", "$HOME $PATH\n", 0),
    ("-e; echo after", "after\n", 0),
];

#[test]
fn rewritten_lines_run_as_the_agents_run_them() {
    for b in backends() {
        let w = World::new(b);
        for (line, want, status) in HOSTILE {
            for (agent, fixture) in [
                ("codex", "codex-bash.json"),
                ("gemini", "gemini-shell.json"),
            ] {
                let v = w.answer(agent, fixture, line);
                let cmd = v["hookSpecificOutput"]["updatedInput"]["command"]
                    .as_str()
                    .or(v["hookSpecificOutput"]["tool_input"]["command"].as_str())
                    .unwrap_or_else(|| panic!("{v}"));
                let args = if agent == "codex" {
                    ["-lc", cmd]
                } else {
                    ["-c", cmd]
                };
                let o = w.cmd("/bin/bash", &args, &w.proj()).output().unwrap();
                let (code, out, err) = text(&o);
                assert_eq!(
                    (code, out.as_str()),
                    (Some(*status), *want),
                    "{b} {agent} {line:?}: {err}"
                );
            }
        }
    }
}

/// Claude's bash runs `eval 'REWRITTEN' && pwd -P >| FILE`: the line's output and status,
/// and its last directory when it exists on the host.
fn claude_run(w: &World, line: &str, start: &Path) -> (Option<i32>, String, String) {
    claude_run_as(w, line, start, "toolu_01ABCdef234")
}

/// `claude_run` for the tool call `id`.
fn claude_run_as(w: &World, line: &str, start: &Path, id: &str) -> (Option<i32>, String, String) {
    let input = w
        .fixture("claude-bash.json", line, start)
        .replace("toolu_01ABCdef234", id);
    let o = w.hook("claude", &input);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{o:?}"));
    let (d, cmd, why) = pre_tool_use(&v);
    assert_eq!(d, "allow", "{line}: {why}");
    let quoted = format!("'{}'", cmd.unwrap().replace('\'', r"'\''"));
    let script = format!("eval {quoted} && pwd -P");
    text(
        &w.cmd("/bin/bash", &["-c", &script], start)
            .output()
            .unwrap(),
    )
}

#[test]
fn claude_gets_the_lines_last_directory() {
    for b in backends() {
        let w = World::new(b);
        let proj = w.proj();
        // `cd` carried back, with quoting-hostile output before it.
        let (code, out, err) = claude_run(&w, "cd sub && echo \"it's\" '$(no)'", &proj);
        assert_eq!(code, Some(0), "{b}: {err}");
        assert_eq!(out, format!("it's $(no)\n{}/sub\n", proj.display()), "{b}");
        // A directory with a blank and a quote in its name.
        let (code, out, _) = claude_run(&w, "mkdir -p \"a b'c\" && cd \"a b'c\"", &proj);
        assert_eq!(
            (code, out),
            (Some(0), format!("{}/a b'c\n", proj.display())),
            "{b}"
        );
        // `exit N`: the status is the line's (and Claude records no directory, as without
        // the sandbox).
        let (code, out, _) = claude_run(&w, "cd sub; exit 3", &proj);
        assert_eq!((code, out), (Some(3), String::new()), "{b}");
        // A directory only the call has (its private /tmp): the shell stays where it was.
        let (code, out, _) = claude_run(
            &w,
            "mkdir -p /tmp/only-inside && cd /tmp/only-inside",
            &proj,
        );
        assert_eq!(
            (code, out),
            (Some(0), format!("{}\n", proj.display())),
            "{b}"
        );
        // Nothing of the route is left in the project or the scratch dir.
        let scratch = w.dir.path().join("run/efr/scratch");
        for d in std::fs::read_dir(&scratch).unwrap() {
            let left: Vec<_> = std::fs::read_dir(d.unwrap().path()).unwrap().collect();
            assert!(left.is_empty(), "{b}: {left:?}");
        }
    }
}

#[test]
fn install_keeps_the_users_settings_prints_the_diff_and_is_idempotent() {
    let w = World::new("native");
    let home = w.dir.path().join("home");
    let settings = home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mine = r#"{"model": "opus", "permissions": {"allow": ["Bash(git status)"]}}"#;
    std::fs::write(&settings, mine).unwrap();
    let install = |yes: bool| {
        let mut a = vec!["hook", "install", "claude"];
        if yes {
            a.push("--yes");
        }
        let o = w
            .cmd(EFR_SANDBOX, &a, &w.proj())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        text(&o)
    };
    // No terminal and no --yes: the diff, nothing written.
    let (code, out, err) = install(false);
    assert_eq!(code, Some(1), "{out} {err}");
    assert!(out.contains("+++ ") && out.contains("hook claude"), "{out}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), mine);
    // --yes: written, the user's keys kept, and the check passes.
    let (code, out, err) = install(true);
    assert_eq!(code, Some(0), "{out} {err}");
    assert!(out.contains("its shell calls run contained"), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(v["model"], "opus");
    assert_eq!(v["permissions"]["allow"][0], "Bash(git status)");
    let cmd = v["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(
        cmd.starts_with('/') && cmd.ends_with("/efr-sandbox hook claude"),
        "{cmd}"
    );
    // Again: nothing to change.
    let before = std::fs::read_to_string(&settings).unwrap();
    let (code, out, _) = install(true);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("already installed; nothing to change"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), before);
    // A project layer that turns hooks off is named, and check fails.
    std::fs::create_dir_all(w.proj().join(".claude")).unwrap();
    std::fs::write(
        w.proj().join(".claude/settings.json"),
        r#"{"disableAllHooks": true}"#,
    )
    .unwrap();
    let o = w
        .cmd(EFR_SANDBOX, &["hook", "check", "claude"], &w.proj())
        .output()
        .unwrap();
    let (code, out, _) = text(&o);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("fails open: ") && out.contains("disableAllHooks"),
        "{out}"
    );
}

#[test]
fn parallel_claude_calls_each_get_their_own_directory() {
    let w = World::new("native");
    let proj = w.proj();
    for d in ["p0", "p1", "p2", "p3"] {
        std::fs::create_dir_all(proj.join(d)).unwrap();
    }
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let (w, proj) = (&w, &proj);
                s.spawn(move || {
                    let line = format!("cd p{i} && sleep 0.3");
                    (i, claude_run_as(w, &line, proj, &format!("toolu_par{i}")))
                })
            })
            .collect();
        for r in runs {
            let (i, (code, out, err)) = r.join().unwrap();
            assert_eq!(code, Some(0), "{err}");
            assert_eq!(out, format!("{}/p{i}\n", proj.display()));
        }
    });
}
