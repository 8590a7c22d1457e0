//! The one secret detector: the reviewed shapes of `policy/data/secrets.toml` (a vendor's
//! documented prefix or format each, with a reason and a source), used alike by the
//! environment filter (their patterns head `[environment] secret_values`), the surface scan
//! (a file a call could read that holds a verified match is a question, and its hosts are
//! token hosts) and the token hosts of a call's kept variables.
//!
//! A shape's `pattern` is the environment filter's small regular expression
//! ([`efr_sandbox_wire::envfilter::ValuePattern`]): a variable whose value holds one is
//! dropped on the shape alone. In a file, a match must also pass the shape's `check`
//! ([`Check`]), so that source code and test fixtures that merely mention a shape (a
//! `ghp_0123...` in a test, `-----BEGIN PRIVATE KEY-----\nMIIE...` in a doc) are not taken
//! for secrets: GitHub's and npm's tokens carry a CRC32 of their own, the others must look
//! random, a URL's user part must hold a real password or token, a key header must be
//! followed by a key.

use std::ops::Range;
use std::sync::OnceLock;

use efr_sandbox_wire::envfilter::ValuePattern;
use serde::Deserialize;

/// The shipped shapes, as TOML.
pub const SHIPPED: &str = include_str!("../data/secrets.toml");

/// What a match in a file must also pass (see `secrets.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// The last six characters are the base62 CRC32 of the 30 before them.
    Crc32,
    /// The part after the literal prefix looks random ([`looks_random`]).
    Random,
    /// A URL's user part holds a password or a token ([`userinfo_secret`]).
    Userinfo,
    /// A PEM header followed by a key's body.
    KeyBody,
    /// The header starts a line and a `Private-Lines:` line with its key follows.
    Putty,
    /// The text is a kubeconfig, and the value looks random.
    Kubeconfig,
}

/// Where a match names the host its token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostFrom {
    /// The URL's host.
    Url,
    /// The `//HOST/:` before npm's key, else the file's `registry=`, else npm's registry.
    Npmrc,
    /// The clusters' `server:` hosts.
    Kubeconfig,
    /// The URL of the git config section (`[http "URL"]`) the line is in.
    GitSection,
}

/// What a finding is: the surface's classes of a token shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapeClass {
    /// A bearer token or API key.
    Token,
    /// A private key.
    Key,
    /// Logins (a URL's user and password).
    Credentials,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    shape: Vec<ShapeEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapeEntry {
    name: String,
    pattern: String,
    class: ShapeClass,
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    host_from: Option<HostFrom>,
    check: Check,
    #[serde(default = "yes")]
    env: bool,
    reason: String,
    source: String,
}

fn yes() -> bool {
    true
}

/// One shape, compiled.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Its name (`github`).
    pub name: String,
    /// Its pattern as written.
    pub pattern: String,
    /// The pattern compiled.
    pub compiled: ValuePattern,
    /// What a finding of it is.
    pub class: ShapeClass,
    /// The hosts a token of it is for.
    pub hosts: Vec<String>,
    /// Where a match names its host instead.
    pub host_from: Option<HostFrom>,
    /// What a match in a file must also pass.
    pub check: Check,
    /// Whether the environment filter applies it.
    pub env: bool,
    /// Why it is a secret.
    pub reason: String,
    /// The vendor's documentation of the format.
    pub source: String,
    /// The characters its pattern starts with, always (`gh`, `sk_live_`, `AGE-SECRET-KEY-1`).
    prefix_len: usize,
}

/// Why the shapes could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ShapesError {
    /// Not TOML of the shapes' form.
    #[error("secret shapes: {0}")]
    Toml(#[from] toml::de::Error),
    /// A pattern that does not compile.
    #[error("secret shape {name}: {why}")]
    Pattern {
        /// The shape.
        name: String,
        /// What the pattern's parser said.
        why: String,
    },
    /// A shape without its reason or source.
    #[error("secret shape {0}: a reason and a source are needed")]
    Undocumented(String),
}

/// A verified match of a shape in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The shape's index in [`Shapes::all`].
    pub shape: usize,
    /// Where, in bytes.
    pub at: Range<usize>,
    /// The hosts its token is for (lower case).
    pub hosts: Vec<String>,
}

/// The compiled shapes.
#[derive(Debug, Clone)]
pub struct Shapes {
    all: Vec<Shape>,
}

