//! git_code, remotes and token hosts against real repositories made with `git init`.

use std::path::Path;
use std::process::Command;

use efr_policy::classify::git::git_code;
use efr_policy::classify::{ClassifyRequest, classify};
use efr_policy::context::Context;
use efr_policy::tokens::token_hosts;
use efr_sandbox_wire::{ExitKind, Mode, Needs, Verdict};

fn git(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn setup() -> Option<(tempfile::TempDir, Context)> {
    let home = tempfile::tempdir().ok()?;
    let project = home.path().join("p");
    std::fs::create_dir_all(&project).ok()?;
    if !git(&project, &["init", "-q"]) {
        assert!(
            std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
            "git init failed and EFR_SANDBOX_MUST_WORK is set"
        );
        println!("git is not installed: skipped");
        return None;
    }
    let ctx = Context::defaults(home.path());
    Some((home, ctx))
}

fn req(home: &Path, line: &str) -> ClassifyRequest {
    let p = home.join("p");
    let mut r = ClassifyRequest::new(line, Some(p.clone()), Mode::Auto);
    r.project_roots = vec![p];
    r
}

#[test]
fn push_with_protected_hooks_is_review() {
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    assert!(git(
        &p,
        &[
            "remote",
            "add",
            "origin",
            "https://user:secret@github.com/a/b.git"
        ]
    ));
    // a hook in .git/hooks: read-only inside, so not kept
    std::fs::write(p.join(".git/hooks/pre-push"), "#!/bin/sh\nexit 0\n").unwrap_or_default();
    let r = classify(&req(home.path(), "git push origin main"), &ctx);
    let up = r
        .exits
        .iter()
        .find(|e| e.kind == ExitKind::Upload)
        .unwrap_or_else(|| panic!("no upload: {r:?}"));
    assert_eq!(up.needs, Needs::Unsandboxed);
    assert!(
        up.facts
            .hosts
            .iter()
            .any(|h| h.host == "github.com" && h.project_remote),
        "{up:?}"
    );
    let gc = up
        .facts
        .git_code
        .clone()
        .unwrap_or_else(|| panic!("no git_code"));
    assert!(gc.checked);
    assert!(gc.items.is_empty(), "{gc:?}");
    assert_eq!(up.judgement.verdict, Verdict::Review);
    let json = serde_json::to_string(&r).unwrap_or_default();
    assert!(
        !json.contains("secret") && !json.contains("user:"),
        "{json}"
    );
}

#[test]
fn writable_hooks_path_makes_push_user_only() {
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    assert!(git(
        &p,
        &["remote", "add", "origin", "git@github.com:a/b.git"]
    ));
    assert!(git(&p, &["config", "core.hooksPath", ".githooks"]));
    std::fs::create_dir_all(p.join(".githooks")).unwrap_or_default();
    std::fs::write(p.join(".githooks/pre-push"), "#!/bin/sh\n").unwrap_or_default();
    let gc = git_code(&ctx, std::slice::from_ref(&p), &p);
    let items: Vec<_> = gc.items.iter().map(|i| i.item.as_str()).collect();
    assert!(items.contains(&"hooks/pre-push"), "{items:?}");
    assert!(gc.items.iter().all(|i| i.writable));
    let r = classify(&req(home.path(), "git push"), &ctx);
    let up = r
        .exits
        .iter()
        .find(|e| e.kind == ExitKind::Upload)
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(up.judgement.verdict, Verdict::UserOnly, "{up:?}");
    // fetch over ssh is an outside exit with the same git code
    let r = classify(&req(home.path(), "git fetch"), &ctx);
    let out = r
        .exits
        .iter()
        .find(|e| e.kind == ExitKind::Outside)
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(out.judgement.verdict, Verdict::UserOnly);
}

#[test]
fn a_hooks_path_of_a_bare_tilde_is_the_home() {
    // git reads core.hooksPath = ~ as $HOME (`git rev-parse --git-path hooks/pre-push`
    // says HOME/pre-push); a hook there is code a call that can write the home can write.
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    assert!(git(&p, &["config", "core.hooksPath", "~"]));
    std::fs::write(home.path().join("pre-push"), "#!/bin/sh\n").unwrap_or_default();
    let roots = [home.path().to_path_buf()];
    let gc = git_code(&ctx, &roots, &p);
    let hook = gc.items.iter().find(|i| i.item == "hooks/pre-push");
    assert!(
        hook.is_some_and(|i| i.writable && i.file.ends_with("/pre-push") && !i.file.contains('~')),
        "{gc:?}"
    );
}

#[test]
fn included_config_in_the_work_tree_is_writable_code() {
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    assert!(git(&p, &["config", "include.path", "../project.gitconfig"]));
    std::fs::write(
        p.join("project.gitconfig"),
        "[core]\n\tsshCommand = ./tools/ssh.sh\n[alias]\n\tx = !sh -c 'echo'\n",
    )
    .unwrap_or_default();
    let gc = git_code(&ctx, std::slice::from_ref(&p), &p);
    let items: Vec<_> = gc
        .items
        .iter()
        .map(|i| {
            (
                i.item.as_str(),
                i.file.ends_with("project.gitconfig") || i.file.ends_with("ssh.sh"),
            )
        })
        .collect();
    assert!(items.contains(&("core.sshcommand", true)), "{items:?}");
    assert!(items.contains(&("alias.x", true)), "{items:?}");
    // the repo's own .git/config is read-only inside: its keys are not kept
    assert!(git(&p, &["config", "core.fsmonitor", "./fsmon"]));
    let gc = git_code(&ctx, std::slice::from_ref(&p), &p);
    assert!(
        !gc.items.iter().any(|i| i.file.ends_with(".git/config")),
        "{gc:?}"
    );
}

#[test]
fn global_config_and_worktrees() {
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    // the home itself is a project root: ~/.gitconfig is a floor file, never writable
    std::fs::write(
        home.path().join(".gitconfig"),
        "[credential]\n\thelper = store\n",
    )
    .unwrap_or_default();
    let gc = git_code(&ctx, &[home.path().to_path_buf()], &p);
    assert!(
        !gc.items.iter().any(|i| i.file.ends_with(".gitconfig")),
        "{gc:?}"
    );
    // a linked worktree finds the common dir
    assert!(git(
        &p,
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x"
        ]
    ));
    let wt = home.path().join("wt");
    if git(
        &p,
        &["worktree", "add", "-q", wt.to_str().unwrap_or_default()],
    ) {
        let dirs = efr_policy::git::find_git_dir(&wt).unwrap_or_else(|| panic!("no git dir"));
        assert_eq!(dirs.common, p.join(".git"));
    }
}

