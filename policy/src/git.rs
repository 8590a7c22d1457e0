//! The repository reader: where a work tree's git dir and common dir are (git's own rules
//! for `.git` files, links and `commondir`), the entries of a git config file with its
//! includes, and a config file's text without the keys that make git run a program. It
//! reads files only and judges nothing: the launch view (`config`), the credential
//! knowledge (`tokens`), the classifier and the call use it.
//!
//! - `programs`: the one reviewed list of the config keys whose value is a program git runs.

pub mod programs;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::path::normalize;

/// The git dirs of a work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    /// The work tree's root.
    pub worktree: PathBuf,
    /// Its own git dir (`.git`, or the dir a `.git` file points to).
    pub git_dir: PathBuf,
    /// The common dir (`commondir` of a linked worktree), else the git dir.
    pub common: PathBuf,
}

/// What the built-in reader makes of the repository a path is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitLookup {
    /// No `.git` in the directory or any above it.
    NotFound,
    /// The git dirs git would use.
    Found(GitDirs),
    /// A `.git` at `worktree` whose git dirs the reader cannot tell the way git would (git
    /// may refuse the repository, or read it in a way the reader does not follow): treat
    /// the repository conservatively, never as one without git dirs. `candidates`: the
    /// existing dirs its `.git` file and `commondir` could name, read git's way or
    /// trimmed (for callers that protect them all).
    Unknown {
        /// The directory that holds the `.git`.
        worktree: PathBuf,
        /// The existing dirs the `.git` file and `commondir` could name.
        candidates: Vec<PathBuf>,
    },
}

/// The git dirs of the repository `path` is in (walking up), when the built-in reader
/// can tell them ([`lookup_git_dir`] says [`GitLookup::Found`]).
pub fn find_git_dir(path: &Path) -> Option<GitDirs> {
    match lookup_git_dir(path) {
        GitLookup::Found(d) => Some(d),
        _ => None,
    }
}

/// The largest `.git` file git reads (`read_gitfile_gently`).
const MAX_GITFILE: u64 = 1 << 20;

/// The repository `path` is in (walking up to the first `.git`), read by git's rules
/// (git 2.47 `setup.c`, `read_gitfile_gently` and `get_common_dir_noenv`, checked against
/// git by `service/tests/git_dirs_diff.rs`):
///
/// - a `.git` file must start with exactly `gitdir: `; only trailing `\n` and `\r` are
///   taken off (leading and other trailing blanks are part of the path); the path ends at
///   a NUL byte; a relative one is taken from the directory holding `.git` (not from where
///   a `.git` link points);
/// - a `commondir` is read the same way (trailing `\n`/`\r` only, up to a NUL), a relative
///   one from the git dir; an empty file, a directory or one that cannot be read is an
///   error to git;
/// - paths are bytes, not UTF-8, and are resolved as the kernel does (links followed
///   before `..`: `realpath`), never lexically;
/// - the git dir must look like one to git (`is_git_directory`): a valid `HEAD`, and
///   `objects/` and `refs/` in the common dir.
///
/// Whatever falls outside these rules is [`GitLookup::Unknown`], never a guess.
pub fn lookup_git_dir(path: &Path) -> GitLookup {
    let mut cur = Some(normalize(path));
    let mut steps = 0;
    while let Some(dir) = cur {
        steps += 1;
        if steps > 64 {
            return GitLookup::NotFound;
        }
        let dotgit = dir.join(".git");
        if std::fs::symlink_metadata(&dotgit).is_ok() {
            return read_dotgit(dir, &dotgit);
        }
        cur = dir.parent().map(Path::to_path_buf);
    }
    GitLookup::NotFound
}

