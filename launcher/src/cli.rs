//! The command line of `efr-launch`.

use std::os::fd::RawFd;

use crate::plan::{PlanReadError, parse_plan, read_bounded};
use crate::run::StatusOut;

/// The control socket at `fd`, close-on-exec (`None`, said on stderr, when it is no fd of
/// this process).
fn control_socket(fd: RawFd) -> Option<std::os::fd::OwnedFd> {
    match crate::sys::set_cloexec(fd).and_then(|()| crate::sys::owned(fd)) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("efr-launch: the control fd {fd}: {e}");
            None
        }
    }
}

fn usage() -> &'static str {
    "usage: efr-launch (--plan FILE | --plan-fd N | --warm --control-fd N | --ns-sockets --pid PID --control-fd N) [--status-fd N] [--caller-pid PID] [--join-cgroup-fd N]..."
}

/// Why `efr-launch`'s command line or its plan could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An fd argument that is not a number of 0 or more.
    #[error("{}", usage())]
    Usage,
    /// The plan could not be opened or read.
    #[error(transparent)]
    Plan(#[from] PlanReadError),
}

fn fd_arg(v: Option<&String>) -> Result<RawFd, CliError> {
    v.and_then(|s| s.parse::<RawFd>().ok())
        .filter(|&fd| fd >= 0)
        .ok_or(CliError::Usage)
}

/// `efr-launch`'s arguments (but `--inner`).
#[derive(Default)]
struct Args {
    /// What was read of the plan (`--plan`, `--plan-fd`).
    plan_src: Option<Result<Vec<u8>, CliError>>,
    status_fd: Option<RawFd>,
    caller_pid: Option<libc::pid_t>,
    warm: bool,
    ns_sockets: bool,
    job_pid: Option<libc::pid_t>,
    control_fd: Option<RawFd>,
    join_cgroups: Vec<RawFd>,
}

/// Prints `msg` and gives the usage exit status.
fn usage_error(msg: impl std::fmt::Display) -> i32 {
    eprintln!("{msg}");
    crate::exit_code::USAGE
}

/// A pid argument (positive).
fn pid_arg(v: Option<&String>) -> Option<libc::pid_t> {
    v.and_then(|s| s.parse::<libc::pid_t>().ok())
        .filter(|&p| p > 0)
}

/// The plan read from the file `p`.
fn plan_from_file(p: &str) -> Result<Vec<u8>, CliError> {
    std::fs::File::open(p)
        .map_err(|source| PlanReadError {
            from: p.to_string(),
            source,
        })
        .and_then(|f| read_bounded(p.to_string(), f))
        .map_err(CliError::from)
}

/// The plan read from fd `fd`.
fn plan_from_fd(fd: RawFd) -> Result<Vec<u8>, CliError> {
    crate::sys::file_from_fd(fd)
        .map_err(|source| PlanReadError {
            from: format!("fd {fd}"),
            source,
        })
        .and_then(|f| read_bounded(format!("fd {fd}"), f))
        .map_err(CliError::from)
}

/// Reads the arguments (the plan with them); `Err` is the exit status (the usage or the
/// help printed).
fn parse_args(args: &[String]) -> Result<Args, i32> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--plan" => {
                let Some(p) = it.next() else {
                    return Err(usage_error(usage()));
                };
                a.plan_src = Some(plan_from_file(p));
            }
            "--plan-fd" => a.plan_src = Some(plan_from_fd(fd_arg(it.next()).map_err(usage_error)?)),
            "--warm" => a.warm = true,
            "--ns-sockets" => a.ns_sockets = true,
            "--pid" => match pid_arg(it.next()) {
                Some(p) => a.job_pid = Some(p),
                None => {
                    return Err(usage_error(format!(
                        "efr-launch: --pid takes a pid\n{}",
                        usage()
                    )));
                }
            },
            "--control-fd" => a.control_fd = Some(fd_arg(it.next()).map_err(usage_error)?),
            "--join-cgroup-fd" => match fd_arg(it.next()) {
                // Not the standard fds.
                Ok(fd) if fd > 2 => a.join_cgroups.push(fd),
                _ => {
                    return Err(usage_error(format!(
                        "efr-launch: --join-cgroup-fd takes an fd above 2\n{}",
                        usage()
                    )));
                }
            },
            "--status-fd" => a.status_fd = Some(fd_arg(it.next()).map_err(usage_error)?),
            "--caller-pid" => match pid_arg(it.next()) {
                Some(p) => a.caller_pid = Some(p),
                None => {
                    return Err(usage_error(format!(
                        "efr-launch: --caller-pid takes a pid\n{}",
                        usage()
                    )));
                }
            },
            "-h" | "--help" => {
                println!("{}", usage());
                return Err(0);
            }
            other => {
                return Err(usage_error(format!(
                    "efr-launch: unknown argument {other:?}\n{}",
                    usage()
                )));
            }
        }
    }
    Ok(a)
}

