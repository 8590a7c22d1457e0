//! The task that owns a job's call: it keeps the call's output (bounded), matches its
//! watch, stops it at its time limit, and records its end (`job_ended`).

use std::sync::Arc;

use base64::Engine as _;
use efr_call::{CallStream, Event};
use efr_sandbox_wire::job::{JobCgroupInfo, JobEventKind, JobState, JobStopBy};
use efr_sandbox_wire::{Finish, LaunchItem, OutputData};

use super::{EXITS_KEPT, Job, Jobs, TAIL_MAX, now_ms, ran_secs};

/// The longest line a watch matches (a longer line is matched on its start) and the most
/// of it a `job_watch_matched` event carries.
const WATCH_LINE_MAX: usize = 1000;

/// What a job has besides its call: its cgroup (or why none).
#[derive(Debug, Default)]
pub struct Hooks {
    /// The job's cgroup, or why it has none (`None`: not asked, as for a test).
    pub cgroup: Option<Result<crate::cgroup::JobCgroup, super::cgroup::Off>>,
    /// The job's limits (for its `cgroup` member).
    pub memory_max: Option<u64>,
    /// The job's process limit.
    pub pids_max: Option<u64>,
    /// The forwards of its listeners, started once it runs.
    pub forwards: Option<super::forwards::Plan>,
    /// The after-the-call checks, run while it lives (`None`: none, as for a test).
    pub checks: Option<super::checks::Checks>,
}

impl Hooks {
    /// The `cgroup` member of the job's info now.
    pub fn cgroup_info(&self) -> Option<JobCgroupInfo> {
        match self.cgroup.as_ref()? {
            Ok(cg) => {
                let u = cg.usage();
                Some(JobCgroupInfo {
                    memory_bytes: u.memory_bytes,
                    cpu_usec: u.cpu_usec,
                    memory_max: self.memory_max,
                    pids_max: self.pids_max,
                    ..Default::default()
                })
            }
            Err(off) => Some(JobCgroupInfo {
                off: Some(off.reason),
                off_detail: Some(off.detail.clone()),
                pids_max: self.pids_max,
                ..Default::default()
            }),
        }
    }
}

/// The bytes of an `output` item.
fn bytes_of(data: OutputData) -> Vec<u8> {
    match data {
        OutputData::Data(s) => s.into_bytes(),
        OutputData::DataB64(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .unwrap_or_default(),
    }
}

/// Matches the job's output, line by line, against its watch.
struct Watcher {
    re: regex::Regex,
    left: u32,
    partial: Vec<u8>,
}

impl Watcher {
    /// The lines of `bytes` (with what came before) that match, while wakes are left.
    fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut hits = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                self.line_done(&mut hits);
            } else if self.partial.len() < WATCH_LINE_MAX {
                self.partial.push(b);
            }
        }
        hits
    }

    fn line_done(&mut self, hits: &mut Vec<String>) {
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        if self.left > 0 && self.re.is_match(&line) {
            self.left -= 1;
            hits.push(line);
        }
    }
}

/// The after-the-call checks of a job while it lives: a pass every
/// [`super::checks::EVERY`], one at a time, on the blocking pool.
struct Live {
    checks: Option<Arc<super::checks::Checks>>,
    every: tokio::time::Interval,
    pass: Option<tokio::task::JoinHandle<super::checks::Pass>>,
}

impl Live {
    fn new(checks: Option<super::checks::Checks>) -> Self {
        let mut every = tokio::time::interval(super::checks::EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Live {
            checks: checks.map(Arc::new),
            every,
            pass: None,
        }
    }

    /// The next pass that ends (pending forever without checks).
    async fn next(&mut self) -> super::checks::Pass {
        let Some(c) = self.checks.clone() else {
            return std::future::pending().await;
        };
        loop {
            match self.pass.as_mut() {
                Some(p) => {
                    let lines = p.await.unwrap_or_default();
                    self.pass = None;
                    return lines;
                }
                None => {
                    self.every.tick().await;
                    let c = c.clone();
                    self.pass = Some(tokio::task::spawn_blocking(move || c.pass()));
                }
            }
        }
    }

    /// Records what a pass did, as a `job_guarded` event.
    fn report(&self, jobs: &Arc<Jobs>, job: &Arc<Job>, pass: super::checks::Pass) {
        if pass.quarantined.is_empty() && pass.index_flags.is_empty() {
            return;
        }
        jobs.events.emit(
            job.conversation.as_deref(),
            &job.id,
            JobEventKind::JobGuarded {
                quarantined: pass.quarantined,
                index_flags: pass.index_flags,
            },
        );
    }
}

/// Runs `job` to its end: the items the call gave `before` the job took it, then its
/// stream's.
pub(super) async fn run(
    jobs: &Arc<Jobs>,
    job: &Arc<Job>,
    before: Vec<LaunchItem>,
    mut stream: CallStream,
    re: Option<regex::Regex>,
    hooks: Hooks,
) {
    let mut watcher = re.map(|re| Watcher {
        re,
        left: job.watch.as_ref().map_or(0, |w| w.max_wakes),
        partial: Vec::new(),
    });
    for item in before {
        take_item(jobs, job, watcher.as_mut(), item);
    }
    let forwards = match hooks.forwards.as_ref() {
        Some(p) => super::forwards::start(jobs, job, p, stream.launcher_pid()).await,
        None => None,
    };
    let deadline = tokio::time::Instant::now() + job.max_for;
    let mut timed_out = false;
    let mut usage = tokio::time::interval(std::time::Duration::from_secs(1));
    let mut checks = Live::new(hooks.checks.clone());
    let fin = loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Some(Event::Item(item)) => take_item(jobs, job, watcher.as_mut(), item),
                Some(Event::End(fin)) => break Some(fin),
                None => break None,
            },
            () = tokio::time::sleep_until(deadline), if !timed_out => {
                timed_out = true;
                job.stop(JobStopBy::TimeLimit);
            }
            pass = checks.next() => checks.report(jobs, job, pass),
            _ = usage.tick() => {
                if let Some(info) = hooks.cgroup_info() {
                    job.lock().cgroup = Some(info);
                }
                // On cgroup v1 the OOM killer takes one process: the job ends whole.
                if let Some(Ok(cg)) = hooks.cgroup.as_ref() {
                    if cg.memory_limit_hit() {
                        cg.kill_all();
                    }
                }
            }
        }
    };
    if let Some(f) = forwards {
        f.stop().await;
    }
    if let Some(w) = watcher.as_mut() {
        if !w.partial.is_empty() {
            let mut hits = Vec::new();
            w.line_done(&mut hits);
            woken(jobs, job, hits, w.left);
        }
    }
    end(jobs, job, fin.map(|f| *f), hooks).await;
}