impl Shapes {
    /// The shipped shapes, compiled once per process (a unit test checks that they load).
    pub fn shipped() -> &'static Shapes {
        static S: OnceLock<Shapes> = OnceLock::new();
        S.get_or_init(|| Shapes::parse(SHIPPED).expect("the shipped secret shapes load"))
    }

    /// Shapes from the text of a `secrets.toml`.
    pub fn parse(text: &str) -> Result<Shapes, ShapesError> {
        let f: File = toml::from_str(text)?;
        let mut all = Vec::new();
        for e in f.shape {
            if e.reason.trim().is_empty() || e.source.trim().is_empty() {
                return Err(ShapesError::Undocumented(e.name));
            }
            let compiled = ValuePattern::parse(&e.pattern).map_err(|why| ShapesError::Pattern {
                name: e.name.clone(),
                why,
            })?;
            let prefix_len = literal_prefix(&e.pattern);
            all.push(Shape {
                name: e.name,
                pattern: e.pattern,
                compiled,
                class: e.class,
                hosts: e.hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
                host_from: e.host_from,
                check: e.check,
                env: e.env,
                reason: e.reason,
                source: e.source,
                prefix_len,
            });
        }
        Ok(Shapes { all })
    }

    /// Every shape, in the file's order.
    pub fn all(&self) -> &[Shape] {
        &self.all
    }

    /// The patterns the environment filter applies, with their reasons.
    pub fn env_patterns(&self) -> impl Iterator<Item = &Shape> {
        self.all.iter().filter(|s| s.env)
    }

    /// The verified matches in `text` of the shapes `only` names (all when `None`): one per
    /// place, the earliest shape of the list winning where two match at the same start.
    pub fn find(&self, text: &str, only: Option<&[usize]>) -> Vec<Hit> {
        let mut hits: Vec<Hit> = Vec::new();
        for (i, shape) in self.all.iter().enumerate() {
            if only.is_some_and(|o| !o.contains(&i)) {
                continue;
            }
            for at in shape.compiled.matches(text) {
                if hits.iter().any(|h| h.at.start == at.start) {
                    continue;
                }
                if !shape.verified(text, at.clone()) {
                    continue;
                }
                let hosts = shape.hosts_of(text, at.clone());
                hits.push(Hit {
                    shape: i,
                    at,
                    hosts,
                });
            }
        }
        hits.sort_by_key(|h| h.at.start);
        hits
    }

    /// The hosts of the tokens a variable's value holds, by the shapes alone (no check: a
    /// kept variable counts on its shape, as the environment filter drops it).
    pub fn value_hosts(&self, value: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut starts = Vec::new();
        for shape in self.env_patterns() {
            for at in shape.compiled.matches(value) {
                if starts.contains(&at.start) {
                    continue;
                }
                starts.push(at.start);
                out.extend(shape.hosts_of(value, at));
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

impl Shape {
    /// Whether the match at `at` of `text` passes the shape's check.
    pub fn verified(&self, text: &str, at: Range<usize>) -> bool {
        let m = &text[at.clone()];
        let body = m.get(self.prefix_len..).unwrap_or("");
        match self.check {
            Check::Crc32 => crc32_ok(m),
            // A `key = value` shape (npm's `_authToken=`, WireGuard's `PrivateKey =`): the
            // value is what must look random.
            Check::Random => {
                looks_random(body.split_once(['=', ':']).map_or(body, |(_, v)| v.trim()))
            }
            Check::Userinfo => userinfo_secret(m),
            Check::KeyBody => key_body(text, at),
            Check::Putty => putty_key(text, at),
            Check::Kubeconfig => {
                text.contains("kind: Config")
                    && text.contains("clusters:")
                    && looks_random(value_after_colon(m))
            }
        }
    }

    /// The hosts the match at `at` of `text` names (lower case).
    pub fn hosts_of(&self, text: &str, at: Range<usize>) -> Vec<String> {
        let mut out = self.hosts.clone();
        match self.host_from {
            None => {}
            Some(HostFrom::Url) => out.extend(url_host_after(&text[at.end..])),
            Some(HostFrom::Npmrc) => out.push(npmrc_host(text, at.start)),
            Some(HostFrom::Kubeconfig) => out.extend(kube_servers(text)),
            Some(HostFrom::GitSection) => out.extend(git_section_host(text, at.start)),
        }
        out.sort();
        out.dedup();
        out
    }
}

/// How many characters the pattern's leading literals take (before its first class, `.`
/// or repetition): the part of a match that is the shape's own, not the secret's.
fn literal_prefix(pattern: &str) -> usize {
    let mut n = 0;
    let mut it = pattern.chars().peekable();
    while let Some(c) = it.next() {
        if matches!(c, '[' | '.' | '*' | '+' | '?' | '{') {
            break;
        }
        let lit = if c == '\\' {
            match it.next() {
                Some(e) => e,
                None => break,
            }
        } else {
            c
        };
        // A literal followed by a repetition belongs to the variable part.
        if matches!(it.peek(), Some('*' | '+' | '?' | '{')) {
            break;
        }
        n += lit.len_utf8();
    }
    n
}

/// The value of a `key: value` match.
fn value_after_colon(m: &str) -> &str {
    m.split_once(':').map_or(m, |(_, v)| v.trim())
}

const ALPHABET62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The base62 (0-9, A-Z, a-z) CRC32 of `body` in 6 characters, padded with `0`.
fn checksum62(body: &str) -> [u8; 6] {
    let mut n = crc32fast::hash(body.as_bytes());
    let mut enc = [b'0'; 6];
    for slot in enc.iter_mut().rev() {
        *slot = ALPHABET62[usize::try_from(n % 62).unwrap_or(0)];
        n /= 62;
    }
    enc
}

/// GitHub's and npm's check: after `PREFIX_`, 30 characters and their base-62 CRC-32 (`checksum62`).
pub fn crc32_ok(token: &str) -> bool {
    let Some((_, rest)) = token.split_once('_') else {
        return false;
    };
    if rest.len() != 36 || !rest.is_ascii() {
        return false;
    }
    let (body, sum) = rest.split_at(30);
    sum.as_bytes() == checksum62(body)
}

/// A token of GitHub's or npm's format (`ghp`, `npm`, ... and 30 base62 characters): the
/// body and its checksum, as the vendor makes them. For tests that need a token the
/// detector takes for one without a literal token in their source.
pub fn checksummed_token(prefix: &str, body: &str) -> Option<String> {
    (body.len() == 30 && body.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| {
        let sum = checksum62(body);
        format!("{prefix}_{body}{}", String::from_utf8_lossy(&sum))
    })
}

/// Words that mark a value as a placeholder rather than a secret.
const PLACEHOLDERS: [&str; 14] = [
    "example",
    "sample",
    "dummy",
    "fake",
    "placeholder",
    "your",
    "xxxx",
    "redacted",
    "changeme",
    "test",
    "insert",
    "replace",
    "secret",
    "token",
];

/// Whether `v` (the variable part of a token) looks random: not empty, no placeholder word,
/// no template (`$`, `{`, `}`, `<`, `>`, `%`, `*`), not a run or a sequence (two thirds of
/// its neighbouring pairs are neither equal nor consecutive), and of several characters.
pub fn looks_random(v: &str) -> bool {
    if v.len() < 8 {
        return false;
    }
    let lower = v.to_ascii_lowercase();
    if PLACEHOLDERS.iter().any(|p| lower.contains(p)) {
        return false;
    }
    if v.contains(['$', '{', '}', '<', '>', '%', '*']) {
        return false;
    }
    let b = v.as_bytes();
    let dull = b
        .windows(2)
        .filter(|w| w[1] == w[0] || w[1] == w[0].wrapping_add(1) || w[1] == w[0].wrapping_sub(1))
        .count();
    if dull * 3 > b.len() {
        return false;
    }
    let mut seen = [false; 256];
    for &c in b {
        seen[usize::from(c)] = true;
    }
    let distinct = seen.iter().filter(|s| **s).count();
    // A generated token mixes at least two of lower case, upper case and digits (a
    // hyphenated word, `bert-base-uncased`, has one).
    let kinds = [
        b.iter().any(u8::is_ascii_lowercase),
        b.iter().any(u8::is_ascii_uppercase),
        b.iter().any(u8::is_ascii_digit),
    ]
    .iter()
    .filter(|k| **k)
    .count();
    distinct * 4 >= b.len().min(64) && distinct >= 5 && kinds >= 2
}

/// Whether `v` is a placeholder rather than a value: a placeholder word, a template, a run
/// of `x` or `*`.
pub fn is_placeholder(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    PLACEHOLDERS.iter().any(|p| lower.contains(p))
        || v.contains(['$', '{', '}', '<', '>', '%'])
        || v.chars()
            .all(|c| matches!(c, 'x' | 'X' | '*' | '.' | '-' | '_'))
}

/// Whether a URL's user part (`scheme://USERINFO@`) holds a secret: a password of four
/// characters or more that is not a placeholder (`pass`, `${PW}`, ...) or the user's name
/// again (`guest:guest`), or no password (or an empty one) and a user that is itself a
/// random token of 16 or more.
pub fn userinfo_secret(m: &str) -> bool {
    let Some(info) = m.split_once("://").and_then(|(_, r)| r.strip_suffix('@')) else {
        return false;
    };
    let (user, pass) = match info.split_once(':') {
        Some((u, p)) => (u, p),
        None => (info, ""),
    };
    if pass.is_empty() {
        return user.len() >= 16 && looks_random(user);
    }
    let lower = pass.to_ascii_lowercase();
    // A password of one to three characters (`u:p@`, `:tok@`) is a test's or a document's.
    let placeholder = pass.len() < 4
        || ["pass", "password", "passwd", "hunter2"].contains(&lower.as_str())
        || PLACEHOLDERS.iter().any(|p| lower.contains(p))
        || pass.contains(['$', '{', '}', '<', '>', '%', '*'])
        || pass
            .chars()
            .all(|c| c == 'x' || c == 'X' || c == '*' || c == '.')
        || pass == user;
    !placeholder
}

/// Whether a key's body follows the header line the match at `at` ends (`PRIVATE KEY-----`
/// of a `-----BEGIN ... PRIVATE KEY-----` line): at least 64 base64 characters before the
/// end line, line breaks and JSON's `\n` escapes passed over.
fn key_body(text: &str, at: Range<usize>) -> bool {
    let before = &text[at.start.saturating_sub(40)..at.start];
    if !before.contains("BEGIN") {
        return false;
    }
    let rest = &text.as_bytes()[at.end..];
    let (mut i, mut n) = (0, 0);
    while i < rest.len() {
        match rest[i] {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' => n += 1,
            b'\r' | b'\n' | b' ' | b'\t' => {}
            b'\\' if rest.get(i + 1) == Some(&b'n') => i += 1,
            // Header lines of an encrypted PEM key (`Proc-Type: 4,ENCRYPTED`) or of an
            // armored PGP key (`Version: GnuPG v2.2`).
            b':' | b',' | b'-' | b'.' if n < 64 => {}
            _ => break,
        }
        i += 1;
    }
    n >= 64
}

/// Whether the PuTTY header at `at` starts a key file: at the start of a line, and a
/// `Private-Lines: N` line later followed by a line of 40 base64 characters or more (a
/// document or a test that writes the format in a string has `\n` escapes, no lines).
fn putty_key(text: &str, at: Range<usize>) -> bool {
    let line_start = at.start == 0 || text[..at.start].ends_with('\n');
    let Some(i) = text[at.end..].find("\nPrivate-Lines:") else {
        return false;
    };
    let rest = &text[at.end + i + 1..];
    line_start
        && rest.lines().nth(1).is_some_and(|l| {
            l.len() >= 40
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        })
}

/// The host of the URL whose authority `rest` starts with (after its `@`).
fn url_host_after(rest: &str) -> Option<String> {
    let end = rest
        .find(['/', '?', '#', ' ', '\t', '\n', '"', '\'', ','])
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, p)| {
            if p.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                authority
            }
        })
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':')))
    .then_some(host)
}

