//! The line's last seccomp filter: the calls the init supervises, as a reviewed table with a
//! reason per entry. The kernel runs every filter of a process and takes the strictest
//! answer, so the EPERM filter (`crate::seccomp`) still refuses what it refuses.

use crate::seccomp::{
    AUDIT_ARCH_NATIVE, JEQ_K, JSET_K, LD_W_ABS, OFF_ARCH, OFF_NR, Program, RET_ALLOW, RET_ERRNO,
    RET_K, RET_KILL_PROCESS, jump, leaf_of, off_arg_high, off_arg_low, search_tree, stmt,
};

/// What the filter does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Always sent to the supervisor.
    Notify,
    /// Sent when argument `n` (open flags) asks to write, create or truncate.
    NotifyIfWriteFlags(u32),
    /// Sent when argument `n` (a pointer) is not null.
    NotifyIfArgSet(u32),
    /// Refused with ENOSYS (libc falls back to a call the table has).
    Enosys,
}

/// One supervised call.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    pub nr: libc::c_long,
    pub kind: Kind,
    pub reason: &'static str,
}

macro_rules! entry {
    ($nr:ident, $kind:expr, $reason:expr) => {
        Entry {
            name: stringify!($nr),
            nr: libc::$nr,
            kind: $kind,
            reason: $reason,
        }
    };
}

/// The open flags that make an open a write: O_WRONLY, O_RDWR, O_CREAT, O_TRUNC.
pub const WRITE_FLAGS: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

/// The supervised calls.
pub const TABLE: &[Entry] = &[
    #[cfg(target_arch = "x86_64")]
    entry!(
        SYS_open,
        Kind::NotifyIfWriteFlags(1),
        "opening a path to write or create it"
    ),
    entry!(
        SYS_openat,
        Kind::NotifyIfWriteFlags(2),
        "opening a path to write or create it"
    ),
    #[cfg(target_arch = "x86_64")]
    entry!(SYS_creat, Kind::Notify, "creating a file"),
    entry!(
        SYS_openat2,
        Kind::Enosys,
        "its flags sit in memory the filter cannot read; libc falls back to openat"
    ),
    entry!(SYS_truncate, Kind::Notify, "truncating a path"),
    #[cfg(target_arch = "x86_64")]
    entry!(
        SYS_rename,
        Kind::Notify,
        "renaming over or away a protected path"
    ),
    entry!(
        SYS_renameat,
        Kind::Notify,
        "renaming over or away a protected path"
    ),
    entry!(
        SYS_renameat2,
        Kind::Notify,
        "renaming over or away a protected path"
    ),
    #[cfg(target_arch = "x86_64")]
    entry!(SYS_link, Kind::Notify, "a second name for a protected file"),
    entry!(
        SYS_linkat,
        Kind::Notify,
        "a second name for a protected file"
    ),
    #[cfg(target_arch = "x86_64")]
    entry!(SYS_unlink, Kind::Notify, "removing a protected path"),
    entry!(SYS_unlinkat, Kind::Notify, "removing a protected path"),
    #[cfg(target_arch = "x86_64")]
    entry!(SYS_rmdir, Kind::Notify, "removing a protected directory"),
    #[cfg(target_arch = "x86_64")]
    entry!(
        SYS_mkdir,
        Kind::Notify,
        "making a directory (remembered under .git)"
    ),
    entry!(
        SYS_mkdirat,
        Kind::Notify,
        "making a directory (remembered under .git)"
    ),
    #[cfg(target_arch = "x86_64")]
    entry!(
        SYS_mknod,
        Kind::Notify,
        "making a FIFO or device at a protected path"
    ),
    entry!(
        SYS_mknodat,
        Kind::Notify,
        "making a FIFO or device at a protected path"
    ),
    #[cfg(target_arch = "x86_64")]
    entry!(SYS_symlink, Kind::Notify, "a link at a protected path"),
    entry!(SYS_symlinkat, Kind::Notify, "a link at a protected path"),
    #[cfg(target_arch = "x86_64")]
    entry!(
        SYS_chmod,
        Kind::Notify,
        "making a protected file executable"
    ),
    entry!(
        SYS_fchmodat,
        Kind::Notify,
        "making a protected file executable"
    ),
    entry!(
        SYS_fchmodat2,
        Kind::Notify,
        "making a protected file executable"
    ),
    entry!(
        SYS_fchmod,
        Kind::Notify,
        "making a protected file executable through a read-only fd"
    ),
    entry!(
        SYS_connect,
        Kind::Notify,
        "reaching a path socket outside the call (a host daemon's, whoever bound it)"
    ),
    entry!(
        SYS_sendto,
        Kind::NotifyIfArgSet(4),
        "a datagram to a path socket outside the call (with no address: the peer's)"
    ),
    entry!(
        SYS_sendmsg,
        Kind::Notify,
        "a datagram to a path socket outside the call (the address sits in memory the \
         filter cannot read)"
    ),
    entry!(
        SYS_sendmmsg,
        Kind::Notify,
        "datagrams to path sockets outside the call (addresses in memory)"
    ),
    entry!(
        SYS_umask,
        Kind::Notify,
        "let through at once: it tells the supervisor, which makes files with each caller's \
         umask, that its record of the umasks is stale"
    ),
];

