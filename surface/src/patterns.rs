//! The reviewed patterns of what looks like a secret (`patterns.toml`), compiled once.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use regex::bytes::{Regex, RegexSet};
use serde::{Deserialize, Serialize};

/// The shipped patterns.
pub const SHIPPED: &str = include_str!("patterns.toml");

/// The shipped patterns, compiled once per process (a unit test checks that they load).
pub fn shipped() -> &'static Patterns {
    static P: std::sync::OnceLock<Patterns> = std::sync::OnceLock::new();
    P.get_or_init(|| Patterns::shipped().expect("the shipped patterns load"))
}

/// What a finding is reported as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A private key.
    Key,
    /// A store of logins or keys for a service.
    Credentials,
    /// A bearer token.
    Token,
    /// A dotenv file.
    Env,
    /// A shell or client history.
    History,
}

impl Class {
    /// The class's name, as `patterns.toml` and the wire's `reported_file.class` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Key => "key",
            Class::Credentials => "credentials",
            Class::Token => "token",
            Class::Env => "env",
            Class::History => "history",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    name: Vec<NameEntry>,
    #[serde(default)]
    header: Vec<HeaderEntry>,
    #[serde(default)]
    token: Vec<TokenEntry>,
    #[serde(default)]
    skip: Vec<SkipEntry>,
    #[serde(default)]
    except: Vec<ExceptEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NameEntry {
    glob: String,
    class: Class,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderEntry {
    bytes: String,
    class: Class,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    regex: String,
    class: Class,
    #[serde(default)]
    host: Option<String>,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkipEntry {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    path: Option<String>,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExceptEntry {
    glob: String,
    reason: String,
}

/// Why patterns could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PatternsError {
    /// The file is not TOML of the patterns' shape.
    #[error("surface patterns: {0}")]
    Toml(#[from] toml::de::Error),
    /// A name glob does not compile.
    #[error("surface patterns: name glob {glob:?}: {source}")]
    Glob {
        /// The glob as written.
        glob: String,
        /// What globset said.
        source: globset::Error,
    },
    /// A token regex does not compile.
    #[error("surface patterns: token regex {regex:?}: {source}")]
    Regex {
        /// The regex as written.
        regex: String,
        /// What the regex crate said.
        source: Box<regex::Error>,
    },
    /// An entry has no reason: every pattern needs one.
    #[error("surface patterns: an entry of {kind} has an empty reason")]
    NoReason {
        /// The table the entry is in (`name`, `header`, `token`, `skip`, `except`).
        kind: &'static str,
    },
    /// A `skip` entry names both or neither of `name` and `path`.
    #[error("surface patterns: a skip entry needs exactly one of name and path")]
    Skip,
}

/// What matched, and why it is a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// What the file looks like by this pattern.
    pub class: Class,
    /// The pattern as written (`glob:*.pem`, `header:-----BEGIN ...`, `token:\bAKIA...`).
    pub pattern: String,
    /// The host a token of that kind is for, when the pattern names one.
    pub host: Option<String>,
}

/// The compiled patterns.
#[derive(Debug)]
pub struct Patterns {
    names: GlobSet,
    name_entries: Vec<(Class, String)>,
    excepts: GlobSet,
    headers: Vec<(Vec<u8>, Class)>,
    tokens: RegexSet,
    token_entries: Vec<(Regex, Class, Option<String>)>,
    skip_names: Vec<String>,
    skip_paths: Vec<Vec<String>>,
    longest_header: usize,
}

fn glob(g: &str) -> Result<Glob, PatternsError> {
    GlobBuilder::new(g)
        .case_insensitive(true)
        .literal_separator(true)
        .build()
        .map_err(|source| PatternsError::Glob {
            glob: g.to_string(),
            source,
        })
}

fn reasoned(r: &str, kind: &'static str) -> Result<(), PatternsError> {
    if r.trim().is_empty() {
        return Err(PatternsError::NoReason { kind });
    }
    Ok(())
}

impl Patterns {
    /// The shipped patterns ([`SHIPPED`]).
    pub fn shipped() -> Result<Patterns, PatternsError> {
        Self::parse(SHIPPED)
    }

    /// Patterns from the text of a `patterns.toml`.
    pub fn parse(text: &str) -> Result<Patterns, PatternsError> {
        let f: File = toml::from_str(text)?;
        let mut names = GlobSetBuilder::new();
        let mut name_entries = Vec::new();
        for n in &f.name {
            reasoned(&n.reason, "name")?;
            names.add(glob(&n.glob)?);
            name_entries.push((n.class, format!("glob:{}", n.glob)));
        }
        let mut excepts = GlobSetBuilder::new();
        for e in &f.except {
            reasoned(&e.reason, "except")?;
            excepts.add(glob(&e.glob)?);
        }
        let build = |b: GlobSetBuilder| {
            b.build().map_err(|source| PatternsError::Glob {
                glob: "(the set)".into(),
                source,
            })
        };
        let mut headers = Vec::new();
        for h in &f.header {
            reasoned(&h.reason, "header")?;
            headers.push((h.bytes.as_bytes().to_vec(), h.class));
        }
        let mut token_entries = Vec::new();
        for t in &f.token {
            reasoned(&t.reason, "token")?;
            let re = Regex::new(&t.regex).map_err(|e| PatternsError::Regex {
                regex: t.regex.clone(),
                source: Box::new(e),
            })?;
            token_entries.push((re, t.class, t.host.clone()));
        }
        let tokens = RegexSet::new(f.token.iter().map(|t| t.regex.as_str())).map_err(|e| {
            PatternsError::Regex {
                regex: "(the set)".into(),
                source: Box::new(e),
            }
        })?;
        let mut skip_names = Vec::new();
        let mut skip_paths = Vec::new();
        for s in &f.skip {
            reasoned(&s.reason, "skip")?;
            match (&s.name, &s.path) {
                (Some(n), None) => skip_names.push(n.clone()),
                (None, Some(p)) => skip_paths.push(
                    p.split('/')
                        .filter(|c| !c.is_empty())
                        .map(str::to_string)
                        .collect(),
                ),
                _ => return Err(PatternsError::Skip),
            }
        }
        let longest_header = headers.iter().map(|(h, _)| h.len()).max().unwrap_or(0);
        Ok(Patterns {
            names: build(names)?,
            name_entries,
            excepts: build(excepts)?,
            headers,
            tokens,
            token_entries,
            skip_names,
            skip_paths,
            longest_header,
        })
    }

    /// Whether the directory at `path` (its components) is never entered.
    pub fn skips_dir(&self, components: &[&str]) -> bool {
        let Some(last) = components.last() else {
            return false;
        };
        self.skip_names.iter().any(|n| n == last)
            || self.skip_paths.iter().any(|p| {
                components.len() >= p.len()
                    && components[components.len() - p.len()..]
                        .iter()
                        .zip(p)
                        .all(|(a, b)| a == b)
            })
    }

    /// The name pattern a file called `name` matches, unless an exception covers it.
    pub fn by_name(&self, name: &str) -> Option<Match> {
        if self.excepts.is_match(name) {
            return None;
        }
        let i = *self.names.matches(name).first()?;
        let (class, pattern) = &self.name_entries[i];
        Some(Match {
            class: *class,
            pattern: pattern.clone(),
            host: None,
        })
    }

    /// The first header or token pattern that `head` (the file's first bytes) matches.
    /// Headers are tried at the start (after blanks); tokens anywhere.
    pub fn by_content(&self, head: &[u8]) -> Option<Match> {
        let start = head
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(head.len());
        let lead = &head[start..head.len().min(start + self.longest_header)];
        if let Some((h, class)) = self.headers.iter().find(|(h, _)| lead.starts_with(h)) {
            return Some(Match {
                class: *class,
                pattern: format!("header:{}", String::from_utf8_lossy(h)),
                host: None,
            });
        }
        let i = *self
            .tokens
            .matches(head)
            .iter()
            .collect::<Vec<_>>()
            .first()?;
        let (re, class, host) = &self.token_entries[i];
        let host = re
            .captures(head)
            .and_then(|c| c.name("host"))
            .map(|m| String::from_utf8_lossy(m.as_bytes()).to_ascii_lowercase())
            .or_else(|| host.clone());
        Some(Match {
            class: *class,
            pattern: format!("token:{}", re.as_str()),
            host,
        })
    }

    /// Every host a token in `head` is for: of each token pattern that matches, its
    /// capture group `host` at each match, or its fixed `host`. Sorted, without repeats,
    /// lower case. (A file may hold tokens of several registries: `.npmrc`.)
    pub fn hosts(&self, head: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for i in self.tokens.matches(head).iter() {
            let (re, _, fixed) = &self.token_entries[i];
            for c in re.captures_iter(head) {
                match c.name("host") {
                    Some(m) => out.push(String::from_utf8_lossy(m.as_bytes()).to_ascii_lowercase()),
                    None => out.extend(fixed.iter().cloned()),
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_patterns_load_and_each_has_a_reason() {
        let p = Patterns::shipped().unwrap();
        assert!(p.name_entries.len() >= 10);
        assert!(p.token_entries.len() >= 8);
    }

    #[test]
    fn names_headers_and_tokens_match_what_they_say() {
        let p = Patterns::shipped().unwrap();
        for (n, c) in [
            ("credentials", Class::Credentials),
            ("credentials.toml", Class::Credentials),
            ("id_ed25519", Class::Key),
            ("server.PEM", Class::Key),
            (".env.local", Class::Env),
            (".bash_history", Class::History),
            ("hosts_token.json", Class::Token),
            (".netrc", Class::Credentials),
        ] {
            assert_eq!(p.by_name(n).map(|m| m.class), Some(c), "{n}");
        }
        for n in [
            "id_ed25519.pub",
            ".env.sample",
            ".env.example",
            "README.md",
            "main.rs",
        ] {
            assert_eq!(p.by_name(n), None, "{n}");
        }
        let k = p
            .by_content(b"\n  -----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn...")
            .unwrap();
        assert_eq!(k.class, Class::Key);
        let gh = p
            .by_content(b"github.com:\n  oauth_token: gho_0123456789abcdefghijABCDEFGHIJ012345\n")
            .unwrap();
        assert_eq!(
            (gh.class, gh.host.as_deref()),
            (Class::Token, Some("github.com"))
        );
        let npm = p
            .by_content(b"registry=https://r.example/\n//r.example/:_authToken=abc123\n")
            .unwrap();
        assert_eq!(npm.class, Class::Token);
        assert_eq!(npm.host.as_deref(), Some("r.example"));
        assert_eq!(
            p.by_content(b"_authToken=abc\n").unwrap().host.as_deref(),
            Some("registry.npmjs.org")
        );
        assert_eq!(
            p.hosts(
                b"//R.Example:8443/npm/:_authToken=a\n//registry.npmjs.org/:_authToken=b\n\
                  gh: ghp_0123456789abcdefghijABCDEFGHIJ012345\n"
            ),
            ["github.com", "r.example", "registry.npmjs.org"]
        );
        assert!(p.hosts(b"AKIAIOSFODNN7EXAMPLE").is_empty());
        let url = p
            .by_content(b"DATABASE=postgres://app:hunter2@db.internal/app\n")
            .unwrap();
        assert_eq!(url.class, Class::Credentials);
        assert!(p.by_content(b"AKIAIOSFODNN7EXAMPLE is an id").is_some());
        for clean in [
            &b"fn main() { println!(\"hello\"); }\n"[..],
            b"see https://example.com/path for more",
            b"-----BEGIN CERTIFICATE-----\nMIIB...",
            b"",
        ] {
            assert_eq!(
                p.by_content(clean),
                None,
                "{}",
                String::from_utf8_lossy(clean)
            );
        }
    }

    #[test]
    fn skips_by_name_anywhere_and_by_path_at_the_end() {
        let p = Patterns::shipped().unwrap();
        assert!(p.skips_dir(&["home", "u", "app", "node_modules"]));
        assert!(p.skips_dir(&["home", "u", ".cargo", "registry"]));
        assert!(!p.skips_dir(&["home", "u", "registry"]));
        assert!(!p.skips_dir(&["home", "u", ".cargo"]));
        assert!(!p.skips_dir(&[]));
    }

    #[test]
    fn bad_patterns_are_errors_that_say_which() {
        for (text, want) in [
            (
                "[[name]]\nglob = \"[\"\nclass = \"key\"\nreason = \"x\"\n",
                "name glob",
            ),
            (
                "[[token]]\nregex = \"(\"\nclass = \"key\"\nreason = \"x\"\n",
                "token regex",
            ),
            (
                "[[name]]\nglob = \"x\"\nclass = \"key\"\nreason = \" \"\n",
                "empty reason",
            ),
            (
                "[[name]]\nglob = \"x\"\nclass = \"session_bus\"\nreason = \"x\"\n",
                "unknown variant",
            ),
            ("[[skip]]\nreason = \"x\"\n", "exactly one"),
            ("[[nme]]\n", "unknown field"),
        ] {
            let e = Patterns::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
