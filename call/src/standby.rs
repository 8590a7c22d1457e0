//! The service's launcher in standby: one `efr-launch` started ahead of the next call
//! ([`efr_launcher::api::Launcher::spawn_warm`]), loaded, its init waiting in fresh
//! namespaces, so that a `sandbox.launch` does not wait for the launcher's exec nor for the
//! namespaces' creation (the network namespace's above all). Only the service keeps one:
//! a process that makes one call (the CLI, the probe) would pay for it on the same call.
//!
//! One waits at a time. A call that fits (contained, native backend, a network of its own:
//! what the waiting init was made for) takes it; the next is started once that call has
//! ended, off its path. Any other call, a call that finds none (two at once), or one whose
//! standby has ended, starts its launcher as before. Nothing of a call is in the standby
//! before it takes it: the plan, the view, the stdio and the environment all come with the
//! call, and the init waits in the host's mount namespace, which it copies only when its
//! call is announced or comes. The standby ends with the service (it watches its caller),
//! and when dropped.

use std::sync::Mutex;

use efr_launcher::api::{Launcher, Warm};
use efr_launcher::plan::{NetMode, Plan, PlanMode};
use efr_policy::config::Config;
use efr_sandbox_wire::{Backend, CallParams, Grant};

/// The launcher in standby, when one waits.
#[derive(Debug, Default)]
pub struct Standby {
    slot: Mutex<Option<Warm>>,
}

/// Whether a call of `plan` can take the launcher in standby.
pub fn fits(plan: &Plan) -> bool {
    plan.mode == PlanMode::Contained
        && plan.backend == Backend::Native
        && plan.net() == NetMode::Own
}

/// Whether a call of these params will likely fit, before its plan is made: contained, not
/// asking for bubblewrap (by its params or the config), no grant of the host's network.
pub fn likely_fits(p: &CallParams, config: &Config) -> bool {
    let bwrap = match p.backend.as_deref() {
        Some(b) => b == "bwrap",
        None => config.sandbox.backend.value == efr_policy::config::BackendChoice::Bwrap,
    };
    !p.unsandboxed
        && !bwrap
        && !p
            .grants
            .iter()
            .any(|g| matches!(g, Grant::OpenNetwork | Grant::NetView))
}

impl Standby {
    /// Starts a launcher in standby when none waits (`launcher` is the one calls use). A
    /// launcher that cannot be started leaves the slot empty: calls start their own.
    pub fn fill(&self, launcher: &Launcher) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_mut().is_some_and(Warm::alive) {
            return;
        }
        *slot = launcher.spawn_warm().ok();
    }

    /// Takes the launcher in standby for a call whose plan is not made yet, and announces
    /// the call to it (its init builds the part of the view no plan changes meanwhile):
    /// when one waits and the call will likely fit ([`likely_fits`]). It serves that call
    /// or none ([`Call::start_with`](crate::Call::start_with) drops it when the plan does
    /// not fit after all).
    pub fn announce(&self, p: &CallParams, config: &Config) -> Option<Warm> {
        if !likely_fits(p, config) {
            return None;
        }
        let warm = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        warm.announce();
        Some(warm)
    }

    /// Takes the launcher in standby for a call of `plan`, when the call fits and one waits.
    pub fn take(&self, plan: &Plan) -> Option<Warm> {
        if !fits(plan) {
            return None;
        }
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Ends the launcher in standby, if one waits.
    pub fn clear(&self) {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
