//! `efr-sandbox shell [BASH OPTIONS] [-c LINE [NAME [ARG...]]]`, also installed as
//! `efr-bash`: bash's own command line, read as bash reads it
//! ([`efr_policy::shell::invocation`]), run by bash in a contained call with the same words
//! (`bash [opts] -c LINE NAME ARG...` inside, so every option keeps its meaning; without
//! `-c`, a script file or the script on stdin). Stdout, stderr and the exit status are the
//! line's, plus the sandbox's refusal lines on stderr (as `run` prints them); no `project:`
//! line. An agent can be pointed at it as its shell.
//!
//! Settings come from the environment (an agent passes no options of ours):
//! `EFR_SANDBOX_PROJECT` (project roots joined by `:`; default as `run`'s),
//! `EFR_SANDBOX_CONVERSATION` (default: [`default_conversation`], keyed on the calling
//! process), `EFR_SANDBOX_GRANTS` (standing grants, `KIND=VALUE` separated by blanks, as
//! `run --grant` takes them). Inside a contained call it runs bash directly: the call's
//! sandbox holds for everything it starts ([`super::contained`]).

use std::path::{Path, PathBuf};

use efr_policy::config::ShellChoice;
use efr_policy::shell::invocation::{self, Invocation, Run};

use super::{RunArgs, call_params, launch};

/// The project roots, joined by `:`.
pub const PROJECT_ENV: &str = "EFR_SANDBOX_PROJECT";
/// The conversation id.
pub const CONVERSATION_ENV: &str = "EFR_SANDBOX_CONVERSATION";
/// Standing grants, `KIND=VALUE` separated by blanks.
pub const GRANTS_ENV: &str = "EFR_SANDBOX_GRANTS";

/// The name the shell answers to (in its messages, and when the executable is called so).
pub const EFR_BASH: &str = "efr-bash";

/// Runs `efr-sandbox shell ARGS` (`prog` is the name in bash's messages); the exit status.
pub fn run(prog: &str, args: Vec<String>) -> anyhow::Result<i32> {
    let inv = match invocation::parse(&args) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{prog}: {e}");
            return Ok(invocation::BAD_USAGE);
        }
    };
    if super::contained::inside_call() {
        return Ok(exec_bash(prog, &inv.args));
    }
    let a = match settings(prog, line_of(&inv)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{prog}: {e}");
            return Ok(invocation::BAD_USAGE);
        }
    };
    let here = std::env::current_dir()?;
    let line = a.line.concat();
    let (mut p, env, runtime) = match call_params(&a, &here, line, false) {
        Ok(x) => x,
        Err(code) => return Ok(code),
    };
    p.shell = Some("bash".into());
    p.shell_args = inv.args;
    launch(a, p, env, runtime)
}

/// What the call is recorded and classified as: the `-c` line, else bash's command line.
pub fn line_of(inv: &Invocation) -> String {
    match &inv.run {
        Run::Command(l) => l.clone(),
        Run::Script(_) | Run::Stdin => {
            let words = std::iter::once("bash").chain(inv.args.iter().map(String::as_str));
            shlex::try_join(words).unwrap_or_else(|_| "bash".into())
        }
    }
}

/// The call's settings from the environment, as `run`'s arguments.
fn settings(prog: &str, line: String) -> Result<RunArgs, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut a = RunArgs::plain(vec![line]);
    a.projects = var(PROJECT_ENV)
        .map(|v| {
            v.split(':')
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    a.grants = var(GRANTS_ENV)
        .map(|v| v.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    a.conversation = match var(CONVERSATION_ENV) {
        Some(c) => Some(c),
        None if var("XDG_RUNTIME_DIR").is_none() => {
            eprintln!(
                "{prog}: no $XDG_RUNTIME_DIR, so no conversation: /tmp and $SCRATCH do not last between calls (set {CONVERSATION_ENV} and XDG_RUNTIME_DIR)"
            );
            None
        }
        None => Some(default_conversation(std::os::unix::process::parent_id())?),
    };
    Ok(a)
}

/// The conversation of the calling process `ppid`: its pid and its start time (in clock
/// ticks since boot, `/proc/PID/stat`'s 22nd field), so that its calls share `/tmp` and
/// `$SCRATCH` for as long as it runs, and a later process that gets the same pid gets a
/// conversation of its own.
pub fn default_conversation(ppid: u32) -> Result<String, String> {
    let path = format!("/proc/{ppid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let start = start_time(&stat).ok_or_else(|| format!("{path}: no start time"))?;
    Ok(format!("shell-{ppid}-{start}"))
}

/// The start time of a `/proc/PID/stat` line: the 20th field after the command's `)` (the
/// command may hold blanks and parentheses; the last `)` ends it).
fn start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Inside a call: bash itself, with the same words; returns only when it cannot run.
fn exec_bash(prog: &str, args: &[String]) -> i32 {
    use std::os::unix::process::CommandExt;
    let bash = match ShellChoice::Bash.resolve() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{prog}: {e}");
            return 127;
        }
    };
    let e = std::process::Command::new(Path::new(&bash))
        .args(args)
        .exec();
    eprintln!("{prog}: cannot run {bash}: {e}");
    126
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_of_stat_lines() {
        let line =
            "1234 (a) b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200";
        assert_eq!(start_time(line), Some(987654));
        assert_eq!(start_time("1 (x) S 0"), None);
        let me = default_conversation(std::process::id()).unwrap();
        assert!(
            me.starts_with(&format!("shell-{}-", std::process::id())),
            "{me}"
        );
        assert!(efr_call::launch::check_conversation(&me).is_ok());
        assert!(default_conversation(u32::MAX).is_err());
    }

    #[test]
    fn recorded_lines() {
        let p = |w: &[&str]| {
            invocation::parse(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
        };
        assert_eq!(line_of(&p(&["-lc", "echo hi", "x"])), "echo hi");
        assert_eq!(
            line_of(&p(&["-e", "my script.sh", "a"])),
            "bash -e 'my script.sh' a"
        );
        assert_eq!(line_of(&p(&[])), "bash");
    }
}
