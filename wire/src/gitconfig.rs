//! Git config text that a contained call leaves where git will read it, and which of its
//! keys run nothing.
//!
//! The write supervisor lets a call put a config into a directory git takes as a git dir
//! (`git init`, `git clone`, `git config` in a repository the call made) only after reading
//! it here: every key must be on the reviewed safe list (`git.safe_config_keys`). A reader
//! that is more lenient than git, or reads a line differently, would let a key through that
//! git then runs (`core.fsmonitor`, `core.pager`, an `include.path` naming another file).
//! So this reader takes only the subset of git's syntax that git itself writes (`git
//! config` and `git init` write `[section]` or `[section "sub"]` headers on lines of their
//! own, then `\tkey = value` lines), with the value rules of git's own parser
//! (`config.c`: `parse_value`), and refuses the whole text for anything else: a key on a
//! header's line, the old `[section.sub]` form, a continuation line, an escape git does not
//! know, a byte order mark, a NUL, a lone carriage return. What it accepts, git reads as the
//! same keys and values (checked against `git config --list --file` by the oracle test of
//! `service/tests/git_config_oracle.rs`).

/// The largest config text read (a config git writes for a repository is a few hundred
/// bytes; a larger one is refused, not read in part).
pub const MAX_CONFIG: usize = 1 << 20;

/// One key of a config text, as git names it: `section[.subsection].name`, the section
/// and the name in lower case, the subsection as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigKey {
    /// `section[.subsection].name`.
    pub name: String,
    /// The value's bytes after git's unquoting; `None` for a key with no `=` (git's
    /// boolean true).
    pub value: Option<Vec<u8>>,
}

/// Why a config text is not read: it is outside the subset git writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictError {
    /// Longer than [`MAX_CONFIG`].
    #[error("a git config of more than {MAX_CONFIG} bytes")]
    TooLong,
    /// A byte git's writer never writes (a NUL, a byte order mark, a lone carriage return,
    /// a control character).
    #[error("line {line}: a byte git does not write in a config")]
    Byte {
        /// The line (from 1).
        line: usize,
    },
    /// A section header outside the forms git writes.
    #[error("line {line}: a section header git does not write")]
    Header {
        /// The line (from 1).
        line: usize,
    },
    /// A key before any section header.
    #[error("line {line}: a key outside a section")]
    NoSection {
        /// The line (from 1).
        line: usize,
    },
    /// A line that is neither blank, a comment, a header nor a key.
    #[error("line {line}: not a line git reads as a key")]
    Line {
        /// The line (from 1).
        line: usize,
    },
    /// A value continued on the next line, an escape git refuses, or an open quote.
    #[error("line {line}: a value git reads otherwise or refuses")]
    Value {
        /// The line (from 1).
        line: usize,
    },
}

/// The keys of `text`, in order, when it is in the subset git writes (see the module doc).
pub fn parse_strict(text: &[u8]) -> Result<Vec<ConfigKey>, StrictError> {
    if text.len() > MAX_CONFIG {
        return Err(StrictError::TooLong);
    }
    let mut out = Vec::new();
    let mut section: Option<String> = None;
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let last = lines.len() - 1;
    for (i, raw) in lines.into_iter().enumerate() {
        let line = i + 1;
        // Git reads "\r\n" as an end of line, and a "\r" anywhere else as a byte.
        let raw = match raw.strip_suffix(b"\r") {
            Some(r) if i < last => r,
            _ => raw,
        };
        if raw.iter().any(|&b| b == 0 || b == b'\r') || (i == 0 && raw.starts_with(b"\xef\xbb\xbf"))
        {
            return Err(StrictError::Byte { line });
        }
        let t = trim_start(raw);
        match t.first() {
            None | Some(b'#') | Some(b';') => {}
            Some(b'[') => section = Some(header(t, line)?),
            Some(c) if c.is_ascii_alphabetic() => {
                let Some(s) = &section else {
                    return Err(StrictError::NoSection { line });
                };
                out.push(key_line(s, t, line)?);
            }
            Some(_) => return Err(StrictError::Line { line }),
        }
    }
    Ok(out)
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
    &b[n..]
}

