//! Background jobs: contained calls that outlive the request that started them,
//! owned by the service, not by a connection.
//!
//! The service's RPC handlers (`sandbox.launch` with `background`, `sandbox.call_background`,
//! `sandbox.jobs`, `sandbox.job_stop`, `sandbox.job_output`, `sandbox.job_events`) and its
//! wiring (the record's path at start, [`Jobs::stop_all`] at its stop) are the service's;
//! what they ask of jobs is here. A refusal is a typed error of its operation
//! ([`MinutesError`], [`WatchError`], [`RoomError`], [`FindError`], [`MoveError`]), which
//! becomes the wire's `ErrorBody` (its code and message) by `From` at that boundary.
//!
//! - [`Jobs`]: the registry: the jobs by conversation (`j1`, `j2`, ... each), the running
//!   launches a job may be moved from ([`Jobs::register_call`], `sandbox.call_background`),
//!   the events ([`events`]) and the jobs an earlier service left ([`restart`]);
//! - [`Job`]: one job: what it is, where it is, its bounded [`output`];
//! - `run`: the task that owns a job's call: its output, its watch, its time limit, its
//!   end, its cgroup and its forwards.
//!
//! A job ends with its line, at its `max_minutes`, when stopped, or when the service stops
//! (`daemon_stop`); nothing of it outlives the service (its launcher ends with the service,
//! `--caller-pid`). A job of an earlier service is reported ended (`daemon_restart`) by the
//! next one.

mod cgroup;
pub mod checks;
mod errors;
pub mod events;
pub mod forwards;
pub mod output;
pub mod restart;
mod run;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use efr_call::CallStream;
use efr_sandbox_wire::job::{
    JobCgroupInfo, JobForward, JobInfo, JobPortOutcome, JobState, JobStopBy, JobWatch, MovedFrom,
    valid_job_id,
};
use efr_sandbox_wire::{ExitRecord, Launch};
use tokio::sync::{mpsc, oneshot, watch};

use self::output::Output;
pub use errors::{
    FindError, MinutesError, MoveError, PATTERN_MAX, RoomError, WAKES_MAX, WatchError,
};

/// Jobs kept in the list once ended (the newest).
pub const ENDED_KEPT: usize = 200;
/// The most jobs `sandbox.jobs` lists.
pub const LIST_MAX: usize = 200;
/// The most bytes of a job's `tail`.
pub const TAIL_MAX: usize = 4096;
/// How long the service waits for its jobs to end when it stops.
pub const STOP_WAIT: Duration = Duration::from_secs(6);

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a job is made of when it starts.
#[derive(Debug)]
pub struct JobSpec {
    /// Its conversation.
    pub conversation: Option<String>,
    /// The id of its call.
    pub call_id: String,
    /// The line.
    pub command: String,
    /// How it runs.
    pub launch: Launch,
    /// Its time limit.
    pub max_minutes: f64,
    /// Its watch: the pattern compiled, and as asked.
    pub watch: Option<(regex::Regex, JobWatch)>,
    /// The call it was moved from.
    pub moved_from: Option<MovedFrom>,
    /// Bytes of output kept.
    pub output_max: usize,
    /// What the call gave before the job took it and the caller did not get: output past
    /// the bound the call holds until its `started` (a line that floods before the launcher
    /// reports its start). Counted and kept as the job's first output.
    pub before: Vec<efr_sandbox_wire::LaunchItem>,
}

/// What of a job changes while it runs.
#[derive(Debug)]
struct JobNow {
    state: JobState,
    ended_at: Option<u64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    stopped_by: Option<JobStopBy>,
    /// The first stop asked, and by whom (the end reads it).
    stop_asked: Option<JobStopBy>,
    reason: Option<String>,
    wakes: u32,
    forwards: Vec<JobForward>,
    /// Ports not forwarded, each with its last outcome (at most [`UNFORWARDED_KEPT`]).
    unforwarded: Vec<JobPortOutcome>,
    cgroup: Option<JobCgroupInfo>,
    launcher_lost: bool,
    survivors: Vec<u32>,
    /// The exit records of its refusals (at most [`EXITS_KEPT`]).
    exits: Vec<ExitRecord>,
}

