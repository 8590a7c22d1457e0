//! Which paths a contained call may not create, write, rename, link, remove or chmod: the
//! protected paths inside its writable roots, decided by name when the call acts (not by
//! the inode that was there at launch, which the host may replace at any time).
//!
//! A path is protected when it is, or is below, one of the plan's absolute protected paths
//! (`read_only_inside`), or when, taken relative to a writable root or to any directory
//! between that root and the path that holds a `.git` (a nested repository), one of its
//! prefixes matches a protected name pattern (`protect_names`: `.git/hooks`, `.envrc`,
//! `.git/modules/**/config`, ...). `NAME.lock` is protected with `NAME` (git writes its
//! files by lock file and rename). A removal or rename also may not take away a directory
//! that holds protected paths (`.git`, `.git/modules`, ...), and only `mkdir` may make a
//! `.git` (a `.git` file or link points git at another directory).
//!
//! Exceptions, each safe by construction: `*.sample` files in a `hooks` directory (git
//! runs hooks by their exact names only); the config files of a git dir this call made
//! with `mkdir` (`git init`, `git clone` inside the call; the post-call guard checks them);
//! removing a directory this call made; `mkdir` of a protected path (an empty directory
//! runs nothing, and everything put in it stays protected). The lock file `FILE.lock` of a
//! file the call was granted to write ([`Rules::with_locks`]) stays protected here: the
//! supervisor lets an open make it, and then lets the call write, rename or remove only
//! the lock it made (`crate::supervise::MadeLocks`).

use efr_sandbox_wire::pattern;

/// What a call does to a path, as far as the rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Opens it for writing, truncates it or changes its mode.
    Write,
    /// Creates a file, device, FIFO or link there.
    Create,
    /// Creates a directory there.
    Mkdir,
    /// Removes it, or renames it away, or renames something over it.
    Remove,
}

/// Why a path is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The path is protected (the rule that says so).
    Protected(String),
    /// The path holds protected paths below it.
    HoldsProtected(String),
    /// A `.git` that is not a directory made by mkdir.
    GitLink,
    /// Not writable in this call: outside its writable roots or on a read-only mount of
    /// its view (the call was made and failed; only reported).
    NotWritable,
    /// What git would run from a directory it takes as a git dir (see
    /// `crate::supervise::gitdir`): why.
    Git(String),
}

/// The rules of one call.
///
/// The patterns are matched by `efr_sandbox_wire::pattern` (the config's syntax, as
/// `explain` matches it), not compiled to regular expressions: compiling a glob set of the
/// default list cost about 1 ms per launch, three times over (plan check, init, supervisor).
#[derive(Debug)]
pub struct Rules {
    roots: Vec<Vec<u8>>,
    paths: Vec<Vec<u8>>,
    names: Vec<Name>,
    ancestors: Vec<String>,
    /// The first components of the names (and so of their ancestors): a directory between
    /// the root and a path is a base for the names only when the path's next component
    /// matches one, so only then is it asked whether it holds a `.git`.
    firsts: Vec<Vec<u8>>,
    /// The files the call was granted to write whose lock file (`FILE.lock`) it may write
    /// and rename onto them.
    locks: Vec<Vec<u8>>,
}

/// A protected name pattern, split once.
#[derive(Debug)]
struct Name {
    text: String,
    comps: Vec<Vec<u8>>,
}

/// What the rules ask of the file system while they decide (the supervisor answers from
/// the call's view; tests answer from a table).
pub trait Fs {
    /// Whether directory `dir` holds an entry `.git` (file, directory or link).
    fn has_git(&self, dir: &[u8]) -> bool;
    /// Whether directory `dir` was made by this call's `mkdir`.
    fn made_by_call(&self, dir: &[u8]) -> bool;
}

pub(super) fn trim(p: &str) -> Vec<u8> {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        b"/".to_vec()
    } else {
        t.as_bytes().to_vec()
    }
}

/// `p` is `root` or below it.
pub fn under(p: &[u8], root: &[u8]) -> bool {
    if root == b"/" {
        return p.first() == Some(&b'/');
    }
    p.starts_with(root) && (p.len() == root.len() || p[root.len()] == b'/')
}

