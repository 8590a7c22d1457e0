//! The seccomp filter of a contained line, as reviewed data: every entry names the system
//! call, what it is refused with, and why. The numbers come from `libc` for the target, so
//! the same table builds for x86_64 and aarch64 (entries missing on one arch are cfg'd).
//!
//! The filter is one classic-BPF program compiled here from the tables: the arch check
//! (another arch is killed), x32-ABI calls refused, every number above the newest the
//! tables know ([`NEWEST_KNOWN`]) answered ENOSYS, as a kernel without it would (a mount or
//! namespace call a later kernel adds cannot reach it unreviewed), then a search tree over
//! the numbers with a rule: a number without one is allowed after about log2(rules)
//! comparisons, a number with one ends in its leaf (refused whatever the arguments, such as
//! `clone3` with ENOSYS so that libc falls back to `clone`, whose flags the filter can
//! read; or after a look at the arguments its rule reads). Short paths matter twice: every
//! call of the line that the kernel cannot answer from its per-number cache runs the
//! filter, and the kernel builds that cache at load time by running the filter for every
//! number of every arch. The tests check the program against seccompiler's compilation of
//! the same tables, and the tables against the kernel's syscall table.

/// A system call refused whatever its arguments.
#[derive(Debug, Clone, Copy)]
pub struct Deny {
    /// The call as `libc` names it (`SYS_unshare`); a test's `seccomp_drop` names it
    /// without the `SYS_`.
    pub name: &'static str,
    /// Its number on the build target.
    pub nr: libc::c_long,
    /// Why it is refused: what the line could do with it.
    pub reason: &'static str,
}

macro_rules! deny {
    ($sys:ident, $reason:expr) => {
        Deny {
            name: stringify!($sys),
            nr: libc::$sys,
            reason: $reason,
        }
    };
    ($sys:ident = $nr:expr, $reason:expr) => {
        Deny {
            name: stringify!($sys),
            nr: $nr,
            reason: $reason,
        }
    };
}

/// System calls newer than the `libc` crate's tables, by the kernel's numbers (from 424 on,
/// every arch has the same number for a new call; `arch/x86/entry/syscalls/syscall_64.tbl`
/// and `scripts/syscall.tbl` of Linux 6.18). Each is in a table below or in [`ALLOWED`].
#[allow(non_upper_case_globals)]
pub mod newer {
    /// Page-cache statistics of a range of a file (Linux 6.5).
    pub const SYS_cachestat: libc::c_long = 451;
    /// `fchmodat` with a flags argument, such as `AT_SYMLINK_NOFOLLOW` (Linux 6.6).
    pub const SYS_fchmodat2: libc::c_long = 452;
    /// Maps a shadow stack for the caller's threads (x86 user shadow stacks, Linux 6.6).
    pub const SYS_map_shadow_stack: libc::c_long = 453;
    /// Wakes waiters of a futex, the futex2 interface (Linux 6.7).
    pub const SYS_futex_wake: libc::c_long = 454;
    /// Waits on a futex, the futex2 interface (Linux 6.7).
    pub const SYS_futex_wait: libc::c_long = 455;
    /// Wakes waiters of one futex and moves the others to another, the futex2 interface
    /// (Linux 6.7).
    pub const SYS_futex_requeue: libc::c_long = 456;
    /// Reads the details of a mount named by its 64-bit mount id (Linux 6.8).
    pub const SYS_statmount: libc::c_long = 457;
    /// Lists the ids of the mounts under a mount (Linux 6.8).
    pub const SYS_listmount: libc::c_long = 458;
    /// Reads a security module's attributes of the calling process (Linux 6.8).
    pub const SYS_lsm_get_self_attr: libc::c_long = 459;
    /// Sets a security module's attribute of the calling process (Linux 6.8).
    pub const SYS_lsm_set_self_attr: libc::c_long = 460;
    /// Lists the security modules the kernel runs (Linux 6.8).
    pub const SYS_lsm_list_modules: libc::c_long = 461;
    /// Seals a range of memory: its mappings can no longer be changed or unmapped (Linux
    /// 6.10).
    pub const SYS_mseal: libc::c_long = 462;
    /// Sets an extended attribute of a path relative to a directory fd (Linux 6.13).
    pub const SYS_setxattrat: libc::c_long = 463;
    /// Reads an extended attribute of a path relative to a directory fd (Linux 6.13).
    pub const SYS_getxattrat: libc::c_long = 464;
    /// Lists the extended attributes of a path relative to a directory fd (Linux 6.13).
    pub const SYS_listxattrat: libc::c_long = 465;
    /// Removes an extended attribute of a path relative to a directory fd (Linux 6.13).
    pub const SYS_removexattrat: libc::c_long = 466;
    /// `open_tree` that also sets the mount attributes of the detached copy (Linux 6.15).
    pub const SYS_open_tree_attr: libc::c_long = 467;
    /// Reads a file's inode attributes (`fsxattr`: flags, project id) by a path relative to
    /// a directory fd (Linux 6.17).
    pub const SYS_file_getattr: libc::c_long = 468;
    /// Sets a file's inode attributes (`fsxattr`: flags, project id) by a path relative to
    /// a directory fd (Linux 6.17).
    pub const SYS_file_setattr: libc::c_long = 469;
    /// Lists the ids of the namespaces the caller can see (Linux 6.18).
    pub const SYS_listns: libc::c_long = 470;

    /// Every call of this module, by name (the syscall-table test reads it).
    pub const ALL: &[(&str, libc::c_long)] = &[
        ("cachestat", SYS_cachestat),
        ("fchmodat2", SYS_fchmodat2),
        ("map_shadow_stack", SYS_map_shadow_stack),
        ("futex_wake", SYS_futex_wake),
        ("futex_wait", SYS_futex_wait),
        ("futex_requeue", SYS_futex_requeue),
        ("statmount", SYS_statmount),
        ("listmount", SYS_listmount),
        ("lsm_get_self_attr", SYS_lsm_get_self_attr),
        ("lsm_set_self_attr", SYS_lsm_set_self_attr),
        ("lsm_list_modules", SYS_lsm_list_modules),
        ("mseal", SYS_mseal),
        ("setxattrat", SYS_setxattrat),
        ("getxattrat", SYS_getxattrat),
        ("listxattrat", SYS_listxattrat),
        ("removexattrat", SYS_removexattrat),
        ("open_tree_attr", SYS_open_tree_attr),
        ("file_getattr", SYS_file_getattr),
        ("file_setattr", SYS_file_setattr),
        ("listns", SYS_listns),
    ];
}

