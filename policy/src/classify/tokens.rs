//! Hosts a contained call could hold a token for: such hosts are `denied`, and no host
//! grant opens them (design section 6). The proxy uses [`token_hosts`] too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Context;
use super::git::{find_git_dir, read_config, url_host_port};
use crate::config::rules::RulePath;

/// The hosts for which a token file of the config (`network.token_files`, in the home or
/// in a project root) or a configured git credential helper can give a call a token.
pub fn token_hosts(ctx: &Context, roots: &[PathBuf]) -> BTreeSet<String> {
    let mut hosts = BTreeSet::new();
    for rule in &ctx.token_files {
        let files: Vec<PathBuf> = match &rule.path {
            RulePath::Abs(p) => vec![p.clone()],
            RulePath::InRoot(rel) => roots.iter().map(|r| r.join(rel)).collect(),
            RulePath::Unset => Vec::new(),
        };
        for f in files {
            hosts_of_file(&f, &mut hosts);
        }
    }
    // git credential helpers: `credential.<url>.helper` names its host; a helper for every
    // url gives tokens for the hosts of the projects' remotes
    let mut cfg = Vec::new();
    read_config(
        &ctx.config_home.join("git/config"),
        &ctx.home,
        None,
        &mut cfg,
        0,
    );
    read_config(&ctx.home.join(".gitconfig"), &ctx.home, None, &mut cfg, 0);
    let mut remote_hosts = Vec::new();
    for r in roots {
        if let Some(d) = find_git_dir(r) {
            read_config(
                &d.common.join("config"),
                &ctx.home,
                Some(&d.git_dir),
                &mut cfg,
                0,
            );
        }
    }
    for e in &cfg {
        if e.key.starts_with("remote.") && e.key.ends_with(".url") {
            if let Some((h, _, ssh)) = url_host_port(&e.value) {
                if !ssh {
                    remote_hosts.push(h);
                }
            }
        }
    }
    for e in &cfg {
        if e.value.is_empty() {
            continue;
        }
        let Some(mid) = e
            .key
            .strip_prefix("credential")
            .and_then(|r| r.strip_suffix("helper"))
        else {
            continue;
        };
        let mid = mid.trim_matches('.');
        if mid.is_empty() {
            hosts.extend(remote_hosts.iter().cloned());
        } else if let Some((h, _, _)) = super::walk::url_host(mid, true) {
            hosts.insert(h);
        }
    }
    hosts
}