/// The registry an npm key at `start` of `text` is for.
fn npmrc_host(text: &str, start: usize) -> String {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..start];
    if let Some(r) = before.strip_prefix("//") {
        let host = r.split(['/', ':']).next().unwrap_or("");
        if !host.is_empty() {
            return host.to_ascii_lowercase();
        }
    }
    for l in text.lines() {
        let l = l.trim();
        if let Some(v) = l.strip_prefix("registry").map(str::trim_start) {
            if let Some(url) = v.strip_prefix('=') {
                let url = url.trim();
                if let Some(h) = url.split_once("://").and_then(|(_, r)| url_host_after(r)) {
                    return h;
                }
            }
        }
    }
    "registry.npmjs.org".into()
}

/// The hosts of a kubeconfig's `server:` lines.
fn kube_servers(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("server:"))
        .filter_map(|v| {
            let v = v.trim().trim_matches(['"', '\'']);
            v.split_once("://").and_then(|(_, r)| url_host_after(r))
        })
        .collect()
}

/// The host of the git config section (`[http "https://HOST/"]`) the line at `start` is in.
fn git_section_host(text: &str, start: usize) -> Option<String> {
    let head = text[..start]
        .rfind("\n[")
        .map_or(&text[..start], |i| &text[i + 1..start]);
    let section = head.lines().next()?.trim();
    let url = section.split('"').nth(1)?;
    url.split_once("://").and_then(|(_, r)| url_host_after(r))
}

#[cfg(test)]
mod tests;
