//! The contained view the config asks for, as the path lists a launch plan takes: masks,
//! read-only paths inside writable roots (with floors when a root holds them), and extra
//! writable paths. The service turns these into an `efr-launcher` request, so what the
//! launcher does and what [`crate::explain`] says come from the same rules.
//!
//! Rules are matched as explain matches them: an anchored rule as written and with its
//! links resolved, a relative one inside each writable root (project roots and
//! `sandbox.writable`), a rule under `.git/` also inside the git dir a `.git` file points
//! to and its common dir. A pattern (`*`, `**`) is expanded against what exists at launch
//! (bounded walk); an anchored pattern inside a writable root (a floor such as
//! `~/.local/lib/python3*/site-packages/*.pth` when the home is a project) is also given to
//! the supervisor as a name pattern relative to that root, so that what is made later
//! matches too. A path that does not exist yet is listed (the launcher's supervisor refuses
//! its creation by name, and refuses removing or renaming the directories that would hold
//! it): a path of an anchored rule whether or not its parent exists, one of a relative rule
//! when its parent exists (see [`listable`]), never `commondir` and `gitdir` files (the
//! list once gave each missing path an empty placeholder, which would have broken git; the
//! name patterns `protect_names` cover them now); a trailing `/` marks a directory.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::git_config::{GitConfigItem, Reads};
use super::rules::{is_pattern, pattern_covers};
use super::{Config, Env, RulePath};
use crate::git::programs::{lexical, program_paths};
use crate::path::canonical;

/// Directories walked at most when a pattern is expanded.
const MAX_WALK: usize = 4096;
/// How deep a `**` walks.
const MAX_DEPTH: usize = 8;

/// Names that are directories when present (listed with a trailing `/`).
const DIR_NAMES: &[&str] = &[
    "bin",
    "hooks",
    ".vscode",
    ".idea",
    ".efr",
    "conf.d",
    "environment.d",
    "autostart",
    "user",
    "efr",
];

/// How deep below a writable root other git repositories are looked for (a root such as
/// `~/work` that holds `org/repo/.git`). Their hooks and config are protected as the root's.
pub const NESTED_REPO_DEPTH: usize = 3;

/// Whether a rule protects what git runs: the `.git/` rules and `.gitmodules`. These hold
/// in every repository below a writable root, not only at the root.
pub(crate) fn is_git_rule(value: &str) -> bool {
    value.starts_with(".git/") || value == ".gitmodules"
}

/// Whether `dir` is at most `depth` levels below `root`, and not inside a `.git` dir or a
/// directory named in `skip`.
fn repo_place(root: &Path, dir: &Path, depth: usize, skip: &[String]) -> bool {
    let Ok(rel) = dir.strip_prefix(root) else {
        return false;
    };
    let parts: Vec<&OsStr> = rel.iter().collect();
    !parts.is_empty()
        && parts.len() <= depth
        && parts
            .iter()
            .all(|p| *p != OsStr::new(".git") && !skip.iter().any(|n| OsStr::new(n) == *p))
}

/// The git repositories below `root` (not the root itself): directories holding a `.git`
/// (a dir, or a file naming the git dir), found by a walk of at most [`MAX_WALK`]
/// directories that follows no link.
pub(crate) fn nested_repos(root: &Path, skip: &[String]) -> Vec<PathBuf> {
    repositories_below(root, NESTED_REPO_DEPTH, skip)
}

/// The git repositories at `root` and up to `depth` levels below it (directories holding a
/// `.git`), by a walk of at most `MAX_WALK` directories that follows no link and skips
/// `.git` dirs and the directories named in `skip`. Reads only.
pub fn repositories(root: &Path, depth: usize, skip: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if std::fs::symlink_metadata(root.join(".git")).is_ok() {
        out.push(root.to_path_buf());
    }
    out.extend(repositories_below(root, depth, skip));
    out
}

