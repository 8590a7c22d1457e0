//! Config: defaults, the user's file on top, errors with line and column, the store.

use std::fs;
use std::path::{Path, PathBuf};

use efr_policy::config::{
    BackendChoice, Config, ConfigStore, DEFAULTS_TOML, Env, LoadError, Source,
};
use efr_sandbox_wire::size::Size;

fn file_with(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    fs::write(&path, text).unwrap();
    (dir, path)
}

fn has(list: &[efr_policy::config::Entry], value: &str) -> bool {
    list.iter().any(|e| e.value == value)
}

#[test]
fn defaults_parse_and_every_entry_has_a_reason() {
    let c = Config::defaults();
    assert!(c.file.is_none());
    assert_eq!(c.sandbox.backend.value, BackendChoice::Auto);
    for key in [
        "~/.ssh",
        "~/.gnupg",
        "~/.aws",
        "$XDG_RUNTIME_DIR",
        "/run/docker.sock",
        "/run/dbus",
        "~/.cargo/credentials.toml",
    ] {
        assert!(has(&c.sandbox.masks, key), "{key}");
    }
    for key in [
        ".git/hooks",
        ".git/config",
        ".gitmodules",
        ".envrc",
        ".vscode",
        ".idea",
        ".efr",
    ] {
        assert!(has(&c.sandbox.read_only_inside, key), "{key}");
    }
    for key in [
        "~/.bashrc",
        "~/.ssh/config",
        "~/.gitconfig",
        "/var/spool/cron",
        ".git/hooks",
    ] {
        assert!(has(&c.floors.paths, key), "{key}");
    }
    assert_eq!(c.floor_lines().count(), 6);
    let lists = [
        &c.sandbox.masks,
        &c.sandbox.read_only_inside,
        &c.sandbox.caches,
        &c.sandbox.build_output,
        &c.sandbox.trash,
        &c.network.deny,
        &c.network.token_files,
        &c.bus.talk,
        &c.floors.paths,
        &c.floors.lines,
        &c.git.safe_config_keys,
    ];
    for list in lists {
        for e in list {
            assert!(!e.reason.is_empty(), "{}", e.value);
            assert_eq!(e.source, Source::Default);
        }
    }
    assert!(c.network.allow.is_empty());
    assert!(c.network.netview.value);
    assert!(c.bus.filter.value);
    assert!(!c.permissions.allow_full.value);
    assert!(DEFAULTS_TOML.contains("[sandbox]"));
}

#[test]
fn no_file_gives_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = Env::new(dir.path().join("home"));
    assert_eq!(
        env.config_file(),
        dir.path().join("home/.config/efr/config.toml")
    );
    env.config_home = Some(dir.path().join("xdg"));
    assert_eq!(env.config_file(), dir.path().join("xdg/efr/config.toml"));
    let c = Config::load(&env).unwrap();
    assert_eq!(c, Config::defaults());
}

