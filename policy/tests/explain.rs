//! `sandbox.explain` on real files in a temporary directory.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use efr_policy::config::{Config, Env};
use efr_policy::explain::{explain, explain_path, render_text};
use efr_sandbox_wire::{Access, ExplainParams, ExplainResult, FileKind, Grant, TargetClass};

struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    home: PathBuf,
    proj: PathBuf,
    env: Env,
}

fn touch(p: &Path) {
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(p, b"x\n").unwrap();
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let home = base.join("home");
    let proj = home.join("proj");
    touch(&home.join(".ssh/id_ed25519"));
    touch(&home.join(".ssh/config"));
    touch(&home.join(".bashrc"));
    touch(&home.join("notes.txt"));
    touch(&home.join(".cache/pip/wheel"));
    touch(&home.join(".local/share/Trash/files/old.txt"));
    touch(&proj.join("src/main.rs"));
    touch(&proj.join(".git/hooks/pre-commit"));
    touch(&proj.join(".git/config"));
    touch(&proj.join(".git/objects/ab/cdef"));
    touch(&proj.join(".gitmodules"));
    touch(&proj.join(".envrc"));
    touch(&proj.join(".vscode/tasks.json"));
    touch(&proj.join("target/debug/app"));
    touch(&proj.join("node_modules/x/index.js"));
    symlink("../.ssh/id_ed25519", proj.join("key")).unwrap();
    symlink(home.join(".ssh"), proj.join("sshdir")).unwrap();
    symlink("does-not-exist", proj.join("dangling")).unwrap();
    symlink("src/main.rs", proj.join("main-link")).unwrap();
    fs::create_dir_all(base.join("scratch")).unwrap();
    fs::create_dir_all(base.join("tmp")).unwrap();
    fs::create_dir_all(base.join("run")).unwrap();
    touch(&base.join("run/bus"));
    let mut env = Env::new(&home);
    env.scratch = Some(base.join("scratch"));
    env.tmp = base.join("tmp");
    env.runtime_dir = Some(base.join("run"));
    World {
        _dir: dir,
        base,
        home,
        proj,
        env,
    }
}

impl World {
    fn ask(&self, path: &str) -> ExplainResult {
        self.ask_with(path, &Config::defaults())
    }

    fn ask_with(&self, path: &str, config: &Config) -> ExplainResult {
        let params = ExplainParams {
            path: path.to_string(),
            cwd: Some(self.proj.display().to_string()),
            projects: vec![self.proj.display().to_string()],
        };
        explain(&params, config, &self.env).unwrap()
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn masked_file() {
    let w = world();
    let r = w.ask("~/.ssh/id_ed25519");
    assert_eq!(r.class, TargetClass::Masked);
    assert_eq!(r.access, Access::None);
    assert_eq!(r.kind, FileKind::File);
    let m = r.masked.as_ref().unwrap();
    assert_eq!(
        (m.key.as_str(), m.rule.as_str()),
        ("sandbox.masks", "~/.ssh")
    );
    assert_eq!(
        r.grant.as_ref().unwrap().grant,
        Grant::Unmask {
            path: s(&w.home.join(".ssh"))
        }
    );
    assert_eq!(r.shown, "~/.ssh/id_ed25519");
    let text = render_text(&r);
    assert!(
        text.contains("access     none: masked by sandbox.masks rule ~/.ssh ("),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "fix        grant unmask={} if this call really needs it",
            s(&w.home.join(".ssh"))
        )),
        "{text}"
    );
}

#[test]
fn missing_file_under_masked_dir() {
    let w = world();
    let r = w.ask("~/.ssh/not-there/id_rsa");
    assert!(!r.exists);
    assert_eq!(r.kind, FileKind::Missing);
    assert_eq!(r.class, TargetClass::Masked);
    assert_eq!(r.access, Access::None);
}

#[test]
fn link_from_project_into_masked_dir() {
    let w = world();
    let r = w.ask("key");
    assert_eq!(r.kind, FileKind::Symlink);
    assert_eq!(r.class, TargetClass::Masked);
    assert_eq!(r.access, Access::None);
    assert_eq!(r.canonical, s(&w.home.join(".ssh/id_ed25519")));
    let l = r.link.as_ref().unwrap();
    assert_eq!(l.link, s(&w.proj.join("key")));
    assert_eq!(l.points_to, "../.ssh/id_ed25519");
    assert_eq!(l.target_kind, FileKind::File);
    assert!(render_text(&r).contains("link       "));
}

