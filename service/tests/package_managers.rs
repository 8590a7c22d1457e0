//! Real package managers through the sandbox: cargo and npm run
//! contained against a registry the test serves on loopback (`registry`), reached through
//! the call's proxy with one host grant; their caches hold the new files on the host
//! afterwards (merged from the call's layer), and the host then builds offline from them,
//! asking the registry nothing more. Each runs also in a fresh home, where the manager
//! never ran and its cache does not exist yet.

mod common;
mod registry;

use std::path::Path;
use std::process::{Command, Output};

use common::{backends, command, have, skip};
use efr_sandbox_wire::Finish;

/// A home (`home/`), a config naming the registry, outside `/tmp`.
fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::create_dir_all(dir.path().join("config/efr")).unwrap();
    std::fs::write(
        dir.path().join("config/efr/config.toml"),
        registry::Server::config(),
    )
    .unwrap();
    dir
}

/// Each backend, with a home where the manager ran before (its cache exists) and with a
/// fresh one (no cache yet: the service makes it before the call, as the manager would).
fn backends_fresh() -> Vec<(&'static str, bool)> {
    backends()
        .into_iter()
        .flat_map(|b| [(b, false), (b, true)])
        .collect()
}

fn run(d: &Path, b: &str, proj: &Path, grant: &str, line: &str) -> (Output, Finish) {
    let fin = d.join("finish.json");
    let o = command(d)
        .env_remove("CARGO_HOME")
        .env_remove("CARGO_TARGET_DIR")
        .current_dir(proj)
        .args(["run", "--backend", b, "--project"])
        .arg(proj)
        .args(["--grant", grant, "--json"])
        .arg(&fin)
        .args(["--", line])
        .output()
        .unwrap();
    let f: Finish = serde_json::from_slice(&std::fs::read(&fin).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{b}: no finish ({e}): {o:?}"));
    (o, f)
}

#[test]
fn cargo_fetches_contained_from_a_sparse_registry_and_the_host_builds_offline_from_the_cache() {
    let Some((cargo, zargs, cenv)) = registry::cargo() else {
        skip("no cargo whose toolchain this user can run");
        return;
    };
    for (b, fresh) in backends_fresh() {
        let d = temp_env();
        let home = d.path().join("home");
        if !fresh {
            // The cache exists (cargo ran here before: its lock files too), its registry
            // is new to it.
            std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
            for f in [".package-cache", ".package-cache-mutate", ".global-cache"] {
                std::fs::write(home.join(".cargo").join(f), "").unwrap();
            }
        }
        let root = d.path().join("registry");
        let server = registry::Server::start(&root);
        registry::cargo_registry(&root, &server.url(), &d.path().join("work"));
        let proj = home.join("app");
        registry::cargo_project(&proj);
        let index = format!(
            "--config 'registries.test.index=\"sparse+{}/\"'",
            server.url()
        );
        let env: String = cenv.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        let line = format!(
            "{env}{cargo} {} fetch {index} --config net.offline=false",
            zargs.join(" ")
        );
        let (o, f) = run(d.path(), b, &proj, &server.grant(), &line);
        assert_eq!(o.status.code(), Some(0), "{b} (fresh {fresh}): {o:?}");
        assert!(
            f.sandbox_summary.cache_refused.is_empty(),
            "{b} (fresh {fresh}): {f:?}"
        );
        // Its lock files are the call's own: no write of them refused (cargo's last-use
        // record, `.global-cache`, is: cargo goes on without it).
        for l in [".package-cache", ".package-cache-mutate"] {
            let p = home.join(".cargo").join(l);
            assert!(
                !f.sandbox_summary
                    .denied_writes
                    .iter()
                    .any(|d| Path::new(d) == p),
                "{b} (fresh {fresh}): {f:?}"
            );
            assert_eq!(std::fs::read(&p).unwrap(), b"", "{b} (fresh {fresh}): {l}");
        }
        // Its last-use record is refused quietly (`sandbox.quiet_refusals`): no exit to
        // approve and no "retry with" line for a write cargo does without.
        assert!(
            f.exits.iter().all(|e| !e.summary.contains(".global-cache")),
            "{b} (fresh {fresh}): {:?}",
            f.exits
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !stderr.contains("refused:"),
            "{b} (fresh {fresh}): {stderr}"
        );
        assert!(
            server
                .asked()
                .iter()
                .any(|p| p == "/dl/efrhello/0.1.0/download"),
            "{b} (fresh {fresh}): {:?}",
            server.asked()
        );
        let cache = home.join(".cargo/registry/cache");
        let krate = common::find(&cache, "efrhello-0.1.0.crate")
            .unwrap_or_else(|| panic!("{b} (fresh {fresh}): no .crate in {}", cache.display()));
        assert!(
            std::fs::metadata(&krate).unwrap().len() > 0,
            "{b} (fresh {fresh})"
        );
        // The host builds offline from the merged cache (cargo unpacks the verified
        // `.crate`: the call's unpacked sources were not merged).
        let asked = server.asked().len();
        let mut c = Command::new(&cargo);
        c.args(&zargs)
            .args(["build", "--offline", "--config"])
            .arg(format!(
                "registries.test.index=\"sparse+{}/\"",
                server.url()
            ))
            .envs(cenv.iter().cloned())
            .env("HOME", &home)
            .env_remove("CARGO_HOME")
            .env("CARGO_TARGET_DIR", d.path().join("target"))
            .current_dir(&proj);
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{b} (fresh {fresh}): offline build: {o:?}"
        );
        let out = Command::new(d.path().join("target/debug/app"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hello from the registry\n"
        );
        assert_eq!(
            server.asked().len(),
            asked,
            "{b} (fresh {fresh}): the offline build asked the registry"
        );
    }
}

#[test]
fn npm_installs_contained_from_a_local_registry_and_the_host_installs_offline_from_the_cache() {
    if !have("npm") {
        skip("npm is not installed");
        return;
    }
    for (b, fresh) in backends_fresh() {
        let d = temp_env();
        let home = d.path().join("home");
        if !fresh {
            std::fs::create_dir_all(home.join(".npm")).unwrap();
        }
        let root = d.path().join("registry");
        let server = registry::Server::start(&root);
        registry::npm_registry(&root, &server.url(), &d.path().join("work"));
        let proj = home.join("app");
        common::npm_project(&proj, "app");
        let line = format!(
            "npm install --no-audit --no-fund --registry {}/ efrhello && \
             node -e 'console.log(require(\"efrhello\")())'",
            server.url()
        );
        let (o, f) = run(d.path(), b, &proj, &server.grant(), &line);
        assert_eq!(o.status.code(), Some(0), "{b} (fresh {fresh}): {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("hello from the npm registry"),
            "{b} (fresh {fresh}): {o:?}"
        );
        assert!(
            f.sandbox_summary
                .cache_refused
                .iter()
                .all(|r| !r.contains("_cacache")),
            "{b} (fresh {fresh}): {f:?}"
        );
        assert!(
            home.join(".npm/_cacache/index-v5").is_dir(),
            "{b} (fresh {fresh})"
        );
        // The host installs offline from the merged cache into another project.
        let asked = server.asked().len();
        let other = d.path().join("other");
        common::npm_project(&other, "other");
        let o = Command::new("npm")
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--registry",
            ])
            .arg(format!("{}/", server.url()))
            .arg("efrhello")
            .env("HOME", &home)
            .env_remove("npm_config_cache")
            .current_dir(&other)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{b} (fresh {fresh}): offline install: {o:?}"
        );
        assert!(
            other.join("node_modules/efrhello/index.js").exists(),
            "{b} (fresh {fresh})"
        );
        assert_eq!(
            server.asked().len(),
            asked,
            "{b} (fresh {fresh}): the offline install asked the registry"
        );
    }
}

