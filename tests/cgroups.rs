//! The cgroups of jobs (`efr_jobs::cgroup`) on this machine's kernel, as root and
//! as the CI user.
//!
//! As root a job cgroup must be had (`EFR_SANDBOX_MUST_WORK`): a fork bomb stops at
//! `pids.max`, a memory hog is OOM-killed and reported, the CPU time is counted, a running
//! tree is adopted, a call through `efr-launch` runs in the job's cgroup, what a dead
//! service left is removed, and nothing is left behind. As a user without a delegated
//! cgroup (the CI user on a host whose memory and pids controllers are only in cgroup v1,
//! or without a systemd user manager), `Cgroups::find` is `off` with the reason the machine
//! gives, computed here from the mounts and `/proc/self/cgroup`; the kernel tests then
//! assert that answer (the documented fallback: rlimits) instead.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use efr_jobs::cgroup::{CgroupLimits, Cgroups, JobCgroup, OffReason};
use efr_launcher::api::{Io, SpawnOpts};

fn euid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// What `Cgroups::find` should say here for a user that is not root, from the mounts and
/// this process's cgroups (an independent reading: controllers offered to the v2 cgroup
/// and whether its directory is this user's; else whether v1 has memory and pids).
fn expected_off() -> OffReason {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mount_of = |fstype: &str, opt: Option<&str>| -> Option<String> {
        mounts.lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mut p = post.split_whitespace();
            let (fs, _, opts) = (p.next()?, p.next()?, p.next().unwrap_or(""));
            (fs == fstype && opt.is_none_or(|o| opts.split(',').any(|x| x == o)))
                .then(|| pre.split_whitespace().nth(4).unwrap().to_string())
        })
    };
    let v2_dir = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .and_then(|p| mount_of("cgroup2", None).map(|m| format!("{m}{}", p.trim_end_matches('/'))));
    if let Some(d) = v2_dir {
        let offered =
            std::fs::read_to_string(format!("{d}/cgroup.controllers")).unwrap_or_default();
        let words: Vec<&str> = offered.split_whitespace().collect();
        if words.contains(&"memory") && words.contains(&"pids") {
            return OffReason::NoDelegation;
        }
    }
    if mount_of("cgroup", Some("memory")).is_some() && mount_of("cgroup", Some("pids")).is_some() {
        OffReason::V1Only
    } else {
        OffReason::NoControllers
    }
}

/// The job cgroups of this process: `Some` as root (must work), `None` for a user without
/// them, after checking that the answer is the machine's.
fn cgroups() -> Option<Cgroups> {
    match Cgroups::find() {
        Ok(c) if euid() == 0 => Some(c),
        Ok(c) => {
            // A user with a delegated v2 subtree (a systemd user manager) has them too.
            assert!(c.is_v2(), "a user got v1 cgroups: {}", c.path());
            Some(c)
        }
        Err(off) if euid() == 0 => {
            common::skip(&format!("root has no job cgroups: {off}"));
            None
        }
        Err(off) => {
            eprintln!("{off}");
            assert_eq!(off.reason, expected_off(), "{off}");
            assert!(
                !off.detail.is_empty() && !off.detail.contains('\n'),
                "one line of detail: {off:?}"
            );
            None
        }
    }
}

/// The directories of a job's cgroup, from `JobCgroup::path` and the mounts: `controller
/// -> dir` (v2: one entry, "").
fn dirs_of(job: &JobCgroup) -> Vec<(String, PathBuf)> {
    let p = job.path();
    if p.starts_with('/') {
        return vec![(String::new(), PathBuf::from(p))];
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    p.split(", ")
        .map(|e| {
            let (ctl, rel) = e.split_once(':').unwrap();
            let point = mounts
                .lines()
                .find_map(|l| {
                    let (pre, post) = l.split_once(" - ")?;
                    let mut f = post.split_whitespace();
                    let (fs, _, opts) = (f.next()?, f.next()?, f.next()?);
                    let mut want: Vec<&str> = ctl.split(',').collect();
                    let mut have: Vec<&str> =
                        opts.split(',').filter(|o| want.contains(o)).collect();
                    want.sort_unstable();
                    have.sort_unstable();
                    (fs == "cgroup" && have == want)
                        .then(|| pre.split_whitespace().nth(4).unwrap().to_string())
                })
                .unwrap_or_else(|| panic!("no mount of {ctl}"));
            (ctl.to_string(), PathBuf::from(format!("{point}{rel}")))
        })
        .collect()
}

/// The directory holding `file` (`pids.current`, ...).
fn dir_with(job: &JobCgroup, file: &str) -> PathBuf {
    dirs_of(job)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| d.join(file).exists())
        .unwrap_or_else(|| panic!("no {file} in {}", job.path()))
}