#[test]
fn parent_link_into_masked_dir() {
    let w = world();
    let r = w.ask("sshdir/id_ed25519");
    assert_eq!(r.kind, FileKind::File);
    assert_eq!(r.class, TargetClass::Masked);
    let l = r.link.as_ref().unwrap();
    assert_eq!(l.link, s(&w.proj.join("sshdir")));
    assert_eq!(l.target_kind, FileKind::Dir);
    assert_eq!(l.resolved, s(&w.home.join(".ssh")));
}

#[test]
fn dotdot_escaping_the_project() {
    let w = world();
    let r = w.ask("src/../../.ssh/id_ed25519");
    assert_eq!(r.class, TargetClass::Masked);
    let r = w.ask("../notes.txt");
    assert_eq!(r.class, TargetClass::Home);
    assert_eq!(r.access, Access::Read);
    assert_eq!(r.canonical, s(&w.home.join("notes.txt")));
    assert_eq!(r.shown, "~/notes.txt");
    assert_eq!(
        r.grant.unwrap().grant,
        Grant::Write {
            path: s(&w.home.join("notes.txt"))
        }
    );
}

#[test]
fn relative_path_with_cwd() {
    let w = world();
    let params = ExplainParams {
        path: "main.rs".into(),
        cwd: Some(s(&w.proj.join("src"))),
        projects: vec![s(&w.proj)],
    };
    let r = explain(&params, &Config::defaults(), &w.env).unwrap();
    assert_eq!(r.path, "main.rs");
    assert_eq!(r.class, TargetClass::Project);
    assert_eq!(r.access, Access::Write);
    assert_eq!(r.shown, "proj/src/main.rs");
    let by = r.writable_by.as_ref().unwrap();
    assert_eq!(by.key, "--project");
    assert!(r.grant.is_none());
    assert!(render_text(&r).contains("fix        none needed"));
}

#[test]
fn relative_path_without_cwd_is_an_error() {
    let w = world();
    let params = ExplainParams {
        path: "x".into(),
        cwd: None,
        projects: vec![],
    };
    let e = explain(&params, &Config::defaults(), &w.env).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot explain relative path x: no working directory was given"
    );
    let params = ExplainParams {
        path: "x".into(),
        cwd: Some("rel".into()),
        projects: vec![],
    };
    assert!(explain(&params, &Config::defaults(), &w.env).is_err());
    let params = ExplainParams {
        path: "~bob/x".into(),
        cwd: None,
        projects: vec![],
    };
    assert!(explain(&params, &Config::defaults(), &w.env).is_err());
    let params = ExplainParams {
        path: "".into(),
        cwd: Some("/".into()),
        projects: vec![],
    };
    assert!(explain(&params, &Config::defaults(), &w.env).is_err());
}

#[test]
fn missing_path_in_project() {
    let w = world();
    let r = w.ask("new/dir/file.txt");
    assert!(!r.exists);
    assert_eq!(r.kind, FileKind::Missing);
    assert_eq!(r.class, TargetClass::Project);
    assert_eq!(r.access, Access::Write);
    assert_eq!(r.canonical, s(&w.proj.join("new/dir/file.txt")));
    assert!(render_text(&r).contains("exists     no"));
}

#[test]
fn missing_path_in_system() {
    let w = world();
    let r = w.ask("/nonexistent-efr-dir/sub/../file");
    assert!(!r.exists);
    assert_eq!(r.canonical, "/nonexistent-efr-dir/file");
    assert_eq!(r.class, TargetClass::System);
    assert_eq!(r.access, Access::Read);
    assert_eq!(
        r.grant.as_ref().unwrap().grant,
        Grant::Write {
            path: "/nonexistent-efr-dir/file".into()
        }
    );
    assert!(render_text(&r).contains("cannot create it"));
}