#[test]
fn pip_installs_contained_from_a_simple_index_with_the_proposed_grant() {
    let py = common::PIP_PYTHON;
    if !common::have_pip() {
        skip("python3 has no pip (apt-get install python3-pip)");
        return;
    }
    for (b, fresh) in backends_fresh() {
        let d = temp_env();
        let home = d.path().join("home");
        if !fresh {
            // pip has run here before: its cache exists.
            std::fs::create_dir_all(home.join(".cache/pip")).unwrap();
        }
        let root = d.path().join("registry");
        let server = registry::Server::start(&root);
        registry::pip_registry(&root, py);
        let proj = home.join("app");
        std::fs::create_dir_all(&proj).unwrap();
        let index = format!("{}/simple/", server.url());
        let install = format!(
            "{py} -m pip install --disable-pip-version-check --target pkgs --index-url {index} \
             --trusted-host {} efrhello",
            registry::HOST
        );
        let line = format!(
            "{install} && {py} -c 'import sys; sys.path.insert(0, \"pkgs\"); \
             import efrhello; print(efrhello.hello())'"
        );
        // Only what the classifier proposes for the line.
        let grants = common::proposed(d.path(), &proj, &line);
        assert_eq!(grants, [server.grant()], "{b} (fresh {fresh})");
        let (o, f) = run(d.path(), b, &proj, &grants[0], &line);
        assert_eq!(o.status.code(), Some(0), "{b} (fresh {fresh}): {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("hello from the pip index"),
            "{b} (fresh {fresh}): {o:?}"
        );
        assert!(
            f.sandbox_summary.cache_refused.is_empty(),
            "{b} (fresh {fresh}): {:?}",
            f.sandbox_summary.cache_refused
        );
        assert!(
            server.asked().iter().any(|p| p.ends_with(".whl")),
            "{b} (fresh {fresh}): {:?}",
            server.asked()
        );
        // Its cache is the call's layer: no write under it refused. (pip 23.0 kept nothing
        // of these downloads in its HTTP cache, on the host either, so what is merged is
        // shown by the cargo and npm tests: the same merge.)
        let cache = home.join(".cache/pip");
        assert!(
            !f.sandbox_summary
                .denied_writes
                .iter()
                .any(|d| Path::new(d).starts_with(&cache)),
            "{b} (fresh {fresh}): {:?}",
            f.sandbox_summary.denied_writes
        );
        if fresh {
            continue;
        }
        // Into a venv the call makes in the project, with the venv's own pip; the host's
        // python then imports it from the venv.
        let line = format!(
            "{py} -m venv venv && venv/bin/pip install --disable-pip-version-check \
             --index-url {index} --trusted-host {} efrhello",
            registry::HOST
        );
        let grants = common::proposed(d.path(), &proj, &line);
        assert_eq!(grants, [server.grant()], "{b}: venv");
        let (o, f) = run(d.path(), b, &proj, &grants[0], &line);
        assert_eq!(o.status.code(), Some(0), "{b}: venv: {o:?}");
        assert!(f.sandbox_summary.cache_refused.is_empty(), "{b}: {f:?}");
        let host = std::process::Command::new(proj.join("venv/bin/python"))
            .args(["-c", "import efrhello; print(efrhello.hello())"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&host.stdout).contains("hello from the pip index"),
            "{b}: the venv on the host: {host:?}"
        );
    }
}

