//! The line's last seccomp filter: the calls the init supervises, as a reviewed table with a
//! reason per entry. The kernel runs every filter of a process and takes the strictest
//! answer, so the EPERM filter (`crate::restrict::seccomp`) still refuses what it refuses.

use crate::restrict::seccomp::{
    AUDIT_ARCH_NATIVE, JEQ_K, JSET_K, LD_W_ABS, OFF_ARCH, OFF_NR, Program, RET_ALLOW, RET_ERRNO,
    RET_K, RET_KILL_PROCESS, jump, leaf_of, nr32, off_arg_high, off_arg_low, search_tree, stmt,
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
    /// The call as `libc` names it (`SYS_openat`).
    pub name: &'static str,
    /// Its number on the build target.
    pub nr: libc::c_long,
    /// What the filter does with it.
    pub kind: Kind,
    /// Why it is supervised: what the line could write with it.
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

/// Calls of the base filter (`crate::restrict::seccomp::DENY_EPERM`) that the supervisor makes: where
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
        p.push(jump(JEQ_K, nr32(nr), 0, 1).expect("small jump"));
        p.push(stmt(RET_K, RET_ERRNO | libc::EPERM as u32));
    }
    p.push(stmt(RET_K, RET_ALLOW));
    p
}

/// The return value of a notified call.
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// The table's leaves: each number with what the filter answers for it (every body ends
/// in returns), sorted by number.
pub fn bodies() -> Vec<(u32, Program)> {
    let body = |kind: Kind| -> Program {
        match kind {
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
    let mut v: Vec<(u32, Program)> = TABLE.iter().map(|e| (nr32(e.nr), body(e.kind))).collect();
    v.sort_by_key(|(nr, _)| *nr);
    v
}

/// The filter on its own (where the EPERM filter is loaded apart, by bubblewrap): another
/// arch is killed (the EPERM filter does so too), then a search tree over the table's
/// numbers (`crate::restrict::seccomp::search_tree`: a call walks its depth, and so does the kernel
/// for each number when it loads the filter); every other call is allowed. The native
/// backend loads the table merged into the EPERM filter instead
/// (`crate::restrict::seccomp::program_with`).
pub fn program() -> Program {
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_NATIVE, 1, 0).expect("small jump"),
        stmt(RET_K, RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
    ];
    let tree = search_tree(&bodies(), &|nr, body: &Program| leaf_of(nr, body.clone()))
        .expect("the table's tree has short jumps");
    p.extend(tree);
    p
}

#[cfg(test)]
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    reason = "test data: system call numbers and open flags, small and not negative, and an \
              action read as the signed number the kernel compares"
)]
mod tests {
    use super::*;
    use crate::restrict::seccomp::tests::{run, run_counted};

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
                crate::restrict::seccomp::DENY_EPERM
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
        for nr in 0..=crate::restrict::seccomp::NEWEST_KNOWN + 8 {
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

    /// The strictest of two answers, as the kernel takes it across filters (by the action,
    /// as a signed number: KILL_PROCESS first, then ERRNO, USER_NOTIF, ALLOW).
    fn strictest(a: u32, b: u32) -> u32 {
        let action = |r: u32| (r & 0xffff_0000) as i32;
        if action(a) <= action(b) { a } else { b }
    }

    /// The merged program (the native backend's one filter) answers every call as the
    /// EPERM filter and this one loaded apart would together, with and without the network
    /// view, for arguments that hit each kind of rule; and it runs in one filter what took
    /// two.
    #[test]
    fn the_merged_program_answers_as_both_filters() {
        let a = AUDIT_ARCH_NATIVE;
        let own = program();
        let arg_sets: Vec<[u64; 6]> = vec![
            [0; 6],
            [u64::from(WRITE_FLAGS) | 0x7fff_0000_0000; 6],
            [libc::O_RDONLY as u64, 0, libc::O_RDONLY as u64, 0, 0, 0],
            [libc::AF_INET as u64, 1, 0, 0, 0x1000, 16],
            [libc::AF_UNIX as u64, libc::O_WRONLY as u64, 0, 0, 0, 0],
            [libc::AF_NETLINK as u64, 3, 0, 0, 0, 0],
            [
                libc::CLONE_NEWUSER as u64,
                0x5401,
                libc::O_CREAT as u64,
                0,
                0,
                0,
            ],
            [u64::MAX; 6],
        ];
        for net_view in [false, true] {
            let base = crate::restrict::seccomp::program(net_view).unwrap();
            let merged = crate::restrict::seccomp::program_with(net_view, &[], &bodies()).unwrap();
            assert!(merged.len() < base.len() + own.len());
            for nr in
                (0..=crate::restrict::seccomp::NEWEST_KNOWN + 8).chain([0x4000_0002, 0x4000_0101])
            {
                for arch in [a, 0x4000_0003] {
                    for args in &arg_sets {
                        let want =
                            strictest(run(&base, nr, arch, *args), run(&own, nr, arch, *args));
                        assert_eq!(
                            run(&merged, nr, arch, *args),
                            want,
                            "number {nr}, arch {arch:#x}, args {args:x?}, net_view {net_view}"
                        );
                    }
                }
            }
        }
        // A number in both tables is refused, not merged silently.
        let clash = [(libc::SYS_unshare as u32, vec![stmt(RET_K, RET_ALLOW)])];
        assert!(crate::restrict::seccomp::program_with(false, &[], &clash).is_err());
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
