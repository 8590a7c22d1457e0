//! Where jobs get their cgroups: the service's job cgroups, found once when it starts
//! ([`crate::cgroup::Cgroups::find`], what a killed service left removed), and a cgroup
//! per job with the config's limits, or why the job has none (the wire's `cgroup.off`).

use crate::cgroup::{CgroupLimits, Cgroups, JobCgroup, OffReason};
use efr_sandbox_wire::job::CgroupOff;

/// Why a job has no cgroup of its own.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no cgroup of its own for the job ({reason:?}): {detail}")]
pub struct Off {
    /// The wire's reason.
    pub reason: CgroupOff,
    /// What was seen, one line.
    pub detail: String,
}

impl Off {
    /// A cgroup that could not be made or joined (`error`, with what failed).
    pub fn failed(e: crate::cgroup::CgroupError) -> Off {
        Off {
            reason: CgroupOff::Error,
            detail: e.to_string(),
        }
    }
}

fn wire(r: OffReason) -> CgroupOff {
    match r {
        OffReason::Config => CgroupOff::Config,
        OffReason::NoDelegation => CgroupOff::NoDelegation,
        OffReason::V1Only => CgroupOff::V1Only,
        OffReason::NoControllers => CgroupOff::NoControllers,
        OffReason::Error => CgroupOff::Error,
    }
}

/// The service's job cgroups, or why it has none.
#[derive(Debug)]
pub struct Place(Result<Cgroups, crate::cgroup::Off>);

impl Place {
    /// Finds them (and removes what a service that died left there).
    pub fn find() -> Place {
        let found = Cgroups::find();
        if let Ok(c) = &found {
            c.remove_stale();
        }
        Place(found)
    }

    /// A cgroup named `name` with `limits`, or why none (`enabled`: the config's
    /// `jobs.cgroups`).
    pub fn job(&self, enabled: bool, name: &str, limits: &CgroupLimits) -> Result<JobCgroup, Off> {
        if !enabled {
            return Err(Off {
                reason: CgroupOff::Config,
                detail: "jobs.cgroups is false in the config".into(),
            });
        }
        match &self.0 {
            Ok(c) => c.create(name, limits).map_err(Off::failed),
            Err(o) => Err(Off {
                reason: wire(o.reason),
                detail: o.detail.clone(),
            }),
        }
    }
}