#[test]
fn non_utf8_names() {
    let w = world();
    let name = std::ffi::OsStr::from_bytes(b"caf\xff.txt");
    touch(&w.proj.join(name));
    // Through the wire: `\xNN` read back as the byte.
    let r = w.ask("caf\\xff.txt");
    assert!(r.exists);
    assert!(r.non_utf8);
    assert_eq!(r.canonical, format!("{}/caf\\xff.txt", s(&w.proj)));
    assert_eq!(r.shown, "proj/caf\\xff.txt");
    assert_eq!(r.access, Access::Write);
    // Through the library, as the CLI passes an OsStr.
    let r = explain_path(
        &w.proj.join(name),
        None,
        std::slice::from_ref(&w.proj),
        &Config::defaults(),
        &w.env,
    )
    .unwrap();
    assert!(r.non_utf8);
    assert_eq!(r.path, format!("{}/caf\\xff.txt", s(&w.proj)));
    assert!(render_text(&r).contains("note "));
    // A missing non-UTF-8 name under a masked dir.
    let r = explain_path(
        &w.home.join(".ssh").join(name),
        None,
        &[],
        &Config::defaults(),
        &w.env,
    )
    .unwrap();
    assert!(r.non_utf8);
    assert_eq!(r.class, TargetClass::Masked);
}

#[test]
fn git_hooks_and_config_are_read_only_in_the_project() {
    let w = world();
    for p in [
        ".git/hooks/pre-commit",
        ".git/hooks",
        ".git/hooks/post-checkout",
        ".git/config",
    ] {
        let r = w.ask(p);
        assert_eq!(r.access, Access::Read, "{p}");
        // Hooks are also a floor (writing one needs the user); the config is not.
        let class = if p.contains("hooks") {
            TargetClass::Floor
        } else {
            TargetClass::Project
        };
        assert_eq!(r.class, class, "{p}");
        let ro = r.read_only.as_ref().unwrap();
        assert_eq!(ro.key, "sandbox.read_only_inside", "{p}");
        assert!(matches!(
            r.grant.as_ref().unwrap().grant,
            Grant::Write { .. }
        ));
    }
    let r = w.ask(".git/hooks");
    let text = render_text(&r);
    assert!(text.contains("read: read-only inside a writable root, by sandbox.read_only_inside rule .git/hooks (git hooks run outside the sandbox)"), "{text}");
    // git keeps working: objects are writable.
    let r = w.ask(".git/objects/ab/cdef");
    assert_eq!(r.access, Access::Write);
    assert!(r.read_only.is_none());
}

#[test]
fn editor_and_direnv_files_are_read_only() {
    let w = world();
    for p in [
        ".gitmodules",
        ".envrc",
        ".vscode/tasks.json",
        ".idea/workspace.xml",
        ".efr/config.toml",
    ] {
        let r = w.ask(p);
        assert_eq!(r.access, Access::Read, "{p}");
        assert!(r.read_only.is_some(), "{p}");
    }
}