/// `text` as git takes a path from a `.git` file or `commondir`: without trailing `\n` and
/// `\r`, up to the first NUL.
fn git_path_bytes(text: &[u8]) -> &[u8] {
    let mut t = text;
    while let Some(r) = t.strip_suffix(b"\n").or_else(|| t.strip_suffix(b"\r")) {
        t = r;
    }
    match t.iter().position(|b| *b == 0) {
        Some(i) => &t[..i],
        None => t,
    }
}

/// `rel` (bytes) taken from `base` as git does: as it is when absolute, else `base/rel`.
fn git_join(base: &Path, rel: &[u8]) -> PathBuf {
    if rel.starts_with(b"/") {
        PathBuf::from(OsStr::from_bytes(rel))
    } else {
        let mut b = base.as_os_str().as_bytes().to_vec();
        b.push(b'/');
        b.extend_from_slice(rel);
        PathBuf::from(OsStr::from_bytes(&b))
    }
}

/// The existing dirs `rel` could name from `base`: git's reading and a trimmed one, each
/// resolved and lexically.
fn readings(base: &Path, rel: &[u8], out: &mut Vec<PathBuf>) {
    let git = git_path_bytes(rel);
    for r in [git, rel.trim_ascii()] {
        let p = git_join(base, r);
        for c in [std::fs::canonicalize(&p).ok(), Some(normalize(&p))]
            .into_iter()
            .flatten()
        {
            if c.is_dir() && !out.contains(&c) {
                out.push(c);
            }
        }
    }
}

fn read_dotgit(dir: PathBuf, dotgit: &Path) -> GitLookup {
    let mut candidates = Vec::new();
    let unknown = |worktree: PathBuf, mut candidates: Vec<PathBuf>, more: &[&Path]| {
        for m in more {
            if let Ok(c) = std::fs::canonicalize(m) {
                if c.is_dir() && !candidates.contains(&c) {
                    candidates.push(c);
                }
            }
        }
        GitLookup::Unknown {
            worktree,
            candidates,
        }
    };
    // Git reads `.git` through a link (stat); a dangling one it passes over.
    let Ok(meta) = std::fs::metadata(dotgit) else {
        return unknown(dir, candidates, &[]);
    };
    let (git_dir, resolved) = if meta.is_file() {
        if meta.len() > MAX_GITFILE {
            return unknown(dir, candidates, &[]);
        }
        let Ok(text) = std::fs::read(dotgit) else {
            return unknown(dir, candidates, &[]);
        };
        // Relative to the directory holding `.git`, as the kernel finds it.
        let base = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        let body = text
            .strip_prefix(b"gitdir:")
            .map(|t| t.strip_prefix(b" ").unwrap_or(t));
        if let Some(b) = body {
            readings(&base, b, &mut candidates);
        }
        let Some(rel) = text.strip_prefix(b"gitdir: ") else {
            return unknown(dir, candidates, &[]);
        };
        if rel.iter().rev().all(|b| matches!(b, b'\n' | b'\r')) {
            // "no path in gitfile"
            return unknown(dir, candidates, &[]);
        }
        let p = git_join(&base, git_path_bytes(rel));
        match std::fs::canonicalize(&p) {
            Ok(c) => (c.clone(), c),
            Err(_) => return unknown(dir, candidates, &[]),
        }
    } else if meta.is_dir() {
        match std::fs::canonicalize(dotgit) {
            Ok(c) => (dotgit.to_path_buf(), c),
            Err(_) => return unknown(dir, candidates, &[]),
        }
    } else {
        return unknown(dir, candidates, &[]);
    };
    let cd = resolved.join("commondir");
    // Git looks for it with lstat (a dangling link is an error to it), reads it through
    // a link.
    let common = match std::fs::symlink_metadata(&cd).and_then(|_| std::fs::metadata(&cd)) {
        Err(_) if std::fs::symlink_metadata(&cd).is_err() => None,
        Ok(m) if m.is_file() && m.len() > 0 && m.len() <= MAX_GITFILE => match std::fs::read(&cd) {
            Ok(text) if !text.is_empty() => {
                readings(&resolved, &text, &mut candidates);
                let p = git_join(&resolved, git_path_bytes(&text));
                match std::fs::canonicalize(&p) {
                    Ok(c) => Some(c),
                    Err(_) => return unknown(dir, candidates, &[&resolved]),
                }
            }
            _ => return unknown(dir, candidates, &[&resolved]),
        },
        _ => return unknown(dir, candidates, &[&resolved]),
    };
    let common_dir = common.clone().unwrap_or_else(|| resolved.clone());
    if !is_git_directory(&resolved, &common_dir) {
        return unknown(dir, candidates, &[&resolved, &common_dir]);
    }
    let common = match common {
        Some(c) => c,
        None => git_dir.clone(),
    };
    GitLookup::Found(GitDirs {
        worktree: dir,
        git_dir,
        common,
    })
}

