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
//! [`super::tokens`]. Every file read is small (a larger one is passed over) and a broken
//! one is passed over, never a panic.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::knowledge::{Registry, SetupName};
use super::url::url_host_port;

/// A registry host found in the user's setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub host: String,
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
    pub host: String,
    pub port: Option<u16>,
    pub plain: bool,
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

fn npmrc_files(
    cwd: Option<&Path>,
    home: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = upwards(cwd).into_iter().map(|d| d.join(".npmrc")).collect();
    match var("npm_config_userconfig").or_else(|| var("NPM_CONFIG_USERCONFIG")) {
        Some(u) => files.push(PathBuf::from(u)),
        None => files.push(home.join(".npmrc")),
    }
    files
}

fn npm(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let files = npmrc_files(cwd, home, var);
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter_map(|f| read_small(&f).map(|t| (f, t)))
        .collect();
    // Scoped registries of every file (`@scope:registry=`).
    for (f, t) in &texts {
        for (_, v) in ini_values(t, |k| k.starts_with('@') && k.ends_with(":registry")) {
            s.extra.extend(found(&v, shown(f, home)));
        }
    }
    if let Some(u) = option(words, "--registry", None) {
        s.replace_all = found(&u, "--registry").map(|f| vec![f]);
        return s;
    }
    for v in ["npm_config_registry", "NPM_CONFIG_REGISTRY"] {
        if let Some(u) = var(v) {
            s.replace_all = found(&u, v).map(|f| vec![f]);
            return s;
        }
    }
    for (f, t) in &texts {
        if let Some(u) = ini_value(t, "registry") {
            s.replace_all = found(&u, shown(f, home)).map(|f| vec![f]);
            return s;
        }
    }
    s
}

/// A `key: value` of a YAML file at any depth (`npmRegistryServer: "https://..."`).
fn yaml_values(text: &str, key: &str) -> Vec<(usize, String)> {
    text.lines()
        .filter_map(|l| {
            let indent = l.len() - l.trim_start().len();
            let (k, v) = l.trim().split_once(':')?;
            (k.trim().trim_matches(['"', '\'']) == key).then(|| (indent, v.trim().to_string()))
        })
        .collect()
}

fn yarn(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let mut files: Vec<PathBuf> = upwards(cwd)
        .into_iter()
        .map(|d| d.join(".yarnrc.yml"))
        .collect();
    files.push(home.join(".yarnrc.yml"));
    let mut primary = None;
    if let Some(u) = var("YARN_NPM_REGISTRY_SERVER") {
        primary = found(&u, "YARN_NPM_REGISTRY_SERVER");
    }
    for f in &files {
        let Some(t) = read_small(f) else { continue };
        for (indent, v) in yaml_values(&t, "npmRegistryServer") {
            let fd = found(&v, shown(f, home));
            if indent == 0 {
                if primary.is_none() {
                    primary = fd;
                }
            } else {
                s.extra.extend(fd);
            }
        }
    }
    // yarn v1: `.yarnrc` (`registry "https://..."`), then npm's own setup.
    if primary.is_none() {
        let mut v1: Vec<PathBuf> = upwards(cwd)
            .into_iter()
            .map(|d| d.join(".yarnrc"))
            .collect();
        v1.push(home.join(".yarnrc"));
        primary = v1.iter().find_map(|f| {
            let t = read_small(f)?;
            t.lines().find_map(|l| {
                let u = l.trim().strip_prefix("registry ")?;
                found(u, shown(f, home))
            })
        });
    }
    match primary {
        Some(p) => s.replace_all = Some(vec![p]),
        None => {
            let n = npm(words, var, cwd, home);
            s.replace_all = n.replace_all;
            s.extra.extend(n.extra);
        }
    }
    s
}