fn repositories_below(root: &Path, depth: usize, skip: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([root.to_path_buf()]);
    let mut seen = 0;
    while let Some(dir) = queue.pop_front() {
        seen += 1;
        if seen > MAX_WALK {
            break;
        }
        // A directory whose link count is 2 has no subdirectory (the file systems that keep
        // the count: ext4, xfs, tmpfs; btrfs says 1 and is read): nothing to list.
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.nlink() == 2) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if !t.is_dir() {
                continue;
            }
            let p = e.path();
            if !repo_place(root, &p, depth, skip) {
                continue;
            }
            if std::fs::symlink_metadata(p.join(".git")).is_ok() {
                out.push(p.clone());
            }
            // A directory at the last level is checked for its own `.git` but not listed:
            // its children would all be too deep (and a big one costs a long read).
            let level = p
                .strip_prefix(root)
                .map(|r| r.iter().count())
                .unwrap_or(depth);
            if level < depth {
                queue.push_back(p);
            }
        }
    }
    out.sort();
    out
}

/// Names left out of the list when missing (see the module doc).
const NO_PLACEHOLDER: &[&str] = &["commondir", "gitdir"];

/// The path lists of a launch plan, from the config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchView {
    /// Absolute paths to mask (present but empty).
    pub masks: Vec<String>,
    /// Absolute paths kept read-only inside writable roots (`/`-terminated: a directory
    /// when present).
    pub read_only_inside: Vec<String>,
    /// Extra writable paths (`sandbox.writable`), absolute.
    pub writable: Vec<String>,
    /// The relative entries of `sandbox.read_only_inside` as name patterns: the launcher's
    /// supervisor keeps them read-only relative to every writable root and every repository
    /// below one, existing at launch or not.
    pub protect_names: Vec<String>,
    /// The repositories the view found (the roots that are one, and those below a writable
    /// root), for what the service keeps of them at launch (their index).
    pub repositories: Vec<ViewRepo>,
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The existing paths below `root` that `pattern` (relative) matches exactly.
fn expand_pattern(root: &Path, pattern: &Path) -> Vec<PathBuf> {
    // Walk from the literal prefix of the pattern.
    let mut base = root.to_path_buf();
    let mut rest = Vec::new();
    let mut literal = true;
    for c in pattern.components() {
        let c = c.as_os_str();
        if literal && !c.as_bytes().contains(&b'*') {
            base.push(c);
        } else {
            literal = false;
            rest.push(c);
        }
    }
    // Without `**`, a match is exactly as deep as the pattern: the walk goes no deeper (a
    // one-component pattern such as `lefthook.*` lists the root alone, where it walked the
    // whole tree, `node_modules` and all, once per such pattern and call).
    let levels = if rest.iter().any(|c| c.as_bytes() == b"**") {
        MAX_DEPTH + 1
    } else {
        rest.len()
    };
    let mut out = Vec::new();
    let mut stack = vec![(base, 0usize)];
    let mut walked = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        walked += 1;
        if walked > MAX_WALK || depth > MAX_DEPTH {
            break;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(rel) = p.strip_prefix(root) else {
                continue;
            };
            if pattern_covers(pattern, rel) {
                out.push(p);
            } else if depth + 1 < levels && e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push((p, depth + 1));
            }
        }
    }
    out.sort();
    out
}

/// Whether `p` may be listed: it exists, or it is not in [`NO_PLACEHOLDER`] and, for a
/// path of a relative rule, its parent exists. A path of an anchored rule (a floor such as
/// `~/.config/systemd` when the home is a project) is listed whether or not its parent
/// exists: the supervisor refuses the creation of any path below a listed one. A relative
/// rule's missing paths need no listing (the name patterns cover them), and listing them
/// would tell the git guard that the view protected a repository the call makes
/// (`.git/config` of a `git init`), which the supervisor lets git write.
fn listable(p: &Path, anchored: bool) -> bool {
    if crate::path::lexists(p) {
        return true;
    }
    let name = p.file_name().unwrap_or(OsStr::new(""));
    if NO_PLACEHOLDER.iter().any(|n| OsStr::new(n) == name) {
        return false;
    }
    anchored || p.parent().is_some_and(crate::path::is_dir)
}