/// Whether git takes `git_dir` (with common dir `common`) for a git dir
/// (`is_git_directory`): a `HEAD` git accepts, `objects/` and `refs/` in the common dir.
fn is_git_directory(git_dir: &Path, common: &Path) -> bool {
    valid_head(&git_dir.join("HEAD"))
        && common.join("objects").is_dir()
        && common.join("refs").is_dir()
}

/// `validate_headref`: a link into `refs/`, or a file `ref: refs/...` (blanks allowed
/// after `ref:`) or starting with an object id in hex.
fn valid_head(head: &Path) -> bool {
    if let Ok(t) = std::fs::read_link(head) {
        if t.as_os_str().as_bytes().starts_with(b"refs/") {
            return true;
        }
    }
    let Ok(f) = std::fs::File::open(head) else {
        return false;
    };
    let mut buf = Vec::new();
    if std::io::Read::read_to_end(&mut std::io::Read::take(f, 255), &mut buf).is_err() {
        return false;
    }
    if let Some(r) = buf.strip_prefix(b"ref:") {
        let r = r.trim_ascii_start();
        if r.starts_with(b"refs/") {
            return true;
        }
    }
    [40, 64]
        .iter()
        .any(|n| buf.len() >= *n && buf[..*n].iter().all(u8::is_ascii_hexdigit))
}

fn read_small(p: &Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

/// One `key = value` of a git config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// `section.subsection.key`, section and key lowercased.
    pub key: String,
    /// The value, unquoted; `true` for a key written without `=`.
    pub value: String,
    /// The config file the entry was read from (the file itself or one it includes).
    pub file: PathBuf,
}

/// Read a git config file and the files it includes (depth-limited).
pub fn read_config(
    file: &Path,
    home: &Path,
    git_dir: Option<&Path>,
    out: &mut Vec<ConfigEntry>,
    depth: u32,
) {
    if depth > 8 {
        return;
    }
    let Some(text) = read_small(file) else { return };
    let mut section = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut rest = line;
        if line.starts_with('[') {
            let Some(end) = line.find(']') else { continue };
            let head = &line[1..end];
            section = match head.split_once(char::is_whitespace) {
                Some((s, sub)) => {
                    let sub = sub.trim().trim_matches('"').replace("\\\"", "\"");
                    format!("{}.{}", s.to_ascii_lowercase(), sub)
                }
                None => match head.split_once('.') {
                    Some((s, sub)) => {
                        format!("{}.{}", s.to_ascii_lowercase(), sub.to_ascii_lowercase())
                    }
                    None => head.to_ascii_lowercase(),
                },
            };
            rest = line[end + 1..].trim();
            if rest.is_empty() {
                continue;
            }
        }
        let (k, v) = match rest.split_once('=') {
            Some((k, v)) => (k.trim(), unquote(v.trim())),
            None => (rest, "true".to_string()),
        };
        let key = format!("{section}.{}", k.to_ascii_lowercase());
        out.push(ConfigEntry {
            key: key.clone(),
            value: v.clone(),
            file: file.to_path_buf(),
        });
        let include = key == "include.path"
            || (key.starts_with("includeif.")
                && key.ends_with(".path")
                && include_if(&key, git_dir, home));
        if include {
            let p = crate::path::expand_home(&v, home);
            let p = if p.is_absolute() {
                p
            } else {
                file.parent().unwrap_or(Path::new("/")).join(p)
            };
            read_config(&normalize(&p), home, git_dir, out, depth + 1);
        }
    }
}

