//! Where this process may make job cgroups, decided once from the cgroup mounts
//! (`/proc/self/mountinfo`), its own cgroups (`/proc/self/cgroup`) and what it may write.
//!
//! The order of the decision:
//!
//! 1. **cgroup v2**, when this process's v2 cgroup (`own`) offers both `memory` and `pids`
//!    in its `cgroup.controllers`. It must be writable by this process (a delegated
//!    subtree: systemd's `user@UID.service` and what is below it belong to the user), else
//!    `no_delegation`. Jobs go to `own/efr-sandbox-<pid>/<name>`.
//!
//!    The "no internal processes" rule: a v2 cgroup can pass controllers to its children
//!    (`cgroup.subtree_control`) only when it holds no process of its own (the root cgroup
//!    excepted). The service is in `own`. When `own`'s `cgroup.subtree_control` already
//!    has `memory` and `pids` (only possible when `own` is the root) nothing moves.
//!    Otherwise the service moves itself into a leaf, `own/efr-sandbox-<pid>.service`, and
//!    then enables `memory` and `pids` in `own` (and in its base, which never holds a
//!    process). That is systemd's own advice for a delegated unit (`Delegate=yes`: the
//!    unit's processes go into a leaf of their own, the unit's cgroup only passes
//!    controllers down), and it is the only choice that works for a service started in a
//!    plain delegated unit: the alternative, making jobs only where the controllers
//!    already flow, would leave such a service without cgroups. The move is done only
//!    when every process in `own` is this one or a descendant of it (the standby launcher,
//!    the proxies): a cgroup shared with other programs (a terminal's scope) is not ours
//!    to rearrange, and gives `no_delegation` with the reason. A second look in the same
//!    process finds itself in its leaf and uses the leaf's parent.
//! 2. **cgroup v1**, when hierarchies with `memory` and `pids` are mounted (`cpuacct` is
//!    used when it is there too, for the CPU time). Jobs go to
//!    `<hierarchy>/<own cgroup in it>/efr-sandbox-<pid>/<name>` in each of them, so a job
//!    is nested under the service's cgroup and bound by its limits. v1 is not delegated to
//!    users: a hierarchy this process cannot write gives `v1_only`.
//! 3. Else `no_controllers` (neither version offers both).
//!
//! The decision reads through [`Host`], so that the v2 paths this machine cannot have
//! (a delegated systemd user subtree) are unit-tested on a made-up host.

use std::path::{Path, PathBuf};

use super::parse::{self, CgroupMount, Membership};
use super::{BASE_PREFIX, CgroupError, LEAF_SUFFIX, Off, OffReason, io};

/// What the decision reads of the machine.
pub trait Host {
    /// A file's text.
    fn read(&self, p: &Path) -> std::io::Result<String>;
    /// Whether this process may write `p` (a directory: make entries in it).
    fn writable(&self, p: &Path) -> std::io::Result<()>;
    /// The owner of `p`.
    fn owner(&self, p: &Path) -> Option<u32>;
    /// This process's effective uid.
    fn euid(&self) -> u32;
    /// This process's pid.
    fn pid(&self) -> u32;
    /// Whether `pid` is this process or a descendant of it.
    fn ours(&self, pid: u32) -> bool;
}

/// One hierarchy this process makes job cgroups in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hier {
    /// Where it is mounted.
    pub point: PathBuf,
    /// The cgroup at the mount point.
    pub root: String,
    /// Its controllers as `/proc/<pid>/cgroup` names them (empty for v2).
    pub key: String,
    /// The cgroup under which the jobs go (the service's own, or its leaf's parent).
    pub own: String,
    /// A v2 hierarchy.
    pub v2: bool,
    /// It holds the memory controller.
    pub memory: bool,
    /// It holds the pids controller.
    pub pids: bool,
    /// It holds the CPU time (`cpuacct` in v1, `cpu.stat` in v2).
    pub cpu: bool,
}

