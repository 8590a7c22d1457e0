//! `efr-sandbox`: the efr sandbox service (`serve`) and the user's commands.

// What is where:
// - `state`: what the RPC handlers share (the `Service`: paths, policy, the classifier's
//   context, the planned calls, the last check) and the connections' limits;
// - `rpc/`: the service (server, connection, method table, one file per handler);
// - `cli/`: the commands (one file per command; `serve` starts `rpc`);
// - `probe`: the self-tests run with this service's calls (shared by `rpc` and `cli`);
// - `paths`, `policy`: the service's dirs and its config in force; `identity`: its build;
// - `handoff`: `run`'s client of the service (`sandbox.run`);
// - a call itself (plan, proxy, bus filter, caches, launcher, finish) is `efr_call`'s.
// Handlers and commands never import each other.

/// `print!` of the commands: a closed stdout (`| head`) ends the process quietly with the
/// status of a process killed by SIGPIPE (see [`cli::term::out`]), never a panic.
macro_rules! out {
    ($($t:tt)*) => { $crate::cli::term::out(format_args!($($t)*)) };
}

/// `println!` of the commands, as [`out!`].
macro_rules! outln {
    () => { $crate::cli::term::out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::cli::term::out(format_args!("{}\n", format_args!($($t)*))) };
}

mod always;
mod approvals;
mod cli;
mod handoff;
mod identity;
mod paths;
mod peer;
mod policy;
mod probe;
mod rpc;
mod state;

mod sys;

use std::process::ExitCode;

fn main() -> ExitCode {
    // The launcher embedded behind a hidden subcommand (and its bwrap init, `--inner`),
    // for when no `efr-launch` is installed beside this binary. Single-threaded: nothing
    // else has started yet.
    let first = std::env::args_os().nth(1);
    if first.as_deref() == Some(std::ffi::OsStr::new(efr_call::launch::LAUNCH_SUBCOMMAND)) {
        let args = std::env::args_os().skip(2);
        std::process::exit(efr_launcher::cli::main(
            args.map(|a| a.to_string_lossy().into_owned()).collect(),
        ));
    }
    if first.as_deref() == Some(std::ffi::OsStr::new("--inner")) {
        let args = std::env::args_os().skip(1);
        std::process::exit(efr_launcher::cli::main(
            args.map(|a| a.to_string_lossy().into_owned()).collect(),
        ));
    }
    // The probe, run inside a contained call by `check` (efr_probe::inside).
    if first.as_deref() == Some(std::ffi::OsStr::new(probe::PROBE_SUBCOMMAND)) {
        let args = std::env::args_os().skip(2);
        std::process::exit(efr_probe::inside::main(
            args.map(|a| a.to_string_lossy().into_owned()).collect(),
        ));
    }
    // `shell` and `efr-bash` take bash's words as they are (`--` included), before clap.
    let shell_args = |skip| -> Vec<String> {
        std::env::args_os()
            .skip(skip)
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    let called = std::env::args_os().next().map(|a| {
        std::path::PathBuf::from(a)
            .file_name()
            .map(|n| n.to_owned())
    });
    let shell =
        if called.flatten().as_deref() == Some(std::ffi::OsStr::new(cli::run::shell::EFR_BASH)) {
            Some((cli::run::shell::EFR_BASH, shell_args(1)))
        } else if first.as_deref() == Some(std::ffi::OsStr::new("shell")) {
            Some(("efr-sandbox shell", shell_args(2)))
        } else {
            None
        };
    if let Some((prog, args)) = shell {
        return exit(cli::run::shell::run(prog, args));
    }
    exit(cli::run(cli::parse()))
}

/// The process's exit status of a command's result.
fn exit(r: anyhow::Result<i32>) -> ExitCode {
    match r {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("efr-sandbox: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
