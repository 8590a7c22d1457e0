//! Git dirs wherever a call writes: what git would run from a directory it takes as a git
//! dir is checked when the call writes it, not after the call.
//!
//! Git discovers a repository by what a directory holds, not by its name: any directory
//! with a `HEAD` (and `objects/` and `refs/`, here or in the dir a `commondir` names) is a
//! git dir, and `git status` in a `docs/` that holds `HEAD`, `objects/`, `refs/` and
//! `config` runs that config's `core.fsmonitor` (`safe.bareRepository` is `all` by
//! default). A `.git` file may name any such directory, and a `commondir` may send git to
//! the `config` and `hooks/` of any directory holding `objects/` and `refs/`. So the
//! supervisor does not look for `.git`: in every directory it treats one as *git-like*
//! when it holds a `HEAD`, or both `objects` and `refs` (entries of any type; links not
//! followed), and there:
//!
//! - `config` and `config.worktree` are never opened for writing, truncated, linked or
//!   made by the call: only a rename onto them is let through, and then the supervisor
//!   reads the renamed file, lets it through only when every key is on
//!   `git.safe_config_keys` in the subset of git's syntax git itself writes
//!   ([`efr_sandbox_wire::gitconfig`]), and puts a fresh copy of the bytes it read in place
//!   (a new inode: a writer that kept the file open writes to nothing git reads). Git,
//!   libgit2 and gitoxide write a config by `config.lock` and a rename, so `git init`,
//!   `git clone` and `git config` of safe keys work;
//! - nothing but `*.sample` may be made in `hooks/`, and `hooks` itself may only be made by
//!   `mkdir` (a link or a file there would name other hooks);
//! - the act that makes a directory git-like (the first `HEAD`, or the second of `objects`
//!   and `refs`) is let through only when what the directory already holds runs nothing: a
//!   `config` or `config.worktree` that is not a plain file (a link, a FIFO) or holds an
//!   unsafe key refuses it, as does a `hooks` that is not a directory or holds anything but
//!   `*.sample`; a plain config that passes is replaced by a fresh copy and the hooks
//!   directory by a fresh one with its samples, for the same reason as above.
//!
//! Every act on these names is decided and made under one lock of the supervisor, so two
//! threads of the call cannot make a directory git-like between a check and a write.
//! Everything else in a git dir (objects, refs, the index, logs) is written as usual.

/// What the supervisor found at a name of a directory (links not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A plain file.
    File,
    /// A symbolic link.
    Link,
    /// A FIFO, socket or device.
    Other,
}

/// The directories the decision looks into: the parent of the path acted on, and (for a
/// hook) the parent's parent.
pub trait Dirs {
    /// What the parent directory holds at `name`.
    fn in_parent(&self, name: &[u8]) -> Option<Kind>;
    /// What the parent's parent holds at `name`.
    fn in_grandparent(&self, name: &[u8]) -> Option<Kind>;
}

/// What a checked rename reads before it lets a file be where git reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// A config: every key on the safe list.
    Config,
    /// A rebase or sequencer todo list: no `exec` line that the list there now lacks
    /// (`git rebase --continue` runs them).
    Todo,
}

/// What an act on a path means for git.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing of git's: made as asked.
    Free,
    /// A config or todo list of a git-like directory: only a rename the supervisor checks
    /// may put one there.
    Checked(Checked),
    /// The act would leave git code where git runs it: refused, for this reason.
    Refuse(&'static str),
    /// The act makes the parent git-like: what it holds is checked first.
    Complete,
}

/// The config files git reads from a git dir.
pub const CONFIGS: [&[u8]; 2] = [b"config", b"config.worktree"];

/// The todo lists git runs `exec` lines of, each in its directory of a git dir.
pub const TODOS: [(&[u8], &[u8]); 2] = [
    (b"rebase-merge", b"git-rebase-todo"),
    (b"sequencer", b"todo"),
];

