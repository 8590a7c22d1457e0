//! What git reads and runs from a repository's config, for the launch view: the files a
//! config includes (`include.path`, `includeIf.*.path`) and the programs its keys name
//! (see [`crate::git::programs`]). The view keeps both read-only for the whole call when they are inside
//! a writable root: a `git status` the user's prompt runs while the call runs reads the
//! included file and runs `core.fsmonitor`. The programs are those of
//! [`crate::git::programs::PROGRAM_KEYS`].
//!
//! The keys come from git's own answer where the service asked git (`git config --list
//! --show-origin -z`, see `efr_call::git_dirs`), else from the built-in line reader
//! ([`crate::git::read_config`], one file at a time). Includes are followed
//! whatever their condition (an `includeIf "onbranch:..."` turns true when the branch
//! changes, `gitdir:` when the repository moves), up to git's depth.

use std::path::{Path, PathBuf};

use crate::git::programs::git_path;

/// How deep includes are followed (git's `MAX_INCLUDE_DEPTH`).
pub const MAX_INCLUDE_DEPTH: usize = 10;

/// Config files read at most by the built-in reader for one launch (a chain of includes
/// that never ends, or a wide one, costs no more).
const MAX_FILES: usize = 64;

/// One key git reads, and the file it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitConfigItem {
    /// The config file that sets it (absolute).
    pub file: PathBuf,
    /// `section[.sub].name`, section and name lower case (as `git config --list` writes it).
    pub key: String,
    /// The value's bytes (for a key written without `=`, git lists no value: empty).
    pub value: Vec<u8>,
}

/// Whether `key` includes another file (`include.path`, `includeIf.<cond>.path`).
pub fn is_include(key: &str) -> bool {
    key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"))
}

/// The file an include key's `value` names, as git resolves it: relative to the directory
/// of the including `file`, `~/` against the home.
pub fn include_target(value: &[u8], file: &Path, home: &Path) -> Option<PathBuf> {
    git_path(value, file.parent().unwrap_or(Path::new("/")), home)
}

/// What the built-in reader found: the keys, and the files includes name.
#[derive(Debug, Default)]
pub struct Reads {
    /// Every key read, with its file.
    pub items: Vec<GitConfigItem>,
    /// Every file an include names (read or not: missing, past the depth).
    pub includes: Vec<PathBuf>,
    /// The files read (or tried).
    seen: Vec<PathBuf>,
}

impl Reads {
    /// Reads `file` and, whatever their condition, the files it includes (see the module
    /// doc), `depth` levels of includes already behind it.
    pub fn read(&mut self, file: &Path, home: &Path, depth: usize) {
        if self.seen.len() >= MAX_FILES || self.seen.iter().any(|s| s == file) {
            return;
        }
        self.seen.push(file.to_path_buf());
        let mut entries = Vec::new();
        // Depth 8: the reader takes this file only (it follows includes below 9 levels).
        crate::git::read_config(file, home, None, &mut entries, 8);
        for e in entries {
            let value = e.value.into_bytes();
            if is_include(&e.key) {
                self.include(&value, file, home, depth);
            }
            self.items.push(GitConfigItem {
                file: file.to_path_buf(),
                key: e.key,
                value,
            });
        }
    }

    /// Notes the target of an include in `file` and reads it.
    pub fn include(&mut self, value: &[u8], file: &Path, home: &Path, depth: usize) {
        let Some(t) = include_target(value, file, home) else {
            return;
        };
        if !self.includes.contains(&t) {
            self.includes.push(t.clone());
        }
        if depth < MAX_INCLUDE_DEPTH {
            self.read(&t, home, depth + 1);
        }
    }

    /// Takes git's own list of the keys of a repository (`git config --list --show-origin
    /// -z`). Git followed the includes that exist and whose condition holds; the others
    /// (missing now, a condition false now) are read here, and their includes too.
    pub fn from_git(list: &[GitConfigItem], home: &Path) -> Reads {
        let mut r = Reads::default();
        for i in list {
            if !r.seen.contains(&i.file) {
                r.seen.push(i.file.clone());
            }
        }
        r.items.extend(list.iter().cloned());
        for i in list.iter().filter(|i| is_include(&i.key)) {
            r.include(&i.value, &i.file, home, 1);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_followed_whatever_their_condition() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let p = home.join("p");
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::write(
            p.join(".git/config"),
            "[include]\n\tpath = ../shared.inc\n[includeIf \"gitdir:/nowhere/\"]\n\tpath = ~/cond.inc\n[includeIf \"onbranch:x\"]\n  path = missing.inc\n",
        )
        .unwrap();
        std::fs::write(p.join("shared.inc"), "[include]\npath = deeper/nest.inc\n").unwrap();
        std::fs::write(home.join("cond.inc"), "[core]\nfsmonitor = ./mon\n").unwrap();
        let mut r = Reads::default();
        r.read(&p.join(".git/config"), &home, 0);
        assert_eq!(
            r.includes,
            [
                p.join("shared.inc"),
                p.join("deeper/nest.inc"),
                home.join("cond.inc"),
                p.join(".git/missing.inc"),
            ]
        );
        assert!(
            r.items
                .iter()
                .any(|i| i.key == "core.fsmonitor" && i.file == home.join("cond.inc"))
        );
    }

    #[test]
    fn an_include_loop_ends() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::write(&a, "[include]\npath = a\npath = b\n").unwrap();
        std::fs::write(d.path().join("b"), "[include]\npath = a\n").unwrap();
        let mut r = Reads::default();
        r.read(&a, d.path(), 0);
        assert_eq!(r.includes, [a.clone(), d.path().join("b")]);
    }
}