fn read_u64(p: &Path) -> u64 {
    std::fs::read_to_string(p).unwrap().trim().parse().unwrap()
}

/// A unique job name per test and run.
fn name(what: &str) -> String {
    format!("t-{what}-{}", std::process::id())
}

/// Removes `job` and checks nothing of it is left: no directory, none of `pids` alive.
fn remove_and_check(job: JobCgroup, pids: &[u32]) {
    let dirs = dirs_of(&job);
    job.remove().unwrap();
    for (_, d) in dirs {
        assert!(!d.exists(), "{} is left", d.display());
    }
    for &p in pids {
        assert!(!common::alive(i32::try_from(p).unwrap()), "pid {p} is left");
    }
}

fn wait_until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Root gets job cgroups; another user gets `off` with the reason the machine gives.
#[test]
fn find_gives_what_the_machine_has() {
    let Some(cg) = cgroups() else { return };
    assert!(!cg.path().is_empty());
    let me = std::process::id();
    assert!(
        cg.path().contains(&format!("efr-sandbox-{me}")),
        "{}",
        cg.path()
    );
}

/// A fork bomb (it forks sleepers and keeps trying when refused) stops at `pids.max`: the
/// job never holds more, the refusals are counted, and the end kills every process and
/// removes the directories.
#[test]
fn a_fork_bomb_stops_at_pids_max() {
    let Some(cg) = cgroups() else { return };
    let max = 24;
    let job = cg
        .create(
            &name("bomb"),
            &CgroupLimits {
                memory_max: None,
                pids_max: Some(max),
            },
        )
        .unwrap();
    // A shell gives up at its first refused fork: this bomb keeps trying, 1000 times a
    // second, and each child it gets becomes a sleeper.
    let mut cmd = Command::new(common::python());
    cmd.args([
        "-c",
        "import os, time\nwhile True:\n    try:\n        if os.fork() == 0:\n            os.execvp('sleep', ['sleep', '1000'])\n    except OSError:\n        time.sleep(0.001)",
    ]);
    common::sys::join_before_exec(&mut cmd, job.join_files().unwrap());
    let mut bomb = cmd.spawn().unwrap();
    assert!(
        wait_until(20, || job.pids_limit_hits() > 0),
        "no fork refused at pids.max {max}: {:?}",
        job.pids()
    );
    let current = dir_with(&job, "pids.current").join("pids.current");
    // Sampled while the bomb keeps trying: never above the limit.
    let mut seen = Vec::new();
    for _ in 0..20 {
        let n = read_u64(&current);
        assert!(n <= max, "pids.current {n} > pids.max {max}");
        seen.extend(job.pids());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(job.pids().len() as u64 <= max);
    let hits = job.pids_limit_hits();
    assert!(
        wait_until(10, || job.pids_limit_hits() > hits),
        "the bomb stopped trying: {hits} refusals"
    );
    seen.sort_unstable();
    seen.dedup();
    remove_and_check(job, &seen);
    let st = bomb.wait().unwrap();
    assert_eq!(st.signal(), Some(libc::SIGKILL), "{st:?}");
}

/// A process that allocates 200 MB in a job of 64 MiB is OOM-killed: the job says its
/// memory limit was hit, and its peak is near the limit.
#[test]
fn a_memory_hog_is_oom_killed_at_memory_max() {
    let Some(cg) = cgroups() else { return };
    let limit: u64 = 64 << 20;
    let job = cg
        .create(
            &name("hog"),
            &CgroupLimits {
                memory_max: Some(limit),
                pids_max: Some(64),
            },
        )
        .unwrap();
    assert!(!job.memory_limit_hit());
    let mut cmd = Command::new(common::python());
    cmd.args(["-c", "b = b'x' * (200 << 20)\nprint(len(b))"]);
    cmd.stdout(std::process::Stdio::null());
    common::sys::join_before_exec(&mut cmd, job.join_files().unwrap());
    let st = cmd.status().unwrap();
    assert_eq!(st.signal(), Some(libc::SIGKILL), "not killed: {st:?}");
    assert!(
        job.memory_limit_hit(),
        "no OOM kill reported in {}",
        job.path()
    );
    let u = job.usage();
    let peak = u.memory_peak.expect("memory peak");
    assert!(
        peak >= limit / 2 && peak <= limit + (1 << 20),
        "peak {peak} not near the limit {limit}"
    );
    assert!(u.memory_bytes.is_some());
    remove_and_check(job, &[]);
}

/// The CPU time of a job grows with a busy process (it spins until it used 0.3 s of CPU).
#[test]
fn cpu_time_is_counted() {
    let Some(cg) = cgroups() else { return };
    let job = cg.create(&name("cpu"), &CgroupLimits::default()).unwrap();
    let Some(before) = job.usage().cpu_usec else {
        // v1 without a cpuacct hierarchy this process may write.
        assert!(!cg.is_v2(), "v2 always has cpu.stat");
        assert!(
            !std::fs::read_to_string("/proc/self/cgroup")
                .unwrap()
                .contains("cpuacct"),
            "a cpuacct hierarchy is mounted but not used"
        );
        return;
    };
    assert!(before < 300_000, "{before}");
    let mut cmd = Command::new(common::python());
    cmd.args([
        "-c",
        "import time\nwhile time.process_time() < 0.3:\n    pass",
    ]);
    common::sys::join_before_exec(&mut cmd, job.join_files().unwrap());
    assert!(cmd.status().unwrap().success());
    let after = job.usage().cpu_usec.unwrap();
    assert!(after >= 300_000, "cpu_usec {after} < 0.3 s used by the job");
    remove_and_check(job, &[]);
}

/// A tree started before its job cgroup existed (a parent, its child, its grandchild) is
/// moved in whole.
#[test]
fn adopt_tree_moves_a_running_tree() {
    let Some(cg) = cgroups() else { return };
    let mut parent = Command::new("sh")
        .args(["-c", "sh -c 'sleep 1000 & wait' & wait"])
        .spawn()
        .unwrap();
    let root = parent.id();
    let pid = i32::try_from(root).unwrap();
    assert!(
        wait_until(10, || common::descendants(pid).len() >= 2),
        "the tree did not start"
    );
    let mut tree: Vec<u32> = common::descendants(pid)
        .into_iter()
        .map(|p| u32::try_from(p).unwrap())
        .collect();
    tree.push(root);
    tree.sort_unstable();
    let job = cg.create(&name("adopt"), &CgroupLimits::default()).unwrap();
    assert!(job.pids().is_empty());
    assert_eq!(job.adopt_tree(root).unwrap(), 3);
    assert_eq!(job.pids(), tree);
    for &p in &tree {
        assert!(job.holds(p), "pid {p} not in {}", job.path());
    }
    // Adopted already: nothing more to move.
    assert_eq!(job.adopt_tree(root).unwrap(), 0);
    // A process that is not running is an error.
    let gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    drop(gone.wait_with_output());
    assert!(job.adopt_tree(gone_pid).is_err());
    remove_and_check(job, &tree);
    assert_eq!(parent.wait().unwrap().signal(), Some(libc::SIGKILL));
}

/// A contained call started through `efr-launch` with the job's cgroups to join: the
/// launcher, the init and the line are in the job's cgroup (`/proc/<pid>/cgroup` names it
/// in each hierarchy) before the line runs.
#[test]
fn a_call_through_efr_launch_runs_in_the_job() {
    let Some(cg) = cgroups() else { return };
    for b in common::backends() {
        let fx = common::Fixture::new();
        let jname = name(&format!("call-{b:?}").to_lowercase());
        let job = cg
            .create(
                &jname,
                &CgroupLimits {
                    memory_max: Some(512 << 20),
                    pids_max: Some(256),
                },
            )
            .unwrap();
        let plan = fx.plan("exec sleep 1000", b, Vec::new());
        let mut running = common::launcher()
            .spawn_opts(
                &plan,
                Io::null(),
                Io::null(),
                Io::null(),
                SpawnOpts {
                    detach: efr_launcher::api::spawned::Detach::None,
                    join_cgroups: job.join_files().unwrap(),
                },
            )
            .unwrap();
        let launcher = running.child.id();
        let sleeper = || {
            job.pids().into_iter().find(|&p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.starts_with(b"sleep\x001000"))
            })
        };
        assert!(
            wait_until(20, || sleeper().is_some()),
            "{b:?}: the line is not in {}: {:?}",
            job.path(),
            job.pids()
        );
        let line = sleeper().unwrap();
        let tail = format!("/efr-sandbox-{}/{jname}", std::process::id());
        for p in [launcher, line] {
            let text = std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap();
            for (ctl, _) in dirs_of(&job) {
                let ok = text.lines().any(|l| {
                    let mut f = l.splitn(3, ':');
                    let (_, c, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
                    c == ctl && path.ends_with(&tail)
                });
                assert!(ok, "{b:?}: pid {p} is not in {ctl}:{tail}:\n{text}");
            }
        }
        assert!(job.pids().contains(&launcher));
        running.cancel();
        let (outcome, _) = running.wait().unwrap();
        assert!(outcome.setup_error.is_none(), "{outcome:?}");
        remove_and_check(job, &[launcher, line]);
    }
}

