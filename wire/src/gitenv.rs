//! The git config an environment carries: `GIT_CONFIG_COUNT` with `GIT_CONFIG_KEY_<n>` and
//! `GIT_CONFIG_VALUE_<n>` for every `n` below it, which git reads as `-c KEY=VALUE` pairs
//! in every command (`config.c`: `git_config_from_parameters`). Agents set such a set in
//! their shell calls to harden git (Gemini CLI empties `core.fsmonitor`, `core.hooksPath`,
//! `credential.helper`, the editors, ...).
//!
//! The set is judged as one: it reaches a contained call whole or not at all. Half a set
//! is worse than none: a `GIT_CONFIG_COUNT` whose keys are missing makes every git command
//! fail with 128. It passes when every pair either sets a key of the reviewed safe list
//! (`git.safe_config_keys`, the list the write supervisor reads config files with) or
//! turns off a key that runs code ([`EMPTIED_KEYS`]: empties it, or gives it a value that
//! runs nothing), and no key or value looks like a secret. Anything else drops the whole
//! set, each of its variables reported with the reason: a key that names a program
//! (`core.sshCommand=...`, `credential.helper=cache`, whose daemon would hand the user's
//! passwords to the call), a key git cannot parse, a missing pair, a count git would not
//! read. Members git never reads (an index at or beyond the count, `GIT_CONFIG_KEY_01`)
//! are dropped on their own and reported; the set stays.
//!
//! The names are never judged as secret names: `GIT_CONFIG_KEY_0` looks like `*_KEY_*`,
//! but what it holds is a config key, and what a value holds is checked by the secret
//! detector like any other value.

use crate::envfilter::DropReason;

/// The count's name.
pub const COUNT: &str = "GIT_CONFIG_COUNT";
/// The prefix of a key's name.
pub const KEY_PREFIX: &str = "GIT_CONFIG_KEY_";
/// The prefix of a value's name.
pub const VALUE_PREFIX: &str = "GIT_CONFIG_VALUE_";

/// A key that makes git run a program, and the values that turn it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmptiedKey {
    /// The key as git canonicalizes it (section and name lower case).
    pub key: &'static str,
    /// The values (exactly) that make git run nothing for it.
    pub values: &'static [&'static str],
    /// What the key runs and why these values do not.
    pub reason: &'static str,
}

/// The keys that run code which an environment set may turn off: the reviewed table of the
/// set rule, beside `git.safe_config_keys` (keys that run nothing whatever their value).
pub const EMPTIED_KEYS: &[EmptiedKey] = &[
    EmptiedKey {
        key: "core.fsmonitor",
        values: &["", "false"],
        reason: "names a program git runs at every status; empty or false runs none",
    },
    EmptiedKey {
        key: "core.hookspath",
        values: &["", "/dev/null"],
        reason: "the directory hooks run from; empty or /dev/null holds no hook",
    },
    EmptiedKey {
        key: "credential.helper",
        values: &[""],
        reason: "names helpers that hand out the user's passwords; empty clears the list",
    },
    EmptiedKey {
        key: "core.askpass",
        values: &[""],
        reason: "names a program git asks passwords with; empty asks none",
    },
    EmptiedKey {
        key: "core.sshcommand",
        values: &[""],
        reason: "names the program git runs as ssh; empty is plain ssh",
    },
    EmptiedKey {
        key: "core.editor",
        values: &[""],
        reason: "names the editor git runs; empty names none",
    },
    EmptiedKey {
        key: "sequence.editor",
        values: &[""],
        reason: "names the editor of rebase -i; empty names none",
    },
    EmptiedKey {
        key: "core.pager",
        values: &["", "cat"],
        reason: "names the pager git runs; empty or cat shows plain text",
    },
    EmptiedKey {
        key: "diff.external",
        values: &[""],
        reason: "names a program git diff runs; empty runs git's own diff",
    },
    EmptiedKey {
        key: "protocol.ext.allow",
        values: &["never"],
        reason: "lets ext:: urls run commands; never forbids them",
    },
];