/// Ports not forwarded kept per job (the latest).
pub const UNFORWARDED_KEPT: usize = 32;

impl JobNow {
    /// Its forwarded and not forwarded ports, to change together.
    fn ports_mut(&mut self) -> (&mut Vec<JobForward>, &mut Vec<JobPortOutcome>) {
        (&mut self.forwards, &mut self.unforwarded)
    }
}

/// Exit records kept per job.
const EXITS_KEPT: usize = 64;

/// One job.
#[derive(Debug)]
pub struct Job {
    /// `j1`, `j2`, ... in its conversation.
    pub id: String,
    /// Its conversation.
    pub conversation: Option<String>,
    /// The id of its call.
    pub call_id: String,
    /// The line.
    pub command: String,
    /// How it runs.
    pub launch: Launch,
    /// When it started (Unix ms).
    pub started_at: u64,
    /// When it ends at the latest (Unix ms).
    pub ends_by: u64,
    /// Its time limit.
    pub max_for: Duration,
    /// Its launcher's pid (0 for a job of an earlier service).
    pub launcher_pid: u32,
    /// Its watch.
    pub watch: Option<JobWatch>,
    /// The call it was moved from.
    pub moved_from: Option<MovedFrom>,
    /// Its output.
    pub output: Output,
    now: Mutex<JobNow>,
    /// Stops its call (set once its call runs).
    stopper: Mutex<Option<efr_call::Stopper>>,
    /// Becomes true when it has ended.
    ended: watch::Sender<bool>,
}

impl Job {
    fn lock(&self) -> std::sync::MutexGuard<'_, JobNow> {
        self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the service knows of it now.
    pub fn info(&self) -> JobInfo {
        let n = self.lock();
        JobInfo {
            id: self.id.clone(),
            conversation_id: self.conversation.clone(),
            call_id: self.call_id.clone(),
            command: self.command.clone(),
            launch: self.launch.clone(),
            state: n.state,
            started_at: self.started_at,
            ends_by: self.ends_by,
            ended_at: n.ended_at,
            exit_code: n.exit_code,
            signal: n.signal,
            stopped_by: n.stopped_by,
            reason: n.reason.clone(),
            watch: self.watch.clone(),
            output_bytes: self.output.total(),
            wakes: n.wakes,
            forwards: n.forwards.clone(),
            unforwarded: n.unforwarded.clone(),
            cgroup: n.cgroup.clone(),
            moved_from: self.moved_from.clone(),
            launcher_lost: n.launcher_lost,
            survivors: n.survivors.clone(),
        }
    }

    /// Its state now.
    pub fn state(&self) -> JobState {
        self.lock().state
    }

    /// Asks it to stop, as `by`: false when it has ended already. The first cause asked
    /// is the one recorded.
    pub fn stop(&self, by: JobStopBy) -> bool {
        {
            let mut n = self.lock();
            if n.state != JobState::Running {
                return false;
            }
            n.stop_asked.get_or_insert(by);
        }
        if let Some(s) = self
            .stopper
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            s.stop();
        }
        true
    }

    /// Waits until it has ended.
    pub async fn wait_ended(&self) {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|e| *e).await;
    }
}

/// A request to move a running call to a job.
#[derive(Debug)]
pub struct MoveRequest {
    /// The job's time limit.
    pub max_minutes: f64,
    /// The job's id, or why the call did not move.
    pub reply: oneshot::Sender<Result<String, MoveError>>,
}

/// A running launch that may be moved.
#[derive(Debug)]
struct Movable {
    conversation: Option<String>,
    /// Why it may not move, when it may not.
    refuse: Option<String>,
    tx: mpsc::Sender<MoveRequest>,
}

/// Removes a running launch from the movable ones when its request ends.
#[derive(Debug)]
pub struct CallGuard {
    jobs: Arc<Jobs>,
    call_id: String,
}