/// `rel` below a cgroup path (`/` + `x` is `/x`).
pub fn child(parent: &str, name: &str) -> String {
    format!("{}/{name}", parent.trim_end_matches('/'))
}

/// Whether cgroup path `path` is `root` or below it.
fn under(path: &str, root: &str) -> bool {
    root == "/" || path == root || path.strip_prefix(root).is_some_and(|r| r.starts_with('/'))
}

impl Hier {
    /// The directory of cgroup `rel` (a path below [`Hier::root`]).
    pub fn dir(&self, rel: &str) -> PathBuf {
        let tail = if self.root == "/" {
            rel
        } else {
            rel.strip_prefix(self.root.as_str()).unwrap_or(rel)
        };
        let tail = tail.trim_start_matches('/');
        if tail.is_empty() {
            self.point.clone()
        } else {
            self.point.join(tail)
        }
    }

    /// The directory of [`Hier::own`].
    pub fn own_dir(&self) -> PathBuf {
        self.dir(&self.own)
    }

    /// The cgroup path of the jobs' base of service `pid`.
    pub fn base_rel(&self, pid: u32) -> String {
        child(&self.own, &format!("{BASE_PREFIX}{pid}"))
    }
}

/// What was found.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// v1: the hierarchies (memory, pids, maybe cpuacct; one hierarchy may hold several).
    V1(Vec<Hier>),
    /// v2: the hierarchy; `leaf`: the processes to move into `own/efr-sandbox-<pid>.service`
    /// before `memory` and `pids` can be enabled in `own`'s `cgroup.subtree_control`
    /// (`None`: they are enabled there already).
    V2 {
        /// The v2 hierarchy.
        hier: Hier,
        /// The processes to move first (this one first).
        leaf: Option<Vec<u32>>,
    },
}

fn off(reason: OffReason, detail: String) -> Off {
    Off { reason, detail }
}

/// Who owns `p`, for a detail.
fn owned_by(host: &dyn Host, p: &Path, e: &std::io::Error) -> String {
    match host.owner(p) {
        Some(o) if o != host.euid() => {
            format!(
                "{} is owned by uid {o}, not uid {}",
                p.display(),
                host.euid()
            )
        }
        _ => format!("{} is not writable: {e}", p.display()),
    }
}

/// The mount of hierarchy line `l`: v2 for the v2 line; for v1 the hierarchy with the same
/// set of controllers. Its root must hold the cgroup.
fn mount_of<'a>(mounts: &'a [CgroupMount], l: &Membership) -> Option<&'a CgroupMount> {
    let mut want: Vec<&str> = l.controllers.split(',').collect();
    want.sort_unstable();
    mounts.iter().find(|m| {
        if m.v2 != l.is_v2() || !under(&l.path, &m.root) {
            return false;
        }
        if m.v2 {
            return true;
        }
        let mut have: Vec<&str> = m.controllers.iter().map(String::as_str).collect();
        have.sort_unstable();
        have == want
    })
}

