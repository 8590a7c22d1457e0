//! The owner of one call: [`Call`]. Every way a line runs goes through it, and nothing
//! else in the workspace spawns `efr-launch`:
//!
//! 1. [`Call::prepare`] checks the params and builds the plan ([`crate::launch::prepare`],
//!    the only plan builder);
//! 2. [`Call::proxy_policy`] and [`Call::attach`] give it its egress proxy and bus filters
//!    (its cache layers come with the plan);
//! 3. it runs: as a stream of typed events ([`Call::start`], `sandbox.launch`), handed out
//!    as a plan file for efrd to run ([`Planned`], `sandbox.plan`), with this process's
//!    stdio ([`Call::run_inherited`], `efr-sandbox run`) or with pipes the caller reads
//!    ([`Call::spawn`], the probe);
//! 4. [`Call::fold`] and [`Call::close`] finish it: the one fallback for a launcher that
//!    ended without reporting the line's end ([`fallback`]), the denials as exit records,
//!    the cache merge and the quarantine of the git code it left, the proxy's and the bus
//!    filters' part.
//!
//! A running call is held by the task [`Call::start`] spawns on the call's runtime, not by
//! the connection that asked for it: the connection holds only the [`CallStream`].
//! Dropping the stream (a cancel, a caller that hung up or stopped reading) stops the call
//! and the task still runs it to its end, as a call read to its end: the launcher reaped,
//! the layers merged, the proxy and filters closed, the finish written to the log (there
//! is no one to hand it to). A background job is a stream handed to an owner that outlives
//! the connection.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use efr_launcher::api::Io;
use std::sync::{Arc, Mutex};

use efr_launcher::api::Running;
use efr_launcher::plan::Plan;
use efr_launcher::status::Outcome;
use efr_policy::config::{Config, Env};
use efr_proxy::{ProxyPolicy, Refusal};
use efr_sandbox_wire::{
    CallParams, ExitRecord, Finish, Grant, LaunchItem, PlanResult, SandboxSummary,
};
use tokio::sync::mpsc;

use crate::after::{AfterCall, Ended};
use crate::bus::CallBus;
use crate::egress::CallProxy;

mod drive;

pub use crate::end::{LAUNCHER_LOST, LauncherEnd, fallback, setup_error_finish};
pub use crate::launch::PrepareError;
use crate::launch::{launcher, private_dir};

/// Where a call's parts live and what serves its proxy.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The config the calls' plans are built from.
    pub config: Arc<Config>,
    /// Where the home, the runtime dir and the other places the plans name paths by are.
    pub env: Env,
    /// The dir of the conversations' `/tmp` and `$SCRATCH` (`None`: a call may name no
    /// conversation).
    pub conversations: Option<PathBuf>,
    /// The dir below which the call's proxy and bus filter sockets go (`None`: the temp
    /// dir).
    pub sockets: Option<PathBuf>,
    /// The runtime that serves the call's proxy (and drives a [`Call::start`]ed call).
    pub handle: tokio::runtime::Handle,
    /// The launcher in standby a [`Call::start`]ed call takes when it fits, and fills again
    /// once it has ended (`None`: every call starts its own launcher).
    pub standby: Option<Arc<crate::standby::Standby>>,
}

/// Which calls get an egress proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyWhen {
    /// Every contained call with its own network ([`crate::egress::wanted`]).
    Wanted,
    /// Only such a call with a host grant (the probe's calls: its checks were written and
    /// measured for a call's network without a proxy, but the proxy self-test).
    HostGrants,
}

/// Why `efr-launch` could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the launcher {}: {source}", exe.display())]
pub struct SpawnError {
    /// The launcher's executable.
    pub exe: PathBuf,
    /// What the spawn said.
    #[source]
    pub source: std::io::Error,
}

