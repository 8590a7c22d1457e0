//! Opt-in (`EFR_SANDBOX_ONLINE=1`): cargo, npm and pip against the real registries
//! (crates.io, registry.npmjs.org, PyPI), contained, through the call's proxy, with exactly
//! the grants `efr-sandbox classify` proposes for the line and nothing else, as a user
//! types it (`efr-sandbox run --grant ...`). Each works, its cache on the host holds what it
//! fetched afterwards, and (cargo, npm) the host then builds offline from that cache.
//!
//! Without the variable every test here says so and passes: the suite must not depend on
//! the network. A registry that resolves into a special range (a company mirror on 10/8,
//! or this project's CI machine, whose registries answer from 203.0.113.0/24) is mapped in
//! the test's `[network.resolve]`, as the proxy's refusal tells a user to do.

mod common;
mod registry;

use std::net::{IpAddr, ToSocketAddrs};
use std::path::Path;
use std::process::{Command, Output};

use common::{backends, command, proposed};

fn online() -> bool {
    if std::env::var_os("EFR_SANDBOX_ONLINE").is_some_and(|v| v == "1") {
        return true;
    }
    eprintln!("not run: set EFR_SANDBOX_ONLINE=1 to run it against the real registries");
    false
}

/// An address the proxy refuses for a name it resolved itself unless the config maps it.
fn special(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => {
            let [a, b, c, _] = v.octets();
            v.is_private()
                || v.is_loopback()
                || v.is_link_local()
                || (a == 100 && (64..128).contains(&b))
                || (a, b, c) == (192, 0, 2)
                || (a, b, c) == (198, 51, 100)
                || (a, b, c) == (203, 0, 113)
                || (a == 198 && (b == 18 || b == 19))
        }
        IpAddr::V6(v) => v.is_loopback() || (v.segments()[0] & 0xfe00) == 0xfc00,
    }
}

/// A home with the caches a user of the tool has (the layer is made for a cache that
/// exists), a config mapping the registries that resolve into a special range, outside
/// `/tmp`.
fn temp_env(hosts: &[&str], caches: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let home = dir.path().join("home");
    for c in caches {
        std::fs::create_dir_all(home.join(c)).unwrap();
    }
    std::fs::create_dir_all(dir.path().join("config/efr")).unwrap();
    let mut cfg = String::from("[network.resolve]\n");
    for h in hosts {
        if let Some(a) = (*h, 443)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.ip())
            .filter(|a| special(*a))
        {
            cfg.push_str(&format!("{h:?} = \"{a}\"\n"));
        }
    }
    std::fs::write(dir.path().join("config/efr/config.toml"), cfg).unwrap();
    dir
}

fn run(d: &Path, b: &str, proj: &Path, grants: &[String], line: &str) -> Output {
    let mut c = command(d);
    c.env_remove("CARGO_HOME")
        .env_remove("CARGO_TARGET_DIR")
        .current_dir(proj)
        .args(["run", "--backend", b, "--project"])
        .arg(proj);
    for g in grants {
        c.args(["--grant", g]);
    }
    c.args(["--", line]).output().unwrap()
}

fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() && !p.is_symlink() {
                        files_under(&p)
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn cargo_builds_from_crates_io_with_the_proposed_grants() {
    if !online() {
        return;
    }
    let (cargo, zargs, cenv) = registry::cargo().expect("cargo whose toolchain this user runs");
    for b in backends() {
        let d = temp_env(
            &["index.crates.io", "static.crates.io"],
            &[".cargo/registry"],
        );
        let home = d.path().join("home");
        let proj = home.join("app");
        std::fs::create_dir_all(proj.join("src")).unwrap();
        std::fs::write(
            proj.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nitoa = \"=1.0.11\"\n\n[workspace]\n",
        )
        .unwrap();
        std::fs::write(
            proj.join("src/main.rs"),
            "fn main() { println!(\"{}\", itoa::Buffer::new().format(4242)); }\n",
        )
        .unwrap();
        let env: String = cenv.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        let line = format!("{env}{cargo} {} run -q", zargs.join(" "));
        let grants = proposed(d.path(), &proj, &line);
        assert!(
            grants.iter().any(|g| g.contains("crates.io")),
            "{b}: {grants:?}"
        );
        let o = run(d.path(), b, &proj, &grants, &line);
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("4242"),
            "{b}: {o:?}"
        );
        let cache = home.join(".cargo/registry/cache");
        assert!(
            common::find(&cache, "itoa-1.0.11.crate").is_some(),
            "{b}: no itoa in {}",
            cache.display()
        );
        // The host builds offline from the merged cache.
        let o = Command::new(&cargo)
            .args(&zargs)
            .args(["build", "--offline"])
            .envs(cenv.iter().cloned())
            .env("HOME", &home)
            .env_remove("CARGO_HOME")
            .env("CARGO_TARGET_DIR", d.path().join("target"))
            .current_dir(&proj)
            .output()
            .unwrap();
        assert!(o.status.success(), "{b}: offline build: {o:?}");
    }
}

