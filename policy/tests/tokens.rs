//! A host is `denied` only when a token for it is visible to the call (a token it cannot read cannot be sent): a
//! masked token file denies nothing, a visible one does, and so does a token variable that
//! survives the call's environment filter or a credential helper the call can run.

use std::path::{Path, PathBuf};

use efr_policy::classify::{ClassifyRequest, classify};
use efr_policy::config::{Config, Env};
use efr_policy::context::Context;
use efr_policy::tokens::{helper_gives_token, visible_token_hosts};
use efr_sandbox_wire::{Mode, Needs};

fn write(p: &Path, text: &str) {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    }
    std::fs::write(p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
}

struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    proj: PathBuf,
}

fn home() -> Home {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let home = d.path().join("home");
    let proj = home.join("src/app");
    std::fs::create_dir_all(&proj).unwrap_or_else(|e| panic!("{e}"));
    Home {
        _dir: d,
        home,
        proj,
    }
}

fn needs_of(ctx: &Context, h: &Home, line: &str) -> Needs {
    let mut req = ClassifyRequest::new(line, Some(h.proj.clone()), Mode::Cautious);
    req.project_roots = vec![h.proj.clone()];
    let r = classify(&req, ctx);
    let e = r
        .exits
        .iter()
        .find(|e| !e.facts.hosts.is_empty())
        .unwrap_or_else(|| panic!("no host exit for {line}: {r:?}"));
    e.needs.clone()
}

