//! The seccomp filter of a contained line, as reviewed data: every entry names the system
//! call, what it is refused with, and why. The numbers come from `libc` for the target, so
//! the same table builds for x86_64 and aarch64 (entries missing on one arch are cfg'd).
//!
//! One filter is loaded: a short prelude (x32-ABI calls refused, `clone3` answered ENOSYS so
//! libc falls back to `clone`, whose flags the filter can inspect), then the EPERM program
//! compiled from the tables below.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

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

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("seccomp arch: {e:?}"))
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    v: u64,
) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, len, op, v).map_err(|e| format!("seccomp condition: {e}"))
}

fn rule(c: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(c).map_err(|e| format!("seccomp rule: {e}"))
}

/// The EPERM program. With `net_view`, only AF_UNIX and AF_NETLINK sockets may be made.
pub fn eperm_program(net_view: bool) -> Result<BpfProgram, String> {
    eperm_program_without(net_view, &[])
}

/// The name of an entry as `seccomp_drop` names it (`keyctl` for `SYS_keyctl`).
fn short(name: &str) -> &str {
    name.strip_prefix("SYS_").unwrap_or(name)
}

/// The EPERM program without the entries named in `drop` (tests only: the plan's
/// `test_weaken` `seccomp_drop=NAME`, NAME a system call of [`DENY_EPERM`], or `clone`,
/// `ioctl`, `socket` for the argument rules).
pub fn eperm_program_without(net_view: bool, drop: &[String]) -> Result<BpfProgram, String> {
    let dropped = |n: &str| drop.iter().any(|d| d == short(n));
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for d in DENY_EPERM {
        if !dropped(d.name) {
            rules.insert(d.nr, Vec::new());
        }
    }
    let mut clone_rules = Vec::new();
    for &(_, f) in CLONE_NS_FLAGS {
        clone_rules.push(rule(vec![cond(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(f),
            f,
        )?])?);
    }
    if !dropped("clone") {
        rules.insert(libc::SYS_clone, clone_rules);
    }
    let mut ioctl_rules = Vec::new();
    for &(_, req, _) in IOCTL_DENY {
        ioctl_rules.push(rule(vec![cond(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            req,
        )?])?);
    }
    if !dropped("ioctl") {
        rules.insert(libc::SYS_ioctl, ioctl_rules);
    }
    let mut sock_rules = Vec::new();
    if net_view {
        sock_rules.push(rule(vec![
            cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )?,
            cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::AF_NETLINK as u64,
            )?,
        ])?);
    } else {
        for &(_, fam, _) in SOCKET_DENY {
            sock_rules.push(rule(vec![cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                fam,
            )?])?);
        }
    }
    if !dropped("socket") {
        rules.insert(libc::SYS_socket, sock_rules);
    }
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch()?,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    f.try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp compile: {e}"))
}

/// The audit arch of the build target (what `seccomp_data.arch` holds for a native call).
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_NATIVE: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH_NATIVE: u32 = 0xc000_00b7;

