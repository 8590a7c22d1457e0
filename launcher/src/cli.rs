//! The command line of `efr-launch`.

use std::io::Read;
use std::os::fd::RawFd;

use crate::plan::{MAX_PLAN_BYTES, Plan, PlanCheck};
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
    /// The plan at `from` (a path, or `fd N`) could not be opened or read.
    #[error("plan {from}: {source}")]
    Plan {
        /// The plan's path, or `fd N`.
        from: String,
        /// What the open or the read said.
        #[source]
        source: std::io::Error,
    },
}

fn fd_arg(v: Option<&String>) -> Result<RawFd, CliError> {
    v.and_then(|s| s.parse::<RawFd>().ok())
        .filter(|&fd| fd >= 0)
        .ok_or(CliError::Usage)
}

pub(crate) fn read_bounded(from: String, r: impl Read) -> Result<Vec<u8>, CliError> {
    let mut data = Vec::new();
    match r.take(MAX_PLAN_BYTES as u64 + 1).read_to_end(&mut data) {
        Ok(_) => Ok(data),
        Err(source) => Err(CliError::Plan { from, source }),
    }
}

/// Runs `efr-launch` with these arguments; returns the exit status.
pub fn main(args: Vec<String>) -> i32 {
    if args.first().map(String::as_str) == Some("--inner") {
        match (fd_arg(args.get(1)), fd_arg(args.get(2))) {
            (Ok(s), Ok(r)) => crate::backend::bwrap::inner_main(s, r),
            _ => return crate::exit_code::USAGE,
        }
    }
    let mut plan_src: Option<Result<Vec<u8>, CliError>> = None;
    let mut status_fd = None;
    let mut caller_pid = None;
    let mut warm = false;
    let mut ns_sockets = false;
    let mut job_pid = None;
    let mut control_fd = None;
    let mut join_cgroups: Vec<RawFd> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--plan" => {
                let Some(p) = it.next() else {
                    eprintln!("{}", usage());
                    return crate::exit_code::USAGE;
                };
                plan_src = Some(
                    std::fs::File::open(p)
                        .map_err(|source| CliError::Plan {
                            from: p.clone(),
                            source,
                        })
                        .and_then(|f| read_bounded(p.clone(), f)),
                );
            }
            "--plan-fd" => match fd_arg(it.next()) {
                Ok(fd) => {
                    plan_src = Some(
                        crate::sys::file_from_fd(fd)
                            .map_err(|source| CliError::Plan {
                                from: format!("fd {fd}"),
                                source,
                            })
                            .and_then(|f| read_bounded(format!("fd {fd}"), f)),
                    );
                }
                Err(u) => {
                    eprintln!("{u}");
                    return crate::exit_code::USAGE;
                }
            },
            "--warm" => warm = true,
            "--ns-sockets" => ns_sockets = true,
            "--pid" => match it.next().and_then(|s| s.parse::<libc::pid_t>().ok()) {
                Some(p) if p > 0 => job_pid = Some(p),
                _ => {
                    eprintln!("efr-launch: --pid takes a pid\n{}", usage());
                    return crate::exit_code::USAGE;
                }
            },
            "--control-fd" => match fd_arg(it.next()) {
                Ok(fd) => control_fd = Some(fd),
                Err(u) => {
                    eprintln!("{u}");
                    return crate::exit_code::USAGE;
                }
            },
            "--join-cgroup-fd" => match fd_arg(it.next()) {
                // Not the standard fds.
                Ok(fd) if fd > 2 => join_cgroups.push(fd),
                _ => {
                    eprintln!(
                        "efr-launch: --join-cgroup-fd takes an fd above 2\n{}",
                        usage()
                    );
                    return crate::exit_code::USAGE;
                }
            },
            "--status-fd" => match fd_arg(it.next()) {
                Ok(fd) => status_fd = Some(fd),
                Err(u) => {
                    eprintln!("{u}");
                    return crate::exit_code::USAGE;
                }
            },
            "--caller-pid" => match it.next().and_then(|s| s.parse::<libc::pid_t>().ok()) {
                Some(p) if p > 0 => caller_pid = Some(p),
                _ => {
                    eprintln!("efr-launch: --caller-pid takes a pid\n{}", usage());
                    return crate::exit_code::USAGE;
                }
            },
            "-h" | "--help" => {
                println!("{}", usage());
                return 0;
            }
            other => {
                eprintln!("efr-launch: unknown argument {other:?}\n{}", usage());
                return crate::exit_code::USAGE;
            }
        }
    }
    // The status fd must not reach the call (the line could write status lines): a status
    // fd that is not open is refused before anything runs.
    if let Some(fd) = status_fd {
        if let Err(e) = crate::sys::set_cloexec(fd) {
            eprintln!("efr-launch: the status fd {fd}: {e}");
            return crate::exit_code::SETUP_ERROR;
        }
    }
    let out = StatusOut(status_fd);
    if !join_cgroups.is_empty() {
        // A standby's cgroups are its call's: it joins none of its own.
        if warm
            || join_cgroups
                .iter()
                .any(|&fd| Some(fd) == status_fd || Some(fd) == control_fd)
        {
            eprintln!(
                "efr-launch: --join-cgroup-fd is not for --warm nor for the status or control fd\n{}",
                usage()
            );
            return crate::exit_code::USAGE;
        }
        // The job's cgroups first, before anything is forked or made (`crate::join_cgroup`).
        if let Err(e) = crate::join_cgroup::join(&join_cgroups) {
            return out.setup_error(e.to_string());
        }
    }
    // The launch ends with the process that started it (see `crate::caller`).
    let caller = match crate::caller::Caller::watch(caller_pid) {
        Ok(c) => c,
        Err(e) => return out.setup_error(e.to_string()),
    };
    if ns_sockets || job_pid.is_some() {
        // The socket maker of a job's network namespace (see `crate::ns_sockets`).
        let (true, Some(pid), Some(fd), false, None) =
            (ns_sockets, job_pid, control_fd, warm, &plan_src)
        else {
            eprintln!(
                "efr-launch: --ns-sockets takes --pid and --control-fd, and no plan\n{}",
                usage()
            );
            return crate::exit_code::USAGE;
        };
        let Some(control) = control_socket(fd) else {
            return crate::exit_code::USAGE;
        };
        return crate::ns_sockets::main(pid, control, &caller);
    }
    if warm || control_fd.is_some() {
        // A launcher in standby: its plan comes later, on the control socket.
        let (true, Some(fd), None) = (warm, control_fd, &plan_src) else {
            eprintln!(
                "efr-launch: --warm takes --control-fd and no plan\n{}",
                usage()
            );
            return crate::exit_code::USAGE;
        };
        let Some(control) = control_socket(fd) else {
            return crate::exit_code::USAGE;
        };
        let code = crate::standby::main(control, &out, &caller);
        out.hang_up();
        return code;
    }
    let Some(src) = plan_src else {
        eprintln!("{}", usage());
        return crate::exit_code::USAGE;
    };
    let plan = match parse_plan(src) {
        Ok(p) => p,
        Err(m) => return out.setup_error(m),
    };
    let code = crate::run::run(&plan, &out, &caller);
    out.hang_up();
    code
}

/// The plan in `src` (what was read of it), or the message of the setup error that says
/// why there is none.
pub(crate) fn parse_plan(src: Result<Vec<u8>, CliError>) -> Result<Plan, String> {
    let data = src.map_err(|e| e.to_string())?;
    Plan::from_json(&data).map_err(|e| format!("plan: {e}"))
}