/// Editor, agent and tool configs that a program on the host runs later: each default
/// entry is read-only inside a project root, by its own rule, whether it exists or not.
#[test]
fn tool_configs_that_run_commands_are_read_only() {
    let w = world();
    // Some exist (a file, a directory's file), most do not: both are covered.
    touch(&w.proj.join(".claude/settings.json"));
    touch(&w.proj.join(".mcp.json"));
    touch(&w.proj.join(".husky/pre-commit"));
    touch(&w.proj.join("lefthook.toml"));
    // (path asked, rule that covers it)
    let cases = [
        (".claude/settings.json", ".claude"),
        (".claude/settings.local.json", ".claude"),
        (".claude/commands/deploy.md", ".claude"),
        (".mcp.json", ".mcp.json"),
        (".cursor/mcp.json", ".cursor"),
        (".cursor/hooks.json", ".cursor"),
        (".gemini/settings.json", ".gemini"),
        (".codex/config.toml", ".codex"),
        (".continue/mcpServers/server.yaml", ".continue"),
        (".windsurf/hooks.json", ".windsurf"),
        (".aider.conf.yml", ".aider.conf.yml"),
        (".zed/tasks.json", ".zed"),
        (".zed/settings.json", ".zed"),
        (".helix/languages.toml", ".helix"),
        (".nvim.lua", ".nvim.lua"),
        (".nvimrc", ".nvimrc"),
        (".exrc", ".exrc"),
        (".vimrc", ".vimrc"),
        (".lazy.lua", ".lazy.lua"),
        (".dir-locals.el", ".dir-locals.el"),
        (".dir-locals-2.el", ".dir-locals-2.el"),
        (".devcontainer/devcontainer.json", ".devcontainer"),
        (".devcontainer.json", ".devcontainer.json"),
        (".husky/pre-commit", ".husky"),
        (".pre-commit-config.yaml", ".pre-commit-config.yaml"),
        ("lefthook.yml", "lefthook.yml"),
        (".lefthook.yml", ".lefthook.yml"),
        ("lefthook-local.yml", "lefthook-local.yml"),
        (".lefthook-local.yml", ".lefthook-local.yml"),
        (".lefthook/pre-commit/check.sh", ".lefthook"),
        (".lefthook-local/pre-push/x.sh", ".lefthook-local"),
        ("lefthook.toml", "lefthook.*"),
        (".lefthook.json", ".lefthook.*"),
        ("lefthook-local.yaml", "lefthook-local.*"),
        (".lefthook-local.toml", ".lefthook-local.*"),
        (".config/lefthook.yml", ".config/lefthook*"),
        ("mise.toml", "mise.toml"),
        (".mise.toml", ".mise.toml"),
        ("mise.local.toml", "mise.local.toml"),
        (".mise.local.toml", ".mise.local.toml"),
        (".mise/config.toml", ".mise"),
        ("mise/config.toml", "mise/config.toml"),
        (".config/mise.toml", ".config/mise.toml"),
        (".config/mise/conf.d/hooks.toml", ".config/mise"),
        ("mise.dev.toml", "mise.*.toml"),
        (".mise.dev.toml", ".mise.*.toml"),
    ];
    for (p, rule) in cases {
        let r = w.ask(p);
        assert_eq!(r.access, Access::Read, "{p}");
        assert_eq!(r.class, TargetClass::Project, "{p}");
        let ro = r.read_only.as_ref().unwrap_or_else(|| panic!("{p}"));
        assert_eq!(ro.key, "sandbox.read_only_inside", "{p}");
        assert_eq!(ro.rule, rule, "{p}");
        assert!(!ro.reason.is_empty(), "{p}");
        // A write needs a grant, as for .envrc.
        assert!(
            matches!(r.grant.as_ref().unwrap().grant, Grant::Write { .. }),
            "{p}"
        );
    }
    let text = render_text(&w.ask(".mcp.json"));
    assert!(
        text.contains("by sandbox.read_only_inside rule .mcp.json (claude code starts"),
        "{text}"
    );
}

/// Project commands the user runs on purpose stay writable (see defaults.toml), and so do
/// ordinary files whose names only look like a protected one.
#[test]
fn project_command_files_stay_writable() {
    let w = world();
    for p in [
        "Makefile",
        "package.json",
        "justfile",
        "build.rs",
        "tox.ini",
        "AGENTS.md",
        "CLAUDE.md",
        "src/.mcp.json",
        "docs/.claude/notes.md",
        "src/mise.toml",
        "lefthook",
        ".config/other.toml",
        ".mise-cache/x",
    ] {
        let r = w.ask(p);
        assert_eq!(r.access, Access::Write, "{p}");
        assert!(r.read_only.is_none(), "{p}: {:?}", r.read_only);
    }
}

#[test]
fn worktree_git_file_points_at_a_read_only_gitdir() {
    let w = world();
    let store = w.base.join("store/repo.git");
    touch(&store.join("config"));
    touch(&store.join("hooks/post-checkout"));
    touch(&store.join("worktrees/wt/HEAD"));
    fs::write(store.join("worktrees/wt/commondir"), "../..\n").unwrap();
    let wt = w.home.join("wt");
    fs::create_dir_all(&wt).unwrap();
    fs::write(
        wt.join(".git"),
        format!("gitdir: {}\n", s(&store.join("worktrees/wt"))),
    )
    .unwrap();
    let text = format!("[sandbox]\nwritable = [\"{}\"]\n", s(&w.base.join("store")));
    let config = Config::from_toml_str(&text, Path::new("/cfg/config.toml")).unwrap();
    let ask = |p: &Path| {
        let params = ExplainParams {
            path: s(p),
            cwd: None,
            projects: vec![s(&wt)],
        };
        explain(&params, &config, &w.env).unwrap()
    };
    // The common dir's hooks and config.
    let r = ask(&store.join("hooks/post-checkout"));
    assert_eq!(r.access, Access::Read);
    let ro = r.read_only.unwrap();
    assert_eq!(ro.rule, ".git/hooks");
    assert!(ro.reason.contains("the git dir of"), "{}", ro.reason);
    assert_eq!(ask(&store.join("config")).access, Access::Read);
    // The worktree's own commondir.
    assert_eq!(
        ask(&store.join("worktrees/wt/commondir")).access,
        Access::Read
    );
    // The worktree's HEAD stays writable (git works).
    let r = ask(&store.join("worktrees/wt/HEAD"));
    assert_eq!(r.access, Access::Write);
    assert_eq!(r.writable_by.unwrap().key, "sandbox.writable");
    // The .git file itself.
    let r = ask(&wt.join(".git"));
    assert_eq!(r.access, Access::Read);
    assert_eq!(r.read_only.unwrap().rule, ".git");
}