/// The decision (see the module's page).
pub fn decide(host: &dyn Host, mountinfo: &str, proc_cgroup: &str) -> Result<Found, Off> {
    let mounts = parse::mounts(mountinfo);
    if mounts.is_empty() {
        return Err(off(
            OffReason::NoControllers,
            "no cgroup file system is mounted".into(),
        ));
    }
    let lines = parse::memberships(proc_cgroup);
    let pid = host.pid();
    let mut v2_note = "no cgroup v2".to_string();
    if let Some((l, m)) = lines
        .iter()
        .find(|l| l.is_v2())
        .and_then(|l| mount_of(&mounts, l).map(|m| (l, m)))
    {
        let mut own = l.path.clone();
        // Moved into its leaf by an earlier look of this same process.
        let leaf_name = format!("{BASE_PREFIX}{pid}{LEAF_SUFFIX}");
        if let Some(parent) = own.strip_suffix(&format!("/{leaf_name}")) {
            own = if parent.is_empty() {
                "/".into()
            } else {
                parent.into()
            };
        }
        let hier = Hier {
            point: PathBuf::from(&m.point),
            root: m.root.clone(),
            key: String::new(),
            own: own.clone(),
            v2: true,
            memory: true,
            pids: true,
            cpu: true,
        };
        let dir = hier.own_dir();
        let offered = host
            .read(&dir.join("cgroup.controllers"))
            .map(|t| parse::words(&t))
            .unwrap_or_default();
        let has = |w: &[String], c: &str| w.iter().any(|x| x == c);
        if has(&offered, "memory") && has(&offered, "pids") {
            for p in [dir.clone(), dir.join("cgroup.procs")] {
                if let Err(e) = host.writable(&p) {
                    return Err(off(
                        OffReason::NoDelegation,
                        format!(
                            "cgroup v2 {own} is not delegated to this user: {}",
                            owned_by(host, &p, &e)
                        ),
                    ));
                }
            }
            let passed = host
                .read(&dir.join("cgroup.subtree_control"))
                .map(|t| parse::words(&t))
                .map_err(|e| {
                    off(
                        OffReason::Error,
                        format!(
                            "reading {}: {e}",
                            dir.join("cgroup.subtree_control").display()
                        ),
                    )
                })?;
            let leaf = if has(&passed, "memory") && has(&passed, "pids") {
                None
            } else {
                let procs_file = dir.join("cgroup.procs");
                let procs = host
                    .read(&procs_file)
                    .map(|t| parse::pids(&t))
                    .map_err(|e| {
                        off(
                            OffReason::Error,
                            format!("reading {}: {e}", procs_file.display()),
                        )
                    })?;
                let others: Vec<String> = procs
                    .iter()
                    .filter(|&&p| !host.ours(p))
                    .map(u32::to_string)
                    .collect();
                if !others.is_empty() {
                    return Err(off(
                        OffReason::NoDelegation,
                        format!(
                            "cgroup v2 {own} also holds other programs (pid {}) and does not pass memory and pids to its children: run the service in a cgroup of its own (a systemd user unit with Delegate=yes)",
                            others.join(", ")
                        ),
                    ));
                }
                let mut procs = procs;
                procs.retain(|&p| p != pid);
                procs.insert(0, pid);
                Some(procs)
            };
            return Ok(Found::V2 { hier, leaf });
        }
        v2_note = format!(
            "cgroup v2 {own} offers {}",
            if offered.is_empty() {
                "no controller".to_string()
            } else {
                offered.join(" ")
            }
        );
    }
    let v1 = |c: &str| {
        lines
            .iter()
            .find(|l| !l.is_v2() && l.has(c))
            .and_then(|l| mount_of(&mounts, l).map(|m| (l, m)))
    };
    let (Some(mem), Some(pids)) = (v1("memory"), v1("pids")) else {
        return Err(off(
            OffReason::NoControllers,
            format!("{v2_note}, and no cgroup v1 hierarchy has memory and pids"),
        ));
    };
    let mut hiers: Vec<Hier> = Vec::new();
    for (role, found) in [
        ("memory", Some(mem)),
        ("pids", Some(pids)),
        ("cpuacct", v1("cpuacct")),
    ] {
        let Some((l, m)) = found else { continue };
        if let Some(h) = hiers.iter_mut().find(|h| h.key == l.controllers) {
            h.cpu |= role == "cpuacct";
            continue;
        }
        let h = Hier {
            point: PathBuf::from(&m.point),
            root: m.root.clone(),
            key: l.controllers.clone(),
            own: l.path.clone(),
            v2: false,
            memory: l.has("memory"),
            pids: l.has("pids"),
            cpu: l.has("cpuacct"),
        };
        let dir = h.own_dir();
        if let Err(e) = host.writable(&dir) {
            if role == "cpuacct" {
                // The CPU time is a nicety: without it `cpu_usec` is unknown.
                continue;
            }
            return Err(off(
                OffReason::V1Only,
                format!(
                    "{v2_note}; memory and pids are only in cgroup v1, which is not delegated to users: {}",
                    owned_by(host, &dir, &e)
                ),
            ));
        }
        hiers.push(h);
    }
    Ok(Found::V1(hiers))
}

