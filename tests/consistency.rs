//! What `explain` says is what a contained call gets. The plan is built from efr-policy's
//! config as the service builds it (`Config::launch_view`); for each path, explain's
//! access (none / read / write) is compared with what a real contained call could do there
//! (read the real content, create or append), on both backends.

mod common;

use std::path::PathBuf;

use common::{Fixture, backends, python, run_plan};
use efr_policy::config::{Config, Env};
use efr_policy::explain::explain_path;
use efr_sandbox_wire::Access;
use serde_json::Value;

/// Prints one JSON line per path: its content (hex, or the sorted listing of a dir; null
/// when unreadable) and whether a write (append, or create-and-remove) worked.
const PROBE: &str = r#"
import os, sys, json
for p in sys.argv[1:]:
    r = {"path": p}
    try:
        r["content"] = sorted(os.listdir(p)) if os.path.isdir(p) else open(p, "rb").read().hex()
    except Exception:
        r["content"] = None
    try:
        if os.path.isdir(p):
            t = os.path.join(p, ".efr-probe"); open(t, "x").close(); os.unlink(t)
        elif os.path.lexists(p):
            open(p, "ab").close()
        else:
            open(p, "x").close(); os.unlink(p)
        r["write"] = True
    except Exception:
        r["write"] = False
    print(json.dumps(r))
"#;

fn host_content(p: &str) -> Option<Value> {
    let pb = PathBuf::from(p);
    if pb.is_dir() {
        let mut v: Vec<String> = std::fs::read_dir(&pb)
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        Some(serde_json::json!(v))
    } else {
        let b = std::fs::read(&pb).ok()?;
        Some(Value::String(
            b.iter().map(|x| format!("{x:02x}")).collect(),
        ))
    }
}