fn read(p: &Path) -> Option<String> {
    let m = std::fs::metadata(p).ok()?;
    if !m.is_file() || m.len() > 4 << 20 {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

fn host_of(s: &str) -> Option<String> {
    super::walk::url_host(s.trim().trim_matches('"').trim_matches('\''), true).map(|h| h.0)
}

/// The hosts one token file names, by its kind (its file name).
pub fn hosts_of_file(path: &Path, out: &mut BTreeSet<String>) {
    let Some(text) = read(path) else { return };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.as_str() {
        ".npmrc" => {
            let mut registry = None;
            let mut global_token = false;
            for l in text.lines().map(str::trim) {
                if let Some(r) = l
                    .strip_prefix("registry=")
                    .or_else(|| l.strip_prefix("registry ="))
                {
                    registry = host_of(r);
                }
                if let Some(rest) = l.strip_prefix("//") {
                    if rest.contains(":_authToken")
                        || rest.contains(":_auth")
                        || rest.contains(":_password")
                    {
                        if let Some(h) = host_of(rest.split(':').next().unwrap_or("")) {
                            out.insert(h);
                        }
                    }
                } else if l.starts_with("_authToken")
                    || l.starts_with("_auth")
                    || l.starts_with("_password")
                {
                    global_token = true;
                }
            }
            if global_token {
                out.insert(registry.unwrap_or_else(|| "registry.npmjs.org".into()));
            }
        }
        ".yarnrc.yml" if text.contains("npmAuthToken") || text.contains("npmAuthIdent") => {
            out.insert("registry.yarnpkg.com".into());
            for l in text.lines() {
                let t = l.trim().trim_end_matches(':');
                if t.starts_with("\"http") || t.starts_with("http") || t.starts_with("'http") {
                    if let Some(h) = host_of(t) {
                        out.insert(h);
                    }
                }
            }
        }
        ".netrc" | "_netrc" => {
            let words: Vec<&str> = text.split_whitespace().collect();
            for w in words.windows(2) {
                if w[0] == "machine" {
                    out.insert(w[1].to_ascii_lowercase());
                }
            }
        }
        ".pypirc" => {
            let mut section = String::new();
            let mut repo = None;
            let mut secret = false;
            let flush = |section: &str,
                         repo: &mut Option<String>,
                         secret: &mut bool,
                         out: &mut BTreeSet<String>| {
                if *secret && section != "distutils" {
                    let h =
                        repo.take()
                            .and_then(|r| host_of(&r))
                            .unwrap_or_else(|| match section {
                                "testpypi" => "test.pypi.org".into(),
                                _ => "upload.pypi.org".into(),
                            });
                    out.insert(h);
                }
                *secret = false;
                *repo = None;
            };
            for l in text.lines().map(str::trim) {
                if l.starts_with('[') {
                    flush(&section, &mut repo, &mut secret, out);
                    section = l.trim_matches(['[', ']']).to_string();
                } else if let Some((k, v)) = l.split_once('=').or_else(|| l.split_once(':')) {
                    match k.trim() {
                        "repository" => repo = Some(v.trim().to_string()),
                        "password" => secret = !v.trim().is_empty(),
                        _ => {}
                    }
                }
            }
            flush(&section, &mut repo, &mut secret, out);
        }
        ".git-credentials" | "credentials" if text.contains("://") => {
            for l in text.lines() {
                if let Some(h) = super::walk::url_host(l.trim(), false).map(|h| h.0) {
                    out.insert(h);
                }
            }
        }
        "config.json" => {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                for key in ["auths", "credHelpers"] {
                    if let Some(m) = v.get(key).and_then(|a| a.as_object()) {
                        for k in m.keys() {
                            let h = host_of(k).unwrap_or_else(|| k.to_ascii_lowercase());
                            out.insert(if h == "index.docker.io" {
                                "registry-1.docker.io".into()
                            } else {
                                h.clone()
                            });
                            out.insert(h);
                        }
                    }
                }
            }
        }
        "hosts.yml" => {
            for l in text.lines() {
                if !l.starts_with([' ', '\t', '#', '-']) && l.trim_end().ends_with(':') {
                    out.insert(l.trim().trim_end_matches(':').to_ascii_lowercase());
                }
            }
        }
        "credentials.toml" | "credentials" => {
            if text.contains("token") {
                out.insert("crates.io".into());
                out.insert("index.crates.io".into());
                for l in text.lines() {
                    if let Some(name) = l.trim().strip_prefix("[registries.") {
                        let _ = name;
                    }
                }
            }
            if text.contains(":rubygems_api_key") || text.contains("rubygems_api_key") {
                out.insert("rubygems.org".into());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = |n: &str, t: &str| {
            let p = d.path().join(n);
            std::fs::write(&p, t).unwrap_or_else(|e| panic!("{e}"));
            let mut s = BTreeSet::new();
            hosts_of_file(&p, &mut s);
            s.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(
            w(".npmrc", "//npm.pkg.github.com/:_authToken=x\n"),
            vec!["npm.pkg.github.com"]
        );
        assert_eq!(
            w(".npmrc", "registry=https://r.example/\n_authToken=x\n"),
            vec!["r.example"]
        );
        assert_eq!(
            w(".netrc", "machine api.example.com login a password b\n"),
            vec!["api.example.com"]
        );
        assert_eq!(
            w(".git-credentials", "https://u:tok@github.com\n"),
            vec!["github.com"]
        );
        assert_eq!(
            w(
                ".pypirc",
                "[distutils]\nindex-servers=pypi\n[pypi]\nusername=__token__\npassword=pypi-x\n"
            ),
            vec!["upload.pypi.org"]
        );
        assert_eq!(
            w("hosts.yml", "github.com:\n    oauth_token: x\n"),
            vec!["github.com"]
        );
        assert!(
            w("config.json", "{\"auths\":{\"ghcr.io\":{\"auth\":\"x\"}}}")
                .contains(&"ghcr.io".to_string())
        );
    }
}