/// pip's config files, in the order pip reads them (the last wins): site, user, the
/// environment's, `PIP_CONFIG_FILE`.
fn pip_conf_files(var: &dyn Fn(&str) -> Option<String>, home: &Path) -> Vec<PathBuf> {
    let mut v = vec![
        PathBuf::from("/etc/xdg/pip/pip.conf"),
        PathBuf::from("/etc/pip.conf"),
        home.join(".pip/pip.conf"),
        home.join(".config/pip/pip.conf"),
    ];
    if let Some(x) = var("XDG_CONFIG_HOME") {
        v.push(PathBuf::from(x).join("pip/pip.conf"));
    }
    if let Some(e) = var("VIRTUAL_ENV") {
        v.push(PathBuf::from(e).join("pip.conf"));
    }
    if let Some(f) = var("PIP_CONFIG_FILE") {
        v.push(PathBuf::from(f));
    }
    v
}

/// The index options of requirements files (`-r FILE`, read from `cwd`; nested `-r` lines
/// too, at most 8 files).
fn requirements_options(words: &[&str], cwd: Option<&Path>) -> Vec<String> {
    let mut todo: Vec<PathBuf> = options(words, "--requirement", Some("-r"))
        .into_iter()
        .chain(options(words, "--constraint", Some("-c")))
        .map(|f| match cwd {
            Some(c) => c.join(f),
            None => PathBuf::from(f),
        })
        .collect();
    let mut out = Vec::new();
    let mut seen = 0;
    while let Some(f) = todo.pop() {
        seen += 1;
        if seen > 8 {
            break;
        }
        let Some(t) = read_small(&f) else { continue };
        for l in t.lines() {
            let l = l.trim();
            if l.starts_with('-') {
                out.extend(l.split_whitespace().map(str::to_string));
                if let Some(r) = l
                    .strip_prefix("-r ")
                    .or_else(|| l.strip_prefix("--requirement "))
                    .or_else(|| l.strip_prefix("-c "))
                {
                    let base = f.parent().unwrap_or(Path::new("/"));
                    todo.push(base.join(r.trim()));
                }
            }
        }
    }
    out
}

fn pip(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let req = requirements_options(words, cwd);
    let req: Vec<&str> = req.iter().map(String::as_str).collect();
    let confs: Vec<(PathBuf, String)> = pip_conf_files(var, home)
        .into_iter()
        .filter_map(|f| read_small(&f).map(|t| (f, t)))
        .collect();
    // Extra indexes and find-links: every place adds.
    for (o, short) in [("--extra-index-url", None), ("--find-links", Some("-f"))] {
        for u in options(words, o, short) {
            s.extra.extend(found(&u, o));
        }
        for u in options(&req, o, short) {
            s.extra.extend(found(&u, "the requirements file"));
        }
    }
    for v in ["PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"] {
        for u in var(v).unwrap_or_default().split_whitespace() {
            s.extra.extend(found(u, v));
        }
    }
    for (f, t) in &confs {
        for (_, v) in ini_values(t, |k| k == "extra-index-url" || k == "find-links") {
            for u in v.split_whitespace() {
                s.extra.extend(found(u, shown(f, home)));
            }
        }
    }
    // The index: the line, the requirements file, the variable, the last config file.
    let primary = option(words, "--index-url", Some("-i"))
        .and_then(|u| found(&u, "--index-url"))
        .or_else(|| {
            option(&req, "--index-url", Some("-i")).and_then(|u| found(&u, "the requirements file"))
        })
        .or_else(|| var("PIP_INDEX_URL").and_then(|u| found(&u, "PIP_INDEX_URL")))
        .or_else(|| {
            confs
                .iter()
                .rev()
                .find_map(|(f, t)| found(&ini_value(t, "index-url")?, shown(f, home)))
        });
    if words.contains(&"--no-index") || req.contains(&"--no-index") {
        s.replace_all = Some(Vec::new());
    } else if let Some(p) = primary {
        s.replace_all = Some(vec![p]);
    }
    s
}

