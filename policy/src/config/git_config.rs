//! What git reads and runs from a repository's config, for the launch view: the files a
//! config includes (`include.path`, `includeIf.*.path`) and the programs its keys name
//! ([`PROGRAM_KEYS`]). The view keeps both read-only for the whole call when they are inside
//! a writable root: a `git status` the user's prompt runs while the call runs reads the
//! included file and runs `core.fsmonitor`.
//!
//! The keys come from git's own answer where the service asked git (`git config --list
//! --show-origin -z`, see `efr_call::git_dirs`), else from the built-in line reader
//! ([`crate::classify::git::read_config`], one file at a time). Includes are followed
//! whatever their condition (an `includeIf "onbranch:..."` turns true when the branch
//! changes, `gitdir:` when the repository moves), up to git's depth.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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

/// How the value of a program key names what git runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramKind {
    /// A shell command: git runs it with `sh -c`; its first word is the program.
    Command,
    /// A shell command, or a boolean (`true`, `false`, ...: then git runs nothing of it).
    CommandOrBool,
    /// A shell command only when the value starts with `!` (else a git command).
    Bang,
    /// `credential.helper`: `!` and a shell command, an absolute path and its arguments, or
    /// a name git runs as `git credential-NAME` (from git's exec path: nothing of a root).
    Helper,
    /// A directory of programs (`core.hooksPath`): the whole value is the path.
    Dir,
}

/// A config key whose value names a program git runs, and why it is on the list.
#[derive(Debug, Clone, Copy)]
pub struct ProgramKey {
    /// The key: `section.name`, `section.*.name` for any subsection, or `section.*` for
    /// any name without a subsection.
    pub key: &'static str,
    /// How its value names the program.
    pub kind: ProgramKind,
    /// When git runs it.
    pub reason: &'static str,
}

