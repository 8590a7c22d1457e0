//! The git config keys whose value names a program git runs: one reviewed table
//! ([`PROGRAM_KEYS`], a reason each), and where each program is, as git resolves it
//! ([`program_paths`]). The launch view keeps those programs read-only for the whole call
//! when they lie inside a writable root; the classifier (`runs_program`, `git_code`) reads
//! the same table.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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
    /// A program only when the value is a path (holds a `/`): else a host or a name.
    PathOnly,
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

/// The config keys whose value names a program git runs (git-config(1)): the one list of
/// them (the classifier's `runs_program` and `git_code` read it too). A program of one
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
        kind: ProgramKind::PathOnly,
        reason: "git send-email runs it when it is a path (else it is the mail server's host)",
    },
    ProgramKey {
        key: "man.viewer",
        kind: ProgramKind::Command,
        reason: "the man viewer git help starts (by name, or the command of man.*.cmd)",
    },
    ProgramKey {
        key: "web.browser",
        kind: ProgramKind::Command,
        reason: "the browser git help --web and instaweb start",
    },
    ProgramKey {
        key: "http.proxy",
        kind: ProgramKind::PathOnly,
        reason: "the proxy of http fetches; treated as a program when it holds a /, as the classifier always did",
    },
    ProgramKey {
        key: "http.*.proxy",
        kind: ProgramKind::PathOnly,
        reason: "the proxy of one URL's fetches; as http.proxy",
    },
    ProgramKey {
        key: "remote.*.proxy",
        kind: ProgramKind::PathOnly,
        reason: "the proxy of one remote; as http.proxy",
    },
    ProgramKey {
        key: "ssh.variant",
        kind: ProgramKind::Command,
        reason: "which ssh command line git builds (plink, putty, tortoiseplink): kept with the programs, as the classifier always did",
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

impl ProgramKey {
    /// Whether git runs something for this key with `value` (a boolean of a
    /// [`ProgramKind::CommandOrBool`] key, an alias without `!`, an empty helper or a
    /// [`ProgramKind::PathOnly`] value without `/` run nothing).
    pub fn runs(&self, value: &[u8]) -> bool {
        let v = value.trim_ascii();
        match self.kind {
            ProgramKind::Command | ProgramKind::Dir => true,
            ProgramKind::CommandOrBool => !is_bool(v),
            ProgramKind::Bang => v.starts_with(b"!"),
            ProgramKind::Helper => !v.is_empty(),
            ProgramKind::PathOnly => v.contains(&b'/'),
        }
    }
}

/// The entry of [`PROGRAM_KEYS`] for `key` (as git lists it).
pub fn program_key(key: &str) -> Option<&'static ProgramKey> {
    PROGRAM_KEYS
        .iter()
        .find(|p| match p.key.strip_suffix(".*") {
            // `section.*`: any name, no subsection (`alias.st`, `pager.log`).
            Some(section) => key
                .split_once('.')
                .is_some_and(|(s, name)| s == section && !name.is_empty() && !name.contains('.')),
            None => efr_sandbox_wire::gitconfig::key_matches(p.key, key),
        })
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
pub(crate) fn git_path(value: &[u8], base: &Path, home: &Path) -> Option<PathBuf> {
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
        ProgramKind::PathOnly if !v.contains(&b'/') => return Vec::new(),
        ProgramKind::PathOnly => v,
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
}
