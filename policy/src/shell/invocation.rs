//! bash's command line read as bash reads it (`shell.c`: `parse_long_options`, then
//! `parse_shell_options`, then the command string, the script file or stdin), for
//! `efr-sandbox shell` / `efr-bash`, which hand the same words to a contained bash and need
//! to know what it will run: the `-c` line, a script file, or a script on stdin, and `$0`
//! and the positional arguments.
//!
//! bash's rules: long options (`--login`, also spelled `-login`) come first, and an unknown
//! one spelled with `--` is an error; then words starting with `-` or `+` are flag groups
//! (`-lc`, `-ec`, `+x`), where `o` and `O` take the next word and `-` or `--` alone end the
//! options; then with `c` the next word is the line and the words after it are `$0` and the
//! arguments; without it the next word is a script file, and with none (or `-s`) the script
//! is stdin. The names `-O` takes are checked by the contained bash itself (its own list
//! changes between versions); everything else wrong is found here with bash's message and
//! status 2, before a sandbox starts.

use thiserror::Error;

/// bash's status for a bad command line (`EX_BADUSAGE`).
pub const BAD_USAGE: i32 = 2;

/// bash's long options, and whether each takes the next word.
const LONG_OPTIONS: &[(&str, bool)] = &[
    ("debug", false),
    ("debugger", false),
    ("dump-po-strings", false),
    ("dump-strings", false),
    ("help", false),
    ("init-file", true),
    ("login", false),
    ("noediting", false),
    ("noprofile", false),
    ("norc", false),
    ("posix", false),
    ("pretty-print", false),
    ("protected", false),
    ("rcfile", true),
    ("restricted", false),
    ("verbose", false),
    ("version", false),
    ("wordexp", false),
];

/// The letters of `set` bash takes at invocation (`-abefhkmnptuvxBCEHPT`, and `-i`, `-r`).
const FLAG_LETTERS: &str = "abefhikmnprtuvxBCEHPT";

/// The names `-o` takes (bash 5's `set -o` list; older ones know a subset).
const O_NAMES: &[&str] = &[
    "allexport",
    "braceexpand",
    "emacs",
    "errexit",
    "errtrace",
    "functrace",
    "hashall",
    "histexpand",
    "history",
    "ignoreeof",
    "interactive-comments",
    "keyword",
    "monitor",
    "noclobber",
    "noexec",
    "noglob",
    "nolog",
    "notify",
    "nounset",
    "onecmd",
    "physical",
    "pipefail",
    "posix",
    "privileged",
    "verbose",
    "vi",
    "xtrace",
];

/// What bash runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// `-c LINE`.
    Command(String),
    /// A script file (bash's first word after the options).
    Script(String),
    /// A script read from stdin (no word after the options, or `-s`).
    Stdin,
}

/// One command line of bash, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The words after bash's name, as given: what the contained bash gets.
    pub args: Vec<String>,
    /// What it runs.
    pub run: Run,
    /// `$0` when the words set it (the word after `-c LINE`, or the script file).
    pub name: Option<String>,
    /// `$1`...
    pub positional: Vec<String>,
    /// `-l`, `--login` or `-login`.
    pub login: bool,
    /// The `set` letters turned on (`-e`) and off (`+e`), last word wins.
    pub flags_on: String,
    /// See `flags_on`.
    pub flags_off: String,
}

/// Why bash would refuse the command line (status [`BAD_USAGE`]); the message is bash's,
/// after its `NAME: ` prefix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvocationError {
    /// An unknown `--long` option, or an unknown flag letter (`-z`).
    #[error("{0}: invalid option")]
    InvalidOption(String),
    /// `-c`, `--rcfile`, `--init-file` with no word after it.
    #[error("{0}: option requires an argument")]
    NeedsArgument(String),
    /// `-o NAME` with a name bash does not know.
    #[error("{0}: invalid option name")]
    InvalidOptionName(String),
}