#[test]
fn project_root_is_the_home() {
    let w = world();
    let params = |p: &str| ExplainParams {
        path: p.into(),
        cwd: None,
        projects: vec![s(&w.home)],
    };
    let r = explain(&params("~/.bashrc"), &Config::defaults(), &w.env).unwrap();
    assert_eq!(r.class, TargetClass::Floor);
    assert_eq!(r.access, Access::Read);
    assert_eq!(r.floor.as_ref().unwrap().key, "floors.paths");
    assert_eq!(r.read_only.as_ref().unwrap().key, "floors.paths");
    let g = r.grant.unwrap();
    assert!(g.user_only);
    assert_eq!(
        g.grant,
        Grant::Write {
            path: s(&w.home.join(".bashrc"))
        }
    );
    let r = explain(&params("~/notes.txt"), &Config::defaults(), &w.env).unwrap();
    assert_eq!(r.access, Access::Write);
    assert_eq!(r.class, TargetClass::Project);
    assert_eq!(r.shown, "home/notes.txt");
    // Masks still hold inside a project that is the home.
    let r = explain(&params("~/.ssh/id_ed25519"), &Config::defaults(), &w.env).unwrap();
    assert_eq!(r.access, Access::None);
    // A cache inside the home-project is a cache.
    let r = explain(&params("~/.cache/pip/wheel"), &Config::defaults(), &w.env).unwrap();
    assert_eq!(r.class, TargetClass::Cache);
}

#[test]
fn floor_paths() {
    let w = world();
    for p in [
        "~/.bashrc",
        "~/.profile",
        "~/.config/systemd/user/evil.service",
        "~/.config/autostart/x.desktop",
        "~/.gitconfig",
        "/var/spool/cron/crontabs/u",
    ] {
        let r = w.ask(p);
        assert_eq!(r.class, TargetClass::Floor, "{p}");
        assert_eq!(r.access, Access::Read, "{p}");
        assert!(r.grant.as_ref().unwrap().user_only, "{p}");
    }
    let text = render_text(&w.ask("~/.bashrc"));
    assert!(
        text.contains("floor      floors.paths rule ~/.bashrc (runs in every bash shell)"),
        "{text}"
    );
    assert!(text.contains("only you can approve it"), "{text}");
    // ~/.ssh/config: masked first, and a floor.
    let r = w.ask("~/.ssh/config");
    assert_eq!(r.class, TargetClass::Masked);
    assert!(r.floor.is_some());
}

#[test]
fn floor_through_a_link() {
    let w = world();
    symlink(w.home.join(".bashrc"), w.proj.join("rc")).unwrap();
    let r = w.ask("rc");
    assert_eq!(r.class, TargetClass::Floor);
    assert_eq!(r.access, Access::Read);
}

#[test]
fn scratch_and_tmp() {
    let w = world();
    let r = w.ask(&s(&w.base.join("scratch/out/a.txt")));
    assert_eq!(r.class, TargetClass::Scratch);
    assert_eq!(r.access, Access::Write);
    assert_eq!(r.shown, "$SCRATCH/out/a.txt");
    assert_eq!(r.writable_by.as_ref().unwrap().rule, "$SCRATCH");
    let r = w.ask(&s(&w.base.join("tmp/x")));
    assert_eq!(r.class, TargetClass::Tmp);
    assert_eq!(r.access, Access::Write);
    assert_eq!(r.writable_by.as_ref().unwrap().rule, "/tmp");
}