/// The machine itself.
#[derive(Debug)]
pub struct RealHost;

impl Host for RealHost {
    fn read(&self, p: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(p)
    }
    fn writable(&self, p: &Path) -> std::io::Result<()> {
        use nix::unistd::{AccessFlags, access};
        access(p, AccessFlags::W_OK | AccessFlags::X_OK).map_err(std::io::Error::from)
    }
    fn owner(&self, p: &Path) -> Option<u32> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| m.uid())
    }
    fn euid(&self) -> u32 {
        crate::sys::euid()
    }
    fn pid(&self) -> u32 {
        std::process::id()
    }
    fn ours(&self, pid: u32) -> bool {
        super::procs::descends(&super::procs::ppids(), pid, std::process::id())
    }
}

/// Moves `procs` (this process first) into `own/efr-sandbox-<pid>.service` and enables
/// `memory` and `pids` in `own` (see the module's page). A process forked into `own` in
/// the meantime makes the kernel refuse the enabling (`EBUSY`): it is moved too and the
/// enabling tried again, three times at most.
pub fn enter_leaf(hier: &Hier, pid: u32, procs: &[u32]) -> Result<(), CgroupError> {
    let own = hier.own_dir();
    let leaf = own.join(format!("{BASE_PREFIX}{pid}{LEAF_SUFFIX}"));
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("making", &leaf, e)),
    }
    let procs_file = leaf.join("cgroup.procs");
    let move_in = |p: u32| -> Result<(), CgroupError> {
        match std::fs::write(&procs_file, p.to_string()) {
            Ok(()) => Ok(()),
            // Ended meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            Err(e) => Err(io(format!("moving pid {p} into"), &procs_file, e)),
        }
    };
    for &p in procs {
        move_in(p)?;
    }
    let control = own.join("cgroup.subtree_control");
    let mut tries = 0;
    loop {
        match std::fs::write(&control, "+memory +pids") {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 3 => {
                tries += 1;
                let left = std::fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
                for p in parse::pids(&left) {
                    if RealHost.ours(p) {
                        move_in(p)?;
                    }
                }
            }
            Err(e) => return Err(io("writing +memory +pids to", &control, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// A made-up machine.
    #[derive(Default)]
    struct Fake {
        files: HashMap<PathBuf, String>,
        writable: HashSet<PathBuf>,
        owners: HashMap<PathBuf, u32>,
        euid: u32,
        ours: HashSet<u32>,
    }

    impl Host for Fake {
        fn read(&self, p: &Path) -> std::io::Result<String> {
            self.files
                .get(p)
                .cloned()
                .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))
        }
        fn writable(&self, p: &Path) -> std::io::Result<()> {
            if self.writable.contains(p) {
                Ok(())
            } else {
                Err(std::io::Error::from_raw_os_error(libc::EACCES))
            }
        }
        fn owner(&self, p: &Path) -> Option<u32> {
            self.owners.get(p).copied()
        }
        fn euid(&self) -> u32 {
            self.euid
        }
        fn pid(&self) -> u32 {
            100
        }
        fn ours(&self, pid: u32) -> bool {
            pid == 100 || self.ours.contains(&pid)
        }
    }

    /// This machine's kind: v1 hybrid, the v2 tree without memory and pids.
    const HYBRID: &str = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
    const HYBRID_SELF: &str =
        "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    fn hybrid() -> Fake {
        let mut f = Fake::default();
        f.files.insert(
            "/sys/fs/cgroup/unified/cgroup.controllers".into(),
            "\n".into(),
        );
        f
    }

    #[test]
    fn v1_as_root_nests_under_own() {
        let mut f = hybrid();
        for d in [
            "/sys/fs/cgroup/memory/process_api/abc",
            "/sys/fs/cgroup/pids",
            "/sys/fs/cgroup/cpuacct",
        ] {
            f.writable.insert(d.into());
        }
        let Ok(Found::V1(h)) = decide(&f, HYBRID, HYBRID_SELF) else {
            panic!("v1 expected")
        };
        assert_eq!(h.len(), 3);
        assert!(h[0].memory && !h[0].pids);
        assert_eq!(
            h[0].own_dir(),
            Path::new("/sys/fs/cgroup/memory/process_api/abc")
        );
        assert_eq!(h[0].base_rel(7), "/process_api/abc/efr-sandbox-7");
        assert_eq!(
            h[0].dir(&h[0].base_rel(7)),
            Path::new("/sys/fs/cgroup/memory/process_api/abc/efr-sandbox-7")
        );
        assert!(h[1].pids && h[1].key == "pids");
        assert_eq!(
            h[1].dir(&h[1].base_rel(7)),
            Path::new("/sys/fs/cgroup/pids/efr-sandbox-7")
        );
        assert!(h[2].cpu);
    }

    #[test]
    fn v1_unwritable_is_v1_only_and_says_who_owns_it() {
        let mut f = hybrid();
        f.euid = 1001;
        f.owners
            .insert("/sys/fs/cgroup/memory/process_api/abc".into(), 0);
        let e = decide(&f, HYBRID, HYBRID_SELF).unwrap_err();
        assert_eq!(e.reason, OffReason::V1Only);
        assert!(
            e.detail
                .contains("/sys/fs/cgroup/memory/process_api/abc is owned by uid 0, not uid 1001"),
            "{}",
            e.detail
        );
        assert!(e.detail.contains("offers no controller"), "{}", e.detail);
        // Without cpuacct writable, still v1 (no CPU time).
        f.writable
            .insert("/sys/fs/cgroup/memory/process_api/abc".into());
        f.writable.insert("/sys/fs/cgroup/pids".into());
        let Ok(Found::V1(h)) = decide(&f, HYBRID, HYBRID_SELF) else {
            panic!()
        };
        assert_eq!(h.len(), 2);
        assert!(!h.iter().any(|h| h.cpu));
    }

    #[test]
    fn co_mounted_v1_hierarchy_is_one() {
        let mi = "1 0 0:1 / /cg/mp rw - cgroup cgroup rw,memory,pids\n2 0 0:2 / /cg/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let me = "3:memory,pids:/a\n2:cpu,cpuacct:/b\n";
        let mut f = Fake::default();
        f.writable.insert("/cg/mp/a".into());
        f.writable.insert("/cg/cpu,cpuacct/b".into());
        let Ok(Found::V1(h)) = decide(&f, mi, me) else {
            panic!()
        };
        assert_eq!(h.len(), 2);
        assert!(h[0].memory && h[0].pids && !h[0].cpu);
        assert!(h[1].cpu);
    }

    /// A systemd user manager's delegated subtree.
    const V2: &str = "30 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
    const UNIT: &str = "/user.slice/user-1000.slice/user@1000.service/app.slice/efr.service";

    fn delegated() -> Fake {
        let own = PathBuf::from(format!("/sys/fs/cgroup{UNIT}"));
        let mut f = Fake {
            euid: 1000,
            ..Fake::default()
        };
        f.files.insert(
            own.join("cgroup.controllers"),
            "cpu io memory pids\n".into(),
        );
        f.files
            .insert(own.join("cgroup.subtree_control"), "\n".into());
        f.files
            .insert(own.join("cgroup.procs"), "100\n101\n".into());
        f.writable.insert(own.clone());
        f.writable.insert(own.join("cgroup.procs"));
        f.ours.insert(101);
        f
    }

    #[test]
    fn v2_delegated_moves_the_service_into_a_leaf() {
        let f = delegated();
        let me = format!("0::{UNIT}\n");
        let Ok(Found::V2 { hier, leaf }) = decide(&f, V2, &me) else {
            panic!()
        };
        assert_eq!(leaf, Some(vec![100, 101]));
        assert_eq!(hier.own, UNIT);
        assert_eq!(
            hier.dir(&hier.base_rel(100)),
            PathBuf::from(format!("/sys/fs/cgroup{UNIT}/efr-sandbox-100"))
        );
        // A second look, from the leaf: the same base, nothing to move.
        let mut f = f;
        let own = PathBuf::from(format!("/sys/fs/cgroup{UNIT}"));
        f.files
            .insert(own.join("cgroup.subtree_control"), "memory pids\n".into());
        let me = format!("0::{UNIT}/efr-sandbox-100.service\n");
        let Ok(Found::V2 { hier, leaf }) = decide(&f, V2, &me) else {
            panic!()
        };
        assert_eq!((hier.own.as_str(), leaf), (UNIT, None));
    }

    #[test]
    fn v2_shared_with_other_programs_is_not_ours() {
        let mut f = delegated();
        f.files.insert(
            PathBuf::from(format!("/sys/fs/cgroup{UNIT}/cgroup.procs")),
            "100\n555\n".into(),
        );
        let e = decide(&f, V2, &format!("0::{UNIT}\n")).unwrap_err();
        assert_eq!(e.reason, OffReason::NoDelegation);
        assert!(
            e.detail.contains("pid 555") && e.detail.contains("Delegate=yes"),
            "{}",
            e.detail
        );
    }

    #[test]
    fn v2_not_delegated_says_who_owns_it() {
        let own = "/user.slice/user-1000.slice/session-2.scope";
        let dir = PathBuf::from(format!("/sys/fs/cgroup{own}"));
        let mut f = Fake {
            euid: 1000,
            ..Fake::default()
        };
        f.files
            .insert(dir.join("cgroup.controllers"), "memory pids\n".into());
        f.owners.insert(dir.clone(), 0);
        let e = decide(&f, V2, &format!("0::{own}\n")).unwrap_err();
        assert_eq!(e.reason, OffReason::NoDelegation);
        assert!(
            e.detail.contains("is owned by uid 0, not uid 1000"),
            "{}",
            e.detail
        );
    }

    #[test]
    fn nothing_to_use() {
        let f = Fake::default();
        let e = decide(&f, "", "0::/\n").unwrap_err();
        assert_eq!(e.reason, OffReason::NoControllers);
        // v2 without memory, no v1 memory.
        let mut f = Fake::default();
        f.files.insert(
            "/sys/fs/cgroup/x/cgroup.controllers".into(),
            "cpu io\n".into(),
        );
        let e = decide(&f, V2, "0::/x\n").unwrap_err();
        assert_eq!(e.reason, OffReason::NoControllers);
        assert!(e.detail.contains("offers cpu io"), "{}", e.detail);
    }

    #[test]
    fn a_mount_of_a_sub_tree() {
        // The v2 mount shows /lxc/c1 (a container's cgroup namespace seen from outside).
        let mi = "30 20 0:26 /lxc/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let h = Hier {
            point: "/sys/fs/cgroup".into(),
            root: "/lxc/c1".into(),
            key: String::new(),
            own: "/lxc/c1/svc".into(),
            v2: true,
            memory: true,
            pids: true,
            cpu: true,
        };
        assert_eq!(h.own_dir(), Path::new("/sys/fs/cgroup/svc"));
        // A cgroup outside the mount's root has no directory there: not used.
        let f = Fake::default();
        assert_eq!(
            decide(&f, mi, "0::/other\n").unwrap_err().reason,
            OffReason::NoControllers
        );
    }
}