fn listed(p: &Path) -> String {
    let missing = !crate::path::lexists(p);
    let name = p.file_name().unwrap_or(OsStr::new(""));
    if missing && DIR_NAMES.iter().any(|n| OsStr::new(n) == name) {
        format!("{}/", s(p))
    } else {
        s(p)
    }
}

/// The rule `value` inside `root`: the paths to protect. An anchored pattern inside
/// `root` also adds its part below `root` to `names` (the supervisor's name patterns).
fn in_root(value: &str, root: &Path, env: &Env, names: &mut Vec<String>) -> Vec<PathBuf> {
    match RulePath::expand(value, env) {
        RulePath::Unset => Vec::new(),
        RulePath::Abs(p) => {
            let mut v = Vec::new();
            for q in [p.clone(), canonical(&p)] {
                if !q.starts_with(root) || q == root {
                    continue;
                }
                if is_pattern(&q) {
                    let Ok(rel) = q.strip_prefix(root) else {
                        continue;
                    };
                    let n = rel.to_string_lossy().trim_end_matches('/').to_string();
                    if !names.contains(&n) {
                        names.push(n);
                    }
                    for m in expand_pattern(root, rel) {
                        if !v.contains(&m) {
                            v.push(m);
                        }
                    }
                } else if !v.contains(&q) {
                    v.push(q);
                }
            }
            v
        }
        RulePath::InRoot(rel) => {
            if is_pattern(&rel) {
                expand_pattern(root, &rel)
            } else {
                vec![root.join(rel)]
            }
        }
    }
}

/// The git dirs of the repository at `root` besides `root/.git`, by the built-in reader
/// (git's rules, `crate::git::lookup_git_dir`): the git dir a `.git` file or
/// link names and the common dir a `commondir` names. Where that reader cannot tell them
/// as git would, every existing dir the files could name (read git's way or trimmed).
fn linked_git_dirs(root: &Path) -> Vec<PathBuf> {
    use crate::git::{GitLookup, lookup_git_dir};
    if std::fs::symlink_metadata(root.join(".git")).is_err() {
        return Vec::new();
    }
    let own = canonical(&root.join(".git"));
    let mut out: Vec<PathBuf> = Vec::new();
    let found = match lookup_git_dir(root) {
        GitLookup::Found(d) => vec![canonical(&d.git_dir), canonical(&d.common)],
        GitLookup::Unknown { candidates, .. } => candidates.iter().map(|c| canonical(c)).collect(),
        GitLookup::NotFound => Vec::new(),
    };
    for d in found {
        if d != own && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The git dirs of a repository as git itself finds them (`git rev-parse`), for
/// [`Config::launch_view_with`]. This crate runs no command: the service asks git and
/// hands the answer in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoGitDirs {
    /// `--absolute-git-dir`.
    pub git_dir: PathBuf,
    /// `--git-common-dir` (what a `commondir` names, git's way: blanks kept, links
    /// followed before `..`, bytes as they are).
    pub common: PathBuf,
    /// `--git-path hooks`: the hooks dir git uses (`core.hooksPath` included).
    pub hooks: PathBuf,
    /// Every key git reads for the repository from its own files, with the file it comes
    /// from (`git config --list --show-origin -z`: includes whose file exists and whose
    /// condition holds followed by git); None when git did not say (the built-in reader
    /// then reads the config files).
    pub config: Option<Vec<GitConfigItem>>,
}

/// A repository the view found: a project root holding `.git`, or one up to three levels
/// below a writable root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewRepo {
    /// The top of its work tree (the directory holding `.git`).
    pub top: PathBuf,
    /// Its own git dir (where its index is); None when neither git nor the built-in reader
    /// could say.
    pub git_dir: Option<PathBuf>,
}

