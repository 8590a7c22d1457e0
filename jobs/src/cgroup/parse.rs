//! The kernel's cgroup texts read as data: `/proc/self/mountinfo` (which cgroup file
//! systems are mounted where, with which controllers), `/proc/<pid>/cgroup` (a process's
//! cgroup in each hierarchy) and the flat keyed files (`memory.events`,
//! `memory.oom_control`, `cpu.stat`, `pids.events`: one `key value` per line). Pure: no
//! I/O, so that every parser has unit tests on the kernel's own formats.

/// The v1 controllers the kernel knows (a v1 mount's super options name its controllers
/// among other options such as `rw` or `name=systemd`).
const V1_CONTROLLERS: &[&str] = &[
    "blkio",
    "cpu",
    "cpuacct",
    "cpuset",
    "devices",
    "freezer",
    "hugetlb",
    "memory",
    "misc",
    "net_cls",
    "net_prio",
    "perf_event",
    "pids",
    "rdma",
];

/// One mounted cgroup file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The cgroup shown at the mount point (`/` unless a sub-tree was bind-mounted or the
    /// mount was made in a cgroup namespace).
    pub root: String,
    /// Where it is mounted.
    pub point: String,
    /// `true` for cgroup2, `false` for a v1 hierarchy.
    pub v2: bool,
    /// A v1 hierarchy's controllers (empty for v2 and for a named hierarchy such as
    /// `name=systemd`).
    pub controllers: Vec<String>,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            if let Ok(c) = u8::try_from(v) {
                out.push(c);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup mounts of a mountinfo text, in its order. Lines of other file systems and
/// lines that do not parse are skipped.
pub fn mounts(mountinfo: &str) -> Vec<CgroupMount> {
    let mut v = Vec::new();
    for l in mountinfo.lines() {
        let Some((pre, post)) = l.split_once(" - ") else {
            continue;
        };
        let mut post = post.split_whitespace();
        let (Some(fstype), Some(_source)) = (post.next(), post.next()) else {
            continue;
        };
        let super_opts = post.next().unwrap_or("");
        let v2 = match fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        let pre: Vec<&str> = pre.split_whitespace().collect();
        let (Some(root), Some(point)) = (pre.get(3), pre.get(4)) else {
            continue;
        };
        let controllers = if v2 {
            Vec::new()
        } else {
            super_opts
                .split(',')
                .filter(|o| V1_CONTROLLERS.contains(o))
                .map(str::to_string)
                .collect()
        };
        v.push(CgroupMount {
            root: unescape(root),
            point: unescape(point),
            v2,
            controllers,
        });
    }
    v
}

/// One line of `/proc/<pid>/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The hierarchy's id (0 for v2).
    pub id: u32,
    /// Its controllers as the kernel lists them (`memory`, `cpu,cpuacct`, `name=systemd`;
    /// empty for v2).
    pub controllers: String,
    /// The cgroup's path from the hierarchy's root (as seen from the reader's cgroup
    /// namespace).
    pub path: String,
}

impl Membership {
    /// Whether this is the v2 line (`0::/path`).
    pub fn is_v2(&self) -> bool {
        self.id == 0 && self.controllers.is_empty()
    }

    /// Whether this v1 line's hierarchy has controller `c`.
    pub fn has(&self, c: &str) -> bool {
        self.controllers.split(',').any(|x| x == c)
    }
}

/// The lines of a `/proc/<pid>/cgroup` text (lines that do not parse are skipped).
pub fn memberships(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let id = it.next()?.parse().ok()?;
            let controllers = it.next()?.to_string();
            let path = it.next()?.to_string();
            path.starts_with('/').then_some(Membership {
                id,
                controllers,
                path,
            })
        })
        .collect()
}

/// The value of `key` in a flat keyed file (`key value` per line), `None` when absent or
/// not a number.
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key))
            .then(|| it.next()?.parse().ok())
            .flatten()
    })
}