/// Why a variable of the set does not reach the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetDrop {
    /// Keys or values without a count: git reads none of them.
    #[error(
        "GIT_CONFIG_KEY_n or GIT_CONFIG_VALUE_n without GIT_CONFIG_COUNT: git reads none of them"
    )]
    NoCount,
    /// The count is not a plain decimal number.
    #[error("GIT_CONFIG_COUNT={0:?} is not a count (git would fail every command)")]
    BadCount(String),
    /// A variable the count asks for is not there.
    #[error(
        "the GIT_CONFIG_* set is dropped as one: {0} is missing (git would fail every command)"
    )]
    Missing(String),
    /// A key git cannot parse.
    #[error("the GIT_CONFIG_* set is dropped as one: {name}={key:?} is not a git config key")]
    BadKey {
        /// The variable.
        name: String,
        /// Its value.
        key: String,
    },
    /// A key that can run a program, with a value that does not turn it off.
    #[error(
        "the GIT_CONFIG_* set is dropped as one: {name} names {key}, which is neither on git.safe_config_keys nor turned off by its value"
    )]
    RunsCode {
        /// The variable.
        name: String,
        /// The key, canonical.
        key: String,
    },
    /// A key or value that looks like a secret.
    #[error("the GIT_CONFIG_* set is dropped as one: {name} looks like a secret")]
    Secret {
        /// The variable.
        name: String,
        /// Which secret shape.
        why: DropReason,
    },
    /// The set's count name is refused by `environment.drop`.
    #[error(
        "the GIT_CONFIG_* set is dropped as one: GIT_CONFIG_COUNT matches {0} of environment.drop"
    )]
    DroppedName(String),
    /// A member git never reads (at or beyond the count, or not a decimal index).
    #[error("{0} is not read by git (beyond GIT_CONFIG_COUNT, or not a plain index)")]
    Unread(String),
}

/// What the rule does with the set's variables of an environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    /// The names that reach the call.
    pub pass: Vec<String>,
    /// The names that do not, each with why, in the environment's order.
    pub dropped: Vec<(String, SetDrop)>,
}

/// Whether `name` is one of the set's variables (the count, or a name with the key or value
/// prefix, whether git reads it or not).
pub fn is_member(name: &str) -> bool {
    name == COUNT || name.starts_with(KEY_PREFIX) || name.starts_with(VALUE_PREFIX)
}

/// The index of `name` when it is a key (`true`) or value (`false`) variable git reads:
/// the prefix and a decimal number as `%d` writes it.
fn indexed(name: &str) -> Option<(bool, u64)> {
    let (is_key, digits) = match name.strip_prefix(KEY_PREFIX) {
        Some(d) => (true, d),
        None => (false, name.strip_prefix(VALUE_PREFIX)?),
    };
    let plain = !digits.is_empty()
        && digits.len() <= 19
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    plain.then(|| digits.parse().ok().map(|n| (is_key, n)))?
}

/// `key` as git canonicalizes it (`config.c`: `git_config_parse_key`): section and name
/// lower case, the subsection as written. `None` for a key git refuses: no section or
/// name, a section or name with a character other than a letter, digit or `-`, a name
/// that does not start with a letter, a newline in the subsection.
pub fn canonical_key(key: &str) -> Option<String> {
    let first = key.find('.')?;
    let last = key.rfind('.')?;
    let (section, name) = (&key[..first], &key[last + 1..]);
    let keychar = |c: char| c.is_ascii_alphanumeric() || c == '-';
    if section.is_empty() || !section.chars().all(keychar) {
        return None;
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) || !name.chars().all(keychar) {
        return None;
    }
    let sub = &key[first..=last];
    if sub.contains('\n') {
        return None;
    }
    Some(format!(
        "{}{sub}{}",
        section.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    ))
}

/// Whether the pair turns off a key of [`EMPTIED_KEYS`] (`key` canonical).
pub fn turns_off(key: &str, value: &str) -> bool {
    EMPTIED_KEYS
        .iter()
        .any(|e| e.key == key && e.values.contains(&value))
}

