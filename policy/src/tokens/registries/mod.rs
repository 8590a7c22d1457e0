//! The registries a package manager would reach, as the user's own setup says: an option on
//! the line, a variable set on the line (or in the environment the line runs with), the
//! project's config files (from the working directory up), then the user's. Without any of
//! them, every host the command knowledge lists for the manager's default registry
//! (`policy/data/commands.toml`, `hosts`) stands. A registry found in the setup replaces
//! those hosts; the extra registries the setup names (npm scopes, pip's extra indexes,
//! cargo's `[registries]`, ...) are added. The classifier proposes all of them, each as a
//! `host` grant, so that the proposal granted as is works.
//!
//! Only hosts are read here; a token in the same files is the business of
//! [`crate::tokens`]. Every file read is small (a larger one is passed over) and a broken
//! one is passed over, never a panic.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::knowledge::{Registry, SetupName};
use crate::url::url_host_port;

mod cargo;
mod go;
mod js;
mod jvm;
mod python;
mod ruby_php;

use cargo::cargo;
pub use cargo::{cargo_home, cargo_would_fetch};
use go::go;
pub use go::go_would_fetch;
use js::{npm, yarn};
use jvm::{gradle, maven};
use python::{pip, poetry, uv};
use ruby_php::{composer, gem};

/// A registry host found in the user's setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The registry's host name.
    pub host: String,
    /// The port its URL names; 80 for a plain one that names none, none for HTTPS's
    /// default.
    pub port: Option<u16>,
    /// Plain HTTP (an `http://` registry).
    pub plain: bool,
    /// Where it was found, for the exit's reasons (`--registry`, `~/.npmrc`, ...).
    pub from: String,
}

/// What a setup says: registries that replace the default hosts (all of them, or one of
/// them), and extra ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Setup {
    /// The user's registry: replaces every default host (an empty list: a local or
    /// vendored registry, no host at all).
    pub replace_all: Option<Vec<Found>>,
    /// Replaces one default host (go's `GOSUMDB`, the gradle wrapper's distribution).
    pub replace_host: Vec<(String, Vec<Found>)>,
    /// Extra registries.
    pub extra: Vec<Found>,
}

/// One host a line would reach, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedHost {
    /// The host name.
    pub host: String,
    /// The port, when one is named (a plain registry always has one); none: HTTPS's
    /// default.
    pub port: Option<u16>,
    /// Plain HTTP (an `http://` registry).
    pub plain: bool,
    /// Why the line reaches it: the default host's reason, or where the user's setup names
    /// it.
    pub why: String,
}

/// Every host a fetching (or, with `publish`, publishing) command of `spec` reaches.
/// `words` are the command's arguments after its name; `var` gives a variable set on the
/// line (or in the environment) when its value is known.
pub fn proposal(
    spec: &Registry,
    publish: bool,
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Vec<ProposedHost> {
    let defaults = if publish && !spec.publish_hosts.is_empty() {
        &spec.publish_hosts
    } else {
        &spec.hosts
    };
    let setup = spec
        .setup
        .map(|s| setup_of(s, words, var, cwd, home))
        .unwrap_or_default();
    let mut out: Vec<ProposedHost> = Vec::new();
    let mut push = |h: ProposedHost| {
        if !out.iter().any(|o| o.host == h.host && o.port == h.port) {
            out.push(h);
        }
    };
    let from_found = |f: &Found, what: &str| ProposedHost {
        host: f.host.clone(),
        port: f.port,
        plain: f.plain,
        why: format!("{} is {what} {} names", f.host, f.from),
    };
    match &setup.replace_all {
        Some(list) => {
            for f in list {
                push(from_found(f, "the registry"));
            }
        }
        None => {
            for d in defaults {
                match setup.replace_host.iter().find(|(h, _)| *h == d.host) {
                    Some((_, list)) => {
                        for f in list {
                            push(from_found(f, &format!("the {} replacement", d.host)));
                        }
                    }
                    None => push(ProposedHost {
                        host: d.host.clone(),
                        port: None,
                        plain: false,
                        why: format!("{}: {}", d.host, d.reason),
                    }),
                }
            }
        }
    }
    for f in &setup.extra {
        push(from_found(f, "a registry"));
    }
    out
}

/// What the setup `name` says.
pub fn setup_of(
    name: SetupName,
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    match name {
        SetupName::Npm => npm(words, var, cwd, home),
        SetupName::Yarn => yarn(words, var, cwd, home),
        SetupName::Pip => pip(words, var, cwd, home),
        SetupName::Uv => uv(words, var, cwd, home),
        SetupName::Poetry => poetry(cwd, home),
        SetupName::Cargo => cargo(words, var, cwd, home),
        SetupName::Go => go(var, home),
        SetupName::Gem => gem(words, cwd, home),
        SetupName::Composer => composer(var, cwd, home),
        SetupName::Maven => maven(cwd, home),
        SetupName::Gradle => gradle(cwd, home),
    }
}

/// The host of a registry url (`sparse+`, `registry+` prefixes and quotes taken off); an
/// `http://` one is plain, on port 80 unless it names one.
pub fn found(url: &str, from: impl Into<String>) -> Option<Found> {
    let url = url.trim().trim_matches('"').trim_matches('\'');
    let url = url.strip_prefix("sparse+").unwrap_or(url);
    let url = url.strip_prefix("registry+").unwrap_or(url);
    let (host, port, ssh) = url_host_port(url)?;
    if ssh {
        return None;
    }
    let plain = url
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    Some(Found {
        host,
        port: if plain {
            Some(port.unwrap_or(80))
        } else {
            port
        },
        plain,
        from: from.into(),
    })
}

/// The values of `--name VALUE` or `--name=VALUE` (or a short `-n VALUE`), every time.
fn options(words: &[&str], long: &str, short: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if *w == "--" {
            break;
        }
        if let Some(v) = w.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            out.push(v.to_string());
        } else if *w == long || short == Some(*w) {
            if let Some(v) = it.next() {
                out.push(v.to_string());
            }
        }
    }
    out
}

