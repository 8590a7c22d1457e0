#![no_main]
//! The built-in reader of `.git` files and `commondir` (`lookup_git_dir`) never panics, and
//! never names a dir git would not: the input is the text of a `.git` file and of a
//! `commondir`, laid out in a temp dir beside real git dirs, links and decoys for those
//! texts to name; where the reader names git dirs, git (`git rev-parse`, asked as the
//! service asks it) must name the same. Without `git` on PATH only the first is checked.

#[allow(dead_code)]
#[path = "../../call/src/git_dirs.rs"]
mod git_dirs;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use efr_policy::git::{GitLookup, lookup_git_dir};
use libfuzzer_sys::fuzz_target;

fn write(f: &Path, text: &[u8]) {
    if let Some(d) = f.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    std::fs::write(f, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", f.display()));
}

fn full_repo(d: &Path) {
    for s in ["objects", "refs/heads"] {
        let _ = std::fs::create_dir_all(d.join(s));
    }
    write(&d.join("HEAD"), b"ref: refs/heads/main\n");
}

/// The layout, made once: `wf` (a `.git` file), `wm` (a `.git` dir); git dirs `full`,
/// `wt` (a worktree's: HEAD only), `d/x/full` (where `l/../full` leads; `l` links to
/// `d/x/y`), `in` and ` in` in `wf`, a dir that is not a git dir (`plain`).
fn base() -> &'static PathBuf {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let b = std::env::temp_dir().join(format!("efr-fuzz-git-dirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&b);
        let _ = std::fs::create_dir_all(b.join("d/x/y"));
        let _ = std::fs::create_dir_all(b.join("plain"));
        let _ = std::os::unix::fs::symlink("d/x/y", b.join("l"));
        for r in [
            "full",
            "d/x/full",
            "wf/in",
            "wf/ in",
            "wm/.git",
            "t\u{fffd}",
            "t\u{fffd}/x",
        ] {
            full_repo(&b.join(r));
        }
        write(&b.join("wt/HEAD"), b"ref: refs/heads/wt\n");
        b.canonicalize().unwrap_or(b)
    })
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn check(w: &Path) {
    let ours = lookup_git_dir(w);
    if !git_dirs::available() {
        return;
    }
    match ours {
        GitLookup::Found(d) => {
            let Some(g) = git_dirs::ask_git(w) else {
                panic!(
                    "git refuses {}; the reader names {:?} / {:?}",
                    w.display(),
                    d.git_dir,
                    d.common
                );
            };
            assert_eq!(
                canon(&d.git_dir),
                canon(&g.git_dir),
                "git dir of {}",
                w.display()
            );
            assert_eq!(
                canon(&d.common),
                canon(&g.common),
                "common dir of {}",
                w.display()
            );
        }
        GitLookup::NotFound => {
            assert!(
                git_dirs::ask_git(w).is_none(),
                "git finds a repository at {}",
                w.display()
            );
        }
        GitLookup::Unknown { .. } => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    // The first byte: where the `.git` text ends (low 7 bits, times 2), whether there is a
    // `commondir` (high bit).
    let (dotgit, commondir) = rest.split_at(((n & 0x7f) as usize * 2).min(rest.len()));
    let b = base();
    write(&b.join("wf/.git"), dotgit);
    for g in ["wt", "full", "wm/.git", "wf/in"] {
        let f = b.join(g).join("commondir");
        if n & 0x80 != 0 {
            write(&f, commondir);
        } else {
            let _ = std::fs::remove_file(&f);
        }
    }
    check(&b.join("wf"));
    check(&b.join("wm"));
});