/// The numbers the EPERM program has a rule for (whatever the arguments, or on them).
fn ruled(drop: &[String]) -> Vec<u32> {
    let dropped = |n: &str| drop.iter().any(|d| d == short(n));
    let mut v: Vec<u32> = DENY_EPERM
        .iter()
        .filter(|d| !dropped(d.name))
        .map(|d| d.nr as u32)
        .collect();
    for (name, nr) in [
        ("clone", libc::SYS_clone),
        ("ioctl", libc::SYS_ioctl),
        ("socket", libc::SYS_socket),
    ] {
        if !dropped(name) {
            v.push(nr as u32);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
#[cfg(target_arch = "x86_64")]
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;

fn ins(code: u16, jt: usize, jf: usize, k: u32) -> seccompiler::sock_filter {
    debug_assert!(jt < 256 && jf < 256);
    seccompiler::sock_filter {
        code,
        jt: jt as u8,
        jf: jf as u8,
        k,
    }
}

/// A search tree over the sorted numbers `nrs` (the accumulator holds the number): a number
/// of the list jumps to the EPERM program, which starts `tail` instructions after the
/// tree's end; any other is allowed at once. About log2(n) + 2 instructions run per call,
/// where the EPERM program runs a comparison per rule. Leaves are `jeq nr; ja program;
/// ret allow`; a node is `jge pivot` with the lower half first.
fn tree(nrs: &[u32], tail: usize) -> BpfProgram {
    if nrs.len() <= 1 {
        let mut v = Vec::new();
        if let Some(&nr) = nrs.first() {
            v.push(ins(JEQ_K, 0, 1, nr));
            v.push(ins(JA, 0, 0, (tail + 1) as u32));
        }
        v.push(ins(RET_K, 0, 0, RET_ALLOW));
        return v;
    }
    let (lo, hi) = nrs.split_at(nrs.len() / 2);
    let hi_tree = tree(hi, tail);
    let lo_tree = tree(lo, tail + hi_tree.len());
    let mut v = vec![ins(JGE_K, lo_tree.len(), 0, hi[0])];
    v.extend(lo_tree);
    v.extend(hi_tree);
    v
}

/// The prelude run before the EPERM program, in the same filter (one program to load and
/// to run per system call, instead of three stacked ones). For a native-arch call it loads
/// the number and refuses, with EPERM, any call made through the x32 ABI (x86_64: x32 calls
/// carry the x86_64 audit arch with bit 30 set in the number, so the exact-number EPERM
/// program would let `unshare` through as `unshare | 0x4000_0000` on a kernel built with
/// `CONFIG_X86_X32_ABI`), answers the calls of [`DENY_ENOSYS`] with ENOSYS, allows at once
/// a number the EPERM program has no rule for (a search tree, so the kernel's per-number
/// cache of the filter is cheap to build at load time), and sends the rest on to the EPERM
/// program; so does a call of another arch (whose own arch check kills it, such as i386
/// through `int 0x80`).
fn prelude(drop: &[String]) -> BpfProgram {
    let enosys: Vec<u32> = DENY_ENOSYS
        .iter()
        .filter(|d| !drop.iter().any(|x| x == short(d.name)))
        .map(|d| d.nr as u32)
        .collect();
    let x32 = usize::from(cfg!(target_arch = "x86_64"));
    // Layout: 0 ld arch, 1 jeq native, 2 ja program (another arch), 3 ld nr, [x32 jset],
    // enosys jeqs, ja over the two rets, ret eperm, ret enosys, the tree, then the EPERM
    // program.
    let ja = 4 + x32 + enosys.len();
    let (ret_eperm, ret_enosys) = (ja + 1, ja + 2);
    let t = tree(&ruled(drop), 0);
    let program = ret_enosys + 1 + t.len();
    let mut p = vec![
        ins(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        ins(JEQ_K, 1, 0, AUDIT_ARCH_NATIVE),
        ins(JA, 0, 0, (program - 3) as u32),
        ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
    ];
    #[cfg(target_arch = "x86_64")]
    p.push(ins(JSET_K, ret_eperm - 5, 0, 0x4000_0000));
    for nr in enosys {
        let at = p.len();
        p.push(ins(JEQ_K, ret_enosys - at - 1, 0, nr));
    }
    p.push(ins(JA, 0, 0, 2));
    p.push(ins(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32));
    p.push(ins(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32));
    p.extend(t);
    debug_assert_eq!(p.len(), program);
    let _ = ret_eperm;
    p
}

/// The whole filter: the prelude, then the EPERM program.
pub fn program(net_view: bool) -> Result<BpfProgram, String> {
    program_without(net_view, &[])
}

/// The whole filter without the entries named in `drop` (tests only, see
/// [`eperm_program_without`]; `clone3` for the ENOSYS entry).
pub fn program_without(net_view: bool, drop: &[String]) -> Result<BpfProgram, String> {
    let mut p = prelude(drop);
    p.extend(eperm_program_without(net_view, drop)?);
    if p.len() > 4096 {
        return Err(format!(
            "seccomp compile: {} instructions, over the kernel's 4096",
            p.len()
        ));
    }
    Ok(p)
}

/// Loads the filter into the calling thread (no_new_privs must be set).
pub fn load(prog: &BpfProgram) -> Result<(), String> {
    seccompiler::apply_filter(prog).map_err(|e| format!("seccomp load: {e}"))
}

/// A program's bytes as the kernel and `bwrap --add-seccomp-fd` read them.
pub fn program_bytes(p: &BpfProgram) -> Vec<u8> {
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

    #[test]
    fn program_compiles_and_reasons_present() {
        let p = program(false).unwrap();
        let eperm = eperm_program(false).unwrap();
        assert_eq!(&p[p.len() - eperm.len()..], &eperm[..]);
        assert!(program(true).is_ok());
        for d in DENY_EPERM.iter().chain(DENY_ENOSYS) {
            assert!(!d.reason.is_empty() && d.nr >= 0, "{}", d.name);
        }
        let mut nrs: Vec<_> = DENY_EPERM.iter().map(|d| d.nr).collect();
        nrs.sort();
        nrs.dedup();
        assert_eq!(nrs.len(), DENY_EPERM.len(), "duplicate entry");
    }

    #[test]
    fn dropping_an_entry_changes_the_program() {
        let full = eperm_program(false).unwrap();
        for name in ["keyctl", "socket", "unshare"] {
            let less = eperm_program_without(false, &[name.to_string()]).unwrap();
            assert_ne!(full, less, "{name}");
        }
        let same = eperm_program_without(false, &["no_such_call".to_string()]).unwrap();
        assert_eq!(full, same);
        let whole = program(false).unwrap();
        let no_clone3 = program_without(false, &["clone3".to_string()]).unwrap();
        assert_eq!(whole.len(), no_clone3.len() + 1);
    }

    /// A classic-BPF interpreter for the instructions seccompiler and the prelude use, over
    /// a `seccomp_data` (nr, arch, ip, six args). Panics on any other instruction.
    fn run(p: &BpfProgram, nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        run_counted(p, nr, arch, args).0
    }

    /// [`run`], and how many instructions ran.
    fn run_counted(p: &BpfProgram, nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
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

    /// What the three programs loaded before the merge (EPERM program, ENOSYS program, x32
    /// program) answered together.
    fn reference(eperm: &BpfProgram, nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let native = arch == AUDIT_ARCH_NATIVE;
        if native && cfg!(target_arch = "x86_64") && nr & 0x4000_0000 != 0 {
            return RET_ERRNO | libc::EPERM as u32;
        }
        if native && DENY_ENOSYS.iter().any(|d| d.nr as u32 == nr) {
            return RET_ERRNO | libc::ENOSYS as u32;
        }
        run(eperm, nr, arch, args)
    }

    #[test]
    fn merged_filter_answers_as_the_three_programs_did() {
        let args_sets: Vec<[u64; 6]> = vec![
            [0; 6],
            [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0],
            [(libc::CLONE_NEWNET | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0],
            [libc::SIGCHLD as u64, 0, 0, 0, 0, 0],
            [0, libc::TIOCSTI, 0, 0, 0, 0],
            [0, 0x541C, 0, 0, 0, 0],
            [libc::AF_VSOCK as u64, 1, 0, 0, 0, 0],
            [libc::AF_INET as u64, 1, 0, 0, 0, 0],
            [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            [libc::AF_NETLINK as u64, 3, 0, 0, 0, 0],
            [u64::MAX; 6],
        ];
        let arches = [AUDIT_ARCH_NATIVE, 0x4000_0003, 0xc000_00b7, 0xc000_003e];
        for net_view in [false, true] {
            for drop in [vec![], vec!["keyctl".to_string(), "clone3".to_string()]] {
                let merged = program_without(net_view, &drop).unwrap();
                let eperm = eperm_program_without(net_view, &drop).unwrap();
                let mut checked = 0;
                for &arch in &arches {
                    for base in 0..600u32 {
                        for nr in [base, base | 0x4000_0000] {
                            for args in &args_sets {
                                let want = if drop.iter().any(|d| d == "clone3")
                                    && nr == libc::SYS_clone3 as u32
                                    && arch == AUDIT_ARCH_NATIVE
                                {
                                    run(&eperm, nr, arch, *args)
                                } else {
                                    reference(&eperm, nr, arch, *args)
                                };
                                assert_eq!(
                                    run(&merged, nr, arch, *args),
                                    want,
                                    "nr {nr:#x} arch {arch:#x} args {args:?} net_view {net_view} drop {drop:?}"
                                );
                                checked += 1;
                            }
                        }
                    }
                }
                assert!(checked > 50_000);
            }
        }
        // The verdicts the escape suite relies on, spelled out.
        let p = program(false).unwrap();
        let eperm = RET_ERRNO | libc::EPERM as u32;
        let n = AUDIT_ARCH_NATIVE;
        assert_eq!(run(&p, libc::SYS_unshare as u32, n, [0; 6]), eperm);
        assert_eq!(
            run(&p, libc::SYS_clone3 as u32, n, [0; 6]),
            RET_ERRNO | libc::ENOSYS as u32
        );
        assert_eq!(run(&p, libc::SYS_read as u32, n, [0; 6]), RET_ALLOW);
        assert_eq!(
            run(
                &p,
                libc::SYS_ioctl as u32,
                n,
                [0, libc::TIOCSTI, 0, 0, 0, 0]
            ),
            eperm
        );
        assert_eq!(
            run(&p, libc::SYS_ioctl as u32, n, [0, 0x5401, 0, 0, 0, 0]),
            RET_ALLOW
        );
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            run(&p, 0x4000_0000 | libc::SYS_unshare as u32, n, [0; 6]),
            eperm
        );
    }

    #[test]
    fn an_allowed_call_runs_few_instructions() {
        // The point of the tree: the kernel builds its per-number cache by running the
        // filter for every number of every arch at load time.
        let p = program(false).unwrap();
        let steps = |nr: u32| run_counted(&p, nr, AUDIT_ARCH_NATIVE, [0; 6]).1;
        let worst = (0..450)
            .filter(|&nr| !ruled(&[]).contains(&nr))
            .map(steps)
            .max()
            .unwrap();
        assert!(worst <= 20, "{worst} instructions for an allowed call");
    }
}
