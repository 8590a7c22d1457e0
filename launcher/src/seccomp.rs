//! The seccomp filter of a contained line, as reviewed data: every entry names the system
//! call, what it is refused with, and why. The numbers come from `libc` for the target, so
//! the same table builds for x86_64 and aarch64 (entries missing on one arch are cfg'd).
//!
//! The filter is one classic-BPF program compiled here from the tables: the arch check
//! (another arch is killed), x32-ABI calls refused, `clone3` answered ENOSYS (so libc falls
//! back to `clone`, whose flags the filter can read), then a search tree over the numbers
//! with a rule: a number without one is allowed after about log2(rules) comparisons, a
//! number with one ends in its leaf (refused whatever the arguments, or after a look at the
//! one argument its rule reads). Short paths matter twice: every call of the line that the
//! kernel cannot answer from its per-number cache runs the filter, and the kernel builds
//! that cache at load time by running the filter for every number of every arch. The tests
//! check the program against seccompiler's compilation of the same tables.

/// A system call refused whatever its arguments.
#[derive(Debug, Clone, Copy)]
pub struct Deny {
    pub name: &'static str,
    pub nr: libc::c_long,
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

/// Refused with ENOSYS, so libc falls back to a call the EPERM program can inspect.
pub const DENY_ENOSYS: &[Deny] = &[deny!(
    SYS_clone3,
    "its flags sit in memory seccomp cannot read; libc falls back to clone"
)];

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

/// Socket families refused (EPERM).
pub const SOCKET_DENY: &[(&str, u64, &str)] = &[
    (
        "AF_VSOCK",
        libc::AF_VSOCK as u64,
        "reaches the hypervisor and VMs around the network namespace",
    ),
    (
        "AF_PACKET",
        libc::AF_PACKET as u64,
        "raw frames of the host's interfaces",
    ),
];

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
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
pub(crate) const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
pub(crate) const RET_K: u16 = 0x06; // BPF_RET | BPF_K
pub(crate) const RET_ALLOW: u32 = 0x7fff_0000;
pub(crate) const RET_ERRNO: u32 = 0x0005_0000;
pub(crate) const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
const RET_ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

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
    /// EPERM whatever the arguments.
    Always,
    /// EPERM when the low 32 bits of argument `arg` have any bit of `mask`.
    AnyBit { arg: u32, mask: u32 },
    /// EPERM when the low 32 bits of argument `arg` equal one of `values`.
    OneOf { arg: u32, values: Vec<u32> },
    /// EPERM unless the low 32 bits of argument `arg` equal one of `values`.
    NoneOf { arg: u32, values: Vec<u32> },
}

/// The rules of the tables, by number, without the entries named in `drop`.
fn rules(net_view: bool, drop: &[String]) -> Vec<(u32, Rule)> {
    let dropped = |n: &str| drop.iter().any(|d| d == short(n));
    let mut v: Vec<(u32, Rule)> = DENY_EPERM
        .iter()
        .filter(|d| !dropped(d.name))
        .map(|d| (d.nr as u32, Rule::Always))
        .collect();
    if !dropped("clone") {
        let mask = CLONE_NS_FLAGS.iter().fold(0u64, |m, &(_, f)| m | f);
        v.push((
            libc::SYS_clone as u32,
            Rule::AnyBit {
                arg: 0,
                mask: mask as u32,
            },
        ));
    }
    if !dropped("ioctl") {
        v.push((
            libc::SYS_ioctl as u32,
            Rule::OneOf {
                arg: 1,
                values: IOCTL_DENY.iter().map(|&(_, r, _)| r as u32).collect(),
            },
        ));
    }
    if !dropped("socket") {
        let rule = if net_view {
            Rule::NoneOf {
                arg: 0,
                values: vec![libc::AF_UNIX as u32, libc::AF_NETLINK as u32],
            }
        } else {
            Rule::OneOf {
                arg: 0,
                values: SOCKET_DENY.iter().map(|&(_, f, _)| f as u32).collect(),
            }
        };
        v.push((libc::SYS_socket as u32, rule));
    }
    v.sort_by_key(|(nr, _)| *nr);
    v
}

