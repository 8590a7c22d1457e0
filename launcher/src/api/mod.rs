//! The launcher's client side, the library the service, efr-call and the tests use: find
//! and spawn `efr-launch` (or start it in standby and hand it a call), read its status
//! lines. A leaf of the crate: it imports only the leaves `sys` (the spawn and the fds)
//! and `status` (the status lines), never the privileged modules that make the call.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

pub mod spawned;

pub use spawned::{Io, Launched};

use crate::status::{Outcome, StatusLine};
use efr_sandbox_wire::plan::Plan;
use spawned::Detach;

/// Which backend the config asks for: the wire's one backend choice.
pub use efr_sandbox_wire::BackendChoice;

/// The service's byte on a standby launcher's control socket that starts the call (its fds
/// attached; see [`crate::standby`]).
pub const CALL: u8 = b'C';

/// The service's byte that announces the call, its plan still being made (no fds): the
/// waiting init starts on the part of the view no plan changes.
pub const ANNOUNCE: u8 = b'A';

/// How many fds come with [`CALL`]: the plan, stdin, stdout, stderr.
pub const CALL_FDS: usize = 4;

/// The first fd number of the cgroups a launcher joins (the plan is at 3, the status pipe at
/// 4).
const JOIN_CGROUP_FD: i32 = 5;

/// The most cgroups one launch joins: fds 5 to 9, the highest a spawn places (v1 needs
/// three: memory, pids, cpuacct; v2 one).
pub const MAX_JOIN_CGROUPS: usize = 5;

/// How [`Launcher::spawn_opts`] starts `efr-launch`.
#[derive(Debug, Default)]
pub struct SpawnOpts {
    /// The launcher's process group and session ([`Detach`]).
    pub detach: Detach,
    /// `cgroup.procs` files open for writing (`efr_jobs::cgroup::JobCgroup::join_files`):
    /// the launcher writes `0` to each as its first act (`--join-cgroup-fd`, see
    /// [`crate::join_cgroup`]), so the whole call is in those cgroups.
    pub join_cgroups: Vec<std::os::fd::OwnedFd>,
}

/// Finds and runs `efr-launch`.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// The `efr-launch` executable (or the program that embeds it, see `pre_args`).
    pub exe: PathBuf,
    /// Arguments before the launcher's own (a program that embeds the launcher behind a
    /// subcommand, such as `efr-sandbox __launch`).
    pub pre_args: Vec<String>,
}

impl Launcher {
    /// `efr-launch` beside the current executable (or its parent dir, for test binaries in
    /// `deps/`), else on PATH.
    pub fn locate() -> Option<Launcher> {
        if let Ok(me) = std::env::current_exe() {
            for d in me.ancestors().skip(1).take(2) {
                let c = d.join("efr-launch");
                if c.is_file() {
                    return Some(Launcher::new(c));
                }
            }
        }
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join("efr-launch"))
            .find(|p| p.is_file())
            .map(Launcher::new)
    }

    /// The launcher at `exe`.
    pub fn new(exe: impl Into<PathBuf>) -> Launcher {
        Launcher {
            exe: exe.into(),
            pre_args: Vec::new(),
        }
    }

    /// The command line of a call efrd runs on its own terminal (`sandbox.plan`): the plan
    /// at `plan_file`, status lines on `status_fd`.
    pub fn command(&self, plan_file: &Path, status_fd: i32) -> Vec<String> {
        let mut v = vec![self.exe.to_string_lossy().into_owned()];
        v.extend(self.pre_args.iter().cloned());
        v.extend([
            "--plan".into(),
            plan_file.to_string_lossy().into_owned(),
            "--status-fd".into(),
            status_fd.to_string(),
        ]);
        v
    }

    /// Spawns `efr-launch` for `plan` with the given stdio; the plan goes on a memfd (fd 3
    /// of the launcher), status lines come back on a pipe (fd 4). The launch ends with
    /// this process (`--caller-pid`, see [`crate::caller`]): whatever it dies of, the call
    /// is killed within a second. Started by `posix_spawn`, not fork
    /// (the module `sys::spawn` says why).
    pub fn spawn(
        &self,
        plan: &Plan,
        stdin: Io,
        stdout: Io,
        stderr: Io,
    ) -> std::io::Result<Running> {
        self.spawn_in_group(plan, stdin, stdout, stderr, false)
    }

    /// [`Self::spawn`], with the launcher in a process group of its own when `own_group`:
    /// a signal sent to the caller's group then reaches the launcher only through the
    /// caller (which hands it on), so the line gets it once.
    pub fn spawn_in_group(
        &self,
        plan: &Plan,
        stdin: Io,
        stdout: Io,
        stderr: Io,
        own_group: bool,
    ) -> std::io::Result<Running> {
        self.spawn_opts(
            plan,
            stdin,
            stdout,
            stderr,
            SpawnOpts {
                detach: if own_group {
                    Detach::Group
                } else {
                    Detach::None
                },
                join_cgroups: Vec::new(),
            },
        )
    }

    /// [`Self::spawn`] with [`SpawnOpts`]: the launcher in a process group of its own, and
    /// the job's cgroups it joins before it makes anything (at fds 5 and up, at most
    /// [`MAX_JOIN_CGROUPS`]; more is an `InvalidInput` error and nothing is started). A
    /// cgroup that cannot be joined is the call's `setup_error`: the line does not run.
    pub fn spawn_opts(
        &self,
        plan: &Plan,
        stdin: Io,
        stdout: Io,
        stderr: Io,
        opts: SpawnOpts,
    ) -> std::io::Result<Running> {
        if opts.join_cgroups.len() > MAX_JOIN_CGROUPS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "at most {MAX_JOIN_CGROUPS} cgroups to join, {} given",
                    opts.join_cgroups.len()
                ),
            ));
        }
        let json = serde_json::to_vec(plan).map_err(std::io::Error::other)?;
        let plan_file = tempfile_plan(&json)?;
        let (status_r, status_w) = crate::sys::pipe_owned()?;
        let mut how: Vec<String> = vec!["--plan-fd".into(), "3".into()];
        let mut fds = vec![(plan_file, 3), (status_w, 4)];
        for (fd, target) in opts.join_cgroups.into_iter().zip(JOIN_CGROUP_FD..) {
            how.extend(["--join-cgroup-fd".into(), target.to_string()]);
            fds.push((fd, target));
        }
        let how: Vec<&str> = how.iter().map(String::as_str).collect();
        let args = self.args(&how);
        let child = Launched::start(
            self.exe.as_os_str(),
            &args,
            [stdin, stdout, stderr],
            &fds,
            opts.detach,
        )?;
        Ok(Running {
            child,
            status: BufReader::new(std::fs::File::from(status_r)),
        })
    }
}