#[test]
fn token_hosts_from_files_and_helpers() {
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    std::fs::write(p.join(".npmrc"), "//npm.example.com/:_authToken=abc\n").unwrap_or_default();
    // The home's .netrc is masked (the call reads it empty): it denies nothing; the
    // project's is visible.
    std::fs::write(
        home.path().join(".netrc"),
        "machine masked.example.org login x password y\n",
    )
    .unwrap_or_default();
    std::fs::write(
        p.join(".netrc"),
        "machine api.example.org login x password y\n",
    )
    .unwrap_or_default();
    assert!(git(
        &p,
        &["remote", "add", "origin", "https://git.example.net/a/b"]
    ));
    // The cache helper asks a socket the call's view hides: no token.
    std::fs::write(
        home.path().join(".gitconfig"),
        "[credential]\n\thelper = cache\n",
    )
    .unwrap_or_default();
    let hosts = token_hosts(&ctx, std::slice::from_ref(&p));
    assert!(!hosts.contains("git.example.net"), "{hosts:?}");
    assert!(!hosts.contains("masked.example.org"), "{hosts:?}");
    // A helper program efr cannot judge gives the remotes' hosts a token.
    std::fs::write(
        home.path().join(".gitconfig"),
        "[credential]\n\thelper = cache\n\thelper = /opt/corp/git-helper\n",
    )
    .unwrap_or_default();
    let hosts = token_hosts(&ctx, std::slice::from_ref(&p));
    for h in ["npm.example.com", "api.example.org", "git.example.net"] {
        assert!(hosts.contains(h), "{h} not in {hosts:?}");
    }
    // a host exit to a token host needs the unsandboxed launch
    let r = classify(&req(home.path(), "curl https://api.example.org/v1"), &ctx);
    assert_eq!(r.exits[0].needs, Needs::Unsandboxed, "{r:?}");
    let r = classify(&req(home.path(), "curl https://other.example.org/v1"), &ctx);
    assert!(matches!(r.exits[0].needs, Needs::Contained { .. }));
}

fn hosts_of(r: &efr_policy::classify::ClassifyResult) -> Vec<String> {
    let mut h: Vec<String> = r
        .exits
        .iter()
        .flat_map(|e| e.facts.hosts.iter().map(|h| h.host.clone()))
        .collect();
    h.sort();
    h.dedup();
    h
}