/// The globs of the directories that hold what `pattern` matches (`.git` and
/// `.git/modules` and everything below `.git/modules/` for `.git/modules/**/hooks`).
fn ancestor_globs(pattern: &str) -> Vec<String> {
    let comps: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let mut out = Vec::new();
    for i in 1..comps.len() {
        if comps[i - 1] == "**" {
            out.push(comps[..i].join("/"));
            break;
        }
        out.push(comps[..i].join("/"));
    }
    out
}

/// A protected name pattern the rules refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    /// A pattern with a `..` component (it would name a path outside the root it is
    /// relative to).
    #[error("protected name pattern {0}: a `..` component")]
    ParentComponent(String),
}

impl Rules {
    /// The rules for writable `roots`, absolute protected `paths` and relative protected
    /// name patterns `names`.
    pub fn new(roots: &[String], paths: &[String], names: &[String]) -> Result<Rules, RulesError> {
        let mut kept = Vec::new();
        let mut ancestors = Vec::new();
        for n in names {
            let n = n.trim_matches('/');
            if n.is_empty() {
                continue;
            }
            if n.split('/').any(|c| c == "..") {
                return Err(RulesError::ParentComponent(n.to_string()));
            }
            for a in ancestor_globs(n) {
                if !ancestors.contains(&a) {
                    ancestors.push(a);
                }
            }
            kept.push(n.to_string());
        }
        let names: Vec<Name> = kept
            .into_iter()
            .map(|text| Name {
                comps: pattern::components(text.as_bytes())
                    .into_iter()
                    .map(<[u8]>::to_vec)
                    .collect(),
                text,
            })
            .collect();
        let mut firsts: Vec<Vec<u8>> = Vec::new();
        for n in &names {
            if let Some(f) = n.comps.first() {
                if !firsts.contains(f) {
                    firsts.push(f.clone());
                }
            }
        }
        Ok(Rules {
            roots: roots.iter().map(|r| trim(r)).collect(),
            paths: paths.iter().map(|p| trim(p)).collect(),
            names,
            ancestors,
            firsts,
            locks: Vec::new(),
        })
    }

    /// The same rules with `files`: the files the call was granted to write, which it may
    /// write by lock file and rename ([`Self::granted_lock`]).
    pub fn with_locks(mut self, files: &[String]) -> Rules {
        self.locks = files.iter().map(|f| trim(f)).collect();
        self
    }

    /// Whether `p` is the lock file (`FILE.lock`) of a file the call was granted to write.
    pub fn granted_lock(&self, p: &[u8]) -> bool {
        strip_lock(p).is_some_and(|f| self.locks.iter().any(|l| l.as_slice() == f))
    }

    /// The absolute protected paths.
    pub fn paths(&self) -> &[Vec<u8>] {
        &self.paths
    }

    /// Whether `p` is inside a writable root (only there do the rules refuse anything).
    pub fn in_roots(&self, p: &[u8]) -> bool {
        self.roots.iter().any(|r| under(p, r))
    }

