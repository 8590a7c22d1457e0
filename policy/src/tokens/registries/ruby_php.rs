//! rubygems and bundler (`source` of the Gemfile, `.gemrc`) and composer
//! (`repositories` of `composer.json`, `COMPOSER_HOME`).

use super::*;

/// The url of a `source "URL"` line of a Gemfile.
pub(super) fn gemfile_source(l: &str) -> Option<&str> {
    let r = l.trim().strip_prefix("source")?;
    let r = r.trim_start().strip_prefix('(').unwrap_or(r.trim_start());
    let q = r.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let r = &r[1..];
    Some(&r[..r.find(q)?])
}

pub(super) fn gem(words: &[&str], cwd: Option<&Path>, home: &Path) -> Setup {
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

pub(super) fn composer(
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
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
