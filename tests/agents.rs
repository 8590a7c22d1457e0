//! What coding agents bring to a contained call, on each backend: their variables (the
//! editor and pager they choose, their markers, Gemini CLI's hardened git config as one
//! `GIT_CONFIG_*` set), a `git commit` without a terminal that fails at once instead of
//! waiting in `vi`, and their project configs (which make the agent run code on the host)
//! readable but never writable.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use efr_launcher::api::{BackendChoice, Io};
use efr_sandbox_tests::common::{Fixture, Ran, backends, run_plan};

/// The variables Gemini CLI gives each shell call (`packages/core`: the shell execution
/// service and `getSafeGitEnv`): its git hardening as one set, and its markers.
const GEMINI: &[(&str, &str)] = &[
    ("GIT_CONFIG_COUNT", "8"),
    ("GIT_CONFIG_KEY_0", "credential.helper"),
    ("GIT_CONFIG_VALUE_0", ""),
    ("GIT_CONFIG_KEY_1", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_1", ""),
    ("GIT_CONFIG_KEY_2", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_2", ""),
    ("GIT_CONFIG_KEY_3", "core.sshCommand"),
    ("GIT_CONFIG_VALUE_3", ""),
    ("GIT_CONFIG_KEY_4", "core.pager"),
    ("GIT_CONFIG_VALUE_4", "cat"),
    ("GIT_CONFIG_KEY_5", "core.editor"),
    ("GIT_CONFIG_VALUE_5", ""),
    ("GIT_CONFIG_KEY_6", "sequence.editor"),
    ("GIT_CONFIG_VALUE_6", ""),
    ("GIT_CONFIG_KEY_7", "diff.external"),
    ("GIT_CONFIG_VALUE_7", ""),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_SYSTEM", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_PAGER", "cat"),
    ("GH_PROMPT_DISABLED", "1"),
    ("GCM_INTERACTIVE", "never"),
    ("GEMINI_CLI", "1"),
];

/// A fixture whose project has one commit of its README (made on the host).
fn with_commit() -> Fixture {
    let fx = Fixture::new();
    for args in [&["add", "README"][..], &["commit", "-q", "-m", "first"]] {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&fx.proj)
            .args(args)
            .env("HOME", &fx.home)
            .status()
            .unwrap()
            .success();
        assert!(ok, "the fixture's first commit: git {args:?}");
    }
    fx
}

/// Runs `line` in `fx`'s project with `vars` added to the caller's environment and stdin a
/// socket the test holds open: as an agent's tool call, no terminal and no end of input
/// (an editor reading it would wait for ever).
fn run_as_agent(fx: &Fixture, backend: BackendChoice, vars: &[(&str, &str)], line: &str) -> Ran {
    let mut plan = fx.plan(line, backend, Vec::new());
    let env = plan.env.get_or_insert_with(Vec::new);
    for (k, v) in vars {
        env.push(efr_launcher::plan::EnvVar {
            name: k.to_string(),
            value: v.to_string(),
        });
    }
    let (held, given) = UnixStream::pair().unwrap();
    let r = run_plan(&plan, Some(Io::from(OwnedFd::from(given))));
    drop(held);
    r
}

fn out_lines(r: &Ran) -> Vec<&str> {
    r.stdout.lines().collect()
}