/// `includeIf "gitdir:..."` conditions: followed when the git dir matches (a prefix test;
/// other conditions are followed too, which can only add items).
fn include_if(key: &str, git_dir: Option<&Path>, home: &Path) -> bool {
    let cond = key
        .trim_start_matches("includeif.")
        .trim_end_matches(".path");
    if let Some(pat) = cond
        .strip_prefix("gitdir:")
        .or_else(|| cond.strip_prefix("gitdir/i:"))
    {
        let Some(g) = git_dir else { return false };
        let pat = crate::path::expand_home(pat.trim_end_matches("**").trim_end_matches('/'), home);
        return g.starts_with(&pat)
            || g.to_string_lossy()
                .contains(pat.to_string_lossy().trim_start_matches('/'));
    }
    true
}

fn unquote(v: &str) -> String {
    // strip a trailing comment outside quotes and the quotes
    let mut out = String::new();
    let mut in_q = false;
    let mut esc = false;
    for c in v.chars() {
        if esc {
            out.push(match c {
                'n' => '\n',
                't' => '\t',
                o => o,
            });
            esc = false;
            continue;
        }
        match c {
            '\\' => esc = true,
            '"' => in_q = !in_q,
            '#' | ';' if !in_q => break,
            _ => out.push(c),
        }
    }
    out.trim().to_string()
}

/// Config keys whose value is a program git runs (`key` as `section[.sub].name`, section
/// and name lower case): those of the one reviewed list,
/// [`programs::PROGRAM_KEYS`], with a value that runs something.
pub fn runs_program(key: &str, value: &str) -> bool {
    programs::program_key(key).is_some_and(|p| p.runs(value.as_bytes()))
}

/// `text` (a git config file) without the lines that make git run a program: the keys
/// [`runs_program`] names and includes (`include.path`, `includeIf.*.path`, which can
/// bring such keys from elsewhere). Every other line is kept as written. Returns the new
/// text and the keys taken out.
pub fn strip_code(text: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(text.len());
    let mut removed = Vec::new();
    let mut section = String::new();
    let mut dropping_continuation = false;
    for raw in text.split_inclusive('\n') {
        let line = raw.trim_end_matches(['\n', '\r']);
        let continues = line.ends_with('\\') && !line.ends_with("\\\\");
        if dropping_continuation {
            dropping_continuation = continues;
            continue;
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            out.push_str(raw);
            continue;
        }
        let mut rest = t;
        let mut header = "";
        if t.starts_with('[') {
            let Some(end) = t.find(']') else {
                out.push_str(raw);
                continue;
            };
            let head = &t[1..end];
            section = match head.split_once(char::is_whitespace) {
                Some((s, sub)) => format!(
                    "{}.{}",
                    s.to_ascii_lowercase(),
                    sub.trim().trim_matches('"').replace("\\\"", "\"")
                ),
                None => head.to_ascii_lowercase(),
            };
            header = &t[..=end];
            rest = t[end + 1..].trim();
            if rest.is_empty() {
                out.push_str(raw);
                continue;
            }
        }
        let (k, v) = match rest.split_once('=') {
            Some((k, v)) => (k.trim(), unquote(v.trim())),
            None => (rest, "true".to_string()),
        };
        let key = format!("{section}.{}", k.to_ascii_lowercase());
        let include =
            key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"));
        if runs_program(&key, &v) || include {
            removed.push(key);
            dropping_continuation = continues;
            if !header.is_empty() {
                out.push_str(header);
                out.push('\n');
            }
        } else {
            out.push_str(raw);
        }
    }
    (out, removed)
}

