//! The environment a contained call starts with (`[environment]` of the config,
//! `efr-sandbox run --env`): what is kept, what is dropped, and that a drop is said.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{backends, command, temp_env};

const GH_TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

fn project(dir: &Path) -> PathBuf {
    let p = dir.join("home/proj");
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// `efr-sandbox run --backend B --project P [extra] -- env` with `vars` added to its
/// environment; the line prints its environment.
fn run_env(dir: &Path, backend: &str, vars: &[(&str, &str)], extra: &[&str]) -> Output {
    let proj = project(dir);
    let mut c = command(dir);
    for (k, v) in vars {
        c.env(k, v);
    }
    c.arg("run")
        .args(["--backend", backend])
        .arg("--project")
        .arg(&proj)
        .arg("--cwd")
        .arg(&proj)
        .arg("--summary")
        .arg(dir.join("summary.json"))
        .args(extra)
        .args(["--", "env"]);
    c.output().unwrap()
}

fn lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect()
}

fn has(o: &Output, var: &str) -> bool {
    lines(o).iter().any(|l| l == var)
}

fn names(o: &Output) -> Vec<String> {
    lines(o)
        .iter()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n.to_string()))
        .collect()
}

fn summary_dropped(dir: &Path) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    v["env_dropped"]
        .as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn ca_bundles_registries_and_ci_reach_the_call_tokens_do_not() {
    for b in backends() {
        let d = temp_env();
        let o = run_env(
            d.path(),
            b,
            &[
                ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
                ("NODE_EXTRA_CA_CERTS", "/etc/ssl/company.pem"),
                ("PIP_INDEX_URL", "https://mirror.example/simple"),
                ("npm_config_registry", "https://npm.mirror.example/"),
                ("GOPROXY", "https://goproxy.example"),
                ("CI", "true"),
                ("EDITOR", "vi"),
                ("npm_config__authToken", "npmtokenvalue"),
                ("CARGO_REGISTRY_TOKEN", "cargotokenvalue"),
                ("CARGO_REGISTRIES_MINE_TOKEN", "cargotokenvalue"),
                ("EFR_TEST_UNLISTED", "x"),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        for want in [
            "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
            "NODE_EXTRA_CA_CERTS=/etc/ssl/company.pem",
            "PIP_INDEX_URL=https://mirror.example/simple",
            "npm_config_registry=https://npm.mirror.example/",
            "GOPROXY=https://goproxy.example",
            "CI=true",
            "EDITOR=vi",
        ] {
            assert!(has(&o, want), "{b}: {want} missing: {:?}", lines(&o));
        }
        let seen = names(&o);
        for bad in [
            "npm_config__authToken",
            "CARGO_REGISTRY_TOKEN",
            "CARGO_REGISTRIES_MINE_TOKEN",
            "EFR_TEST_UNLISTED",
        ] {
            assert!(!seen.iter().any(|n| n == bad), "{b}: {bad} kept: {seen:?}");
        }
        // Kept by `keep` (npm_config_*, CARGO_*) and refused by a drop rule of the name: said
        // by name (no value looked at), once each; what `keep` never names is not said.
        let mut said = summary_dropped(d.path());
        said.sort();
        assert_eq!(
            said,
            [
                "CARGO_REGISTRIES_MINE_TOKEN",
                "CARGO_REGISTRY_TOKEN",
                "npm_config__authToken"
            ],
            "{b}"
        );
        let err = String::from_utf8_lossy(&o.stderr);
        for n in &said {
            let line = format!(
                "{n} is not passed to the call: its name matches the environment's drop rule"
            );
            assert_eq!(err.matches(&line).count(), 1, "{b}: {err}");
        }
        for value in ["npmtokenvalue", "cargotokenvalue"] {
            assert!(!err.contains(value), "{b}: {err}");
        }
    }
}

#[test]
fn a_secret_value_is_dropped_and_said_never_shown() {
    for b in backends() {
        let d = temp_env();
        let o = run_env(
            d.path(),
            b,
            &[("PIP_INDEX_URL", "https://u:pipsecret@host.example/simple")],
            &["--env", &format!("FOO={GH_TOKEN}"), "--env", "SETME=hello"],
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        let seen = names(&o);
        assert!(
            !seen.iter().any(|n| n == "PIP_INDEX_URL" || n == "FOO"),
            "{b}: {seen:?}"
        );
        assert!(has(&o, "SETME=hello"), "{b}: {seen:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        for name in ["PIP_INDEX_URL", "FOO"] {
            assert_eq!(
                err.lines()
                    .filter(|l| l.starts_with(&format!("efr-sandbox: {name} is not passed")))
                    .count(),
                1,
                "{b}: {err}"
            );
        }
        assert!(
            !err.contains("pipsecret") && !err.contains(GH_TOKEN),
            "{b}: {err}"
        );
        assert_eq!(summary_dropped(d.path()), ["FOO", "PIP_INDEX_URL"], "{b}");
    }
}

#[test]
fn env_flag_keeps_the_callers_value_and_refuses_secret_names() {
    let d = temp_env();
    let o = run_env(
        d.path(),
        backends()[0],
        &[("EFR_TEST_MINE", "from-caller"), ("GITHUB_TOKEN", "x")],
        &["--env", "EFR_TEST_MINE", "--env", "GITHUB_TOKEN"],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(has(&o, "EFR_TEST_MINE=from-caller"), "{:?}", lines(&o));
    assert!(!names(&o).iter().any(|n| n == "GITHUB_TOKEN"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("efr-sandbox: GITHUB_TOKEN is not passed"),
        "{err}"
    );
    for bad in ["=x", "1A=x", "A B", ""] {
        let o = run_env(d.path(), backends()[0], &[], &["--env", bad]);
        assert_eq!(o.status.code(), Some(2), "--env {bad:?}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--env"),
            "{bad:?}: {o:?}"
        );
    }
}

/// A git config in the environment passes as one set: `--env GIT_CONFIG_KEY_0=...` is no
/// secret name (it once was, while `_COUNT` and `_VALUE_0` passed, and every git command
/// then failed with 128).
#[test]
fn git_config_set_passes_by_env_flags_and_inherited() {
    for b in backends() {
        let d = temp_env();
        let o = run_env(
            d.path(),
            b,
            &[
                ("GIT_CONFIG_KEY_1", "core.hooksPath"),
                ("GIT_CONFIG_VALUE_1", "/dev/null"),
            ],
            &[
                "--env",
                "GIT_CONFIG_COUNT=2",
                "--env",
                "GIT_CONFIG_KEY_0=core.pager",
                "--env",
                "GIT_CONFIG_VALUE_0=cat",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        for want in [
            "GIT_CONFIG_COUNT=2",
            "GIT_CONFIG_KEY_0=core.pager",
            "GIT_CONFIG_VALUE_0=cat",
            "GIT_CONFIG_KEY_1=core.hooksPath",
            "GIT_CONFIG_VALUE_1=/dev/null",
        ] {
            assert!(has(&o, want), "{b}: {want} missing: {:?}", lines(&o));
        }
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("is not passed"), "{b}: {err}");
        assert!(summary_dropped(d.path()).is_empty(), "{b}");
    }
}

/// A set with a key that names a program, or a value that holds a token, is dropped whole
/// and said, name by name, never with the value.
#[test]
fn git_config_set_is_dropped_whole_and_said() {
    for b in backends() {
        for (key, value) in [
            ("core.sshCommand", "ssh -o ProxyCommand=x"),
            ("user.name", GH_TOKEN),
        ] {
            let d = temp_env();
            let o = run_env(
                d.path(),
                b,
                &[
                    ("GIT_CONFIG_COUNT", "2"),
                    ("GIT_CONFIG_KEY_0", "core.pager"),
                    ("GIT_CONFIG_VALUE_0", "cat"),
                    ("GIT_CONFIG_KEY_1", key),
                    ("GIT_CONFIG_VALUE_1", value),
                ],
                &[],
            );
            assert_eq!(o.status.code(), Some(0), "{b} {key}: {o:?}");
            let seen = names(&o);
            assert!(
                !seen.iter().any(|n| n.starts_with("GIT_CONFIG")),
                "{b} {key}: {seen:?}"
            );
            let mut said = summary_dropped(d.path());
            said.sort();
            assert_eq!(
                said,
                [
                    "GIT_CONFIG_COUNT",
                    "GIT_CONFIG_KEY_0",
                    "GIT_CONFIG_KEY_1",
                    "GIT_CONFIG_VALUE_0",
                    "GIT_CONFIG_VALUE_1"
                ],
                "{b} {key}"
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.lines().any(
                    |l| l.starts_with("efr-sandbox: GIT_CONFIG_COUNT is not passed")
                        && l.contains("the GIT_CONFIG_* set is dropped as one")
                ),
                "{b} {key}: {err}"
            );
            assert!(!err.contains(GH_TOKEN), "{b}: {err}");
        }
    }
}

#[test]
fn config_keep_and_keep_remove() {
    for b in backends() {
        let d = temp_env();
        std::fs::create_dir_all(d.path().join("config/efr")).unwrap();
        std::fs::write(
            d.path().join("config/efr/config.toml"),
            "[environment]\nkeep = [\"EFR_TEST_MY_VAR\"]\nkeep_remove = [\"EDITOR\"]\n",
        )
        .unwrap();
        let o = run_env(
            d.path(),
            b,
            &[
                ("EFR_TEST_MY_VAR", "mine"),
                ("EDITOR", "vi"),
                ("PAGER", "less"),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(has(&o, "EFR_TEST_MY_VAR=mine"), "{b}: {:?}", lines(&o));
        assert!(has(&o, "PAGER=less"), "{b}: {:?}", lines(&o));
        assert!(
            !names(&o).iter().any(|n| n == "EDITOR"),
            "{b}: {:?}",
            lines(&o)
        );
    }
}

#[test]
fn a_bad_environment_config_is_a_clear_error() {
    for (text, want) in [
        ("[environment]\nkeep = [\"A B\"]\n", "environment.keep[0]"),
        (
            "[environment]\nkeep_remove = [\"NOPE\"]\n",
            "environment.keep has no entry NOPE",
        ),
        (
            "[environment]\nsecret_values = [\"(a|b)\"]\n",
            "environment.secret_values[0]",
        ),
        ("[environment]\nkept = []\n", "environment.kept"),
    ] {
        let d = temp_env();
        std::fs::create_dir_all(d.path().join("config/efr")).unwrap();
        std::fs::write(d.path().join("config/efr/config.toml"), text).unwrap();
        let o = run_env(d.path(), backends()[0], &[], &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text}: {o:?}");
        assert!(err.contains(want), "{text}: {err}");
    }
}

/// `sandbox.launch`: the launcher starts from the service's environment; what of it is
/// dropped for its value is in the end's summary, by name.
#[test]
fn sandbox_launch_names_the_dropped_in_its_summary() {
    let dir = temp_env();
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = command(dir.path());
    cmd.env("PIP_INDEX_URL", "https://u:pipsecret@host.example/simple")
        .env("GOPROXY", "https://goproxy.example")
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--test-methods");
    let s = common::Server::spawn(cmd, dir, socket);
    let proj = project(s.dir.path());
    let mut c = s.client();
    c.request(
        1,
        "sandbox.launch",
        serde_json::json!({"line": "env", "projects": [proj]}),
    );
    let (items, end) = common::collect(&mut c, 1);
    let out: String = items
        .iter()
        .filter(|i| i["kind"] == "output" && i["stream"] == "stdout")
        .map(|i| i["data"].as_str().unwrap_or_default())
        .collect();
    assert!(
        out.lines().any(|l| l == "GOPROXY=https://goproxy.example"),
        "{out}"
    );
    assert!(
        !out.contains("PIP_INDEX_URL") && !out.contains("pipsecret"),
        "{out}"
    );
    assert_eq!(
        end["end"]["sandbox_summary"]["env_dropped"],
        serde_json::json!(["PIP_INDEX_URL"]),
        "{end}"
    );
}
