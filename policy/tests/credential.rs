//! Credentials as config: `[[credential]]` read and checked with the config's own errors,
//! the built-in profiles, the secret sources against real files, variables and commands,
//! and the source files every call has masked.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use efr_policy::config::{Config, Env, LoadError};
use efr_policy::credential::{self, BoundHost, ResolveError, SecretCache, SendAs, Source, resolve};

fn load(text: &str) -> Result<Config, LoadError> {
    Config::from_toml_str(text, Path::new("/home/u/.config/efr/config.toml"))
}

fn invalid(text: &str) -> (String, String) {
    match load(text) {
        Err(LoadError::Invalid { key, message, .. }) => (key, message),
        other => panic!("not an invalid value: {other:?}"),
    }
}

const FORGE: &str = r#"
[[credential]]
name = "forge"
hosts = ["git.example.com", "*.example.com:8443"]
env = "FORGE_TOKEN"
send = "basic"
user = "x-access-token"
placeholder_env = "FORGE_TOKEN"
git = true
"#;

#[test]
fn the_issue_entry_reads() {
    let c = load(FORGE).unwrap();
    let f = c.credential("forge").unwrap();
    assert_eq!(
        f.hosts,
        vec![
            BoundHost {
                pattern: "git.example.com".into(),
                port: 443
            },
            BoundHost {
                pattern: "*.example.com".into(),
                port: 8443
            }
        ]
    );
    assert_eq!(f.source, Source::Env("FORGE_TOKEN".into()));
    assert_eq!(
        f.send,
        SendAs::Basic {
            user: "x-access-token".into()
        }
    );
    assert_eq!(f.placeholder_env.as_deref(), Some("FORGE_TOKEN"));
    assert!(f.git);
    // The profiles stay beside it.
    assert!(c.credential("github").is_some());
}

#[test]
fn errors_name_the_entry_and_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\nenv = \"A\"\nfile = \"~/.a\"\nsend = \"bearer\"\n",
            "credential[0].file",
            "credential a: has 2 sources (env and file)",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\nsend = \"bearer\"\n",
            "credential[0]",
            "credential a: needs one source",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\nenv = \"A\"\nsend = \"digest\"\n",
            "credential[0].send",
            "credential a: \"digest\": not a way to send",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\nenv = \"A\"\nsend = \"basic\"\n",
            "credential[0].user",
            "credential a: send = \"basic\" needs user",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"http://a.com/\"]\nenv = \"A\"\nsend = \"bearer\"\n",
            "credential[0].hosts",
            "credential a: http://a.com/",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\ncommand = [\"bin/gh\"]\nsend = \"bearer\"\n",
            "credential[0].command",
            "credential a: \"bin/gh\": the program is an absolute path or a bare name",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\nenv = \"A\"\nsend = \"bearer\"\n\
             [[credential]]\nname = \"a\"\nhosts = [\"b.com\"]\nenv = \"B\"\nsend = \"bearer\"\n",
            "credential[1].name",
            "credential a: a second entry of this name",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\nenv = \"A\"\nsend = \"bearer\"\ncolour = 1\n",
            "credential[0].colour",
            "unknown key (known here: name, hosts",
        ),
        (
            "[[credential]]\nname = \"a\"\nhosts = [\"a.com\"]\ncommand = [\"gh\"]\nkeep_seconds = \"5\"\nsend = \"bearer\"\n",
            "credential[0].keep_seconds",
            "expected a number of seconds",
        ),
    ];
    for (text, key, start) in cases {
        let (k, m) = invalid(text);
        assert_eq!(&k, key, "{text}");
        assert!(m.starts_with(start), "{text}: {m}");
    }
}

#[test]
fn a_user_entry_replaces_the_profile_of_its_name() {
    let defaults = Config::defaults();
    let before = defaults.credentials().len();
    let c = load(
        "[[credential]]\nname = \"github\"\nhosts = [\"github.example.com\"]\nenv = \"GHE_TOKEN\"\nsend = \"token\"\n",
    )
    .unwrap();
    assert_eq!(c.credentials().len(), before);
    let g = c.credential("github").unwrap();
    assert_eq!(g.source, Source::Env("GHE_TOKEN".into()));
    assert_eq!(g.reason, None);
}