/// The git dirs of the repository at `r` to protect besides `r/.git`: from git's answer
/// when there is one (the git dir when it is not `r/.git`, the common dir when it is not
/// the git dir), else as [`linked_git_dirs`] reads them.
fn repo_git_dirs(r: &Path, git: Option<&RepoGitDirs>) -> Vec<PathBuf> {
    let Some(g) = git else {
        return linked_git_dirs(r);
    };
    let own = canonical(&r.join(".git"));
    let gd = canonical(&g.git_dir);
    let common = canonical(&g.common);
    let mut out = Vec::new();
    if gd != own {
        out.push(gd.clone());
    }
    if common != gd && common != own {
        out.push(common);
    }
    out
}

/// The git dir and common dir of the repository at `r` by the built-in reader (`.git`
/// itself when it is a directory without `commondir`, the common case); None when that
/// reader cannot tell them as git would.
fn builtin_dirs(r: &Path) -> Option<(PathBuf, PathBuf)> {
    use crate::git::{GitLookup, lookup_git_dir};
    let dotgit = r.join(".git");
    if std::fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir())
        && std::fs::symlink_metadata(dotgit.join("commondir")).is_err()
    {
        return Some((dotgit.clone(), dotgit));
    }
    match lookup_git_dir(r) {
        GitLookup::Found(d) => Some((d.git_dir, d.common)),
        GitLookup::Unknown { .. } | GitLookup::NotFound => None,
    }
}

/// The git dir of the repository at `r` and the keys of its config: git's list when git
/// gave one, else the built-in reader's over its config files (includes followed whatever
/// their condition).
fn repo_config(r: &Path, git: Option<&RepoGitDirs>, home: &Path) -> (Option<PathBuf>, Reads) {
    let dirs = match git {
        Some(g) => Some((g.git_dir.clone(), g.common.clone())),
        None => builtin_dirs(r),
    };
    if let Some(list) = git.and_then(|g| g.config.as_ref()) {
        return (dirs.map(|d| d.0), Reads::from_git(list, home));
    }
    let mut reads = Reads::default();
    if let Some((gd, common)) = &dirs {
        for f in [
            common.join("config"),
            gd.join("config"),
            gd.join("config.worktree"),
        ] {
            reads.read(&f, home, 0);
        }
    }
    (dirs.map(|d| d.0), reads)
}

/// The user's own config files that git reads in every repository: `/etc/gitconfig`,
/// `$XDG_CONFIG_HOME/git/config` (or `~/.config/git/config`) and `~/.gitconfig`, with the
/// files they include.
fn global_config(env: &Env) -> Reads {
    let mut reads = Reads::default();
    for f in [
        PathBuf::from("/etc/gitconfig"),
        env.config_dir().join("git/config"),
        env.home.join(".gitconfig"),
    ] {
        reads.read(&f, &env.home, 0);
    }
    reads
}

