//! The after-call effects on the host, behind one seam: what a call is held to once its
//! line has ended, whatever way it ran. [`AfterCall::start`] takes what they compare
//! against before the line runs (the index files of its repositories, the floor files it
//! may write, the registries' answers the cache merge will need, asked while it runs);
//! [`AfterCall::finish`], the one entry point the finish calls, runs them in order:
//!
//! 1. the git guard: after a contained call that started, the git code it left outside
//!    its view is quarantined ([`crate::git_guard`]) and the index flags it set are undone
//!    ([`crate::index_flags`]);
//! 2. the cache merge: its cache layers merged back, their deletes held
//!    ([`crate::caches`]);
//! 3. the floor watch: the floor files it wrote are reported ([`crate::floor_watch`]).

use std::path::PathBuf;
use std::sync::Arc;

use efr_launcher::plan::{Plan, PlanMode};
use efr_launcher::status::{Outcome, StatusLine};
use efr_policy::config::{Config, Env};
use efr_sandbox_wire::{Finish, RunBackend};

use crate::caches::CallCaches;
use crate::caches::early::Early;
use crate::floor_watch::FloorWatch;
use crate::index_flags::{Repo, Snapshot};

/// What the after-call effects of one call compare against, taken before its line runs.
#[derive(Debug)]
pub struct AfterCall {
    /// The index files of its repositories as it started (`None` for an unsandboxed call:
    /// an approved line's flags are the user's).
    index: Option<Arc<Snapshot>>,
    /// The floor files it may write, as they were before it.
    floors: Option<FloorWatch>,
    /// The registries asked while it runs for what its cache merge will need.
    early: Option<Early>,
}

/// What of the call the after-call effects read at its end.
#[derive(Debug, Clone, Copy)]
pub struct Ended<'a> {
    /// The call's plan (its projects, view, cache layers, grants).
    pub plan: &'a Plan,
    /// The line.
    pub line: &'a str,
    /// The call's project roots.
    pub projects: &'a [String],
    /// The config the call was planned with.
    pub config: &'a Config,
    /// Where the home and the state dir are.
    pub env: &'a Env,
}

impl AfterCall {
    /// Takes, before the line runs, what the effects compare against: the index files of
    /// `repos` (a contained call only), the floor files of `plan`, and starts asking the
    /// registries for what the merge of its cache layers will need.
    pub fn start(plan: &Plan, repos: &[Repo], config: &Config, env: &Env) -> AfterCall {
        let index = (plan.mode != PlanMode::Unsandboxed).then(|| Arc::new(Snapshot::take(repos)));
        let floors = FloorWatch::for_plan(plan, config, env);
        let early = (!plan.caches.is_empty())
            .then(|| Early::start(&plan.caches, &crate::caches::Verify::of(plan, config, env)))
            .flatten();
        AfterCall {
            index,
            floors,
            early,
        }
    }

    /// The index files of its repositories as it started (`None` for an unsandboxed call).
    pub fn index(&self) -> Option<Arc<Snapshot>> {
        self.index.clone()
    }

    /// Runs the after-call effects of a call that ended with `o` (blocking: the git guard
    /// walk and the cache merge), each putting its part in `fin`: the git guard, the cache
    /// merge, the floor watch, in that order.
    pub fn finish(self, o: &Outcome, fin: &mut Finish, call: Ended<'_>) {
        let AfterCall {
            index,
            floors,
            early,
        } = self;
        if let Some(since_ms) = contained_start(o) {
            guard_git(since_ms, index.as_deref(), fin, call);
        }
        merge_caches(early, fin, call);
        if let Some(w) = floors {
            w.finish(&mut fin.sandbox_summary);
        }
    }
}

/// When the line started in a sandbox (its launcher said `started`, not unsandboxed).
fn contained_start(o: &Outcome) -> Option<u64> {
    match &o.started {
        Some(StatusLine::Started {
            start_time_ms,
            backend,
            ..
        }) if *backend != RunBackend::Unsandboxed => Some(*start_time_ms),
        _ => None,
    }
}

/// Quarantines the git code the call left outside its view (changed since `since_ms`) and
/// undoes the index flags it set (`index`: its repositories' index files as it started).
fn guard_git(since_ms: u64, index: Option<&Snapshot>, fin: &mut Finish, call: Ended<'_>) {
    let roots: Vec<PathBuf> = call.projects.iter().map(PathBuf::from).collect();
    fin.sandbox_summary.quarantined =
        crate::git_guard::after_call(&roots, &call.plan.read_only_inside, since_ms, call.config);
    if let Some(i) = index {
        i.settle().into_summary(&mut fin.sandbox_summary);
    }
}

/// Merges the call's cache layers back (with the registries' answers `early` asked while
/// it ran) and holds their deletes.
fn merge_caches(early: Option<Early>, fin: &mut Finish, call: Ended<'_>) {
    let mut caches = CallCaches::of(call.plan, call.config, call.env);
    if let Some(e) = early {
        caches.verify.early = Arc::new(e.finish());
    }
    caches.finish(fin, call.line);
}