/// One call, from its checked params to its finish.
#[derive(Debug)]
pub struct Call {
    line: String,
    projects: Vec<String>,
    plan: Plan,
    config: Arc<Config>,
    env: Env,
    proxy: Option<CallProxy>,
    bus: Option<CallBus>,
    env_dropped: Vec<String>,
    /// [`Self::note_env_dropped`] was called (the start then does not note again).
    env_noted: bool,
    /// The proxy's refusals recorded (and sent as items) while the call ran.
    host_exits: Vec<ExitRecord>,
    /// What its after-call effects compare against, taken before it runs; taken by its
    /// finish ([`crate::after`]).
    after: std::sync::Mutex<Option<AfterCall>>,
    /// The index files of its repositories as it started ([`crate::index_flags`]).
    index: Option<Arc<crate::index_flags::Snapshot>>,
    /// Its id in the service, given in its `started` item (`sandbox.launch`).
    call_id: Option<String>,
    /// What it was asked as, for its record in the call log ([`crate::history`]).
    params: CallParams,
    /// It was stopped before its end (a cancel, its caller gone, a stop asked).
    stopped: bool,
}

impl Call {
    /// Checks `p` and builds its plan from the config (with its cache layers).
    pub fn prepare(p: &CallParams, ctx: &Ctx) -> Result<Call, PrepareError> {
        Call::prepare_with_env(p, ctx, None)
    }

    /// [`Self::prepare`], the line starting from `process_env` (this process's environment
    /// when `None`).
    pub fn prepare_with_env(
        p: &CallParams,
        ctx: &Ctx,
        process_env: Option<Vec<(String, String)>>,
    ) -> Result<Call, PrepareError> {
        let (plan, repos) = crate::launch::prepare_with_repos(
            p,
            &ctx.config,
            &ctx.env,
            ctx.conversations.as_deref(),
            process_env,
        )?;
        // What the after-call effects compare against, held before it runs: the index
        // files (of a contained call only: an approved line's flags are the user's), the
        // floor files, the registries' answers the cache merge will need.
        let after = AfterCall::start(&plan, &repos, &ctx.config, &ctx.env);
        let index = after.index();
        Ok(Call {
            line: p.line.clone(),
            projects: p.projects.clone(),
            plan,
            config: ctx.config.clone(),
            env: ctx.env.clone(),
            proxy: None,
            bus: None,
            env_dropped: Vec::new(),
            env_noted: false,
            host_exits: Vec::new(),
            after: std::sync::Mutex::new(Some(after)),
            index,
            call_id: None,
            params: CallParams {
                // The line is in the plan and in `line`: not held a third time.
                line: String::new(),
                ..p.clone()
            },
            stopped: false,
        })
    }

    /// Names the call: its `started` item carries `id` (what `sandbox.call_background`
    /// names a running call by).
    pub fn set_call_id(&mut self, id: String) {
        self.call_id = Some(id);
    }