#[test]
fn insteadof_rewrites_the_host_git_dials() {
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    assert!(git(&p, &["remote", "add", "origin", "gh:a/b.git"]));
    assert!(git(
        &p,
        &["config", "url.https://git.corp.example/.insteadOf", "gh:"]
    ));
    assert!(git(
        &p,
        &[
            "config",
            "url.ssh://push.corp.example/.pushInsteadOf",
            "gh:"
        ]
    ));
    let r = classify(&req(home.path(), "git fetch origin"), &ctx);
    assert!(
        hosts_of(&r).contains(&"git.corp.example".to_string()),
        "{r:?}"
    );
    let r = classify(&req(home.path(), "git push origin main"), &ctx);
    assert!(
        hosts_of(&r).contains(&"push.corp.example".to_string()),
        "{r:?}"
    );
    // A clone's URL is rewritten by the user's global config.
    std::fs::write(
        home.path().join(".gitconfig"),
        "[url \"https://mirror.corp.example/\"]\n\tinsteadOf = https://github.com/\n",
    )
    .unwrap_or_default();
    let r = classify(
        &req(home.path(), "git clone https://github.com/x/y.git"),
        &ctx,
    );
    assert_eq!(hosts_of(&r), ["mirror.corp.example"], "{r:?}");
}

#[test]
fn submodule_update_reaches_the_submodules_hosts() {
    let Some((home, ctx)) = setup() else { return };
    let p = home.path().join("p");
    assert!(git(
        &p,
        &[
            "remote",
            "add",
            "origin",
            "https://code.example/team/app.git"
        ]
    ));
    std::fs::write(
        p.join(".gitmodules"),
        "[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib.git\n\
         [submodule \"vendor\"]\n\tpath = vendor\n\turl = https://vendor.example/v.git\n\
         [submodule \"ssh\"]\n\tpath = ssh\n\turl = git@ssh.example:o/r.git\n",
    )
    .unwrap_or_default();
    let r = classify(
        &req(home.path(), "git submodule update --init --recursive"),
        &ctx,
    );
    assert_eq!(
        hosts_of(&r),
        ["code.example", "ssh.example", "vendor.example"],
        "{r:?}"
    );
    // Over ssh it is an outside command (the user's keys); over https a host exit.
    assert!(r.exits.iter().any(|e| e.kind == ExitKind::Outside));
    assert!(r.exits.iter().any(|e| e.kind == ExitKind::Host));
    // The repo's own config overrides .gitmodules.
    assert!(git(
        &p,
        &[
            "config",
            "submodule.vendor.url",
            "https://fork.example/v.git"
        ]
    ));
    let r = classify(&req(home.path(), "git submodule update"), &ctx);
    assert!(hosts_of(&r).contains(&"fork.example".to_string()), "{r:?}");
    assert!(
        !hosts_of(&r).contains(&"vendor.example".to_string()),
        "{r:?}"
    );
    // Local subcommands reach nothing.
    for line in [
        "git submodule status",
        "git submodule foreach git status",
        "git submodule sync",
    ] {
        let r = classify(&req(home.path(), line), &ctx);
        assert!(hosts_of(&r).is_empty(), "{line}: {r:?}");
    }
}

#[test]
fn strip_code_takes_out_only_what_runs_programs() {
    use efr_policy::git::strip_code;
    let text = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = evil \\\n\t  --more\n\tbare = false\n\
[alias]\n\tst = status\n\tx = !sh -c 'evil'\n\
[include]\n\tpath = /tmp/other\n\
[remote \"origin\"]\n\turl = https://example.com/r.git\n\
[core] sshCommand = evil\n\
# a comment stays\n";
    let (kept, removed) = strip_code(text);
    assert_eq!(
        removed,
        [
            "core.fsmonitor",
            "alias.x",
            "include.path",
            "core.sshcommand"
        ]
    );
    for gone in ["evil", "--more", "/tmp/other"] {
        assert!(!kept.contains(gone), "{gone} stayed:\n{kept}");
    }
    for stays in [
        "repositoryformatversion = 0",
        "bare = false",
        "st = status",
        "url = https://example.com/r.git",
        "[core]",
        "# a comment stays",
    ] {
        assert!(kept.contains(stays), "{stays} went:\n{kept}");
    }
    // A config with nothing to take out comes back as it was.
    let plain = "[user]\n\tname = A\n[core]\n\tfsmonitor = true\n";
    assert_eq!(strip_code(plain), (plain.to_string(), Vec::<String>::new()));
}