/// Git's `iskeychar`.
fn key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// `[name]` or `[name "sub"]`, then blanks and at most a comment: the section's key prefix.
fn header(t: &[u8], line: usize) -> Result<String, StrictError> {
    let bad = StrictError::Header { line };
    let n = t[1..].iter().take_while(|&&c| key_char(c)).count();
    if n == 0 {
        return Err(bad);
    }
    let name = String::from_utf8_lossy(&t[1..=n]).to_ascii_lowercase();
    let mut rest = &t[1 + n..];
    let mut full = name;
    if rest.first().is_some_and(|&c| c == b' ' || c == b'\t') {
        rest = trim_start(rest);
        let Some(body) = rest.strip_prefix(b"\"") else {
            return Err(bad);
        };
        let mut sub = Vec::new();
        let mut i = 0;
        loop {
            match body.get(i) {
                None => return Err(bad),
                Some(b'"') => break,
                Some(b'\\') => match body.get(i + 1) {
                    Some(&c @ (b'"' | b'\\')) => {
                        sub.push(c);
                        i += 2;
                    }
                    _ => return Err(bad),
                },
                Some(&c) if c < 0x20 || c == 0x7f => return Err(bad),
                Some(&c) => {
                    sub.push(c);
                    i += 1;
                }
            }
        }
        let Ok(sub) = String::from_utf8(sub) else {
            return Err(bad);
        };
        full.push('.');
        full.push_str(&sub);
        rest = &body[i + 1..];
    }
    let Some(after) = rest.strip_prefix(b"]") else {
        return Err(bad);
    };
    match trim_start(after).first() {
        None | Some(b'#') | Some(b';') => Ok(full),
        Some(_) => Err(bad),
    }
}

/// `name`, `name = value` (blanks around `=` as git allows).
fn key_line(section: &str, t: &[u8], line: usize) -> Result<ConfigKey, StrictError> {
    let n = t.iter().take_while(|&&c| key_char(c)).count();
    let name = format!(
        "{section}.{}",
        String::from_utf8_lossy(&t[..n]).to_ascii_lowercase()
    );
    let rest = trim_start(&t[n..]);
    match rest.first() {
        None => Ok(ConfigKey { name, value: None }),
        Some(b'=') => Ok(ConfigKey {
            name,
            value: Some(value(&rest[1..], line)?),
        }),
        Some(_) => Err(StrictError::Line { line }),
    }
}

/// A value as git's `parse_value` reads it: leading blanks skipped, trailing blanks outside
/// quotes dropped, `#` or `;` outside quotes starting a comment, quotes taken out, the
/// escapes `\t \b \n \\ \"`; an open quote or a `\` at the end (a continuation) refused.
fn value(b: &[u8], line: usize) -> Result<Vec<u8>, StrictError> {
    let bad = StrictError::Value { line };
    let mut out = Vec::new();
    let (mut quote, mut trim_len) = (false, 0usize);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        i += 1;
        if (c == b' ' || c == b'\t') && !quote {
            if trim_len == 0 {
                trim_len = out.len();
            }
            if !out.is_empty() {
                out.push(c);
            }
            continue;
        }
        if !quote && (c == b'#' || c == b';') {
            break;
        }
        trim_len = 0;
        match c {
            b'\\' => {
                let e = match b.get(i) {
                    Some(b't') => b'\t',
                    Some(b'b') => 8,
                    Some(b'n') => b'\n',
                    Some(&e @ (b'\\' | b'"')) => e,
                    _ => return Err(bad),
                };
                i += 1;
                out.push(e);
            }
            b'"' => quote = !quote,
            c if c < 0x20 || c == 0x7f => return Err(StrictError::Byte { line }),
            c => out.push(c),
        }
    }
    if quote {
        return Err(bad);
    }
    if trim_len > 0 {
        out.truncate(trim_len);
    }
    Ok(out)
}