#[test]
fn npm_installs_from_the_npm_registry_with_the_proposed_grants() {
    if !online() {
        return;
    }
    assert!(common::have("npm"), "npm is not installed");
    for b in backends() {
        let d = temp_env(&["registry.npmjs.org"], &[".npm"]);
        let home = d.path().join("home");
        let proj = home.join("app");
        common::npm_project(&proj, "app");
        let line = "npm install --no-audit --no-fund is-number@7.0.0 && \
                    node -e 'console.log(\"is\", require(\"is-number\")(5))'";
        let grants = proposed(d.path(), &proj, line);
        assert_eq!(grants, ["host=registry.npmjs.org"], "{b}");
        let o = run(d.path(), b, &proj, &grants, line);
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("is true"),
            "{b}: {o:?}"
        );
        assert!(home.join(".npm/_cacache/index-v5").is_dir(), "{b}");
        // The host installs offline from the merged cache into another project.
        let other = d.path().join("other");
        common::npm_project(&other, "other");
        let o = Command::new("npm")
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "is-number@7.0.0",
            ])
            .env("HOME", &home)
            .env_remove("npm_config_cache")
            .current_dir(&other)
            .output()
            .unwrap();
        assert!(o.status.success(), "{b}: offline install: {o:?}");
        assert!(
            other.join("node_modules/is-number/package.json").is_file(),
            "{b}"
        );
    }
}

#[test]
fn pip_downloads_from_pypi_with_the_proposed_grants() {
    if !online() {
        return;
    }
    let py = common::PIP_PYTHON;
    assert!(
        common::have_pip(),
        "{py} has no pip (apt-get install python3-pip)"
    );
    for b in backends() {
        let d = temp_env(&["pypi.org", "files.pythonhosted.org"], &[".cache/pip"]);
        let home = d.path().join("home");
        let proj = home.join("app");
        std::fs::create_dir_all(&proj).unwrap();
        let line = format!("{py} -m pip download --no-deps -d dl six==1.16.0");
        let grants = proposed(d.path(), &proj, &line);
        let mut sorted = grants.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            ["host=files.pythonhosted.org", "host=pypi.org"],
            "{b}"
        );
        let o = run(d.path(), b, &proj, &grants, &line);
        assert!(o.status.success(), "{b}: {o:?}");
        assert!(
            proj.join("dl/six-1.16.0-py2.py3-none-any.whl").is_file(),
            "{b}: {o:?}"
        );
        // pip's cache is never merged (its HTTP cache is keyed by a hash of the URL:
        // nothing to check an answer against): the host's stays empty.
        assert_eq!(files_under(&home.join(".cache/pip")), 0, "{b}");
        // What pip caches of that download outside the sandbox (nothing when the index
        // sends no cache headers, as a mirror may), a call's conversation keeps.
        let rt = d.path().join("run");
        std::fs::create_dir_all(&rt).unwrap();
        std::fs::set_permissions(&rt, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let conv = |line: &str| {
            let mut c = command(d.path());
            c.env("XDG_RUNTIME_DIR", &rt)
                .current_dir(&proj)
                .args(["run", "--backend", b, "--conversation", "pip", "--project"])
                .arg(&proj);
            for g in &grants {
                c.args(["--grant", g]);
            }
            c.args(["--", line]).output().unwrap()
        };
        let o = conv(&format!("rm -rf dl && {line}"));
        assert!(o.status.success(), "{b}: {o:?}");
        let o = conv("find ~/.cache/pip -type f | wc -l");
        let in_conversation: usize = String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        let host = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::create_dir_all(host.path().join(".cache/pip")).unwrap();
        let h = Command::new(py)
            .args(["-m", "pip", "download", "--no-deps", "-d"])
            .arg(host.path().join("dl"))
            .arg("six==1.16.0")
            .env("HOME", host.path())
            .output()
            .unwrap();
        assert!(h.status.success(), "pip on the host: {h:?}");
        assert!(
            in_conversation >= files_under(&host.path().join(".cache/pip")),
            "{b}: the conversation's pip cache holds less than pip on the host makes"
        );
    }
}