/// Whether an act on `name` in a directory named `parent_name` can matter to git (all
/// others skip the lock and the lookups).
pub fn concerns(name: &[u8], parent_name: &[u8]) -> bool {
    parent_name == b"hooks"
        || CONFIGS.contains(&name)
        || matches!(name, b"HEAD" | b"objects" | b"refs" | b"hooks")
        || TODOS.contains(&(parent_name, name))
}

/// Where git reads a code name from, relative to the directory that holds the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// From that directory itself (its `config`, `config.worktree`).
    Config,
    /// From its parent (`hooks/NAME`, `rebase-merge/git-rebase-todo`, `sequencer/todo`).
    InSubdir,
}

/// Whether `name` in a directory named `parent_name` is one git reads as code when the
/// directory (or its parent) is git-like, and from where.
pub fn code_name(name: &[u8], parent_name: &[u8]) -> Option<Code> {
    if CONFIGS.contains(&name) {
        Some(Code::Config)
    } else if (parent_name == b"hooks" && !name.ends_with(b".sample"))
        || TODOS.contains(&(parent_name, name))
    {
        Some(Code::InSubdir)
    } else {
        None
    }
}

/// Whether a directory holding what `has` says is git-like.
pub fn git_like(has: impl Fn(&[u8]) -> bool) -> bool {
    has(b"HEAD") || (has(b"objects") && has(b"refs"))
}

/// What `act` on `name`, in a directory named `parent_name`, means (see the module doc).
pub fn judge(name: &[u8], parent_name: &[u8], act: super::rules::Act, d: &dyn Dirs) -> Verdict {
    use super::rules::Act;
    let makes = matches!(act, Act::Create | Act::Write);
    let parent_git = || git_like(|n| d.in_parent(n).is_some());
    if parent_name == b"hooks"
        && makes
        && !name.ends_with(b".sample")
        && git_like(|n| d.in_grandparent(n).is_some())
    {
        return Verdict::Refuse("a hook of a git dir (git runs it)");
    }
    if CONFIGS.contains(&name) {
        return if makes && parent_git() {
            Verdict::Checked(Checked::Config)
        } else {
            Verdict::Free
        };
    }
    if TODOS.contains(&(parent_name, name)) {
        return if makes && git_like(|n| d.in_grandparent(n).is_some()) {
            Verdict::Checked(Checked::Todo)
        } else {
            Verdict::Free
        };
    }
    let new = matches!(act, Act::Create | Act::Mkdir);
    match name {
        b"hooks" if act == Act::Create && parent_git() => {
            Verdict::Refuse("the hooks dir of a git dir, made other than by mkdir")
        }
        b"HEAD" | b"objects" | b"refs" if new && !parent_git() => {
            let other = |n: &[u8]| d.in_parent(n).is_some();
            let becomes = match name {
                b"HEAD" => true,
                b"objects" => other(b"refs"),
                _ => other(b"objects"),
            };
            if becomes {
                Verdict::Complete
            } else {
                Verdict::Free
            }
        }
        _ => Verdict::Free,
    }
}

/// Why what a directory holds keeps it from becoming git-like, when it does: `hooks` and
/// the kinds of the configs, before their text is read (see [`config_text`]).
pub fn holdings(
    hooks: Option<Kind>,
    hook_names: &[Vec<u8>],
    configs: &[Option<Kind>],
) -> Option<String> {
    match hooks {
        None | Some(Kind::Dir) => {}
        Some(_) => return Some("it holds a hooks that is not a directory".into()),
    }
    if let Some(h) = hook_names.iter().find(|n| !n.ends_with(b".sample")) {
        return Some(format!(
            "its hooks dir holds {} (git would run it)",
            String::from_utf8_lossy(h)
        ));
    }
    for (k, name) in configs.iter().zip(CONFIGS) {
        if matches!(k, Some(Kind::Link | Kind::Other)) {
            return Some(format!(
                "its {} is not a plain file",
                String::from_utf8_lossy(name)
            ));
        }
    }
    None
}

