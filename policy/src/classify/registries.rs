//! The registry a package manager would reach, as the user's own setup says: an option on
//! the line, a variable set on the line, the project's config file (from the working
//! directory up), then the user's. Without any of them, the command knowledge's default
//! host (`registry.npmjs.org`, `pypi.org`, ...) stands.
//!
//! Only hosts are read here; a token in the same files is the business of
//! [`super::tokens`].

use std::path::{Path, PathBuf};

use super::git::url_host_port;

/// A registry found in the user's setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub host: String,
    pub port: Option<u16>,
    /// Where it was found, for the exit's reasons (`--registry`, `~/.npmrc`, ...).
    pub from: String,
}

/// The ecosystems whose setup is read, by the default host of the command knowledge.
fn ecosystem(default_host: &str) -> Option<&'static str> {
    Some(match default_host {
        "registry.npmjs.org" => "npm",
        "pypi.org" => "pip",
        "index.crates.io" => "cargo",
        "proxy.golang.org" => "go",
        _ => return None,
    })
}

/// The registry for a command whose knowledge names `default_host`. `words` are the
/// command's arguments after its name; `var` gives a variable set on the line (or in the
/// environment the line runs with) when its value is known.
pub fn registry_for(
    default_host: &str,
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Option<Found> {
    match ecosystem(default_host)? {
        "npm" => npm(words, var, cwd, home),
        "pip" => pip(words, var, home),
        "cargo" => cargo(words, cwd, home),
        "go" => go(var, home),
        _ => None,
    }
}

fn found(url: &str, from: impl Into<String>) -> Option<Found> {
    let url = url.trim().trim_matches('"').trim_matches('\'');
    let url = url.strip_prefix("sparse+").unwrap_or(url);
    let url = url.strip_prefix("registry+").unwrap_or(url);
    let (host, port, _) = url_host_port(url)?;
    Some(Found {
        host,
        port,
        from: from.into(),
    })
}

/// The value of `--name VALUE` or `--name=VALUE` (or a short `-n VALUE`).
fn option(words: &[&str], long: &str, short: Option<&str>) -> Option<String> {
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if *w == "--" {
            break;
        }
        if let Some(v) = w.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
        if *w == long || short == Some(*w) {
            return it.next().map(|v| v.to_string());
        }
    }
    None
}

/// The directories from `cwd` up to the root.
fn upwards(cwd: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut d = cwd.map(Path::to_path_buf);
    while let Some(p) = d {
        out.push(p.clone());
        d = p.parent().map(Path::to_path_buf);
    }
    out
}