/// Whether the config key `key` (`section[.sub].name`) is matched by the safe-list pattern
/// `pattern`: section and name case-insensitively, the subsection exactly, `*` for any
/// subsection.
pub fn key_matches(pattern: &str, key: &str) -> bool {
    fn split(k: &str) -> Option<(&str, Option<&str>, &str)> {
        let (section, rest) = k.split_once('.')?;
        match rest.rsplit_once('.') {
            Some((sub, name)) => Some((section, Some(sub), name)),
            None => Some((section, None, rest)),
        }
    }
    let (Some((ps, psub, pn)), Some((ks, ksub, kn))) = (split(pattern), split(key)) else {
        return false;
    };
    ps.eq_ignore_ascii_case(ks)
        && pn.eq_ignore_ascii_case(kn)
        && match (psub, ksub) {
            (None, None) => true,
            (Some("*"), Some(_)) => true,
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
}

/// Whether a URL key (`*.url`, `*.pushurl`, `*.insteadof`, `*.pushinsteadof`) names git's
/// `ext::` transport, which runs the command its URL names: never safe, whatever list
/// names the key.
pub fn url_runs_command(key: &str, value: &[u8]) -> bool {
    let url_key = [".url", ".pushurl", ".insteadof", ".pushinsteadof"]
        .iter()
        .any(|s| key.ends_with(s));
    let v = value.trim_ascii_start();
    url_key && v.len() >= 5 && v[..5].eq_ignore_ascii_case(b"ext::")
}

/// Whether `key` with `value` runs nothing: it is on the `safe` list and
/// [`url_runs_command`] does not say otherwise.
pub fn key_is_safe(safe: &[String], key: &str, value: &[u8]) -> bool {
    !url_runs_command(key, value) && safe.iter().any(|p| key_matches(p, key))
}

/// The keys of `text` that are not safe (see [`key_is_safe`]), in order; an error when the
/// text is outside the subset git writes.
pub fn unsafe_keys(text: &[u8], safe: &[String]) -> Result<Vec<String>, StrictError> {
    Ok(parse_strict(text)?
        .into_iter()
        .filter(|k| !key_is_safe(safe, &k.name, k.value.as_deref().unwrap_or_default()))
        .map(|k| k.name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(t: &str) -> Vec<(String, Option<String>)> {
        parse_strict(t.as_bytes())
            .unwrap()
            .into_iter()
            .map(|k| {
                (
                    k.name,
                    k.value.map(|v| String::from_utf8_lossy(&v).into_owned()),
                )
            })
            .collect()
    }

    #[test]
    fn what_git_init_and_clone_write_is_read() {
        let t = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                 [remote \"origin\"]\n\turl = https://example.com/a.git\n\
                 \tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\
                 \tremote = origin\n\tmerge = refs/heads/main\n";
        let k = keys(t);
        assert_eq!(
            k[0],
            ("core.repositoryformatversion".into(), Some("0".into()))
        );
        assert_eq!(
            k[3],
            (
                "remote.origin.url".into(),
                Some("https://example.com/a.git".into())
            )
        );
        assert_eq!(k.len(), 7);
    }

    #[test]
    fn values_are_read_as_git_reads_them() {
        let k = keys("[a]\n x = \" two  \" # c\n y = p\\tq\n z\n w =\n v = a ; b \n u = \"#\"x\n");
        assert_eq!(k[0].1.as_deref(), Some(" two  "));
        assert_eq!(k[1].1.as_deref(), Some("p\tq"));
        assert_eq!(k[2].1, None);
        assert_eq!(k[3].1.as_deref(), Some(""));
        assert_eq!(k[4].1.as_deref(), Some("a"));
        assert_eq!(k[5].1.as_deref(), Some("#x"));
        assert_eq!(keys("[Core]\n\tFsMonitor = x\n")[0].0, "core.fsmonitor");
        assert_eq!(keys("[remote \"O\\\"r\"]\nurl=x\n")[0].0, "remote.O\"r.url");
    }

    #[test]
    fn what_git_reads_otherwise_is_refused() {
        for t in [
            "[core] fsmonitor = x\n",
            "[core.sub]\nx = 1\n",
            "[core]\nfsmonitor = a\\\nb\n",
            "[core]\nx = \"open\n",
            "[core]\nx = \\q\n",
            "fsmonitor = x\n",
            "[core]\n1x = y\n",
            "[core]\nx y\n",
            "[core]\nx # c\n",
            "\u{feff}[core]\nx = 1\n",
            "[core]\nx = a\rb\n",
            "[core]\nx = a\0\n",
            "[]\n",
            "[ core ]\n",
            "[core \"a\\b\"]\n",
            "[core \"a\"] x = 1\n",
            "[core \"a\"\n",
            "=x\n",
        ] {
            assert!(parse_strict(t.as_bytes()).is_err(), "{t:?}");
        }
        assert!(parse_strict(&vec![b'#'; MAX_CONFIG + 1]).is_err());
    }

    #[test]
    fn unsafe_keys_are_named() {
        let safe = vec!["core.bare".to_string(), "remote.*.url".to_string()];
        let t =
            b"[core]\n\tbare = false\n\tfsmonitor = ./x\n[remote \"o\"]\n\turl = ext::sh -c x\n\
                  \turl = https://e/x\n[include]\n\tpath = ../y\n";
        assert_eq!(
            unsafe_keys(t, &safe).unwrap(),
            ["core.fsmonitor", "remote.o.url", "include.path"]
        );
        assert!(key_matches("remote.*.url", "remote.a.b.url"));
        assert!(!key_matches("remote.*.url", "remote.url"));
        assert!(key_matches("Core.Bare", "core.bare"));
    }
}
