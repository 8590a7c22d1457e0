//! Cgroups of jobs: where this process may make a cgroup for a job
//! ([`Cgroups::find`], once), a job's cgroup with its limits ([`Cgroups::create`]), the
//! way a new process joins it ([`JobCgroup::join_files`], written by `efr-launch` before it
//! makes anything) or a running tree is moved into it ([`JobCgroup::adopt_tree`]), what it
//! used ([`JobCgroup::usage`]), whether it hit its limits, and its end
//! ([`JobCgroup::remove`]: every process killed, the directories gone).
//!
//! A job's cgroup is `efr-sandbox-<pid>/<name>` under the service's own cgroup (the pid is
//! the service's, so two services never share a directory), in the one v2 hierarchy or in
//! each v1 hierarchy of `memory`, `pids` (and `cpuacct` when it can): nested under the
//! service's cgroup, it is bound by that cgroup's limits too. [`find`] says which and why
//! (the v2 "no internal processes" rule included). When none can be had, [`Off`] says why
//! ([`OffReason`]) and the job runs bounded by rlimits only (`docs/architecture.md`,
//! "Cgroups of jobs").
//!
//! Everything here is `Send + Sync` (plain paths): the service holds it across tasks.
//! The files read and written are the kernel's; the texts are parsed in [`parse`].

pub mod find;
pub mod parse;
pub mod procs;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use find::Hier;

/// The start of the name of a service's base cgroup (`efr-sandbox-<pid>`).
pub const BASE_PREFIX: &str = "efr-sandbox-";
/// The end of the name of the v2 leaf a service moves itself into
/// (`efr-sandbox-<pid>.service`).
pub const LEAF_SUFFIX: &str = ".service";
/// The longest job name.
pub const MAX_NAME: usize = 64;
/// How long [`JobCgroup::kill_all`] and [`JobCgroup::remove`] wait for the processes to be
/// gone.
const EMPTY_WAIT: Duration = Duration::from_secs(5);
/// How many scans [`JobCgroup::adopt_tree`] makes at most.
const ADOPT_ROUNDS: u32 = 32;

/// The limits of one job's cgroup (`None`: no limit of its own; the service's cgroup still
/// bounds it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Bytes of memory (v2 `memory.max`, with `memory.swap.max` 0; v1
    /// `memory.limit_in_bytes`, with `memory.memsw.limit_in_bytes` the same).
    pub memory_max: Option<u64>,
    /// Processes and threads (`pids.max`).
    pub pids_max: Option<u64>,
}

/// Why there are no job cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffReason {
    /// The config turned them off.
    Config,
    /// The controllers are in cgroup v2, but the service's cgroup is not this user's (not
    /// under a delegated subtree, or shared with other programs).
    NoDelegation,
    /// `memory` and `pids` are only in cgroup v1, which is not delegated to users.
    V1Only,
    /// Neither version offers both `memory` and `pids` here.
    NoControllers,
    /// Something failed while looking or setting up (the detail says what).
    Error,
}

impl OffReason {
    /// The wire's name (`no_delegation`).
    pub fn as_str(self) -> &'static str {
        match self {
            OffReason::Config => "config",
            OffReason::NoDelegation => "no_delegation",
            OffReason::V1Only => "v1_only",
            OffReason::NoControllers => "no_controllers",
            OffReason::Error => "error",
        }
    }
}

impl std::fmt::Display for OffReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// No job cgroups, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no cgroups for jobs ({reason}): {detail}")]
pub struct Off {
    /// The reason, as the wire names it.
    pub reason: OffReason,
    /// One lower-case line: the path and who owns it, what is missing.
    pub detail: String,
}

/// Why a job cgroup operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The job name is not usable as a cgroup name.
    #[error("job cgroup name {name:?}: {why}")]
    Name {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A cgroup of that name exists already (a job of the same name not yet removed).
    #[error("job cgroup {} exists already", path.display())]
    Exists {
        /// Its directory.
        path: PathBuf,
    },
    /// A file of the cgroup could not be made, opened, read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was done (`making`, `writing 100 to`).
        what: String,
        /// The path.
        path: PathBuf,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// The process to adopt is not running.
    #[error("process {pid} is not running")]
    NoProcess {
        /// Its pid.
        pid: u32,
    },
    /// The tree to adopt kept making processes outside the cgroup.
    #[error(
        "process {pid}'s tree kept forking: processes still outside {path} after {rounds} scans"
    )]
    Unbounded {
        /// The tree's root.
        pid: u32,
        /// The job cgroup.
        path: String,
        /// The scans made.
        rounds: u32,
    },
    /// Processes were left after the kill and the wait.
    #[error("job cgroup {path} still holds pids {left:?} after {}s", EMPTY_WAIT.as_secs())]
    NotEmpty {
        /// The job cgroup.
        path: String,
        /// The pids left.
        left: Vec<u32>,
    },
}