/// Files are small config files; a larger one is not read.
fn read_small(p: &Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_file() || meta.len() > 256 * 1024 {
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

/// `key = value` or `key=value` lines of an ini-like file (npmrc, pip.conf, go env).
fn ini_value(text: &str, key: &str) -> Option<String> {
    text.lines().rev().find_map(|l| {
        let l = l.trim();
        if l.starts_with('#') || l.starts_with(';') {
            return None;
        }
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

fn npm(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Option<Found> {
    if let Some(u) = option(words, "--registry", None) {
        return found(&u, "--registry");
    }
    for v in ["npm_config_registry", "NPM_CONFIG_REGISTRY"] {
        if let Some(u) = var(v) {
            return found(&u, v);
        }
    }
    let mut files: Vec<PathBuf> = upwards(cwd).into_iter().map(|d| d.join(".npmrc")).collect();
    files.push(home.join(".npmrc"));
    for f in files {
        if let Some(u) = read_small(&f).and_then(|t| ini_value(&t, "registry")) {
            return found(&u, shown(&f, home));
        }
    }
    None
}

fn pip(words: &[&str], var: &dyn Fn(&str) -> Option<String>, home: &Path) -> Option<Found> {
    if let Some(u) =
        option(words, "--index-url", Some("-i")).or_else(|| option(words, "--default-index", None))
    {
        return found(&u, "--index-url");
    }
    for v in ["PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL"] {
        if let Some(u) = var(v) {
            return found(&u, v);
        }
    }
    for f in [
        home.join(".config/pip/pip.conf"),
        home.join(".pip/pip.conf"),
        PathBuf::from("/etc/pip.conf"),
    ] {
        if let Some(u) = read_small(&f).and_then(|t| ini_value(&t, "index-url")) {
            return found(&u, shown(&f, home));
        }
    }
    None
}

fn cargo(words: &[&str], cwd: Option<&Path>, home: &Path) -> Option<Found> {
    if let Some(u) = option(words, "--index", None) {
        return found(&u, "--index");
    }
    let mut files = Vec::new();
    for d in upwards(cwd) {
        files.push(d.join(".cargo/config.toml"));
        files.push(d.join(".cargo/config"));
    }
    files.push(home.join(".cargo/config.toml"));
    files.push(home.join(".cargo/config"));
    let tables: Vec<(PathBuf, toml::Table)> = files
        .into_iter()
        .filter_map(|f| {
            let t = read_small(&f)?.parse::<toml::Table>().ok()?;
            Some((f, t))
        })
        .collect();
    let lookup = |path: &[&str]| -> Option<(String, &PathBuf)> {
        tables.iter().find_map(|(f, t)| {
            let mut v = t.get(path[0])?;
            for k in &path[1..] {
                v = v.get(*k)?;
            }
            Some((v.as_str()?.to_string(), f))
        })
    };
    if let Some(name) = option(words, "--registry", None) {
        if let Some((u, f)) = lookup(&["registries", &name, "index"]) {
            return found(&u, shown(f, home));
        }
    }
    // Source replacement of crates.io (a mirror or a vendored registry).
    let (to, _) = lookup(&["source", "crates-io", "replace-with"])?;
    let (u, f) =
        lookup(&["source", &to, "registry"]).or_else(|| lookup(&["registries", &to, "index"]))?;
    found(&u, shown(f, home))
}

fn go(var: &dyn Fn(&str) -> Option<String>, home: &Path) -> Option<Found> {
    let (value, from) = match var("GOPROXY") {
        Some(v) => (v, "GOPROXY".to_string()),
        None => {
            let f = home.join(".config/go/env");
            (
                read_small(&f).and_then(|t| ini_value(&t, "GOPROXY"))?,
                shown(&f, home),
            )
        }
    };
    // The first proxy of the list that is a URL; `direct` means the modules' own hosts,
    // which the line does not name: the default stands.
    value
        .split([',', '|'])
        .map(str::trim)
        .find(|p| p.contains("://"))
        .and_then(|u| found(u, from))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn options_and_variables_come_first() {
        let home = Path::new("/nonexistent-home");
        let f = registry_for(
            "registry.npmjs.org",
            &["install", "--registry=https://npm.corp.example:4873/"],
            &none,
            None,
            home,
        )
        .expect("found");
        assert_eq!((f.host.as_str(), f.port), ("npm.corp.example", Some(4873)));
        let f = registry_for(
            "pypi.org",
            &["install", "-i", "https://pypi.corp.example/simple", "x"],
            &none,
            None,
            home,
        )
        .expect("found");
        assert_eq!(f.host, "pypi.corp.example");
        let var =
            |v: &str| (v == "GOPROXY").then(|| "https://goproxy.corp.example,direct".to_string());
        assert_eq!(
            registry_for("proxy.golang.org", &["get"], &var, None, home)
                .map(|f| f.host)
                .as_deref(),
            Some("goproxy.corp.example")
        );
        let var = |v: &str| (v == "GOPROXY").then(|| "direct".to_string());
        assert_eq!(
            registry_for("proxy.golang.org", &["get"], &var, None, home),
            None
        );
        assert_eq!(
            registry_for("rubygems.org", &["install"], &none, None, home),
            None
        );
    }

    #[test]
    fn config_files_of_the_project_then_the_user() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path().join("home");
        let proj = home.join("src/app");
        std::fs::create_dir_all(proj.join(".cargo")).expect("mkdir");
        std::fs::write(home.join(".npmrc"), "registry=https://npm.home.example/\n").expect("write");
        let f =
            registry_for("registry.npmjs.org", &["ci"], &none, Some(&proj), &home).expect("found");
        assert_eq!(
            (f.host.as_str(), f.from.as_str()),
            ("npm.home.example", "~/.npmrc")
        );
        std::fs::write(
            proj.join(".npmrc"),
            "@corp:registry=https://scoped.example/\nregistry = https://npm.proj.example/\n",
        )
        .expect("write");
        let f =
            registry_for("registry.npmjs.org", &["ci"], &none, Some(&proj), &home).expect("found");
        assert_eq!(
            (f.host.as_str(), f.from.as_str()),
            ("npm.proj.example", "~/src/app/.npmrc")
        );

        std::fs::write(
            proj.join(".cargo/config.toml"),
            "[source.crates-io]\nreplace-with = \"mirror\"\n[source.mirror]\nregistry = \"sparse+https://crates.mirror.example/index/\"\n[registries.corp]\nindex = \"https://git.corp.example/index\"\n",
        )
        .expect("write");
        let f =
            registry_for("index.crates.io", &["fetch"], &none, Some(&proj), &home).expect("found");
        assert_eq!(f.host, "crates.mirror.example");
        let f = registry_for(
            "index.crates.io",
            &["publish", "--registry", "corp"],
            &none,
            Some(&proj),
            &home,
        )
        .expect("found");
        assert_eq!(f.host, "git.corp.example");

        std::fs::create_dir_all(home.join(".config/pip")).expect("mkdir");
        std::fs::write(
            home.join(".config/pip/pip.conf"),
            "[global]\nindex-url = https://pypi.home.example/simple\n",
        )
        .expect("write");
        let f =
            registry_for("pypi.org", &["install", "x"], &none, Some(&proj), &home).expect("found");
        assert_eq!(f.host, "pypi.home.example");
        // Broken files are passed over, never a panic.
        std::fs::write(proj.join(".cargo/config.toml"), "[source.crates-io\n").expect("write");
        assert_eq!(
            registry_for("index.crates.io", &["fetch"], &none, Some(&proj), &home),
            None
        );
    }
}
