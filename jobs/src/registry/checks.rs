//! The after-the-call checks of a contained call, run again and again while a job lives.
//!
//! A plain call's finish runs the git guard over its project roots (`efr_call::git_guard`):
//! what the call left where git reads it is taken out of git's way before the user's next
//! command. A job's finish may come a day later, and the user's prompt runs git meanwhile.
//! The write supervisor refuses the code itself at the moment of the write (configs with
//! keys off the safe list, hooks, `exec` lines of todo lists, in every directory git takes
//! as a git dir), so what is left to the guard while a job lives is what no rule of the
//! supervisor can decide at the write (a `.git` file naming a git dir outside the project,
//! a `commondir` pointing git elsewhere, anything a supervisor-less kernel let through):
//! the guard runs every [`EVERY`] while the job runs, on the blocking pool, one pass at a
//! time, and each pass that took something out is a `job_guarded` event of the job. So the
//! bound of the window is `EVERY` plus one pass (measured in `docs/benchmarks.md`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the checks run while a job lives.
pub const EVERY: Duration = Duration::from_secs(2);

/// What the checks need of a job's call.
#[derive(Debug, Clone)]
pub struct Checks {
    /// The call's project roots.
    pub roots: Vec<PathBuf>,
    /// The read-only paths of its launch view (`Plan::read_only_inside`).
    pub view: Vec<String>,
    /// When the call started (Unix ms): what changed since is the call's.
    pub since_ms: u64,
    /// The config its plan was built from.
    pub config: Arc<efr_policy::config::Config>,
    /// The index files its repositories started with.
    pub index: Option<Arc<efr_call::index_flags::Snapshot>>,
}

/// What one pass did.
#[derive(Debug, Default)]
pub struct Pass {
    /// What the guard took out of git's way, one line each.
    pub quarantined: Vec<String>,
    /// The index flags the job set, taken off again (or why not).
    pub index_flags: Vec<efr_sandbox_wire::IndexFlagSet>,
}

impl Checks {
    /// One pass of the guard and of the index flags' check.
    pub fn pass(&self) -> Pass {
        Pass {
            quarantined: efr_call::git_guard::after_call(
                &self.roots,
                &self.view,
                self.since_ms,
                &self.config,
            ),
            index_flags: self
                .index
                .as_ref()
                .map(|i| i.settle().sets)
                .unwrap_or_default(),
        }
    }
}