#[test]
fn every_profile_has_a_reason_and_the_issue_s_services_are_there() {
    let c = Config::defaults();
    for p in c.credentials() {
        assert!(
            p.reason.as_deref().is_some_and(|r| r.len() > 10),
            "{}",
            p.name
        );
    }
    let names: Vec<&str> = c.credentials().iter().map(|p| p.name.as_str()).collect();
    for n in [
        "github",
        "gitlab",
        "npm",
        "cargo",
        "pypi",
        "docker",
        "huggingface",
        "openai",
        "anthropic",
        "gemini",
    ] {
        assert!(names.contains(&n), "{n}");
    }
    let gh = c.credential("github").unwrap();
    assert!(gh.git && gh.binds("github.com", 443) && gh.binds("api.github.com", 443));
    assert!(!gh.binds("raw.githubusercontent.com", 443));
}

fn env_in(home: &Path) -> Env {
    Env::new(home)
}

#[test]
fn profile_patterns_find_the_secret_in_the_files_tools_write() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let write = |rel: &str, text: &str| {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    };
    write(
        ".npmrc",
        "registry=https://registry.npmjs.org/\n//npm.example.com/:_authToken=other\n//registry.npmjs.org/:_authToken=npm_SECRETnpm\n",
    );
    write(
        ".cargo/credentials.toml",
        "[registries.other]\ntoken = \"nope\"\n\n[registry]\ntoken = \"cioSECRETcargo\"\n",
    );
    write(
        ".pypirc",
        "[distutils]\nindex-servers = pypi\n\n[testpypi]\npassword = nope\n\n[pypi]\n  username = __token__\n  password = pypi-SECRETpypi\n",
    );
    write(".cache/huggingface/token", "hf_SECREThf\n");
    let c = Config::defaults();
    let env = env_in(home);
    let cache = SecretCache::new();
    for (name, want) in [
        ("npm", "npm_SECRETnpm"),
        ("cargo", "cioSECRETcargo"),
        ("pypi", "pypi-SECRETpypi"),
        ("huggingface", "hf_SECREThf"),
    ] {
        let r = resolve(c.credential(name).unwrap(), &env, &cache).unwrap();
        assert_eq!(r.secret.expose(), want, "{name}");
        let (path, span) = r.file_span.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(&text[span], want, "{name}");
        assert!(path.starts_with(home), "{name}");
    }
}

#[test]
fn env_sources_read_the_service_s_variables() {
    let c = load(FORGE).unwrap();
    let forge = c.credential("forge").unwrap();
    let mut env = Env::new("/home/u");
    let cache = SecretCache::new();
    assert_eq!(
        resolve(forge, &env, &cache).unwrap_err(),
        ResolveError::EnvUnset {
            name: "forge".into(),
            var: "FORGE_TOKEN".into()
        }
    );
    env.vars.set("FORGE_TOKEN", "  s3cr3t-forge\n");
    let r = resolve(forge, &env, &cache).unwrap();
    assert_eq!(r.secret.expose(), "s3cr3t-forge");
    assert_eq!(r.file_span, None);
    // Neither the secret nor an env printed shows the value.
    assert_eq!(format!("{:?} {}", r.secret, r.secret), "<secret> <secret>");
    assert!(!format!("{env:?}").contains("s3cr3t"));
    assert!(format!("{env:?}").contains("FORGE_TOKEN"));
}