/// The newest system call number the tables know (`listns`, Linux 6.18). Every number
/// above it is answered ENOSYS: a call a later kernel adds (a new mount or namespace call)
/// is refused until it is reviewed here, and libc treats it as a kernel without it. Raise
/// it only with each new call put in a table or in [`ALLOWED`] (the syscall-table test).
pub const NEWEST_KNOWN: u32 = nr32(newer::SYS_listns);

/// A system call number as the filter compares it: the 32-bit `nr` of `seccomp_data`.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the numbers of the tables and libc: small and not negative (below 1024), the \
              kernel's int `nr`"
)]
pub(crate) const fn nr32(nr: libc::c_long) -> u32 {
    nr as u32
}

/// Refused with EPERM whatever the arguments.
pub const DENY_EPERM: &[Deny] = &[
    deny!(
        SYS_unshare,
        "new namespaces (a user namespace gives back every capability)"
    ),
    deny!(SYS_setns, "joining another namespace"),
    deny!(SYS_mount, "changing the mount view"),
    deny!(
        SYS_umount2,
        "uncovering what a mount hides (masks, read-only binds)"
    ),
    deny!(SYS_pivot_root, "changing the root"),
    deny!(SYS_chroot, "changing the root"),
    deny!(SYS_open_tree, "new mount API: cloning mounts"),
    deny!(
        SYS_open_tree_attr = newer::SYS_open_tree_attr,
        "new mount API: cloning mounts with new attributes (a writable copy of a read-only one)"
    ),
    deny!(SYS_move_mount, "new mount API: moving mounts"),
    deny!(SYS_fsopen, "new mount API: new file systems"),
    deny!(SYS_fsconfig, "new mount API"),
    deny!(SYS_fsmount, "new mount API"),
    deny!(SYS_fspick, "new mount API: reconfiguring mounts"),
    deny!(
        SYS_mount_setattr,
        "new mount API: making a read-only mount writable"
    ),
    deny!(SYS_bpf, "kernel attack surface; eBPF programs"),
    deny!(
        SYS_perf_event_open,
        "kernel attack surface; observing other processes"
    ),
    deny!(
        SYS_io_uring_setup,
        "io_uring bypasses seccomp for the operations it carries"
    ),
    deny!(SYS_io_uring_enter, "io_uring"),
    deny!(SYS_io_uring_register, "io_uring"),
    deny!(SYS_userfaultfd, "kernel exploitation primitive"),
    deny!(
        SYS_keyctl,
        "the kernel keyring holds credentials of the user"
    ),
    deny!(SYS_add_key, "the kernel keyring"),
    deny!(SYS_request_key, "the kernel keyring"),
    deny!(
        SYS_open_by_handle_at,
        "opens files by handle, around the mount view"
    ),
    deny!(
        SYS_name_to_handle_at,
        "file handles (pairs with open_by_handle_at)"
    ),
    deny!(SYS_kexec_load, "loading a kernel"),
    deny!(SYS_kexec_file_load, "loading a kernel"),
    deny!(SYS_init_module, "loading kernel modules"),
    deny!(SYS_finit_module, "loading kernel modules"),
    deny!(SYS_delete_module, "unloading kernel modules"),
    deny!(SYS_reboot, "rebooting"),
    deny!(SYS_swapon, "swap configuration"),
    deny!(SYS_swapoff, "swap configuration"),
    deny!(SYS_acct, "process accounting"),
    deny!(SYS_syslog, "the kernel log"),
    deny!(SYS_quotactl, "disk quotas"),
    deny!(SYS_quotactl_fd, "disk quotas"),
    deny!(SYS_vhangup, "hanging up the terminal"),
    deny!(SYS_fanotify_init, "watching the whole file system"),
    deny!(SYS_process_vm_writev, "writing another process's memory"),
    deny!(SYS_pidfd_getfd, "taking another process's fds (the init's)"),
    deny!(SYS_lookup_dcookie, "kernel attack surface"),
    #[cfg(target_arch = "x86_64")]
    deny!(SYS_uselib, "legacy loader"),
    #[cfg(target_arch = "x86_64")]
    deny!(SYS_ioperm, "I/O ports"),
    #[cfg(target_arch = "x86_64")]
    deny!(SYS_iopl, "I/O ports"),
];

/// Refused with ENOSYS, so libc and tools fall back as on a kernel without them.
pub const DENY_ENOSYS: &[Deny] = &[
    deny!(
        SYS_clone3,
        "its flags sit in memory seccomp cannot read; libc falls back to clone"
    ),
    deny!(
        SYS_statmount = newer::SYS_statmount,
        "mount tree queries: /proc/self/mountinfo says the same, and tools fall back to it"
    ),
    deny!(
        SYS_listmount = newer::SYS_listmount,
        "mount tree queries: /proc/self/mountinfo says the same, and tools fall back to it"
    ),
    deny!(
        SYS_listns = newer::SYS_listns,
        "namespace listing: lsns falls back to /proc; no tool of a call needs it"
    ),
];

/// Calls a name pattern of the syscall-table test flags (a mount, namespace, keyring or
/// kernel-loading look) that are allowed on purpose, each with why.
pub const ALLOWED: &[(&str, &str)] = &[
    (
        "pkey_alloc",
        "memory protection keys of the caller's own pages, not the keyring",
    ),
    (
        "pkey_free",
        "memory protection keys of the caller's own pages, not the keyring",
    ),
    (
        "pkey_mprotect",
        "memory protection keys of the caller's own pages, not the keyring",
    ),
    (
        "process_vm_readv",
        "reads a process of the call as ptrace does (debuggers); the pid namespace holds only the call, and the init is not dumpable",
    ),
    (
        "ptrace",
        "debuggers and strace of the call's own processes; the pid namespace holds only the call, and the init is not dumpable",
    ),
    (
        "fanotify_mark",
        "works only on an fd of fanotify_init, which is refused",
    ),
    (
        "lsm_list_modules",
        "lists the security modules the kernel runs; loads nothing",
    ),
    (
        "create_module",
        "not implemented by the kernel since 2.6 (it answers ENOSYS)",
    ),
    (
        "query_module",
        "not implemented by the kernel since 2.6 (it answers ENOSYS)",
    ),
];

