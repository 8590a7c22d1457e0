//! What looks like a secret: the names of `patterns.toml` (compiled once), and in a file's
//! content the one secret detector's shapes ([`efr_policy::secrets`]), found at once by a
//! set of regular expressions made from their patterns and then verified one by one.

use efr_policy::secrets::{ShapeClass, Shapes};
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use regex::bytes::RegexSet;
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

impl From<ShapeClass> for Class {
    fn from(c: ShapeClass) -> Class {
        match c {
            ShapeClass::Token => Class::Token,
            ShapeClass::Key => Class::Key,
            ShapeClass::Credentials => Class::Credentials,
        }
    }
}

/// What a name pattern's file must also hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Needs {
    /// A private key (a key shape's header and body), or bytes that are not text.
    PrivateKey,
    /// A word that looks random, in a small file.
    RandomWord,
    /// A dotenv line whose name is a secret's and whose value is one.
    Dotenv,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    name: Vec<NameEntry>,
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
    #[serde(default)]
    needs: Option<Needs>,
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
    /// The secret shapes' prefilter does not compile.
    #[error("surface patterns: the secret shapes' regex set: {0}")]
    Regex(Box<regex::Error>),
    /// An entry has no reason: every pattern needs one.
    #[error("surface patterns: an entry of {kind} has an empty reason")]
    NoReason {
        /// The table the entry is in (`name`, `skip`, `except`).
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
    /// The pattern (`glob:*.pem`, `shape:github`).
    pub pattern: String,
    /// The host a token of that kind is for, when the pattern names one.
    pub host: Option<String>,
}

/// The compiled patterns.
#[derive(Debug)]
pub struct Patterns {
    names: GlobSet,
    name_entries: Vec<(Class, String, Option<Needs>)>,
    excepts: GlobSet,
    shapes: &'static Shapes,
    prefilter: RegexSet,
    skip_names: Vec<String>,
    skip_paths: Vec<Vec<String>>,
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

/// The largest file a `random_word` name pattern reads as a token file.
const RANDOM_WORD_FILE: usize = 64 * 1024;

impl Patterns {
    /// The shipped patterns ([`SHIPPED`]) and shapes.
    pub fn shipped() -> Result<Patterns, PatternsError> {
        Self::parse(SHIPPED)
    }

    /// Patterns from the text of a `patterns.toml`, with the shipped shapes.
    pub fn parse(text: &str) -> Result<Patterns, PatternsError> {
        let f: File = toml::from_str(text)?;
        let mut names = GlobSetBuilder::new();
        let mut name_entries = Vec::new();
        for n in &f.name {
            reasoned(&n.reason, "name")?;
            names.add(glob(&n.glob)?);
            name_entries.push((n.class, format!("glob:{}", n.glob), n.needs));
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
        let shapes = Shapes::shipped();
        let prefilter = RegexSet::new(shapes.all().iter().map(|s| s.compiled.to_regex()))
            .map_err(|e| PatternsError::Regex(Box::new(e)))?;
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
        Ok(Patterns {
            names: build(names)?,
            name_entries,
            excepts: build(excepts)?,
            shapes,
            prefilter,
            skip_names,
            skip_paths,
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

    /// The name pattern a file called `name` matches, unless an exception covers it, with
    /// what its content must also hold.
    pub fn by_name(&self, name: &str) -> Option<(Match, Option<Needs>)> {
        if self.excepts.is_match(name) {
            return None;
        }
        let i = *self.names.matches(name).first()?;
        let (class, pattern, needs) = &self.name_entries[i];
        Some((
            Match {
                class: *class,
                pattern: pattern.clone(),
                host: None,
            },
            *needs,
        ))
    }

    /// Whether a file's first bytes `head` (of a file of `len` bytes) hold what `needs`
    /// asks for.
    pub fn holds(&self, needs: Needs, head: &[u8], len: u64) -> bool {
        match needs {
            Needs::PrivateKey => {
                std::str::from_utf8(head).is_err()
                    || self.verified(head).iter().any(|(c, _)| *c == Class::Key)
            }
            Needs::RandomWord => {
                len <= RANDOM_WORD_FILE as u64
                    && String::from_utf8_lossy(head)
                        .split(|c: char| {
                            c.is_whitespace()
                                || matches!(c, '"' | '\'' | ',' | '{' | '}' | '[' | ']')
                        })
                        .map(|w| w.rsplit_once(['=', ':']).map_or(w, |(_, v)| v))
                        .any(|w| w.len() >= 16 && efr_policy::secrets::looks_random(w))
            }
            Needs::Dotenv => dotenv_secret(head) || !self.verified(head).is_empty(),
        }
    }

    /// The shapes verified in `head`: the classes and hosts of each hit, in order.
    fn verified(&self, head: &[u8]) -> Vec<(Class, Vec<String>)> {
        let hit: Vec<usize> = self.prefilter.matches(head).into_iter().collect();
        if hit.is_empty() {
            return Vec::new();
        }
        let text = String::from_utf8_lossy(head);
        self.shapes
            .find(&text, Some(&hit))
            .into_iter()
            .map(|h| (self.shapes.all()[h.shape].class.into(), h.hosts))
            .collect()
    }

    /// The first verified shape that `head` (the file's first bytes) holds.
    pub fn by_content(&self, head: &[u8]) -> Option<Match> {
        let hit: Vec<usize> = self.prefilter.matches(head).into_iter().collect();
        if hit.is_empty() {
            return None;
        }
        let text = String::from_utf8_lossy(head);
        let first = self.shapes.find(&text, Some(&hit)).into_iter().next()?;
        let shape = &self.shapes.all()[first.shape];
        Some(Match {
            class: shape.class.into(),
            pattern: format!("shape:{}", shape.name),
            host: first.hosts.first().cloned(),
        })
    }

    /// Every host a token in `head` is for: of each verified shape, its hosts. Sorted,
    /// without repeats, lower case. (A file may hold tokens of several registries:
    /// `.npmrc`.)
    pub fn hosts(&self, head: &[u8]) -> Vec<String> {
        let mut out: Vec<String> = self
            .verified(head)
            .into_iter()
            .flat_map(|(_, h)| h)
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Whether a dotenv's first bytes hold a line `NAME=VALUE` whose name the environment
/// filter drops as a secret's (its built-in `drop` globs: `*TOKEN*`, `*_KEY`, `*SECRET*`,
/// `*PASSWORD*`, ...) and whose value is not empty nor a placeholder.
fn dotenv_secret(head: &[u8]) -> bool {
    static DROP: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let drop = DROP.get_or_init(|| efr_policy::config::Config::defaults().env_policy().drop);
    let text = String::from_utf8_lossy(head);
    text.lines().any(|l| {
        let l = l.trim().trim_start_matches("export ").trim();
        let Some((name, value)) = l.split_once('=') else {
            return false;
        };
        let value = value.trim().trim_matches(['"', '\'']);
        let secret_name = drop
            .iter()
            .any(|g| efr_sandbox_wire::envfilter::glob_matches(g, name.trim(), true));
        secret_name && value.len() >= 8 && !efr_policy::secrets::is_placeholder(value)
    })
}

#[cfg(test)]
mod tests;
