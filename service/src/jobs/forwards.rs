//! A job's port forwards (TEMPORARY until efr-call's forward lands).

use std::sync::Arc;

use super::{Job, Jobs};

/// What forwards a job gets.
#[derive(Debug, Clone)]
pub struct Plan;

/// The running forwards of a job.
#[derive(Debug)]
pub struct Running;

/// Starts the forwards of `job`, whose launcher is `launcher_pid`.
pub fn start(
    _jobs: &Arc<Jobs>,
    _job: &Arc<Job>,
    _plan: &Plan,
    _launcher_pid: u32,
) -> Option<Running> {
    None
}

impl Running {
    /// Stops them.
    pub async fn stop(self, _jobs: &Arc<Jobs>, _job: &Arc<Job>) {}
}