    /// The decision for `act` on the absolute path `p` (its parent resolved, its last
    /// component as the call named it).
    pub fn check(&self, p: &[u8], act: Act, fs: &dyn Fs) -> Result<(), Refusal> {
        let Some(root) = self
            .roots
            .iter()
            .filter(|r| under(p, r))
            .max_by_key(|r| r.len())
        else {
            return Ok(());
        };
        if p == root.as_slice() {
            return Ok(());
        }
        let (parent, name) = split(p);
        let made = |d: &[u8]| fs.made_by_call(d);
        // Making or writing a `.git` that is not a directory (a `.git` file names the git
        // dir git uses) at a writable root (where the user's shell prompt runs git) or where
        // a repository is; below, in a directory of the call's (`git worktree add`, a
        // submodule), it is allowed and the guard checks the git dir it names after the
        // call. Removing or renaming one is for the holder rule below.
        if name == b".git"
            && matches!(act, Act::Create | Act::Write)
            && (parent == root.as_slice() || fs.has_git(parent) && !made(parent))
        {
            return Err(Refusal::GitLink);
        }
        let sample = name.ends_with(b".sample") && split(parent).1 == b"hooks";
        // What git writes in a git dir it makes (`git init`, a clone, `git worktree add`).
        let config_of_new_git_dir = matches!(
            name,
            b"config"
                | b"config.lock"
                | b"config.worktree"
                | b"config.worktree.lock"
                | b"commondir"
                | b"gitdir"
        ) && made(parent);
        let removable = act == Act::Remove && made(p);
        let exempt = sample || config_of_new_git_dir || removable || act == Act::Mkdir;
        // The absolute paths.
        for q in &self.paths {
            let hit = under(p, q) || strip_lock(p).is_some_and(|s| under(s, q));
            if hit && !exempt {
                return Err(Refusal::Protected(String::from_utf8_lossy(q).into_owned()));
            }
            // A directory above a protected path may not go (it holds it), nor may anything
            // but a directory made by mkdir take its place when it is missing: a link there
            // (`ln -s elsewhere sub` for a protected `sub/x.inc`) or a directory renamed in
            // would make the protected path name another file.
            let above = q.len() > p.len() && under(q, p);
            if above && (act == Act::Remove && !removable || act == Act::Create) {
                return Err(Refusal::HoldsProtected(
                    String::from_utf8_lossy(q).into_owned(),
                ));
            }
        }
        // The names, from the root and from every repository between it and the path.
        let mut bases: Vec<&[u8]> = vec![root];
        let mut i = root.len();
        while let Some(off) = p[i + 1..].iter().position(|&b| b == b'/') {
            let d = &p[..i + 1 + off];
            let next = p[d.len() + 1..].split(|&b| b == b'/').next().unwrap_or(b"");
            if self.may_start(next) && fs.has_git(d) {
                bases.push(d);
            }
            i += 1 + off;
        }
        for b in bases {
            let rel = &p[b.len() + 1..];
            let hit = self.match_prefixes(rel).or_else(|| {
                rel.strip_suffix(b".lock")
                    .and_then(|s| self.match_prefixes(s))
            });
            if let (Some(r), false) = (hit, exempt) {
                return Err(Refusal::Protected(r));
            }
            if act == Act::Remove && !removable {
                if let Some(a) = self
                    .ancestors
                    .iter()
                    .find(|a| pattern::matches(a.as_bytes(), rel))
                {
                    return Err(Refusal::HoldsProtected(a.clone()));
                }
            }
        }
        Ok(())
    }

    /// Whether a relative path whose first component is `c` may match a name pattern or
    /// the directory that holds one (`NAME.lock` with `NAME`).
    fn may_start(&self, c: &[u8]) -> bool {
        let bare = c.strip_suffix(b".lock");
        self.firsts.iter().any(|f| {
            f.as_slice() == b"**"
                || pattern::wildcard(f, c)
                || bare.is_some_and(|b| pattern::wildcard(f, b))
        })
    }

    /// The first pattern matching `rel` or one of its ancestors.
    fn match_prefixes(&self, rel: &[u8]) -> Option<String> {
        let comps = pattern::components(rel);
        let first = comps.first()?;
        self.names
            .iter()
            .find(|n| {
                let pat: Vec<&[u8]> = match n.comps.first() {
                    Some(f) if f.as_slice() == b"**" || pattern::wildcard(f, first) => {
                        n.comps.iter().map(Vec::as_slice).collect()
                    }
                    _ => return false,
                };
                pattern::covers_components(&pat, &comps)
            })
            .map(|n| n.text.clone())
    }
}

/// `p` without a trailing `.lock` on its last component.
fn strip_lock(p: &[u8]) -> Option<&[u8]> {
    p.strip_suffix(b".lock")
        .filter(|s| !s.is_empty() && s.last() != Some(&b'/'))
}

