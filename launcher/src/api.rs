//! The library API the service and the CLI call: build the plan of a request, find and
//! spawn `efr-launch`, read its status lines.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

pub use crate::spawned::{Io, Launched};

use efr_sandbox_wire::{Backend, Grant};

use crate::plan::{EnvVar, PLAN_VERSION, Plan, PlanCheck, PlanError, PlanMode, ProxyPlan};
use crate::status::{Outcome, StatusLine};

/// Which backend the config asks for: the wire's one backend choice.
pub use efr_sandbox_wire::BackendChoice;

/// `auto` → native when user namespaces work here, else bwrap when installed, else native
/// (whose setup error then says why).
pub fn resolve_backend(c: BackendChoice) -> Backend {
    match c {
        BackendChoice::Native => Backend::Native,
        BackendChoice::Bwrap => Backend::Bwrap,
        BackendChoice::Auto => {
            let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
                .map(|s| s.trim() != "0")
                .unwrap_or(false)
                && std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
                    .map(|s| s.trim() != "0")
                    .unwrap_or(true)
                && std::fs::read_to_string(
                    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                )
                .map(|s| s.trim() == "0")
                .unwrap_or(true);
            if userns || !crate::backend::bwrap::available() {
                Backend::Native
            } else {
                Backend::Bwrap
            }
        }
    }
}

/// One launch as the service sees it.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    /// The shell line to run.
    pub line: String,
    /// The directory the line starts in.
    pub cwd: String,
    /// Run the line unsandboxed (a cgroup around an ordinary child) rather than contained.
    pub unsandboxed: bool,
    /// The turn's project roots, writable in the call.
    pub projects: Vec<String>,
    /// Grants on top of the default view (a device, a socket, the network, ...).
    pub grants: Vec<Grant>,
    /// The conversation's scratch directory.
    pub scratch: Option<String>,
    /// The conversation's host directory shown at `/tmp`.
    pub tmp: Option<String>,
    /// The sizes of the call's own `/tmp` and `/dev/shm` (`2G`, `25%`); the launcher's
    /// defaults when `None`.
    pub tmp_size: Option<String>,
    /// The size of the call's `/dev/shm` (see `tmp_size`).
    pub shm_size: Option<String>,
    /// The user's home: what `~/` in `masks` stands for, and the line's `HOME` when its
    /// environment has none.
    pub home: Option<String>,
    /// The backend asked for; `auto` is resolved by [`resolve_backend`] into the plan.
    pub backend: BackendChoice,
    /// Read-only paths inside the writable roots: absolute paths, or names relative to each
    /// project root (a trailing `/` marks a directory; a missing path of either kind is
    /// refused to the call by the init's supervisor, nothing is made for it). The service
    /// passes the lists of `efr_policy::config::Config::launch_view` (the one place of the
    /// default masks and floors is policy/src/defaults.toml); [`build_plan`] refuses a
    /// contained request without them ([`PlanError::NoView`]).
    pub read_only_inside: Option<Vec<String>>,
    /// Name patterns protected relative to every writable root and repository below one
    /// (see [`crate::plan::Plan::protect_names`]); the policy's, as `read_only_inside`.
    pub protect_names: Option<Vec<String>>,
    /// Absolute paths or `~/...`; the policy's, as `read_only_inside`.
    pub masks: Option<Vec<String>>,
    /// Masked files shown with their secrets removed: (path, content); see
    /// [`crate::plan::Plan::scrubbed`].
    pub scrubbed: Vec<(String, String)>,
    /// The environment the line starts from; the caller's own when `None`.
    pub env: Option<Vec<(String, String)>>,
    /// Set after scrubbing (proxy variables, `SCRATCH`, ...).
    pub env_set: Vec<(String, String)>,
    /// What of `env` the line keeps (`efr_policy::config::Config::env_policy`); only
    /// [`crate::env::FALLBACK_KEEP`] when `None`.
    pub env_policy: Option<efr_sandbox_wire::envfilter::EnvPolicy>,
    /// Names kept besides the policy's `keep` (still refused by its `drop` and secret
    /// values).
    pub env_keep: Vec<String>,
    /// The shell that runs the line as `SHELL -c LINE`; `/bin/sh` when `None`.
    pub shell: Option<String>,
    /// The call's egress proxy (its socket must exist when the launcher runs).
    pub proxy: Option<ProxyPlan>,
    /// Real caches shown writable through a per-call layer (see `plan::CacheLayer`).
    pub caches: Vec<crate::plan::CacheLayer>,
}

impl LaunchRequest {
    /// A contained request with defaults.
    pub fn contained(line: impl Into<String>, cwd: impl Into<String>) -> LaunchRequest {
        LaunchRequest {
            line: line.into(),
            cwd: cwd.into(),
            unsandboxed: false,
            projects: Vec::new(),
            grants: Vec::new(),
            scratch: None,
            tmp: None,
            tmp_size: None,
            shm_size: None,
            home: std::env::var("HOME").ok(),
            backend: BackendChoice::Auto,
            read_only_inside: None,
            protect_names: None,
            masks: None,
            scrubbed: Vec::new(),
            env: None,
            env_set: Vec::new(),
            env_policy: None,
            env_keep: Vec::new(),
            shell: None,
            proxy: None,
            caches: Vec::new(),
        }
    }
}