#[test]
fn user_file_adds_removes_and_replaces() {
    let text = r#"# my config
[sandbox]
backend = "bwrap"
masks = [
  "~/.secrets",
  { path = "~/.config/mytool", reason = "mytool tokens" },
]
masks_remove = ["~/.npmrc"]
writable = ["~/shared"]

[network]
allow = ["crates.io", "*.npmjs.org"]
netview = false
resolve = { "registry.local" = "127.0.0.1" }

[permissions]
allow_full = true

[[always]]
command = ["cargo", "publish"]
host = "crates.io"
reason = "publishing is fine"

[[always]]
command = "git push origin *"
kind = "upload"
"#;
    let (_d, path) = file_with(text);
    let c = Config::load_file(&path).unwrap();
    assert_eq!(c.file.as_deref(), Some(path.as_path()));
    assert_eq!(c.sandbox.backend.value, BackendChoice::Bwrap);
    assert_eq!(
        c.sandbox.backend.source,
        Source::File {
            path: path.clone(),
            line: 3
        }
    );
    assert!(has(&c.sandbox.masks, "~/.ssh"));
    assert!(!has(&c.sandbox.masks, "~/.npmrc"));
    let secrets = c
        .sandbox
        .masks
        .iter()
        .find(|e| e.value == "~/.secrets")
        .unwrap();
    assert_eq!(
        secrets.source,
        Source::File {
            path: path.clone(),
            line: 5
        }
    );
    assert!(secrets.reason.is_empty());
    assert!(secrets.reason_or_source().contains("config.toml:5"));
    let mytool = c
        .sandbox
        .masks
        .iter()
        .find(|e| e.value == "~/.config/mytool")
        .unwrap();
    assert_eq!(mytool.reason, "mytool tokens");
    assert!(has(&c.sandbox.writable, "~/shared"));
    assert!(has(&c.network.allow, "*.npmjs.org"));
    assert!(!c.network.netview.value);
    assert_eq!(c.network.resolve[0].name, "registry.local");
    assert_eq!(c.network.resolve[0].address.to_string(), "127.0.0.1");
    assert!(c.permissions.allow_full.value);
    assert_eq!(c.always.len(), 2);
    assert_eq!(c.always[0].command, ["cargo", "publish"]);
    assert_eq!(c.always[1].command, ["git", "push", "origin", "*"]);
    assert_eq!(c.always[1].kind, Some(efr_sandbox_wire::ExitKind::Upload));

    // What `efr-sandbox config` prints.
    let out = c.render_text();
    assert!(
        out.contains(&format!("# config file: {}", path.display())),
        "{out}"
    );
    let ssh = out
        .lines()
        .find(|l| l.starts_with("sandbox.masks") && l.contains("~/.ssh "))
        .unwrap();
    assert!(
        ssh.ends_with("(default: ssh private keys, agent config and known hosts)"),
        "{ssh}"
    );
    let backend = out
        .lines()
        .find(|l| l.starts_with("sandbox.backend"))
        .unwrap();
    assert!(
        backend.contains("bwrap") && backend.ends_with(&format!("({}:3)", path.display())),
        "{backend}"
    );
    let rc = out
        .lines()
        .find(|l| l.contains("~/.config/mytool"))
        .unwrap();
    assert!(
        rc.ends_with(&format!("({}:6: mytool tokens)", path.display())),
        "{rc}"
    );
    assert!(out.contains("always[0]"), "{out}");
    assert!(
        !out.lines()
            .any(|l| l.starts_with("sandbox.masks") && l.contains("~/.npmrc ")),
        "{out}"
    );

    let json = c.to_json();
    assert_eq!(json["file"], path.display().to_string());
    let values = json["values"].as_array().unwrap();
    let b = values
        .iter()
        .find(|v| v["key"] == "sandbox.backend")
        .unwrap();
    assert_eq!(b["value"], "bwrap");
    assert_eq!(b["source"]["kind"], "file");
    assert_eq!(b["source"]["line"], 3);
    let s = values.iter().find(|v| v["value"] == "~/.ssh").unwrap();
    assert_eq!(s["source"]["kind"], "default");
    assert_eq!(s["key"], "sandbox.masks");
}

#[test]
fn tmpfs_sizes() {
    let d = Config::defaults();
    assert_eq!(d.sandbox.tmp_size.value, Size::Percent(25));
    assert_eq!(d.sandbox.shm_size.value, Size::Percent(10));
    let (_d, path) = file_with("[sandbox]\ntmp_size = \"512M\"\nshm_size = \"5%\"\n");
    let c = Config::load_file(&path).unwrap();
    assert_eq!(c.sandbox.tmp_size.value, Size::Bytes(512 << 20));
    assert_eq!(c.sandbox.shm_size.value, Size::Percent(5));
    let text = c.render_text();
    let line = text.lines().find(|l| l.starts_with("sandbox.tmp_size"));
    assert!(
        line.is_some_and(|l| l.contains("512M") && l.contains("config.toml:2")),
        "{text}"
    );
}

fn invalid(text: &str) -> LoadError {
    let (_d, path) = file_with(text);
    Config::load_file(&path).unwrap_err()
}

#[test]
fn the_lines_shell() {
    assert_eq!(
        Config::defaults().sandbox.shell.value,
        efr_policy::config::ShellChoice::Bash
    );
    let (_d, path) = file_with("[sandbox]\nshell = \"sh\"\n");
    let c = Config::load_file(&path).unwrap();
    assert_eq!(c.sandbox.shell.value, efr_policy::config::ShellChoice::Sh);
    for bad in ["\"dash\"", "\"bin/bash\"", "1"] {
        let e = invalid(&format!("[sandbox]\nshell = {bad}\n"));
        assert_eq!(e.key(), Some("sandbox.shell"), "{bad}: {e}");
    }
}