/// The `[[index]]`, `index-url`, `extra-index-url` and `find-links` of a uv config table.
fn uv_table(t: &toml::Table, from: &str, primary: &mut Option<Found>, s: &mut Setup) {
    let urls = |v: Option<&toml::Value>| -> Vec<String> {
        match v {
            Some(toml::Value::String(u)) => vec![u.clone()],
            Some(toml::Value::Array(a)) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    };
    if let Some(toml::Value::Array(idx)) = t.get("index") {
        for i in idx {
            let Some(u) = i.get("url").and_then(|u| u.as_str()) else {
                continue;
            };
            let f = found(u, from);
            if i.get("default").and_then(|d| d.as_bool()) == Some(true) {
                if primary.is_none() {
                    *primary = f;
                }
            } else {
                s.extra.extend(f);
            }
        }
    }
    for u in urls(t.get("index-url")) {
        if primary.is_none() {
            *primary = found(&u, from);
        }
    }
    for k in ["extra-index-url", "find-links"] {
        for u in urls(t.get(k)) {
            s.extra.extend(found(&u, from));
        }
    }
    if let Some(pip) = t.get("pip").and_then(|p| p.as_table()) {
        uv_table(pip, from, primary, s);
    }
}

fn uv(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let mut primary = option(words, "--default-index", None)
        .and_then(|u| found(&u, "--default-index"))
        .or_else(|| option(words, "--index-url", Some("-i")).and_then(|u| found(&u, "--index-url")))
        .or_else(|| var("UV_DEFAULT_INDEX").and_then(|u| found(&u, "UV_DEFAULT_INDEX")))
        .or_else(|| var("UV_INDEX_URL").and_then(|u| found(&u, "UV_INDEX_URL")));
    for o in ["--index", "--extra-index-url", "--find-links"] {
        for u in options(words, o, None) {
            // `--index name=url`
            let u = u.split_once('=').map(|(_, u)| u.to_string()).unwrap_or(u);
            s.extra.extend(found(&u, o));
        }
    }
    for v in ["UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS"] {
        for u in var(v).unwrap_or_default().split_whitespace() {
            let u = u.split_once('=').map(|(_, u)| u).unwrap_or(u);
            s.extra.extend(found(u, v));
        }
    }
    // The project's uv.toml or pyproject.toml [tool.uv] (the nearest), then the user's.
    let project = upwards(cwd).into_iter().find_map(|d| {
        let u = d.join("uv.toml");
        if let Some(t) = read_small(&u).and_then(|t| t.parse::<toml::Table>().ok()) {
            return Some((u, t));
        }
        let p = d.join("pyproject.toml");
        let t = read_small(&p)?.parse::<toml::Table>().ok()?;
        let uvt = t.get("tool")?.get("uv")?.as_table()?.clone();
        Some((p, uvt))
    });
    let user_dir = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    let user = user_dir.join("uv/uv.toml");
    let user = read_small(&user)
        .and_then(|t| t.parse::<toml::Table>().ok())
        .map(|t| (user, t));
    for (f, t) in project.iter().chain(user.iter()) {
        uv_table(t, &shown(f, home), &mut primary, &mut s);
    }
    if let Some(p) = primary {
        s.replace_all = Some(vec![p]);
    }
    s
}

fn poetry(cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let Some(f) = nearest(cwd, "pyproject.toml") else {
        return s;
    };
    let Some(t) = read_small(&f).and_then(|t| t.parse::<toml::Table>().ok()) else {
        return s;
    };
    let Some(sources) = t
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("source"))
        .and_then(|s| s.as_array())
    else {
        return s;
    };
    let from = shown(&f, home);
    let mut primary = Vec::new();
    let mut pypi_listed = false;
    for src in sources {
        let name = src.get("name").and_then(|n| n.as_str()).unwrap_or("");
        if name.eq_ignore_ascii_case("pypi") {
            pypi_listed = true;
            continue;
        }
        let Some(u) = src.get("url").and_then(|u| u.as_str()) else {
            continue;
        };
        let prio = src
            .get("priority")
            .and_then(|p| p.as_str())
            .unwrap_or("primary");
        let fd = found(u, from.clone());
        if matches!(prio, "primary" | "default") {
            primary.extend(fd);
        } else {
            s.extra.extend(fd);
        }
    }
    // A primary source turns the python package index off unless a source names it.
    if !primary.is_empty() && !pypi_listed {
        s.replace_all = Some(primary);
    } else {
        s.extra.extend(primary);
    }
    s
}