/// The job's cgroups, joined first, before anything is forked or made
/// (`crate::join_cgroup`); a standby's cgroups are its call's: it joins none of its own.
fn join_cgroups_first(a: &Args, out: &StatusOut) -> Result<(), i32> {
    if a.join_cgroups.is_empty() {
        return Ok(());
    }
    if a.warm
        || a.join_cgroups
            .iter()
            .any(|&fd| Some(fd) == a.status_fd || Some(fd) == a.control_fd)
    {
        return Err(usage_error(format!(
            "efr-launch: --join-cgroup-fd is not for --warm nor for the status or control fd\n{}",
            usage()
        )));
    }
    crate::join_cgroup::join(&a.join_cgroups).map_err(|e| out.setup_error(e.to_string()))
}

/// Runs `efr-launch` with these arguments; returns the exit status. In steps: the
/// arguments, the status fd kept from the call, the job's cgroups, the caller watched, then
/// one of the socket maker of a job's namespace, a launcher in standby, or one call.
pub fn main(args: Vec<String>) -> i32 {
    if args.first().map(String::as_str) == Some("--inner") {
        match (fd_arg(args.get(1)), fd_arg(args.get(2))) {
            (Ok(s), Ok(r)) => crate::backend::bwrap::inner_main(s, r),
            _ => return crate::exit_code::USAGE,
        }
    }
    let a = match parse_args(&args) {
        Ok(a) => a,
        Err(code) => return code,
    };
    // The status fd must not reach the call (the line could write status lines): a status
    // fd that is not open is refused before anything runs.
    if let Some(fd) = a.status_fd {
        if let Err(e) = crate::sys::set_cloexec(fd) {
            eprintln!("efr-launch: the status fd {fd}: {e}");
            return crate::exit_code::SETUP_ERROR;
        }
    }
    let out = StatusOut(a.status_fd);
    if let Err(code) = join_cgroups_first(&a, &out) {
        return code;
    }
    // The launch ends with the process that started it (see `crate::caller`).
    let caller = match crate::caller::Caller::watch(a.caller_pid) {
        Ok(c) => c,
        Err(e) => return out.setup_error(e.to_string()),
    };
    if a.ns_sockets || a.job_pid.is_some() {
        // The socket maker of a job's network namespace (see `crate::ns_sockets`).
        let (true, Some(pid), Some(fd), false, None) =
            (a.ns_sockets, a.job_pid, a.control_fd, a.warm, &a.plan_src)
        else {
            return usage_error(format!(
                "efr-launch: --ns-sockets takes --pid and --control-fd, and no plan\n{}",
                usage()
            ));
        };
        let Some(control) = control_socket(fd) else {
            return crate::exit_code::USAGE;
        };
        return crate::ns_sockets::main(pid, control, &caller);
    }
    if a.warm || a.control_fd.is_some() {
        // A launcher in standby: its plan comes later, on the control socket.
        let (true, Some(fd), None) = (a.warm, a.control_fd, &a.plan_src) else {
            return usage_error(format!(
                "efr-launch: --warm takes --control-fd and no plan\n{}",
                usage()
            ));
        };
        let Some(control) = control_socket(fd) else {
            return crate::exit_code::USAGE;
        };
        let code = crate::standby::main(control, &out, &caller);
        out.hang_up();
        return code;
    }
    let Some(src) = a.plan_src else {
        return usage_error(usage());
    };
    let plan = match parse_plan(src) {
        Ok(p) => p,
        Err(m) => return out.setup_error(m),
    };
    let code = crate::run::run(&plan, &out, &caller);
    out.hang_up();
    code
}