#[test]
fn gemini_hardened_git_set_reaches_the_call_whole_and_git_works() {
    for b in backends() {
        let fx = with_commit();
        let line = "env | grep -E '^(GIT_|GH_|GCM_|GEMINI_)' | sort; \
                    git status --short >/dev/null && echo STATUS-OK; \
                    git commit -q --amend --no-edit && echo AMEND-OK; \
                    echo pager=$(git config --get core.pager); \
                    git config --get core.fsmonitor >/dev/null && echo FSMONITOR-SET";
        let r = run_as_agent(&fx, b, GEMINI, line);
        let lines = out_lines(&r);
        for want in [
            "STATUS-OK",
            "pager=cat",
            "FSMONITOR-SET",
            "GIT_CONFIG_COUNT=8",
            "GIT_CONFIG_KEY_2=core.hooksPath",
            "GIT_CONFIG_VALUE_4=cat",
            "GIT_TERMINAL_PROMPT=0",
            "GIT_PAGER=cat",
            "GH_PROMPT_DISABLED=1",
            "GCM_INTERACTIVE=never",
            "GEMINI_CLI=1",
        ] {
            assert!(lines.contains(&want), "{b:?}: {want} missing: {r:?}");
        }
        // Gemini's git reads no user config (GIT_CONFIG_GLOBAL=/dev/null), inside the call
        // as outside: with no identity in the repository, the commit fails as it does for
        // the same agent without the sandbox, at once, with no editor started.
        assert!(
            lines.contains(&"GIT_CONFIG_GLOBAL=/dev/null"),
            "{b:?}: {r:?}"
        );
        assert!(!lines.contains(&"AMEND-OK"), "{b:?}: {r:?}");
        assert!(r.stderr.contains("identity unknown"), "{b:?}: {r:?}");
        assert!(r.outcome.setup_error.is_none(), "{b:?}: {r:?}");
    }
}

#[test]
fn a_set_naming_a_program_is_dropped_whole_and_git_still_works() {
    for b in backends() {
        let fx = with_commit();
        let vars = [
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "core.pager"),
            ("GIT_CONFIG_VALUE_0", "cat"),
            ("GIT_CONFIG_KEY_1", "core.sshCommand"),
            ("GIT_CONFIG_VALUE_1", "ssh -o ProxyCommand=evil"),
        ];
        let line = "env | grep -c '^GIT_CONFIG_' ; git status --short >/dev/null; echo status=$?";
        let r = run_as_agent(&fx, b, &vars, line);
        assert_eq!(out_lines(&r), ["0", "status=0"], "{b:?}: {r:?}");
        // Half a set (a count whose pairs are missing) never reaches git either.
        let r = run_as_agent(&fx, b, &[("GIT_CONFIG_COUNT", "1")], line);
        assert_eq!(out_lines(&r), ["0", "status=0"], "{b:?}: {r:?}");
    }
}

#[test]
fn claude_editor_amends_and_a_terminal_editor_fails_at_once() {
    for b in backends() {
        let fx = with_commit();
        // Claude Code's GIT_EDITOR=true keeps the message.
        let line = "timeout 60 git commit -q --amend; echo rc=$?; git log -1 --format=%s";
        let r = run_as_agent(&fx, b, &[("GIT_EDITOR", "true"), ("CLAUDECODE", "1")], line);
        assert_eq!(out_lines(&r), ["rc=0", "first"], "{b:?}: {r:?}");
        // No editor named and no terminal: git gets one that fails with a message, where
        // it would have started vi on a socket that never ends (timeout's 124).
        let line = "timeout 60 git commit -q --allow-empty; echo rc=$?";
        let r = run_as_agent(&fx, b, &[], line);
        assert_eq!(out_lines(&r), ["rc=1"], "{b:?}: {r:?}");
        assert!(
            r.stderr
                .contains("no editor in a contained call without a terminal"),
            "{b:?}: {r:?}"
        );
        // A `vi` from the user's shell (EDITOR, VISUAL) would wait the same way: git does
        // not get it without a terminal.
        let line = "timeout 60 git commit -q --allow-empty; echo rc=$?";
        let r = run_as_agent(&fx, b, &[("EDITOR", "vi"), ("VISUAL", "vi")], line);
        assert_eq!(out_lines(&r), ["rc=1"], "{b:?}: {r:?}");
        assert!(
            r.stderr
                .contains("no editor in a contained call without a terminal"),
            "{b:?}: {r:?}"
        );
    }
}