/// Cargo's config files, nearest first: the project's `.cargo/config.toml` from the
/// working directory up, then `$CARGO_HOME/config.toml`.
fn cargo_tables(
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Vec<(PathBuf, toml::Table)> {
    let mut files = Vec::new();
    for d in upwards(cwd) {
        files.push(d.join(".cargo/config.toml"));
        files.push(d.join(".cargo/config"));
    }
    let ch = cargo_home(var, home);
    files.push(ch.join("config.toml"));
    files.push(ch.join("config"));
    let mut seen = BTreeSet::new();
    files
        .into_iter()
        .filter(|f| seen.insert(f.clone()))
        .filter_map(|f| {
            let t = read_small(&f)?.parse::<toml::Table>().ok()?;
            Some((f, t))
        })
        .collect()
}

/// `$CARGO_HOME`, else `~/.cargo`.
pub fn cargo_home(var: &dyn Fn(&str) -> Option<String>, home: &Path) -> PathBuf {
    var("CARGO_HOME")
        .filter(|h| h.starts_with('/'))
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cargo"))
}

/// The host cargo downloads `.crate` files from for the registry at `index_host`, as the
/// index's `config.json` in cargo's cache says (`dl`), when it is another host.
fn cargo_dl_host(ch: &Path, index_host: &str, from: &str) -> Option<Found> {
    let dir = ch.join("registry/index");
    let rd = std::fs::read_dir(&dir).ok()?;
    for e in rd.flatten().take(256) {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some((h, _hash)) = n.rsplit_once('-') else {
            continue;
        };
        if h != index_host {
            continue;
        }
        let t = read_small(&e.path().join("config.json"))?;
        let v: serde_json::Value = serde_json::from_str(&t).ok()?;
        let dl = v.get("dl")?.as_str()?;
        let f = found(dl, format!("{from} (its index's config.json)"))?;
        return (f.host != index_host).then_some(f);
    }
    None
}

fn cargo(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let ch = cargo_home(var, home);
    let tables = cargo_tables(var, cwd, home);
    let lookup = |path: &[&str]| -> Option<(String, &PathBuf)> {
        tables.iter().find_map(|(f, t)| {
            let mut v = t.get(path[0])?;
            for k in &path[1..] {
                v = v.get(*k)?;
            }
            Some((v.as_str()?.to_string(), f))
        })
    };
    let with_dl = |f: Found| -> Vec<Found> {
        let dl = cargo_dl_host(&ch, &f.host, &f.from);
        std::iter::once(f).chain(dl).collect()
    };
    // Every named registry may be a dependency's (`registry = "corp"` in Cargo.toml).
    let mut named = BTreeSet::new();
    for (f, t) in &tables {
        if let Some(r) = t.get("registries").and_then(|r| r.as_table()) {
            for (name, v) in r {
                if let Some(u) = v.get("index").and_then(|u| u.as_str()) {
                    if named.insert(name.clone()) {
                        s.extra
                            .extend(found(u, shown(f, home)).map(with_dl).unwrap_or_default());
                    }
                }
            }
        }
    }
    if let Some(u) = option(words, "--index", None) {
        s.replace_all = found(&u, "--index").map(with_dl);
        return s;
    }
    if let Some(name) = option(words, "--registry", None) {
        let env = format!(
            "CARGO_REGISTRIES_{}_INDEX",
            name.to_ascii_uppercase().replace('-', "_")
        );
        let u = var(&env)
            .map(|u| (u, env.clone()))
            .or_else(|| lookup(&["registries", &name, "index"]).map(|(u, f)| (u, shown(f, home))));
        if let Some((u, from)) = u {
            s.replace_all = found(&u, from).map(with_dl);
            return s;
        }
    }
    // Source replacement of crates.io (a mirror, or a vendored or local registry).
    let Some((to, _)) = lookup(&["source", "crates-io", "replace-with"]) else {
        return s;
    };
    if let Some((u, f)) =
        lookup(&["source", &to, "registry"]).or_else(|| lookup(&["registries", &to, "index"]))
    {
        s.replace_all = Some(found(&u, shown(f, home)).map(with_dl).unwrap_or_default());
    } else if lookup(&["source", &to, "directory"])
        .or_else(|| lookup(&["source", &to, "local-registry"]))
        .is_some()
    {
        // Vendored: no host at all.
        s.replace_all = Some(Vec::new());
    }
    s
}

fn go(var: &dyn Fn(&str) -> Option<String>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let env_file = var("GOENV").map(PathBuf::from).unwrap_or_else(|| {
        var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".config"))
            .join("go/env")
    });
    let file = read_small(&env_file);
    let get = |k: &str| -> Option<(String, String)> {
        var(k)
            .map(|v| (v, k.to_string()))
            .or_else(|| Some((ini_value(file.as_deref()?, k)?, shown(&env_file, home))))
    };
    if let Some((value, from)) = get("GOPROXY") {
        // Every proxy of the list that is a URL; `direct` means the modules' own hosts,
        // which the line does not name; `off` means none.
        let proxies: Vec<Found> = value
            .split([',', '|'])
            .map(str::trim)
            .filter(|p| p.contains("://"))
            .filter_map(|u| found(u, from.clone()))
            .collect();
        s.replace_host.push(("proxy.golang.org".into(), proxies));
    }
    if let Some((value, from)) = get("GOSUMDB") {
        let v = value.trim().trim_matches('"');
        let list = if v == "off" {
            Vec::new()
        } else {
            // `name[+key] [url]`: the url when given, else the name is the host.
            let mut parts = v.split_whitespace();
            let name = parts.next().unwrap_or("");
            let name = name.split('+').next().unwrap_or(name);
            let u = parts
                .next()
                .map(str::to_string)
                .unwrap_or_else(|| format!("https://{name}"));
            found(&u, from).into_iter().collect()
        };
        s.replace_host.push(("sum.golang.org".into(), list));
    }
    s
}

