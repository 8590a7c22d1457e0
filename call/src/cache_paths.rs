//! The cache paths of the config and the files the caches' tools keep beside them: a leaf
//! the layers ([`crate::caches`]) and the making of a first run's caches
//! ([`crate::fresh_caches`]) both read.

use std::path::PathBuf;

use efr_policy::config::Env;

/// Files a cache's tool writes beside the cache, each given to a call that has a layer of
/// that cache as an empty private file of its own: the reviewed list, a reason each.
pub const CACHE_FILES: &[(&str, &str, &str)] = &[
    (
        "~/.cargo/registry",
        "~/.cargo/.package-cache",
        "cargo's download lock: the call's downloads go to its own layer",
    ),
    (
        "~/.cargo/registry",
        "~/.cargo/.package-cache-mutate",
        "cargo's second download lock",
    ),
];
// Not `~/.cargo/.global-cache`, cargo's last-use record: sqlite makes a journal file beside
// it, which a bind of one file cannot give; cargo goes on without the record (a refused
// write of it remains in the finish).

/// A cache path of the config: `~/...` (through the one home expansion) or absolute.
pub(crate) fn expand(p: &str, env: &Env) -> Option<PathBuf> {
    if p.starts_with("~/") || p.starts_with('/') {
        Some(efr_policy::path::expand_home(p, &env.home))
    } else {
        None
    }
}