/// Counts the watch's matched `lines` as wakes and sends a `job_watch_matched` for each.
fn woken(jobs: &Arc<Jobs>, job: &Arc<Job>, lines: Vec<String>, wakes_left: u32) {
    for line in lines {
        job.lock().wakes += 1;
        jobs.events.emit(
            job.conversation.as_deref(),
            &job.id,
            JobEventKind::JobWatchMatched { line, wakes_left },
        );
    }
}

/// Keeps one item of the job's call: its output (and the watch's matches in it), its exit
/// records up to the bound.
fn take_item(jobs: &Arc<Jobs>, job: &Arc<Job>, watcher: Option<&mut Watcher>, item: LaunchItem) {
    match item {
        LaunchItem::Output { stream: s, data } => {
            let bytes = bytes_of(data);
            job.output.push(s, &bytes);
            if let Some(w) = watcher {
                let hits = w.feed(&bytes);
                woken(jobs, job, hits, w.left);
            }
        }
        LaunchItem::Exit { record } => {
            let mut n = job.lock();
            if n.exits.len() < EXITS_KEPT {
                n.exits.push(*record);
            }
        }
        _ => {}
    }
}

/// Records the job's end from its call's finish (`None`: the call's task ended without
/// one) and sends `job_ended`.
async fn end(jobs: &Arc<Jobs>, job: &Arc<Job>, fin: Option<Finish>, hooks: Hooks) {
    let (memory_hit, survivors, peak) = match hooks.cgroup.as_ref() {
        Some(Ok(cg)) => {
            let left = cg.pids();
            let hit = cg.memory_limit_hit();
            let u = cg.usage();
            (
                hit,
                left,
                Some((u.memory_peak.or(u.memory_bytes), u.cpu_usec)),
            )
        }
        _ => (false, Vec::new(), None),
    };
    let ended_at = now_ms();
    let event = {
        let mut n = job.lock();
        let code = fin.as_ref().and_then(|f| f.code);
        let signal = fin.as_ref().and_then(|f| f.signal);
        let setup_error = fin
            .as_ref()
            .and_then(|f| f.sandbox_summary.setup_error.clone());
        let lost = code.is_none() && signal.is_none();
        n.exit_code = code;
        n.signal = signal;
        n.ended_at = Some(ended_at);
        match n.stop_asked {
            Some(JobStopBy::TimeLimit) => {
                n.state = JobState::TimedOut;
                n.stopped_by = Some(JobStopBy::TimeLimit);
            }
            Some(by) => {
                n.state = JobState::Stopped;
                n.stopped_by = Some(by);
            }
            None if memory_hit => {
                n.state = JobState::Failed;
                n.reason = Some(match hooks.memory_max {
                    Some(m) => {
                        format!("the job reached its memory limit ({m} bytes, jobs.memory_max)")
                    }
                    None => "the job reached its memory limit".into(),
                });
            }
            None if lost => {
                n.state = JobState::Failed;
                n.launcher_lost = true;
                n.survivors = survivors.clone();
                n.reason = Some(setup_error.unwrap_or_else(|| {
                    "the job's launcher ended without reporting the line's end".into()
                }));
            }
            None => n.state = JobState::Exited,
        }
        if let Some((mem, cpu)) = peak {
            let info = n.cgroup.get_or_insert_with(Default::default);
            info.memory_bytes = mem.or(info.memory_bytes);
            info.cpu_usec = cpu.or(info.cpu_usec);
        }
        if let Some(f) = &fin {
            for e in &f.exits {
                if n.exits.len() < EXITS_KEPT && !n.exits.contains(e) {
                    n.exits.push(e.clone());
                }
            }
        }
        JobEventKind::JobEnded {
            state: n.state,
            exit_code: n.exit_code,
            stopped_by: n.stopped_by,
            reason: n.reason.clone(),
            output_bytes: job.output.total(),
            ran_secs: ran_secs(job.started_at, ended_at),
            tail: job.output.tail(TAIL_MAX),
            output_truncated: job.output.truncated(),
            launcher_lost: n.launcher_lost,
            survivors: n.survivors.clone(),
            exits: n.exits.clone(),
        }
    };
    // What is left of the tree goes with the cgroup.
    if let Some(Ok(cg)) = hooks.cgroup {
        let removed = efr_call::launch::off_runtime(move || cg.remove()).await;
        if let Ok(Err(e)) = removed {
            eprintln!("efr-sandbox: {e}");
        }
    }
    job.output.close();
    jobs.events
        .emit(job.conversation.as_deref(), &job.id, event);
    job.ended.send_replace(true);
}