/// Whether a config line (without its newline) ends in a `\` that continues the value on
/// the next line (an odd number of trailing backslashes).
fn continues(line: &[u8]) -> bool {
    line.iter().rev().take_while(|b| **b == b'\\').count() % 2 == 1
}

/// `text` (a git config file, as bytes: git does not require UTF-8) without every key
/// `remove(key, value)` says to take out, and without the continuation lines of those
/// keys. Every other line is kept byte for byte (a kept value's continuation lines too),
/// and section headers stay. `key` is `section[.sub].name`, section and name lower case
/// (the subsection as written); `value` is the raw text after `=`, trimmed, its quotes
/// left on. Returns the new text and the keys taken out, in file order.
pub fn strip_config(
    text: &[u8],
    mut remove: impl FnMut(&str, &[u8]) -> bool,
) -> (Vec<u8>, Vec<String>) {
    let mut out = Vec::with_capacity(text.len());
    let mut removed = Vec::new();
    let mut section = String::new();
    // Inside a value continued from the line before: Some(dropping).
    let mut cont: Option<bool> = None;
    for raw in text.split_inclusive(|b| *b == b'\n') {
        let line = raw.strip_suffix(b"\n").unwrap_or(raw);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(dropping) = cont {
            cont = continues(line).then_some(dropping);
            if !dropping {
                out.extend_from_slice(raw);
            }
            continue;
        }
        let t = line.trim_ascii();
        if t.is_empty() || t.starts_with(b"#") || t.starts_with(b";") {
            out.extend_from_slice(raw);
            continue;
        }
        let mut rest = t;
        let mut header: &[u8] = b"";
        if t.starts_with(b"[") {
            let Some(end) = t.iter().position(|b| *b == b']') else {
                // Not a header git reads: a key line of its own (taken out unless
                // `remove` keeps it).
                if remove(&String::from_utf8_lossy(t), b"") {
                    removed.push(String::from_utf8_lossy(t).into_owned());
                } else {
                    out.extend_from_slice(raw);
                }
                continue;
            };
            let head = String::from_utf8_lossy(&t[1..end]);
            section = match head.split_once(char::is_whitespace) {
                Some((s, sub)) => format!(
                    "{}.{}",
                    s.to_ascii_lowercase(),
                    sub.trim().trim_matches('"').replace("\\\"", "\"")
                ),
                None => match head.split_once('.') {
                    // The old `[section.sub]` form: git lower-cases the subsection.
                    Some((s, sub)) => {
                        format!("{}.{}", s.to_ascii_lowercase(), sub.to_ascii_lowercase())
                    }
                    None => head.to_ascii_lowercase(),
                },
            };
            header = &t[..=end];
            rest = t[end + 1..].trim_ascii();
            if rest.is_empty() || rest.starts_with(b"#") || rest.starts_with(b";") {
                out.extend_from_slice(raw);
                continue;
            }
        }
        let (k, v) = match rest.iter().position(|b| *b == b'=') {
            Some(i) => (rest[..i].trim_ascii(), rest[i + 1..].trim_ascii()),
            None => (rest, &b""[..]),
        };
        let key = format!(
            "{section}.{}",
            String::from_utf8_lossy(k).to_ascii_lowercase()
        );
        let dropping = remove(&key, v);
        if dropping {
            removed.push(key);
            if !header.is_empty() {
                out.extend_from_slice(header);
                out.push(b'\n');
            }
        } else {
            out.extend_from_slice(raw);
        }
        cont = continues(line).then_some(dropping);
    }
    (out, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_parse() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let f = d.path().join("config");
        std::fs::write(&f, "[core]\n\tsshCommand = \"ssh -i x\" # c\n[remote \"origin\"]\n url = https://u:p@github.com/a/b\n[alias]\n x = !rm -rf /\n").unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        read_config(&f, d.path(), None, &mut out, 0);
        let keys: Vec<_> = out
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("core.sshcommand", "ssh -i x"),
                ("remote.origin.url", "https://u:p@github.com/a/b"),
                ("alias.x", "!rm -rf /")
            ]
        );
    }

    #[test]
    fn git_dirs_read_as_git_reads_them() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let b = std::fs::canonicalize(d.path()).unwrap_or_else(|e| panic!("{e}"));
        let repo = |p: &Path| {
            std::fs::create_dir_all(p.join("objects")).unwrap_or_else(|e| panic!("{e}"));
            std::fs::create_dir_all(p.join("refs")).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p.join("HEAD"), "ref: refs/heads/main\n")
                .unwrap_or_else(|e| panic!("{e}"));
        };
        let w = b.join("w");
        std::fs::create_dir_all(b.join("a/x/y")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("a/x/y", b.join("l")).unwrap_or_else(|e| panic!("{e}"));
        // Git's dir and the one a wrong reading lands in.
        for r in ["w/ in", "w/in", "a/x/t", "t", "t\u{fffd}"] {
            repo(&b.join(r));
        }
        repo(&b.join(OsStr::from_bytes(b"t\xff")));
        let dotgit = w.join(".git");
        let found = |text: &[u8]| {
            std::fs::write(&dotgit, text).unwrap_or_else(|e| panic!("{e}"));
            match lookup_git_dir(&w) {
                GitLookup::Found(g) => Some(g.git_dir),
                _ => None,
            }
        };
        // A leading blank is part of the path; only LF and CR come off the end.
        assert_eq!(found(b"gitdir:  in\r\n"), Some(w.join(" in")));
        // `..` after a link: where the link leads, not lexically.
        assert_eq!(found(b"gitdir: ../l/../t\n"), Some(b.join("a/x/t")));
        // Bytes that are not UTF-8.
        assert_eq!(
            found(b"gitdir: ../t\xff\n"),
            Some(b.join(OsStr::from_bytes(b"t\xff")))
        );
        // What git refuses is unknown, never a dir.
        for text in [
            &b"gitdir:in\n"[..],
            b"gitdir: in \n",
            b"GITDIR: in",
            b"",
            b"gitdir: \n",
        ] {
            assert_eq!(found(text), None, "{}", String::from_utf8_lossy(text));
            assert!(matches!(lookup_git_dir(&w), GitLookup::Unknown { .. }));
        }
        // A commondir: blanks kept, a dir that is not a git dir unknown.
        std::fs::write(&dotgit, "gitdir: in\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(w.join("in/commondir"), " in\n").unwrap_or_else(|e| panic!("{e}"));
        repo(&w.join("in/ in"));
        let common = |l| match l {
            GitLookup::Found(g) => Some(g.common),
            _ => None,
        };
        assert_eq!(common(lookup_git_dir(&w)), Some(w.join("in/ in")));
        std::fs::create_dir_all(b.join("plain")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(w.join("in/commondir"), "../../plain").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(common(lookup_git_dir(&w)), None);
    }

    #[test]
    fn strip_config_keeps_other_lines_as_bytes() {
        let text = b"[core]\n\tbare = false\n\tfsmonitor = \"x\"\n[user]\n\tname = a\\\n b\n[alias] st = !x \\\n  y\n[remote \"o\xffx\"]\n\turl = h\n";
        let (kept, removed) = strip_config(text, |k, _| {
            !matches!(k, "core.bare" | "user.name") && !k.starts_with("remote.")
        });
        assert_eq!(removed, ["core.fsmonitor", "alias.st"]);
        assert_eq!(
            kept,
            b"[core]\n\tbare = false\n[user]\n\tname = a\\\n b\n[alias]\n[remote \"o\xffx\"]\n\turl = h\n"
        );
    }
}