#[test]
fn unknown_keys_are_errors() {
    let e = invalid("[sandbox]\nbackend = \"auto\"\nmaks = [\"~/.x\"]\n");
    assert_eq!(e.key(), Some("sandbox.maks"));
    assert_eq!(e.line_column(), Some((3, 1)));
    let msg = e.to_string();
    assert!(
        msg.contains(
            "sandbox.maks: unknown key (known here: backend, tmp_size, shm_size, conversation_cache_days, shell, masks, masks_remove"
        ),
        "{msg}"
    );
    assert!(msg.contains("line 3, column 1"), "{msg}");

    // A top-level table that is not a sandbox section is efrd's (or a typo): it is ignored
    // and named, never an error, since efrd keeps its sections in the same file.
    let (_d, path) =
        file_with("[model]\nname = \"x\"\n[sandboxx]\n[sandbox]\nbackend = \"native\"\n");
    let c = Config::load_file(&path).expect("other sections are ignored");
    assert_eq!(
        c.ignored_sections,
        vec!["model".to_string(), "sandboxx".to_string()]
    );
    assert!(
        c.render_text()
            .contains("# ignored (not sandbox sections): [model] [sandboxx]")
    );
    assert_eq!(
        c.to_json()["ignored_sections"],
        serde_json::json!(["model", "sandboxx"])
    );
    let e = invalid("[network]\nallow = [{ host = \"a.com\", why = \"x\" }]\n");
    assert_eq!(e.key(), Some("network.allow[0].why"));
    assert_eq!(e.line_column(), Some((2, 28)));
    let e = invalid("[[always]]\ncommand = [\"x\"]\nwhen = 1\n");
    assert_eq!(e.key(), Some("always[0].when"));
}

#[test]
fn bad_values_are_errors_with_the_key() {
    let cases = [
        ("[sandbox]\nbackend = \"docker\"\n", "sandbox.backend"),
        ("[sandbox]\nbackend = 3\n", "sandbox.backend"),
        ("[sandbox]\ntmp_size = \"lots\"\n", "sandbox.tmp_size"),
        ("[sandbox]\ntmp_size = \"200%\"\n", "sandbox.tmp_size"),
        ("[sandbox]\nshm_size = \"4k\"\n", "sandbox.shm_size"),
        ("[sandbox]\nshm_size = 64\n", "sandbox.shm_size"),
        ("[sandbox]\nmasks = \"~/.x\"\n", "sandbox.masks"),
        (
            "[sandbox]\nwritable = [\"relative/dir\"]\n",
            "sandbox.writable[0]",
        ),
        (
            "[sandbox]\nread_only_inside = [\"/abs\"]\n",
            "sandbox.read_only_inside[0]",
        ),
        ("[sandbox]\nmasks = [\"~bob/.ssh\"]\n", "sandbox.masks[0]"),
        ("[sandbox]\nmasks = [\"$NOPE/x\"]\n", "sandbox.masks[0]"),
        ("[sandbox]\nmasks = [\"~/a/../b\"]\n", "sandbox.masks[0]"),
        (
            "[sandbox]\nmasks_remove = [\"~/.not-a-default\"]\n",
            "sandbox.masks_remove[0]",
        ),
        ("[network]\nallow = [\"Bad_Host\"]\n", "network.allow[0]"),
        (
            "[network]\nresolve = { \"r.local\" = \"not-an-ip\" }\n",
            "network.resolve.r.local",
        ),
        ("[network]\nnetview = \"yes\"\n", "network.netview"),
        ("[floors]\nlines = [\"rm_everything\"]\n", "floors.lines[0]"),
        ("[[always]]\nreason = \"no matcher\"\n", "always[0]"),
        (
            "[[always]]\ncommand = [\"git\"]\nkind = \"teleport\"\n",
            "always[0].kind",
        ),
        ("[[always]]\ncommand = [\"*\"]\n", "always[0].command"),
        ("always = 3\n", "always"),
        // The never list of the bus filter is the defaults' own: no file adds to it or
        // takes from it (allow_never opens an entry, with a warning).
        ("[bus]\nnever = [\"a.b\"]\n", "bus.never"),
        (
            "[bus]\nnever_remove = [\"org.freedesktop.systemd1\"]\n",
            "bus.never_remove",
        ),
    ];
    for (text, key) in cases {
        let e = invalid(text);
        assert!(matches!(e, LoadError::Invalid { .. }), "{text}: {e}");
        assert_eq!(e.key(), Some(key), "{text}: {e}");
        assert!(e.line_column().is_some());
        let msg = e.to_string();
        assert!(!msg.ends_with('.'), "{msg}");
    }
    let e = invalid("[sandbox]\nmasks_remove = [\"~/.nope\"]\n");
    assert!(
        e.to_string()
            .contains("sandbox.masks has no entry ~/.nope to remove"),
        "{e}"
    );
}