/// The url of a `source "URL"` line of a Gemfile.
fn gemfile_source(l: &str) -> Option<&str> {
    let r = l.trim().strip_prefix("source")?;
    let r = r.trim_start().strip_prefix('(').unwrap_or(r.trim_start());
    let q = r.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let r = &r[1..];
    Some(&r[..r.find(q)?])
}

fn gem(words: &[&str], cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let mut primary: Vec<Found> = options(words, "--source", Some("-s"))
        .iter()
        .filter_map(|u| found(u, "--source"))
        .collect();
    if let Some(f) = nearest(cwd, "Gemfile") {
        if let Some(t) = read_small(&f) {
            let from = shown(&f, home);
            for l in t.lines() {
                if let Some(u) = gemfile_source(l) {
                    // A `source ... do` block is for the gems inside it: extra.
                    if l.trim_end().ends_with("do") || l.starts_with([' ', '\t']) {
                        s.extra.extend(found(u, from.clone()));
                    } else {
                        primary.extend(found(u, from.clone()));
                    }
                }
            }
        }
    }
    if primary.is_empty() {
        let f = home.join(".gemrc");
        if let Some(t) = read_small(&f) {
            let mut in_sources = false;
            for l in t.lines() {
                if l.trim_start().starts_with(":sources:") {
                    in_sources = true;
                } else if in_sources {
                    match l.trim().strip_prefix('-') {
                        Some(u) => primary.extend(found(u.trim(), shown(&f, home))),
                        None => in_sources = false,
                    }
                }
            }
        }
    }
    if !primary.is_empty() {
        s.replace_all = Some(primary);
    }
    s
}

