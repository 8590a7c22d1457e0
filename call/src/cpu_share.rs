//! A call that keeps a processor busy yields to the calls that do not, and to the service.
//!
//! The kernel shares the processors fairly between sessions (autogroups) or between the
//! threads of one cgroup: a neighbour call that keeps both processors of a two-processor
//! machine busy leaves a short call two thirds of one, and the short call takes 1.5 times as
//! long (twice at p99, measured in `docs/benchmarks.md`), with no proxy involved. Fair is
//! not what a user wants here: the quick `git status` of one conversation should not wait on
//! another conversation's build.
//!
//! So the service samples the processor time of every running call (its launcher's tree:
//! each process's own time and what its reaped children used) every [`SAMPLE`]. A call that
//! used more than [`BUSY`] of it in the last [`WINDOW`] is demoted for the rest of its life:
//! each of its threads at nice [`DEMOTED_NICE`], and each of its sessions' autogroups too
//! (where the kernel groups by session, the group's nice is what weighs). A call that never
//! keeps a processor busy for that long is never touched. Alone on the machine a demoted
//! call loses nothing: a nice value only weighs when threads wait for a processor.
//!
//! Lasting on purpose: an unprivileged service cannot lower a nice value again, and a call
//! that was busy for a second is likely to stay busy (a build, a test suite). A line that
//! starts new sessions (`setsid`) gets a new autogroup at nice 0: the next sample demotes it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often the running calls are sampled.
pub const SAMPLE: Duration = Duration::from_millis(250);
/// The span over which a call's processor time is summed.
pub const WINDOW: Duration = Duration::from_secs(1);
/// Processor time within [`WINDOW`] above which a call is demoted: it kept about one
/// processor busy the whole time (a short call's few hundred milliseconds never get there).
pub const BUSY: Duration = Duration::from_millis(900);
/// The nice value of a demoted call's threads and autogroups: a tenth of the weight of a
/// call at nice 0 (the kernel's weight table: 1024 at 0, 110 at 10).
pub const DEMOTED_NICE: i32 = 10;
/// At most this many processes of one call are visited per sample.
const MAX_TREE: usize = 4096;
/// At most this many autogroups of one call are remembered as done (a line starting
/// sessions without end cannot grow the service's memory: past it the list starts again,
/// and writing an autogroup's nice twice is harmless).
const MAX_GROUPS: usize = 4096;

/// A running call's launcher, watched until this is dropped. Drop it before the launcher
/// is reaped: its pid is then free for another process.
#[derive(Debug)]
pub struct Watch {
    id: u64,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let s = shares();
        lock(&s.calls).remove(&self.id);
    }
}

/// Starts watching the call whose launcher is `root` (a child of this process).
pub fn watch(root: u32) -> Watch {
    watch_with(root, BUSY)
}

/// [`watch`] with another threshold than [`BUSY`] (tests: a loaded machine may not give a
/// test's processes a whole processor).
fn watch_with(root: u32, busy: Duration) -> Watch {
    let s = shares();
    let id = s.next.fetch_add(1, Ordering::Relaxed);
    lock(&s.calls).insert(id, Watched::new(root, busy));
    s.wake.notify_one();
    s.sampler.get_or_init(|| {
        // Best effort: without the thread no call is demoted, and nothing else changes.
        std::thread::Builder::new()
            .name("efr-cpu-share".into())
            .spawn(sample_forever)
            .is_ok()
    });
    Watch { id }
}

/// Whether the call watched by `w` has been demoted (for tests and the summary).
pub fn demoted(w: &Watch) -> bool {
    lock(&shares().calls).get(&w.id).is_some_and(|c| c.demoted)
}

struct Shares {
    calls: Mutex<HashMap<u64, Watched>>,
    next: AtomicU64,
    wake: Condvar,
    sampler: OnceLock<bool>,
}