#[test]
fn broken_toml_has_line_and_column() {
    let e = invalid("[sandbox]\nbackend = \"auto\"\nmasks = [\"~/.x\",\n\n  oops ]\n");
    match &e {
        LoadError::Parse {
            line,
            column,
            message,
            ..
        } => {
            assert_eq!((*line, *column), (5, 3), "{message}");
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().starts_with("config file "));
    assert!(
        e.to_string()
            .contains("is not valid toml at line 5, column 3")
    );
    let e = invalid("[sandbox]\nbackend = \"auto\"\nbackend = \"native\"\n");
    assert!(matches!(e, LoadError::Parse { line: 3, .. }), "{e}");
    // Not UTF-8.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    fs::write(&path, b"[sandbox]\nbackend = \"a\xffb\"\n").unwrap();
    let e = Config::load_file(&path).unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Parse {
                line: 2,
                column: 13,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn unreadable_path_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be.
    let path = dir.path().join("config.toml");
    fs::create_dir(&path).unwrap();
    let e = Config::load_file(&path).unwrap_err();
    assert!(matches!(e, LoadError::Io { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("cannot read config file {}", path.display()))
    );
}

#[test]
fn store_keeps_the_last_good_config() {
    let (_d, path) = file_with("[permissions]\nallow_full = true\n");
    let mut store = ConfigStore::open(path.clone());
    assert!(store.last_error().is_none());
    assert!(store.config().permissions.allow_full.value);

    fs::write(&path, "[permissions]\nallow_full = fals\n").unwrap();
    let e = store.reload().unwrap_err();
    assert_eq!(e.line_column(), Some((2, 14)));
    assert!(
        store.config().permissions.allow_full.value,
        "the last good config stays"
    );
    assert!(store.last_error().is_some());

    fs::write(&path, "[permissions]\nallow_full = false\n").unwrap();
    store.reload().unwrap();
    assert!(!store.config().permissions.allow_full.value);
    assert!(store.last_error().is_none());

    fs::remove_file(&path).unwrap();
    store.reload().unwrap();
    assert_eq!(*store.config(), Config::defaults());
}

#[test]
fn store_starts_on_defaults_when_the_file_is_broken() {
    let (_d, path) = file_with("[sandbox\n");
    let store = ConfigStore::open(path.clone());
    assert_eq!(*store.config(), Config::defaults());
    assert_eq!(store.last_error().unwrap().path(), path.as_path());
}

#[test]
fn env_expansion() {
    let mut env = Env::new("/home/u");
    assert_eq!(env.expand("~"), Some(PathBuf::from("/home/u")));
    assert_eq!(env.expand("~/.ssh"), Some(PathBuf::from("/home/u/.ssh")));
    assert_eq!(env.expand("$XDG_RUNTIME_DIR"), None);
    env.runtime_dir = Some(PathBuf::from("/run/user/7"));
    assert_eq!(
        env.expand("$XDG_RUNTIME_DIR/bus"),
        Some(PathBuf::from("/run/user/7/bus"))
    );
    assert_eq!(
        env.expand("$XDG_CONFIG_HOME/efr"),
        Some(PathBuf::from("/home/u/.config/efr"))
    );
    assert_eq!(env.expand("/etc"), Some(PathBuf::from("/etc")));
    assert_eq!(env.expand(".git/hooks"), None);
    assert!(Path::new(&env.config_file()).ends_with(".config/efr/config.toml"));
}

#[test]
fn duplicate_of_a_default_keeps_the_default() {
    let (_d, path) = file_with("[sandbox]\nmasks = [\"~/.ssh/\"]\n");
    let c = Config::load_file(&path).unwrap();
    let n = c
        .sandbox
        .masks
        .iter()
        .filter(|e| e.value.trim_end_matches('/') == "~/.ssh")
        .count();
    assert_eq!(n, 1);
}

#[test]
fn arbitrary_input_does_not_panic() {
    let samples = [
        "",
        "=",
        "[[always]]",
        "[sandbox]\nmasks=[[]]",
        "[network.resolve]\n\"\"=\"::1\"",
        "a.b.c=1",
        "[floors]\npaths=[{path=1}]",
        "[bus]\ntalk=[{name=\"a\",reason=\"x\\ny\"}]",
        "\u{feff}[sandbox]",
        "[sandbox]\nbuild_output=[\"a/b\"]",
        "[[always]]\ncommand=[\"\"]",
    ];
    for s in samples {
        let _ = Config::from_toml_str(s, Path::new("/x.toml"));
    }
}

#[test]
fn the_safe_git_keys_have_reasons_and_no_code_running_key_is_among_them() {
    let c = Config::defaults();
    assert!(!c.git.safe_config_keys.is_empty());
    for e in &c.git.safe_config_keys {
        assert!(!e.reason.is_empty(), "{}", e.value);
        assert_eq!(e.source, Source::Default);
    }
    // Keys that make git run a program (a subsection where the key has one).
    for key in [
        "core.fsmonitor",
        "core.sshcommand",
        "core.pager",
        "core.editor",
        "core.askpass",
        "core.gitproxy",
        "alias.st",
        "diff.x.textconv",
        "diff.x.command",
        "diff.external",
        "filter.x.clean",
        "filter.x.smudge",
        "filter.x.process",
        "include.path",
        "includeIf.gitdir:/x/.path",
        "credential.helper",
        "credential.https://h.example.helper",
        "protocol.ext.allow",
        "protocol.allow",
        "trailer.x.command",
        "trailer.x.cmd",
        "gpg.program",
        "gpg.ssh.program",
        "gpg.ssh.defaultKeyCommand",
        "core.alternateRefsCommand",
        "merge.x.driver",
        "mergetool.x.path",
        "mergetool.x.cmd",
        "difftool.x.cmd",
        "difftool.x.path",
        "browser.x.cmd",
        "browser.x.path",
        "remote.origin.vcs",
        "remote.origin.uploadpack",
        "remote.origin.receivepack",
        "uploadpack.packObjectsHook",
        "sequence.editor",
        "core.hooksPath",
        "core.worktree",
        "submodule.x.update",
        "pager.log",
        "man.x.cmd",
        "sendemail.smtpserver",
        "http.proxy",
        "ssh.variant",
    ] {
        assert!(
            !c.git_key_is_safe(key, b"x"),
            "{key} is on git.safe_config_keys"
        );
        let lower = key.to_ascii_lowercase();
        assert!(!c.git_key_is_safe(&lower, b"x"), "{lower}");
    }
    for (key, value) in [
        ("core.bare", "false"),
        ("user.name", "Kept Name"),
        ("remote.origin.url", "https://h.example/r.git"),
        ("branch.main.merge", "refs/heads/main"),
        ("submodule.lib.url", "../lib.git"),
    ] {
        assert!(c.git_key_is_safe(key, value.as_bytes()), "{key}");
    }
    // An ext:: url runs a command when protocol.ext.allow lets it.
    assert!(!c.git_key_is_safe("remote.origin.url", b"ext::sh -c touch% /tmp/x"));
    assert!(!c.git_key_is_safe("submodule.x.url", b"  EXT::sh"));
}

#[test]
fn git_key_patterns_match_a_subsection_with_a_star() {
    use efr_policy::config::git_key_matches as m;
    assert!(m("remote.*.url", "remote.origin.url"));
    assert!(m("remote.*.url", "remote.a.b.url"));
    assert!(m("REMOTE.*.URL", "remote.origin.url"));
    assert!(!m("remote.*.url", "remote.url"));
    assert!(!m("core.bare", "core.x.bare"));
    assert!(m("core.bare", "core.bare"));
    assert!(m("branch.main.merge", "branch.main.merge"));
    assert!(!m("branch.main.merge", "branch.Main.merge"));
}

#[test]
fn a_user_file_adds_and_removes_safe_git_keys() {
    let (_d, path) = file_with(
        "[git]\nsafe_config_keys = [{ key = \"color.*.meta\", reason = \"mine\" }]\nsafe_config_keys_remove = [\"user.name\"]\n",
    );
    let c = Config::load_file(&path).unwrap();
    assert!(c.git_key_is_safe("color.diff.meta", b"blue"));
    assert!(!c.git_key_is_safe("user.name", b"x"));
    let (_d, path) = file_with("[git]\nsafe_config_keys = [\"not a key\"]\n");
    let e = Config::load_file(&path).unwrap_err();
    assert_eq!(e.key(), Some("git.safe_config_keys[0]"), "{e}");
    let (_d, path) = file_with("[git]\nsafe_keys = []\n");
    assert!(Config::load_file(&path).is_err());
}

/// Each cache says what of a call's layer reaches it: the registries' own formats are
/// merged (checked against the registry), directories of installed programs are
/// `installs`, everything else `never`; a user's entry without `merge` is `never`, and
/// `merge` is a member of cache entries alone.
#[test]
fn caches_have_a_merge_kind_and_a_user_entry_without_one_is_never() {
    use efr_policy::config::CacheMerge;
    let c = Config::defaults();
    let kind = |p: &str| {
        c.sandbox
            .caches
            .iter()
            .find(|e| e.value == p)
            .and_then(|e| e.merge)
            .unwrap_or_else(|| panic!("{p} is not a cache"))
    };
    assert_eq!(kind("~/.cargo/registry"), CacheMerge::Cargo);
    assert_eq!(kind("~/.npm"), CacheMerge::Npm);
    for p in [
        "~/.local/share/pipx",
        "~/.gem",
        "~/.conda",
        "~/.gradle/wrapper",
    ] {
        assert_eq!(kind(p), CacheMerge::Installs, "{p}");
    }
    for p in [
        "~/.cache",
        "~/.cargo/git",
        "~/go/pkg/mod",
        "~/.m2/repository",
    ] {
        assert_eq!(kind(p), CacheMerge::Never, "{p}");
    }
    assert_eq!(c.sandbox.conversation_cache_days.value, 7);
    let (_d, path) = file_with(
        "[sandbox]\ncaches = [\"~/.mine\", { path = \"~/.theirs\", merge = \"npm\" }]\n\
         conversation_cache_days = 2\n",
    );
    let c = Config::load_file(&path).unwrap();
    let find = |p: &str| {
        c.sandbox
            .caches
            .iter()
            .find(|e| e.value == p)
            .unwrap()
            .merge
    };
    assert_eq!(find("~/.mine"), Some(CacheMerge::Never));
    assert_eq!(find("~/.theirs"), Some(CacheMerge::Npm));
    assert_eq!(c.sandbox.conversation_cache_days.value, 2);
    assert!(c.render_text().contains("merge npm"), "{}", c.render_text());
    let e = invalid("[sandbox]\ncaches = [{ path = \"~/.x\", merge = \"all\" }]\n");
    assert_eq!(e.key(), Some("sandbox.caches[0].merge"), "{e}");
    assert!(
        e.to_string()
            .contains("expected cargo, npm, installs or never"),
        "{e}"
    );
    let e = invalid("[sandbox]\nmasks = [{ path = \"~/.x\", merge = \"npm\" }]\n");
    assert_eq!(e.key(), Some("sandbox.masks[0].merge"), "{e}");
    let e = invalid("[sandbox]\nconversation_cache_days = 0\n");
    assert_eq!(e.key(), Some("sandbox.conversation_cache_days"), "{e}");
}

/// The budget of a call's proxy: defaults, a user's value, and a value out of bounds is a
/// clear error naming the key.
#[test]
fn proxy_budget_keys() {
    let (_d, path) = file_with("[sandbox]\nbackend = \"auto\"\n");
    let c = Config::load_file(&path).unwrap();
    assert_eq!(c.network.proxy_connections.value, 256);
    assert_eq!(c.network.proxy_tunnels.value, 128);
    let (_d, path) = file_with("[network]\nproxy_connections = 64\nproxy_tunnels = 16\n");
    let c = Config::load_file(&path).unwrap();
    assert_eq!(c.network.proxy_connections.value, 64);
    assert_eq!(c.network.proxy_tunnels.value, 16);
    assert!(
        c.render_text().contains("network.proxy_connections"),
        "{}",
        c.render_text()
    );
    for (text, key) in [
        (
            "[network]\nproxy_connections = 4\n",
            "network.proxy_connections",
        ),
        ("[network]\nproxy_tunnels = 0\n", "network.proxy_tunnels"),
        (
            "[network]\nproxy_tunnels = \"many\"\n",
            "network.proxy_tunnels",
        ),
    ] {
        let e = invalid(text);
        assert_eq!(e.key(), Some(key), "{e}");
        assert!(e.to_string().contains("expected a whole number"), "{e}");
    }
}

/// `hint` pasted into `base` the way the CLI says: at the end, or its entry lines under the
/// header of the table when the file has it already.
fn paste(base: &str, hint: &efr_policy::config::ConfigHint) -> String {
    let header = format!("[{}]\n", hint.table());
    let lines: String = hint
        .entry_lines()
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    match base.find(&header) {
        Some(i) => {
            let at = i + header.len();
            format!("{}{lines}{}", &base[..at], &base[at..])
        }
        None => format!("{base}{}", hint.render()),
    }
}

/// Every config hint the code can print (each [`ConfigHint`] form, with several names and
/// odd ones), pasted as printed into a user's file with other tables, loads with the
/// config's own parser and sets what it proposes.
#[test]
fn every_config_hint_pastes_into_a_config() {
    use efr_policy::config::{ConfigHint, ShellChoice};
    let bases = [
        "",
        "[sandbox]\nbackend = \"native\"\n[network]\nnetview = false\n",
        "[network]\nallow = [\"crates.example\"]\n[jobs]\nmax_running = 4\n",
        "[network.resolve]\n\"other.test\" = \"10.9.9.9\"\n[sandbox]\nbackend = \"native\"\n",
    ];
    let names = [
        ("mirror.corp.test", "10.0.0.7"),
        ("Upper.Case.TEST", "192.168.1.2"),
        ("xn--bcher-kva.example", "100.64.0.1"),
        ("a-1.b-2.test", "fe80::1"),
        ("127-0-0-1.nip.test", "127.0.0.1"),
    ];
    let resolve = ConfigHint::resolve(names.iter().map(|(n, a)| (*n, a.parse().unwrap())));
    let shells = [
        ShellChoice::Sh,
        ShellChoice::Bash,
        ShellChoice::Path("/opt/my shell/\"zsh\"".into()),
    ];
    for base in bases {
        let text = paste(base, &resolve);
        let (_d, path) = file_with(&text);
        let c = Config::load_file(&path).unwrap_or_else(|e| panic!("{text}\n{e}"));
        for (n, a) in names {
            let n = n.to_ascii_lowercase();
            assert!(
                c.network
                    .resolve
                    .iter()
                    .any(|r| r.name == n && r.address == a.parse::<std::net::IpAddr>().unwrap()),
                "{n} in {text}"
            );
        }
        for s in &shells {
            let text = paste(base, &ConfigHint::sandbox_shell(s));
            let (_d, path) = file_with(&text);
            let c = Config::load_file(&path).unwrap_or_else(|e| panic!("{text}\n{e}"));
            assert_eq!(&c.sandbox.shell.value, s, "{text}");
        }
    }
}

/// The missing-bash error names the entry and its table in words that paste: the entry
/// under the table's header loads (a dotted `sandbox.shell` line would land in whatever
/// table the file ends with).
#[test]
fn the_missing_bash_hint_names_a_table_and_an_entry_that_load() {
    let m = efr_policy::config::ShellError::NoBash.to_string();
    let entry = m
        .split_once("set ")
        .and_then(|(_, r)| r.split_once(" in the ["))
        .map(|(e, _)| e)
        .unwrap_or_else(|| panic!("no entry in: {m}"));
    let table = m
        .split_once(" in the [")
        .and_then(|(_, r)| r.split_once("] table"))
        .map(|(t, _)| t)
        .unwrap_or_else(|| panic!("no table in: {m}"));
    let text = format!("[network]\nnetview = false\n[{table}]\n{entry}\n");
    let (_d, path) = file_with(&text);
    let c = Config::load_file(&path).unwrap_or_else(|e| panic!("{text}\n{e}"));
    assert_eq!(c.sandbox.shell.value, efr_policy::config::ShellChoice::Sh);
}