impl Launcher {
    /// The launcher's command line for a spawn: `how` (the plan's or the control socket's
    /// fd, at 3), status lines on fd 4, this process as its caller.
    fn args(&self, how: &[&str]) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec![self.exe.clone().into_os_string()];
        args.extend(self.pre_args.iter().map(Into::into));
        args.extend(how.iter().map(Into::into));
        args.extend(["--status-fd", "4", "--caller-pid"].iter().map(Into::into));
        args.push(std::process::id().to_string().into());
        args
    }

    /// Starts `efr-launch` in standby ([`crate::standby`]): loaded, its init waiting in
    /// fresh namespaces, for a call [`Warm::go`] gives it later. It ends with this process
    /// (`--caller-pid`), and when the [`Warm`] is dropped unused.
    pub fn spawn_warm(&self) -> std::io::Result<Warm> {
        let (mine, theirs) = crate::sys::socketpair()?;
        let (status_r, status_w) = crate::sys::pipe_owned()?;
        let args = self.args(&["--warm", "--control-fd", "3"]);
        let child = Launched::start(
            self.exe.as_os_str(),
            &args,
            [Io::Null, Io::Null, Io::Null],
            &[(theirs, 3), (status_w, 4)],
            // Only the service keeps a launcher waiting; its calls each get a session.
            Detach::Session,
        )?;
        Ok(Warm {
            child: Some(child),
            control: mine,
            status: Some(status_r),
        })
    }
}

impl Launcher {
    /// Starts `efr-launch --ns-sockets` ([`crate::ns_sockets`]) for the job's process
    /// `pid`: the socket maker of that process's network namespace, on a seqpacket control
    /// socket (the returned end; the launcher's is its fd 3), its stdio `/dev/null`. It ends
    /// with this process (`--caller-pid`) and at the control socket's EOF.
    pub fn spawn_ns_sockets(&self, pid: u32) -> std::io::Result<NsSockets> {
        let (mine, theirs) = crate::sys::seqpacket_pair()?;
        let mut args: Vec<std::ffi::OsString> = vec![self.exe.clone().into_os_string()];
        args.extend(self.pre_args.iter().map(Into::into));
        for a in ["--ns-sockets", "--pid"] {
            args.push(a.into());
        }
        args.push(pid.to_string().into());
        for a in ["--control-fd", "3", "--caller-pid"] {
            args.push(a.into());
        }
        args.push(std::process::id().to_string().into());
        let child = Launched::start(
            self.exe.as_os_str(),
            &args,
            [Io::Null, Io::Null, Io::Null],
            &[(theirs, 3)],
            Detach::None,
        )?;
        Ok(NsSockets {
            child,
            control: mine,
        })
    }
}

