//! The matchers of the environment policy (`[environment]` of the config, carried to the
//! launcher in the plan): name globs and the secret value patterns. Shared by the policy
//! (which checks the patterns when it reads the config), the launcher (which scrubs the
//! call's environment) and the service (which says what was dropped), so that what is said
//! is what the call gets.
//!
//! A name glob is the variable's name where `*` matches any run of characters
//! (`LC_*`, `*TOKEN*`). A value pattern is a small regular expression, searched in the
//! value from the start of every word (the value's start, or a character that is not a
//! letter, digit or `_` before it): literal characters, `\` escaping the next one, `.` any
//! character, `[...]` a class (ranges `a-z`, a leading `^` negating it), each atom
//! optionally followed by `*`, `+`, `?`, `{n}`, `{n,}` or `{n,m}`. Repetitions are
//! greedy and never give back (possessive): write each pattern so that a repeated class
//! does not also match what follows it. No groups, no alternation: a pattern is one
//! reviewed line of `defaults.toml` with its reason.

use serde::{Deserialize, Serialize};

/// The environment policy of a call, as the plan carries it (the config's
/// `[environment]` lists, in their order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvPolicy {
    /// Name globs kept (case as written).
    #[serde(default)]
    pub keep: Vec<String>,
    /// Name globs never kept (ASCII case ignored).
    #[serde(default)]
    pub drop: Vec<String>,
    /// Value patterns of secrets ([`ValuePattern`]).
    #[serde(default)]
    pub secret_values: Vec<String>,
}

/// An [`EnvPolicy`] with its patterns compiled.
#[derive(Debug, Clone)]
pub struct CompiledEnvPolicy {
    keep: Vec<String>,
    drop: Vec<String>,
    patterns: Vec<ValuePattern>,
}

impl EnvPolicy {
    /// Checks every glob and compiles every pattern.
    pub fn compile(&self) -> Result<CompiledEnvPolicy, String> {
        for g in self.keep.iter().chain(&self.drop) {
            check_glob(g)?;
        }
        let patterns = self
            .secret_values
            .iter()
            .map(|p| ValuePattern::parse(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CompiledEnvPolicy {
            keep: self.keep.clone(),
            drop: self.drop.clone(),
            patterns,
        })
    }
}

impl CompiledEnvPolicy {
    /// Whether `keep` names `name`.
    pub fn listed(&self, name: &str) -> bool {
        self.keep.iter().any(|g| glob_matches(g, name, false))
    }

    /// The `drop` glob that refuses `name`, if one does.
    pub fn dropped_name(&self, name: &str) -> Option<&str> {
        self.drop
            .iter()
            .find(|g| glob_matches(g, name, true))
            .map(String::as_str)
    }