    /// The line.
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The call's plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The call's plan, to change before it runs (the probe's own environment and masks,
    /// `efr-sandbox run --env`).
    pub fn plan_mut(&mut self) -> &mut Plan {
        &mut self.plan
    }

    /// The index files of its repositories as it started (None for an unsandboxed call):
    /// what a background job's owner checks while the job lives
    /// ([`crate::index_flags::Snapshot::settle`]).
    pub fn index_flags(&self) -> Option<Arc<crate::index_flags::Snapshot>> {
        self.index.clone()
    }

    /// The call's proxy, once attached.
    pub fn proxy(&self) -> Option<&CallProxy> {
        self.proxy.as_ref()
    }

    /// Applies `efr-sandbox run --env` ([`crate::launch::apply_env_args`]): the variables
    /// refused, with why.
    pub fn env_args(
        &mut self,
        args: &[String],
    ) -> Result<Vec<(String, String)>, crate::launch::EnvArgError> {
        crate::launch::apply_env_args(&mut self.plan, args, &self.config)
    }

    /// Notes what of the environment the line does not get: `refused` (by `--env`) and
    /// what looks like a secret; the summary's `env_dropped`. Gives them all, with why.
    pub fn note_env_dropped(&mut self, refused: Vec<(String, String)>) -> Vec<(String, String)> {
        let mut all = refused;
        // A `--env NAME` refused for its name is dropped by the policy too: said once.
        for d in crate::launch::env_drops(&self.plan, &self.config) {
            if !all.iter().any(|(n, _)| *n == d.0) {
                all.push(d);
            }
        }
        self.env_dropped = all.iter().map(|(n, _)| n.clone()).collect();
        self.env_noted = true;
        all
    }

    /// The policy of the call's proxy, when it gets one (reads token files: call it off
    /// the async threads).
    pub fn proxy_policy(&self, when: ProxyWhen) -> Option<ProxyPolicy> {
        if !crate::egress::wanted(&self.plan) {
            return None;
        }
        if when == ProxyWhen::HostGrants
            && !self
                .plan
                .grants
                .iter()
                .any(|g| matches!(g, Grant::Host { .. }))
        {
            return None;
        }
        let ce = crate::egress::call_env(&self.plan);
        Some(crate::egress::policy(
            &self.plan.grants,
            &self.config,
            &self.env,
            &self.projects,
            &ce,
        ))
    }

    /// The policy of a call holding credentials, made again now that its plan holds their
    /// placeholders: the variables that hold a placeholder (or a helper that answers one)
    /// are not tokens the call can read, so they deny no host; the bound hosts allowed and
    /// the broker set ([`crate::broker::with_broker`]).
    fn broker_policy(&self, g: &crate::broker::Granted) -> ProxyPolicy {
        let ce = crate::broker::without_placeholders(
            crate::egress::call_env(&self.plan),
            &g.placeholder_vars,
            &g.placeholders,
        );
        let mut p = crate::egress::policy(
            &self.plan.grants,
            &self.config,
            &self.env,
            &self.projects,
            &ce,
        );
        crate::broker::with_broker(&mut p, g);
        p
    }

    /// Starts the call's proxy (with `policy`, from [`Self::proxy_policy`]) and its bus
    /// filters (one per `bus_filter` grant), their sockets below `ctx.sockets`.
    /// A call holding `credential` grants gets them made ready first
    /// ([`crate::broker::prepare`]: placeholders in its plan, the broker in its proxy's
    /// policy) and the broker's CA in its trust once the proxy's directory exists.
    pub fn attach(&mut self, policy: Option<ProxyPolicy>, ctx: &Ctx) -> Result<(), PrepareError> {
        let granted =
            crate::broker::prepare(&mut self.plan, &self.config, &self.env, policy.is_some())?;
        if let Some(mut pol) = policy {
            if let Some(g) = &granted {
                pol = self.broker_policy(g);
            }
            let cp = CallProxy::attach(&mut self.plan, pol, ctx.sockets.as_deref())
                .map_err(PrepareError::Proxy)?;
            if let Some(g) = &granted {
                let trust =
                    crate::broker::write_trust(cp.dir(), g.ca.cert_pem(), g.git_config.as_deref())
                        .map_err(crate::broker::CredentialError::from)?;
                crate::broker::set_env(&mut self.plan, crate::broker::trust_env(&trust));
                self.plan.trust = Some(trust);
            }
            self.proxy = Some(cp);
        }
        let buses = crate::bus::wanted(&self.plan);
        if !buses.is_empty() {
            let cb = CallBus::attach(&mut self.plan, &buses, &self.config, ctx.sockets.as_deref())?;
            self.bus = Some(cb);
        }
        Ok(())
    }

    /// Spawns `efr-launch` for the call with the given stdio (the probe reads its output).
    pub fn spawn(self, stdin: Io, stdout: Io, stderr: Io) -> Result<Spawned, SpawnError> {
        let l = launcher();
        match l.spawn(&self.plan, stdin, stdout, stderr) {
            Ok(running) => Ok(Spawned {
                running,
                _call: self,
            }),
            Err(source) => Err(SpawnError { exe: l.exe, source }),
        }
    }

    /// Runs the call with this process's stdio (`efr-sandbox run`): the launcher in a process
    /// group of its own when `own_group`; the signals [`crate::sys::forward_signals`] set up
    /// go to it while it runs; the terminal's settings put back when it was killed.
    pub fn run_inherited(&self, own_group: bool) -> Result<(Outcome, ExitStatus), SpawnError> {
        let forwarded = efr_launcher::signals::forwarded_signals();
        // The launcher puts the terminal's settings back itself, unless it is killed.
        let terminal = efr_launcher::pty::SavedTerminal::of_stdio();
        let l = launcher();
        let r = l
            .spawn_in_group(
                &self.plan,
                Io::inherit(),
                Io::inherit(),
                Io::inherit(),
                own_group,
            )
            .and_then(|r| {
                let pidfd = crate::sys::pidfd_open(r.child.id());
                if let Ok(fd) = &pidfd {
                    crate::sys::forward_to(fd);
                }
                let end = r.wait();
                crate::sys::stop_forwarding(&forwarded);
                drop(pidfd);
                end
            });
        match r {
            Ok((o, st)) => {
                if std::os::unix::process::ExitStatusExt::signal(&st).is_some() {
                    if let Some(t) = &terminal {
                        t.restore();
                    }
                }
                Ok((o, st))
            }
            Err(source) => Err(SpawnError { exe: l.exe, source }),
        }
    }

    /// The finish of the line (blocking: the cache merge and the git guard walk), in
    /// steps: the [`fallback`] for `end`; the line's end, its denials as exit records
    /// ([`crate::launch::finished`]); the environment it did not get; the after-call
    /// effects on the host ([`AfterCall::finish`]: the git code it left quarantined, its
    /// cache layers merged, the floor files it wrote).
    pub fn fold(&self, mut o: Outcome, end: &LauncherEnd) -> Finish {
        fallback(&mut o, end);
        let mut fin =
            crate::launch::finished(&o, &self.line, &self.projects, &self.config, &self.env);
        fin.sandbox_summary.env_dropped = self.env_dropped.clone();
        let after = self.after.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(after) = after {
            let call = Ended {
                plan: &self.plan,
                line: &self.line,
                projects: &self.projects,
                config: &self.config,
                env: &self.env,
            };
            after.finish(&o, &mut fin, call);
        }
        fin
    }

    /// The exit record of a proxy refusal the call has not recorded yet, kept for
    /// [`Self::close`].
    fn record_refusal(&mut self, r: &Refusal) -> Option<ExitRecord> {
        let rec = self.proxy.as_ref()?.record_new(r, &self.line)?;
        self.host_exits.push(rec.clone());
        Some(rec)
    }

    /// Ends the call's bus filters and gives their part of a summary, their messages left
    /// out (the bus filter's self-test).
    pub fn bus_summary(&mut self) -> SandboxSummary {
        let mut summary = SandboxSummary::default();
        if let Some(mut b) = self.bus.take() {
            let _ = b.finish(&mut summary, &self.line);
        }
        summary
    }

    /// Ends the call's proxy and bus filters and puts their part in `fin` (the refusals
    /// recorded while it ran, then the rest), and writes the call's record in the call log
    /// ([`crate::history`]); the exit records not given out before.
    pub fn close(mut self, fin: &mut Finish) -> Vec<ExitRecord> {
        let mut new = Vec::new();
        if let Some(mut cp) = self.proxy.take() {
            let rest = cp.finish(&mut fin.sandbox_summary, &self.line);
            new.extend(rest.iter().cloned());
            fin.exits.append(&mut self.host_exits);
            fin.exits.extend(rest);
        }
        if let Some(mut b) = self.bus.take() {
            new.extend(crate::bus::finish_into(&mut b, fin, &self.line));
        }
        // Every call ends here: its record in the user's call log.
        let p = CallParams {
            line: std::mem::take(&mut self.line),
            ..std::mem::take(&mut self.params)
        };
        crate::history::log_call(
            &p,
            fin,
            self.stopped,
            self.call_id.as_deref(),
            &self.config,
            &self.env,
        );
        new
    }

    /// The finish of the call when its sandbox could not be set up after it was prepared
    /// (its proxy or bus filters): a setup error, recorded in the call log.
    pub fn unstarted(self, msg: String) -> Finish {
        let fin = setup_error_finish(msg);
        let p = CallParams {
            line: self.line.clone(),
            ..self.params.clone()
        };
        crate::history::append_unprepared(&p, &fin, &self.config, &self.env);
        fin
    }

    /// Writes the call log's record of a call whose launcher could not be started (`e`),
    /// with the setup error its caller answers.
    fn log_not_started(&self, e: &SpawnError) {
        let fin = setup_error_finish(format!("cannot start efr-launch: {}", e.source));
        let p = CallParams {
            line: self.line.clone(),
            ..self.params.clone()
        };
        crate::history::append_unprepared(&p, &fin, &self.config, &self.env);
    }

    /// Runs the call, its stdout and stderr on pipes, driven by a task on `ctx.handle` that
    /// owns it: the stream gives its items (`started` first, the output, the exit records of
    /// its refusals as they come) and then its finish. Dropping the stream ends the call's
    /// tree (SIGTERM, then SIGKILL).
    pub fn start(self, ctx: &Ctx) -> Result<CallStream, SpawnError> {
        self.start_with(ctx, None)
    }

    /// [`Self::start`] in `announced`, the launcher in standby taken for this call when its
    /// request came ([`crate::standby::Standby::announce`]), when the plan fits it (else it
    /// is dropped and the call takes none); without one, in the one in standby when the
    /// call fits.
    pub fn start_with(
        self,
        ctx: &Ctx,
        announced: Option<efr_launcher::api::Warm>,
    ) -> Result<CallStream, SpawnError> {
        self.start_io(ctx, announced, None)
    }

    /// [`Self::start_with`] with the caller's stdin, stdout and stderr (`sandbox.run`: the
    /// CLI's own, sent to the service): the stream has no `output` items.
    pub fn start_passed(
        self,
        ctx: &Ctx,
        announced: Option<efr_launcher::api::Warm>,
        stdio: [OwnedFd; 3],
    ) -> Result<CallStream, SpawnError> {
        self.start_io(ctx, announced, Some(stdio))
    }

    /// [`Self::start`] for a background job: a launcher of its own (never the one in
    /// standby), which joins the cgroups of `join_cgroups` (`cgroup.procs` files open for
    /// writing, `efr_jobs::cgroup::JobCgroup::join_files`) before it makes anything.
    pub fn start_job(
        self,
        ctx: &Ctx,
        join_cgroups: Vec<OwnedFd>,
    ) -> Result<CallStream, SpawnError> {
        let refusals = self.proxy.as_ref().and_then(|c| c.take_events());
        let l = launcher();
        let opts = efr_launcher::api::SpawnOpts {
            // A job lasts: it competes for the processors as one (and has no terminal).
            detach: efr_launcher::api::spawned::Detach::Session,
            join_cgroups,
        };
        let running = l
            .spawn_opts(&self.plan, Io::null(), Io::piped(), Io::piped(), opts)
            .map_err(|source| {
                let e = SpawnError {
                    exe: l.exe.clone(),
                    source,
                };
                self.log_not_started(&e);
                e
            })?;
        Ok(self.drive_on(ctx, running, refusals, None))
    }

    /// Drives `running` on `ctx`'s runtime ([`drive`]); `refill` is the standby to fill
    /// again once it has ended.
    fn drive_on(
        self,
        ctx: &Ctx,
        running: Running,
        refusals: Option<mpsc::Receiver<Refusal>>,
        refill: Option<(Arc<crate::standby::Standby>, efr_launcher::api::Launcher)>,
    ) -> CallStream {
        let (tx, rx) = mpsc::channel(1);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let launcher_pid = running.child.id();
        ctx.handle.spawn(async move {
            drive::drive(self, running, refusals, tx, stop_rx).await;
            if let Some((s, l)) = refill {
                let _ = tokio::task::spawn_blocking(move || s.fill(&l)).await;
            }
        });
        CallStream {
            rx,
            stop: Stopper(Arc::new(stop_tx)),
            launcher_pid,
        }
    }

    fn start_io(
        self,
        ctx: &Ctx,
        announced: Option<efr_launcher::api::Warm>,
        passed: Option<[OwnedFd; 3]>,
    ) -> Result<CallStream, SpawnError> {
        let refusals = self.proxy.as_ref().and_then(|c| c.take_events());
        let l = launcher();
        // Each launch attempt gets its own copies of passed fds (a standby that is gone
        // has taken the first).
        let stdio = || -> std::io::Result<[Io; 3]> {
            Ok(match &passed {
                None => [Io::null(), Io::piped(), Io::piped()],
                Some([i, o, e]) => [
                    Io::Fd(i.try_clone()?),
                    Io::Fd(o.try_clone()?),
                    Io::Fd(e.try_clone()?),
                ],
            })
        };
        // A launcher that cannot be started ends the call here: its record in the call log
        // as a setup error, as every other end has.
        let spawn_error = |source| {
            let e = SpawnError {
                exe: l.exe.clone(),
                source,
            };
            self.log_not_started(&e);
            e
        };
        let fits = crate::standby::fits(&self.plan);
        // The next call's launcher is started once this one has ended, off its path: after
        // a call that took the one in standby (announced to it, or taken as it fits), and
        // after one that could have (the slot may be empty: calls at once, a standby
        // announced to a call that never started).
        let refill = ctx.standby.clone().filter(|_| fits || announced.is_some());
        let warm = match announced {
            Some(w) => Some(w).filter(|_| fits),
            None => ctx.standby.as_ref().and_then(|s| s.take(&self.plan)),
        };
        let warm = match warm {
            Some(w) => {
                let [i, o, e] = stdio().map_err(spawn_error)?;
                w.go(&self.plan, i, o, e).ok()
            }
            None => None,
        };
        let running = match warm {
            Some(r) => r,
            None => {
                let [i, o, e] = stdio().map_err(spawn_error)?;
                // A session of its own, as a launcher in standby has: the call competes
                // for the processors as one.
                let opts = efr_launcher::api::SpawnOpts {
                    detach: efr_launcher::api::spawned::Detach::Session,
                    join_cgroups: Vec::new(),
                };
                l.spawn_opts(&self.plan, i, o, e, opts)
                    .map_err(spawn_error)?
            }
        };
        drop(passed);
        Ok(self.drive_on(ctx, running, refusals, refill.map(|s| (s, l))))
    }
}

/// A call running with pipes ([`Call::spawn`]); its proxy and filters live as long as it.
#[derive(Debug)]
pub struct Spawned {
    running: Running,
    _call: Call,
}

impl Spawned {
    /// The launcher's process.
    pub fn child(&mut self) -> &mut efr_launcher::api::Launched {
        &mut self.running.child
    }

