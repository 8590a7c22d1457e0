//! What the service's handlers share: the [`Service`] (paths, policy, the classifier's
//! context, the planned calls, the last check) and the connections' [`Limits`]. Handlers
//! (`rpc/`) and commands (`cli/`) read it; it imports neither.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use efr_policy::config::{Config, Env};
use efr_policy::context::Context;

use crate::paths::ServicePaths;
use crate::policy::Policy;

/// The connections' limits: what one client may hold of the service, and for how long.
/// Every number is here, with its reason (the defaults); `serve`'s hidden test flags
/// shorten the times.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Frames waiting to be written.
    pub queue: usize,
    /// Requests running at once.
    pub inflight: usize,
    /// How long a full queue or one write may wait for the client to read.
    pub slow_reader: Duration,
    /// How long a connection may take to its good `hello`.
    pub hello_deadline: Duration,
    /// How long a frame may take from its first byte to its last.
    pub frame_deadline: Duration,
    /// The bytes of unfinished frames all connections together may hold, beyond
    /// [`Self::frame_free`] each.
    pub frame_budget: usize,
    /// A frame body up to this size is read without the budget.
    pub frame_free: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            queue: 64,
            inflight: 64,
            slow_reader: Duration::from_secs(10),
            // A client sends its hello as soon as it has connected (the CLI and efrd
            // within milliseconds); the CLI itself gives up on a service after 5 s. A
            // connection without one after this holds a slot for nothing.
            hello_deadline: Duration::from_secs(5),
            // The largest frame (16 MiB) takes milliseconds over the local socket; this
            // leaves a client under heavy load hundreds of times that, and frees a
            // stalled client's slot and buffer soon enough that other clients are not
            // refused for long.
            frame_deadline: Duration::from_secs(10),
            // Four frames of the largest size at once: no method's params come near it
            // (the largest real ones are a floor write's 8 KiB edit and a launch line),
            // and it bounds what stalled clients make the service hold to 64 MiB where
            // 64 connections could hold 1 GiB.
            frame_budget: 64 << 20,
            // The size of one read (a connection's read buffer holds that much anyway):
            // the frames of every real request, so that the budget being spent by
            // others never refuses them.
            frame_free: 64 << 10,
        }
    }
}

/// What every connection shares.
#[derive(Debug)]
pub struct Service {
    pub paths: ServicePaths,
    /// Answer the `debug.*` methods (`--test-methods`).
    pub test_methods: bool,
    pub limits: Limits,
    /// What is left of [`Limits::frame_budget`], in bytes, across connections.
    pub frame_budget: Arc<tokio::sync::Semaphore>,
    pub policy: Policy,
    /// The classifier's context for the config in force.
    pub classifier: ContextCache,
    /// Calls handed out by `sandbox.plan`, until `sandbox.finish`.
    pub planned: efr_call::Planned,
    /// The last `sandbox_check` (behind `sandbox.status`; `admin.sandbox_check` runs a new
    /// one). The lock also keeps two checks from running at once.
    pub last_check: tokio::sync::Mutex<Option<efr_sandbox_wire::SandboxCheck>>,
    /// The launcher in standby for the next `sandbox.launch` (see [`efr_call::standby`]);
    /// `None` with `serve --no-standby`.
    pub standby: Option<Arc<efr_call::standby::Standby>>,
    /// The background jobs and the running launches that may become one.
    pub jobs: Arc<efr_jobs::Jobs>,
    /// The pending approvals of the CLI routes' refused calls and the conversations'
    /// standing grants (see [`crate::approvals`]).
    pub approvals: Arc<crate::approvals::Approvals>,
}

impl Service {
    /// How long a conversation's standing grants last after their approval: as long as its
    /// cache layers (`sandbox.conversation_cache_days`).
    pub fn standing_ttl(&self) -> Duration {
        let days = self.policy.config().sandbox.conversation_cache_days.value;
        Duration::from_secs(days.saturating_mul(86400))
    }
}

impl Service {
    /// The context of the service's calls: its config, its runtime dir (conversations and
    /// sockets), the current runtime for their proxies.
    pub fn call_ctx(&self) -> efr_call::Ctx {
        self.call_ctx_with(self.policy.config())
    }

    /// [`Self::call_ctx`] with `config`, the config in force already read.
    pub fn call_ctx_with(
        &self,
        config: std::sync::Arc<efr_policy::config::Config>,
    ) -> efr_call::Ctx {
        efr_call::Ctx {
            config,
            env: self.policy.env().clone(),
            conversations: Some(self.paths.runtime_dir.clone()),
            sockets: Some(self.paths.runtime_dir.clone()),
            handle: tokio::runtime::Handle::current(),
            standby: self.standby.clone(),
        }
    }
}

/// The classifier's context, built once per config in force (it reads the token files
/// and git configs it needs when it is built).
#[derive(Debug, Default)]
pub struct ContextCache {
    cached: Mutex<Option<(Arc<Config>, Arc<Context>)>>,
}

impl ContextCache {
    /// The context for `config`: the cached one when the config is the same.
    pub fn get(&self, config: &Arc<Config>, env: &Env) -> Arc<Context> {
        let mut c = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((cfg, ctx)) = c.as_ref() {
            if Arc::ptr_eq(cfg, config) {
                return ctx.clone();
            }
        }
        let ctx = Arc::new(Context::new(config, env).with_call_env(config, std::env::vars()));
        *c = Some((config.clone(), ctx.clone()));
        ctx
    }
}