fn expand(home: Option<&str>, p: &str) -> Option<String> {
    if let Some(rest) = p.strip_prefix("~/") {
        Some(format!("{}/{rest}", home?.trim_end_matches('/')))
    } else if p.starts_with('/') {
        Some(p.to_string())
    } else {
        None
    }
}

/// Builds the plan of a request.
pub fn build_plan(req: &LaunchRequest) -> Result<Plan, PlanError> {
    let home = req.home.clone();
    // The view is the policy's (`efr_policy::config::Config::launch_view`, from
    // policy/src/defaults.toml and the user's config): the launcher keeps no list of its own.
    let view = |what: &'static str, v: &Option<Vec<String>>| -> Result<Vec<String>, PlanError> {
        match v {
            Some(v) => Ok(v.clone()),
            // An unsandboxed line has no view.
            None if req.unsandboxed => Ok(Vec::new()),
            None => Err(PlanError::NoView(what)),
        }
    };
    let mut ro = Vec::new();
    // Absolute paths as they are, relative names inside each project root.
    for n in view("read_only_inside", &req.read_only_inside)? {
        if n.starts_with('/') {
            ro.push(n);
        } else {
            for root in &req.projects {
                ro.push(format!("{}/{n}", root.trim_end_matches('/')));
            }
        }
    }
    let masks: Vec<String> = view("masks", &req.masks)?
        .iter()
        .filter_map(|m| expand(home.as_deref(), m))
        .collect();
    let protect_names = view("protect_names", &req.protect_names)?;
    let plan = Plan {
        version: PLAN_VERSION,
        mode: if req.unsandboxed {
            PlanMode::Unsandboxed
        } else {
            PlanMode::Contained
        },
        backend: resolve_backend(req.backend),
        line: req.line.clone(),
        shell: req.shell.clone(),
        cwd: req.cwd.clone(),
        home,
        projects: req.projects.clone(),
        scratch: req.scratch.clone(),
        tmp: req.tmp.clone(),
        tmp_size: req.tmp_size.clone(),
        shm_size: req.shm_size.clone(),
        read_only_inside: ro,
        protect_names,
        masks,
        scrubbed: req
            .scrubbed
            .iter()
            .map(|(path, content)| crate::plan::ScrubbedFile {
                path: path.clone(),
                content: content.clone(),
            })
            .collect(),
        grants: req.grants.clone(),
        caches: req.caches.clone(),
        cache_files: Vec::new(),
        env: req.env.as_ref().map(|v| {
            v.iter()
                .map(|(k, v)| EnvVar {
                    name: k.clone(),
                    value: v.clone(),
                })
                .collect()
        }),
        env_set: req
            .env_set
            .iter()
            .map(|(k, v)| EnvVar {
                name: k.clone(),
                value: v.clone(),
            })
            .collect(),
        env_keep: req.env_keep.clone(),
        env_policy: req.env_policy.clone(),
        hide_sockets: true,
        require_landlock: false,
        proxy: req.proxy.clone(),
        test_weaken: Vec::new(),
    };
    plan.validate()?;
    Ok(plan)
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
        let json = serde_json::to_vec(plan).map_err(std::io::Error::other)?;
        let plan_file = tempfile_plan(&json)?;
        let (status_r, status_w) = crate::sys::pipe_owned()?;
        let mut args: Vec<std::ffi::OsString> = vec![self.exe.clone().into_os_string()];
        args.extend(self.pre_args.iter().map(Into::into));
        args.extend(
            ["--plan-fd", "3", "--status-fd", "4", "--caller-pid"]
                .iter()
                .map(Into::into),
        );
        args.push(std::process::id().to_string().into());
        let child = Launched::start(
            self.exe.as_os_str(),
            &args,
            [stdin, stdout, stderr],
            &[(plan_file, 3), (status_w, 4)],
            own_group,
        )?;
        Ok(Running {
            child,
            status: BufReader::new(std::fs::File::from(status_r)),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The launcher has no view of its own: a contained request without the policy's lists
    /// is refused, naming the list; with them, the plan holds exactly those.
    #[test]
    fn the_view_is_the_requests_own() {
        let mut r = LaunchRequest::contained("true", "/p");
        r.projects = vec!["/p".into()];
        r.home = Some("/home/u".into());
        let e = build_plan(&r).unwrap_err();
        assert!(matches!(e, PlanError::NoView("read_only_inside")), "{e}");
        assert!(e.to_string().contains("names no read_only_inside"), "{e}");
        r.read_only_inside = Some(vec![".envrc".into(), "/etc/x".into()]);
        assert!(matches!(build_plan(&r), Err(PlanError::NoView("masks"))));
        r.masks = Some(vec!["~/.ssh".into(), "relative-is-dropped".into()]);
        assert!(matches!(
            build_plan(&r),
            Err(PlanError::NoView("protect_names"))
        ));
        r.protect_names = Some(vec![".git/hooks".into()]);
        let p = build_plan(&r).unwrap();
        assert_eq!(p.read_only_inside, ["/p/.envrc", "/etc/x"]);
        assert_eq!(p.masks, ["/home/u/.ssh"]);
        assert_eq!(p.protect_names, [".git/hooks"]);
        // An unsandboxed line has no view to ask for.
        let mut u = LaunchRequest::contained("true", "/p");
        u.unsandboxed = true;
        let p = build_plan(&u).unwrap();
        assert!(p.masks.is_empty() && p.read_only_inside.is_empty());
    }
}