impl CallGuard {
    /// The call's id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.jobs
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.call_id);
    }
}

#[derive(Debug, Default)]
struct List {
    /// Oldest first.
    jobs: VecDeque<Arc<Job>>,
    /// The last number given, per conversation.
    numbers: HashMap<Option<String>, u32>,
}

/// Every job of the service.
#[derive(Debug, Default)]
pub struct Jobs {
    list: Mutex<List>,
    /// Their events.
    pub events: events::Events,
    calls: Mutex<HashMap<String, Movable>>,
    next_call: AtomicU64,
    /// The service is stopping: no job starts.
    closing: AtomicBool,
    /// Where the running jobs are written for the next service (`None`: nowhere).
    record: Mutex<Option<restart::Record>>,
    /// Where jobs get their cgroups (found at [`Self::take_over`]).
    cgroups: std::sync::OnceLock<cgroup::Place>,
    /// Which job's forward holds which host address.
    ports: Arc<crate::forward::Ports>,
}

impl Jobs {
    fn list(&self) -> std::sync::MutexGuard<'_, List> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the running jobs to `record` from now on, after reporting the jobs an
    /// earlier service wrote there as ended (`daemon_restart`).
    pub fn take_over(self: &Arc<Self>, record: restart::Record) {
        let _ = self.cgroups.set(cgroup::Place::find());
        let earlier = record.earlier();
        // Those that had ended were reported then; those that ran end now.
        for info in earlier.ended_before {
            self.adopt_ended(info, false);
        }
        for info in earlier.ended_now {
            self.adopt_ended(info, true);
        }
        *self.record.lock().unwrap_or_else(|p| p.into_inner()) = Some(record);
        self.write_record();
    }

    /// A job of an earlier service, ended: listed, and its `job_ended` sent when `report`.
    fn adopt_ended(&self, info: JobInfo, report: bool) {
        let mut l = self.list();
        let n = info
            .id
            .strip_prefix('j')
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        let last = l.numbers.entry(info.conversation_id.clone()).or_insert(0);
        *last = (*last).max(n);
        let job = Arc::new(Job {
            id: info.id.clone(),
            conversation: info.conversation_id.clone(),
            call_id: info.call_id.clone(),
            command: info.command.clone(),
            launch: info.launch.clone(),
            started_at: info.started_at,
            ends_by: info.ends_by,
            max_for: Duration::ZERO,
            launcher_pid: 0,
            watch: info.watch.clone(),
            moved_from: info.moved_from.clone(),
            output: Output::new(0),
            now: Mutex::new(JobNow {
                state: info.state,
                ended_at: info.ended_at,
                exit_code: info.exit_code,
                signal: info.signal,
                stopped_by: info.stopped_by,
                stop_asked: info.stopped_by,
                reason: info.reason.clone(),
                wakes: info.wakes,
                forwards: Vec::new(),
                unforwarded: info.unforwarded.clone(),
                cgroup: info.cgroup.clone(),
                launcher_lost: false,
                survivors: info.survivors.clone(),
                exits: Vec::new(),
            }),
            stopper: Mutex::new(None),
            ended: watch::channel(true).0,
        });
        l.jobs.push_back(job);
        drop(l);
        if !report {
            return;
        }
        self.events.emit(
            info.conversation_id.as_deref(),
            &info.id,
            efr_sandbox_wire::job::JobEventKind::JobEnded {
                state: info.state,
                exit_code: None,
                stopped_by: info.stopped_by,
                reason: info.reason,
                output_bytes: info.output_bytes,
                ran_secs: ran_secs(info.started_at, info.ended_at.unwrap_or(info.started_at)),
                tail: String::new(),
                output_truncated: info.output_bytes > 0,
                launcher_lost: false,
                survivors: info.survivors,
                exits: Vec::new(),
            },
        );
    }

