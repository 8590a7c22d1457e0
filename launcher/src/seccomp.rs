//! The seccomp filter of a contained line, as reviewed data: every entry names the system
//! call, what it is refused with, and why. The numbers come from `libc` for the target, so
//! the same table builds for x86_64 and aarch64 (entries missing on one arch are cfg'd).
//!
//! Two programs are loaded (seccomp stacks them): the EPERM program and the ENOSYS program
//! (`clone3`, so libc falls back to `clone`, whose flags the EPERM program can inspect).

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

/// The ENOSYS program.
pub fn enosys_program() -> Result<BpfProgram, String> {
    enosys_program_without(&[])
}

/// The ENOSYS program without the entries named in `drop` (tests only).
pub fn enosys_program_without(drop: &[String]) -> Result<BpfProgram, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = DENY_ENOSYS
        .iter()
        .filter(|d| !drop.iter().any(|x| x == short(d.name)))
        .map(|d| (d.nr, Vec::new()))
        .collect();
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch()?,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    f.try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp compile: {e}"))
}

/// The x32 program (x86_64 only): refuses (EPERM) every system call made through the x32
/// ABI. x32 calls carry the x86_64 audit arch with bit 30 set in the number, so a filter
/// that matches exact numbers (as the two above do) would let `unshare` through as
/// `unshare | 0x4000_0000` on a kernel built with `CONFIG_X86_X32_ABI`. (An i386 call
/// through `int 0x80` has another arch, which seccompiler's programs already kill.)
#[cfg(target_arch = "x86_64")]
pub fn x32_program() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        ins(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        ins(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        ins(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        ins(JSET_K, 0, 1, X32_SYSCALL_BIT),
        ins(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
        ins(RET_K, 0, 0, RET_ALLOW),
    ]
}

/// Every program, in load order.
pub fn programs(net_view: bool) -> Result<Vec<BpfProgram>, String> {
    programs_without(net_view, &[])
}

/// Every program without the entries named in `drop` (tests only, see
/// [`eperm_program_without`]; `clone3` for the ENOSYS program).
pub fn programs_without(net_view: bool, drop: &[String]) -> Result<Vec<BpfProgram>, String> {
    #[allow(unused_mut)]
    let mut progs = vec![
        eperm_program_without(net_view, drop)?,
        enosys_program_without(drop)?,
    ];
    #[cfg(target_arch = "x86_64")]
    progs.push(x32_program());
    Ok(progs)
}

/// Loads the programs into the calling thread (no_new_privs must be set).
pub fn load(progs: &[BpfProgram]) -> Result<(), String> {
    for p in progs {
        seccompiler::apply_filter(p).map_err(|e| format!("seccomp load: {e}"))?;
    }
    Ok(())
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
    fn programs_compile_and_reasons_present() {
        assert!(programs(false).unwrap().iter().all(|p| !p.is_empty()));
        assert!(programs(true).is_ok());
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
    }
}