#[test]
fn file_sources_whole_or_by_pattern_and_their_errors() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("token");
    std::fs::write(&f, "\n  tok-123  \n").unwrap();
    let text = |extra: &str| {
        format!(
            "[[credential]]\nname = \"t\"\nhosts = [\"a.com\"]\nfile = \"{}\"\nsend = \"bearer\"\n{extra}",
            f.display()
        )
    };
    let env = Env::new(dir.path());
    let cache = SecretCache::new();
    let c = load(&text("")).unwrap();
    let r = resolve(c.credential("t").unwrap(), &env, &cache).unwrap();
    assert_eq!(r.secret.expose(), "tok-123");
    assert_eq!(r.file_span, Some((f.clone(), 3..10)));

    let c = load(&text("pattern = 'tok-(\\d+)'\n")).unwrap();
    let r = resolve(c.credential("t").unwrap(), &env, &cache).unwrap();
    assert_eq!(r.secret.expose(), "123");
    assert_eq!(r.file_span, Some((f.clone(), 7..10)));

    let c = load(&text("pattern = 'nothing (\\d+)'\n")).unwrap();
    let e = resolve(c.credential("t").unwrap(), &env, &cache).unwrap_err();
    assert!(matches!(e, ResolveError::NoMatch { .. }), "{e}");
    assert!(e.to_string().contains("holds no secret matching"), "{e}");

    std::fs::write(&f, " \n").unwrap();
    let c = load(&text("")).unwrap();
    assert!(matches!(
        resolve(c.credential("t").unwrap(), &env, &cache),
        Err(ResolveError::NoMatch { .. })
    ));
    std::fs::remove_file(&f).unwrap();
    let e = resolve(c.credential("t").unwrap(), &env, &cache).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("credential t: cannot read {}", f.display())),
        "{e}"
    );
}

/// A script that prints `answer` and counts its runs in `count`.
fn counting_script(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("source.sh");
    std::fs::write(
        &p,
        format!("#!/bin/sh\necho run >> '{}/count'\n{body}\n", dir.display()),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("count"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn command_config(script: &Path, keep: u64) -> Config {
    load(&format!(
        "[[credential]]\nname = \"c\"\nhosts = [\"a.com\"]\ncommand = [\"{}\", \"arg\"]\nkeep_seconds = {keep}\nsend = \"bearer\"\n",
        script.display()
    ))
    .unwrap()
}

#[test]
fn command_answers_are_kept_keep_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let script = counting_script(dir.path(), "echo \"  tok-$1  \"\necho second line");
    let env = Env::new(dir.path());
    let cache = SecretCache::new();
    let c = command_config(&script, 300);
    let spec = c.credential("c").unwrap();
    for _ in 0..3 {
        assert_eq!(
            resolve(spec, &env, &cache).unwrap().secret.expose(),
            "tok-arg"
        );
    }
    assert_eq!(runs(dir.path()), 1, "the answer was kept");
    // Shared by threads: still one run.
    let cache = Arc::new(cache);
    let spec = Arc::new(spec.clone());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (cache, spec, env) = (cache.clone(), spec.clone(), env.clone());
            std::thread::spawn(move || resolve(&spec, &env, &cache).unwrap())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().secret.expose(), "tok-arg");
    }
    assert_eq!(runs(dir.path()), 1);
    // keep_seconds = 0: every resolve runs it.
    let c0 = command_config(&script, 0);
    let fresh = SecretCache::new();
    resolve(c0.credential("c").unwrap(), &env, &fresh).unwrap();
    resolve(c0.credential("c").unwrap(), &env, &fresh).unwrap();
    assert_eq!(runs(dir.path()), 3);
}

#[test]
fn a_failing_silent_or_missing_command_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(dir.path());
    let cache = SecretCache::new();
    let fail = counting_script(dir.path(), "echo secret-on-failure; exit 3");
    let e = resolve(
        command_config(&fail, 300).credential("c").unwrap(),
        &env,
        &cache,
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "credential c: the command {} arg failed",
            fail.display()
        )),
        "{text}"
    );
    assert!(!text.contains("secret-on-failure"), "{text}");
    // Not kept: the next resolve runs it again.
    resolve(
        command_config(&fail, 300).credential("c").unwrap(),
        &env,
        &cache,
    )
    .unwrap_err();
    assert_eq!(runs(dir.path()), 2);

    let silent = counting_script(dir.path(), "echo '   '");
    let e = resolve(
        command_config(&silent, 300).credential("c").unwrap(),
        &env,
        &cache,
    )
    .unwrap_err();
    assert!(e.to_string().ends_with("answered nothing"), "{e}");

    let c = load(
        "[[credential]]\nname = \"c\"\nhosts = [\"a.com\"]\ncommand = [\"efr-no-such-program-x\"]\nsend = \"bearer\"\n",
    )
    .unwrap();
    let e = resolve(c.credential("c").unwrap(), &env, &cache).unwrap_err();
    assert!(
        e.to_string()
            .contains("efr-no-such-program-x could not start"),
        "{e}"
    );
}