fn shares() -> &'static Shares {
    static S: OnceLock<Shares> = OnceLock::new();
    S.get_or_init(|| Shares {
        calls: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
        wake: Condvar::new(),
        sampler: OnceLock::new(),
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One watched call: its launcher, its processor time at the last samples, and whether it
/// was demoted (and which autogroups are done: the kernel takes one autogroup change per
/// tenth of a second from an unprivileged process).
struct Watched {
    root: u32,
    /// Processor time within [`WINDOW`] above which the call is demoted ([`BUSY`]).
    busy: Duration,
    samples: VecDeque<(Instant, Duration)>,
    demoted: bool,
    groups_done: HashSet<String>,
}

impl Watched {
    fn new(root: u32, busy: Duration) -> Watched {
        Watched {
            root,
            busy,
            samples: VecDeque::new(),
            demoted: false,
            groups_done: HashSet::new(),
        }
    }

    /// Takes one sample; demotes the call when it is busy (and keeps demoting what it
    /// starts once it is).
    fn sample(&mut self, now: Instant, table: &Table) {
        let tree = table.tree(self.root);
        let used: Duration = tree.iter().filter_map(|p| table.cpu.get(p)).sum();
        self.samples.push_back((now, used));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > WINDOW)
        {
            self.samples.pop_front();
        }
        if !self.demoted {
            self.demoted = busy(&self.samples, self.busy);
        }
        if self.demoted {
            for &p in &tree {
                demote(p, &mut self.groups_done);
            }
        }
    }
}

/// Whether the samples (oldest first, within [`WINDOW`]) show more than `limit` used.
fn busy(samples: &VecDeque<(Instant, Duration)>, limit: Duration) -> bool {
    match (samples.front(), samples.back()) {
        (Some((_, first)), Some((_, last))) => last.saturating_sub(*first) > limit,
        _ => false,
    }
}

fn sample_forever() {
    let s = shares();
    loop {
        {
            let mut calls = lock(&s.calls);
            while calls.is_empty() {
                calls = s.wake.wait(calls).unwrap_or_else(|e| e.into_inner());
            }
        }
        std::thread::sleep(SAMPLE);
        let table = Table::read();
        let now = Instant::now();
        let mut calls = lock(&s.calls);
        for c in calls.values_mut() {
            c.sample(now, &table);
        }
    }
}

/// Every process of the machine as `/proc` shows it: its parent and its processor time.
/// One read of each `stat` per sample for all calls (the kernel's per-thread `children`
/// lists are not built into every kernel).
#[derive(Default)]
struct Table {
    children: HashMap<u32, Vec<u32>>,
    cpu: HashMap<u32, Duration>,
}

impl Table {
    fn read() -> Table {
        let mut t = Table::default();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return t;
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some((ppid, used)) = parent_and_cpu(&text) else {
                continue;
            };
            t.children.entry(ppid).or_default().push(pid);
            t.cpu.insert(pid, used);
        }
        t
    }

    /// The processes of the tree below `root` (itself first); at most [`MAX_TREE`].
    fn tree(&self, root: u32) -> Vec<u32> {
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() && out.len() < MAX_TREE {
            if let Some(c) = self.children.get(&out[i]) {
                out.extend(c);
            }
            i += 1;
        }
        out.truncate(MAX_TREE);
        out
    }
}

/// The thread ids of `pid`.
fn tasks(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The fields of a `stat` file after the command name (the first is the state, field 3).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let (_, rest) = text.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// A process's parent (field 4 of its `stat`) and processor time: its own (utime, stime)
/// and its reaped children's (cutime, cstime), so that a child that ended within the window
/// still counts.
fn parent_and_cpu(text: &str) -> Option<(u32, Duration)> {
    let f = stat_fields(text)?;
    let ppid = f.get(1)?.parse().ok()?;
    let ticks: u64 = f
        .get(11..15)?
        .iter()
        .filter_map(|v| v.parse::<u64>().ok())
        .sum();
    Some((ppid, ticks_to_duration(ticks)))
}

fn ticks_to_duration(ticks: u64) -> Duration {
    let hz = crate::sys::clock_ticks_per_second().max(1);
    Duration::from_micros(ticks.saturating_mul(1_000_000) / hz)
}

/// The nice value of a thread (field 19 of its `stat`).
fn nice_of(pid: u32, tid: u32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    stat_fields(&text)?.get(16)?.parse().ok()
}

/// Demotes every thread of `pid` and its autogroup (once per autogroup).
fn demote(pid: u32, groups_done: &mut HashSet<String>) {
    for tid in tasks(pid) {
        if nice_of(pid, tid).is_some_and(|n| n < DEMOTED_NICE) {
            // Best effort: a thread that ended meanwhile, or one of another user.
            let _ = crate::sys::set_nice(tid, DEMOTED_NICE);
        }
    }
    demote_group(pid, groups_done);
}

/// Sets the nice value of `pid`'s autogroup (`/proc/PID/autogroup` reads `/autogroup-N nice
/// K`); nothing where the kernel has no autogroups or does not group by session.
fn demote_group(pid: u32, groups_done: &mut HashSet<String>) {
    let path = format!("/proc/{pid}/autogroup");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return;
    };
    let Some((group, nice)) = parse_autogroup(&text) else {
        return;
    };
    let own = own_group();
    if nice >= DEMOTED_NICE || groups_done.contains(group) || own.as_deref() == Some(group) {
        return;
    }
    // EAGAIN (one change per tenth of a second): the next sample tries again.
    if std::fs::write(&path, DEMOTED_NICE.to_string()).is_ok() {
        if groups_done.len() >= MAX_GROUPS {
            groups_done.clear();
        }
        groups_done.insert(group.to_string());
    }
}