/// A join fd that is not a cgroup's `cgroup.procs` is the call's setup error, and the line
/// does not run (any user: no cgroup is needed).
#[test]
fn a_join_fd_that_is_no_cgroup_is_a_setup_error() {
    let fx = common::Fixture::new();
    let marker = format!("{}/ran", fx.proj);
    let plan = fx.plan(
        &format!("touch {marker}"),
        efr_launcher::api::BackendChoice::Native,
        Vec::new(),
    );
    let not_a_cgroup = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    let running = common::launcher()
        .spawn_opts(
            &plan,
            Io::null(),
            Io::null(),
            Io::null(),
            SpawnOpts {
                detach: efr_launcher::api::spawned::Detach::None,
                join_cgroups: vec![not_a_cgroup.into()],
            },
        )
        .unwrap();
    let (outcome, status) = running.wait().unwrap();
    let msg = outcome.setup_error.unwrap_or_default();
    assert!(
        msg.contains("fd 5 is not a cgroup's cgroup.procs") && msg.contains("/dev/null"),
        "{msg:?}"
    );
    assert_eq!(status.code(), Some(125));
    assert!(
        !Path::new(&marker).exists(),
        "the line ran outside its cgroup"
    );
    // More fds than a spawn places: refused before anything starts.
    let many: Vec<std::os::fd::OwnedFd> = (0..6)
        .map(|_| std::fs::File::open("/dev/null").unwrap().into())
        .collect();
    let e = common::launcher()
        .spawn_opts(
            &plan,
            Io::null(),
            Io::null(),
            Io::null(),
            SpawnOpts {
                detach: efr_launcher::api::spawned::Detach::None,
                join_cgroups: many,
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("at most 5 cgroups"), "{e}");
}

/// The environment variable that makes [`helper_dying_service`] act.
const HELPER: &str = "EFR_TEST_CGROUP_HELPER";

/// Not a test of its own: the "service" that [`stale_cgroups_of_a_dead_service_are_removed`]
/// runs (this binary again) and kills. It makes a job cgroup with a sleeper in it, prints
/// the paths and waits to be killed.
#[test]
#[ignore = "run by stale_cgroups_of_a_dead_service_are_removed"]
fn helper_dying_service() {
    if std::env::var_os(HELPER).is_none() {
        return;
    }
    let cg = Cgroups::find().unwrap();
    let job = cg.create("stale", &CgroupLimits::default()).unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("1000");
    common::sys::join_before_exec(&mut cmd, job.join_files().unwrap());
    #[allow(
        clippy::zombie_processes,
        reason = "left running on purpose: what a service that died leaves"
    )]
    let sleeper = cmd.spawn().unwrap();
    println!("SLEEPER {}", sleeper.id());
    println!("BASES {}", cg.path());
    for (_, d) in dirs_of(&job) {
        println!("DIR {}", d.display());
    }
    println!("READY");
    std::mem::forget(job);
    std::mem::forget(cg);
    std::thread::sleep(Duration::from_secs(1000));
}

