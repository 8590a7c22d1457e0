//! The built-in `[environment]` of `policy/defaults.toml`: what it keeps and drops, and its
//! secret value patterns over many spellings of real secrets and of ordinary values.

use efr_policy::config::Config;
use efr_sandbox_wire::envfilter::{CompiledEnvPolicy, DropReason};

fn policy() -> CompiledEnvPolicy {
    Config::defaults().env_policy().compile().unwrap()
}

#[test]
fn secret_values_are_found() {
    let p = policy();
    for v in [
        "https://u:secret@host/simple",
        "https://user:p%40ss@pypi.company.example/simple/",
        "http://:tok@registry.example",
        "git+https://bob:hunter2@git.example/repo.git",
        "postgres://app:pw@db:5432/app",
        "redis://default:pw@127.0.0.1:6379",
        "https://mirror.example/simple https://u:pw@extra.example/simple",
        // A user part without a password is a token too (Azure Artifacts, Gemfury, Go
        // proxies): https://TOKEN@host, https://TOKEN:@host.
        "https://user@git.example/repo.git",
        "https://abcdefghijklmnopqrstuvwxyz0123456789@pkgs.dev.azure.com/org/_packaging/f/pypi/simple/",
        "https://abcdefghijklmnopqrst:@repo.fury.io/acme/",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "gho_0123456789abcdefghijABCDEFGHIJ012345",
        "ghs_0123456789abcdefghijABCDEFGHIJ012345",
        "github_pat_11ABCDEFG0123456789abcd_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVW",
        "token ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "xoxb-123456789012-1234567890123-abcdefghij",
        "xoxp-1234567890-abcdef",
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "sk-abcdefghijklmnopqrstuvwx",
        "sk_live_abcdefghijklmnop1234",
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAIOSFODNN7EXAMPLE",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
        "glpat-abcdefghij0123456789",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        // JSON web tokens, put together here: whole ones in this file would be tokens a
        // surface scan of the repository asks about.
        &format!(
            "eyJhbGciOiJIUzI1NiJ9.{}.{}",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
        ),
        &format!(
            "Bearer eyJhbGciOiJSUzI1NiJ9.{}.{}",
            "eyJpc3MiOiJ4In0abc", "c2lnbmF0dXJlc2ln"
        ),
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn",
        "-----BEGIN PRIVATE KEY-----",
    ] {
        assert!(
            matches!(p.secret_value(v), Some(DropReason::Pattern(_))),
            "not taken for a secret: {v}"
        );
    }
}

#[test]
fn ordinary_values_are_kept() {
    let p = policy();
    for v in [
        "/usr/local/bin:/usr/bin:/bin",
        "https://pypi.company.example/simple",
        "https://host.example:8443/path",
        "http://127.0.0.1:3128",
        "https://registry.npmjs.org/",
        "https://proxy.golang.org,direct",
        "/etc/ssl/certs/ca-certificates.crt",
        "xterm-256color",
        "en_US.UTF-8",
        "vim -u NONE",
        "less -R",
        "true",
        "-C target-cpu=native",
        "sk-short",
        "ghp_short",
        "mask-AKIAIOSFODNN7EX",
        "task-runner",
        "desk-abcdefghijklmnopqrstuvwxyz",
        "eyJhbGciOiJIUzI1NiJ9",
        "npm_config_registry",
        "user:pass",
    ] {
        assert_eq!(p.secret_value(v), None, "taken for a secret: {v}");
    }
    let long = "a".repeat(efr_sandbox_wire::envfilter::MAX_CHECKED_VALUE + 1);
    assert_eq!(p.secret_value(&long), Some(DropReason::TooLong));
}

#[test]
fn kept_and_dropped_names() {
    let p = policy();
    for n in [
        "PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "PIP_CERT",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "npm_config_registry",
        "npm_config_cafile",
        "NPM_CONFIG_REGISTRY",
        "GOPROXY",
        "GOFLAGS",
        "CARGO_HOME",
        "CARGO_REGISTRIES_MINE_INDEX",
        "CI",
        "TERM",
        "LANG",
        "LC_ALL",
        "EDITOR",
        "PAGER",
        "GIT_AUTHOR_NAME",
    ] {
        assert!(p.listed(n), "{n} not kept");
        assert_eq!(p.dropped_name(n), None, "{n} dropped");
    }
    for n in [
        "npm_config__authToken",
        "npm_config__auth",
        "npm_config_//registry.npmjs.org/:_authToken",
        "NPM_CONFIG__AUTH",
        "npm_config__password",
        "CARGO_REGISTRY_TOKEN",
        "CARGO_REGISTRIES_MINE_TOKEN",
        "CARGO_REGISTRIES_MINE_CREDENTIAL_PROVIDER",
        "CARGO_REGISTRY_CREDENTIAL_PROVIDER",
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
        "my_password",
    ] {
        assert!(p.dropped_name(n).is_some(), "{n} not dropped");
    }
    for n in ["RANDOM_THING", "LS_COLORS", "OLDPWD", "SSH_CONNECTION"] {
        assert!(!p.listed(n), "{n} kept");
    }
}

/// The classifier's view of a call's environment keeps the `GIT_CONFIG_*` set as the
/// launcher does: whole when it passes (its key names are no `*_KEY_*` secret names), not
/// at all when one pair names a program.
#[test]
fn classifier_call_env_judges_the_git_config_set_as_one() {
    let config = Config::defaults();
    let vars = |key: &str| {
        [
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", key),
            ("GIT_CONFIG_VALUE_0", ""),
            ("GIT_PAGER", "cat"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    };
    let names = |key: &str| {
        efr_policy::context::Context::defaults("/home/u")
            .with_call_env(&config, vars(key))
            .call_env
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names("core.hooksPath"),
        [
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "GIT_PAGER"
        ]
    );
    assert_eq!(names("alias.x"), ["GIT_PAGER"]);
}