/// A leaf: the number in the accumulator is `nr` or is allowed; every jump stays inside.
fn leaf(nr: u32, rule: &Rule) -> Option<Program> {
    let body: Program = match rule {
        Rule::Always => vec![stmt(RET_K, RET_EPERM)],
        Rule::AnyBit { arg, mask } => vec![
            stmt(LD_W_ABS, off_arg_low(*arg)),
            jump(JSET_K, *mask, 1, 0)?,
            stmt(RET_K, RET_ALLOW),
            stmt(RET_K, RET_EPERM),
        ],
        Rule::OneOf { arg, values } | Rule::NoneOf { arg, values } => {
            // Each listed value jumps to the last return; the others fall to the one before.
            let (other, listed) = match rule {
                Rule::OneOf { .. } => (RET_ALLOW, RET_EPERM),
                _ => (RET_EPERM, RET_ALLOW),
            };
            let n = values.len();
            let mut b = vec![stmt(LD_W_ABS, off_arg_low(*arg))];
            for (i, v) in values.iter().enumerate() {
                b.push(jump(JEQ_K, *v, n - i, 0)?);
            }
            b.push(stmt(RET_K, other));
            b.push(stmt(RET_K, listed));
            b
        }
    };
    // `jeq nr` falls into the body; any other number jumps to the `ret allow` after it.
    let mut v = vec![jump(JEQ_K, nr, 0, body.len())?];
    v.extend(body);
    v.push(stmt(RET_K, RET_ALLOW));
    Some(v)
}

/// A search tree over rules sorted by number: a node is `jge pivot` with the lower half
/// first; every path ends in a return.
fn tree(rules: &[(u32, Rule)]) -> Option<Program> {
    match rules {
        [] => Some(vec![stmt(RET_K, RET_ALLOW)]),
        [(nr, rule)] => leaf(*nr, rule),
        _ => {
            let (lo, hi) = rules.split_at(rules.len() / 2);
            let lo_t = tree(lo)?;
            let mut v = vec![jump(JGE_K, hi[0].0, lo_t.len(), 0)?];
            v.extend(lo_t);
            v.extend(tree(hi)?);
            Some(v)
        }
    }
}

/// The filter of a contained line. With `net_view`, only AF_UNIX and AF_NETLINK sockets
/// may be made.
pub fn program(net_view: bool) -> Result<Program, String> {
    program_without(net_view, &[])
}

/// The filter without the entries named in `drop` (tests only: the plan's `test_weaken`
/// `seccomp_drop=NAME`, NAME a system call of [`DENY_EPERM`], `clone3`, or `clone`, `ioctl`,
/// `socket` for the argument rules).
pub fn program_without(net_view: bool, drop: &[String]) -> Result<Program, String> {
    let too_far = || "seccomp compile: a jump too far for classic BPF".to_string();
    let enosys: Vec<u32> = DENY_ENOSYS
        .iter()
        .filter(|d| !drop.iter().any(|x| x == short(d.name)))
        .map(|d| d.nr as u32)
        .collect();
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_NATIVE, 1, 0).ok_or_else(too_far)?,
        // Another arch (i386 through `int 0x80` on x86_64): its numbers mean other calls.
        stmt(RET_K, RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
    ];
    // Then: [x32 jset], the ENOSYS jeqs, `ja` over the two returns they jump to, the tree.
    let x32 = usize::from(cfg!(target_arch = "x86_64"));
    let first = p.len();
    let ja = first + x32 + enosys.len();
    let (ret_eperm, ret_enosys) = (ja + 1, ja + 2);
    if x32 == 1 {
        // x32 calls carry the x86_64 arch with bit 30 set in the number: exact numbers
        // would let `unshare | 0x4000_0000` through on a kernel with CONFIG_X86_X32_ABI.
        p.push(jump(JSET_K, 0x4000_0000, ret_eperm - first - 1, 0).ok_or_else(too_far)?);
    }
    for nr in enosys {
        let at = p.len();
        p.push(jump(JEQ_K, nr, ret_enosys - at - 1, 0).ok_or_else(too_far)?);
    }
    p.push(stmt(JA, 2));
    p.push(stmt(RET_K, RET_EPERM));
    p.push(stmt(RET_K, RET_ENOSYS));
    p.extend(tree(&rules(net_view, drop)).ok_or_else(too_far)?);
    if p.len() > 4096 {
        return Err(format!(
            "seccomp compile: {} instructions, over the kernel's 4096",
            p.len()
        ));
    }
    Ok(p)
}

