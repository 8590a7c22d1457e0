//! `efr-bash` / `efr-sandbox shell` and `run`'s words and shell: the real binaries running
//! real calls on each backend (the backend from the config file, as a user sets it).

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{backends, have};

const EFR_BASH: &str = env!("CARGO_BIN_EXE_efr-bash");
const EFR_SANDBOX: &str = env!("CARGO_BIN_EXE_efr-sandbox");

/// A test's world, outside `/tmp` (every call has its own): a home, a config naming the
/// backend, a runtime dir and a project.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new(backend: &str) -> World {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        for d in ["home", "config/efr", "run", "proj"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(
            dir.path().join("config/efr/config.toml"),
            format!("[sandbox]\nbackend = \"{backend}\"\n"),
        )
        .unwrap();
        let rt = dir.path().join("run");
        std::fs::set_permissions(&rt, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        World { dir }
    }

    fn proj(&self) -> PathBuf {
        self.dir.path().join("proj")
    }

    /// `exe ARGS` in the project with the world's settings: the service not used, the
    /// binaries' directory first on PATH (also inside, for the nested calls).
    fn cmd(&self, exe: &str, args: &[&str]) -> Command {
        let bin = Path::new(EFR_BASH).parent().unwrap();
        let mut c = Command::new(exe);
        c.args(args)
            .current_dir(self.proj())
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .env("HOME", self.dir.path().join("home"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("EFR_SANDBOX_NO_SERVICE", "1")
            .env("EFR_SANDBOX_PROJECT", self.proj())
            .stdin(Stdio::null());
        c
    }

    fn bash(&self, args: &[&str]) -> Output {
        self.cmd(EFR_BASH, args).output().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut a = vec!["run"];
        a.extend(args);
        self.cmd(EFR_SANDBOX, &a).output().unwrap()
    }

    /// `sh -c SCRIPT`: one parent process for the efr-bash calls the script makes.
    fn under_sh(&self, script: &str) -> Output {
        self.cmd("/bin/sh", &["-c", script]).output().unwrap()
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bash_syntax_args_status_and_stderr_are_the_lines() {
    for b in backends() {
        let w = World::new(b);
        std::fs::write(w.proj().join("env.sh"), "X=1\n").unwrap();
        let line = r#"source ./env.sh; [[ $X == 1 ]] && echo {a,b}; read -s v <<< "sec"; echo "$v"; printf '<%s>' "$0" "$@"; echo; echo oops >&2; exit 7"#;
        let o = w.bash(&["-c", line, "nm", "a b", ""]);
        assert_eq!(o.status.code(), Some(7), "{b}: {o:?}");
        assert_eq!(out(&o), "a b\nsec\n<nm><a b><>\n", "{b}: {o:?}");
        // stderr is the line's: no project line, nothing of ours.
        assert_eq!(err(&o), "oops\n", "{b}");
        // The same line under `run --shell sh` is dash's: no `source`, no `[[`.
        let o = w.run(&["--shell", "sh", "--", "source ./env.sh && [[ $X == 1 ]]"]);
        assert_ne!(
            o.status.code(),
            Some(0),
            "{b}: dash took bash's syntax: {o:?}"
        );
        // `run` speaks bash by default.
        let o = w.run(&["--", "source ./env.sh && [[ $X == 1 ]] && echo {a,b}"]);
        assert_eq!(
            (o.status.code(), out(&o)),
            (Some(0), "a b\n".into()),
            "{b}: {o:?}"
        );
    }
}

#[test]
fn login_stdin_script_and_bad_options() {
    for b in backends() {
        let w = World::new(b);
        let o = w.bash(&["-lc", "shopt -q login_shell && echo login; echo $-"]);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(out(&o).starts_with("login\n"), "{b}: {o:?}");
        let o = w.bash(&["-ec", "false; echo not reached"]);
        assert_eq!((o.status.code(), out(&o)), (Some(1), String::new()), "{b}");
        // The script on stdin, with -s arguments.
        let mut c = w.cmd(EFR_BASH, &["-s", "x", "y"]);
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"echo \"$# $1 $2 $EFR_SANDBOX_CONTAINED\"\nexit 4\n")
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(
            (o.status.code(), out(&o)),
            (Some(4), "2 x y 1\n".into()),
            "{b}: {o:?}"
        );
        // A script file of the project, with its arguments.
        std::fs::write(w.proj().join("s.sh"), "echo \"$0 $1\"; touch made\n").unwrap();
        let o = w.bash(&["s.sh", "arg"]);
        assert_eq!(
            (o.status.code(), out(&o)),
            (Some(0), "s.sh arg\n".into()),
            "{b}: {o:?}"
        );
        assert!(w.proj().join("made").exists(), "{b}");
        // What bash refuses is refused with bash's message and status, before any call.
        for (args, msg) in [
            (
                &["--bogus", "-c", "true"][..],
                "efr-bash: --bogus: invalid option",
            ),
            (&["-c"][..], "efr-bash: -c: option requires an argument"),
            (
                &["-o", "nope", "-c", "true"][..],
                "efr-bash: nope: invalid option name",
            ),
        ] {
            let o = w.bash(args);
            assert_eq!(o.status.code(), Some(2), "{b} {args:?}: {o:?}");
            assert_eq!(err(&o), format!("{msg}\n"), "{b} {args:?}");
        }
    }
}

#[test]
fn run_passes_each_word_as_given() {
    for b in backends() {
        let w = World::new(b);
        let o = w.run(&["--", "touch", "my file.txt"]);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        let names = |w: &World| {
            let mut v: Vec<String> = std::fs::read_dir(w.proj())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&w), ["my file.txt"], "{b}");
        for f in ["a", "b", "a b", "$HOME", "*"] {
            std::fs::write(w.proj().join(f), "").unwrap();
        }
        let o = w.run(&["--", "rm", "a b", "$HOME", "*"]);
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        assert_eq!(names(&w), ["a", "b", "my file.txt"], "{b}");
        // One word is a line as it is.
        let o = w.run(&["--", "echo $HOME"]);
        assert_eq!(
            out(&o),
            format!("{}\n", w.dir.path().join("home").display()),
            "{b}: {o:?}"
        );
    }
}

#[test]
fn tmp_and_scratch_last_for_the_calling_process_only() {
    for b in backends() {
        let w = World::new(b);
        let o = w.under_sh(
            "efr-bash -c 'echo kept > /tmp/f; echo s > \"$SCRATCH/s\"' && \
             efr-bash -c 'cat /tmp/f \"$SCRATCH/s\"'",
        );
        assert_eq!(
            (o.status.code(), out(&o)),
            (Some(0), "kept\ns\n".into()),
            "{b}: {o:?}"
        );
        // Another process: another conversation.
        let o = w.under_sh("efr-bash -c 'cat /tmp/f'; echo $?");
        assert_eq!(out(&o), "1\n", "{b}: {o:?}");
        // A conversation named in the environment is shared by any process.
        let o = w
            .under_sh("export EFR_SANDBOX_CONVERSATION=named; efr-bash -c 'echo n > /tmp/g'; true");
        assert_eq!(o.status.code(), Some(0), "{b}: {o:?}");
        let o = w.under_sh("EFR_SANDBOX_CONVERSATION=named efr-bash -c 'cat /tmp/g'; true");
        assert_eq!(out(&o), "n\n", "{b}: {o:?}");
    }
}

#[test]
fn nested_calls_run_directly_and_a_host_marker_does_not_uncontain() {
    for b in backends() {
        let w = World::new(b);
        let o = w.bash(&[
            "-c",
            "efr-bash -c 'echo hi $EFR_SANDBOX_CONTAINED'; efr-sandbox run -- true; echo $?",
        ]);
        assert_eq!(out(&o), "hi 1\n125\n", "{b}: {o:?}");
        assert!(err(&o).contains("already contained"), "{b}: {o:?}");
        // The marker in the environment of a process outside any call (a project's .envrc
        // could set it) leaves the call contained: a write outside the project is refused.
        let outside = w.dir.path().join("home/outside");
        let o = w
            .cmd(EFR_BASH, &["-c", &format!("touch {}", outside.display())])
            .env("EFR_SANDBOX_CONTAINED", "1")
            .output()
            .unwrap();
        assert_ne!(o.status.code(), Some(0), "{b}: {o:?}");
        assert!(!outside.exists(), "{b}: the marker took the sandbox away");
        let o = w
            .cmd(EFR_SANDBOX, &["run", "--", "echo ran"])
            .env("EFR_SANDBOX_CONTAINED", "1")
            .output()
            .unwrap();
        assert_eq!(
            (o.status.code(), out(&o)),
            (Some(0), "ran\n".into()),
            "{b}: {o:?}"
        );
    }
}

#[test]
fn a_refused_host_is_said_on_stderr_with_runs_status() {
    if !have("curl") {
        common::skip("no curl");
        return;
    }
    for b in backends() {
        let w = World::new(b);
        let line = "curl -sS --max-time 10 https://blocked.test/";
        let shell = w.bash(&["-c", line]);
        let run = w.run(&["--", line]);
        assert_ne!(shell.status.code(), Some(0), "{b}: {shell:?}");
        assert_eq!(
            shell.status.code(),
            run.status.code(),
            "{b}: {shell:?} {run:?}"
        );
        assert!(
            err(&shell).contains("efr-sandbox: refused: reach blocked.test:443"),
            "{b}: {shell:?}"
        );
        assert!(!err(&shell).contains("project:"), "{b}: {shell:?}");
    }
}

#[test]
fn a_missing_shell_is_a_setup_error() {
    let w = World::new("native");
    let o = w.run(&["--shell", "/nonexistent/bash", "--", "true"]);
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    assert!(
        err(&o).contains("/nonexistent/bash: not an executable file"),
        "{o:?}"
    );
    let o = w.run(&["--shell", "zsh", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    // The config's shell.
    std::fs::write(
        w.dir.path().join("config/efr/config.toml"),
        "[sandbox]\nbackend = \"native\"\nshell = \"sh\"\n",
    )
    .unwrap();
    let o = w.run(&["--", "echo $0"]);
    assert_eq!(out(&o), "/bin/sh\n", "{o:?}");
}
