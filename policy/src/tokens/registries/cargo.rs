//! cargo: source replacement and `[registries]` of `.cargo/config.toml`, the download host of
//! a registry's index, and whether a build would fetch (the lock file against the cache).

use super::*;

/// Cargo's config files, nearest first: the project's `.cargo/config.toml` from the
/// working directory up, then `$CARGO_HOME/config.toml`.
pub(super) fn cargo_tables(
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
pub(super) fn cargo_dl_host(ch: &Path, index_host: &str, from: &str) -> Option<Found> {
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

pub(super) fn cargo(
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