/// `clone` flags refused (EPERM): every namespace flag.
pub const CLONE_NS_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWUSER", libc::CLONE_NEWUSER as u64),
    ("CLONE_NEWNS", libc::CLONE_NEWNS as u64),
    ("CLONE_NEWPID", libc::CLONE_NEWPID as u64),
    ("CLONE_NEWNET", libc::CLONE_NEWNET as u64),
    ("CLONE_NEWIPC", libc::CLONE_NEWIPC as u64),
    ("CLONE_NEWUTS", libc::CLONE_NEWUTS as u64),
    ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP as u64),
    ("CLONE_NEWTIME", 0x80),
];

/// ioctl requests refused (EPERM), compared on the low 32 bits the kernel reads.
pub const IOCTL_DENY: &[(&str, u64, &str)] = &[
    (
        "TIOCSTI",
        libc::TIOCSTI,
        "typing into the terminal: commands run outside",
    ),
    (
        "TIOCLINUX",
        0x541C,
        "console selection paste: same as TIOCSTI",
    ),
];

/// The socket families `socket` and `socketpair` may make: every other one is answered
/// EAFNOSUPPORT, as a kernel without it would (AF_PACKET, AF_VSOCK, AF_BLUETOOTH, AF_ALG,
/// AF_XDP, AF_CAN, AF_TIPC, AF_RDS, ...: raw frames of the host's interfaces, the hypervisor,
/// and most of the kernel's socket code, which no build or tool of a call needs).
pub const SOCKET_FAMILIES: &[(&str, u32, &str)] = &[
    (
        "AF_UNIX",
        libc::AF_UNIX as u32,
        "local sockets: the call's own, socketpair, the proxy",
    ),
    (
        "AF_INET",
        libc::AF_INET as u32,
        "the call's own loopback and the proxy (its network namespace has nothing else); EPERM under net_view",
    ),
    ("AF_INET6", libc::AF_INET6 as u32, "as AF_INET"),
    (
        "AF_NETLINK",
        libc::AF_NETLINK as u32,
        "only the protocols of NETLINK_PROTOCOLS",
    ),
];

/// The netlink protocols an AF_NETLINK socket may use; any other is answered
/// EPROTONOSUPPORT. Not here, on purpose: NETLINK_GENERIC (wifi, ethtool, wireguard,
/// taskstats), NETLINK_NETFILTER (nftables), NETLINK_AUDIT, NETLINK_KOBJECT_UEVENT (the
/// host's device events), NETLINK_XFRM, NETLINK_CONNECTOR, NETLINK_CRYPTO and the rest:
/// kernel surface that no tool of a call needs, most of it behind capabilities it lacks.
pub const NETLINK_PROTOCOLS: &[(&str, u32, &str)] = &[
    (
        "NETLINK_ROUTE",
        libc::NETLINK_ROUTE as u32,
        "addresses, links and routes: getaddrinfo (AI_ADDRCONFIG), getifaddrs, ip",
    ),
    (
        "NETLINK_SOCK_DIAG",
        libc::NETLINK_SOCK_DIAG as u32,
        "ss: the sockets of the call's own network namespace (the host's under net_view)",
    ),
];

/// Families refused with EPERM under `net_view` (the host's network namespace: TCP is
/// refused by Landlock, UDP and raw sockets only here).
pub const NET_VIEW_DENY: &[u32] = &[libc::AF_INET as u32, libc::AF_INET6 as u32];

/// A classic-BPF program as the kernel takes it.
pub type Program = Vec<libc::sock_filter>;

/// The name of an entry as `seccomp_drop` names it (`keyctl` for `SYS_keyctl`).
fn short(name: &str) -> &str {
    name.strip_prefix("SYS_").unwrap_or(name)
}

/// The audit arch of the build target (what `seccomp_data.arch` holds for a native call).
#[cfg(target_arch = "x86_64")]
pub(crate) const AUDIT_ARCH_NATIVE: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
pub(crate) const AUDIT_ARCH_NATIVE: u32 = 0xc000_00b7;

pub(crate) const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
pub(crate) const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
pub(crate) const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
pub(crate) const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
pub(crate) const RET_K: u16 = 0x06; // BPF_RET | BPF_K
pub(crate) const RET_ALLOW: u32 = 0x7fff_0000;
pub(crate) const RET_ERRNO: u32 = 0x0005_0000;
pub(crate) const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
const RET_ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;
const RET_EAFNOSUPPORT: u32 = RET_ERRNO | libc::EAFNOSUPPORT as u32;
const RET_EPROTONOSUPPORT: u32 = RET_ERRNO | libc::EPROTONOSUPPORT as u32;

/// `seccomp_data` offsets: the number, the arch, and the low 32 bits of an argument (the
/// only bits the rules read: ioctl requests and socket families are 32-bit in the kernel,
/// and every clone flag refused is below bit 32).
pub(crate) const OFF_NR: u32 = 0;
pub(crate) const OFF_ARCH: u32 = 4;
pub(crate) fn off_arg_low(i: u32) -> u32 {
    if cfg!(target_endian = "little") {
        16 + 8 * i
    } else {
        16 + 8 * i + 4
    }
}

pub(crate) fn off_arg_high(i: u32) -> u32 {
    if cfg!(target_endian = "little") {
        16 + 8 * i + 4
    } else {
        16 + 8 * i
    }
}

pub(crate) fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A conditional jump; `None` when an offset does not fit the instruction's 8 bits.
pub(crate) fn jump(code: u16, k: u32, jt: usize, jf: usize) -> Option<libc::sock_filter> {
    Some(libc::sock_filter {
        code,
        jt: u8::try_from(jt).ok()?,
        jf: u8::try_from(jf).ok()?,
        k,
    })
}

