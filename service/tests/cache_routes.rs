//! The ways a contained call with no grant used to plant code that ran on the host through
//! the cache merge, each judged the way the user meets it: a pipx app's venv script, a
//! package in npx's `~/.npm/_npx`, a poetry venv's `.pth`, powerlevel10k's instant prompt
//! (sourced by every shell start), a `git` in `~/.gem/ruby/*/bin` (on PATH), a `commondir`
//! in a bare repository of cargo's `~/.cargo/git/db`. After the call the host has none of
//! them; the next call of the same conversation still has each, a call of another
//! conversation does not.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{backends, command};
use efr_sandbox_wire::{ExitKind, ExitSource, Finish, Grant, Needs, Verdict};

fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir_all(dir.path().join("home/proj")).unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    let rt = dir.path().join("run");
    std::fs::create_dir(&rt).unwrap();
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn home(d: &Path) -> PathBuf {
    d.join("home")
}

/// A contained call of the conversation `conv` on backend `b`.
fn run(d: &Path, b: &str, conv: &str, line: &str) -> (Output, Finish) {
    let fin = d.join(format!("finish-{conv}.json"));
    let o = command(d)
        .env("XDG_RUNTIME_DIR", d.join("run"))
        .current_dir(home(d).join("proj"))
        .args(["run", "--backend", b, "--conversation", conv, "--project"])
        .arg(home(d).join("proj"))
        .arg("--json")
        .arg(&fin)
        .args(["--", line])
        .output()
        .unwrap();
    let f: Finish = serde_json::from_slice(&std::fs::read(&fin).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{b}: no finish ({e}): {o:?}"));
    let _ = std::fs::remove_file(&fin);
    (o, f)
}

/// The probe run on the host, as the user's shell would: in a clean environment with
/// the test's home.
fn on_host(d: &Path, probe: &str) -> String {
    let o = Command::new("sh")
        .args(["-c", probe])
        .env_clear()
        .env("HOME", home(d))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// One route: what the host has before (a shell line run on the host), what the call
/// plants, a probe that prints PLANTED when the plant works where it is run, and the path
/// an `installs` exit record names (for a cache of installed programs).
struct Route {
    name: &'static str,
    host: &'static str,
    plant: &'static str,
    probe: &'static str,
    install: Option<&'static str>,
}

const ROUTES: &[Route] = &[
    Route {
        name: "pipx",
        host: "mkdir -p ~/.local/share/pipx/venvs/tool/bin && \
               printf '#!/bin/sh\\necho real\\n' > ~/.local/share/pipx/venvs/tool/bin/tool && \
               chmod 755 ~/.local/share/pipx/venvs/tool/bin/tool",
        plant: "printf '#!/bin/sh\\necho PLANTED\\n' > ~/.local/share/pipx/venvs/tool/bin/tool && \
                mkdir -p ~/.local/share/pipx/venvs/evil/bin && \
                printf '#!/bin/sh\\necho PLANTED\\n' > ~/.local/share/pipx/venvs/evil/bin/evil && \
                chmod 755 ~/.local/share/pipx/venvs/evil/bin/evil",
        probe: "~/.local/share/pipx/venvs/tool/bin/tool; ~/.local/share/pipx/venvs/evil/bin/evil",
        install: Some(".local/share/pipx/venvs/evil"),
    },
    Route {
        name: "npx",
        host: "mkdir -p ~/.npm",
        plant: "mkdir -p ~/.npm/_npx/4f1e/node_modules/.bin && \
                printf '#!/bin/sh\\necho PLANTED\\n' > ~/.npm/_npx/4f1e/node_modules/.bin/cowsay && \
                chmod 755 ~/.npm/_npx/4f1e/node_modules/.bin/cowsay",
        probe: "~/.npm/_npx/4f1e/node_modules/.bin/cowsay",
        install: None,
    },
    Route {
        name: "poetry",
        host: "mkdir -p ~/.cache/pypoetry/virtualenvs",
        plant: "d=~/.cache/pypoetry/virtualenvs/app-Xy12-py3/lib/python3/site-packages && \
                mkdir -p $d && echo 'import sys; print(\"PLANTED\")' > $d/evil.pth",
        probe: "python3 -c 'import site, os; site.addsitedir(os.path.expanduser(\
                \"~/.cache/pypoetry/virtualenvs/app-Xy12-py3/lib/python3/site-packages\"))'",
        install: None,
    },
    Route {
        name: "p10k",
        host: "mkdir -p ~/.cache",
        plant: "echo 'echo PLANTED' > ~/.cache/p10k-instant-prompt-user.zsh",
        // What `.zshrc` does at every start, here in sh.
        probe: "f=~/.cache/p10k-instant-prompt-user.zsh; if [ -r \"$f\" ]; then . \"$f\"; fi",
        install: None,
    },
    Route {
        name: "gem",
        host: "mkdir -p ~/.gem/ruby/3.1.0/bin",
        plant: "printf '#!/bin/sh\\necho PLANTED\\n' > ~/.gem/ruby/3.1.0/bin/git && \
                chmod 755 ~/.gem/ruby/3.1.0/bin/git",
        probe: "PATH=$HOME/.gem/ruby/3.1.0/bin:$PATH git --version",
        install: Some(".gem/ruby/3.1.0/bin/git"),
    },
    Route {
        name: "cargo-git-db",
        host: "git init -q --bare ~/.cargo/git/db/dep-0123",
        plant: "git init -q --bare ~/.cargo/git/evil && \
                echo ../../evil > ~/.cargo/git/db/dep-0123/commondir",
        probe: "git -C ~/.cargo/git/db/dep-0123 rev-parse --git-common-dir 2>/dev/null \
                | grep -q evil && echo PLANTED",
        install: None,
    },
];

#[test]
fn nothing_a_call_plants_in_a_cache_runs_on_the_host() {
    for b in backends() {
        let d = temp_env();
        for r in ROUTES {
            assert!(
                !on_host(d.path(), &format!("{} && echo ok", r.host)).is_empty(),
                "{b}: {}: the host's setup failed",
                r.name
            );
        }
        let (mine, other) = (format!("mine-{b}"), format!("other-{b}"));
        let mut reached = Vec::new();
        for r in ROUTES {
            // Before: nothing planted anywhere.
            assert!(
                !on_host(d.path(), r.probe).contains("PLANTED"),
                "{}",
                r.name
            );
            let (o, f) = run(d.path(), b, &mine, r.plant);
            assert_eq!(o.status.code(), Some(0), "{b}: {}: {o:?}", r.name);
            // The call's own view had it.
            let (o, _) = run(d.path(), b, &mine, r.probe);
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("PLANTED"),
                "{b}: {}: the next call of the conversation lost it: {o:?}",
                r.name
            );
            // Every route is tried before the test fails, so that each one that reaches the
            // host is named.
            if on_host(d.path(), r.probe).contains("PLANTED") {
                reached.push(format!("{b}: {}", r.name));
            }
            let (o, _) = run(d.path(), b, &other, r.probe);
            if String::from_utf8_lossy(&o.stdout).contains("PLANTED") {
                reached.push(format!("{b}: {}: another conversation sees it", r.name));
            }
            if let Some(p) = r.install {
                let path = home(d.path()).join(p).to_string_lossy().into_owned();
                let rec = f
                    .exits
                    .iter()
                    .find(|e| e.facts.targets.iter().any(|t| t.path == path));
                let Some(rec) = rec else {
                    reached.push(format!("{b}: {}: no exit record of {path}", r.name));
                    continue;
                };
                assert_eq!(rec.kind, ExitKind::Write);
                assert_eq!(rec.source, ExitSource::Denial);
                assert_eq!(rec.judgement.verdict, Verdict::Review);
                assert!(
                    rec.summary.contains("kept for this conversation"),
                    "{}",
                    rec.summary
                );
                assert_eq!(
                    rec.needs,
                    Needs::Contained {
                        grants: vec![Grant::Write { path: path.clone() }]
                    }
                );
            }
        }
        assert!(
            reached.is_empty(),
            "plants that reach the host: {reached:?}"
        );
    }
}