/// Judges the set's variables among `vars` (other names are left alone). `safe` is
/// `git.safe_config_keys`; `secret` says whether a key or value looks like a secret;
/// `dropped_name` is the `environment.drop` glob that refuses the name
/// `GIT_CONFIG_COUNT`, if one does (the set then goes as a whole).
pub fn judge<'a>(
    vars: impl IntoIterator<Item = (&'a str, &'a str)>,
    safe: &[String],
    secret: impl Fn(&str) -> Option<DropReason>,
    dropped_name: Option<&str>,
) -> Judged {
    let members: Vec<(&str, &str)> = vars.into_iter().filter(|(n, _)| is_member(n)).collect();
    if members.is_empty() {
        return Judged::default();
    }
    let all = |why: SetDrop| Judged {
        pass: Vec::new(),
        dropped: members
            .iter()
            .map(|(n, _)| (n.to_string(), why.clone()))
            .collect(),
    };
    if let Some(g) = dropped_name {
        return all(SetDrop::DroppedName(g.to_string()));
    }
    let Some(&(_, count)) = members.iter().find(|(n, _)| *n == COUNT) else {
        return all(SetDrop::NoCount);
    };
    let Some(count) = parse_count(count) else {
        return all(SetDrop::BadCount(count.to_string()));
    };
    let indexed_vars: std::collections::BTreeMap<(bool, u64), &str> = members
        .iter()
        .filter_map(|(n, v)| indexed(n).map(|k| (k, *v)))
        .collect();
    if let Err(why) = pairs(count, &indexed_vars, safe, &secret) {
        return all(why);
    }
    let mut out = Judged::default();
    for (n, _) in &members {
        match indexed(n) {
            _ if *n == COUNT => out.pass.push(n.to_string()),
            Some((_, i)) if i < count => out.pass.push(n.to_string()),
            _ => out
                .dropped
                .push((n.to_string(), SetDrop::Unread(n.to_string()))),
        }
    }
    out
}

/// The count git reads from `GIT_CONFIG_COUNT`, when it is a plain decimal number (git
/// also takes a sign or blanks before it; such a count is refused here).
fn parse_count(c: &str) -> Option<u64> {
    let plain = !c.is_empty() && c.len() <= 19 && c.bytes().all(|b| b.is_ascii_digit());
    plain.then(|| c.parse().ok())?
}

/// Judges every pair below `count` (`vars`: the key (`true`) and value variables by
/// index). A count beyond the variables present misses one at or before their number, so
/// the work is bounded by the environment, not by the count.
fn pairs(
    count: u64,
    vars: &std::collections::BTreeMap<(bool, u64), &str>,
    safe: &[String],
    secret: &impl Fn(&str) -> Option<DropReason>,
) -> Result<(), SetDrop> {
    let bound = count.min(vars.len() as u64);
    for i in 0..bound {
        let (Some(key), Some(value)) = (vars.get(&(true, i)), vars.get(&(false, i))) else {
            let which = if vars.contains_key(&(true, i)) {
                VALUE_PREFIX
            } else {
                KEY_PREFIX
            };
            return Err(SetDrop::Missing(format!("{which}{i}")));
        };
        pair(i, key, value, safe, secret)?;
    }
    if count > bound {
        return Err(SetDrop::Missing(format!("{KEY_PREFIX}{bound}")));
    }
    Ok(())
}