/// What a number with a rule gets.
#[derive(Debug, Clone)]
enum Rule {
    /// This return (EPERM or ENOSYS) whatever the arguments.
    Always(u32),
    /// EPERM when the low 32 bits of argument `arg` have any bit of `mask`.
    AnyBit { arg: u32, mask: u32 },
    /// EPERM when the low 32 bits of argument `arg` equal one of `values`.
    OneOf { arg: u32, values: Vec<u32> },
    /// The socket rule ([`SOCKET_FAMILIES`], [`NETLINK_PROTOCOLS`]): a family not listed
    /// gets EAFNOSUPPORT, a netlink protocol not listed EPROTONOSUPPORT, AF_INET and
    /// AF_INET6 `inet` (allowed, or EPERM under net_view).
    Socket { inet: u32 },
    /// A body of another table merged into this program (the write supervisor's, see
    /// [`program_with`]); it ends in returns.
    Body(Program),
}

/// The rules of the tables, by number, without the entries named in `drop`.
fn rules(net_view: bool, drop: &[String]) -> Vec<(u32, Rule)> {
    let dropped = |n: &str| drop.iter().any(|d| d == short(n));
    let mut v: Vec<(u32, Rule)> = DENY_EPERM
        .iter()
        .filter(|d| !dropped(d.name))
        .map(|d| (nr32(d.nr), Rule::Always(RET_EPERM)))
        .chain(
            DENY_ENOSYS
                .iter()
                .filter(|d| !dropped(d.name))
                .map(|d| (nr32(d.nr), Rule::Always(RET_ENOSYS))),
        )
        .collect();
    if !dropped("clone") {
        let mask = CLONE_NS_FLAGS.iter().fold(0u64, |m, &(_, f)| m | f);
        #[allow(
            clippy::cast_possible_truncation,
            reason = "the CLONE_NEW* flags are all in the low 32 bits, the only ones the rule \
                      checks"
        )]
        let mask = mask as u32;
        v.push((nr32(libc::SYS_clone), Rule::AnyBit { arg: 0, mask }));
    }
    if !dropped("ioctl") {
        #[allow(
            clippy::cast_possible_truncation,
            reason = "an ioctl request is 32 bits: the kernel reads `cmd` as an unsigned int"
        )]
        let values = IOCTL_DENY.iter().map(|&(_, r, _)| r as u32).collect();
        v.push((nr32(libc::SYS_ioctl), Rule::OneOf { arg: 1, values }));
    }
    let inet = if net_view { RET_EPERM } else { RET_ALLOW };
    for (name, nr) in [
        ("socket", libc::SYS_socket),
        ("socketpair", libc::SYS_socketpair),
    ] {
        if !dropped(name) {
            v.push((nr32(nr), Rule::Socket { inet }));
        }
    }
    v.sort_by_key(|(nr, _)| *nr);
    v
}

/// A leaf: the number in the accumulator is `nr` or is allowed; every jump stays inside.
fn leaf(nr: u32, rule: &Rule) -> Option<Program> {
    leaf_of(nr, body(rule)?)
}

/// A leaf of a search tree: `jeq nr` falls into `body` (which ends in returns); any other
/// number jumps to the `ret allow` after it.
pub(crate) fn leaf_of(nr: u32, body: Program) -> Option<Program> {
    let mut v = vec![jump(JEQ_K, nr, 0, body.len())?];
    v.extend(body);
    v.push(stmt(RET_K, RET_ALLOW));
    Some(v)
}

/// The body of a rule's leaf.
fn body(rule: &Rule) -> Option<Program> {
    Some(match rule {
        Rule::Always(ret) => vec![stmt(RET_K, *ret)],
        Rule::AnyBit { arg, mask } => vec![
            stmt(LD_W_ABS, off_arg_low(*arg)),
            jump(JSET_K, *mask, 1, 0)?,
            stmt(RET_K, RET_ALLOW),
            stmt(RET_K, RET_EPERM),
        ],
        Rule::OneOf { arg, values } => {
            // Each listed value jumps to the last return; the others fall to the one before.
            let n = values.len();
            let mut b = vec![stmt(LD_W_ABS, off_arg_low(*arg))];
            for (i, v) in values.iter().enumerate() {
                b.push(jump(JEQ_K, *v, n - i, 0)?);
            }
            b.push(stmt(RET_K, RET_ALLOW));
            b.push(stmt(RET_K, RET_EPERM));
            b
        }
        Rule::Socket { inet } => socket_body(*inet)?,
        Rule::Body(b) => b.clone(),
    })
}

/// The body of the socket rule: the family (argument 0), then for AF_NETLINK the protocol
/// (argument 2); every path ends in a return.
///
/// ```text
///   ld arg0; jeq each allowed family other than inet/netlink -> allow
///   jeq AF_INET, AF_INET6 -> inet; jeq AF_NETLINK -> nl; ret EAFNOSUPPORT
///   nl: ld arg2; jeq each protocol -> allow; ret EPROTONOSUPPORT
///   inet: ret INET; allow: ret ALLOW
/// ```
fn socket_body(inet: u32) -> Option<Program> {
    let inet_fams = [libc::AF_INET as u32, libc::AF_INET6 as u32];
    let netlink = libc::AF_NETLINK as u32;
    let plain: Vec<u32> = SOCKET_FAMILIES
        .iter()
        .map(|&(_, f, _)| f)
        .filter(|f| *f != netlink && !inet_fams.contains(f))
        .collect();
    let protos: Vec<u32> = NETLINK_PROTOCOLS.iter().map(|&(_, p, _)| p).collect();
    // Indices: the family block, then the netlink block, then the two last returns.
    let fam_jumps = plain.len() + inet_fams.len() + 1;
    let nl_at = 1 + fam_jumps + 1;
    let inet_at = nl_at + 1 + protos.len() + 1;
    let allow_at = inet_at + 1;
    let mut b = vec![stmt(LD_W_ABS, off_arg_low(0))];
    let to = |b: &Program, target: usize| target - b.len() - 1;
    for f in &plain {
        let j = jump(JEQ_K, *f, to(&b, allow_at), 0)?;
        b.push(j);
    }
    for f in inet_fams {
        let j = jump(JEQ_K, f, to(&b, inet_at), 0)?;
        b.push(j);
    }
    let j = jump(JEQ_K, netlink, to(&b, nl_at), 0)?;
    b.push(j);
    b.push(stmt(RET_K, RET_EAFNOSUPPORT));
    debug_assert_eq!(b.len(), nl_at);
    b.push(stmt(LD_W_ABS, off_arg_low(2)));
    for p in &protos {
        let j = jump(JEQ_K, *p, to(&b, allow_at), 0)?;
        b.push(j);
    }
    b.push(stmt(RET_K, RET_EPROTONOSUPPORT));
    debug_assert_eq!(b.len(), inet_at);
    b.push(stmt(RET_K, inet));
    b.push(stmt(RET_K, RET_ALLOW));
    Some(b)
}