    /// Waits for the launcher: the outcome its status lines give, and its exit status.
    pub fn wait(self) -> std::io::Result<(Outcome, ExitStatus)> {
        self.running.wait()
    }

    /// [`Self::wait`], and the call back (to close it).
    pub fn wait_call(self) -> (std::io::Result<(Outcome, ExitStatus)>, Call) {
        (self.running.wait(), self._call)
    }
}

/// An event of a running call.
#[derive(Debug)]
pub enum Event {
    /// An item of the stream.
    Item(LaunchItem),
    /// The finish (the last event).
    End(Box<Finish>),
}

/// The events of a call [`Call::start`]ed; the call is stopped when this is dropped, and
/// still runs to its finish (which goes to the log).
#[derive(Debug)]
pub struct CallStream {
    rx: mpsc::Receiver<Event>,
    stop: Stopper,
    launcher_pid: u32,
}

impl CallStream {
    /// The next event; `None` after the end.
    pub async fn next(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// Ends the call's tree while its events go on to their finish (dropping the stream
    /// ends it too, its finish then going to the log).
    pub fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    /// The launcher's pid (the root of the call's tree).
    pub fn launcher_pid(&self) -> u32 {
        self.launcher_pid
    }
}

/// Stops a running call: SIGTERM to its launcher, which hands it to the line, then SIGKILL
/// [`STOP_GRACE`] later; the call's stream still ends with its finish.
#[derive(Debug, Clone)]
pub struct Stopper(Arc<tokio::sync::watch::Sender<bool>>);

impl Stopper {
    /// Asks the call to stop (once is enough; more do nothing).
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

/// How long a stopped call's line has to end after SIGTERM before its launcher is killed.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// A call handed out by `sandbox.plan`, until `sandbox.finish`.
#[derive(Debug)]
pub struct PlannedCall {
    plan_file: PathBuf,
    call: Call,
}

impl PlannedCall {
    /// Folds the status lines the launcher wrote (`sandbox.finish`), deletes the plan file,
    /// ends the call's proxy and filters (blocking).
    pub fn finish(self, status: &str) -> Finish {
        let _ = std::fs::remove_file(&self.plan_file);
        let o = Outcome::from_lines(status);
        let mut fin = self.call.fold(o, &LauncherEnd::StatusLines);
        self.call.close(&mut fin);
        fin
    }
}

/// Why a plan could not be handed out.
#[derive(Debug, thiserror::Error)]
pub enum HandOutError {
    /// The plans' directory could not be made private (0700).
    #[error("{}: {source}", dir.display())]
    Dir {
        /// The plans' directory.
        dir: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// No random bytes for the call's token.
    #[error("no random token: {0}")]
    Token(std::io::Error),
    /// The plan could not be written as JSON.
    #[error("the plan does not serialize: {0}")]
    Serialize(serde_json::Error),
    /// The plan file could not be written.
    #[error("{}: {source}", file.display())]
    Write {
        /// The plan file (`<token>.json` in the plans' directory).
        file: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

/// The calls handed out by `sandbox.plan`, by token. Their plan files go when this is
/// dropped.
#[derive(Debug, Default)]
pub struct Planned(Mutex<HashMap<String, PlannedCall>>);

impl Planned {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PlannedCall>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the plan of `call` to a new file (0600) in `dir` (made 0700) and holds the
    /// call until [`Self::take`]: its token and the launcher's command line, which reads
    /// its status lines to `status_fd`.
    pub fn hand_out(
        &self,
        call: Call,
        dir: &Path,
        status_fd: i32,
    ) -> Result<PlanResult, HandOutError> {
        private_dir(dir).map_err(|source| HandOutError::Dir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let token = crate::sys::random_hex(16).map_err(HandOutError::Token)?;
        let file = dir.join(format!("{token}.json"));
        let json = serde_json::to_vec(&call.plan).map_err(HandOutError::Serialize)?;
        let write = |source| HandOutError::Write {
            file: file.clone(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .map_err(write)?;
        std::io::Write::write_all(&mut f, &json).map_err(write)?;
        let argv = launcher().command(&file, status_fd);
        let result = PlanResult {
            token: token.clone(),
            argv,
            plan_file: file.to_string_lossy().into_owned(),
            status_fd,
        };
        self.lock().insert(
            token,
            PlannedCall {
                plan_file: file,
                call,
            },
        );
        Ok(result)
    }

    /// The call of `token`, no longer held.
    pub fn take(&self, token: &str) -> Option<PlannedCall> {
        self.lock().remove(token)
    }
}

impl Drop for Planned {
    fn drop(&mut self) {
        for (_, c) in self.lock().drain() {
            let _ = std::fs::remove_file(&c.plan_file);
        }
    }
}