/// What git reads or runs from config that lies inside a writable root (as written and
/// with its links resolved): the files the config of each repository found (`configs`, by
/// work tree) and the global config include, existing or not, and the programs their
/// keys name ([`crate::git::programs::PROGRAM_KEYS`]); a relative program of the global
/// config in each repository and root.
fn git_config_code(env: &Env, roots: &[PathBuf], configs: &[(PathBuf, Reads)]) -> Vec<PathBuf> {
    let global = global_config(env);
    let mut found: Vec<PathBuf> = global.includes.clone();
    let mut tops: Vec<&Path> = roots.iter().map(PathBuf::as_path).collect();
    for (top, reads) in configs {
        found.extend(reads.includes.iter().cloned());
        for i in &reads.items {
            found.extend(program_paths(&i.key, &i.value, top, &env.home));
        }
        if !tops.contains(&top.as_path()) {
            tops.push(top);
        }
    }
    for i in &global.items {
        for top in &tops {
            found.extend(program_paths(&i.key, &i.value, top, &env.home));
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for p in found {
        for q in [lexical(&p), canonical(&p)] {
            let inside = roots.iter().any(|w| q.starts_with(w) && q != *w);
            if inside && !out.contains(&q) {
                out.push(q);
            }
        }
    }
    out
}

impl Config {
    /// The path lists of a contained call with these project roots (see the module doc),
    /// the git dirs of repositories read by the built-in reader.
    pub fn launch_view(&self, env: &Env, projects: &[PathBuf]) -> LaunchView {
        self.launch_view_with(env, projects, &|_| None)
    }

    /// [`Config::launch_view`], with `git` saying where the git dirs of a repository (a
    /// directory holding `.git`) are as git finds them; where it says None, the built-in
    /// reader decides. With git's answer, the common dir a `commondir` names gets the
    /// `.git/` rules too, and the hooks dir `core.hooksPath` names is kept read-only when
    /// it is inside a writable root (husky's `.husky/_`).
    pub fn launch_view_with(
        &self,
        env: &Env,
        projects: &[PathBuf],
        git: &dyn Fn(&Path) -> Option<RepoGitDirs>,
    ) -> LaunchView {
        // One view resolves each rule for each root: the same few directories every time.
        crate::path::memoized(|| self.view_of(env, projects, git))
    }

    fn view_of(
        &self,
        env: &Env,
        projects: &[PathBuf],
        git: &dyn Fn(&Path) -> Option<RepoGitDirs>,
    ) -> LaunchView {
        let mut v = LaunchView::default();
        for e in &self.sandbox.read_only_inside {
            if let RulePath::InRoot(rel) = RulePath::expand(&e.value, env) {
                let n = rel.to_string_lossy().trim_end_matches('/').to_string();
                if !n.is_empty() && !v.protect_names.contains(&n) {
                    v.protect_names.push(n);
                }
            }
        }
        let projects: Vec<PathBuf> = projects.iter().map(|p| canonical(p)).collect();
        for e in &self.sandbox.writable {
            if let Some(p) = env.expand(&e.value) {
                v.writable.push(s(&p));
            }
        }
        // Masks: anchored ones as written and resolved, relative ones in each project.
        let push_mask = |p: PathBuf, v: &mut LaunchView| {
            let c = canonical(&p);
            for q in [p, c] {
                let q = s(&q);
                if !v.masks.contains(&q) {
                    v.masks.push(q);
                }
            }
        };
        for e in &self.sandbox.masks {
            match RulePath::expand(&e.value, env) {
                RulePath::Unset => {}
                RulePath::Abs(p) => {
                    if is_pattern(&p) {
                        let rel = p.strip_prefix("/").unwrap_or(&p).to_path_buf();
                        for q in expand_pattern(Path::new("/"), &rel) {
                            push_mask(q, &mut v);
                        }
                    } else {
                        push_mask(p, &mut v);
                    }
                }
                RulePath::InRoot(rel) => {
                    for r in &projects {
                        let found = if is_pattern(&rel) {
                            expand_pattern(r, &rel)
                        } else {
                            vec![r.join(&rel)]
                        };
                        for q in found {
                            push_mask(q, &mut v);
                        }
                    }
                }
            }
        }
        // Read-only inside each writable root: read_only_inside, then floors.
        let mut roots = projects.clone();
        roots.extend(v.writable.iter().map(|w| canonical(Path::new(w))));
        let mut ro: Vec<PathBuf> = Vec::new();
        // The paths of anchored rules (listed whether or not their parent exists).
        let mut anchored: Vec<PathBuf> = Vec::new();
        let rules = self
            .sandbox
            .read_only_inside
            .iter()
            .chain(self.floors.paths.iter());
        for e in rules {
            for r in &roots {
                let found = in_root(&e.value, r, env, &mut v.protect_names);
                if matches!(RulePath::expand(&e.value, env), RulePath::Abs(_)) {
                    anchored.extend(found.iter().cloned());
                }
                ro.extend(found);
            }
        }
        // Repositories below a writable root: their hooks and config are as dangerous as
        // the root's (a root such as ~/work holds many repositories).
        let skip = self.build_output_names();
        let mut repos: Vec<PathBuf> = Vec::new();
        for r in &roots {
            for n in nested_repos(r, &skip) {
                for e in self
                    .sandbox
                    .read_only_inside
                    .iter()
                    .filter(|e| is_git_rule(&e.value))
                {
                    ro.extend(in_root(&e.value, &n, env, &mut v.protect_names));
                }
                repos.push(n);
            }
        }
        // The `.git` file of a worktree or submodule, and the `.git/` rules in its git dirs.
        let mut configs: Vec<(PathBuf, Reads)> = Vec::new();
        for r in roots.iter().chain(&repos) {
            let is_repo = std::fs::symlink_metadata(r.join(".git")).is_ok();
            let found = if is_repo { git(r) } else { None };
            if is_repo && !v.repositories.iter().any(|x| x.top == *r) {
                let (git_dir, reads) = repo_config(r, found.as_ref(), &env.home);
                v.repositories.push(ViewRepo {
                    top: r.clone(),
                    git_dir,
                });
                configs.push((r.clone(), reads));
            }
            if let Some(g) = &found {
                // A hooks dir of `core.hooksPath` inside a writable root.
                let hooks = canonical(&g.hooks);
                let default = canonical(&g.common.join("hooks"));
                if hooks != default && roots.iter().any(|w| hooks.starts_with(w) && hooks != *w) {
                    ro.push(hooks);
                }
            }
            let dirs = repo_git_dirs(r, found.as_ref());
            // A `.git` file or link: read-only when it names a dir of its own, or when
            // git did not say (the built-in reader may not know what it names).
            let is_file = std::fs::symlink_metadata(r.join(".git")).is_ok_and(|m| !m.is_dir());
            if is_file && (found.is_none() || !dirs.is_empty()) {
                ro.push(r.join(".git"));
            }
            if dirs.is_empty() {
                continue;
            }
            for d in dirs {
                for e in &self.sandbox.read_only_inside {
                    if let Some(rel) = e.value.strip_prefix(".git/") {
                        let rel = Path::new(rel);
                        if is_pattern(rel) {
                            ro.extend(expand_pattern(&d, rel));
                        } else {
                            ro.push(d.join(rel));
                        }
                    }
                }
            }
        }
        for p in git_config_code(env, &roots, &configs) {
            anchored.push(p.clone());
            ro.push(p);
        }
        for p in ro {
            if !listable(&p, anchored.contains(&p)) {
                continue;
            }
            let l = listed(&p);
            if !v.read_only_inside.contains(&l) {
                v.read_only_inside.push(l);
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern without `**` matches at its own depth only, and the walk stops there; one
    /// with `**` still finds matches at any depth.
    #[test]
    fn patterns_match_at_their_depth() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for f in [
            "lefthook.yml",
            "sub/lefthook.yml",
            "sub/deep/lefthook.yml",
            "a/x/mise.dev.toml",
            "a/mise.dev.toml",
            "m/one/two/three/hooks/h",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(root).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            rel(expand_pattern(root, Path::new("lefthook.*"))),
            ["lefthook.yml"]
        );
        assert_eq!(
            rel(expand_pattern(root, Path::new("a/*/mise.*.toml"))),
            ["a/x/mise.dev.toml"]
        );
        assert_eq!(
            rel(expand_pattern(root, Path::new("*/mise.*.toml"))),
            ["a/mise.dev.toml"]
        );
        assert_eq!(
            rel(expand_pattern(root, Path::new("m/**/hooks"))),
            ["m/one/two/three/hooks"]
        );
    }

    #[test]
    fn view_of_a_project_from_the_defaults() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let proj = home.join("p");
        std::fs::create_dir_all(proj.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(proj.join(".git/modules/sub/hooks")).unwrap();
        std::fs::write(proj.join(".git/config"), "").unwrap();
        let mut env = Env::new(&home);
        env.runtime_dir = Some(d.path().join("run"));
        let v = Config::defaults().launch_view(&env, std::slice::from_ref(&proj));
        let p = |r: &str| s(&proj.join(r));
        assert!(v.read_only_inside.contains(&p(".git/hooks")));
        assert!(v.read_only_inside.contains(&p(".git/config")));
        assert!(v.read_only_inside.contains(&p(".git/modules/sub/hooks")));
        assert!(v.read_only_inside.contains(&format!("{}/", p(".vscode"))));
        assert!(v.read_only_inside.contains(&p(".envrc")));
        // A missing commondir is not listed (the name patterns cover it).
        assert!(!v.read_only_inside.contains(&p(".git/commondir")));
        assert!(v.masks.contains(&s(&home.join(".ssh"))));
        assert!(v.masks.contains(&s(&d.path().join("run"))));
        // The home is not a root: no floors.
        assert!(!v.read_only_inside.iter().any(|r| r.ends_with(".bashrc")));
        let v = Config::defaults().launch_view(&env, std::slice::from_ref(&home));
        assert!(v.read_only_inside.contains(&s(&home.join(".bashrc"))));
        assert!(v.read_only_inside.contains(&s(&home.join(".gitconfig"))));
    }

    #[test]
    fn floors_under_the_home_whether_or_not_their_parent_exists() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        std::fs::create_dir_all(home.join(".local/lib/python3.11/site-packages")).unwrap();
        std::fs::write(home.join(".local/lib/python3.11/site-packages/a.pth"), "").unwrap();
        let mut env = Env::new(&home);
        env.runtime_dir = Some(d.path().join("run"));
        let v = Config::defaults().launch_view(&env, std::slice::from_ref(&home));
        let h = |r: &str| s(&home.join(r));
        // No ~/.config, no ~/.ssh: listed all the same (the supervisor refuses by name).
        for p in [
            h(".config/systemd"),
            h(".config/autostart/"),
            h(".config/git/config"),
            h(".ssh/authorized_keys"),
            h(".bash_aliases"),
            h(".local/bin/"),
        ] {
            assert!(v.read_only_inside.contains(&p), "{p}: {v:?}");
        }
        // The python floors: what exists, and the patterns for what comes later.
        assert!(
            v.read_only_inside
                .contains(&h(".local/lib/python3.11/site-packages/a.pth"))
        );
        for n in [
            ".local/lib/python3*/site-packages/*.pth",
            ".local/lib/python3*/site-packages/usercustomize.py",
            ".local/lib/python3*/site-packages/sitecustomize.py",
        ] {
            assert!(v.protect_names.iter().any(|p| p == n), "{n}: {v:?}");
        }
        // A mask: listed as a mask, not here (the launcher protects masks in roots).
        assert!(v.masks.contains(&h(".aws")));
        // A project that is not the home gets no home floors.
        let proj = home.join("p");
        std::fs::create_dir_all(&proj).unwrap();
        let v = Config::defaults().launch_view(&env, std::slice::from_ref(&proj));
        assert!(
            !v.read_only_inside
                .iter()
                .any(|p| p.contains(".bash_aliases"))
        );
        assert!(!v.protect_names.iter().any(|p| p.contains("site-packages")));
    }

    #[test]
    fn git_s_answer_adds_the_hooks_path_and_the_common_dir() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let proj = home.join("p");
        std::fs::create_dir_all(proj.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(proj.join(".husky/_")).unwrap();
        std::fs::create_dir_all(proj.join("  c/hooks")).unwrap();
        std::fs::write(proj.join("  c/config"), "").unwrap();
        let mut env = Env::new(&home);
        env.runtime_dir = Some(d.path().join("run"));
        let p = |r: &str| s(&proj.join(r));
        let answer = RepoGitDirs {
            git_dir: proj.join(".git"),
            common: proj.join("  c"),
            hooks: proj.join(".husky/_"),
            config: None,
        };
        let v = Config::defaults().launch_view_with(&env, std::slice::from_ref(&proj), &|r| {
            (r == proj).then(|| answer.clone())
        });
        assert!(v.read_only_inside.contains(&p(".husky/_")), "{v:?}");
        assert!(v.read_only_inside.contains(&p("  c/hooks")), "{v:?}");
        assert!(v.read_only_inside.contains(&p("  c/config")), "{v:?}");
        // A main repository's `.git` dir itself stays writable.
        assert!(!v.read_only_inside.contains(&p(".git")), "{v:?}");
        // Without git's answer neither is known.
        let v = Config::defaults().launch_view(&env, std::slice::from_ref(&proj));
        assert!(!v.read_only_inside.contains(&p(".husky/_")));
        assert!(!v.read_only_inside.contains(&p("  c/hooks")));
        // A hooks path outside the writable roots is not listed.
        let outside = RepoGitDirs {
            hooks: home.join("hooks"),
            ..answer.clone()
        };
        let v = Config::defaults().launch_view_with(&env, std::slice::from_ref(&proj), &|_| {
            Some(outside.clone())
        });
        assert!(!v.read_only_inside.contains(&s(&home.join("hooks"))));
    }

    /// The files a repository's config includes (existing or not, whatever the condition),
    /// the programs its keys name, and the global config's includes and programs are kept
    /// read-only when inside a writable root; nothing outside one is listed.
    #[test]
    fn git_config_includes_and_programs_are_protected() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let proj = home.join("p");
        std::fs::create_dir_all(proj.join(".git")).unwrap();
        std::fs::create_dir_all(proj.join("scripts")).unwrap();
        std::fs::write(
            proj.join(".git/config"),
            "[core]\n\tfsmonitor = ./scripts/fsmon.sh\n[include]\n\tpath = ../.gitconfig-shared\n\
             [includeIf \"gitdir:/elsewhere/\"]\n\tpath = ../conf/when.inc\n[include]\n\tpath = /etc/outside.inc\n",
        )
        .unwrap();
        std::fs::write(
            proj.join(".gitconfig-shared"),
            "[alias]\n\tx = !tools/x.sh\n",
        )
        .unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[include]\n\tpath = p/.global-inc\n[core]\n\tpager = bin/pg\n",
        )
        .unwrap();
        let mut env = Env::new(&home);
        env.runtime_dir = Some(d.path().join("run"));
        let v = Config::defaults().launch_view(&env, std::slice::from_ref(&proj));
        let p = |r: &str| s(&proj.join(r));
        for want in [
            p(".gitconfig-shared"),
            p("conf/when.inc"),
            p("scripts/fsmon.sh"),
            p("tools/x.sh"),
            p(".global-inc"),
            p("bin/pg"),
        ] {
            assert!(v.read_only_inside.contains(&want), "{want}: {v:?}");
        }
        assert!(!v.read_only_inside.iter().any(|r| r.contains("outside.inc")));
        assert_eq!(
            v.repositories,
            [ViewRepo {
                top: proj.clone(),
                git_dir: Some(proj.join(".git"))
            }]
        );
        // Git's own list wins where it is given: its keys, and the includes it names.
        let answer = RepoGitDirs {
            git_dir: proj.join(".git"),
            common: proj.join(".git"),
            hooks: proj.join(".git/hooks"),
            config: Some(vec![GitConfigItem {
                file: proj.join(".git/config"),
                key: "includeif.onbranch:x.path".into(),
                value: b"../by-git.inc".to_vec(),
            }]),
        };
        let v = Config::defaults()
            .launch_view_with(&env, std::slice::from_ref(&proj), &|_| Some(answer.clone()));
        assert!(v.read_only_inside.contains(&p("by-git.inc")), "{v:?}");
        assert!(
            !v.read_only_inside.contains(&p("scripts/fsmon.sh")),
            "{v:?}"
        );
    }
}
