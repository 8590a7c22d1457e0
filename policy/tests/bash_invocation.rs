//! `efr_policy::shell::invocation` against bash itself: each command line of the table is
//! run by the real `bash` with a line (or a script) that writes `$0`, `$@`, `$-` and whether
//! it is a login shell, and the parser must say the same (or refuse what bash refuses, with
//! bash's message and status 2).

use std::io::Write;
use std::process::{Command, Stdio};

use efr_policy::shell::invocation::{BAD_USAGE, Run, parse};

/// The probe: one line per word of `$0 "$@"`, then `$-`, then `login`/`nologin`.
const PROBE: &str = r#"{ printf '%s\n' "$0" "$@"; echo "-$-"; shopt -q login_shell && echo login || echo nologin; } >"$PROBE_OUT""#;

/// `L` is the probe line; `S` the probe script's path.
const CASES: &[&[&str]] = &[
    &["-c", "L"],
    &["-c", "L", "name"],
    &["-c", "L", "name", "a b", ""],
    &["-c", "L", "-x"],
    &["-lc", "L", "n", "x"],
    &["-ec", "L"],
    &["-e", "-c", "L", "--", "x"],
    &["--norc", "--noprofile", "-c", "L"],
    &["-login", "-c", "L"],
    &["--login", "-c", "L", "z"],
    &["-o", "pipefail", "-c", "L"],
    &["-co", "errexit", "L", "n"],
    &["+e", "-c", "L"],
    &["-e", "+e", "-c", "L"],
    &["+c", "L"],
    &["-x", "-u", "-c", "L", "0", "1"],
    &["-xu", "+x", "-c", "L"],
    &["-O", "extglob", "-c", "L"],
    &["--rcfile", "/dev/null", "-c", "L"],
    &["--norc", "-i", "-c", "L"],
    &["-aBfh", "-c", "L"],
    &["-E", "-T", "-C", "-c", "L"],
    &["-o", "nounset", "+o", "nounset", "-c", "L"],
    &[],
    &["-s", "a", "b"],
    &["-l", "-s"],
    &["S", "x", "y"],
    &["-", "S", "a"],
    &["--", "S"],
    &["-e", "S", "-c"],
    &["--norc", "S"],
    // Refused.
    &["--bogus", "-c", "L"],
    &["-z", "-c", "L"],
    &["+y", "-c", "L"],
    &["-o", "nope", "-c", "L"],
    &["-c"],
    &["-l", "-c"],
    &["--rcfile"],
    &["-l", "--norc", "-c", "L"],
];

struct Seen {
    status: i32,
    stderr: String,
    words: Vec<String>,
    dollar_dash: String,
    login: bool,
}

fn bash(args: &[String], script_on_stdin: bool, dir: &std::path::Path) -> Seen {
    let out = dir.join("out");
    let _ = std::fs::remove_file(&out);
    let mut child = Command::new("bash")
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("PROBE_OUT", &out)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    {
        let mut stdin = child.stdin.take().unwrap();
        if script_on_stdin {
            let _ = stdin.write_all(format!("{PROBE}\n").as_bytes());
        }
    }
    let o = child.wait_with_output().unwrap();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let login = lines.pop().is_some_and(|l| l == "login");
    let dollar_dash = lines.pop().unwrap_or_default();
    Seen {
        status: o.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        words: lines,
        dollar_dash,
        login,
    }
}

#[test]
fn every_case_reads_as_bash_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("probe.sh");
    std::fs::write(&script, format!("{PROBE}\n")).unwrap();
    let script = script.to_string_lossy().into_owned();
    for case in CASES {
        let args: Vec<String> = case
            .iter()
            .map(|w| match *w {
                "L" => PROBE.to_string(),
                "S" => script.clone(),
                w => w.to_string(),
            })
            .collect();
        let parsed = parse(&args);
        let on_stdin = matches!(&parsed, Ok(i) if i.run == Run::Stdin);
        let seen = bash(&args, on_stdin, dir.path());
        let inv = match parsed {
            Err(e) => {
                assert_eq!(seen.status, BAD_USAGE, "{case:?}: bash took it");
                assert!(
                    seen.stderr.contains(&e.to_string()),
                    "{case:?}: we say {e:?}, bash said {:?}",
                    seen.stderr
                );
                continue;
            }
            Ok(i) => i,
        };
        assert_eq!(seen.status, 0, "{case:?}: bash refused: {}", seen.stderr);
        let mut want = vec![inv.name.clone().unwrap_or_else(|| "bash".into())];
        want.extend(inv.positional.iter().cloned());
        assert_eq!(seen.words, want, "{case:?}: $0 and $@");
        assert_eq!(seen.login, inv.login, "{case:?}: login shell");
        for c in inv.flags_on.chars() {
            assert!(
                seen.dollar_dash.contains(c),
                "{case:?}: {c} not in {}",
                seen.dollar_dash
            );
        }
        for c in inv.flags_off.chars() {
            assert!(
                !seen.dollar_dash.contains(c),
                "{case:?}: {c} in {}",
                seen.dollar_dash
            );
        }
        if let Run::Command(l) = &inv.run {
            assert_eq!(l, PROBE, "{case:?}: the line");
        }
        assert_eq!(inv.args, args);
    }
}

#[test]
fn every_o_name_is_bashs() {
    let o = Command::new("bash")
        .args(["-c", "set -o"])
        .output()
        .unwrap();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let name = line.split_whitespace().next().unwrap();
        let args = vec![
            "-o".to_string(),
            name.to_string(),
            "-c".into(),
            "true".into(),
        ];
        assert!(parse(&args).is_ok(), "bash's -o {name} refused");
    }
}