/// The config keys whose value names a program git runs (git-config(1)). A program of one
/// of these, in a repository the view finds or in the user's global config, that lies
/// inside a writable root is kept read-only for the whole call: the call may not rewrite
/// the script git would run at the user's next command.
pub const PROGRAM_KEYS: &[ProgramKey] = &[
    ProgramKey {
        key: "core.fsmonitor",
        kind: ProgramKind::CommandOrBool,
        reason: "a hook git runs at every status, diff and add to list changed files (true: git's own daemon)",
    },
    ProgramKey {
        key: "core.hookspath",
        kind: ProgramKind::Dir,
        reason: "the directory git runs every hook from",
    },
    ProgramKey {
        key: "core.pager",
        kind: ProgramKind::Command,
        reason: "the pager of log, diff, show and every paged command",
    },
    ProgramKey {
        key: "pager.*",
        kind: ProgramKind::CommandOrBool,
        reason: "the pager of one command (a boolean only turns paging on or off)",
    },
    ProgramKey {
        key: "core.editor",
        kind: ProgramKind::Command,
        reason: "the editor of commit messages, tags and interactive rebases",
    },
    ProgramKey {
        key: "sequence.editor",
        kind: ProgramKind::Command,
        reason: "the editor of an interactive rebase's todo list",
    },
    ProgramKey {
        key: "core.sshcommand",
        kind: ProgramKind::Command,
        reason: "the ssh of every fetch and push over ssh",
    },
    ProgramKey {
        key: "core.askpass",
        kind: ProgramKind::Command,
        reason: "the program git asks for a user name or password",
    },
    ProgramKey {
        key: "core.gitproxy",
        kind: ProgramKind::Command,
        reason: "the proxy command of git:// fetches",
    },
    ProgramKey {
        key: "core.alternaterefscommand",
        kind: ProgramKind::Command,
        reason: "lists the refs of an alternate object store at a fetch or push",
    },
    ProgramKey {
        key: "credential.helper",
        kind: ProgramKind::Helper,
        reason: "the credential helper of every authenticated fetch and push",
    },
    ProgramKey {
        key: "credential.*.helper",
        kind: ProgramKind::Helper,
        reason: "the credential helper of one URL",
    },
    ProgramKey {
        key: "diff.external",
        kind: ProgramKind::Command,
        reason: "the external diff of git diff",
    },
    ProgramKey {
        key: "diff.*.command",
        kind: ProgramKind::Command,
        reason: "the diff driver of the files .gitattributes gives that driver",
    },
    ProgramKey {
        key: "diff.*.textconv",
        kind: ProgramKind::Command,
        reason: "turns a file into text for diff, log -p and blame",
    },
    ProgramKey {
        key: "interactive.difffilter",
        kind: ProgramKind::Command,
        reason: "filters the diff add -p and friends show",
    },
    ProgramKey {
        key: "filter.*.clean",
        kind: ProgramKind::Command,
        reason: "runs at add and status on the files .gitattributes gives that filter",
    },
    ProgramKey {
        key: "filter.*.smudge",
        kind: ProgramKind::Command,
        reason: "runs at checkout on the files .gitattributes gives that filter",
    },
    ProgramKey {
        key: "filter.*.process",
        kind: ProgramKind::Command,
        reason: "a long-running filter started at add, status and checkout",
    },
    ProgramKey {
        key: "merge.*.driver",
        kind: ProgramKind::Command,
        reason: "the merge driver of the files .gitattributes gives that driver",
    },
    ProgramKey {
        key: "mergetool.*.cmd",
        kind: ProgramKind::Command,
        reason: "the command of git mergetool",
    },
    ProgramKey {
        key: "mergetool.*.path",
        kind: ProgramKind::Command,
        reason: "the program of a mergetool",
    },
    ProgramKey {
        key: "difftool.*.cmd",
        kind: ProgramKind::Command,
        reason: "the command of git difftool",
    },
    ProgramKey {
        key: "difftool.*.path",
        kind: ProgramKind::Command,
        reason: "the program of a difftool",
    },
    ProgramKey {
        key: "gpg.program",
        kind: ProgramKind::Command,
        reason: "signs and verifies commits and tags (commit -S, log --show-signature)",
    },
    ProgramKey {
        key: "gpg.*.program",
        kind: ProgramKind::Command,
        reason: "signs and verifies with one format (openpgp, x509, ssh)",
    },
    ProgramKey {
        key: "gpg.ssh.defaultkeycommand",
        kind: ProgramKind::Command,
        reason: "names the ssh signing key at every signed commit",
    },
    ProgramKey {
        key: "alias.*",
        kind: ProgramKind::Bang,
        reason: "an alias starting with ! is a shell command, run from the work tree's top",
    },
    ProgramKey {
        key: "submodule.*.update",
        kind: ProgramKind::Bang,
        reason: "an update mode starting with ! is a command git submodule update runs",
    },
    ProgramKey {
        key: "uploadpack.packobjectshook",
        kind: ProgramKind::Command,
        reason: "runs instead of pack-objects when the repository serves a fetch",
    },
    ProgramKey {
        key: "remote.*.uploadpack",
        kind: ProgramKind::Command,
        reason: "the upload-pack a fetch from a local or ssh remote starts",
    },
    ProgramKey {
        key: "remote.*.receivepack",
        kind: ProgramKind::Command,
        reason: "the receive-pack a push to a local or ssh remote starts",
    },
    ProgramKey {
        key: "trailer.*.command",
        kind: ProgramKind::Command,
        reason: "computes a trailer's value (interpret-trailers, commit --trailer)",
    },
    ProgramKey {
        key: "trailer.*.cmd",
        kind: ProgramKind::Command,
        reason: "computes a trailer's value (interpret-trailers, commit --trailer)",
    },
    ProgramKey {
        key: "man.*.cmd",
        kind: ProgramKind::Command,
        reason: "the man viewer of git help",
    },
    ProgramKey {
        key: "man.*.path",
        kind: ProgramKind::Command,
        reason: "the program of a man viewer of git help",
    },
    ProgramKey {
        key: "browser.*.cmd",
        kind: ProgramKind::Command,
        reason: "the browser of git help --web and instaweb",
    },
    ProgramKey {
        key: "browser.*.path",
        kind: ProgramKind::Command,
        reason: "the program of a browser of git help --web",
    },
    ProgramKey {
        key: "guitool.*.cmd",
        kind: ProgramKind::Command,
        reason: "a command of git gui's tools menu",
    },
    ProgramKey {
        key: "sendemail.sendmailcmd",
        kind: ProgramKind::Command,
        reason: "the mailer of git send-email",
    },
    ProgramKey {
        key: "sendemail.smtpserver",
        kind: ProgramKind::Command,
        reason: "git send-email runs it when it is a path",
    },
    ProgramKey {
        key: "sendemail.tocmd",
        kind: ProgramKind::Command,
        reason: "computes the recipients of git send-email",
    },
    ProgramKey {
        key: "sendemail.cccmd",
        kind: ProgramKind::Command,
        reason: "computes the copies of git send-email",
    },
    ProgramKey {
        key: "instaweb.httpd",
        kind: ProgramKind::Command,
        reason: "the web server git instaweb starts",
    },
];