#[test]
fn runtime_dir_is_masked_but_scratch_inside_it_is_not() {
    let mut w = world();
    let r = w.ask(&s(&w.base.join("run/bus")));
    assert_eq!(r.class, TargetClass::Masked);
    assert_eq!(r.masked.unwrap().rule, "$XDG_RUNTIME_DIR");
    fs::create_dir_all(w.base.join("run/efr/scratch")).unwrap();
    w.env.scratch = Some(w.base.join("run/efr/scratch"));
    let r = w.ask(&s(&w.base.join("run/efr/scratch/f")));
    assert_eq!(r.class, TargetClass::Scratch);
    assert_eq!(r.access, Access::Write);
    assert!(r.masked.is_none());
}

#[test]
fn etc_passwd_is_read() {
    let w = world();
    let r = w.ask("/etc/passwd");
    assert!(r.exists);
    assert_eq!(r.class, TargetClass::System);
    assert_eq!(r.access, Access::Read);
    assert_eq!(
        r.grant.as_ref().unwrap().grant,
        Grant::Write {
            path: "/etc/passwd".into()
        }
    );
    let text = render_text(&r);
    assert!(
        text.contains("access     read: outside every writable root"),
        "{text}"
    );
    assert!(
        text.contains("fix        grant write=/etc/passwd if this call really needs it"),
        "{text}"
    );
}

#[test]
fn cache_trash_and_home() {
    let w = world();
    let r = w.ask("~/.cache/pip/wheel");
    assert_eq!(r.class, TargetClass::Cache);
    assert_eq!(r.access, Access::Read);
    let r = w.ask("~/.local/share/Trash/files/old.txt");
    assert_eq!(r.class, TargetClass::Trash);
    let r = w.ask("~");
    assert_eq!(r.class, TargetClass::Home);
    assert_eq!(r.shown, "~");
    assert_eq!(r.kind, FileKind::Dir);
}

#[test]
fn build_output_in_project() {
    let w = world();
    for p in ["target/debug/app", "target", "node_modules/x/index.js"] {
        let r = w.ask(p);
        assert_eq!(r.class, TargetClass::BuildOutput, "{p}");
        assert_eq!(r.access, Access::Write, "{p}");
    }
    assert_eq!(w.ask("src/main.rs").class, TargetClass::Project);
    assert_eq!(w.ask(&s(&w.proj)).shown, "proj");
}

#[test]
fn sockets_and_fifos() {
    let w = world();
    let _in_project = std::os::unix::net::UnixListener::bind(w.proj.join("app.sock")).unwrap();
    let r = w.ask("app.sock");
    assert_eq!(r.kind, FileKind::Socket);
    assert_eq!(r.access, Access::Write);
    let _host = std::os::unix::net::UnixListener::bind(w.home.join("agent.sock")).unwrap();
    let r = w.ask("~/agent.sock");
    assert_eq!(r.kind, FileKind::Socket);
    assert_eq!(r.access, Access::None);
    assert_eq!(
        r.grant.as_ref().unwrap().grant,
        Grant::Socket {
            path: s(&w.home.join("agent.sock"))
        }
    );
    assert!(render_text(&r).contains("cannot connect"));
    let ok = std::process::Command::new("mkfifo")
        .arg(w.proj.join("pipe"))
        .status()
        .unwrap();
    assert!(ok.success());
    let r = w.ask("pipe");
    assert_eq!(r.kind, FileKind::Fifo);
    assert_eq!(r.access, Access::Write);
}

#[test]
fn devices() {
    let w = world();
    let r = w.ask("/dev/null");
    assert_eq!(r.kind, FileKind::CharDevice);
    assert_eq!(r.access, Access::Write);
    assert_eq!(r.writable_by.unwrap().key, "builtin");
    for dev in [
        "/dev/kmsg",
        "/dev/mem",
        "/dev/sda",
        "/dev/vda",
        "/dev/loop0",
    ] {
        if fs::symlink_metadata(dev).is_ok() {
            let r = w.ask(dev);
            assert_eq!(r.access, Access::None, "{dev}");
            assert_eq!(r.grant.unwrap().grant, Grant::Device { path: dev.into() });
        }
    }
}