/// The `exec` lines of a todo list as git reads them (blanks before the command word
/// trimmed; `exec` or `x`), each trimmed.
pub fn exec_lines(todo: &[u8]) -> Vec<&[u8]> {
    todo.split(|b| *b == b'\n')
        .map(|l| l.trim_ascii())
        .filter(|l| {
            let word = l
                .iter()
                .position(|b| b.is_ascii_whitespace())
                .map_or(*l, |i| &l[..i]);
            word == b"exec" || word == b"x"
        })
        .collect()
}

/// Why a todo list may not replace the one there now (`old`, empty when none), when it may
/// not: it holds an `exec` line the list there lacks. Git rewrites its list after each
/// step, dropping what it did, so a list of the user's own rebase only ever loses lines.
pub fn todo_text(new: &[u8], old: &[u8]) -> Option<String> {
    let mut have = exec_lines(old);
    for l in exec_lines(new) {
        match have.iter().position(|h| *h == l) {
            Some(i) => {
                have.swap_remove(i);
            }
            None => {
                return Some(format!(
                    "a todo list with an exec line ({}) that `git rebase --continue` would run",
                    String::from_utf8_lossy(l)
                ));
            }
        }
    }
    None
}

/// Why a config text may not be where git reads it, when it may not: a key off the safe
/// list, or a text outside the subset git writes.
pub fn config_text(text: &[u8], safe: &[String]) -> Option<String> {
    match efr_sandbox_wire::gitconfig::unsafe_keys(text, safe) {
        Ok(keys) if keys.is_empty() => None,
        Ok(mut keys) => {
            keys.dedup();
            Some(format!(
                "a git config with keys off git.safe_config_keys: {}",
                keys.join(", ")
            ))
        }
        Err(e) => Some(format!("a git config git may read otherwise ({e})")),
    }
}

