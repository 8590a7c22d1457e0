//! The strict git config reader against git itself: for generated config texts (the forms
//! git writes, and near misses of them), every text the reader accepts is read by `git
//! config --list --file` as exactly the same keys and values, in the same order. A text the
//! reader refuses is not compared (refusing more than git is the point). Git comes from
//! the machine (`.ci/run` installs it); without it the test fails under
//! `EFR_SANDBOX_MUST_WORK` and says so otherwise.

use std::process::Command;

use efr_sandbox_wire::gitconfig::{ConfigKey, parse_strict};

/// A small deterministic generator (xorshift64*): the same texts on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const SECTIONS: &[&str] = &[
    "core", "Remote", "branch", "include", "a-b", "x9", "core.sub", "",
];
const SUBS: &[&str] = &[
    "origin",
    "main",
    "O\\\"r",
    "a\\\\b",
    "with space",
    "a\\q",
    "",
    "gitdir:~/w/",
];
const NAMES: &[&str] = &[
    "fsmonitor",
    "Bare",
    "url",
    "path",
    "x-1",
    "9x",
    "a_b",
    "hooksPath",
];
const VALUES: &[&str] = &[
    "plain",
    " lead",
    "trail  ",
    "\"quoted # not a comment\"",
    "a # comment",
    "a ; comment",
    "tab\\there",
    "nl\\nhere",
    "back\\\\slash",
    "q\\\"uote",
    "bad\\q",
    "\"open",
    "cont\\",
    "\"\"",
    "mid\"dle\" part",
    "",
    "ext::sh -c x",
    "\t spaced \t",
    "a\u{e9}b",
];
const BLANKS: &[&str] = &["", " ", "\t", "  \t"];

fn line(r: &mut Rng) -> String {
    let b = r.pick(BLANKS);
    match r.below(10) {
        0 => format!("{b}# a comment [x] = y"),
        1 => format!("{b}; another"),
        2 => String::new(),
        3 | 4 => {
            let s = r.pick(SECTIONS);
            match r.below(4) {
                0 => format!("{b}[{s}]"),
                1 => format!("{b}[{s} \"{}\"]", r.pick(SUBS)),
                2 => format!("{b}[{s}]{} # c", r.pick(BLANKS)),
                _ => format!("{b}[{s}] {} = x", r.pick(NAMES)),
            }
        }
        5 => format!("{b}{}", r.pick(NAMES)),
        _ => format!(
            "{b}{}{}={}{}",
            r.pick(NAMES),
            r.pick(BLANKS),
            r.pick(BLANKS),
            r.pick(VALUES)
        ),
    }
}

fn text(r: &mut Rng) -> String {
    let mut t = String::new();
    if r.below(4) != 0 {
        t.push_str("[core]\n");
    }
    for _ in 0..1 + r.below(6) {
        t.push_str(&line(r));
        t.push_str(if r.below(8) == 0 { "\r\n" } else { "\n" });
    }
    if r.below(5) == 0 {
        t.pop();
    }
    t
}

/// `git config --list -z` of the file `f`: each key and its value (None for a key git
/// lists without one).
fn git_list(f: &std::path::Path) -> Option<Vec<ConfigKey>> {
    let o = Command::new("git")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", "/nonexistent")
        .args(["config", "--no-includes", "--list", "-z", "--file"])
        .arg(f)
        .output()
        .ok()?;
    if !o.status.success() {
        return None;
    }
    let mut out = Vec::new();
    for item in o.stdout.split(|&b| b == 0).filter(|i| !i.is_empty()) {
        match item.iter().position(|&b| b == b'\n') {
            Some(i) => out.push(ConfigKey {
                name: String::from_utf8_lossy(&item[..i]).into_owned(),
                value: Some(item[i + 1..].to_vec()),
            }),
            None => out.push(ConfigKey {
                name: String::from_utf8_lossy(item).into_owned(),
                value: None,
            }),
        }
    }
    Some(out)
}

#[test]
fn every_text_the_strict_reader_accepts_git_reads_the_same() {
    let have_git = Command::new("git").arg("--version").output().is_ok();
    if !have_git {
        assert!(
            std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
            "git is needed for the oracle"
        );
        eprintln!("SKIP: git is not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("config");
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..1500 {
        let t = text(&mut r);
        std::fs::write(&f, &t).unwrap();
        match parse_strict(t.as_bytes()) {
            Ok(ours) => {
                accepted += 1;
                let git = git_list(&f)
                    .unwrap_or_else(|| panic!("the strict reader accepts what git refuses: {t:?}"));
                assert_eq!(ours, git, "read otherwise than git: {t:?}");
            }
            Err(_) => refused += 1,
        }
    }
    eprintln!("accepted {accepted}, refused {refused}");
    // Both sides are exercised: enough texts are accepted for the comparison to mean
    // something, and the near misses are refused.
    assert!(
        accepted > 300 && refused > 300,
        "accepted {accepted}, refused {refused}"
    );
}