#[test]
fn agent_markers_and_prompts_reach_the_call() {
    let vars = [
        ("GIT_EDITOR", "true"),
        ("GIT_PAGER", "cat"),
        ("GH_PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GH_PROMPT_DISABLED", "1"),
        ("GCM_INTERACTIVE", "never"),
        ("CLAUDECODE", "1"),
        ("CLAUDE_CODE_ENTRYPOINT", "cli"),
        ("AI_AGENT", "claude-code"),
        ("CODEX_CI", "1"),
        ("CODEX_THREAD_ID", "0199a7c2-1f3e-7a10-9b1d-2f6c3e4d5a6b"),
        ("GEMINI_CLI", "1"),
        ("OPENCODE", "1"),
        ("AGENT", "opencode"),
    ];
    for b in backends() {
        let fx = Fixture::new();
        let r = run_as_agent(&fx, b, &vars, "env");
        let lines = out_lines(&r);
        for (k, v) in vars {
            let want = format!("{k}={v}");
            assert!(
                lines.contains(&want.as_str()),
                "{b:?}: {want} missing: {r:?}"
            );
        }
    }
}

/// Agents' project configs that make a program on the host run code, each as a file
/// below the protected entry (`read_only_inside` of `policy/defaults.toml`).
const AGENT_FILES: &[&str] = &[
    "opencode.json",
    "opencode.jsonc",
    ".opencode/plugins/p.js",
    ".opencode/opencode.jsonc",
    ".clinerules/hooks/PreToolUse",
    ".github/hooks/hooks.json",
    ".kiro/hooks/h.kiro.hook",
    ".kiro/settings/mcp.json",
    ".kiro/agents/a.json",
    ".amazonq/cli-agents/a.json",
    ".roo/mcp.json",
    ".kilocode/mcp.json",
    ".kilo/kilo.jsonc",
    "kilo.json",
    "kilo.jsonc",
    ".amazonq/mcp.json",
    "crush.json",
    ".crush.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
    ".cursor/hooks.json",
    ".cursor/mcp.json",
    ".gemini/settings.json",
    ".codex/config.toml",
    ".continue/mcpServers/s.yaml",
    ".windsurf/hooks.json",
    ".aider.conf.yml",
];

const ORIGINAL: &str = "original";

/// Files of [`AGENT_FILES`] protected alone: their directory holds text the agent writes
/// (rules), so a file beside them may be made.
const PROTECTED_ALONE: &[&str] = &[".roo/mcp.json", ".kilocode/mcp.json", ".amazonq/mcp.json"];

/// A line that tries every way to change `f` (and to add a file beside it, in a protected
/// directory) and prints `WROTE f` when one works.
fn attempts(f: &str) -> String {
    let dir = Path::new(f)
        .parent()
        .map(|d| d.to_string_lossy().into_owned());
    let beside = match &dir {
        Some(d) if !d.is_empty() && !PROTECTED_ALONE.contains(&f) => format!("{d}/planted"),
        _ => "planted-unused".to_string(),
    };
    format!(
        "{{ echo evil > {f}; }} 2>/dev/null && echo WROTE {f}; \
         {{ echo evil >> {f}; }} 2>/dev/null && echo WROTE {f}; \
         rm -f {f} 2>/dev/null && [ ! -e {f} ] && echo WROTE {f}; \
         mv {f} {f}.moved 2>/dev/null && echo WROTE {f}; \
         {{ echo evil > {beside}; }} 2>/dev/null && [ {beside} != planted-unused ] && echo WROTE {beside}; "
    )
}

#[test]
fn agent_configs_are_readable_and_never_writable() {
    for b in backends() {
        let fx = Fixture::new();
        let mut line = String::new();
        for f in AGENT_FILES {
            let p = Path::new(&fx.proj).join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, ORIGINAL).unwrap();
            line.push_str(&format!("echo \"READ {f} $(cat {f})\"; "));
            line.push_str(&attempts(f));
        }
        let r = run_as_agent(&fx, b, &[], &line);
        assert!(r.outcome.setup_error.is_none(), "{b:?}: {r:?}");
        for f in AGENT_FILES {
            let want = format!("READ {f} {ORIGINAL}");
            assert!(
                r.stdout.contains(&want),
                "{b:?}: {want} missing: {}",
                r.stdout
            );
            let host = std::fs::read_to_string(Path::new(&fx.proj).join(f)).unwrap_or_default();
            assert_eq!(host, ORIGINAL, "{b:?}: {f} changed on the host");
        }
        assert!(!r.stdout.contains("WROTE"), "{b:?}: {}", r.stdout);
        for f in AGENT_FILES {
            let moved = Path::new(&fx.proj).join(format!("{f}.moved"));
            assert!(!moved.exists(), "{b:?}: {f} moved");
        }
    }
}