    /// Writes the running jobs and the last ended ones for the next service (best effort:
    /// a record that cannot be written only loses the `daemon_restart` report and the
    /// ended jobs' list).
    fn write_record(&self) {
        let (mut running, mut ended) = (Vec::new(), Vec::new());
        for j in &self.list().jobs {
            let info = j.info();
            if info.state == JobState::Running {
                running.push(restart::Running {
                    info,
                    launcher_pid: j.launcher_pid,
                });
            } else {
                ended.push(info);
            }
        }
        if let Some(r) = self
            .record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            if let Err(e) = r.write(&running, &ended) {
                eprintln!("efr-sandbox: {e}");
            }
        }
    }

    /// Checks `max_minutes` against the config's range.
    pub fn check_minutes(
        jobs: &efr_policy::config::JobsConfig,
        m: f64,
    ) -> Result<(), MinutesError> {
        let (lo, hi) = (jobs.min_minutes.value, jobs.max_minutes.value);
        if m.is_finite() && m >= lo && m <= hi {
            Ok(())
        } else {
            Err(MinutesError { minutes: m, lo, hi })
        }
    }

    /// The watch of a job: `pattern` compiled (at most 1000 characters, a bounded program),
    /// `max_wakes` (1 when absent, at most 1000).
    pub fn watch(
        pattern: Option<&str>,
        max_wakes: Option<u32>,
    ) -> Result<Option<(regex::Regex, JobWatch)>, WatchError> {
        let Some(p) = pattern else {
            return Ok(None);
        };
        if p.len() > PATTERN_MAX {
            return Err(WatchError::TooLong(p.len()));
        }
        let re = regex::RegexBuilder::new(p)
            .size_limit(1 << 20)
            .build()
            .map_err(|source| WatchError::Pattern {
                pattern: p.to_owned(),
                source,
            })?;
        let max_wakes = max_wakes.unwrap_or(1);
        if max_wakes == 0 || max_wakes > WAKES_MAX {
            return Err(WatchError::Wakes(max_wakes));
        }
        Ok(Some((
            re,
            JobWatch {
                pattern: p.to_owned(),
                max_wakes,
            },
        )))
    }

    /// A job's cgroup named `name` (its call's id) with `config`'s limits, or why none.
    fn cgroup(
        &self,
        config: &efr_policy::config::Config,
        name: &str,
    ) -> Result<crate::cgroup::JobCgroup, cgroup::Off> {
        let j = &config.jobs;
        let limits = crate::cgroup::CgroupLimits {
            memory_max: j.memory_max.value,
            pids_max: Some(j.pids_max.value),
        };
        self.cgroups
            .get_or_init(cgroup::Place::find)
            .job(j.cgroups.value, name, &limits)
    }

    /// What a job started as the call `call_id` gets besides its call: its cgroup (or
    /// why none) and the fds its launcher joins it by.
    pub fn hooks(
        &self,
        config: &efr_policy::config::Config,
        p: &efr_sandbox_wire::CallParams,
        call_id: &str,
    ) -> (Hooks, Vec<std::os::fd::OwnedFd>) {
        let mut join = Vec::new();
        let cg = self.cgroup(config, call_id).and_then(|cg| {
            join = cg.join_files().map_err(cgroup::Off::failed)?;
            Ok(cg)
        });
        let mut h = self.hooks_with(config, cg);
        h.forwards = forwards::plan(config, p);
        (h, join)
    }

    /// [`Self::hooks`] for a running call moved to a job: its tree (from `launcher_pid`)
    /// is moved into the job's cgroup.
    pub fn hooks_for_move(
        &self,
        config: &efr_policy::config::Config,
        p: &efr_sandbox_wire::CallParams,
        call_id: &str,
        launcher_pid: u32,
    ) -> Hooks {
        let cg = self.cgroup(config, call_id).and_then(|cg| {
            cg.adopt_tree(launcher_pid).map_err(cgroup::Off::failed)?;
            Ok(cg)
        });
        let mut h = self.hooks_with(config, cg);
        h.forwards = forwards::plan(config, p);
        // A running call's rlimits are its own: without a cgroup, a moved call has no
        // process bound.
        if matches!(h.cgroup, Some(Err(_))) {
            h.pids_max = None;
        }
        h
    }

    fn hooks_with(
        &self,
        config: &efr_policy::config::Config,
        cg: Result<crate::cgroup::JobCgroup, cgroup::Off>,
    ) -> Hooks {
        let j = &config.jobs;
        let limited = cg.is_ok();
        Hooks {
            cgroup: Some(cg),
            memory_max: j.memory_max.value.filter(|_| limited),
            // Without a cgroup, a started job's line has it as its RLIMIT_NPROC.
            pids_max: Some(j.pids_max.value),
            forwards: None,
            checks: None,
        }
    }

    /// How many jobs run.
    pub fn running(&self) -> usize {
        self.list()
            .jobs
            .iter()
            .filter(|j| j.state() == JobState::Running)
            .count()
    }

    /// Whether one more job may start now (`busy` when `max_running` run, `conflict` when
    /// the service is stopping).
    pub fn check_room(&self, max_running: u64) -> Result<(), RoomError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(RoomError::Stopping);
        }
        let running = self.running();
        if running as u64 >= max_running {
            return Err(RoomError::Full(running));
        }
        Ok(())
    }

    /// Whether a running call may move to a job of `max_minutes` now: its time limit in
    /// the config's range ([`Self::check_minutes`]) and room for one more job
    /// ([`Self::check_room`]).
    pub fn check_move(
        &self,
        config: &efr_policy::config::JobsConfig,
        max_minutes: f64,
    ) -> Result<(), MoveError> {
        Self::check_minutes(config, max_minutes)?;
        self.check_room(config.max_running.value)?;
        Ok(())
    }

    /// Starts a job that owns `stream`, a running call (its `started` item read already).
    pub fn start(
        self: &Arc<Self>,
        mut spec: JobSpec,
        stream: CallStream,
        hooks: run::Hooks,
    ) -> Arc<Job> {
        let started_at = now_ms();
        let max_for = Duration::from_secs_f64((spec.max_minutes * 60.0).max(0.0));
        let ends_by =
            started_at.saturating_add(u64::try_from(max_for.as_millis()).unwrap_or(u64::MAX));
        let before = std::mem::take(&mut spec.before);
        let (re, watch) = match spec.watch {
            Some((re, w)) => (Some(re), Some(w)),
            None => (None, None),
        };
        let job = {
            let mut l = self.list();
            let n = l.numbers.entry(spec.conversation.clone()).or_insert(0);
            *n += 1;
            let job = Arc::new(Job {
                id: format!("j{n}"),
                conversation: spec.conversation,
                call_id: spec.call_id,
                command: spec.command,
                launch: spec.launch,
                started_at,
                ends_by,
                max_for,
                launcher_pid: stream.launcher_pid(),
                watch,
                moved_from: spec.moved_from,
                output: Output::new(spec.output_max),
                now: Mutex::new(JobNow {
                    state: JobState::Running,
                    ended_at: None,
                    exit_code: None,
                    signal: None,
                    stopped_by: None,
                    stop_asked: None,
                    reason: None,
                    wakes: 0,
                    forwards: Vec::new(),
                    unforwarded: Vec::new(),
                    cgroup: hooks.cgroup_info(),
                    launcher_lost: false,
                    survivors: Vec::new(),
                    exits: Vec::new(),
                }),
                stopper: Mutex::new(Some(stream.stopper())),
                ended: watch::channel(false).0,
            });
            l.jobs.push_back(job.clone());
            // Ended jobs past the bound go, oldest first.
            let ended = l
                .jobs
                .iter()
                .filter(|j| j.state() != JobState::Running)
                .count();
            if ended > ENDED_KEPT {
                let mut drop_n = ended - ENDED_KEPT;
                l.jobs.retain(|j| {
                    if drop_n > 0 && j.state() != JobState::Running {
                        drop_n -= 1;
                        false
                    } else {
                        true
                    }
                });
            }
            job
        };
        self.write_record();
        let jobs = self.clone();
        let j = job.clone();
        tokio::spawn(async move {
            run::run(&jobs, &j, before, stream, re, hooks).await;
            jobs.write_record();
        });
        job
    }

    /// The jobs of `conversation` (every job when `None`), newest first, at most
    /// [`LIST_MAX`].
    pub fn infos(&self, conversation: Option<&str>) -> Vec<JobInfo> {
        self.list()
            .jobs
            .iter()
            .rev()
            .filter(|j| conversation.is_none() || j.conversation.as_deref() == conversation)
            .take(LIST_MAX)
            .map(|j| j.info())
            .collect()
    }

    /// The job `id` of `conversation`: `invalid` for an id that is not `j<N>`, `not_found`
    /// for one of no job of the conversation (or of another conversation).
    pub fn find(&self, conversation: Option<&str>, id: &str) -> Result<Arc<Job>, FindError> {
        if !valid_job_id(id) {
            return Err(FindError::NotAnId(id.to_owned()));
        }
        self.list()
            .jobs
            .iter()
            .rev()
            .find(|j| j.id == id && j.conversation.as_deref() == conversation)
            .cloned()
            .ok_or_else(|| match conversation {
                Some(c) => FindError::NotInConversation {
                    id: id.to_owned(),
                    conversation: c.to_owned(),
                },
                None => FindError::NotFound(id.to_owned()),
            })
    }

    /// Stops every running job as `by` and waits for them to end (at most [`STOP_WAIT`]);
    /// no job starts afterwards.
    pub async fn stop_all(&self, by: JobStopBy) {
        self.closing.store(true, Ordering::SeqCst);
        let running: Vec<Arc<Job>> = self
            .list()
            .jobs
            .iter()
            .filter(|j| j.state() == JobState::Running)
            .cloned()
            .collect();
        for j in &running {
            j.stop(by);
        }
        let all = futures_all(running.iter().map(|j| j.wait_ended()));
        let _ = tokio::time::timeout(STOP_WAIT, all).await;
        // Their ends are recorded before the service goes (the task of each job writes it
        // too, but may not run again once the service returns).
        self.write_record();
    }

    /// A new call id, the call movable until the guard drops (`refuse`: why it may not
    /// move, when it may not), and the requests to move it.
    pub fn register_call(
        self: &Arc<Self>,
        conversation: Option<String>,
        refuse: Option<String>,
    ) -> (CallGuard, mpsc::Receiver<MoveRequest>) {
        let n = self.next_call.fetch_add(1, Ordering::SeqCst) + 1;
        let call_id = format!("call-{n}");
        let (tx, rx) = mpsc::channel(1);
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).insert(
            call_id.clone(),
            Movable {
                conversation,
                refuse,
                tx,
            },
        );
        (
            CallGuard {
                jobs: self.clone(),
                call_id,
            },
            rx,
        )
    }

    /// Moves the running call `call_id` to a job: its id.
    pub async fn move_call(
        &self,
        conversation: Option<&str>,
        call_id: &str,
        max_minutes: f64,
    ) -> Result<String, MoveError> {
        let tx = {
            let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
            // A call of another conversation is not found: nothing a client sends moves
            // another conversation's call.
            let m = calls
                .get(call_id)
                .filter(|m| m.conversation.as_deref() == conversation)
                .ok_or_else(|| MoveError::NoCall(call_id.to_owned()))?;
            if let Some(why) = &m.refuse {
                return Err(MoveError::Refused(why.clone()));
            }
            m.tx.clone()
        };
        let (reply, rx) = oneshot::channel();
        tx.send(MoveRequest { max_minutes, reply })
            .await
            .map_err(|_| MoveError::Ended(call_id.to_owned()))?;
        rx.await.map_err(|_| MoveError::Ended(call_id.to_owned()))?
    }
}

/// How long a job ran, in seconds.
pub fn ran_secs(from_ms: u64, to_ms: u64) -> f64 {
    Duration::from_millis(to_ms.saturating_sub(from_ms)).as_secs_f64()
}

/// Waits for all of `futs`.
async fn futures_all<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
    for f in futs {
        f.await;
    }
}

pub use run::Hooks;
