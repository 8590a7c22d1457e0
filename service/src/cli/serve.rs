//! `efr-sandbox serve`: the RPC service ([`crate::rpc::server`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::rpc::server::{self, MAX_CONNECTIONS, ServeOptions};
use crate::state::Limits;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The socket to listen on (default: $XDG_RUNTIME_DIR/efr/sandbox.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Tests only: the uids allowed to connect, instead of the service's own uid. May be
    /// repeated. Lets a test be "a peer of another uid" without privileges.
    #[arg(long = "allow-uid", value_name = "UID", hide = true)]
    pub allow_uids: Vec<u32>,
    /// Tests only: also answer debug.sleep, debug.panic and debug.stream.
    #[arg(long, hide = true)]
    pub test_methods: bool,
    /// Tests only: how long a client may leave its answers unread (default 10000).
    #[arg(long, value_name = "MS", hide = true)]
    pub slow_reader_ms: Option<u64>,
    /// Tests only: how long a connection may take to its hello (default 5000).
    #[arg(long, value_name = "MS", hide = true)]
    pub hello_deadline_ms: Option<u64>,
    /// Tests only: how long a frame may take from its first byte to its last (default
    /// 10000).
    #[arg(long, value_name = "MS", hide = true)]
    pub frame_deadline_ms: Option<u64>,
    /// Tests only: connections served at once (default 64).
    #[arg(long, value_name = "N", hide = true)]
    pub max_connections: Option<usize>,
    /// Start each call's launcher when the call comes, instead of keeping one started
    /// ahead, loaded and with its namespaces made, for the next call (two idle processes).
    #[arg(long)]
    pub no_standby: bool,
    /// Stop once no client has been connected for SECS seconds (as a service that
    /// `efr-sandbox run` started does). Default: run until stopped.
    #[arg(long, value_name = "SECS")]
    pub idle_exit: Option<f64>,
}

/// Runs the service until it is stopped.
pub fn run(a: ServeArgs) -> anyhow::Result<i32> {
    let mut limits = Limits::default();
    if let Some(ms) = a.slow_reader_ms {
        limits.slow_reader = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = a.hello_deadline_ms {
        limits.hello_deadline = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = a.frame_deadline_ms {
        limits.frame_deadline = Duration::from_millis(ms.max(1));
    }
    // A long-lived process: the merged cache layers of a call are removed after its
    // finish went out, not before.
    efr_call::caches::clean_up_later(true);
    server::run(ServeOptions {
        socket: a.socket,
        allow_uids: a.allow_uids,
        test_methods: a.test_methods,
        limits,
        max_connections: a.max_connections.unwrap_or(MAX_CONNECTIONS),
        standby: !a.no_standby,
        idle_exit: match a.idle_exit {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => anyhow::bail!("--idle-exit {s}: expected a number of seconds above 0"),
        },
    })
    .map(|()| 0)
}
