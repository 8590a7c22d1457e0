//! The classifier's view of git: the config entries git reads for a repository, the URLs
//! its remotes and submodules are fetched from, and the `git_code` a git line would run
//! outside the sandbox (design section 6). The files are read by [`crate::git`].

use std::path::{Path, PathBuf};

use efr_sandbox_wire::{GitCode, GitCodeItem};

use super::paths::classify_path;
use crate::context::Context;
use crate::git::{ConfigEntry, GitDirs, find_git_dir, read_config, runs_program};
use crate::path::normalize;
use crate::url::url_host_port;

/// The config entries git reads for this repository: the global files, then the repo's.
pub fn repo_config(ctx: &Context, dirs: Option<&GitDirs>) -> Vec<ConfigEntry> {
    let mut out = Vec::new();
    let gd = dirs.map(|d| d.git_dir.as_path());
    read_config(
        &ctx.config_home.join("git/config"),
        &ctx.home,
        gd,
        &mut out,
        0,
    );
    read_config(&ctx.home.join(".gitconfig"), &ctx.home, gd, &mut out, 0);
    if let Some(d) = dirs {
        read_config(&d.common.join("config"), &ctx.home, gd, &mut out, 0);
        read_config(
            &d.git_dir.join("config.worktree"),
            &ctx.home,
            gd,
            &mut out,
            0,
        );
    }
    out
}

/// The URLs (url and pushurl) of a remote of the repository `repo` is in, as git would
/// dial them: each rewritten by the `url.<base>.insteadOf` (and, for a push,
/// `pushInsteadOf`) rules of the configs.
pub fn remote_urls(ctx: &Context, repo: &Path, remote: &str) -> Vec<String> {
    let dirs = find_git_dir(repo);
    let cfg = repo_config(ctx, dirs.as_ref());
    let url_key = format!("remote.{remote}.url");
    let push_key = format!("remote.{remote}.pushurl");
    let mut out: Vec<String> = Vec::new();
    for e in cfg.iter().filter(|e| e.key == url_key || e.key == push_key) {
        for push in [false, true] {
            let u = rewrite_url(&cfg, &e.value, push);
            if !out.contains(&u) {
                out.push(u);
            }
        }
    }
    out
}

/// `url` as git dials it: the longest `url.<base>.insteadOf` prefix (or, for a push,
/// `pushInsteadOf`, which wins over insteadOf) replaced by its base.
pub fn rewrite_url(cfg: &[ConfigEntry], url: &str, push: bool) -> String {
    let best = |suffix: &str| -> Option<(usize, String)> {
        cfg.iter()
            .filter_map(|e| {
                let rest = e.key.strip_prefix("url.")?;
                let base = rest.strip_suffix(suffix)?;
                (!e.value.is_empty() && url.starts_with(&e.value))
                    .then(|| (e.value.len(), format!("{base}{}", &url[e.value.len()..])))
            })
            .max_by_key(|(n, _)| *n)
    };
    if push {
        if let Some((_, u)) = best(".pushinsteadof") {
            return u;
        }
    }
    best(".insteadof")
        .map(|(_, u)| u)
        .unwrap_or_else(|| url.to_string())
}

/// The URLs the submodules of the repository `repo` is in are fetched from: the
/// `submodule.<name>.url` of its `.gitmodules`, overridden by its git config, relative
/// ones (`../lib.git`) taken against the `origin` remote, each rewritten by insteadOf.
pub fn submodule_urls(ctx: &Context, repo: &Path) -> Vec<String> {
    let Some(dirs) = find_git_dir(repo) else {
        return Vec::new();
    };
    let mut modules = Vec::new();
    read_config(
        &dirs.worktree.join(".gitmodules"),
        &ctx.home,
        None,
        &mut modules,
        0,
    );
    let cfg = repo_config(ctx, Some(&dirs));
    let origin = cfg
        .iter()
        .find(|e| e.key == "remote.origin.url")
        .map(|e| e.value.clone());
    let mut out: Vec<String> = Vec::new();
    for m in modules
        .iter()
        .filter(|e| e.key.starts_with("submodule.") && e.key.ends_with(".url"))
    {
        // The repo's own config (after `git submodule init`) overrides .gitmodules.
        let url = cfg
            .iter()
            .rev()
            .find(|e| e.key == m.key)
            .map(|e| e.value.clone())
            .unwrap_or_else(|| m.value.clone());
        let url = if url.starts_with("../") || url.starts_with("./") {
            match &origin {
                Some(o) => relative_url(o, &url),
                None => continue,
            }
        } else {
            url
        };
        let url = rewrite_url(&cfg, &url, false);
        if !out.contains(&url) {
            out.push(url);
        }
    }
    out
}