#[test]
fn explain_matches_what_a_contained_call_gets() {
    let fx = Fixture::new();
    let base = fx.dir.path().canonicalize().unwrap();
    let run = base.join("run");
    std::fs::create_dir_all(run.join("efr")).unwrap();
    std::fs::write(run.join("efr/agent"), "sock-ish").unwrap();
    let h = |r: &str| format!("{}/{r}", fx.home);
    let p = |r: &str| format!("{}/{r}", fx.proj);
    std::fs::create_dir_all(h(".gnupg/private-keys-v1.d")).unwrap();
    std::fs::write(h(".gnupg/private-keys-v1.d/k.key"), "secret key").unwrap();
    std::fs::write(p(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
    std::fs::create_dir_all(p("src")).unwrap();
    std::fs::write(p("src/main.c"), "int main(){}\n").unwrap();
    std::fs::write(format!("{}/notes", fx.scratch), "n\n").unwrap();
    // Repositories below the project root: one the launcher looks for (two levels down),
    // one deeper than it looks, one inside build output.
    for repo in ["libs/a", "x/y/z/w", "node_modules/pkg"] {
        std::fs::create_dir_all(p(repo)).unwrap();
        let ok = std::process::Command::new("git")
            .args(["init", "-q", &p(repo)])
            .env("HOME", &fx.home)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git init {repo}");
        std::fs::write(p(&format!("{repo}/.git/hooks/pre-commit")), "#!/bin/sh\n").unwrap();
    }

    let mut env = Env::new(&fx.home);
    env.runtime_dir = Some(run.clone());
    env.scratch = Some(PathBuf::from(&fx.scratch));
    let config = Config::defaults();
    let projects = vec![PathBuf::from(&fx.proj)];
    let view = config.launch_view(&env, &projects);

    // (path, host content shown inside /tmp is the conversation's tmp dir)
    let paths: Vec<String> = vec![
        h(".ssh"),
        h(".ssh/id_rsa"),
        h(".aws/credentials"),
        h(".netrc"),
        h(".gnupg/private-keys-v1.d/k.key"),
        run.to_string_lossy().into_owned(),
        format!("{}/efr/agent", run.display()),
        p("README"),
        p("src/main.c"),
        p("src/new-file"),
        p(".git/hooks"),
        p(".git/hooks/pre-commit"),
        p(".git/config"),
        p(".git/HEAD"),
        p(".envrc"),
        p("libs/a/.git/hooks"),
        p("libs/a/.git/hooks/pre-commit"),
        p("libs/a/.git/hooks/post-merge"),
        p("libs/a/.git/config"),
        p("libs/a/.gitmodules"),
        p("libs/a/README"),
        p("x/y/z/w/.git/config"),
        p("node_modules/pkg/.git/config"),
        "/etc/passwd".into(),
        "/etc".into(),
        h(".bashrc"),
        h(".gitconfig"),
        h("new-in-home"),
        format!("{}/file", fx.other),
        format!("{}/notes", fx.scratch),
        format!("{}/new", fx.scratch),
        "/tmp/new-in-tmp".into(),
    ];
    // Every nested repository's protected paths are protected like the root's, at any depth
    // and in build output too (the launcher's supervisor looks at every directory on the
    // way to a path).
    for (rel, want) in [
        ("libs/a/.git/hooks/pre-commit", Access::Read),
        ("libs/a/.git/config", Access::Read),
        ("libs/a/.gitmodules", Access::Read),
        ("libs/a/README", Access::Write),
        ("x/y/z/w/.git/config", Access::Read),
        ("node_modules/pkg/.git/config", Access::Read),
        ("node_modules/pkg/.envrc", Access::Read),
        ("node_modules/pkg/index.js", Access::Write),
    ] {
        let ex = explain_path(p(rel).as_ref(), None, &projects, &config, &env).unwrap();
        assert_eq!(ex.access, want, "{rel}: {ex:?}");
    }
    let line = format!(
        "{} -c '{}' {}",
        python(),
        PROBE.replace('\'', "'\\''"),
        paths.join(" ")
    );
    for b in backends() {
        let mut r = fx.request(&line, b);
        r.read_only_inside = view.read_only_inside.clone();
        r.masks = view.masks.clone();
        if let Some(e) = r.env.as_mut() {
            e.push(common::var("XDG_RUNTIME_DIR", run.to_string_lossy()));
        }
        let plan = r;
        let ran = run_plan(&plan, None);
        assert_eq!(ran.status.code(), Some(0), "{b:?} {ran:?}");
        let got: Vec<Value> = ran
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), paths.len(), "{ran:?}");
        let mut wrong = Vec::new();
        for (path, g) in paths.iter().zip(&got) {
            let ex = explain_path(path.as_ref(), None, &projects, &config, &env).unwrap();
            // /tmp inside is the conversation's tmp dir on the host.
            let host = if let Some(rest) = path.strip_prefix("/tmp/") {
                host_content(&format!("{}/{rest}", fx.tmp))
            } else {
                host_content(path)
            };
            let exists = host.is_some();
            let real = if g["write"] == Value::Bool(true) {
                Access::Write
            } else if !exists || (g["content"] == host.unwrap() && g["content"] != Value::Null) {
                // A missing path that cannot be created reads as `read` (explain's word).
                Access::Read
            } else {
                Access::None
            };
            if real != ex.access {
                wrong.push(format!(
                    "{path}: explain says {:?}, the call got {real:?} ({g})",
                    ex.access
                ));
            }
        }
        assert!(wrong.is_empty(), "{b:?}:\n{}", wrong.join("\n"));
    }
}

/// The launcher's tmpfs sizes for a plan that names none are the built-in config's.
#[test]
fn tmpfs_sizes_of_the_launcher_are_the_config_s() {
    let c = Config::defaults();
    assert_eq!(
        c.sandbox.tmp_size.value.to_string(),
        efr_launcher::plan::DEFAULT_TMP_SIZE
    );
    assert_eq!(
        c.sandbox.shm_size.value.to_string(),
        efr_launcher::plan::DEFAULT_SHM_SIZE
    );
}

/// The launcher's fallback environment list (a plan without `env_policy`) keeps only what
/// the built-in config's `[environment] keep` has, each entry as written there; and each
/// variable a grant keeps is one the config does not keep without the grant.
#[test]
fn the_launcher_s_env_fallback_is_part_of_the_config_s() {
    let c = Config::defaults();
    let keep: Vec<&str> = c
        .environment
        .keep
        .iter()
        .map(|e| e.value.as_str())
        .collect();
    for (name, reason) in efr_launcher::env::FALLBACK_KEEP {
        assert!(
            keep.contains(name),
            "{name} ({reason}) is kept by the launcher's fallback but not by defaults.toml"
        );
        assert!(!reason.is_empty(), "{name} has no reason");
    }
    let policy = c
        .env_policy()
        .compile()
        .expect("the built-in policy compiles");
    for (by, name, reason) in efr_launcher::env::GRANT_VARS {
        assert!(
            !policy.listed(name) || policy.dropped_name(name).is_some(),
            "{name} ({reason}) is kept without its {by:?} grant"
        );
    }
}
