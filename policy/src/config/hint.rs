//! Config hints: the lines of TOML a message proposes for the user's config file, rendered
//! so that they paste as printed (a table header line, then one `key = value` line per
//! entry, keys and strings quoted by TOML's rules), and merged when one call needs several
//! entries of the same table.
//!
//! Every config snippet the service, the proxy's records and the CLI print is made here, so
//! that one test can render each of them (several entries, odd names) and load it with the
//! config's own parser on top of a user's file.

use std::net::IpAddr;

/// The tables a hint is made for: the only headers [`ConfigHint::from_rendered`] reads back.
const TABLES: &[&str] = &["network.resolve", "sandbox"];

/// The value of one entry of a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HintValue {
    Str(String),
}

/// Lines for one table of the config: `[TABLE]` and its entries, in order, one per key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigHint {
    /// The table's dotted name, each part a bare TOML key (`network.resolve`).
    table: &'static str,
    /// `(key, value)`, one per key (the first kept).
    entries: Vec<(String, HintValue)>,
}

impl ConfigHint {
    /// `[network.resolve]` with one entry per name (the first address of a name kept): what
    /// a refusal of a name that resolved to a special address proposes. A name is written
    /// in lower case; one the table cannot hold (an `_` in a label, say) gets no entry
    /// ([`ConfigHint::resolvable`]), so that the lines always load.
    pub fn resolve<'a>(names: impl IntoIterator<Item = (&'a str, IpAddr)>) -> ConfigHint {
        let mut h = ConfigHint {
            table: "network.resolve",
            entries: Vec::new(),
        };
        for (name, address) in names {
            if let Some(n) = ConfigHint::resolvable(name) {
                h.push(&n, HintValue::Str(address.to_string()));
            }
        }
        h
    }

    /// `name` as a `[network.resolve]` key (lower case), or `None` when the table cannot
    /// hold it (the config's host name rule: letters, digits and `-` in each label).
    pub fn resolvable(name: &str) -> Option<String> {
        let n = name.to_ascii_lowercase();
        (!n.starts_with('*') && super::rules::check_host(&n).is_ok()).then_some(n)
    }

    /// `[sandbox]` `shell = "sh"`: what a line proposes when its bash is missing.
    pub fn sandbox_shell(shell: &super::ShellChoice) -> ConfigHint {
        let mut h = ConfigHint {
            table: "sandbox",
            entries: Vec::new(),
        };
        h.push("shell", HintValue::Str(shell.as_string()));
        h
    }

    fn push(&mut self, key: &str, value: HintValue) {
        if !self.entries.iter().any(|(k, _)| k == key) {
            self.entries.push((key.to_string(), value));
        }
    }

    /// The table's dotted name, as its header writes it (`network.resolve`).
    pub fn table(&self) -> &'static str {
        self.table
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds the entries of `other` (the same table) that this hint does not have; `false`
    /// (and nothing added) for another table.
    pub fn merge(&mut self, other: &ConfigHint) -> bool {
        if other.table != self.table {
            return false;
        }
        for (k, v) in &other.entries {
            self.push(k, v.clone());
        }
        true
    }

    /// The hint that [`ConfigHint::render`] wrote as `text` (a record's reason carries it
    /// after its first line), read back with the TOML parser; `None` for text that is not
    /// one table of `TABLES` with string entries.
    pub fn from_rendered(text: &str) -> Option<ConfigHint> {
        // The config loader's own parser (toml's, fuzzed with the loader): toml_edit's
        // document parser panics on some malformed input.
        let doc = toml::de::DeTable::parse(text).ok()?;
        let mut found: Option<ConfigHint> = None;
        for &name in TABLES {
            let Some(t) = name.split('.').try_fold(doc.get_ref(), |t, part| {
                match t.get(part).map(toml::Spanned::get_ref) {
                    Some(toml::de::DeValue::Table(inner)) => Some(inner),
                    _ => None,
                }
            }) else {
                continue;
            };
            let mut h = ConfigHint {
                table: name,
                entries: Vec::new(),
            };
            for (k, v) in super::parse::ordered(t) {
                let toml::de::DeValue::String(v) = v.get_ref() else {
                    return None;
                };
                h.push(k.get_ref(), HintValue::Str(v.to_string()));
            }
            if h.is_empty() {
                continue;
            }
            if found.replace(h).is_some() {
                return None;
            }
        }
        found
    }

    /// The hints that reasons carry after their first line, merged: one per table, in the
    /// order first met, each key once.
    pub fn gather<'a>(reasons: impl IntoIterator<Item = &'a str>) -> Vec<ConfigHint> {
        let mut out: Vec<ConfigHint> = Vec::new();
        for r in reasons {
            let Some((_, rest)) = r.split_once('\n') else {
                continue;
            };
            let Some(h) = ConfigHint::from_rendered(rest) else {
                continue;
            };
            if !out.iter_mut().any(|o| o.merge(&h)) {
                out.push(h);
            }
        }
        out
    }

    /// Each entry as its line under the header (`"a.test" = "10.1.2.3"`).
    pub fn entry_lines(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|(k, v)| format!("{} = {}", toml_key(k), toml_value(v)))
            .collect()
    }

    /// The pasteable text: the header line, then one line per entry, each ending in a
    /// newline.
    pub fn render(&self) -> String {
        let mut out = format!("[{}]\n", self.table);
        for l in self.entry_lines() {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }
}