/// Loads the filter into the calling thread (no_new_privs must be set).
pub fn load(prog: &Program) -> Result<(), String> {
    crate::sys::seccomp_filter(prog).map_err(|e| format!("seccomp load: {e}"))
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
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    /// The oracle: seccompiler's compilation of the EPERM tables (what the launcher loaded
    /// before it compiled its own filter), rule for rule.
    fn seccompiler_eperm(net_view: bool, drop: &[String]) -> Program {
        let dropped = |n: &str| drop.iter().any(|d| d == short(n));
        let cond = |arg, len, op, v| SeccompCondition::new(arg, len, op, v).unwrap();
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for d in DENY_EPERM {
            if !dropped(d.name) {
                rules.insert(d.nr, Vec::new());
            }
        }
        if !dropped("clone") {
            let r = CLONE_NS_FLAGS
                .iter()
                .map(|&(_, f)| {
                    SeccompRule::new(vec![cond(
                        0,
                        SeccompCmpArgLen::Qword,
                        SeccompCmpOp::MaskedEq(f),
                        f,
                    )])
                    .unwrap()
                })
                .collect();
            rules.insert(libc::SYS_clone, r);
        }
        if !dropped("ioctl") {
            let r = IOCTL_DENY
                .iter()
                .map(|&(_, req, _)| {
                    SeccompRule::new(vec![cond(
                        1,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::Eq,
                        req,
                    )])
                    .unwrap()
                })
                .collect();
            rules.insert(libc::SYS_ioctl, r);
        }
        if !dropped("socket") {
            let r = if net_view {
                vec![
                    SeccompRule::new(vec![
                        cond(
                            0,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::Ne,
                            libc::AF_UNIX as u64,
                        ),
                        cond(
                            0,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::Ne,
                            libc::AF_NETLINK as u64,
                        ),
                    ])
                    .unwrap(),
                ]
            } else {
                SOCKET_DENY
                    .iter()
                    .map(|&(_, fam, _)| {
                        SeccompRule::new(vec![cond(
                            0,
                            SeccompCmpArgLen::Dword,
                            SeccompCmpOp::Eq,
                            fam,
                        )])
                        .unwrap()
                    })
                    .collect()
            };
            rules.insert(libc::SYS_socket, r);
        }
        let f = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
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

    /// A classic-BPF interpreter for the instructions both compilers use, over a
    /// `seccomp_data` (nr, arch, ip, six args): the verdict and how many instructions ran.
    /// Panics on any other instruction, and on a jump out of the program.
    fn run_counted(p: &Program, nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
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

    fn run(p: &Program, nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        run_counted(p, nr, arch, args).0
    }

    /// What the three programs the launcher loaded before (seccompiler's EPERM program, the
    /// ENOSYS program, the x32 program) answered together.
    fn reference(eperm: &Program, drop: &[String], nr: u32, arch: u32, a: [u64; 6]) -> u32 {
        let native = arch == AUDIT_ARCH_NATIVE;
        if native && cfg!(target_arch = "x86_64") && nr & 0x4000_0000 != 0 {
            return RET_EPERM;
        }
        let enosys = DENY_ENOSYS
            .iter()
            .any(|d| d.nr as u32 == nr && !drop.iter().any(|x| x == short(d.name)));
        if native && enosys {
            return RET_ENOSYS;
        }
        run(eperm, nr, arch, a)
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
            [libc::AF_INET as u64, 1, 0, 0, 0, 0],
            [libc::AF_INET6 as u64, 1, 0, 0, 0, 0],
            [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            [0x7_0000_0000 | libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            [libc::AF_NETLINK as u64, 3, 0, 0, 0, 0],
            [u64::MAX; 6],
        ];
        let arches = [AUDIT_ARCH_NATIVE, 0x4000_0003, 0xc000_00b7, 0xc000_003e, 0];
        let drops: Vec<Vec<String>> = vec![
            vec![],
            vec!["keyctl".into(), "clone3".into()],
            vec!["clone".into(), "ioctl".into(), "socket".into()],
        ];
        let mut checked = 0;
        for net_view in [false, true] {
            for drop in &drops {
                let ours = program_without(net_view, drop).unwrap();
                let eperm = seccompiler_eperm(net_view, drop);
                for &arch in &arches {
                    for base in 0..600u32 {
                        for nr in [base, base | 0x4000_0000, base | 0x8000_0000] {
                            for args in &args_sets {
                                assert_eq!(
                                    run(&ours, nr, arch, *args),
                                    reference(&eperm, drop, nr, arch, *args),
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
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            run(&p, 0x4000_0000 | libc::SYS_unshare as u32, n, [0; 6]),
            RET_EPERM
        );
    }

    #[test]
    fn dropping_an_entry_changes_the_program() {
        let full = program(false).unwrap();
        for name in ["keyctl", "socket", "unshare", "clone3", "clone", "ioctl"] {
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
}