/// Reads bash's words after its name.
pub fn parse(args: &[String]) -> Result<Invocation, InvocationError> {
    let mut inv = Invocation {
        args: args.to_vec(),
        run: Run::Stdin,
        name: None,
        positional: Vec::new(),
        login: false,
        flags_on: String::new(),
        flags_off: String::new(),
    };
    let i = long_options(args, &mut inv)?;
    let (i, command, stdin) = short_options(args, i, &mut inv)?;
    let rest = &args[i..];
    match (command, rest) {
        (true, []) => return Err(InvocationError::NeedsArgument("-c".into())),
        (true, [line, tail @ ..]) => {
            inv.run = Run::Command(line.clone());
            inv.name = tail.first().cloned();
            inv.positional = tail.iter().skip(1).cloned().collect();
        }
        (false, [script, tail @ ..]) if !stdin => {
            inv.run = Run::Script(script.clone());
            inv.name = Some(script.clone());
            inv.positional = tail.to_vec();
        }
        (false, tail) => inv.positional = tail.to_vec(),
    }
    Ok(inv)
}

/// bash's `parse_long_options`: the index of the first word it does not take.
fn long_options(args: &[String], inv: &mut Invocation) -> Result<usize, InvocationError> {
    let mut i = 0;
    while let Some(word) = args.get(i).filter(|w| w.starts_with('-')) {
        let double = word.starts_with("--") && word.len() > 2;
        let name = if double { &word[2..] } else { &word[1..] };
        let Some(&(known, takes)) = LONG_OPTIONS.iter().find(|(n, _)| *n == name) else {
            if double {
                return Err(InvocationError::InvalidOption(word.clone()));
            }
            break;
        };
        if takes {
            if args.get(i + 1).is_none() {
                return Err(InvocationError::NeedsArgument(known.into()));
            }
            i += 1;
        }
        inv.login |= known == "login";
        i += 1;
    }
    Ok(i)
}

/// bash's `parse_shell_options` from `i`: the index of the first word after the options,
/// whether `c` was given, and whether `s` was.
fn short_options(
    args: &[String],
    mut i: usize,
    inv: &mut Invocation,
) -> Result<(usize, bool, bool), InvocationError> {
    let (mut command, mut stdin) = (false, false);
    while let Some(word) = args
        .get(i)
        .filter(|w| w.starts_with('-') || w.starts_with('+'))
    {
        let mut next = i + 1;
        if word == "-" || word == "--" {
            return Ok((next, command, stdin));
        }
        let on = word.starts_with('-');
        for c in word[1..].chars() {
            match c {
                'c' => command = true,
                'l' => inv.login = true,
                's' => stdin = true,
                'D' => {}
                'o' => {
                    // With no word after it, bash lists the options and goes on.
                    if let Some(name) = args.get(next) {
                        if !O_NAMES.contains(&name.as_str()) {
                            return Err(InvocationError::InvalidOptionName(name.clone()));
                        }
                        next += 1;
                    }
                }
                'O' => next += usize::from(args.get(next).is_some()),
                c if FLAG_LETTERS.contains(c) => {
                    let (add, del) = if on {
                        (&mut inv.flags_on, &mut inv.flags_off)
                    } else {
                        (&mut inv.flags_off, &mut inv.flags_on)
                    };
                    del.retain(|x| x != c);
                    if !add.contains(c) {
                        add.push(c);
                    }
                }
                c => {
                    let sign = if on { '-' } else { '+' };
                    return Err(InvocationError::InvalidOption(format!("{sign}{c}")));
                }
            }
        }
        i = next;
    }
    Ok((i, command, stdin))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn reads_the_common_forms() {
        let i = parse(&words(&["-lc", "echo hi", "me", "a", "b"])).unwrap();
        assert_eq!(i.run, Run::Command("echo hi".into()));
        assert_eq!(i.name.as_deref(), Some("me"));
        assert_eq!(i.positional, words(&["a", "b"]));
        assert!(i.login);
        let i = parse(&words(&["-e", "-o", "pipefail", "-c", "x"])).unwrap();
        assert_eq!(i.flags_on, "e");
        assert_eq!(i.run, Run::Command("x".into()));
        assert_eq!(parse(&[]).unwrap().run, Run::Stdin);
        assert_eq!(
            parse(&words(&["--norc", "s.sh", "1"])).unwrap().run,
            Run::Script("s.sh".into())
        );
        assert_eq!(
            parse(&words(&["--bogus", "-c", "x"])).unwrap_err(),
            InvocationError::InvalidOption("--bogus".into())
        );
        assert_eq!(
            parse(&words(&["-c"])).unwrap_err().to_string(),
            "-c: option requires an argument"
        );
    }
}
