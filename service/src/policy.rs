//! The service's link to efr-policy: the config in force and `explain`.
//!
//! The service reads the config file at start and again whenever the file changes (its
//! size, mtime or inode, checked before each use). A file that fails to load is reported
//! on stderr and the last good config stays in force (defaults when none was ever good).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};

use efr_policy::config::{Config, ConfigStore, Env};
use efr_policy::explain;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{ExplainParams, ExplainResult};

/// What identifies one version of the config file: (dev, ino, size, mtime); `None` when
/// there is no file.
type Stamp = Option<(u64, u64, u64, i64, i64)>;

fn stamp(path: &std::path::Path) -> Stamp {
    fs::metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

#[derive(Debug)]
struct Loaded {
    store: ConfigStore,
    stamp: Stamp,
}

/// The policy the service answers with.
#[derive(Debug)]
pub struct Policy {
    env: Env,
    loaded: Mutex<Loaded>,
}

impl Policy {
    /// Loads the config for this environment. A broken file is reported on stderr; the
    /// defaults are in force until it is fixed.
    pub fn load(env: Env) -> Policy {
        let path = env.config_file();
        let stamp = stamp(&path);
        let store = ConfigStore::open(path);
        if let Some(e) = store.last_error() {
            eprintln!("efr-sandbox: {e}; the built-in defaults are in force until it is fixed");
        }
        Policy {
            env,
            loaded: Mutex::new(Loaded { store, stamp }),
        }
    }

    /// The environment the config was read for.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The config in force, read again first when the file changed.
    pub fn config(&self) -> Arc<Config> {
        self.fresh().store.config()
    }

    /// The config file as it is now: `Err` with why when it fails to load (`efr-sandbox
    /// run` refuses to run a call then, as it does without the service).
    pub fn config_as_is(&self) -> Result<Arc<Config>, String> {
        let l = self.fresh();
        match l.store.last_error() {
            Some(e) => Err(e.to_string()),
            None => Ok(l.store.config()),
        }
    }

    /// The loaded config, read again first when the file changed.
    fn fresh(&self) -> std::sync::MutexGuard<'_, Loaded> {
        let mut l = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let now = stamp(l.store.path());
        if now != l.stamp {
            l.stamp = now;
            if let Err(e) = l.store.reload() {
                eprintln!("efr-sandbox: {e}; the last good config stays in force");
            }
        }
        l
    }

    /// `sandbox.explain`.
    /// Every failure of explain is about its input (an empty path, a relative cwd, ...):
    /// `invalid`.
    pub fn explain(&self, params: ExplainParams) -> Result<ExplainResult, ErrorBody> {
        // The files the user answered `mask` to are masked in every call: explained so.
        let config = efr_call::launch::with_surface_answers(&self.config(), &self.env)
            .map_err(|e| ErrorBody::new(ErrorCode::Internal, e.to_string()))?;
        explain::explain(&params, &config, &self.env)
            .map_err(|e| ErrorBody::new(ErrorCode::Invalid, e.to_string()))
    }
}
