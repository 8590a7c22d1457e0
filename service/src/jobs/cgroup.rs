//! A job's cgroup, as the job's task uses it (TEMPORARY until efr-call's cgroup lands).

use efr_sandbox_wire::job::CgroupOff;

/// What a cgroup says of its job's use.
#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    /// Memory now.
    pub memory_bytes: Option<u64>,
    /// The most memory.
    pub memory_peak: Option<u64>,
    /// CPU time.
    pub cpu_usec: Option<u64>,
}

/// Why a job has no cgroup.
#[derive(Debug, Clone)]
pub struct Off {
    /// The reason.
    pub reason: CgroupOff,
    /// What was seen.
    pub detail: String,
}

/// A job's cgroup.
#[derive(Debug)]
pub struct Handle;

impl Handle {
    /// Use now.
    pub fn usage(&self) -> Usage {
        Usage::default()
    }
    /// An OOM kill happened.
    pub fn memory_limit_hit(&self) -> bool {
        false
    }
    /// Processes in it.
    pub fn pids(&self) -> Vec<u32> {
        Vec::new()
    }
    /// Kills what is left and removes it.
    pub fn remove(self) -> Result<(), String> {
        Ok(())
    }
}