#[test]
fn a_masked_token_file_denies_nothing_a_visible_one_does() {
    let h = home();
    let ctx = Context::defaults(&h.home);
    let roots = vec![h.proj.clone()];
    // ~/.npmrc is masked by default: its token cannot reach a call.
    write(
        &h.home.join(".npmrc"),
        "registry=https://npm.corp.example/\n//npm.corp.example/:_authToken=secret\n",
    );
    write(
        &h.home.join(".config/gh/hosts.yml"),
        "github.com:\n    oauth_token: gho_x\n",
    );
    write(
        &h.home.join(".cargo/credentials.toml"),
        "[registry]\ntoken = \"cio_x\"\n",
    );
    let hosts = visible_token_hosts(&ctx, &roots, &[], &[]);
    assert!(hosts.is_empty(), "{hosts:?}");
    assert!(matches!(
        needs_of(&ctx, &h, "npm install left-pad"),
        Needs::Contained { .. }
    ));
    assert!(matches!(
        needs_of(&ctx, &h, "curl https://api.github.com/"),
        Needs::Contained { .. }
    ));
    // An unmask grant shows it: then it denies.
    let hosts = visible_token_hosts(&ctx, &roots, &[h.home.join(".npmrc")], &[]);
    assert!(hosts.contains("npm.corp.example"), "{hosts:?}");
    // A link from the project to the masked file reads the mask: nothing.
    std::os::unix::fs::symlink(h.home.join(".npmrc"), h.proj.join(".npmrc"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(visible_token_hosts(&ctx, &roots, &[], &[]).is_empty());
    std::fs::remove_file(h.proj.join(".npmrc")).unwrap_or_else(|e| panic!("{e}"));
    // A project .npmrc with a token is visible: its host is denied.
    write(
        &h.proj.join(".npmrc"),
        "@corp:registry=https://npm.pkg.corp.example/\n//npm.pkg.corp.example/:_authToken=abc\n",
    );
    let hosts = visible_token_hosts(&ctx, &roots, &[], &[]);
    assert_eq!(
        hosts.into_iter().collect::<Vec<_>>(),
        ["npm.pkg.corp.example"]
    );
    assert_eq!(
        needs_of(&ctx, &h, "curl https://npm.pkg.corp.example/x"),
        Needs::Unsandboxed
    );
    // A masked file in the home and an unmasked netrc in the project.
    write(
        &h.home.join(".netrc"),
        "machine home.example login a password b\n",
    );
    write(
        &h.proj.join(".netrc"),
        "machine proj.example login a password b\n",
    );
    let hosts = visible_token_hosts(&ctx, &roots, &[], &[]);
    assert!(hosts.contains("proj.example") && !hosts.contains("home.example"));
}

#[test]
fn a_token_variable_denies_only_when_it_survives_the_filter() {
    let h = home();
    let vars = || {
        vec![
            ("NPM_TOKEN".to_string(), "abc".to_string()),
            ("GITHUB_TOKEN".to_string(), "abc".to_string()),
            (
                "PIP_INDEX_URL".to_string(),
                "https://u:pw@pypi.corp.example/simple".to_string(),
            ),
            ("PATH".to_string(), "/usr/bin".to_string()),
        ]
    };
    // The defaults drop every one of them: nothing denied.
    let config = Config::defaults();
    let ctx = Context::new(&config, &Env::new(&h.home)).with_call_env(&config, vars());
    assert_eq!(ctx.call_env, [("PATH".to_string(), "/usr/bin".to_string())]);
    let roots = vec![h.proj.clone()];
    assert!(visible_token_hosts(&ctx, &roots, &[], &ctx.call_env).is_empty());
    // A config that lets them through: each denies its host.
    let user = Config::from_toml_str(
        "[environment]\nkeep = [\"NPM_TOKEN\", \"GITHUB_TOKEN\"]\ndrop_remove = [\"*TOKEN*\"]\nsecret_values_remove = [\"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@ \\t\\n]+@\"]\n",
        Path::new("/config.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ctx = Context::new(&user, &Env::new(&h.home)).with_call_env(&user, vars());
    let hosts = visible_token_hosts(&ctx, &roots, &[], &ctx.call_env);
    for want in [
        "registry.npmjs.org",
        "github.com",
        "api.github.com",
        "pypi.corp.example",
    ] {
        assert!(hosts.contains(want), "{want} not in {hosts:?}");
    }
    assert_eq!(
        needs_of(&ctx, &h, "npm install left-pad"),
        Needs::Unsandboxed
    );
    // The npm token is for the registry the user's setup names.
    write(
        &h.proj.join(".npmrc"),
        "registry=https://npm.mine.example/\n",
    );
    let env = vec![("NPM_TOKEN".to_string(), "abc".to_string())];
    let hosts = visible_token_hosts(&ctx, &roots, &[], &env);
    assert_eq!(hosts.into_iter().collect::<Vec<_>>(), ["npm.mine.example"]);
}

#[test]
fn credential_helpers_the_call_can_run() {
    let h = home();
    let ctx = Context::defaults(&h.home);
    let roots = vec![h.proj.clone()];
    let gives = |v: &str| helper_gives_token(&ctx, &roots, &[], v);
    // cache and the desktop key stores ask what the view hides.
    assert!(!gives("cache --timeout 3600"));
    assert!(!gives("libsecret"));
    assert!(!gives("/usr/lib/git-core/git-credential-libsecret"));
    // store reads masked files (none here, then a masked one).
    assert!(!gives("store"));
    write(
        &h.home.join(".git-credentials"),
        "https://u:t@git.example\n",
    );
    assert!(!gives("store"));
    // gh reads its masked hosts.yml.
    write(
        &h.home.join(".config/gh/hosts.yml"),
        "github.com:\n    oauth_token: x\n",
    );
    assert!(!gives("!gh auth git-credential"));
    assert!(!gives("!/usr/bin/gh auth git-credential"));
    // A store file the call can read, a program or a snippet efr cannot judge: a token.
    write(&h.proj.join("creds"), "https://u:t@git.example\n");
    assert!(gives(&format!(
        "store --file {}",
        h.proj.join("creds").display()
    )));
    assert!(gives("!f() { echo password=$TOKEN; }; f"));
    assert!(gives("/opt/corp/credential-helper"));
    assert!(gives("manager"));
}

#[test]
fn reading_a_settings_file_shown_scrubbed_needs_no_unmask() {
    let h = home();
    let ctx = Context::defaults(&h.home);
    let mut req = ClassifyRequest::new("cat ~/.npmrc", Some(h.proj.clone()), Mode::Cautious);
    req.project_roots = vec![h.proj.clone()];
    // No file: nothing is copied, the mask is empty; the read is an unmask exit.
    assert_eq!(classify(&req, &ctx).exits.len(), 1);
    write(
        &h.home.join(".npmrc"),
        "registry=https://r.example/\n//r.example/:_authToken=x\n",
    );
    let r = classify(&req, &ctx);
    assert!(r.exits.is_empty(), "{r:?}");
    // Other masked files still ask.
    write(&h.home.join(".pypirc"), "[pypi]\npassword=x\n");
    let mut req = ClassifyRequest::new("cat ~/.pypirc", Some(h.proj.clone()), Mode::Cautious);
    req.project_roots = vec![h.proj.clone()];
    assert_eq!(classify(&req, &ctx).exits.len(), 1);
}

#[test]
fn explain_says_a_settings_file_is_shown_scrubbed() {
    let h = home();
    let env = Env::new(&h.home);
    let ask = |p: &Path| {
        efr_policy::explain::explain_path(
            p,
            None,
            std::slice::from_ref(&h.proj),
            &Config::defaults(),
            &env,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let npmrc = h.home.join(".npmrc");
    write(
        &npmrc,
        "registry=https://r.example/\n//r.example/:_authToken=x\n",
    );
    let r = ask(&npmrc);
    let effect = r.grant.map(|g| g.effect).unwrap_or_default();
    assert!(
        effect.contains("a copy with the secrets removed"),
        "{effect}"
    );
    let pypirc = h.home.join(".pypirc");
    write(&pypirc, "[pypi]\npassword=x\n");
    let effect = ask(&pypirc).grant.map(|g| g.effect).unwrap_or_default();
    assert!(effect.contains("sees the real files"), "{effect}");
}

/// The lean context the proxy of every call uses (`Context::for_tokens`) finds the same
/// token hosts as the whole one: masked files (none), unmasked ones, a project's own file,
/// a link to a masked file and a git credential helper.
#[test]
fn the_tokens_context_finds_what_the_whole_context_finds() {
    let h = home();
    let env = Env::new(&h.home);
    let config = Config::defaults();
    let (whole, lean) = (
        Context::new(&config, &env),
        Context::for_tokens(&config, &env),
    );
    let roots = vec![h.proj.clone()];
    let same = |unmasked: &[PathBuf]| {
        let a = visible_token_hosts(&whole, &roots, unmasked, &[]);
        let b = visible_token_hosts(&lean, &roots, unmasked, &[]);
        assert_eq!(a, b);
        a
    };
    write(
        &h.home.join(".npmrc"),
        "registry=https://npm.corp.example/\n//npm.corp.example/:_authToken=secret\n",
    );
    write(
        &h.home.join(".netrc"),
        "machine files.corp.example login u password p\n",
    );
    assert!(same(&[]).is_empty());
    assert!(same(&[h.home.join(".npmrc")]).contains("npm.corp.example"));
    std::os::unix::fs::symlink(h.home.join(".npmrc"), h.proj.join(".npmrc"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(same(&[]).is_empty());
    std::fs::remove_file(h.proj.join(".npmrc")).unwrap_or_else(|e| panic!("{e}"));
    write(
        &h.proj.join(".netrc"),
        "machine git.corp.example login u password p\n",
    );
    write(
        &h.home.join(".gitconfig"),
        "[credential \"https://code.corp.example\"]\n\thelper = store\n",
    );
    let found = same(&[]);
    assert!(!found.is_empty(), "{found:?}");
}

/// A config that keeps GITHUB_TOKEN and GH_TOKEN in the call's environment (the defaults
/// drop them), with the github profile replaced by an env source the test sets.
fn keeping_github_tokens() -> Config {
    Config::from_toml_str(
        "[environment]\nkeep = [\"GH_TOKEN\", \"GITHUB_TOKEN\"]\ndrop_remove = [\"*TOKEN*\"]\n\n\
         [[credential]]\nname = \"github\"\nenv = \"GH_TOKEN\"\nhosts = [\"github.com\", \"api.github.com\"]\n\
         send = \"basic\"\nuser = \"x-access-token\"\nplaceholder_env = \"GH_TOKEN\"\ngit = true\n",
        Path::new("/config.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_credential_held_as_a_placeholder_makes_no_token_host() {
    use efr_policy::tokens::{Placeholders, visible_token_sources_except};
    let h = home();
    let config = keeping_github_tokens();
    let vars = vec![("GH_TOKEN".to_string(), "ghp_placeholder0000".to_string())];
    let ctx = Context::new(&config, &Env::new(&h.home)).with_call_env(&config, vars.clone());
    let roots = vec![h.proj.clone()];
    // Read as a token, GH_TOKEN makes GitHub's hosts token hosts.
    let all = visible_token_hosts(&ctx, &roots, &[], &ctx.call_env);
    assert!(all.contains("github.com"), "{all:?}");
    // Held as the github credential's placeholder, it does not.
    let held = Placeholders::of_grants(&ctx, ["github"]);
    assert_eq!(held.vars, ["GH_TOKEN"]);
    let sources = visible_token_sources_except(&ctx, &roots, &[], &ctx.call_env, &held);
    assert!(!sources.contains_key("github.com"), "{sources:?}");
    // A token the call can read still does: GITHUB_TOKEN beside the placeholder.
    let mut both = ctx.call_env.clone();
    both.push(("GITHUB_TOKEN".into(), "abc".into()));
    let sources = visible_token_sources_except(&ctx, &roots, &[], &both, &held);
    assert!(sources.contains_key("github.com"), "{sources:?}");
}

#[test]
fn a_credential_s_source_file_copy_makes_no_token_host() {
    use efr_policy::tokens::{Placeholders, visible_token_sources_except};
    let h = home();
    // A project .npmrc with a token is visible; as the source of a user credential the
    // call sees it only as a copy with a placeholder.
    let npmrc = h.proj.join(".npmrc");
    // npm's token key in two pieces: the surface's secret scan of a clone of this
    // repository must find no token-shaped line in it.
    const NPM_KEY: &str = concat!("_auth", "Token");
    write(
        &npmrc,
        &format!("//registry.npmjs.org/:{NPM_KEY}=npm_abc\n"),
    );
    let text = format!(
        "[[credential]]\nname = \"proj-npm\"\nfile = \"{}\"\npattern = '{NPM_KEY}=(\\S+)'\nhosts = [\"registry.npmjs.org\"]\nsend = \"bearer\"\n",
        npmrc.display()
    );
    let config =
        Config::from_toml_str(&text, Path::new("/config.toml")).unwrap_or_else(|e| panic!("{e}"));
    let ctx = Context::new(&config, &Env::new(&h.home));
    let roots = vec![h.proj.clone()];
    // The file is masked by the credential now: nothing denied either way.
    assert!(!visible_token_hosts(&ctx, &roots, &[], &[]).contains("registry.npmjs.org"));
    // Unmasked (the call side binds the placeholder copy there): only a placeholder.
    let unmasked = vec![npmrc.clone()];
    let plain =
        visible_token_sources_except(&ctx, &roots, &unmasked, &[], &Placeholders::default());
    assert!(plain.contains_key("registry.npmjs.org"), "{plain:?}");
    let held = Placeholders::of_grants(&ctx, ["proj-npm"]);
    assert_eq!(held.files, [npmrc]);
    let sources = visible_token_sources_except(&ctx, &roots, &unmasked, &[], &held);
    assert!(!sources.contains_key("registry.npmjs.org"), "{sources:?}");
}

#[test]
fn the_classifier_does_not_deny_a_host_for_a_granted_credential_s_placeholder() {
    let h = home();
    let config = keeping_github_tokens();
    let vars = vec![("GH_TOKEN".to_string(), "ghp_placeholder0000".to_string())];
    let ctx = Context::new(&config, &Env::new(&h.home)).with_call_env(&config, vars);
    // gh with the credential: contained (the call's GH_TOKEN is the placeholder).
    match needs_of(&ctx, &h, "gh api repos/a/b") {
        Needs::Contained { grants } => {
            assert!(
                grants.iter().any(|g| g.kind_str() == "credential"),
                "{grants:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Without a credential, the kept GH_TOKEN is a token the call reads: denied.
    assert_eq!(
        needs_of(&ctx, &h, "curl https://api.github.com/"),
        Needs::Unsandboxed
    );
}