/// A search tree over rules sorted by number (the number in the accumulator): a node is
/// `jge pivot` with the lower half first, a leaf is `leaf(nr, rule)`; every path ends in a
/// return. Its depth, not its length, is what a call walks, and what the kernel walks for
/// each number when it loads the filter (its cache of always-allowed calls): a chain of
/// `jeq` costs that per number, and a load of the filter its length times all numbers.
pub(crate) fn search_tree<R>(
    rules: &[(u32, R)],
    leaf: &dyn Fn(u32, &R) -> Option<Program>,
) -> Option<Program> {
    match rules {
        [] => Some(vec![stmt(RET_K, RET_ALLOW)]),
        [(nr, rule)] => leaf(*nr, rule),
        _ => {
            let (lo, hi) = rules.split_at(rules.len() / 2);
            let lo_t = search_tree(lo, leaf)?;
            let mut v = vec![jump(JGE_K, hi[0].0, lo_t.len(), 0)?];
            v.extend(lo_t);
            v.extend(search_tree(hi, leaf)?);
            Some(v)
        }
    }
}

/// Why a filter could not be compiled or loaded.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// A jump of the tree is longer than classic BPF's 255 instructions.
    #[error("seccomp compile: a jump too far for classic BPF")]
    JumpTooFar,
    /// A call number both merged tables hold.
    #[error("seccomp compile: call number {0} is in both filters' tables")]
    BothTables(u32),
    /// More instructions than the kernel takes.
    #[error("seccomp compile: {0} instructions, over the kernel's 4096")]
    TooLong(usize),
    /// The kernel refused the program.
    #[error("seccomp load: {0}")]
    Load(#[source] std::io::Error),
}

/// The filter of a contained line. With `net_view`, AF_INET and AF_INET6 sockets are
/// refused (EPERM) too.
pub fn program(net_view: bool) -> Result<Program, SeccompError> {
    program_without(net_view, &[])
}

/// The filter without the entries named in `drop` (tests only: the plan's `test_weaken`
/// `seccomp_drop=NAME`, NAME a system call of [`DENY_EPERM`] or [`DENY_ENOSYS`], or
/// `clone`, `ioctl`, `socket`, `socketpair` for the argument rules, or `newest_known` for
/// the ENOSYS of the numbers above [`NEWEST_KNOWN`]).
pub fn program_without(net_view: bool, drop: &[String]) -> Result<Program, SeccompError> {
    program_with(net_view, drop, &[])
}

/// [`program_without`] with the leaves `extra` (number, body) of another table merged into
/// its tree: one filter where the line would load two (the write supervisor's,
/// `crate::supervise::filter::bodies`). Each load costs the kernel a walk of the filter
/// for every number, and each call of the line a run of every filter. A number both
/// tables hold is an error (the stricter answer would have to be merged by hand).
pub fn program_with(
    net_view: bool,
    drop: &[String],
    extra: &[(u32, Program)],
) -> Result<Program, SeccompError> {
    let too_far = || SeccompError::JumpTooFar;
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_NATIVE, 1, 0).ok_or_else(too_far)?,
        // Another arch (i386 through `int 0x80` on x86_64): its numbers mean other calls.
        stmt(RET_K, RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
    ];
    // Then: [x32 jset], [jge NEWEST_KNOWN + 1], `ja` over the two returns they jump to,
    // the tree (the ENOSYS entries are leaves of it).
    let x32 = usize::from(cfg!(target_arch = "x86_64"));
    let newest = usize::from(!drop.iter().any(|d| d == "newest_known"));
    let first = p.len();
    let ja = first + x32 + newest;
    let (ret_eperm, ret_enosys) = (ja + 1, ja + 2);
    if x32 == 1 {
        // x32 calls carry the x86_64 arch with bit 30 set in the number: exact numbers
        // would let `unshare | 0x4000_0000` through on a kernel with CONFIG_X86_X32_ABI.
        p.push(jump(JSET_K, 0x4000_0000, ret_eperm - first - 1, 0).ok_or_else(too_far)?);
    }
    if newest == 1 {
        let at = p.len();
        p.push(jump(JGE_K, NEWEST_KNOWN + 1, ret_enosys - at - 1, 0).ok_or_else(too_far)?);
    }
    p.push(stmt(JA, 2));
    p.push(stmt(RET_K, RET_EPERM));
    p.push(stmt(RET_K, RET_ENOSYS));
    let mut rules = rules(net_view, drop);
    for (nr, body) in extra {
        if rules.iter().any(|(n, _)| n == nr) || *nr > NEWEST_KNOWN {
            return Err(SeccompError::BothTables(*nr));
        }
        rules.push((*nr, Rule::Body(body.clone())));
    }
    rules.sort_by_key(|(nr, _)| *nr);
    p.extend(search_tree(&rules, &leaf).ok_or_else(too_far)?);
    if p.len() > 4096 {
        return Err(SeccompError::TooLong(p.len()));
    }
    Ok(p)
}

/// Loads the filter into the calling thread (no_new_privs must be set).
pub fn load(prog: &Program) -> Result<(), SeccompError> {
    crate::sys::seccomp_filter(prog).map_err(SeccompError::Load)
}