/// The cargos of this machine: the toolchain's, and Debian's (1.65, which names its dirs
/// with the older hasher) when it is another one.
fn cargos() -> Vec<registry::Cargo> {
    let mut out: Vec<registry::Cargo> = registry::cargo().into_iter().collect();
    let sys = Path::new("/usr/bin/cargo");
    if sys.exists() && !out.iter().any(|(c, _, _)| Path::new(c) == sys) {
        let v = Command::new(sys).arg("--version").output().ok();
        let minor: u32 = v
            .and_then(|v| {
                String::from_utf8_lossy(&v.stdout)
                    .split_whitespace()
                    .nth(1)?
                    .split('.')
                    .nth(1)?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        let mut env = vec![("RUSTC".to_string(), "/usr/bin/rustc".to_string())];
        let mut args = Vec::new();
        if minor < 68 {
            env.push(("RUSTC_BOOTSTRAP".into(), "1".into()));
            args.push("-Zsparse-registry".into());
        }
        out.push((sys.to_string_lossy().into_owned(), args, env));
    }
    out
}

/// The oracle of the merge's registry dir names: the real cargo(s) fetch from a local
/// sparse registry, at the root and below a path (cargo >= 1.85 hashes that one without
/// its final `/`), and
/// the dirs they make are among the names the merge computes for that URL.
#[test]
fn the_merge_names_a_registrys_dirs_as_every_cargo_does() {
    let all = cargos();
    assert!(!all.is_empty(), "no cargo");
    for (cargo, zargs, cenv) in all {
        let d = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = d.path().join("registry");
        let server = registry::Server::start(&root);
        let base = format!("http://127.0.0.1:{}", server.port);
        registry::cargo_registry(&root, &base, &d.path().join("work"));
        registry::cargo_registry(&root.join("sub/idx"), &base, &d.path().join("work2"));
        for url in [format!("sparse+{base}/"), format!("sparse+{base}/sub/idx/")] {
            let home = d.path().join(format!("cargo-home-{}", url.len()));
            let proj = d.path().join("app");
            registry::cargo_project(&proj);
            let o = Command::new(&cargo)
                .args(&zargs)
                .arg("fetch")
                .arg("--config")
                .arg(format!("registries.test.index=\"{url}\""))
                .envs(cenv.iter().cloned())
                .env("CARGO_HOME", &home)
                .current_dir(&proj)
                .output()
                .unwrap();
            assert!(o.status.success(), "{cargo} {url}: {o:?}");
            let dirs: Vec<String> = std::fs::read_dir(home.join("registry/cache"))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(dirs.len(), 1, "{cargo} {url}: {dirs:?}");
            let names = efr_call::caches::cargo::dir_names(&url);
            assert!(
                names.contains(&dirs[0]),
                "{cargo} {url}: cargo made {} and the merge computes {names:?}",
                dirs[0]
            );
            let _ = std::fs::remove_dir_all(proj.join("Cargo.lock"));
            let _ = std::fs::remove_file(proj.join("Cargo.lock"));
        }
    }
}