/// The service's own autogroup, never demoted: a process of a call that is still in it
/// (a launcher leads a session of its own from its start) would otherwise slow the RPC and
/// every other call.
fn own_group() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/autogroup").ok()?;
    parse_autogroup(&text).map(|(g, _)| g.to_string())
}

/// `/autogroup-N nice K` as (`/autogroup-N`, K).
fn parse_autogroup(text: &str) -> Option<(&str, i32)> {
    let mut w = text.split_whitespace();
    let group = w.next()?;
    (w.next()? == "nice").then_some(())?;
    Some((group, w.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_name_with_spaces_and_parens() {
        let text = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 2 1 20 10 1 0 5 0";
        let f = stat_fields(text).expect("fields");
        assert_eq!(f[0], "S");
        assert_eq!(&f[11..15], &["7", "3", "2", "1"]);
        assert_eq!(f[16], "10");
        let (ppid, used) = parent_and_cpu(text).expect("parent and time");
        assert_eq!(ppid, 1);
        let hz = crate::sys::clock_ticks_per_second();
        assert_eq!(used, Duration::from_micros(13 * 1_000_000 / hz));
    }

    #[test]
    fn autogroup_lines() {
        assert_eq!(
            parse_autogroup("/autogroup-167003 nice 0\n"),
            Some(("/autogroup-167003", 0))
        );
        assert_eq!(
            parse_autogroup("/autogroup-1 nice -5"),
            Some(("/autogroup-1", -5))
        );
        assert_eq!(parse_autogroup("/autogroup-1 weight 5"), None);
        assert_eq!(parse_autogroup(""), None);
    }

    #[test]
    fn busy_is_more_than_the_threshold_within_the_window() {
        let t0 = Instant::now();
        let mut s = VecDeque::new();
        s.push_back((t0, Duration::from_millis(100)));
        s.push_back((t0 + SAMPLE, Duration::from_millis(600)));
        assert!(!busy(&s, BUSY));
        s.push_back((t0 + SAMPLE * 2, Duration::from_millis(1100)));
        assert!(busy(&s, BUSY));
        assert!(!busy(&VecDeque::new(), BUSY));
    }

    /// A real busy tree is demoted, threads and all, by the sampler thread, and a quiet one
    /// is not. The threshold is a tenth of a processor: a loaded machine may give the
    /// test's loops less than a whole one.
    #[test]
    fn a_busy_tree_is_demoted_and_a_quiet_one_is_not() {
        // In a session of its own (setsid(1) execs the shell in place: it is not a group
        // leader), as a launcher is: the demotion of its autogroup is not the test's.
        let mut spin = std::process::Command::new("setsid")
            .args([
                "sh",
                "-c",
                "while :; do :; done & while :; do :; done & while :; do :; done & wait",
            ])
            .spawn()
            .expect("setsid sh");
        let mut quiet = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let own_before = std::fs::read_to_string("/proc/self/autogroup").ok();
        let tenth = Duration::from_millis(100);
        let (ws, wq) = (watch_with(spin.id(), tenth), watch_with(quiet.id(), tenth));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !demoted(&ws) && Instant::now() < deadline {
            std::thread::sleep(SAMPLE);
        }
        // One more sample: the demotion reaches every process of the tree.
        std::thread::sleep(SAMPLE * 2);
        let spun = Table::read().tree(spin.id());
        let nices: Vec<Option<i32>> = spun
            .iter()
            .flat_map(|&p| tasks(p).into_iter().map(move |t| nice_of(p, t)))
            .collect();
        let quiet_nice = nice_of(quiet.id(), quiet.id());
        // The loops too, not only their shell.
        let pgid = nix::unistd::Pid::from_raw(i32::try_from(spin.id()).expect("pid"));
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = quiet.kill();
        let _ = spin.wait();
        let _ = quiet.wait();
        assert!(
            demoted(&ws),
            "a tree keeping the processors busy was not demoted"
        );
        assert!(!demoted(&wq), "a sleeping process was demoted");
        assert_eq!(spun.len(), 4, "the shell and its three loops: {spun:?}");
        assert!(
            nices.iter().all(|n| *n == Some(DEMOTED_NICE)),
            "every thread of the busy tree at nice {DEMOTED_NICE}: {nices:?}"
        );
        assert_eq!(quiet_nice, Some(0));
        assert_eq!(
            std::fs::read_to_string("/proc/self/autogroup").ok(),
            own_before,
            "the test's own session was demoted"
        );
    }
}