#[test]
fn a_command_that_hangs_is_stopped_after_ten_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(dir.path());
    let hang = counting_script(dir.path(), "exec sleep 60");
    let start = std::time::Instant::now();
    let e = resolve(
        command_config(&hang, 300).credential("c").unwrap(),
        &env,
        &SecretCache::new(),
    )
    .unwrap_err();
    let took = start.elapsed();
    assert!(e.to_string().ends_with("did not answer within 10 s"), "{e}");
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(20),
        "{took:?}"
    );
}

#[test]
fn source_files_user_entries_always_profiles_when_present() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let env = Env::new(home);
    let c = load(
        "[[credential]]\nname = \"mine\"\nhosts = [\"a.com\"]\nfile = \"~/.config/mine/token\"\nsend = \"bearer\"\n",
    )
    .unwrap();
    assert_eq!(
        credential::source_files(&c, &env),
        vec![home.join(".config/mine/token")]
    );
    std::fs::write(home.join(".npmrc"), "x").unwrap();
    let files = credential::source_files(&c, &env);
    assert!(files.contains(&home.join(".npmrc")), "{files:?}");
    assert!(!files.contains(&home.join(".pypirc")), "{files:?}");
}

#[test]
fn placeholder_sources_of_a_grant() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(dir.path());
    let c = load(FORGE).unwrap();
    let (vars, files) = credential::placeholder_sources(&c, &env, ["forge", "npm", "nope"]);
    assert_eq!(vars, vec!["FORGE_TOKEN".to_string()]);
    assert_eq!(files, vec![dir.path().join(".npmrc")]);
}

#[test]
fn every_credential_source_file_is_a_mask_of_the_launch_view() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let env = Env::new(home);
    let text = "[sandbox]\nmasks_remove = [\"~/.npmrc\"]\n\n[[credential]]\nname = \"mine\"\nhosts = [\"a.com\"]\nfile = \"~/.config/mine/token\"\nsend = \"bearer\"\n";
    let c = load(text).unwrap();
    let mask = |v: &str| c.sandbox.masks.iter().find(|e| e.value == v).cloned();
    let mine = mask("~/.config/mine/token").expect("the user entry's file is a mask");
    assert!(mine.reason.contains("credential mine"), "{}", mine.reason);
    // A default mask the user took out on purpose stays out (the call reads that token,
    // and its hosts are token hosts).
    assert!(mask("~/.npmrc").is_none());
    let view = c.launch_view(&env, &[]);
    let file = home
        .join(".config/mine/token")
        .to_string_lossy()
        .into_owned();
    assert!(view.masks.contains(&file), "{:?}", view.masks);
    // Without the entry, the file is not masked.
    let plain = load("").unwrap();
    assert!(!plain.launch_view(&env, &[]).masks.contains(&file));
}

#[test]
fn every_profile_source_file_is_a_default_mask() {
    let c = Config::defaults();
    let env = Env::new("/home/u");
    let view = c.launch_view(&env, &[]);
    for p in c.credentials() {
        if let Some(f) = p.file(&env) {
            let f = f.to_string_lossy().into_owned();
            assert!(view.masks.contains(&f), "{}: {f}", p.name);
        }
    }
}

#[test]
fn config_shows_each_credential_without_its_secret() {
    let c = load(FORGE).unwrap();
    let text = c.render_text();
    let line = text
        .lines()
        .find(|l| l.starts_with("credential[forge]"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("env=FORGE_TOKEN"), "{line}");
    assert!(
        line.contains("hosts=git.example.com *.example.com:8443"),
        "{line}"
    );
    assert!(line.contains("/home/u/.config/efr/config.toml:2"), "{line}");
    let gh = text
        .lines()
        .find(|l| l.starts_with("credential[github]"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        gh.contains("command=gh auth token") && gh.contains("default: GitHub"),
        "{gh}"
    );
    let json = c.to_json();
    assert!(json.to_string().contains("\"credential[npm]\""));
}