/// What a service that died left (its base and job directories, a process still in the
/// job) is removed by the next one's `remove_stale`.
#[test]
fn stale_cgroups_of_a_dead_service_are_removed() {
    let Some(cg) = cgroups() else { return };
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_dying_service",
            "--ignored",
            "--nocapture",
        ])
        .env(HELPER, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(helper.stdout.take().unwrap());
    let mut sleeper = None;
    let mut paths = Vec::new();
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0 {
        if let Some(p) = line.trim().strip_prefix("SLEEPER ") {
            sleeper = Some(p.parse::<i32>().unwrap());
        } else if let Some(b) = line.trim().strip_prefix("BASES ") {
            paths.extend(b.split(", ").map(PathBuf::from));
        } else if let Some(d) = line.trim().strip_prefix("DIR ") {
            paths.push(PathBuf::from(d));
        } else if line.trim() == "READY" {
            break;
        }
        line.clear();
    }
    let sleeper = sleeper.expect("the helper's sleeper");
    assert!(
        !paths.is_empty() && paths.iter().all(|p| p.exists()),
        "{paths:?}"
    );
    helper.kill().unwrap();
    helper.wait().unwrap();
    assert!(common::alive(sleeper), "the sleeper outlives its service");
    cg.remove_stale();
    assert!(
        wait_until(5, || !common::alive(sleeper)),
        "the sleeper of the dead service lives"
    );
    for p in &paths {
        assert!(!p.exists(), "{} is left", p.display());
    }
}