fn io(what: impl Into<String>, path: &Path, source: std::io::Error) -> CgroupError {
    CgroupError::Io {
        what: what.into(),
        path: path.to_path_buf(),
        source,
    }
}

/// Checks a job's name: 1 to [`MAX_NAME`] of `A-Z a-z 0-9 _ -` (no `/`, no `.`: never a
/// path, never `..`, never the name of a cgroup's own file such as `memory.max`).
pub fn check_name(name: &str) -> Result<(), CgroupError> {
    let bad = |why| {
        Err(CgroupError::Name {
            name: name.chars().take(MAX_NAME + 8).collect(),
            why,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_NAME {
        return bad("longer than 64 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return bad("only letters, digits, '_' and '-' may be used");
    }
    Ok(())
}

/// Where this process makes job cgroups (see [`find`] for how it is decided).
#[derive(Debug)]
pub struct Cgroups {
    hiers: Vec<Hier>,
    v2: bool,
    pid: u32,
}

impl Cgroups {
    /// Looks once at the mounts and this process's cgroups: where job cgroups can be made,
    /// or [`Off`] with the reason. On cgroup v2 this may move the service into a leaf of its
    /// own cgroup first ([`find`] says when and why).
    pub fn find() -> Result<Cgroups, Off> {
        let read = |p: &str| {
            std::fs::read_to_string(p).map_err(|e| Off {
                reason: OffReason::Error,
                detail: format!("reading {p}: {e}"),
            })
        };
        let mountinfo = read("/proc/self/mountinfo")?;
        let own = read("/proc/self/cgroup")?;
        let pid = std::process::id();
        match find::decide(&find::RealHost, &mountinfo, &own)? {
            find::Found::V1(hiers) => Ok(Cgroups {
                hiers,
                v2: false,
                pid,
            }),
            find::Found::V2 { hier, leaf } => {
                if let Some(procs) = leaf {
                    find::enter_leaf(&hier, pid, &procs).map_err(|e| Off {
                        reason: OffReason::Error,
                        detail: e.to_string(),
                    })?;
                }
                Ok(Cgroups {
                    hiers: vec![hier],
                    v2: true,
                    pid,
                })
            }
        }
    }

    /// Whether the job cgroups are v2 ones.
    pub fn is_v2(&self) -> bool {
        self.v2
    }

    /// Where the jobs go, for logs: each hierarchy's base directory.
    pub fn path(&self) -> String {
        self.hiers
            .iter()
            .map(|h| h.dir(&h.base_rel(self.pid)).display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Makes the base `efr-sandbox-<pid>` in `h` (there already is fine); in v2 passes
    /// `memory` and `pids` to its children.
    fn ensure_base(&self, h: &Hier) -> Result<PathBuf, CgroupError> {
        let base = h.dir(&h.base_rel(self.pid));
        match std::fs::create_dir(&base) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io("making", &base, e)),
        }
        if h.v2 {
            let control = base.join("cgroup.subtree_control");
            std::fs::write(&control, "+memory +pids")
                .map_err(|e| io("writing +memory +pids to", &control, e))?;
        }
        Ok(base)
    }

    /// Makes the job cgroup `name` with `limits`. Nothing is left behind on an error.
    pub fn create(&self, name: &str, limits: &CgroupLimits) -> Result<JobCgroup, CgroupError> {
        check_name(name)?;
        let mut job = JobCgroup {
            dirs: Vec::new(),
            bases: Vec::new(),
            v2: self.v2,
            removed: false,
        };
        for h in &self.hiers {
            let mut tries = 0;
            let base = loop {
                let base = self.ensure_base(h)?;
                let dir = base.join(name);
                match std::fs::create_dir(&dir) {
                    Ok(()) => break base,
                    // The base was removed by a job that ended just then: make it again.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => {
                        tries += 1;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Err(CgroupError::Exists { path: dir });
                    }
                    Err(e) => return Err(io("making", &dir, e)),
                }
            };
            job.dirs.push(JobDir {
                path: base.join(name),
                key: h.key.clone(),
                rel: find::child(&h.base_rel(self.pid), name),
                memory: h.memory,
                pids: h.pids,
                cpu: h.cpu,
            });
            job.bases.push(base);
        }
        job.set_limits(limits)?;
        Ok(job)
    }

    /// Removes what services that ended left (a directory `efr-sandbox-<pid>` or
    /// `efr-sandbox-<pid>.service` whose pid runs no more): the processes still in their
    /// job cgroups are killed, the directories removed. Best-effort: what cannot be removed
    /// stays (a pid that was reused looks alive and is kept).
    pub fn remove_stale(&self) {
        for h in &self.hiers {
            let Ok(rd) = std::fs::read_dir(h.own_dir()) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = parse::owner_pid(&name) else {
                    continue;
                };
                if pid == self.pid || Path::new(&format!("/proc/{pid}")).exists() {
                    continue;
                }
                if !name.ends_with(LEAF_SUFFIX) {
                    let base_rel = find::child(&h.own, &name);
                    if let Ok(jobs) = std::fs::read_dir(e.path()) {
                        for j in jobs.flatten() {
                            if !j.file_type().is_ok_and(|t| t.is_dir()) {
                                continue;
                            }
                            let jname = j.file_name().to_string_lossy().into_owned();
                            let mut job = JobCgroup {
                                dirs: vec![JobDir {
                                    path: j.path(),
                                    key: h.key.clone(),
                                    rel: find::child(&base_rel, &jname),
                                    memory: h.memory,
                                    pids: h.pids,
                                    cpu: h.cpu,
                                }],
                                bases: Vec::new(),
                                v2: h.v2,
                                removed: false,
                            };
                            let _ = job.teardown();
                        }
                    }
                }
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
}

impl Drop for Cgroups {
    /// The base directories go when empty (a job still there keeps its base).
    fn drop(&mut self) {
        for h in &self.hiers {
            let _ = std::fs::remove_dir(h.dir(&h.base_rel(self.pid)));
        }
    }
}

/// One directory of a job's cgroup (one per hierarchy in v1, the only one in v2).
#[derive(Debug)]
struct JobDir {
    /// The directory.
    path: PathBuf,
    /// The hierarchy's controllers as `/proc/<pid>/cgroup` names them (empty in v2).
    key: String,
    /// The cgroup path.
    rel: String,
    memory: bool,
    pids: bool,
    cpu: bool,
}

impl JobDir {
    fn procs(&self) -> Vec<u32> {
        std::fs::read_to_string(self.path.join("cgroup.procs"))
            .map(|t| parse::pids(&t))
            .unwrap_or_default()
    }

    /// Whether `/proc/<pid>/cgroup`'s lines put a process here.
    fn holds(&self, lines: &[parse::Membership]) -> bool {
        lines.iter().any(|l| {
            l.path == self.rel
                && if self.key.is_empty() {
                    l.is_v2()
                } else {
                    l.controllers == self.key
                }
        })
    }

    fn read(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(self.path.join(file)).ok()
    }
}

/// What a job used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Memory charged now (v2 `memory.current`, v1 `memory.usage_in_bytes`).
    pub memory_bytes: Option<u64>,
    /// The most memory charged at once (v2 `memory.peak`, from Linux 5.19; v1
    /// `memory.max_usage_in_bytes`).
    pub memory_peak: Option<u64>,
    /// CPU time, user and system, in microseconds (v2 `cpu.stat` `usage_usec`, v1
    /// `cpuacct.usage`).
    pub cpu_usec: Option<u64>,
}

/// One job's cgroup. Dropped, it is removed as [`JobCgroup::remove`] does (best-effort):
/// nothing is left behind.
#[derive(Debug)]
pub struct JobCgroup {
    dirs: Vec<JobDir>,
    /// The bases the directories are in (removed when the last job in them goes).
    bases: Vec<PathBuf>,
    v2: bool,
    removed: bool,
}

impl JobCgroup {
    fn set_limits(&self, l: &CgroupLimits) -> Result<(), CgroupError> {
        let write = |p: PathBuf, v: &str| {
            std::fs::write(&p, v).map_err(|e| io(format!("writing {v} to"), &p, e))
        };
        for d in &self.dirs {
            if d.memory {
                if self.v2 {
                    if let Some(m) = l.memory_max {
                        write(d.path.join("memory.max"), &m.to_string())?;
                        // Swap would let a job past its memory limit.
                        if d.path.join("memory.swap.max").exists() {
                            write(d.path.join("memory.swap.max"), "0")?;
                        }
                    }
                    // An OOM kill ends the whole job, not one process of it.
                    if d.path.join("memory.oom.group").exists() {
                        write(d.path.join("memory.oom.group"), "1")?;
                    }
                } else if let Some(m) = l.memory_max {
                    // memsw (memory + swap) may not be below the memory limit: memory first.
                    write(d.path.join("memory.limit_in_bytes"), &m.to_string())?;
                    if d.path.join("memory.memsw.limit_in_bytes").exists() {
                        write(d.path.join("memory.memsw.limit_in_bytes"), &m.to_string())?;
                    }
                }
            }
            if d.pids {
                if let Some(p) = l.pids_max {
                    write(d.path.join("pids.max"), &p.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// `cgroup.procs` of each directory, opened for writing: a new process that writes `0`
    /// to each is in the job (how `efr-launch --join-cgroup-fd` joins before it makes
    /// anything). Close-on-exec; the spawn places them.
    pub fn join_files(&self) -> Result<Vec<OwnedFd>, CgroupError> {
        self.dirs
            .iter()
            .map(|d| {
                let p = d.path.join("cgroup.procs");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map(OwnedFd::from)
                    .map_err(|e| io("opening", &p, e))
            })
            .collect()
    }

    /// Whether process `pid` is in this job (in every directory of it).
    pub fn holds(&self, pid: u32) -> bool {
        let Ok(t) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        let lines = parse::memberships(&t);
        self.dirs.iter().all(|d| d.holds(&lines))
    }

    /// Whether process `pid` is in any directory of this job.
    fn holds_any(&self, pid: u32) -> bool {
        let Ok(t) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        let lines = parse::memberships(&t);
        self.dirs.iter().any(|d| d.holds(&lines))
    }

    /// Moves the running process `pid` and all its descendants into the job: scans its
    /// tree and moves every process not yet in, until a scan finds none outside (at most
    /// 32 scans: a tree that forks faster is an error). Returns how many were moved. A
    /// descendant whose parent ended before a scan (handed to a reaper) is not found, and
    /// on v1 the memory a process used before it moved stays charged where it was.
    pub fn adopt_tree(&self, pid: u32) -> Result<usize, CgroupError> {
        let mut moved = std::collections::BTreeSet::new();
        for round in 0..ADOPT_ROUNDS {
            let tree = procs::tree(pid);
            if tree.is_empty() && round == 0 {
                return Err(CgroupError::NoProcess { pid });
            }
            let outside: Vec<u32> = tree.into_iter().filter(|&p| !self.holds(p)).collect();
            if outside.is_empty() {
                return Ok(moved.len());
            }
            for p in outside {
                for d in &self.dirs {
                    let f = d.path.join("cgroup.procs");
                    match std::fs::write(&f, p.to_string()) {
                        Ok(()) => {}
                        // It ended meanwhile.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                        Err(e) => return Err(io(format!("moving pid {p} into"), &f, e)),
                    }
                }
                moved.insert(p);
            }
        }
        Err(CgroupError::Unbounded {
            pid,
            path: self.path(),
            rounds: ADOPT_ROUNDS,
        })
    }

    /// What the job used so far (`None` where this kernel or hierarchy does not say).
    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for d in &self.dirs {
            if d.memory {
                if self.v2 {
                    u.memory_bytes = d.read("memory.current").and_then(|t| parse::number(&t));
                    u.memory_peak = d.read("memory.peak").and_then(|t| parse::number(&t));
                } else {
                    u.memory_bytes = d
                        .read("memory.usage_in_bytes")
                        .and_then(|t| parse::number(&t));
                    u.memory_peak = d
                        .read("memory.max_usage_in_bytes")
                        .and_then(|t| parse::number(&t));
                }
            }
            if d.cpu {
                u.cpu_usec = if self.v2 {
                    d.read("cpu.stat")
                        .and_then(|t| parse::keyed(&t, "usage_usec"))
                } else {
                    d.read("cpuacct.usage")
                        .and_then(|t| parse::number(&t))
                        .map(|ns| ns / 1000)
                };
            }
        }
        u
    }

    /// Whether the kernel's OOM killer killed a process of the job (v2 `memory.events`
    /// `oom_kill`; v1 `memory.oom_control` `oom_kill`, or on a kernel before 4.13 without
    /// it, `memory.failcnt`: the limit was reached at least once).
    pub fn memory_limit_hit(&self) -> bool {
        self.dirs.iter().filter(|d| d.memory).any(|d| {
            if self.v2 {
                d.read("memory.events")
                    .and_then(|t| parse::keyed(&t, "oom_kill"))
                    .is_some_and(|n| n > 0)
            } else {
                match d
                    .read("memory.oom_control")
                    .and_then(|t| parse::keyed(&t, "oom_kill"))
                {
                    Some(n) => n > 0,
                    None => d
                        .read("memory.failcnt")
                        .and_then(|t| parse::number(&t))
                        .is_some_and(|n| n > 0),
                }
            }
        })
    }

    /// How many times a fork or clone in the job was refused at `pids.max` (`pids.events`
    /// `max`).
    pub fn pids_limit_hits(&self) -> u64 {
        self.dirs
            .iter()
            .filter(|d| d.pids)
            .filter_map(|d| d.read("pids.events").and_then(|t| parse::keyed(&t, "max")))
            .sum()
    }

    /// The processes in the job (every directory's `cgroup.procs`), sorted.
    pub fn pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.dirs.iter().flat_map(JobDir::procs).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Sends SIGKILL to every process of the job and waits (5 s at most) until none is
    /// left: v2 through `cgroup.kill` when the kernel has it (5.14); else in rounds, each
    /// process through a pidfd taken before it is checked to be still in the job (a
    /// recycled pid is never signalled), until a round finds none (new ones forked during a
    /// round are killed in the next; `pids.max` bounds them).
    pub fn kill_all(&self) {
        let deadline = Instant::now() + EMPTY_WAIT;
        let kill_file = self
            .dirs
            .first()
            .map(|d| d.path.join("cgroup.kill"))
            .filter(|p| self.v2 && p.exists());
        loop {
            let left = self.pids();
            if left.is_empty() || Instant::now() > deadline {
                return;
            }
            match &kill_file {
                Some(k) => {
                    let _ = std::fs::write(k, "1");
                }
                None => {
                    for p in left {
                        let Ok(fd) = crate::sys::pidfd_open(p) else {
                            continue;
                        };
                        if self.holds_any(p) {
                            let _ = crate::sys::pidfd_send_signal(&fd, libc::SIGKILL);
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The end of the job: every process killed ([`JobCgroup::kill_all`]), each directory
    /// removed, and the service's base with it when it is empty.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), CgroupError> {
        self.removed = true;
        self.kill_all();
        let left = self.pids();
        if !left.is_empty() {
            return Err(CgroupError::NotEmpty {
                path: self.path(),
                left,
            });
        }
        let mut first = None;
        for d in &self.dirs {
            // A process just killed may hold its cgroup a moment after it left cgroup.procs.
            let deadline = Instant::now() + Duration::from_secs(1);
            loop {
                match std::fs::remove_dir(&d.path) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => {
                        first.get_or_insert_with(|| io("removing", &d.path, e));
                        break;
                    }
                }
            }
        }
        for b in &self.bases {
            // Not empty while another job is in it: it stays.
            let _ = std::fs::remove_dir(b);
        }
        first.map_or(Ok(()), Err)
    }

    /// The job's cgroups, for logs: `memory:/a/efr-sandbox-1/job, pids:/efr-sandbox-1/job`
    /// on v1 (as `/proc/<pid>/cgroup` names them), the directory on v2.
    pub fn path(&self) -> String {
        if self.v2 {
            return self
                .dirs
                .first()
                .map(|d| d.path.display().to_string())
                .unwrap_or_default();
        }
        self.dirs
            .iter()
            .map(|d| format!("{}:{}", d.key, d.rel))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Drop for JobCgroup {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.teardown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["j1", "job-3f2a_B", &"x".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("..", "only letters"),
            ("a/b", "only letters"),
            ("memory.max", "only letters"),
            ("a\nb", "only letters"),
            (&"x".repeat(65), "longer than 64"),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.to_string().contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn off_reasons_are_snake_case() {
        for r in [
            OffReason::Config,
            OffReason::NoDelegation,
            OffReason::V1Only,
            OffReason::NoControllers,
            OffReason::Error,
        ] {
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.as_str())
            );
        }
        let off = Off {
            reason: OffReason::V1Only,
            detail: "x".into(),
        };
        assert_eq!(off.to_string(), "no cgroups for jobs (v1_only): x");
    }

    #[test]
    fn shared_across_tasks() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Cgroups>();
        send_sync::<JobCgroup>();
        send_sync::<Off>();
        send_sync::<CgroupError>();
    }
}