/// Files of the same agents that are text an agent writes (specs, rules, instructions):
/// they stay writable, so ordinary work on them is not stopped.
const AGENT_TEXT: &[&str] = &[
    ".kiro/specs/feature/requirements.md",
    ".kiro/steering/product.md",
    ".roo/rules/style.md",
    ".kilocode/rules/style.md",
    ".clinerules/style.md",
    ".amazonq/rules/style.md",
    "AGENTS.md",
    "CLAUDE.md",
    "GEMINI.md",
];

#[test]
fn agents_text_files_stay_writable() {
    for b in backends() {
        let fx = Fixture::new();
        let mut line = String::new();
        for f in AGENT_TEXT {
            let parent = Path::new(f)
                .parent()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !parent.is_empty() {
                line.push_str(&format!("mkdir -p {parent}; "));
            }
            line.push_str(&format!("echo written > {f}; "));
        }
        let r = run_as_agent(&fx, b, &[], &line);
        for f in AGENT_TEXT {
            let host = std::fs::read_to_string(Path::new(&fx.proj).join(f)).unwrap_or_default();
            assert_eq!(host, "written\n", "{b:?}: {f}: {r:?}");
        }
    }
}

#[test]
fn missing_agent_configs_cannot_be_planted() {
    for b in backends() {
        let fx = Fixture::new();
        let mut line = String::new();
        for f in AGENT_FILES {
            let parent = Path::new(f)
                .parent()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !parent.is_empty() {
                line.push_str(&format!("mkdir -p {parent} 2>/dev/null; "));
            }
            line.push_str(&format!(
                "{{ echo evil > {f}; }} 2>/dev/null && echo WROTE {f}; "
            ));
        }
        let r = run_as_agent(&fx, b, &[], &line);
        assert!(r.outcome.setup_error.is_none(), "{b:?}: {r:?}");
        assert!(!r.stdout.contains("WROTE"), "{b:?}: {}", r.stdout);
        for f in AGENT_FILES {
            let p = Path::new(&fx.proj).join(f);
            assert!(!p.exists(), "{b:?}: {f} planted on the host");
        }
    }
}

/// The set rule reads a key as git does: git accepts exactly the keys it canonicalizes,
/// and names them as it does (`git config --list` with the key in the environment).
#[test]
fn set_rule_reads_keys_as_git_does() {
    let dir = tempfile::tempdir().unwrap();
    for key in [
        "core.pager",
        "Core.Pager",
        "CORE.HOOKSPATH",
        "remote.Origin.URL",
        "Remote.My.Dotted.Sub.Url",
        "url.https://Example.com/.insteadOf",
        "a-b.c-d",
        "x.y z.name",
        "core",
        "core.",
        ".name",
        "co re.name",
        "core.1name",
        "core.na_me",
        "core.na-me",
        "s.sub\nx.name",
        "",
    ] {
        let out = std::process::Command::new("git")
            .args(["config", "--list", "--show-scope"])
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", key)
            .env("GIT_CONFIG_VALUE_0", "v")
            .output()
            .unwrap();
        let ours = efr_sandbox_wire::gitenv::canonical_key(key);
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            let git = text
                .lines()
                .find_map(|l| l.strip_prefix("command\t")?.strip_suffix("=v"))
                .map(str::to_string);
            assert_eq!(ours, git, "{key:?}: {text}");
        } else {
            assert_eq!(ours, None, "{key:?}: git refused it: {out:?}");
        }
    }
}