/// Calls of the base filter (`crate::seccomp::DENY_EPERM`) that the supervisor makes: where
/// one filter holds the init and the line (bubblewrap loads it for the whole sandbox), it
/// leaves them out, and the line loads [`line_only`] to refuse them still.
pub const INIT_NEEDS: &[&str] = &["pidfd_getfd", "process_vm_writev"];

/// The filter that refuses [`INIT_NEEDS`] (EPERM, as the base filter does) to the line.
pub fn line_only() -> Program {
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_NATIVE, 1, 0).expect("small jump"),
        stmt(RET_K, RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
    ];
    for nr in [libc::SYS_pidfd_getfd, libc::SYS_process_vm_writev] {
        p.push(jump(JEQ_K, nr as u32, 0, 1).expect("small jump"));
        p.push(stmt(RET_K, RET_ERRNO | libc::EPERM as u32));
    }
    p.push(stmt(RET_K, RET_ALLOW));
    p
}

/// The return value of a notified call.
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// The filter: another arch is killed (the EPERM filter does so too), then a search tree
/// over the table's numbers (`crate::seccomp::search_tree`: a call walks its depth, and so
/// does the kernel for each number when it loads the filter); every other call is allowed.
pub fn program() -> Program {
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_NATIVE, 1, 0).expect("small jump"),
        stmt(RET_K, RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
    ];
    let mut entries: Vec<(u32, Kind)> = TABLE.iter().map(|e| (e.nr as u32, e.kind)).collect();
    entries.sort_by_key(|(nr, _)| *nr);
    let body = |kind: &Kind| -> Program {
        match *kind {
            Kind::Notify => vec![stmt(RET_K, RET_USER_NOTIF)],
            Kind::Enosys => vec![stmt(RET_K, RET_ERRNO | libc::ENOSYS as u32)],
            // Either half of the pointer set: notified.
            Kind::NotifyIfArgSet(arg) => vec![
                stmt(LD_W_ABS, off_arg_low(arg)),
                jump(JEQ_K, 0, 0, 3).expect("small jump"),
                stmt(LD_W_ABS, off_arg_high(arg)),
                jump(JEQ_K, 0, 0, 1).expect("small jump"),
                stmt(RET_K, RET_ALLOW),
                stmt(RET_K, RET_USER_NOTIF),
            ],
            Kind::NotifyIfWriteFlags(arg) => vec![
                stmt(LD_W_ABS, off_arg_low(arg)),
                jump(JSET_K, WRITE_FLAGS, 0, 1).expect("small jump"),
                stmt(RET_K, RET_USER_NOTIF),
                stmt(RET_K, RET_ALLOW),
            ],
        }
    };
    let tree = search_tree(&entries, &|nr, kind| leaf_of(nr, body(kind)))
        .expect("the table's tree has short jumps");
    p.extend(tree);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::JGE_K;

    /// A classic-BPF interpreter for the few instructions the filter uses.
    fn run(p: &Program, nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        run_counted(p, nr, arch, args).0
    }

    /// [`run`], with the number of instructions walked.
    fn run_counted(p: &Program, nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
        loop {
            let ins = p[pc];
            steps += 1;
            match ins.code {
                LD_W_ABS => {
                    let k = ins.k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                    pc += 1;
                }
                JEQ_K | JSET_K | JGE_K => {
                    let hit = match ins.code {
                        JEQ_K => acc == ins.k,
                        JGE_K => acc >= ins.k,
                        _ => acc & ins.k != 0,
                    };
                    pc += 1 + usize::from(if hit { ins.jt } else { ins.jf });
                }
                RET_K => return (ins.k, steps),
                c => panic!("unexpected instruction {c:#x}"),
            }
        }
    }

    #[test]
    fn the_line_keeps_what_the_init_needs_refused() {
        let p = line_only();
        let a = AUDIT_ARCH_NATIVE;
        for nr in [libc::SYS_pidfd_getfd, libc::SYS_process_vm_writev] {
            assert_eq!(
                run(&p, nr as u32, a, [0; 6]),
                RET_ERRNO | libc::EPERM as u32
            );
        }
        assert_eq!(run(&p, libc::SYS_read as u32, a, [0; 6]), RET_ALLOW);
        assert_eq!(
            run(&p, libc::SYS_read as u32, 0x4000_0003, [0; 6]),
            RET_KILL_PROCESS
        );
        // Both are calls the base filter refuses (so leaving them out of it is a change
        // this filter makes up for).
        for name in INIT_NEEDS {
            assert!(
                crate::seccomp::DENY_EPERM
                    .iter()
                    .any(|d| d.name.strip_prefix("SYS_") == Some(name)),
                "{name}"
            );
        }
    }

    /// Every number gets the table's answer (with the arguments that ask for it), and no
    /// call walks more than a search tree's depth: a load of the filter costs the kernel
    /// that walk for each number (a chain of `jeq` cost about 0.1 ms more per launch).
    #[test]
    fn every_number_gets_its_entry_within_the_tree_depth() {
        let p = program();
        let a = AUDIT_ARCH_NATIVE;
        let mut deepest = 0;
        for nr in 0..=crate::seccomp::NEWEST_KNOWN + 8 {
            let entry = TABLE.iter().find(|e| e.nr as u32 == nr);
            // The arguments that make each kind notify: write flags in every argument,
            // a pointer in every argument.
            let args = [u64::from(WRITE_FLAGS) | 0x7fff_0000_0000; 6];
            let (got, steps) = run_counted(&p, nr, a, args);
            deepest = deepest.max(steps);
            let want = match entry.map(|e| e.kind) {
                None => RET_ALLOW,
                Some(Kind::Enosys) => RET_ERRNO | libc::ENOSYS as u32,
                Some(_) => RET_USER_NOTIF,
            };
            assert_eq!(got, want, "number {nr}");
            if let Some(Kind::NotifyIfWriteFlags(_) | Kind::NotifyIfArgSet(_)) =
                entry.map(|e| e.kind)
            {
                assert_eq!(run(&p, nr, a, [0; 6]), RET_ALLOW, "number {nr} without");
            }
        }
        let depth = usize::BITS - TABLE.len().leading_zeros();
        assert!(
            deepest <= 4 + depth as usize + 8,
            "a call walks {deepest} instructions"
        );
    }

    #[test]
    fn reasons_and_no_duplicates() {
        let mut seen = std::collections::BTreeSet::new();
        for e in TABLE {
            assert!(!e.reason.is_empty(), "{}", e.name);
            assert!(seen.insert(e.nr), "{} twice", e.name);
        }
    }

    #[test]
    fn writes_are_notified_and_reads_are_not() {
        let p = program();
        let a = AUDIT_ARCH_NATIVE;
        let openat = libc::SYS_openat as u32;
        let rd = libc::O_RDONLY as u64 | libc::O_CLOEXEC as u64 | libc::O_DIRECTORY as u64;
        assert_eq!(run(&p, openat, a, [0, 0, rd, 0, 0, 0]), RET_ALLOW);
        for f in [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC] {
            assert_eq!(
                run(&p, openat, a, [0, 0, f as u64, 0, 0, 0]),
                RET_USER_NOTIF
            );
        }
        assert_eq!(
            run(&p, libc::SYS_openat2 as u32, a, [0; 6]),
            RET_ERRNO | libc::ENOSYS as u32
        );
        for e in TABLE.iter().filter(|e| e.kind == Kind::Notify) {
            assert_eq!(
                run(&p, e.nr as u32, a, [0; 6]),
                RET_USER_NOTIF,
                "{}",
                e.name
            );
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_close,
            libc::SYS_execve,
        ] {
            assert_eq!(run(&p, nr as u32, a, [0; 6]), RET_ALLOW);
        }
        assert_eq!(run(&p, openat, 0x4000_0003, [0; 6]), RET_KILL_PROCESS);
        // sendto: only with an address (either half of the pointer set).
        let sendto = libc::SYS_sendto as u32;
        assert_eq!(run(&p, sendto, a, [3, 1, 1, 0, 0, 0]), RET_ALLOW);
        for addr in [0x7fff_0000_0000u64, 0x1000, 0x7fff_0000_1000] {
            assert_eq!(
                run(&p, sendto, a, [3, 1, 1, 0, addr, 16]),
                RET_USER_NOTIF,
                "{addr:#x}"
            );
        }
    }
}