fn composer(var: &dyn Fn(&str) -> Option<String>, cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let global = var("COMPOSER_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config/composer"))
        .join("config.json");
    let mut packagist_off = false;
    for f in nearest(cwd, "composer.json").into_iter().chain([global]) {
        let Some(v) =
            read_small(&f).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        let repos: Vec<(String, &serde_json::Value)> = match v.get("repositories") {
            Some(serde_json::Value::Array(a)) => a.iter().map(|r| (String::new(), r)).collect(),
            Some(serde_json::Value::Object(o)) => o.iter().map(|(k, r)| (k.clone(), r)).collect(),
            _ => Vec::new(),
        };
        for (key, r) in repos {
            if r == &serde_json::Value::Bool(false) {
                packagist_off |= key == "packagist.org" || key == "packagist";
                continue;
            }
            if let Some(m) = r.as_object() {
                if m.get("packagist.org") == Some(&serde_json::Value::Bool(false)) {
                    packagist_off = true;
                }
            }
            if let Some(u) = r.get("url").and_then(|u| u.as_str()) {
                s.extra.extend(found(u, shown(&f, home)));
            }
        }
    }
    if packagist_off {
        s.replace_host
            .push(("repo.packagist.org".into(), Vec::new()));
    }
    s
}

/// The text of every `<tag>...</tag>` in `text`.
fn xml_all<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let Some(j) = after.find(&close) else { break };
        out.push(&after[..j]);
        rest = &after[j + close.len()..];
    }
    out
}

fn maven(cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let settings = home.join(".m2/settings.xml");
    if let Some(t) = read_small(&settings) {
        for m in xml_all(&t, "mirror") {
            let of = xml_all(m, "mirrorOf").first().copied().unwrap_or("");
            let Some(u) = xml_all(m, "url").first().copied() else {
                continue;
            };
            let fd = found(u, shown(&settings, home));
            if of
                .split(',')
                .any(|o| matches!(o.trim(), "*" | "central" | "external:*"))
            {
                s.replace_host
                    .push(("repo.maven.apache.org".into(), fd.into_iter().collect()));
            } else {
                s.extra.extend(fd);
            }
        }
    }
    if let Some(p) = nearest(cwd, "pom.xml") {
        if let Some(t) = read_small(&p) {
            for tag in ["repository", "pluginRepository"] {
                for r in xml_all(&t, tag) {
                    for u in xml_all(r, "url") {
                        s.extra.extend(found(u, shown(&p, home)));
                    }
                }
            }
        }
    }
    s
}

fn gradle(cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let Some(f) = nearest(cwd, "gradle/wrapper/gradle-wrapper.properties") else {
        return s;
    };
    let Some(u) = read_small(&f).and_then(|t| ini_value(&t, "distributionUrl")) else {
        return s;
    };
    if let Some(fd) = found(&u.replace("\\:", ":"), shown(&f, home)) {
        if fd.host != "services.gradle.org" {
            s.replace_host
                .push(("services.gradle.org".into(), vec![fd]));
            s.replace_host
                .push(("downloads.gradle.org".into(), Vec::new()));
        }
    }
    s
}