/// A relative submodule URL taken against its superproject's remote URL.
fn relative_url(base: &str, rel: &str) -> String {
    let mut base = base.trim_end_matches('/').to_string();
    let mut rel = rel;
    loop {
        if let Some(r) = rel.strip_prefix("./") {
            rel = r;
        } else if let Some(r) = rel.strip_prefix("../") {
            rel = r;
            match base.rfind(['/', ':']) {
                Some(i) => base.truncate(i),
                None => base.clear(),
            }
        } else {
            break;
        }
    }
    let sep = if base.ends_with(':') { "" } else { "/" };
    format!("{base}{sep}{rel}")
}

/// The host is the host of a remote of a project root's git config.
pub fn is_project_remote(ctx: &Context, roots: &[PathBuf], host: &str) -> bool {
    roots.iter().any(|r| {
        let dirs = find_git_dir(r);
        let Some(d) = dirs.as_ref() else { return false };
        let mut cfg = Vec::new();
        read_config(
            &d.common.join("config"),
            &ctx.home,
            Some(&d.git_dir),
            &mut cfg,
            0,
        );
        cfg.iter()
            .filter(|e| {
                e.key.starts_with("remote.")
                    && (e.key.ends_with(".url") || e.key.ends_with(".pushurl"))
            })
            .filter_map(|e| url_host_port(&e.value))
            .any(|(h, _, _)| h.eq_ignore_ascii_case(host))
    })
}
/// The git code a git line in `repo` would run outside: hooks and program-running config
/// keys, keeping only those a contained call could write.
pub fn git_code(ctx: &Context, roots: &[PathBuf], repo: &Path) -> GitCode {
    let Some(dirs) = find_git_dir(repo) else {
        return GitCode {
            checked: false,
            items: Vec::new(),
        };
    };
    let cfg = repo_config(ctx, Some(&dirs));
    let writable = |p: &Path| -> bool {
        let p = normalize(p);
        let mut ok = classify_path(ctx, roots, &[], &p).writable;
        if let Ok(t) = std::fs::canonicalize(&p) {
            if t != p {
                ok |= classify_path(ctx, roots, &[], &t).writable;
            }
        }
        ok
    };
    let repo_s = dirs.worktree.to_string_lossy().into_owned();
    let mut items = Vec::new();
    let mut add = |item: String, file: &Path, w: bool| {
        let file_s = file.to_string_lossy().into_owned();
        if w && !items
            .iter()
            .any(|i: &GitCodeItem| i.item == item && i.file == file_s)
        {
            items.push(GitCodeItem {
                repo: repo_s.clone(),
                item,
                file: file_s,
                writable: true,
            });
        }
    };
    let mut hooks_dir = dirs.common.join("hooks");
    for e in &cfg {
        if !runs_program(&e.key, &e.value) {
            continue;
        }
        let item = e.key.clone();
        if e.key == "core.hookspath" {
            let p = crate::path::expand_home(&e.value, &ctx.home);
            hooks_dir = if p.is_absolute() {
                p
            } else {
                dirs.worktree.join(p)
            };
        }
        add(item.clone(), &e.file, writable(&e.file));
        // a value that names a script file: that file is code too
        let first = e
            .value
            .trim_start_matches('!')
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        if first.contains('/') && e.key != "core.hookspath" {
            let p = crate::path::expand_home(&first, &ctx.home);
            let p = if p.is_absolute() {
                p
            } else {
                dirs.worktree.join(p)
            };
            add(item, &p, writable(&p));
        }
    }
    // the hooks dir: each hook, and the dir itself (a contained call could add one)
    let hooks_dir = normalize(&hooks_dir);
    if writable(&hooks_dir.join("pre-push")) {
        add("hooks/".into(), &hooks_dir, true);
    }
    if let Ok(rd) = std::fs::read_dir(&hooks_dir) {
        for ent in rd.flatten().take(256) {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.ends_with(".sample") {
                continue;
            }
            let p = ent.path();
            add(format!("hooks/{name}"), &p, writable(&p));
        }
    }
    GitCode {
        checked: true,
        items,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            url_host_port("git@github.com:a/b.git"),
            Some(("github.com".into(), None, true))
        );
        assert_eq!(
            url_host_port("https://tok:x@gitlab.com/a"),
            Some(("gitlab.com".into(), None, false))
        );
        assert_eq!(
            url_host_port("ssh://git@h.example:2222/r"),
            Some(("h.example".into(), Some(2222), true))
        );
        assert_eq!(url_host_port("../other"), None);
        assert_eq!(url_host_port("/srv/repo.git"), None);
    }
}