/// A single-number file (`memory.current`, `cpuacct.usage`): `None` for `max` or garbage.
pub fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The words of a space-separated list file (`cgroup.controllers`,
/// `cgroup.subtree_control`).
pub fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// The pids of a `cgroup.procs` text.
pub fn pids(text: &str) -> Vec<u32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The parent pid in a `/proc/<pid>/stat` text, `None` for a zombie or a dead process
/// (state `Z` or `X`) or a text that does not parse. The command name, in parentheses, may
/// hold spaces and parentheses: the fields start after the last `)`.
pub fn live_ppid(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut f = rest.split_whitespace();
    let state = f.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    f.next()?.parse().ok()
}

/// The pid of the service that made a cgroup named `efr-sandbox-<pid>` (its jobs' base) or
/// `efr-sandbox-<pid>.service` (the leaf it moved itself into on cgroup v2), else `None`.
pub fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(super::BASE_PREFIX)?;
    let digits = rest.strip_suffix(super::LEAF_SUFFIX).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's kind (v1 hybrid, cgroup2 at `unified`) and a systemd v2 host.
    #[test]
    fn mountinfo_cgroup_lines() {
        let t = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
90 41 0:38 /user.slice /mnt/my\\040cg rw - cgroup2 cgroup2 rw
garbage line
";
        let m = mounts(t);
        assert_eq!(m.len(), 6);
        assert_eq!(m[0].point, "/sys/fs/cgroup/cpu,cpuacct");
        assert_eq!(m[0].controllers, ["cpu", "cpuacct"]);
        assert!(!m[0].v2);
        assert_eq!(m[1].controllers, ["memory"]);
        assert!(
            m[3].controllers.is_empty(),
            "name=systemd has no controller"
        );
        assert!(m[4].v2 && m[4].controllers.is_empty());
        assert_eq!(m[5].root, "/user.slice");
        assert_eq!(m[5].point, "/mnt/my cg");
        assert!(mounts("").is_empty());
    }

    #[test]
    fn proc_cgroup_lines() {
        let t = "9:name=systemd:/\n4:memory:/process_api/c2db\n2:cpu,cpuacct:/\n0::/user.slice/x\nbad\n5:x:relative\n";
        let m = memberships(t);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].path, "/process_api/c2db");
        assert!(m[1].has("memory") && !m[1].has("mem"));
        assert!(m[2].has("cpuacct") && m[2].has("cpu"));
        assert!(m[3].is_v2() && !m[1].is_v2());
        // A path may hold ':' (only the first two split).
        assert_eq!(memberships("0::/a:b")[0].path, "/a:b");
    }

    #[test]
    fn keyed_files() {
        let events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(keyed(events, "oom_kill"), Some(1));
        assert_eq!(keyed(events, "max"), Some(12));
        assert_eq!(keyed(events, "oom"), Some(1));
        assert_eq!(keyed(events, "nope"), None);
        let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed(oom_control, "oom_kill"), Some(3));
        assert_eq!(keyed("oom_kill_disable 0\nunder_oom 0\n", "oom_kill"), None);
        let cpu = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 0\n";
        assert_eq!(keyed(cpu, "usage_usec"), Some(123_456));
        assert_eq!(keyed("max x\n", "max"), None);
        assert_eq!(number("max\n"), None);
        assert_eq!(number("4096\n"), Some(4096));
        assert_eq!(
            words("cpuset cpu io memory pids\n"),
            ["cpuset", "cpu", "io", "memory", "pids"]
        );
        assert_eq!(pids("12\n13\n\n"), [12, 13]);
    }

    #[test]
    fn stat_ppid() {
        assert_eq!(live_ppid("123 (a) b) S 45 123 1 0"), Some(45));
        assert_eq!(live_ppid("123 (sh) Z 45 123"), None);
        assert_eq!(live_ppid("nonsense"), None);
    }

    #[test]
    fn owner_pids() {
        assert_eq!(owner_pid("efr-sandbox-123"), Some(123));
        assert_eq!(owner_pid("efr-sandbox-123.service"), Some(123));
        assert_eq!(owner_pid("efr-sandbox-"), None);
        assert_eq!(owner_pid("efr-sandbox-012"), None);
        assert_eq!(owner_pid("efr-sandbox-12x"), None);
        assert_eq!(owner_pid("efr-launch-12"), None);
        assert_eq!(owner_pid("efr-sandbox-99999999999999"), None);
    }
}