/// Why a build-like cargo command (`cargo build`) would fetch: the first crate of the
/// lock file that cargo's download cache lacks, or a manifest with registry dependencies
/// and no lock file. `None` when everything is in the cache (or no manifest is found).
/// Cheap and bounded: one lock file of at most 1 MiB, one listing of each cache dir.
pub fn cargo_would_fetch(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Option<String> {
    let manifest = match option(words, "--manifest-path", None) {
        Some(m) => {
            let p = PathBuf::from(&m);
            match cwd {
                Some(c) if p.is_relative() => c.join(p),
                _ => p,
            }
        }
        None => nearest(cwd, "Cargo.toml")?,
    };
    let dir = manifest.parent()?.to_path_buf();
    let lock = upwards(Some(&dir))
        .into_iter()
        .take(16)
        .map(|d| d.join("Cargo.lock"))
        .find(|p| p.is_file());
    let Some(lock) = lock else {
        let t = read_small(&manifest)?.parse::<toml::Table>().ok()?;
        let registry_dep = |tbl: Option<&toml::Value>| {
            tbl.and_then(|d| d.as_table()).is_some_and(|d| {
                d.values().any(|v| {
                    v.is_str()
                        || v.as_table().is_some_and(|t| {
                            ["path", "git", "workspace"]
                                .iter()
                                .all(|k| !t.contains_key(*k))
                        })
                })
            })
        };
        let ws = t.get("workspace").and_then(|w| w.get("dependencies"));
        return ["dependencies", "dev-dependencies", "build-dependencies"]
            .iter()
            .any(|k| registry_dep(t.get(*k)))
            .then(|| {
                "there is no Cargo.lock: cargo resolves the dependencies from the index".into()
            })
            .or_else(|| {
                registry_dep(ws).then(|| {
                    "there is no Cargo.lock: cargo resolves the dependencies from the index".into()
                })
            });
    };
    let t = read_small(&lock)?.parse::<toml::Table>().ok()?;
    let packages = t.get("package")?.as_array()?;
    let cache = cargo_home(var, home).join("registry/cache");
    let mut have = BTreeSet::new();
    if let Ok(rd) = std::fs::read_dir(&cache) {
        for d in rd.flatten().take(64) {
            if let Ok(files) = std::fs::read_dir(d.path()) {
                for f in files.flatten() {
                    have.insert(f.file_name().to_string_lossy().into_owned());
                }
            }
        }
    }
    for p in packages {
        let src = p.get("source").and_then(|s| s.as_str()).unwrap_or("");
        if !(src.starts_with("registry+") || src.starts_with("sparse+")) {
            continue;
        }
        let (Some(name), Some(version)) = (
            p.get("name").and_then(|n| n.as_str()),
            p.get("version").and_then(|v| v.as_str()),
        ) else {
            continue;
        };
        if !have.contains(&format!("{name}-{version}.crate")) {
            return Some(format!(
                "{} names {name} {version}, which cargo's cache ({}) lacks",
                shown(&lock, home),
                shown(&cache, home)
            ));
        }
    }
    None
}

/// A module path as go's module cache writes it: each capital letter as `!` and the letter
/// in lower case.
fn go_escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Why a build-like go command (`go build`, `go test`) would download modules: the first
/// module of `go.sum` (a full module, not only its `go.mod`) whose zip the module cache
/// (`$GOMODCACHE`, else `$GOPATH/pkg/mod`, else `~/go/pkg/mod`) lacks. `None` when all are
/// there, when the module is vendored (`vendor/modules.txt`) or no go.mod is found.
/// Bounded: one go.sum of at most 1 MiB, one lookup per module.
pub fn go_would_fetch(
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Option<String> {
    let gomod = nearest(cwd, "go.mod")?;
    let dir = gomod.parent()?;
    if dir.join("vendor/modules.txt").is_file()
        || var("GOFLAGS").is_some_and(|f| f.contains("-mod=vendor"))
    {
        return None;
    }
    let cache = var("GOMODCACHE")
        .map(PathBuf::from)
        .or_else(|| {
            var("GOPATH").and_then(|p| {
                p.split(':')
                    .next()
                    .map(|p| PathBuf::from(p).join("pkg/mod"))
            })
        })
        .unwrap_or_else(|| home.join("go/pkg/mod"));
    let sum = read_small(&dir.join("go.sum"))?;
    for l in sum.lines().take(20_000) {
        let mut w = l.split_whitespace();
        let (Some(module), Some(version)) = (w.next(), w.next()) else {
            continue;
        };
        if version.ends_with("/go.mod") {
            continue;
        }
        let zip = cache
            .join("cache/download")
            .join(go_escape(module))
            .join("@v")
            .join(format!("{version}.zip"));
        if !zip.is_file() {
            return Some(format!(
                "{} names {module} {version}, which go's module cache ({}) lacks",
                shown(&dir.join("go.sum"), home),
                shown(&cache, home)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::knowledge::Knowledge;

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