/// A started socket maker of a job's network namespace ([`Launcher::spawn_ns_sockets`]).
#[derive(Debug)]
pub struct NsSockets {
    /// Its process (the caller reaps it).
    pub child: Launched,
    /// The caller's end of the control socket (seqpacket, close-on-exec): the requests and
    /// answers of [`crate::ns_sockets`].
    pub control: std::os::fd::OwnedFd,
}

/// An `efr-launch` in standby ([`Launcher::spawn_warm`]); killed and reaped when dropped
/// before [`Warm::go`].
#[derive(Debug)]
pub struct Warm {
    child: Option<Launched>,
    control: std::os::fd::OwnedFd,
    status: Option<std::os::fd::OwnedFd>,
}

/// Why a [`Warm`] launcher did not take its call: it had ended (its stdio were not used;
/// start the call another way).
#[derive(Debug, thiserror::Error)]
#[error("the launcher started ahead cannot take the call: {0}")]
pub struct WarmGone(#[source] pub std::io::Error);

impl Warm {
    /// The launcher's pid.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Launched::id)
    }

    /// Whether it is still there to take a call (not ended).
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Announces the call it will get (see [`ANNOUNCE`]): its init starts on
    /// the part of the view no plan changes while the caller makes the plan. A standby
    /// announced serves that call or none (its view is of the announce's time).
    pub fn announce(&self) {
        let _ = efr_fdpass::send_fds(std::os::fd::AsFd::as_fd(&self.control), &[ANNOUNCE], &[]);
    }

    /// Gives it the call: `plan`, with these stdio. The [`Running`] is read as one from
    /// [`Launcher::spawn`].
    pub fn go(
        mut self,
        plan: &Plan,
        stdin: Io,
        stdout: Io,
        stderr: Io,
    ) -> Result<Running, WarmGone> {
        if !self.alive() {
            return Err(WarmGone(std::io::Error::other("it has ended")));
        }
        let json = serde_json::to_vec(plan).map_err(|e| WarmGone(std::io::Error::other(e)))?;
        let plan_file = tempfile_plan(&json).map_err(WarmGone)?;
        let spawned::Stdio { child, ends } =
            spawned::Stdio::new([stdin, stdout, stderr]).map_err(WarmGone)?;
        // Each of the call's fds 0 to 2: the one given, else this process's own.
        let mut fds = vec![plan_file];
        for target in 0..3 {
            let fd = match child.iter().find(|(_, t)| *t == target) {
                Some((f, _)) => f.try_clone(),
                None => crate::sys::dup_cloexec(target),
            }
            .map_err(WarmGone)?;
            fds.push(fd);
        }
        let borrowed: Vec<std::os::fd::BorrowedFd<'_>> =
            fds.iter().map(std::os::fd::AsFd::as_fd).collect();
        efr_fdpass::send_fds(std::os::fd::AsFd::as_fd(&self.control), &[CALL], &borrowed)
            .map_err(|e| WarmGone(std::io::Error::other(e)))?;
        let (Some(mut launched), Some(status)) = (self.child.take(), self.status.take()) else {
            return Err(WarmGone(std::io::Error::other("taken already")));
        };
        let [i, o, e] = ends;
        launched.stdin = i;
        launched.stdout = o;
        launched.stderr = e;
        Ok(Running {
            child: launched,
            status: BufReader::new(std::fs::File::from(status)),
        })
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The plan in an anonymous file (fd, positioned at the start).
fn tempfile_plan(json: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    crate::sys::memfd_with("efr-plan", json)
}

/// A running `efr-launch`.
#[derive(Debug)]
pub struct Running {
    /// The launcher's process.
    pub child: Launched,
    /// The read end of the launcher's status pipe (its fd 4): one JSON
    /// [`StatusLine`] per line.
    pub status: BufReader<std::fs::File>,
}

impl Running {
    /// The next status line (None at the end).
    pub fn next_status(&mut self) -> Option<StatusLine> {
        let mut l = String::new();
        loop {
            l.clear();
            if self.status.read_line(&mut l).ok()? == 0 {
                return None;
            }
            if let Ok(s) = StatusLine::parse(&l) {
                return Some(s);
            }
        }
    }

    /// Ends the whole tree (cancel): SIGTERM to the launcher, which forwards it; the tree
    /// dies with the launcher if it is killed.
    pub fn cancel(&mut self) {
        // A child's pid is always a pid_t (at most the kernel's pid_max, 2^22).
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            let _ = crate::sys::kill(pid, libc::SIGTERM);
        }
    }

    /// Reads every status line and waits for the launcher.
    pub fn wait(mut self) -> std::io::Result<(Outcome, std::process::ExitStatus)> {
        let mut text = String::new();
        while let Some(s) = self.next_status() {
            text.push_str(&s.to_line());
            text.push('\n');
        }
        let st = self.child.wait()?;
        Ok((Outcome::from_lines(&text), st))
    }
}