/// [`config_text`] of a config `text` that replaces `old` (the config there now, if any):
/// a key off the safe list that `old` holds already with the same value is kept, not
/// judged. It is what git had, not the call's: git rewrites the whole file when it sets
/// one key (`git remote add` in a repository whose config holds the user's `alias.co` or
/// `core.editor`), and what lands adds nothing git would run that it did not run before.
/// A changed value, or a key `old` lacks, is judged as in [`config_text`].
pub fn config_text_over(text: &[u8], old: Option<&[u8]>, safe: &[String]) -> Option<String> {
    use efr_sandbox_wire::gitconfig::{key_is_safe, parse_strict};
    let keys = match parse_strict(text) {
        Ok(k) => k,
        Err(e) => return Some(format!("a git config git may read otherwise ({e})")),
    };
    let had = old.and_then(|o| parse_strict(o).ok()).unwrap_or_default();
    let mut added: Vec<String> = keys
        .into_iter()
        .filter(|k| !key_is_safe(safe, &k.name, k.value.as_deref().unwrap_or_default()))
        .filter(|k| !had.contains(k))
        .map(|k| k.name)
        .collect();
    if added.is_empty() {
        return None;
    }
    added.dedup();
    Some(format!(
        "a git config with keys off git.safe_config_keys: {}",
        added.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::super::rules::Act;
    use super::*;

    struct T {
        parent: Vec<&'static [u8]>,
        grand: Vec<&'static [u8]>,
    }
    impl Dirs for T {
        fn in_parent(&self, n: &[u8]) -> Option<Kind> {
            self.parent.contains(&n).then_some(Kind::Dir)
        }
        fn in_grandparent(&self, n: &[u8]) -> Option<Kind> {
            self.grand.contains(&n).then_some(Kind::Dir)
        }
    }
    fn t(parent: &[&'static [u8]], grand: &[&'static [u8]]) -> T {
        T {
            parent: parent.to_vec(),
            grand: grand.to_vec(),
        }
    }

    #[test]
    fn a_config_of_a_git_like_dir_goes_through_the_checked_rename_only() {
        for parent in [&[&b"HEAD"[..]][..], &[b"objects", b"refs"]] {
            let d = t(parent, &[]);
            assert_eq!(
                judge(b"config", b"x", Act::Create, &d),
                Verdict::Checked(Checked::Config)
            );
            assert_eq!(
                judge(b"config.worktree", b"x", Act::Write, &d),
                Verdict::Checked(Checked::Config)
            );
            assert_eq!(judge(b"config", b"x", Act::Remove, &d), Verdict::Free);
            assert_eq!(judge(b"config", b"x", Act::Mkdir, &d), Verdict::Free);
        }
        // `objects` alone, or `refs` alone, is no git dir: a project's `config` is its own.
        for parent in [&[&b"objects"[..]][..], &[b"refs"], &[]] {
            let d = t(parent, &[]);
            assert_eq!(judge(b"config", b"app", Act::Write, &d), Verdict::Free);
        }
    }

    #[test]
    fn hooks_are_refused_in_a_git_like_dir_but_samples() {
        let d = t(&[], &[b"HEAD"]);
        assert!(matches!(
            judge(b"pre-commit", b"hooks", Act::Create, &d),
            Verdict::Refuse(_)
        ));
        assert!(matches!(
            judge(b"post-checkout", b"hooks", Act::Write, &d),
            Verdict::Refuse(_)
        ));
        assert_eq!(
            judge(b"pre-commit.sample", b"hooks", Act::Create, &d),
            Verdict::Free
        );
        assert_eq!(
            judge(b"pre-commit", b"hooks", Act::Remove, &d),
            Verdict::Free
        );
        // A `hooks` of a directory that is not git-like is anybody's.
        let d = t(&[], &[b"objects"]);
        assert_eq!(
            judge(b"pre-commit", b"hooks", Act::Create, &d),
            Verdict::Free
        );
        // `hooks` itself: by mkdir only.
        let d = t(&[b"HEAD"], &[]);
        assert!(matches!(
            judge(b"hooks", b"x", Act::Create, &d),
            Verdict::Refuse(_)
        ));
        assert_eq!(judge(b"hooks", b"x", Act::Mkdir, &d), Verdict::Free);
    }

    #[test]
    fn the_act_that_makes_a_git_dir_completes_it() {
        let empty = t(&[], &[]);
        assert_eq!(judge(b"HEAD", b"x", Act::Create, &empty), Verdict::Complete);
        assert_eq!(judge(b"objects", b"x", Act::Mkdir, &empty), Verdict::Free);
        let d = t(&[b"objects"], &[]);
        assert_eq!(judge(b"refs", b"x", Act::Mkdir, &d), Verdict::Complete);
        assert_eq!(judge(b"refs", b"x", Act::Create, &d), Verdict::Complete);
        let d = t(&[b"refs"], &[]);
        assert_eq!(judge(b"objects", b"x", Act::Create, &d), Verdict::Complete);
        // Already git-like: nothing changes.
        let d = t(&[b"HEAD"], &[]);
        assert_eq!(judge(b"objects", b"x", Act::Mkdir, &d), Verdict::Free);
        assert_eq!(judge(b"HEAD", b"x", Act::Create, &d), Verdict::Free);
        // A write of an existing HEAD, a removal: nothing made.
        assert_eq!(judge(b"HEAD", b"x", Act::Write, &empty), Verdict::Free);
        assert_eq!(judge(b"HEAD", b"x", Act::Remove, &empty), Verdict::Free);
    }

    #[test]
    fn what_a_dir_holds_before_it_becomes_a_git_dir() {
        assert!(holdings(None, &[], &[None, None]).is_none());
        assert!(
            holdings(
                Some(Kind::Dir),
                &[b"a.sample".to_vec()],
                &[Some(Kind::File), None]
            )
            .is_none()
        );
        assert!(holdings(Some(Kind::Dir), &[b"post-checkout".to_vec()], &[None, None]).is_some());
        assert!(holdings(Some(Kind::Link), &[], &[None, None]).is_some());
        assert!(holdings(None, &[], &[Some(Kind::Link), None]).is_some());
        assert!(holdings(None, &[], &[None, Some(Kind::Other)]).is_some());
        assert!(holdings(None, &[], &[Some(Kind::Dir), None]).is_none());
        let safe = vec!["core.bare".to_string()];
        assert!(config_text(b"[core]\n\tbare = true\n", &safe).is_none());
        assert!(
            config_text(b"[core]\n\tfsmonitor = x\n", &safe)
                .unwrap()
                .contains("core.fsmonitor")
        );
        assert!(config_text(b"[core] fsmonitor = x\n", &safe).is_some());
    }

    #[test]
    fn todo_lists_may_only_lose_exec_lines() {
        let d = t(&[], &[b"HEAD"]);
        assert_eq!(
            judge(b"git-rebase-todo", b"rebase-merge", Act::Create, &d),
            Verdict::Checked(Checked::Todo)
        );
        assert_eq!(
            judge(b"todo", b"sequencer", Act::Write, &d),
            Verdict::Checked(Checked::Todo)
        );
        assert_eq!(
            judge(b"done", b"rebase-merge", Act::Create, &d),
            Verdict::Free
        );
        assert_eq!(judge(b"todo", b"x", Act::Create, &d), Verdict::Free);
        let old = b"pick 1 a\nexec make test\npick 2 b\n x  make test\n";
        assert!(todo_text(b"exec make test\npick 2 b\n", old).is_none());
        assert!(todo_text(b"pick 2 b\n", old).is_none());
        assert!(todo_text(b"exec touch x\n", old).is_some());
        assert!(todo_text(b"  x curl e | sh\n", b"").is_some());
        assert!(todo_text(b"pick 1 exec\n# exec x\nexecute\n", b"").is_none());
        // As many as there were, not more.
        assert!(todo_text(b"exec a\nexec a\nexec a\n", b"exec a\nexec a\n").is_some());
    }

    #[test]
    fn only_git_names_concern_git() {
        assert!(concerns(b"config", b"x"));
        assert!(concerns(b"anything", b"hooks"));
        assert!(concerns(b"HEAD", b"x"));
        assert!(!concerns(b"main.rs", b"src"));
        assert!(!concerns(b"config.lock", b"x"));
        assert!(!concerns(b"head", b"x"));
    }

    #[test]
    fn a_config_rewritten_keeps_the_keys_it_had_and_adds_none() {
        let safe: Vec<String> = ["core.*", "remote.*.url", "remote.*.fetch", "user.name"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let old = b"[core]\n\tbare = false\n[alias]\n\tco = checkout\n";
        // git remote add: the user's alias is kept, the remote is on the list.
        let new = b"[core]\n\tbare = false\n[alias]\n\tco = checkout\n\
                    [remote \"origin\"]\n\turl = https://e.com/x.git\n";
        assert_eq!(config_text_over(new, Some(old), &safe), None);
        // A key off the list the old file lacks, or a changed value: refused.
        let added = b"[alias]\n\tco = checkout\n\tst = !sh -c evil\n";
        assert!(
            config_text_over(added, Some(old), &safe)
                .is_some_and(|w| w.contains("alias.st") && !w.contains("alias.co"))
        );
        let changed = b"[alias]\n\tco = !sh -c evil\n";
        assert!(
            config_text_over(changed, Some(old), &safe).is_some_and(|w| w.contains("alias.co"))
        );
        // With no old file (or one outside the subset git writes), every key is judged.
        assert!(config_text_over(old, None, &safe).is_some());
        assert!(config_text_over(old, Some(b"[x\n"), &safe).is_some());
    }
}