/// Judges the pair of index `i`.
fn pair(
    i: u64,
    key: &str,
    value: &str,
    safe: &[String],
    secret: &impl Fn(&str) -> Option<DropReason>,
) -> Result<(), SetDrop> {
    let (kname, vname) = (format!("{KEY_PREFIX}{i}"), format!("{VALUE_PREFIX}{i}"));
    for (name, text) in [(&kname, key), (&vname, value)] {
        if let Some(why) = secret(text) {
            return Err(SetDrop::Secret {
                name: name.clone(),
                why,
            });
        }
    }
    let Some(canon) = canonical_key(key) else {
        return Err(SetDrop::BadKey {
            name: kname,
            key: key.to_string(),
        });
    };
    if crate::gitconfig::key_is_safe(safe, &canon, value.as_bytes()) || turns_off(&canon, value) {
        Ok(())
    } else {
        Err(SetDrop::RunsCode {
            name: kname,
            key: canon,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn safe() -> Vec<String> {
        ["user.name", "core.autocrlf", "remote.*.url", "color.ui"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn no_secret(_: &str) -> Option<DropReason> {
        None
    }

    fn run(vars: &[(&str, &str)]) -> Judged {
        judge(vars.iter().copied(), &safe(), no_secret, None)
    }

    fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut v = vec![(COUNT.to_string(), pairs.len().to_string())];
        for (i, (k, val)) in pairs.iter().enumerate() {
            v.push((format!("{KEY_PREFIX}{i}"), k.to_string()));
            v.push((format!("{VALUE_PREFIX}{i}"), val.to_string()));
        }
        v
    }

    fn judge_set(v: &[(String, String)]) -> Judged {
        judge(
            v.iter().map(|(a, b)| (a.as_str(), b.as_str())),
            &safe(),
            no_secret,
            None,
        )
    }

    /// The set Gemini CLI gives every shell call (`getSafeGitEnv` and the shell
    /// execution service of packages/core).
    const GEMINI: &[(&str, &str)] = &[
        ("credential.helper", ""),
        ("core.fsmonitor", ""),
        ("core.hooksPath", ""),
        ("core.sshCommand", ""),
        ("core.pager", "cat"),
        ("core.editor", ""),
        ("sequence.editor", ""),
        ("diff.external", ""),
    ];

    #[test]
    fn gemini_set_passes_whole() {
        let v = set(GEMINI);
        let j = judge_set(&v);
        assert!(j.dropped.is_empty(), "{:?}", j.dropped);
        assert_eq!(j.pass.len(), 1 + 2 * GEMINI.len());
    }

    #[test]
    fn one_key_that_runs_code_drops_the_whole_set() {
        let v = set(&[("user.name", "x"), ("core.sshCommand", "ssh -i /tmp/k")]);
        let j = judge_set(&v);
        assert!(j.pass.is_empty());
        assert_eq!(j.dropped.len(), 5);
        assert!(j.dropped.iter().all(|(_, w)| matches!(
            w,
            SetDrop::RunsCode { name, key } if name == "GIT_CONFIG_KEY_1" && key == "core.sshcommand"
        )));
        // credential.helper=cache would talk to a daemon holding the user's passwords.
        assert!(
            judge_set(&set(&[("credential.helper", "cache")]))
                .pass
                .is_empty()
        );
        assert!(judge_set(&set(&[("core.pager", "less")])).pass.is_empty());
        assert!(
            judge_set(&set(&[("core.hooksPath", "/tmp/h")]))
                .pass
                .is_empty()
        );
        assert!(judge_set(&set(&[("alias.st", "!sh")])).pass.is_empty());
        assert!(
            judge_set(&set(&[("include.path", "/tmp/c")]))
                .pass
                .is_empty()
        );
        // A safe key with an ext:: url runs a command all the same.
        assert!(
            judge_set(&set(&[("remote.o.url", "ext::sh -c x")]))
                .pass
                .is_empty()
        );
        assert_eq!(
            judge_set(&set(&[("core.hooksPath", "/dev/null")]))
                .pass
                .len(),
            3
        );
    }

    #[test]
    fn keys_are_case_insensitive_as_git_reads_them() {
        for k in ["CORE.FSMONITOR", "Core.FsMonitor", "core.fsmonitor"] {
            assert_eq!(judge_set(&set(&[(k, "")])).pass.len(), 3, "{k}");
        }
        assert_eq!(judge_set(&set(&[("User.Name", "x")])).pass.len(), 3);
        // The subsection keeps its case and may hold dots; section and name fold.
        assert_eq!(
            canonical_key("Remote.My.Origin.URL").as_deref(),
            Some("remote.My.Origin.url")
        );
        assert_eq!(
            judge_set(&set(&[("REMOTE.Up.Stream.Url", "/x")]))
                .pass
                .len(),
            3
        );
        assert!(
            judge_set(&set(&[("url.Base.insteadOf", "/x")]))
                .pass
                .is_empty()
        );
        // A subsection never makes a key of the table (diff.x.external is not diff.external).
        assert!(judge_set(&set(&[("diff.x.textconv", "")])).pass.is_empty());
        assert!(judge_set(&set(&[("core.x.pager", "")])).pass.is_empty());
    }

    #[test]
    fn keys_git_refuses_drop_the_set() {
        for k in [
            "", "core", "core.", ".name", "co re.x", "core.1x", "core.a_b", "a.b\nc.d",
        ] {
            let j = judge_set(&set(&[(k, "")]));
            assert!(j.pass.is_empty(), "{k:?} passed");
            assert!(
                matches!(&j.dropped[0].1, SetDrop::BadKey { .. }),
                "{k:?}: {:?}",
                j.dropped
            );
        }
    }

    #[test]
    fn counts_and_gaps() {
        // A count with a missing key or value: git fails every command, so nothing passes.
        let j = run(&[
            (COUNT, "2"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "a"),
        ]);
        assert!(j.pass.is_empty());
        assert_eq!(j.dropped[0].1, SetDrop::Missing("GIT_CONFIG_KEY_1".into()));
        let j = run(&[(COUNT, "1"), ("GIT_CONFIG_KEY_0", "user.name")]);
        assert_eq!(
            j.dropped[0].1,
            SetDrop::Missing("GIT_CONFIG_VALUE_0".into())
        );
        // A gap: index 1 missing while 2 is there.
        let j = run(&[
            (COUNT, "3"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "a"),
            ("GIT_CONFIG_KEY_2", "user.name"),
            ("GIT_CONFIG_VALUE_2", "a"),
        ]);
        assert!(j.pass.is_empty());
        assert_eq!(j.dropped[0].1, SetDrop::Missing("GIT_CONFIG_KEY_1".into()));
        // Keys without a count.
        let j = run(&[
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "a"),
        ]);
        assert_eq!(j.dropped.len(), 2);
        assert!(j.dropped.iter().all(|(_, w)| *w == SetDrop::NoCount));
        // Counts git would not read.
        for c in [
            "",
            "x",
            "-1",
            "+1",
            " 1",
            "1 ",
            "0x1",
            "99999999999999999999999",
        ] {
            let j = run(&[(COUNT, c)]);
            assert!(j.pass.is_empty(), "{c:?}");
            assert_eq!(j.dropped[0].1, SetDrop::BadCount(c.into()));
        }
        // A count of 0 passes alone; members beyond the count are dropped, the set stays.
        let j = run(&[
            (COUNT, "0"),
            ("GIT_CONFIG_KEY_0", "core.pager"),
            ("GIT_CONFIG_VALUE_0", "x"),
        ]);
        assert_eq!(j.pass, [COUNT]);
        assert_eq!(j.dropped.len(), 2);
        assert!(matches!(j.dropped[0].1, SetDrop::Unread(_)));
        let mut v = set(&[("user.name", "a")]);
        v.push(("GIT_CONFIG_KEY_01".into(), "core.pager".into()));
        v.push(("GIT_CONFIG_VALUE_x".into(), "less".into()));
        let j = judge_set(&v);
        assert_eq!(j.pass.len(), 3);
        assert_eq!(
            j.dropped
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>(),
            ["GIT_CONFIG_KEY_01", "GIT_CONFIG_VALUE_x"]
        );
    }

    #[test]
    fn huge_counts_are_cheap_and_dropped() {
        // The work is bounded by the members present, not by the count.
        for c in ["4294967295", "9223372036854775807", "1000000000000000000"] {
            let mut v = set(&[("user.name", "a")]);
            v[0].1 = c.into();
            let j = judge_set(&v);
            assert!(j.pass.is_empty());
            assert_eq!(j.dropped[0].1, SetDrop::Missing("GIT_CONFIG_KEY_1".into()));
        }
    }

    #[test]
    fn a_secret_in_a_key_or_value_drops_the_set() {
        let secret = |v: &str| v.contains("ghp_").then_some(DropReason::Pattern(0));
        let v = set(&[
            ("user.name", "a"),
            ("http.extraHeader", "Authorization: bearer ghp_x"),
        ]);
        let j = judge(
            v.iter().map(|(a, b)| (a.as_str(), b.as_str())),
            &safe(),
            secret,
            None,
        );
        assert!(j.pass.is_empty());
        assert_eq!(
            j.dropped[0].1,
            SetDrop::Secret {
                name: "GIT_CONFIG_VALUE_1".into(),
                why: DropReason::Pattern(0)
            }
        );
        let v = set(&[("remote.ghp_x.url", "a")]);
        let j = judge(
            v.iter().map(|(a, b)| (a.as_str(), b.as_str())),
            &safe(),
            secret,
            None,
        );
        assert!(
            matches!(&j.dropped[0].1, SetDrop::Secret { name, .. } if name == "GIT_CONFIG_KEY_0")
        );
    }

    #[test]
    fn a_dropped_count_name_drops_the_set() {
        let v = set(GEMINI);
        let j = judge(
            v.iter().map(|(a, b)| (a.as_str(), b.as_str())),
            &safe(),
            no_secret,
            Some("GIT_CONFIG_*"),
        );
        assert!(j.pass.is_empty());
        assert_eq!(j.dropped.len(), v.len());
    }

    #[test]
    fn other_names_are_left_alone() {
        let j = run(&[
            ("GIT_CONFIG", "/x"),
            ("GIT_CONFIG_PARAMETERS", "'a.b'='c'"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(j, Judged::default());
        assert!(!is_member("GIT_CONFIG_GLOBAL"));
        assert!(is_member("GIT_CONFIG_KEY_x"));
    }
}