/// The entry of [`PROGRAM_KEYS`] for `key` (as git lists it).
pub fn program_key(key: &str) -> Option<&'static ProgramKey> {
    PROGRAM_KEYS
        .iter()
        .find(|p| match p.key.strip_suffix(".*") {
            // `section.*`: any name, no subsection (`alias.st`, `pager.log`).
            Some(section) => key
                .split_once('.')
                .is_some_and(|(s, name)| s == section && !name.is_empty() && !name.contains('.')),
            None => super::git_key_matches(p.key, key),
        })
}

/// Whether `key` includes another file (`include.path`, `includeIf.<cond>.path`).
pub fn is_include(key: &str) -> bool {
    key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"))
}

/// `p` with `.` and `..` taken lexically (`..` at `/` stays at `/`).
pub(crate) fn lexical(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// A path value as git expands it (`~` and `~/` against the home; `~user/` and
/// `%(prefix)/` are not resolved: None), relative ones against `base`.
fn git_path(value: &[u8], base: &Path, home: &Path) -> Option<PathBuf> {
    if value.is_empty() || value.starts_with(b"%(prefix)/") {
        return None;
    }
    let p = Path::new(OsStr::from_bytes(value));
    if value == b"~" || value.starts_with(b"~/") {
        return Some(lexical(&crate::path::expand_home_path(p, home)));
    }
    if value.starts_with(b"~") {
        return None;
    }
    Some(lexical(&base.join(p)))
}

/// The file an include key's `value` names, as git resolves it: relative to the directory
/// of the including `file`, `~/` against the home.
pub fn include_target(value: &[u8], file: &Path, home: &Path) -> Option<PathBuf> {
    git_path(value, file.parent().unwrap_or(Path::new("/")), home)
}

/// The words of a shell command as `sh` splits simple ones: blanks separate, quotes and
/// backslashes group. Bounded: at most 32 words.
fn shell_words(text: &[u8]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let mut cur: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < text.len() && words.len() < 32 {
        let c = text[i];
        match c {
            b' ' | b'\t' | b'\n' => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            b'\'' | b'"' => {
                let w = cur.get_or_insert_with(Vec::new);
                let end = text[i + 1..]
                    .iter()
                    .position(|b| *b == c)
                    .map_or(text.len(), |e| i + 1 + e);
                w.extend_from_slice(&text[i + 1..end]);
                i = end;
            }
            b'\\' if i + 1 < text.len() => {
                cur.get_or_insert_with(Vec::new).push(text[i + 1]);
                i += 1;
            }
            // A command separator ends the first command: what follows is another program.
            b';' | b'&' | b'|' if cur.is_none() && !words.is_empty() => break,
            _ => cur.get_or_insert_with(Vec::new).push(c),
        }
        i += 1;
    }
    if let Some(w) = cur {
        words.push(w);
    }
    words
}

fn is_bool(v: &[u8]) -> bool {
    let l = v.trim_ascii().to_ascii_lowercase();
    matches!(
        l.as_slice(),
        b"" | b"true" | b"false" | b"yes" | b"no" | b"on" | b"off" | b"1" | b"0"
    )
}

/// The paths of the programs a config key runs (see [`PROGRAM_KEYS`]), resolved as git
/// resolves them: the first word of its command (`!` taken off) when it holds a `/`,
/// absolute, `~/` against the home, or relative to the work tree's top `top` (where git
/// runs hooks, aliases, fsmonitor and filters). Later words that hold a `/` and name a
/// file that exists (`sh scripts/fsmon.sh`) are the program's too. A word without `/` is
/// looked up on PATH: nothing of a root. Empty for any other key.
pub fn program_paths(key: &str, value: &[u8], top: &Path, home: &Path) -> Vec<PathBuf> {
    let Some(pk) = program_key(key) else {
        return Vec::new();
    };
    let v = value.trim_ascii();
    let command: &[u8] = match pk.kind {
        ProgramKind::Dir => return git_path(v, top, home).into_iter().collect(),
        ProgramKind::CommandOrBool if is_bool(v) => return Vec::new(),
        ProgramKind::Command | ProgramKind::CommandOrBool => v,
        ProgramKind::Bang => match v.strip_prefix(b"!") {
            Some(c) => c,
            None => return Vec::new(),
        },
        ProgramKind::Helper => match v.strip_prefix(b"!") {
            Some(c) => c,
            None if v.starts_with(b"/") => v,
            None => return Vec::new(),
        },
    };
    let mut out = Vec::new();
    for (n, w) in shell_words(command).iter().enumerate() {
        if !w.contains(&b'/') {
            continue;
        }
        let Some(p) = git_path(w, top, home) else {
            continue;
        };
        if n == 0 || std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
            out.push(p);
        }
    }
    out
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
        crate::classify::git::read_config(file, home, None, &mut entries, 8);
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
    fn program_paths_as_git_runs_them() {
        let top = Path::new("/w/p");
        let home = Path::new("/h");
        let pp = |k: &str, v: &str| program_paths(k, v.as_bytes(), top, home);
        assert_eq!(
            pp("core.fsmonitor", "./scripts/fsmon.sh"),
            [PathBuf::from("/w/p/scripts/fsmon.sh")]
        );
        assert!(pp("core.fsmonitor", "true").is_empty());
        assert!(pp("core.fsmonitor", "false").is_empty());
        assert_eq!(
            pp("alias.st", "!tools/st --short"),
            [PathBuf::from("/w/p/tools/st")]
        );
        assert!(pp("alias.st", "status --short").is_empty());
        assert_eq!(
            pp("core.pager", "~/bin/pg -R"),
            [PathBuf::from("/h/bin/pg")]
        );
        assert_eq!(
            pp("core.editor", "'/opt/my editor/ed' -w"),
            [PathBuf::from("/opt/my editor/ed")]
        );
        assert!(pp("core.editor", "vim").is_empty());
        assert_eq!(
            pp("core.hookspath", ".husky/_"),
            [PathBuf::from("/w/p/.husky/_")]
        );
        assert_eq!(
            pp("diff.my.driver.textconv", "../conv"),
            [PathBuf::from("/w/conv")]
        );
        assert!(pp("credential.helper", "store").is_empty());
        assert!(pp("credential.helper", "./x").is_empty());
        assert_eq!(
            pp("credential.https://h.example.helper", "!./x get"),
            [PathBuf::from("/w/p/x")]
        );
        assert_eq!(
            pp("credential.helper", "/usr/lib/h --f"),
            [PathBuf::from("/usr/lib/h")]
        );
        assert!(pp("user.name", "./x").is_empty());
        assert!(pp("pager.log", "false").is_empty());
        assert_eq!(
            pp("FILTER.lfs.CLEAN", "./x %f").len(),
            1,
            "section and name without case"
        );
        assert_eq!(pp("filter.lfs.clean", "./x %f").len(), 1);
    }

    #[test]
    fn a_later_word_is_a_program_when_it_names_a_file() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path();
        std::fs::create_dir_all(top.join("scripts")).unwrap();
        std::fs::write(top.join("scripts/fsmon.py"), "").unwrap();
        let v = program_paths(
            "core.fsmonitor",
            b"python3 scripts/fsmon.py other/none",
            top,
            Path::new("/h"),
        );
        assert_eq!(v, [top.join("scripts/fsmon.py")]);
    }

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