#[test]
fn dangling_and_plain_links() {
    let w = world();
    let r = w.ask("dangling");
    assert!(r.exists);
    assert_eq!(r.kind, FileKind::Symlink);
    assert_eq!(r.link.as_ref().unwrap().target_kind, FileKind::Missing);
    assert_eq!(r.access, Access::Write);
    let r = w.ask("main-link");
    assert_eq!(r.canonical, s(&w.proj.join("src/main.rs")));
    assert_eq!(r.link.as_ref().unwrap().target_kind, FileKind::File);
    // A loop ends with an answer, not a hang.
    symlink("loop-b", w.proj.join("loop-a")).unwrap();
    symlink("loop-a", w.proj.join("loop-b")).unwrap();
    let r = w.ask("loop-a/x");
    assert_eq!(r.class, TargetClass::Project);
}

#[test]
fn write_grant_and_sandbox_writable() {
    let w = world();
    fs::create_dir_all(w.home.join("extra")).unwrap();
    let r = w.ask("~/extra/f");
    assert_eq!(r.access, Access::Read);
    let g = r.grant.unwrap();
    assert!(!g.user_only);
    assert_eq!(
        g.grant,
        Grant::Write {
            path: s(&w.home.join("extra/f"))
        }
    );
    let config = Config::from_toml_str(
        "[sandbox]\nwritable = [\"~/extra\"]\n",
        Path::new("/c.toml"),
    )
    .unwrap();
    let r = w.ask_with("~/extra/f", &config);
    assert_eq!(r.access, Access::Write);
    let by = r.writable_by.unwrap();
    assert_eq!(
        (by.key.as_str(), by.rule.as_str()),
        ("sandbox.writable", "~/extra")
    );
    assert_eq!(r.class, TargetClass::Home);
}

#[test]
fn user_masks_and_unmask() {
    let w = world();
    touch(&w.proj.join(".env"));
    let text = "[sandbox]\nmasks = [{ path = \".env\", reason = \"project secrets\" }]\nmasks_remove = [\"~/.ssh\"]\n";
    let config = Config::from_toml_str(text, Path::new("/c.toml")).unwrap();
    let r = w.ask_with(".env", &config);
    assert_eq!(r.class, TargetClass::Masked);
    assert_eq!(r.masked.as_ref().unwrap().reason, "project secrets");
    let r = w.ask_with("~/.ssh/id_ed25519", &config);
    assert!(r.masked.is_none());
    assert_eq!(r.class, TargetClass::Home);
}

#[test]
fn mask_through_linked_home_entry() {
    // ~/.aws is a link to a directory elsewhere: the real directory is masked too.
    let w = world();
    touch(&w.base.join("vault/aws/credentials"));
    symlink(w.base.join("vault/aws"), w.home.join(".aws")).unwrap();
    let r = w.ask(&s(&w.base.join("vault/aws/credentials")));
    assert_eq!(r.class, TargetClass::Masked);
    assert_eq!(r.masked.unwrap().rule, "~/.aws");
}

#[test]
fn json_shape_is_the_wire_type() {
    let w = world();
    let r = w.ask("~/.ssh/id_ed25519");
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["class"], "masked");
    assert_eq!(v["access"], "none");
    assert_eq!(v["grant"]["grant"]["kind"], "unmask");
    assert!(v.get("non_utf8").is_none());
}

/// The sandbox's own runtime dir and state dir: masked as the control plane, and no grant
/// is proposed; a path beside them under the runtime dir's mask is offered alone, never
/// the mask that also hides them.
#[test]
fn the_control_plane_is_never_offered() {
    let w = world();
    fs::create_dir_all(w.base.join("run/efr")).unwrap();
    for p in [
        w.base.join("run/efr/sandbox.sock"),
        w.base.join("run/efr/tmp/conv/x"),
        w.home.join(".local/state/efr/surface.json"),
    ] {
        let r = w.ask(&s(&p));
        assert_eq!(r.access, Access::None, "{p:?}");
        assert_eq!(r.class, TargetClass::Masked, "{p:?}");
        assert!(r.grant.is_none(), "{p:?}: {:?}", r.grant);
        assert!(r.masked.unwrap().reason.contains("control plane"), "{p:?}");
    }
    let r = w.ask(&s(&w.base.join("run/bus")));
    assert_eq!(r.masked.as_ref().unwrap().rule, "$XDG_RUNTIME_DIR");
    assert_eq!(
        r.grant.unwrap().grant,
        Grant::Unmask {
            path: s(&w.base.join("run/bus"))
        }
    );
}