/// The parent and last component of an absolute path.
pub fn split(p: &[u8]) -> (&[u8], &[u8]) {
    match p.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &p[1..]),
        Some(i) => (&p[..i], &p[i + 1..]),
        None => (b"", p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    struct T {
        git: BTreeSet<Vec<u8>>,
        made: BTreeSet<Vec<u8>>,
    }
    impl Fs for T {
        fn has_git(&self, d: &[u8]) -> bool {
            self.git.contains(d)
        }
        fn made_by_call(&self, d: &[u8]) -> bool {
            self.made.contains(d)
        }
    }
    fn fs(git: &[&str], made: &[&str]) -> T {
        T {
            git: git.iter().map(|s| s.as_bytes().to_vec()).collect(),
            made: made.iter().map(|s| s.as_bytes().to_vec()).collect(),
        }
    }
    fn rules() -> Rules {
        Rules::new(
            &["/p".into(), "/w/".into()],
            &["/p/.husky/_".into(), "/h/.bashrc".into()],
            &[
                ".git/hooks".into(),
                ".git/config".into(),
                ".git/modules/**/hooks".into(),
                ".git/modules/**/config".into(),
                ".git/worktrees/*/commondir".into(),
                ".envrc".into(),
                ".vscode/".into(),
            ],
        )
        .unwrap()
    }
    fn ok(r: &Rules, p: &str, a: Act, f: &T) -> bool {
        r.check(p.as_bytes(), a, f).is_ok()
    }

    #[test]
    fn names_at_the_root_and_below() {
        let r = rules();
        let f = fs(&[], &[]);
        assert!(!ok(&r, "/p/.envrc", Act::Create, &f));
        assert!(!ok(&r, "/p/.envrc.lock", Act::Create, &f));
        assert!(!ok(&r, "/p/.vscode/tasks.json", Act::Write, &f));
        assert!(!ok(&r, "/p/.git/hooks/pre-commit", Act::Create, &f));
        assert!(!ok(&r, "/p/.git/config", Act::Write, &f));
        assert!(!ok(&r, "/p/.git/config.lock", Act::Create, &f));
        assert!(!ok(
            &r,
            "/p/.git/modules/a/b/hooks/post-checkout",
            Act::Create,
            &f
        ));
        assert!(!ok(&r, "/p/.git/modules/a/config", Act::Write, &f));
        assert!(!ok(&r, "/p/.git/worktrees/x/commondir", Act::Create, &f));
        assert!(ok(&r, "/p/src/main.rs", Act::Write, &f));
        assert!(ok(&r, "/p/.git/index", Act::Write, &f));
        assert!(ok(&r, "/p/.git/objects/ab/cd", Act::Create, &f));
        assert!(ok(&r, "/p/.envrc.d/x", Act::Create, &f));
        assert!(ok(&r, "/p/sub/.envrc", Act::Create, &f), "not a repository");
        assert!(
            ok(&r, "/elsewhere/.envrc", Act::Create, &f),
            "outside the roots"
        );
        assert!(ok(&r, "/w/x", Act::Write, &f));
        assert!(!ok(&r, "/w/.envrc", Act::Write, &f));
    }

    #[test]
    fn nested_repositories_get_the_same_names() {
        let r = rules();
        let f = fs(&["/p/a/b/c/d/e/f/g/h", "/p/dist/x"], &[]);
        assert!(!ok(&r, "/p/a/b/c/d/e/f/g/h/.envrc", Act::Create, &f));
        assert!(!ok(
            &r,
            "/p/a/b/c/d/e/f/g/h/.git/hooks/pre-push",
            Act::Create,
            &f
        ));
        assert!(!ok(&r, "/p/dist/x/.vscode/tasks.json", Act::Create, &f));
        assert!(ok(&r, "/p/a/b/c/.envrc", Act::Create, &f));
    }

    #[test]
    fn absolute_paths_and_their_holders() {
        let r = rules();
        let f = fs(&[], &[]);
        assert!(!ok(&r, "/p/.husky/_/pre-commit", Act::Create, &f));
        assert!(!ok(&r, "/p/.husky/_", Act::Remove, &f));
        assert!(
            !ok(&r, "/p/.husky", Act::Remove, &f),
            "holds a protected path"
        );
        assert!(ok(&r, "/p/.husky/pre-commit", Act::Create, &f));
        assert!(
            ok(&r, "/h/.bashrc", Act::Write, &f),
            "not in a writable root"
        );
        // A missing directory above a protected path: made by mkdir only, never a link or a
        // directory renamed in.
        assert!(!ok(&r, "/p/.husky", Act::Create, &f), "a link in its place");
        assert!(!ok(&r, "/p/.husky/_", Act::Create, &f));
        assert!(ok(&r, "/p/.husky", Act::Mkdir, &f));
    }

    #[test]
    fn holders_of_protected_names_stay() {
        let r = rules();
        let f = fs(&[], &[]);
        assert!(!ok(&r, "/p/.git", Act::Remove, &f));
        assert!(!ok(&r, "/p/.git/modules", Act::Remove, &f));
        assert!(!ok(&r, "/p/.git/modules/sub", Act::Remove, &f));
        assert!(!ok(&r, "/p/.git/worktrees/x", Act::Remove, &f));
        assert!(!ok(&r, "/p/.vscode", Act::Remove, &f));
        assert!(ok(&r, "/p/.git/objects", Act::Remove, &f));
        assert!(
            ok(&r, "/p", Act::Remove, &f),
            "the root itself is the kernel's matter"
        );
    }

    #[test]
    fn dot_git_only_by_mkdir() {
        let r = rules();
        let f = fs(&[], &[]);
        assert!(!ok(&r, "/p/.git", Act::Create, &f), "at a root");
        assert!(!ok(&r, "/w/.git", Act::Write, &f), "at a root");
        assert!(ok(&r, "/p/sub/.git", Act::Mkdir, &f));
        assert!(
            ok(&r, "/p/wt/.git", Act::Create, &f),
            "a worktree of the call's"
        );
        let repo = fs(&["/p/sub"], &[]);
        assert!(
            !ok(&r, "/p/sub/.git", Act::Write, &repo),
            "a repository's own"
        );
    }

    #[test]
    fn exceptions() {
        let r = rules();
        let f = fs(&[], &["/p/.git", "/p/.git/modules/new", "/p/.git/hooks"]);
        assert!(ok(&r, "/p/.git/hooks/pre-commit.sample", Act::Create, &f));
        assert!(!ok(&r, "/p/.git/hooks/pre-commit", Act::Create, &f));
        assert!(ok(&r, "/p/.git/config.lock", Act::Create, &f));
        assert!(ok(&r, "/p/.git/config", Act::Remove, &f));
        assert!(ok(&r, "/p/.git/modules/new/config", Act::Create, &f));
        assert!(!ok(&r, "/p/.git/modules/old/config", Act::Create, &f));
        assert!(ok(&r, "/p/.git/hooks", Act::Remove, &f));
        assert!(ok(&r, "/p/.git", Act::Remove, &f));
        assert!(ok(&r, "/p/.vscode", Act::Mkdir, &f));
        assert!(ok(&r, "/p/.vscode/x", Act::Mkdir, &f));
        assert!(!ok(&r, "/p/.vscode/x/y", Act::Create, &f));
    }

    #[test]
    fn the_lock_file_of_a_granted_file() {
        let r = Rules::new(
            &["/p".into(), "/p/.git/config".into()],
            &[],
            &[".git/config".into(), ".envrc".into()],
        )
        .unwrap()
        .with_locks(&["/p/.git/config".into()]);
        let f = fs(&[], &[]);
        assert!(ok(&r, "/p/.git/config", Act::Write, &f), "the grant");
        assert!(ok(&r, "/p/.git/config", Act::Remove, &f), "renamed onto");
        assert!(r.granted_lock(b"/p/.git/config.lock"));
        // The rules alone still refuse every act on it: the supervisor lets through the
        // open that makes it, and then acts on the lock it made only (not a lock the
        // host's git holds, nor one made by a link or a rename onto it).
        for act in [Act::Create, Act::Write, Act::Remove] {
            assert!(!ok(&r, "/p/.git/config.lock", act, &f), "{act:?}");
        }
        // Nothing else: another lock name, another protected file, the lock of a lock.
        assert!(!r.granted_lock(b"/p/.git/config.lock.lock"));
        assert!(!r.granted_lock(b"/p/.git/config"));
        assert!(!r.granted_lock(b"/p/.git/config.worktree.lock"));
        assert!(!r.granted_lock(b"/p/.envrc.lock"));
        // Without the grant, no lock is granted.
        assert!(!rules().granted_lock(b"/p/.git/config.lock"));
    }

    #[test]
    fn non_utf8_names() {
        let r = rules();
        let f = fs(&[], &[]);
        let mut p = b"/p/.git/hooks/\xff\xfe".to_vec();
        assert!(r.check(&p, Act::Create, &f).is_err());
        p = b"/p/\xff/.envrc".to_vec();
        assert!(r.check(&p, Act::Create, &f).is_ok());
        p = b"/p/\xff".to_vec();
        assert!(r.check(&p, Act::Create, &f).is_ok());
    }

    #[test]
    fn ancestor_globs_of_patterns() {
        assert_eq!(
            ancestor_globs(".git/modules/**/hooks"),
            vec![".git", ".git/modules", ".git/modules/**"]
        );
        assert_eq!(
            ancestor_globs(".git/worktrees/*/commondir"),
            vec![".git", ".git/worktrees", ".git/worktrees/*"]
        );
        assert!(ancestor_globs(".envrc").is_empty());
    }
}
