//! The job's cgroups, joined first: `efr-launch --join-cgroup-fd N` (repeated) names
//! `cgroup.procs` files its caller opened for writing (`efr_jobs::cgroup::JobCgroup::
//! join_files`, placed by [`crate::api::Launcher::spawn_opts`]). The launcher writes `0` to
//! each, which moves itself into that cgroup, before it forks, clones or makes any
//! namespace, so the init, the line and everything they start are in the job's cgroups
//! from their first instruction. Each fd is checked first to be a `cgroup.procs` on a
//! cgroup file system (a `0` written to any other file would "succeed" and the line would
//! run outside the cgroup it was promised), and closed after. Any failure is the call's
//! setup error: the line does not run.

use std::os::fd::RawFd;

use crate::sys;

/// `CGROUP_SUPER_MAGIC` (cgroup v1) and `CGROUP2_SUPER_MAGIC`, from `linux/magic.h`.
const CGROUP_MAGICS: [i64; 2] = [0x0027_e0eb, 0x6367_7270];

/// Why a cgroup to join was not joined.
#[derive(Debug, thiserror::Error)]
pub enum JoinCgroupError {
    /// The fd is not open (or not one `fstatfs` can look at).
    #[error("the cgroup to join at fd {fd}: {source}")]
    Fd {
        /// The fd given.
        fd: RawFd,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// The fd is open on something else than a cgroup's `cgroup.procs`.
    #[error("the cgroup to join at fd {fd} is not a cgroup's cgroup.procs (it is {what})")]
    NotCgroupProcs {
        /// The fd given.
        fd: RawFd,
        /// What it is open on (its `/proc/self/fd` link).
        what: String,
    },
    /// The kernel refused the move (a limit, no permission to move between these cgroups).
    #[error("joining the cgroup of {what} (fd {fd}): {source}")]
    Write {
        /// The fd given.
        fd: RawFd,
        /// Its `cgroup.procs` path.
        what: String,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
}

/// Joins the cgroup of each of `fds` (then closes them all).
pub fn join(fds: &[RawFd]) -> Result<(), JoinCgroupError> {
    let r = fds.iter().try_for_each(|&fd| join_one(fd));
    for &fd in fds {
        sys::close(fd);
    }
    r
}

fn join_one(fd: RawFd) -> Result<(), JoinCgroupError> {
    let what = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let fs_type = sys::fstatfs_type(fd).map_err(|source| JoinCgroupError::Fd { fd, source })?;
    if !CGROUP_MAGICS.contains(&fs_type) || !what.ends_with("/cgroup.procs") {
        return Err(JoinCgroupError::NotCgroupProcs { fd, what });
    }
    sys::write_all(fd, b"0").map_err(|source| JoinCgroupError::Write { fd, what, source })
}