fn option(words: &[&str], long: &str, short: Option<&str>) -> Option<String> {
    options(words, long, short).pop()
}

/// The directories from `cwd` up to the root (at most 64).
fn upwards(cwd: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut d = cwd.map(Path::to_path_buf);
    while let Some(p) = d {
        if out.len() >= 64 {
            break;
        }
        out.push(p.clone());
        d = p.parent().map(Path::to_path_buf);
    }
    out
}

/// The first `name` from `cwd` up.
fn nearest(cwd: Option<&Path>, name: &str) -> Option<PathBuf> {
    upwards(cwd)
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Files are small config files; a larger one is not read.
pub(crate) fn read_small(p: &Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_file() || meta.len() > 1024 * 1024 {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

/// `home`-relative display of a config file.
fn shown(p: &Path, home: &Path) -> String {
    match p.strip_prefix(home) {
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => p.display().to_string(),
    }
}

/// `key = value` or `key=value` lines of an ini-like file (npmrc, pip.conf, go env): the
/// last one.
fn ini_value(text: &str, key: &str) -> Option<String> {
    ini_values(text, |k| k == key).pop().map(|(_, v)| v)
}

/// Every `key = value` line whose key `want` accepts, with a value continued on indented
/// lines (pip.conf's multi-line lists) joined by spaces.
fn ini_values(text: &str, want: impl Fn(&str) -> bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut open = false;
    for raw in text.lines() {
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            open = false;
            continue;
        }
        if raw.starts_with([' ', '\t']) && open && !l.contains('=') {
            if let Some(last) = out.last_mut() {
                last.1.push(' ');
                last.1.push_str(l);
            }
            continue;
        }
        open = false;
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let k = k.trim();
        if want(k) {
            out.push((k.to_string(), v.trim().to_string()));
            open = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::Knowledge;

    fn none(_: &str) -> Option<String> {
        None
    }

    fn spec(name: &str) -> &'static Registry {
        let k = Knowledge::get();
        let i = k.roles(name).registry.unwrap_or_else(|| panic!("{name}"));
        &k.file.registry[i]
    }

    fn hosts(
        name: &str,
        words: &[&str],
        var: &dyn Fn(&str) -> Option<String>,
        cwd: Option<&Path>,
        home: &Path,
    ) -> Vec<String> {
        proposal(spec(name), false, words, var, cwd, home)
            .into_iter()
            .map(|h| match h.port {
                Some(p) => format!("{}:{p}", h.host),
                None => h.host,
            })
            .collect()
    }

    #[test]
    fn defaults_name_every_host() {
        let home = Path::new("/nonexistent-home");
        assert_eq!(
            hosts("cargo", &["fetch"], &none, None, home),
            ["index.crates.io", "static.crates.io"]
        );
        assert_eq!(
            hosts("pip", &["install", "x"], &none, None, home),
            ["pypi.org", "files.pythonhosted.org"]
        );
        assert_eq!(
            hosts("go", &["get"], &none, None, home),
            ["proxy.golang.org", "sum.golang.org"]
        );
        assert_eq!(
            hosts("npm", &["ci"], &none, None, home),
            ["registry.npmjs.org"]
        );
        let p = proposal(spec("cargo"), true, &["publish"], &none, None, home);
        assert_eq!(p[0].host, "crates.io");
    }

    #[test]
    fn options_and_variables_come_first() {
        let home = Path::new("/nonexistent-home");
        assert_eq!(
            hosts(
                "npm",
                &["install", "--registry=https://npm.corp.example:4873/"],
                &none,
                None,
                home
            ),
            ["npm.corp.example:4873"]
        );
        assert_eq!(
            hosts(
                "pip",
                &[
                    "install",
                    "-i",
                    "https://pypi.corp.example/simple",
                    "--extra-index-url",
                    "http://extra.example/simple",
                    "x"
                ],
                &none,
                None,
                home
            ),
            ["pypi.corp.example", "extra.example:80"]
        );
        let var =
            |v: &str| (v == "GOPROXY").then(|| "https://goproxy.corp.example,direct".to_string());
        assert_eq!(
            hosts("go", &["get"], &var, None, home),
            ["goproxy.corp.example", "sum.golang.org"]
        );
        let var = |v: &str| match v {
            "GOPROXY" => Some("direct".to_string()),
            "GOSUMDB" => Some("off".to_string()),
            _ => None,
        };
        assert!(hosts("go", &["get"], &var, None, home).is_empty());
        let var = |v: &str| {
            (v == "PIP_EXTRA_INDEX_URL")
                .then(|| "https://a.example/simple https://b.example/simple".to_string())
        };
        assert_eq!(
            hosts("pip", &["install", "x"], &var, None, home),
            [
                "pypi.org",
                "files.pythonhosted.org",
                "a.example",
                "b.example"
            ]
        );
        let var = |v: &str| (v == "UV_DEFAULT_INDEX").then(|| "https://uv.example/".to_string());
        assert_eq!(hosts("uv", &["sync"], &var, None, home), ["uv.example"]);
    }

    fn write(p: &Path, text: &str) {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }

    #[test]
    fn config_files_of_the_project_then_the_user() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        let proj = home.join("src/app");
        std::fs::create_dir_all(&proj).unwrap_or_else(|e| panic!("{e}"));
        let h = |name: &str, words: &[&str]| hosts(name, words, &none, Some(&proj), &home);
        write(&home.join(".npmrc"), "registry=https://npm.home.example/\n");
        assert_eq!(h("npm", &["ci"]), ["npm.home.example"]);
        write(
            &proj.join(".npmrc"),
            "@corp:registry=https://scoped.example/\nregistry = https://npm.proj.example/\n",
        );
        let p = proposal(spec("npm"), false, &["ci"], &none, Some(&proj), &home);
        assert_eq!(
            p.iter().map(|h| h.host.as_str()).collect::<Vec<_>>(),
            ["npm.proj.example", "scoped.example"]
        );
        assert!(p[0].why.contains("~/src/app/.npmrc"), "{p:?}");

        write(
            &proj.join(".cargo/config.toml"),
            "[source.crates-io]\nreplace-with = \"mirror\"\n[source.mirror]\nregistry = \"sparse+https://crates.mirror.example/index/\"\n[registries.corp]\nindex = \"https://git.corp.example/index\"\n",
        );
        write(
            &home.join(".cargo/registry/index/crates.mirror.example-0123456789abcdef/config.json"),
            "{\"dl\":\"https://dl.mirror.example/crates\"}",
        );
        assert_eq!(
            h("cargo", &["fetch"]),
            [
                "crates.mirror.example",
                "dl.mirror.example",
                "git.corp.example"
            ]
        );
        assert_eq!(
            h("cargo", &["publish", "--registry", "corp"]),
            ["git.corp.example"]
        );
        write(
            &proj.join(".cargo/config.toml"),
            "[source.crates-io]\nreplace-with = \"vendored\"\n[source.vendored]\ndirectory = \"vendor\"\n",
        );
        assert!(h("cargo", &["fetch"]).is_empty());

        write(
            &home.join(".config/pip/pip.conf"),
            "[global]\nindex-url = https://pypi.home.example/simple\nextra-index-url =\n    https://x1.example/simple\n    https://x2.example/simple\n",
        );
        assert_eq!(
            h("pip", &["install", "x"]),
            ["pypi.home.example", "x1.example", "x2.example"]
        );
        write(
            &proj.join("requirements.txt"),
            "--index-url https://req.example/simple\nflask\n",
        );
        assert_eq!(
            h("pip", &["install", "-r", "requirements.txt"])[0],
            "req.example"
        );
        write(
            &proj.join("uv.toml"),
            "[[index]]\nurl = \"https://uvidx.example/simple\"\ndefault = true\n[[index]]\nurl = \"https://uvextra.example/simple\"\n",
        );
        assert_eq!(h("uv", &["sync"]), ["uvidx.example", "uvextra.example"]);
        write(
            &proj.join(".yarnrc.yml"),
            "npmRegistryServer: \"https://yarn.corp.example\"\nnpmScopes:\n  corp:\n    npmRegistryServer: \"https://yscope.example\"\n",
        );
        assert_eq!(
            h("yarn", &["install"]),
            ["yarn.corp.example", "yscope.example"]
        );
        write(
            &proj.join("Gemfile"),
            "source \"https://gems.corp.example\"\ngem \"rails\"\n",
        );
        assert_eq!(h("bundle", &["install"]), ["gems.corp.example"]);
        write(
            &proj.join("composer.json"),
            "{\"repositories\":[{\"type\":\"composer\",\"url\":\"https://satis.example\"},{\"packagist.org\":false}]}",
        );
        assert_eq!(
            h("composer", &["install"]),
            ["api.github.com", "codeload.github.com", "satis.example"]
        );
        write(
            &home.join(".m2/settings.xml"),
            "<settings><mirrors><mirror><id>m</id><mirrorOf>central</mirrorOf><url>https://nexus.example/maven</url></mirror></mirrors></settings>",
        );
        assert_eq!(h("mvn", &["package"]), ["nexus.example"]);
        write(
            &proj.join("gradle/wrapper/gradle-wrapper.properties"),
            "distributionUrl=https\\://gradle.corp.example/gradle-8.5-bin.zip\n",
        );
        assert_eq!(h("gradle", &["build"])[0], "gradle.corp.example");
        // Broken files are passed over, never a panic.
        write(&proj.join(".cargo/config.toml"), "[source.crates-io\n");
        write(&proj.join("composer.json"), "{");
        write(&proj.join("uv.toml"), "[[index]");
        assert_eq!(
            h("cargo", &["fetch"]),
            ["index.crates.io", "static.crates.io"]
        );
        assert_eq!(h("composer", &["install"]).len(), 3);
    }

    #[test]
    fn cargo_build_fetches_what_the_cache_lacks() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        let proj = d.path().join("proj");
        write(
            &proj.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\n",
        );
        let f = |p: &Path| cargo_would_fetch(&["build"], &none, Some(p), &home);
        assert!(
            f(&proj).is_some_and(|w| w.contains("no Cargo.lock")),
            "{:?}",
            f(&proj)
        );
        write(
            &proj.join("Cargo.lock"),
            "version = 4\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n[[package]]\nname = \"itoa\"\nversion = \"1.0.11\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"ab\"\n",
        );
        assert!(
            f(&proj.join("src")).is_some_and(|w| w.contains("itoa 1.0.11")),
            "{:?}",
            f(&proj)
        );
        write(
            &home.join(".cargo/registry/cache/index.crates.io-6f17d22bba15001f/itoa-1.0.11.crate"),
            "",
        );
        assert_eq!(f(&proj), None);
        // A manifest whose dependencies are all paths fetches nothing.
        let local = d.path().join("local");
        write(
            &local.join("Cargo.toml"),
            "[package]\nname = \"l\"\nversion = \"0.1.0\"\n[dependencies]\nx = { path = \"../x\" }\n",
        );
        assert_eq!(f(&local), None);
        // No manifest: nothing to say.
        assert_eq!(f(d.path()), None);
    }

    #[test]
    fn go_build_fetches_what_the_module_cache_lacks() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        let proj = d.path().join("proj");
        write(&proj.join("go.mod"), "module example.com/app\n");
        let f = |p: &Path| go_would_fetch(&none, Some(p), &home);
        assert_eq!(f(&proj), None);
        write(
            &proj.join("go.sum"),
            "github.com/BurntSushi/toml v1.3.2 h1:x=\ngithub.com/BurntSushi/toml v1.3.2/go.mod h1:y=\n",
        );
        assert!(
            f(&proj).is_some_and(|w| w.contains("github.com/BurntSushi/toml v1.3.2")),
            "{:?}",
            f(&proj)
        );
        write(
            &home.join("go/pkg/mod/cache/download/github.com/!burnt!sushi/toml/@v/v1.3.2.zip"),
            "",
        );
        assert_eq!(f(&proj), None);
        let var = |v: &str| (v == "GOMODCACHE").then(|| "/nonexistent-cache".to_string());
        assert!(go_would_fetch(&var, Some(&proj), &home).is_some());
        write(&proj.join("vendor/modules.txt"), "");
        assert_eq!(go_would_fetch(&var, Some(&proj), &home), None);
    }
}
