//! Unsandboxed launches: no namespaces, but the launcher is a child subreaper, puts the tree
//! in its own cgroup where it can (v2 delegated subtree, else v1 freezer, else none), and
//! ends every descendant after the line. Those it cannot end are the `survivors`.

use std::time::{Duration, Instant};

use crate::status::CgroupKind;
use crate::sys;

/// The cgroup of one unsandboxed tree.
#[derive(Debug, Clone)]
pub struct Cgroup {
    /// What the tree got: a v2 cgroup, a v1 freezer cgroup, or none (the subreaper only).
    pub kind: CgroupKind,
    /// The cgroup directory (none for `CgroupKind::None`).
    pub dir: Option<String>,
}

fn mount_of(fstype: &str, opt: Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for l in text.lines() {
        let (pre, post) = l.split_once(" - ")?;
        let mut post = post.split_whitespace();
        let fs = post.next()?;
        let _src = post.next();
        let sopts = post.next().unwrap_or("");
        if fs != fstype {
            continue;
        }
        if let Some(o) = opt {
            if !sopts.split(',').any(|x| x == o) {
                continue;
            }
        }
        return pre.split_whitespace().nth(4).map(str::to_string);
    }
    None
}

fn own_cgroup(controller: Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for l in text.lines() {
        let mut it = l.splitn(3, ':');
        let (_id, ctl, path) = (it.next()?, it.next()?, it.next()?);
        match controller {
            None if ctl.is_empty() => return Some(path.to_string()),
            Some(c) if ctl.split(',').any(|x| x == c) => return Some(path.to_string()),
            _ => {}
        }
    }
    None
}

/// Makes a cgroup for the tree (the child joins it with [`join`]).
pub fn create() -> Cgroup {
    let name = format!("efr-launch-{}", sys::getpid());
    if let (Some(mnt), Some(path)) = (mount_of("cgroup2", None), own_cgroup(None)) {
        let dir = format!("{}{}/{}", mnt, path.trim_end_matches('/'), name);
        if std::fs::create_dir(&dir).is_ok() {
            return Cgroup {
                kind: CgroupKind::V2,
                dir: Some(dir),
            };
        }
    }
    if let (Some(mnt), Some(path)) = (
        mount_of("cgroup", Some("freezer")),
        own_cgroup(Some("freezer")),
    ) {
        let dir = format!("{}{}/{}", mnt, path.trim_end_matches('/'), name);
        if std::fs::create_dir(&dir).is_ok() {
            return Cgroup {
                kind: CgroupKind::V1Freezer,
                dir: Some(dir),
            };
        }
    }
    Cgroup {
        kind: CgroupKind::None,
        dir: None,
    }
}

/// Moves the calling process into the cgroup.
pub fn join(cg: &Cgroup) -> std::io::Result<()> {
    match &cg.dir {
        Some(d) => std::fs::write(format!("{d}/cgroup.procs"), "0"),
        None => Ok(()),
    }
}

fn cg_pids(dir: &str) -> Vec<libc::pid_t> {
    std::fs::read_to_string(format!("{dir}/cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The launcher's descendants, found through /proc (ppid links).
fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parent = std::collections::HashMap::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<libc::pid_t>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
                continue;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.first() == Some(&"Z") {
                continue;
            }
            if let Some(pp) = f.get(1).and_then(|s| s.parse::<libc::pid_t>().ok()) {
                parent.insert(pid, pp);
            }
        }
    }
    let mut out = Vec::new();
    for (&pid, _) in parent.iter() {
        let mut cur = pid;
        for _ in 0..64 {
            match parent.get(&cur) {
                Some(&pp) if pp == root => {
                    out.push(pid);
                    break;
                }
                Some(&pp) if pp > 1 => cur = pp,
                _ => break,
            }
        }
    }
    out
}

fn reap_all() {
    while let Ok(Some(_)) = sys::waitpid(-1, libc::WNOHANG) {}
}

/// Ends every descendant and removes the cgroup; returns the program names of those still
/// alive afterwards.
pub fn end_tree(cg: &Cgroup) -> Vec<String> {
    let me = sys::getpid();
    let deadline = Instant::now() + Duration::from_millis(1500);
    match (&cg.kind, &cg.dir) {
        (CgroupKind::V2, Some(d)) if std::fs::write(format!("{d}/cgroup.kill"), "1").is_err() => {
            for p in cg_pids(d) {
                let _ = sys::kill(p, libc::SIGKILL);
            }
        }
        (CgroupKind::V1Freezer, Some(d)) => {
            let _ = std::fs::write(format!("{d}/freezer.state"), "FROZEN");
            for p in cg_pids(d) {
                let _ = sys::kill(p, libc::SIGKILL);
            }
            let _ = std::fs::write(format!("{d}/freezer.state"), "THAWED");
        }
        _ => {}
    }
    loop {
        for p in descendants(me) {
            let _ = sys::kill(p, libc::SIGKILL);
        }
        reap_all();
        let left_cg = cg.dir.as_deref().map(cg_pids).unwrap_or_default();
        let left = descendants(me);
        if (left.is_empty() && left_cg.is_empty()) || Instant::now() > deadline {
            let mut names: Vec<String> = left
                .iter()
                .chain(left_cg.iter())
                .filter_map(|&p| sys::comm(p))
                .collect();
            names.sort();
            names.dedup();
            if let Some(d) = &cg.dir {
                let _ = std::fs::remove_dir(d);
            }
            return names;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