/// A program's bytes as the kernel and `bwrap --add-seccomp-fd` read them.
pub fn program_bytes(p: &Program) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len() * 8);
    for ins in p {
        out.extend_from_slice(&ins.code.to_ne_bytes());
        out.push(ins.jt);
        out.push(ins.jf);
        out.extend_from_slice(&ins.k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "test data: system call numbers, socket families and protocols and errnos, all \
              small and not negative"
)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Program {
        let f = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            TargetArch::try_from(std::env::consts::ARCH).unwrap(),
        )
        .unwrap();
        let p: seccompiler::BpfProgram = f.try_into().unwrap();
        p.into_iter()
            .map(|i| libc::sock_filter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    }

    fn cond(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, v: u64) -> SeccompCondition {
        SeccompCondition::new(arg, len, op, v).unwrap()
    }

    fn socket_calls(drop: &[String]) -> Vec<i64> {
        [
            ("socket", libc::SYS_socket),
            ("socketpair", libc::SYS_socketpair),
        ]
        .into_iter()
        .filter(|(n, _)| !drop.iter().any(|d| d == n))
        .map(|(_, nr)| nr)
        .collect()
    }

    /// The oracle: seccompiler's compilation of the tables, one program per errno (as the
    /// kernel would run several stacked programs), rule for rule: EPERM, EAFNOSUPPORT,
    /// EPROTONOSUPPORT.
    fn seccompiler_programs(net_view: bool, drop: &[String]) -> [Program; 3] {
        use SeccompCmpArgLen::{Dword, Qword};
        use SeccompCmpOp::{Eq, MaskedEq, Ne};
        let dropped = |n: &str| drop.iter().any(|d| d == short(n));
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for d in DENY_EPERM {
            if !dropped(d.name) {
                rules.insert(d.nr, Vec::new());
            }
        }
        if !dropped("clone") {
            let r = CLONE_NS_FLAGS
                .iter()
                .map(|&(_, f)| SeccompRule::new(vec![cond(0, Qword, MaskedEq(f), f)]).unwrap())
                .collect();
            rules.insert(libc::SYS_clone, r);
        }
        if !dropped("ioctl") {
            let r = IOCTL_DENY
                .iter()
                .map(|&(_, req, _)| SeccompRule::new(vec![cond(1, Dword, Eq, req)]).unwrap())
                .collect();
            rules.insert(libc::SYS_ioctl, r);
        }
        let mut afno: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let mut proto: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for nr in socket_calls(drop) {
            if net_view {
                let r = NET_VIEW_DENY
                    .iter()
                    .map(|&f| SeccompRule::new(vec![cond(0, Dword, Eq, f as u64)]).unwrap())
                    .collect();
                rules.insert(nr, r);
            }
            let not_listed = SOCKET_FAMILIES
                .iter()
                .map(|&(_, f, _)| cond(0, Dword, Ne, f as u64))
                .collect();
            afno.insert(nr, vec![SeccompRule::new(not_listed).unwrap()]);
            let mut c = vec![cond(0, Dword, Eq, libc::AF_NETLINK as u64)];
            c.extend(
                NETLINK_PROTOCOLS
                    .iter()
                    .map(|&(_, p, _)| cond(2, Dword, Ne, p as u64)),
            );
            proto.insert(nr, vec![SeccompRule::new(c).unwrap()]);
        }
        [
            compile(rules, libc::EPERM),
            compile(afno, libc::EAFNOSUPPORT),
            compile(proto, libc::EPROTONOSUPPORT),
        ]
    }

    /// A classic-BPF interpreter for the instructions both compilers use, over a
    /// `seccomp_data` (nr, arch, ip, six args): the verdict and how many instructions ran.
    /// Panics on any other instruction, and on a jump out of the program.
    pub(crate) fn run_counted(p: &Program, nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
        let mut data = Vec::with_capacity(64);
        data.extend_from_slice(&nr.to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for a in args {
            data.extend_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
        loop {
            let i = &p[pc];
            steps += 1;
            let jump = |c: bool| 1 + usize::from(if c { i.jt } else { i.jf });
            pc += match i.code {
                0x20 => {
                    let k = i.k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                    1
                }
                0x54 => {
                    acc &= i.k;
                    1
                }
                0x15 => jump(acc == i.k),
                0x25 => jump(acc > i.k),
                0x35 => jump(acc >= i.k),
                0x45 => jump(acc & i.k != 0),
                0x05 => 1 + i.k as usize,
                0x06 => return (i.k, steps),
                c => panic!("unexpected opcode {c:#x} at {pc}"),
            };
        }
    }

    pub(crate) fn run(p: &Program, nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        run_counted(p, nr, arch, args).0
    }

    /// What the programs answer together: the x32 program and the ENOSYS entries (and the
    /// numbers above [`NEWEST_KNOWN`]) first, then the first of seccompiler's programs that
    /// does not allow (they never overlap; a kill of a foreign arch is the same in each).
    fn reference(progs: &[Program; 3], drop: &[String], nr: u32, arch: u32, a: [u64; 6]) -> u32 {
        let native = arch == AUDIT_ARCH_NATIVE;
        if native && cfg!(target_arch = "x86_64") && nr & 0x4000_0000 != 0 {
            return RET_EPERM;
        }
        let enosys = DENY_ENOSYS
            .iter()
            .any(|d| d.nr as u32 == nr && !drop.iter().any(|x| x == short(d.name)));
        let too_new = nr > NEWEST_KNOWN && !drop.iter().any(|x| x == "newest_known");
        if native && (enosys || too_new) {
            return RET_ENOSYS;
        }
        for p in progs {
            let r = run(p, nr, arch, a);
            if r != RET_ALLOW {
                return r;
            }
        }
        RET_ALLOW
    }

    #[test]
    fn reasons_present_and_no_duplicates() {
        for d in DENY_EPERM.iter().chain(DENY_ENOSYS) {
            assert!(!d.reason.is_empty() && d.nr >= 0, "{}", d.name);
        }
        let mut nrs: Vec<_> = DENY_EPERM.iter().map(|d| d.nr).collect();
        nrs.sort();
        nrs.dedup();
        assert_eq!(nrs.len(), DENY_EPERM.len(), "duplicate entry");
    }

    #[test]
    fn filter_answers_as_seccompiler_and_the_old_programs_did() {
        let args_sets: Vec<[u64; 6]> = vec![
            [0; 6],
            [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0],
            [(libc::CLONE_NEWNET | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0],
            [0x80, 0, 0, 0, 0, 0],
            [libc::SIGCHLD as u64, 0, 0, 0, 0, 0],
            [0xffff_ffff_0000_0011, 0, 0, 0, 0, 0],
            [0, libc::TIOCSTI, 0, 0, 0, 0],
            [0, 0x1_0000_0000 | libc::TIOCSTI, 0, 0, 0, 0],
            [0, 0x541C, 0, 0, 0, 0],
            [0, 0x5401, 0, 0, 0, 0],
            [libc::AF_VSOCK as u64, 1, 0, 0, 0, 0],
            [libc::AF_PACKET as u64, 3, 0, 0, 0, 0],
            [libc::AF_BLUETOOTH as u64, 3, 0, 0, 0, 0],
            [libc::AF_ALG as u64, 5, 0, 0, 0, 0],
            [libc::AF_XDP as u64, 3, 0, 0, 0, 0],
            [libc::AF_INET as u64, 1, 0, 0, 0, 0],
            [libc::AF_INET as u64, 3, 255, 0, 0, 0],
            [libc::AF_INET6 as u64, 1, 0, 0, 0, 0],
            [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            [0x7_0000_0000 | libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            [0x7_0000_0000 | libc::AF_PACKET as u64, 1, 0, 0, 0, 0],
            [libc::AF_NETLINK as u64, 3, 0, 0, 0, 0],
            [
                libc::AF_NETLINK as u64,
                3,
                libc::NETLINK_SOCK_DIAG as u64,
                0,
                0,
                0,
            ],
            [
                libc::AF_NETLINK as u64,
                3,
                libc::NETLINK_GENERIC as u64,
                0,
                0,
                0,
            ],
            [
                libc::AF_NETLINK as u64,
                3,
                libc::NETLINK_NETFILTER as u64,
                0,
                0,
                0,
            ],
            [libc::AF_NETLINK as u64, 3, 0x1_0000_0000, 0, 0, 0],
            [u64::MAX; 6],
        ];
        let arches = [AUDIT_ARCH_NATIVE, 0x4000_0003, 0xc000_00b7, 0xc000_003e, 0];
        let drops: Vec<Vec<String>> = vec![
            vec![],
            vec!["keyctl".into(), "clone3".into()],
            vec!["clone".into(), "ioctl".into(), "socket".into()],
            vec![
                "socketpair".into(),
                "newest_known".into(),
                "statmount".into(),
            ],
        ];
        let mut checked = 0;
        for net_view in [false, true] {
            for drop in &drops {
                let ours = program_without(net_view, drop).unwrap();
                let progs = seccompiler_programs(net_view, drop);
                for &arch in &arches {
                    for base in 0..600u32 {
                        for nr in [base, base | 0x4000_0000, base | 0x8000_0000] {
                            for args in &args_sets {
                                assert_eq!(
                                    run(&ours, nr, arch, *args),
                                    reference(&progs, drop, nr, arch, *args),
                                    "nr {nr:#x} arch {arch:#x} args {args:?} net_view {net_view} drop {drop:?}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 500_000, "{checked}");
        // The verdicts the escape suite relies on, spelled out.
        let p = program(false).unwrap();
        let n = AUDIT_ARCH_NATIVE;
        assert_eq!(run(&p, libc::SYS_unshare as u32, n, [0; 6]), RET_EPERM);
        assert_eq!(run(&p, libc::SYS_clone3 as u32, n, [0; 6]), RET_ENOSYS);
        assert_eq!(run(&p, libc::SYS_read as u32, n, [0; 6]), RET_ALLOW);
        let tiocsti = [0, libc::TIOCSTI, 0, 0, 0, 0];
        assert_eq!(run(&p, libc::SYS_ioctl as u32, n, tiocsti), RET_EPERM);
        let sock = |fam: i32, proto: i32| {
            let a = [fam as u64, 1, proto as u64, 0, 0, 0];
            (
                run(&p, libc::SYS_socket as u32, n, a),
                run(&p, libc::SYS_socketpair as u32, n, a),
            )
        };
        for fam in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
            assert_eq!(sock(fam, 0), (RET_ALLOW, RET_ALLOW), "{fam}");
        }
        assert_eq!(sock(libc::AF_NETLINK, 0), (RET_ALLOW, RET_ALLOW));
        let nl = sock(libc::AF_NETLINK, libc::NETLINK_GENERIC);
        assert_eq!(nl, (RET_EPROTONOSUPPORT, RET_EPROTONOSUPPORT));
        for fam in [
            libc::AF_PACKET,
            libc::AF_VSOCK,
            libc::AF_BLUETOOTH,
            libc::AF_ALG,
        ] {
            assert_eq!(sock(fam, 0), (RET_EAFNOSUPPORT, RET_EAFNOSUPPORT), "{fam}");
        }
        let nv = program(true).unwrap();
        let inet = [libc::AF_INET as u64, 1, 0, 0, 0, 0];
        assert_eq!(run(&nv, libc::SYS_socket as u32, n, inet), RET_EPERM);
        let ota = newer::SYS_open_tree_attr as u32;
        assert_eq!(run(&p, ota, n, [0; 6]), RET_EPERM);
        assert_eq!(run(&p, NEWEST_KNOWN + 1, n, [0; 6]), RET_ENOSYS);
        assert_eq!(run(&p, NEWEST_KNOWN, n, [0; 6]), RET_ENOSYS);
        assert_eq!(run(&p, newer::SYS_mseal as u32, n, [0; 6]), RET_ALLOW);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            run(&p, 0x4000_0000 | libc::SYS_unshare as u32, n, [0; 6]),
            RET_EPERM
        );
    }

    #[test]
    fn dropping_an_entry_changes_the_program() {
        let full = program(false).unwrap();
        for name in [
            "keyctl",
            "socket",
            "socketpair",
            "unshare",
            "clone3",
            "clone",
            "ioctl",
            "open_tree_attr",
            "listns",
            "newest_known",
        ] {
            let less = program_without(false, &[name.to_string()]).unwrap();
            assert_ne!(program_bytes(&full), program_bytes(&less), "{name}");
        }
        let same = program_without(false, &["no_such_call".to_string()]).unwrap();
        assert_eq!(program_bytes(&full), program_bytes(&same));
    }

    #[test]
    fn every_call_runs_few_instructions() {
        // The point of the tree: a call the kernel's cache cannot answer runs the filter,
        // and the kernel builds the cache by running it for every number at load time.
        for net_view in [false, true] {
            let p = program(net_view).unwrap();
            let worst = (0..600)
                .map(|nr| run_counted(&p, nr, AUDIT_ARCH_NATIVE, [u64::MAX; 6]).1)
                .max()
                .unwrap();
            assert!(worst <= 20, "{worst} instructions for one call");
            assert!(p.len() < 400, "{} instructions", p.len());
        }
    }

    /// Names that look like a mount, namespace, keyring, bpf or kernel-loading call: each
    /// must be in a table or in [`ALLOWED`].
    fn watched(name: &str) -> bool {
        const PARTS: &[&str] = &[
            "mount",
            "tree",
            "fsopen",
            "fsconfig",
            "fspick",
            "pivot_root",
            "chroot",
            "unshare",
            "clone",
            "key",
            "bpf",
            "module",
            "kexec",
            "io_uring",
            "perf_event",
            "handle_at",
            "userfaultfd",
            "quotactl",
            "swapon",
            "swapoff",
            "reboot",
            "getfd",
            "process_vm",
            "lookup_dcookie",
            "syslog",
            "acct",
            "fanotify",
            "iopl",
            "ioperm",
            "uselib",
            "ptrace",
            "vhangup",
        ];
        name.ends_with("ns") || PARTS.iter().any(|p| name.contains(p))
    }

    /// The argument rules, by the name of their call.
    const ARG_RULES: &[&str] = &["clone", "ioctl", "socket", "socketpair"];

    /// The kernel's system call table as the machine's kernel headers have it
    /// (`#define __NR_name N`), when they are installed.
    fn header_table() -> Option<(String, Vec<(String, i64)>)> {
        let candidates: &[&str] = if cfg!(target_arch = "x86_64") {
            &[
                "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
                "/usr/include/asm/unistd_64.h",
            ]
        } else {
            &[
                "/usr/include/asm-generic/unistd.h",
                "/usr/include/aarch64-linux-gnu/asm/unistd.h",
            ]
        };
        for c in candidates {
            let Ok(text) = std::fs::read_to_string(c) else {
                continue;
            };
            let mut v = Vec::new();
            for l in text.lines() {
                let mut w = l.split_whitespace();
                if w.next() != Some("#define") {
                    continue;
                }
                let (Some(name), Some(nr)) = (w.next(), w.next()) else {
                    continue;
                };
                if let (Some(n), Ok(nr)) = (name.strip_prefix("__NR_"), nr.parse::<i64>()) {
                    v.push((n.to_string(), nr));
                }
            }
            if !v.is_empty() {
                return Some((c.to_string(), v));
            }
        }
        None
    }

    #[test]
    fn filter_handles_every_mount_namespace_and_kernel_call_of_the_syscall_table() {
        let Some((source, header)) = header_table() else {
            assert!(
                std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
                "no kernel headers (linux-libc-dev) to read the syscall table from"
            );
            eprintln!("SKIP: no kernel headers to read the syscall table from");
            return;
        };
        let handled: Vec<&str> = DENY_EPERM
            .iter()
            .chain(DENY_ENOSYS)
            .map(|d| short(d.name))
            .chain(ARG_RULES.iter().copied())
            .chain(ALLOWED.iter().map(|(n, _)| *n))
            .collect();
        // The union of the headers' table and the calls newer than libc knows.
        let mut table: Vec<(String, i64)> = header.clone();
        for &(n, nr) in newer::ALL {
            match table.iter().find(|(m, _)| m == n) {
                Some((_, h)) => assert_eq!(*h, nr, "{n}: {source} says {h}, newer:: says {nr}"),
                None => table.push((n.to_string(), nr)),
            }
        }
        // Our numbers are the kernel's.
        for d in DENY_EPERM.iter().chain(DENY_ENOSYS) {
            if let Some((_, nr)) = table.iter().find(|(n, _)| n == short(d.name)) {
                assert_eq!(*nr, d.nr, "{}: the table says {nr}", d.name);
            }
        }
        // Every number up to NEWEST_KNOWN is named (nothing between the headers and the
        // newest known call is unreviewed), and the headers know nothing newer.
        let header_max = header.iter().map(|(_, nr)| *nr).max().unwrap_or(0);
        assert!(
            header_max <= NEWEST_KNOWN as i64,
            "{source} knows calls up to {header_max}, newer than NEWEST_KNOWN {NEWEST_KNOWN}: \
             review them (newer::, a table or ALLOWED) and raise NEWEST_KNOWN"
        );
        for nr in header_max + 1..=NEWEST_KNOWN as i64 {
            assert!(
                table.iter().any(|(_, n)| *n == nr),
                "number {nr} (at most NEWEST_KNOWN) is in neither {source} nor newer::ALL"
            );
        }
        // Every call that looks like a mount, namespace, keyring or kernel one is decided.
        let mut missing: Vec<&str> = table
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| watched(n) && !handled.contains(n))
            .collect();
        missing.sort();
        assert!(
            missing.is_empty(),
            "calls of the syscall table ({source} and newer::) that no table handles: {missing:?}"
        );
        // Every watched name of the tables exists in the table, so that a typo or a renamed
        // call is seen (x86_64-only entries are cfg'd).
        for n in &handled {
            if watched(n) {
                assert!(
                    table.iter().any(|(m, _)| m == n),
                    "{n} is handled but not in the syscall table"
                );
            }
        }
        // What the filter answers for them: never allowed but by ALLOWED or an argument rule.
        let p = program(false).unwrap();
        for (n, nr) in &table {
            let allowed = ALLOWED.iter().any(|(a, _)| a == n) || ARG_RULES.contains(&n.as_str());
            if watched(n) && !allowed {
                let r = run(&p, *nr as u32, AUDIT_ARCH_NATIVE, [0; 6]);
                assert_ne!(r, RET_ALLOW, "{n} ({nr}) is allowed");
            }
        }
        // And above the newest known, everything is ENOSYS.
        for nr in NEWEST_KNOWN + 1..2048 {
            assert_eq!(run(&p, nr, AUDIT_ARCH_NATIVE, [0; 6]), RET_ENOSYS, "{nr}");
        }
    }
}
