//! The command line as a shell user meets it: a closed pipe, the help, the line's `--`, the
//! completions and the man page, `config --init`, `--quiet`, the environment's dropped
//! variables, an empty `cache list`, a write grant of a missing path, a launcher killed
//! mid-call and the standalone proxy's end.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{backends, command, temp_env};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn out(dir: &Path, args: &[&str]) -> Output {
    command(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// Every command that prints on stdout, with what it needs to print something.
fn printing_commands(dir: &Path) -> Vec<Vec<String>> {
    let proj = dir.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let p = proj.to_string_lossy().into_owned();
    let words = [
        "config",
        "config --json",
        "explain /etc",
        "explain --json /etc",
        "classify -- ls",
        "classify --json -- ls",
        "surface",
        "surface --json",
        "cache rules",
        "log",
        "log --json",
        "completions bash",
        "completions zsh",
        "completions fish",
        "man",
        "man run",
        "--help",
        "run --help",
        "jobs --help",
        "--version",
    ];
    words
        .iter()
        .map(|w| {
            let mut v: Vec<String> = w.split(' ').map(String::from).collect();
            if v[0] == "surface" || v[0] == "explain" || v[0] == "classify" {
                v.insert(1, p.clone());
                v.insert(1, "--project".into());
            }
            v
        })
        .collect()
}

/// `cmd` with its stdout a pipe nobody reads any more (`| head -c1` after its byte: the
/// reader gone before the command writes, so that the write fails every time).
fn with_closed_stdout(mut cmd: Command) -> Output {
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    cmd.stdout(w).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    drop(cmd);
    child.wait_with_output().unwrap()
}

#[test]
fn no_command_panics_on_a_closed_stdout() {
    let dir = temp_env();
    // A call in the log, so that `log` prints something.
    let o = out(dir.path(), &["run", "--project", ".", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for args in printing_commands(dir.path()) {
        // First: it does print something (else the closed pipe would test nothing).
        let o = out(
            dir.path(),
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(
            !o.stdout.is_empty(),
            "{args:?} printed nothing: {}",
            stderr(&o)
        );
        let mut cmd = command(dir.path());
        cmd.env("XDG_STATE_HOME", dir.path().join("state"))
            .current_dir(dir.path())
            .args(&args);
        let o = with_closed_stdout(cmd);
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(o.status.code(), Some(101), "{args:?}: {err}");
        // clap's own --help and --version ignore the error (status 0); every command of
        // ours ends as a tool ended by the closed pipe does.
        let clap_own = args.iter().any(|a| a == "--help" || a == "--version");
        if !clap_own {
            assert_eq!(o.status.code(), Some(141), "{args:?}: {err}");
            assert!(
                err.is_empty(),
                "{args:?} said something at a closed pipe: {err}"
            );
        }
    }
}

#[test]
fn the_help_of_grant_names_every_kind_the_error_names() {
    let dir = temp_env();
    let o = out(dir.path(), &["run", "--grant", "nope", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let kinds = err
        .split_once("the kinds: ")
        .map(|(_, k)| k.trim().to_string())
        .unwrap_or_else(|| panic!("no list of kinds: {err}"));
    let help = stdout(&out(dir.path(), &["run", "--help"]));
    let grant = help
        .lines()
        .find(|l| l.trim_start().starts_with("--grant"))
        .unwrap_or_else(|| panic!("no --grant in {help}"));
    assert!(grant.contains(&kinds), "help: {grant}\nerror: {kinds}");
    for k in [
        "bus_filter=session|system",
        "open_network",
        "host=HOST:PORT:tcp",
    ] {
        assert!(kinds.contains(k), "{k} in {kinds}");
    }
    // The line's description is the line's, in the Arguments section, never an option's.
    let line = help
        .lines()
        .find(|l| l.contains("The shell line"))
        .unwrap_or_else(|| panic!("no description of LINE in {help}"));
    assert!(line.trim_start().starts_with("<LINE>..."), "{line}");
    let background = help
        .lines()
        .find(|l| l.trim_start().starts_with("--background"))
        .unwrap();
    assert!(!background.contains("shell line"), "{background}");
}

#[test]
fn a_line_before_the_dashes_gets_the_tip_to_put_it_after() {
    let dir = temp_env();
    for cmd in ["run", "classify"] {
        let o = out(dir.path(), &[cmd, "ls", "-la"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        let err = stderr(&o);
        assert!(
            err.contains(&format!("efr-sandbox {cmd} [OPTIONS] -- ls -la")),
            "{cmd}: {err}"
        );
    }
    // An unknown option is clap's error alone.
    let err = stderr(&out(dir.path(), &["run", "--nope", "--", "true"]));
    assert!(!err.contains("goes after"), "{err}");
}

#[test]
fn completions_parse_in_their_shell_and_name_the_commands() {
    let dir = temp_env();
    for (shell, checker) in [("bash", "bash"), ("zsh", "zsh"), ("fish", "fish")] {
        let o = out(dir.path(), &["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let text = stdout(&o);
        for word in ["efr-sandbox", "classify", "approvals", "--grant"] {
            assert!(text.contains(word), "{shell}: no {word}");
        }
        if !common::have(checker) {
            // bash is always there; zsh and fish only where installed.
            assert_ne!(checker, "bash");
            eprintln!("SKIP: {checker} is not installed: its script not parsed");
            continue;
        }
        let file = dir.path().join(format!("completion.{shell}"));
        std::fs::write(&file, &text).unwrap();
        let flag = if checker == "fish" {
            "--no-execute"
        } else {
            "-n"
        };
        let o = Command::new(checker).arg(flag).arg(&file).output().unwrap();
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
    }
    let o = out(dir.path(), &["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn the_man_pages_are_roff_with_the_options() {
    let dir = temp_env();
    let o = out(dir.path(), &["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(
        page.starts_with(".ie") || page.contains(".TH efr-sandbox 1"),
        "{page}"
    );
    assert!(page.contains("completions"), "{page}");
    let page = stdout(&out(dir.path(), &["man", "run"]));
    assert!(page.contains(".TH efr-sandbox-run 1"), "{page}");
    assert!(
        page.contains("\\-\\-grant") || page.contains("--grant"),
        "{page}"
    );
    assert!(
        page.contains("\\-\\-quiet") || page.contains("--quiet"),
        "{page}"
    );
    let o = out(dir.path(), &["man", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no command \"nope\""), "{}", stderr(&o));
    if common::have("man") {
        let file = dir.path().join("efr-sandbox-run.1");
        std::fs::write(&file, page).unwrap();
        let o = Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(&file)
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let shown = stdout(&o);
        assert!(
            shown.contains("SYNOPSIS") && shown.contains("grant"),
            "{shown}"
        );
    }
}

#[test]
fn config_init_writes_a_commented_starter_once() {
    let dir = temp_env();
    let file = dir.path().join("config/efr/config.toml");
    // With no file, `config` names where it would read one.
    let o = out(dir.path(), &["config"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.lines()
            .take(2)
            .any(|l| l.contains(&*file.to_string_lossy()) && l.contains("config --init")),
        "{text}"
    );
    let o = out(dir.path(), &["config", "--init"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let starter = std::fs::read_to_string(&file).unwrap();
    assert!(
        starter.lines().all(|l| l.is_empty() || l.starts_with('#')),
        "{starter}"
    );
    // The file is read, and changes nothing.
    let o = out(dir.path(), &["config", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["file"], file.to_string_lossy().as_ref(), "{v}");
    let defaults = {
        let other = temp_env();
        let o = out(other.path(), &["config", "--json"]);
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["values"].clone()
    };
    assert_eq!(v["values"], defaults);
    // Never over a file: the second time is an error, the file as the user left it.
    std::fs::write(&file, "# mine\n").unwrap();
    let o = out(dir.path(), &["config", "--init"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("exists already"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "# mine\n");
    // Every example line of the starter, uncommented, is a config that loads.
    let examples: String = starter
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if rest.starts_with(|c: char| c == '[' || c.is_ascii_lowercase()) => {
                format!("{rest}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&file, &examples).unwrap();
    let o = out(dir.path(), &["config"]);
    assert!(o.status.success(), "{examples}\n{}", stderr(&o));
    assert!(stdout(&o).contains("registry.local"), "{}", stdout(&o));
    assert!(stdout(&o).contains("~/shared/scratch"), "{}", stdout(&o));
}

#[test]
fn quiet_says_no_project_and_no_dropped_variables_which_are_said_by_name_otherwise() {
    let dir = temp_env();
    let proj = dir.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    for b in backends() {
        let json = dir.path().join(format!("fin-{b}.json"));
        let run = |quiet: bool| {
            let mut c = command(dir.path());
            c.env("XDG_STATE_HOME", dir.path().join("state"))
                .env("CARGO_REGISTRY_TOKEN", "cargo-sekrit-value")
                .current_dir(&proj)
                .args(["run", "--backend", b, "--json"])
                .arg(&json);
            if quiet {
                c.arg("--quiet");
            }
            c.args(["--", "echo ${CARGO_REGISTRY_TOKEN:-unset}"]);
            c.output().unwrap()
        };
        let o = run(false);
        assert!(o.status.success(), "{b}: {}", stderr(&o));
        assert_eq!(stdout(&o), "unset\n", "{b}");
        let err = stderr(&o);
        assert!(err.contains("efr-sandbox: project: "), "{b}: {err}");
        assert_eq!(
            err.matches("CARGO_REGISTRY_TOKEN is not passed").count(),
            1,
            "{b}: {err}"
        );
        assert!(err.contains("drop rule *TOKEN*"), "{b}: {err}");
        assert!(!err.contains("sekrit"), "{b}: {err}");
        let fin: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(
            fin["sandbox_summary"]["env_dropped"],
            serde_json::json!(["CARGO_REGISTRY_TOKEN"]),
            "{b}: {fin}"
        );
        assert!(!fin.to_string().contains("sekrit"), "{b}");
        let o = run(true);
        assert!(o.status.success(), "{b}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{b}");
        let fin: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(
            fin["sandbox_summary"]["env_dropped"],
            serde_json::json!(["CARGO_REGISTRY_TOKEN"]),
            "{b}: {fin}"
        );
    }
}

#[test]
fn an_empty_cache_list_says_so() {
    let dir = temp_env();
    let o = out(dir.path(), &["cache", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains("no held cache deletes and no conversation's cache layers"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_write_grant_of_a_missing_path_says_to_create_it() {
    let dir = temp_env();
    let o = out(
        dir.path(),
        &[
            "run",
            "--project",
            ".",
            "--grant",
            "write=~/newdir",
            "--",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let missing = dir.path().join("home/newdir");
    assert!(
        err.contains(&format!(
            "{} does not exist; create it first",
            missing.display()
        )) && err.contains(&format!("mkdir -p {}", missing.display())),
        "{err}"
    );
    assert!(!err.contains("could not start"), "{err}");
    assert!(!missing.exists());
}

/// The pid of the first child of `pid` (its launcher), waited for.
fn child_of(pid: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(c) = children.split_whitespace().next() {
            return c.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no launcher under {pid}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_launcher_killed_mid_call_is_not_a_sandbox_that_could_not_start() {
    let dir = temp_env();
    for b in backends() {
        let mark = dir.path().join(format!("started-{b}"));
        let mut c = command(dir.path());
        c.env("XDG_STATE_HOME", dir.path().join("state"))
            .current_dir(dir.path())
            .args(["run", "--project", ".", "--backend", b, "--"])
            .arg(format!("touch {}; sleep 30", mark.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let launcher = child_of(child.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        while !mark.exists() {
            assert!(Instant::now() < deadline, "{b}: the line never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(launcher as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert!(!err.contains("could not start"), "{b}: {err}");
        assert!(
            err.contains("the line started, but its launcher ended during the call"),
            "{b}: {err}"
        );
    }
}

#[test]
fn the_standalone_proxy_prints_its_summary_and_no_debug_dump_at_an_interrupt() {
    let dir = temp_env();
    let sock = dir.path().join("proxy.sock");
    let mut child = command(dir.path())
        .args(["proxy", "--listen"])
        .arg(&sock)
        .args(["--grant", "host=example.test"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("listening on"), "{line}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    let text = stdout(&o);
    assert_eq!(text.lines().count(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert!(v.is_object(), "{v}");
    assert!(!sock.exists());
}