    /// Why `value` looks like a secret, if it does.
    pub fn secret_value(&self, value: &str) -> Option<DropReason> {
        secret_value(&self.patterns, value)
    }
}

/// Longest value checked against the patterns: a longer kept value is dropped as too long
/// to check (no ordinary variable is this long), so the check stays cheap.
pub const MAX_CHECKED_VALUE: usize = 16 * 1024;

/// Whether `glob` (`*` any run of characters, every other character itself) matches the
/// whole of `name`; with `fold`, ASCII case is ignored.
pub fn glob_matches(glob: &str, name: &str, fold: bool) -> bool {
    fn go(p: &[u8], n: &[u8], fold: bool) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((b'*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..], fold)),
            Some((c, rest)) => match n.split_first() {
                Some((d, nrest)) if c == d || (fold && c.eq_ignore_ascii_case(d)) => {
                    go(rest, nrest, fold)
                }
                _ => false,
            },
        }
    }
    go(glob.as_bytes(), name.as_bytes(), fold)
}

/// Whether `glob` is a usable name glob: not empty, no `=`, NUL or whitespace.
pub fn check_glob(glob: &str) -> Result<(), String> {
    if glob.is_empty() || glob.contains(['=', '\0']) || glob.chars().any(char::is_whitespace) {
        Err(format!(
            "{glob:?}: not a variable name or glob (NAME, PREFIX_*)"
        ))
    } else if glob.len() > 256 {
        Err(format!("{glob:?}: longer than 256 characters"))
    } else {
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Atom {
    Any,
    Lit(char),
    Class {
        neg: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Atom {
    fn matches(&self, c: char) -> bool {
        match self {
            Atom::Any => true,
            Atom::Lit(l) => *l == c,
            Atom::Class { neg, ranges } => ranges.iter().any(|(a, b)| *a <= c && c <= *b) != *neg,
        }
    }
}

/// A compiled value pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuePattern {
    atoms: Vec<(Atom, usize, usize)>,
}

/// Most repetitions a `{n,m}` may name.
const MAX_REPEAT: usize = 1024;

impl ValuePattern {
    /// Compiles a pattern; the error says what is wrong at which character.
    pub fn parse(p: &str) -> Result<ValuePattern, String> {
        let bad = |m: &str| format!("{p:?}: {m}");
        let chars: Vec<char> = p.chars().collect();
        let mut i = 0;
        let mut atoms = Vec::new();
        while i < chars.len() {
            let atom = match chars[i] {
                '.' => {
                    i += 1;
                    Atom::Any
                }
                '\\' => {
                    let Some(c) = chars.get(i + 1) else {
                        return Err(bad("ends with a lone \\"));
                    };
                    i += 2;
                    Atom::Lit(*c)
                }
                '[' => {
                    i += 1;
                    let neg = chars.get(i) == Some(&'^');
                    if neg {
                        i += 1;
                    }
                    let mut ranges = Vec::new();
                    loop {
                        let Some(&c) = chars.get(i) else {
                            return Err(bad("a [ class is not closed"));
                        };
                        if c == ']' && !ranges.is_empty() {
                            i += 1;
                            break;
                        }
                        let c = if c == '\\' {
                            i += 1;
                            *chars.get(i).ok_or_else(|| bad("ends with a lone \\"))?
                        } else {
                            c
                        };
                        i += 1;
                        if chars.get(i) == Some(&'-') && chars.get(i + 1).is_some_and(|&e| e != ']')
                        {
                            let mut e = chars[i + 1];
                            i += 2;
                            if e == '\\' {
                                e = *chars.get(i).ok_or_else(|| bad("ends with a lone \\"))?;
                                i += 1;
                            }
                            if e < c {
                                return Err(bad("a class range goes backwards"));
                            }
                            ranges.push((c, e));
                        } else {
                            ranges.push((c, c));
                        }
                    }
                    Atom::Class { neg, ranges }
                }
                '*' | '+' | '?' | '{' => return Err(bad("a repetition with nothing before it")),
                '(' | ')' | '|' | '^' | '$' => {
                    return Err(bad("groups, alternation and anchors are not supported"));
                }
                c => {
                    i += 1;
                    Atom::Lit(c)
                }
            };
            let (min, max) = match chars.get(i) {
                Some('*') => {
                    i += 1;
                    (0, usize::MAX)
                }
                Some('+') => {
                    i += 1;
                    (1, usize::MAX)
                }
                Some('?') => {
                    i += 1;
                    (0, 1)
                }
                Some('{') => {
                    let close = chars[i..]
                        .iter()
                        .position(|&c| c == '}')
                        .ok_or_else(|| bad("a { repetition is not closed"))?;
                    let body: String = chars[i + 1..i + close].iter().collect();
                    i += close + 1;
                    let num = |s: &str| -> Result<usize, String> {
                        s.parse::<usize>()
                            .ok()
                            .filter(|n| *n <= MAX_REPEAT)
                            .ok_or_else(|| bad("a repetition count is not a number up to 1024"))
                    };
                    match body.split_once(',') {
                        None => {
                            let n = num(&body)?;
                            (n, n)
                        }
                        Some((a, "")) => (num(a)?, usize::MAX),
                        Some((a, b)) => {
                            let (a, b) = (num(a)?, num(b)?);
                            if b < a {
                                return Err(bad("a {n,m} repetition with m below n"));
                            }
                            (a, b)
                        }
                    }
                }
                _ => (1, 1),
            };
            atoms.push((atom, min, max));
        }
        if atoms.is_empty() {
            return Err(bad("an empty pattern"));
        }
        if atoms.iter().all(|(_, min, _)| *min == 0) {
            return Err(bad("a pattern that matches the empty string"));
        }
        Ok(ValuePattern { atoms })
    }

    fn match_at(&self, v: &[char]) -> bool {
        self.match_len(v).is_some()
    }

    /// How many characters of `v` the pattern takes from its start, when it matches there.
    fn match_len(&self, v: &[char]) -> Option<usize> {
        let mut i = 0;
        for (atom, min, max) in &self.atoms {
            let mut n = 0;
            while n < *max && i < v.len() && atom.matches(v[i]) {
                i += 1;
                n += 1;
            }
            if n < *min {
                return None;
            }
        }
        Some(i)
    }

    /// Whether the pattern matches in `value`, from the start of a word.
    pub fn found_in(&self, value: &str) -> bool {
        let v: Vec<char> = value.chars().collect();
        (0..v.len()).any(|i| word_start(&v, i) && self.match_at(&v[i..]))
    }

    /// Every match in `value` from the start of a word, as byte ranges (overlapping
    /// matches each on their own: one from every word start where the pattern matches).
    pub fn matches(&self, value: &str) -> Vec<std::ops::Range<usize>> {
        let v: Vec<char> = value.chars().collect();
        let mut at = Vec::with_capacity(v.len() + 1);
        let mut b = 0;
        for c in &v {
            at.push(b);
            b += c.len_utf8();
        }
        at.push(b);
        (0..v.len())
            .filter(|&i| word_start(&v, i))
            .filter_map(|i| self.match_len(&v[i..]).map(|n| at[i]..at[i + n]))
            .collect()
    }

    /// The pattern as a regular expression of the `regex` crate (bytes or text), matched
    /// from a word start as here: `(?:\A|[^\p{Alphabetic}\p{N}_])` before it (so a match of
    /// it may begin one character early). Equal to [`Self::found_in`] for a pattern whose
    /// repetitions never need to give back (a repeated class that does not also match what
    /// follows it), which every shipped shape is; a test and the fuzz target
    /// `secret_shapes` compare the two on the shipped ones. For prefilters (a set of many
    /// patterns run at once over a file), never for the verdict alone.
    pub fn to_regex(&self) -> String {
        fn lit(c: char, out: &mut String) {
            if c.is_alphanumeric() || c == '_' {
                out.push(c);
            } else {
                out.push_str(&format!("\\x{{{:x}}}", c as u32));
            }
        }
        let mut out = String::from("(?s:(?:\\A|[^\\p{Alphabetic}\\p{N}_])");
        for (atom, min, max) in &self.atoms {
            match atom {
                Atom::Any => out.push('.'),
                Atom::Lit(c) => lit(*c, &mut out),
                Atom::Class { neg, ranges } => {
                    out.push('[');
                    if *neg {
                        out.push('^');
                    }
                    for (a, b) in ranges {
                        lit(*a, &mut out);
                        if a != b {
                            out.push('-');
                            lit(*b, &mut out);
                        }
                    }
                    out.push(']');
                }
            }
            match (*min, *max) {
                (1, 1) => {}
                (m, usize::MAX) => out.push_str(&format!("{{{m},}}")),
                (m, n) if m == n => out.push_str(&format!("{{{m}}}")),
                (m, n) => out.push_str(&format!("{{{m},{n}}}")),
            }
        }
        out.push(')');
        out
    }
}

/// Whether a word starts at `i` of `v`: its start, or after a character that is not a
/// letter, digit or `_`.
fn word_start(v: &[char], i: usize) -> bool {
    i == 0 || !(v[i - 1].is_alphanumeric() || v[i - 1] == '_')
}

/// Why a variable was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// The value holds what one of the patterns matches (the pattern's index).
    Pattern(usize),
    /// The value is longer than [`MAX_CHECKED_VALUE`].
    TooLong,
    /// A variable of the `GIT_CONFIG_*` set, dropped by the set rule
    /// ([`crate::gitenv`]).
    GitConfigSet(Box<crate::gitenv::SetDrop>),
    /// A name `keep` names that a `drop` glob (this one) refuses (`CARGO_REGISTRY_TOKEN`,
    /// kept by `CARGO_*`, dropped by `*TOKEN*`).
    Name(String),
}

/// Whether `value` looks like a secret by one of `patterns`.
pub fn secret_value(patterns: &[ValuePattern], value: &str) -> Option<DropReason> {
    if value.len() > MAX_CHECKED_VALUE {
        return Some(DropReason::TooLong);
    }
    patterns
        .iter()
        .position(|p| p.found_in(value))
        .map(DropReason::Pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches("LC_*", "LC_ALL", false));
        assert!(!glob_matches("LC_*", "lc_all", false));
        assert!(glob_matches("*TOKEN*", "npm_config__authToken", true));
        assert!(glob_matches("PATH", "PATH", false));
        assert!(!glob_matches("PATH", "PATHX", false));
        assert!(glob_matches(
            "npm_config_//*",
            "npm_config_//reg/:_authToken",
            false
        ));
        assert!(check_glob("A B").is_err());
        assert!(check_glob("A=B").is_err());
        assert!(check_glob("").is_err());
    }

    #[test]
    fn patterns_parse_and_refuse() {
        for bad in [
            "", "*", "a(b)", "a|b", "[abc", "a{2", "a{x}", "[z-a]", "\\", "a*", "^a", "a{3,1}",
        ] {
            assert!(ValuePattern::parse(bad).is_err(), "{bad}");
        }
        let p = ValuePattern::parse("AKIA[A-Z0-9]{16}").unwrap();
        assert!(p.found_in("AKIAABCDEFGHIJKLMNOP"));
        assert!(p.found_in("key=AKIAABCDEFGHIJKLMNOP"));
        assert!(!p.found_in("AKIAABC"));
        assert!(!p.found_in("XAKIAABCDEFGHIJKLMNOP"));
    }

    #[test]
    fn matches_are_byte_ranges_from_word_starts() {
        let p = ValuePattern::parse("ab[0-9]+").unwrap();
        assert_eq!(p.matches("ab1 xab2 é ab34"), vec![0..3, 12..16]);
        assert!(p.matches("").is_empty());
        assert_eq!(
            p.to_regex(),
            "(?s:(?:\\A|[^\\p{Alphabetic}\\p{N}_])ab[0-9]{1,})"
        );
        let q = ValuePattern::parse("[^/@ ]{2,5}\\.x?").unwrap();
        assert_eq!(
            q.to_regex(),
            "(?s:(?:\\A|[^\\p{Alphabetic}\\p{N}_])[^\\x{2f}\\x{40}\\x{20}]{2,5}\\x{2e}x{0,1})"
        );
    }

    #[test]
    fn long_values_are_dropped_unchecked() {
        let p = vec![ValuePattern::parse("x{3}").unwrap()];
        assert_eq!(
            secret_value(&p, &"a".repeat(MAX_CHECKED_VALUE + 1)),
            Some(DropReason::TooLong)
        );
        assert_eq!(secret_value(&p, "a b xxx"), Some(DropReason::Pattern(0)));
        assert_eq!(secret_value(&p, "a b xx"), None);
    }
}