/// A key as TOML writes it: bare when it can be, quoted (with TOML's escapes) otherwise.
fn toml_key(k: &str) -> String {
    toml_edit::Key::new(k).display_repr().into_owned()
}

/// A value as TOML writes it (a string quoted with TOML's escapes: no control character
/// reaches the text).
fn toml_value(v: &HintValue) -> String {
    match v {
        HintValue::Str(s) => toml_edit::Value::from(s.as_str()).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_renders_a_header_and_one_line_per_name() {
        let mut h = ConfigHint::resolve([
            ("a.test", "10.1.2.3".parse().unwrap()),
            ("a.test", "10.9.9.9".parse().unwrap()),
        ]);
        assert!(h.merge(&ConfigHint::resolve([("B-c.TEST", "::1".parse().unwrap())])));
        assert!(!h.merge(&ConfigHint::sandbox_shell(&super::super::ShellChoice::Sh)));
        assert_eq!(
            h.render(),
            "[network.resolve]\n\"a.test\" = \"10.1.2.3\"\n\"b-c.test\" = \"::1\"\n"
        );
    }

    #[test]
    fn odd_names_are_quoted_without_controls() {
        let odd = "x\"y\\z\n\u{1b}.test";
        assert!(ConfigHint::resolve([(odd, "10.0.0.1".parse().unwrap())]).is_empty());
        let mut h = ConfigHint::resolve([]);
        h.push(odd, HintValue::Str("10.0.0.1".into()));
        let r = h.render();
        assert!(r.lines().all(|l| !l.chars().any(char::is_control)), "{r:?}");
        assert_eq!(r.lines().count(), 2, "{r:?}");
        assert_eq!(ConfigHint::from_rendered(&r), Some(h));
    }

    #[test]
    fn gather_merges_the_hints_of_reasons() {
        let one = |n: &str, a: &str| {
            format!(
                "refused {n}\n{}",
                ConfigHint::resolve([(n, a.parse().unwrap())]).render()
            )
        };
        let shell = format!(
            "no bash\n{}",
            ConfigHint::sandbox_shell(&super::super::ShellChoice::Sh).render()
        );
        let reasons = [
            one("a.test", "10.0.0.1"),
            "no hint here".to_string(),
            shell.clone(),
            one("b.test", "10.0.0.2"),
            one("a.test", "10.0.0.3"),
            "two lines\nbut [not toml".to_string(),
            "x\n[other]\nk = \"v\"\n".to_string(),
        ];
        let got = ConfigHint::gather(reasons.iter().map(String::as_str));
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0].render(),
            "[network.resolve]\n\"a.test\" = \"10.0.0.1\"\n\"b.test\" = \"10.0.0.2\"\n"
        );
        assert_eq!(got[1].render(), "[sandbox]\nshell = \"sh\"\n");
        // A table that is not a hint's, or a value that is not a string, is not read; nor
        // is text the TOML parser refuses (this one once made toml_edit's parser panic).
        let crash = b"x\n = =[\x01\0zwx\n]\n\n\n.x* =0x\nle[?x\n]\nk\x1b\n! \x01\0\0\0\0\0\0\0\n";
        assert_eq!(
            ConfigHint::from_rendered(std::str::from_utf8(crash).unwrap()),
            None
        );
        assert_eq!(ConfigHint::from_rendered("[sandbox]\nx = 1\n"), None);
        assert_eq!(ConfigHint::from_rendered("a = 1\n"), None);
    }
}
