//! Real caches through the sandbox: each call's per-call layer, the merge of what an
//! independent source verifies after the call, the conversation's own layer for the rest,
//! and the deletes the call made, held until the user applies them.
//!
//! - Before a contained call, [`prepare`] gives each existing cache of `sandbox.caches`
//!   (outside the call's writable roots and masks) a layer: `upper` and `work` dirs in a
//!   private (0700) per-call directory of the service's state dir
//!   (`$XDG_STATE_HOME/efr-sandbox/layers/ID`), which the launcher mounts as overlayfs on
//!   the cache in the call's user namespace (`efr_launcher::plan::CacheLayer`); a call
//!   with a conversation gets that conversation's layer of the cache
//!   ([`conversation`]) as a lower dir above the real cache.
//! - After the call, [`after_call`] merges into each cache, under a lock per cache, only
//!   what the registry the call was granted confirms (`merge.rs`, [`RULES`]: cargo's
//!   `.crate` files and index caches, npm's content and index lines), each file written to
//!   a temp name in a staging dir, fsynced and renamed into place, every directory of the
//!   real cache opened with `openat2` beneath the cache with no link followed. The rest of
//!   the upper dir is moved into the conversation's layer, or dropped with the call's.
//!   Each top-level addition in an `installs` cache is an exit record (a `write` the user
//!   may approve). A full disk stops the merge: the layer is kept and the error reported.
//! - The merged layers' dirs are removed after the merge, or by a thread of the service
//!   after the call's finish ([`clean_up_later`]), the call's lock held until then.
//! - A whiteout or an opaque directory (a delete) is not applied: it becomes a held delete
//!   (`<state>/cache-deletes.json`, written atomically), an exit of source and kind
//!   `cache_delete`, and an entry of the summary's `cache_deletes`. [`apply`]
//!   (`sandbox.cache_delete_apply`, `efr-sandbox cache apply`) applies approved ones.

pub mod cargo;
pub mod conversation;
pub mod early;
pub mod fetch;
mod held;
mod merge;
pub mod npm;

pub use crate::cache_paths::CACHE_FILES;
pub(crate) use crate::cache_paths::expand;
use held::hold;
pub use held::{Applied, HeldDelete, apply, delete_record, held, store_path};

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use efr_launcher::plan::CacheLayer;
use efr_policy::config::{CacheMerge, Config, Env};
use efr_sandbox_wire::{
    Action, ExitKind, ExitRecord, ExitSource, Facts, JudgedBy, Judgement, Needs, Target,
    TargetClass, TargetOp, Verdict,
};
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// Most entries of the summary's `cache_deletes` (then `cache_deletes_more`), as its
/// `blocked` list.
pub const MAX_SUMMARY_DELETES: usize = 32;
/// Most held deletes remembered (the oldest go first).
pub const MAX_HELD: usize = 10_000;
/// Most `installs` exit records of one call (then one line says how many more).
pub const MAX_INSTALLS: usize = 16;
/// The prefix of the merge's temp files (in its staging dir only).
const TEMP_PREFIX: &str = ".efr-merge-";
/// The xattr overlayfs marks an opaque directory with in a user namespace (`userxattr`).
const OPAQUE_XATTR: &str = "user.overlay.opaque";

/// What the merge verifies and merges, by cache kind: the one reviewed list, a reason
/// each. Everything else of a call's layer is never merged: it stays with the call's
/// conversation, or goes with the call.
#[derive(Debug)]
pub struct Rule {
    /// The kind of cache (`merge` of its `sandbox.caches` entry).
    pub merge: CacheMerge,
    /// The files, below the cache.
    pub pattern: &'static str,
    /// What is checked, against what.
    pub check: &'static str,
}

/// The merge's rules.
pub const RULES: &[Rule] = &[
    Rule {
        merge: CacheMerge::Cargo,
        pattern: "cache/DIR/NAME-VERSION.crate",
        check: "its sha256 is the cksum of NAME VERSION in the index file the service fetches \
                from DIR's registry (the index decides where NAME ends); never replaced",
    },
    Rule {
        merge: CacheMerge::Cargo,
        pattern: "index/DIR/.cache/PREFIX/NAME",
        check: "cargo's index cache: its entries are exactly the lines of the index file the \
                service fetches (the same set, each under its own version)",
    },
    Rule {
        merge: CacheMerge::Cargo,
        pattern: "index/DIR/config.json",
        check: "byte-equal to the registry's config.json",
    },
    Rule {
        merge: CacheMerge::Npm,
        pattern: "_cacache/content-v2/ALGO/XX/YY/REST",
        check: "its sha512, sha384 or sha256 is its path; never replaced",
    },
    Rule {
        merge: CacheMerge::Npm,
        pattern: "_cacache/index-v5/XX/YY/REST",
        check: "each new line: a tarball's integrity and URL are those of the registry's \
                packument, a document's integrity that of the body the registry serves; its \
                content is in the cache",
    },
];

/// Why preparing or merging a layer failed.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// A directory or file of the call's layers could not be made.
    #[error("cannot create the cache layer {path}: {source}")]
    Create {
        /// What was being made (the layers' dir, a layer, or a private cache file).
        path: String,
        /// What the file system said.
        source: std::io::Error,
    },
}

/// Why applying held deletes failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The path named is not among the held deletes.
    #[error("{path} is not a held cache delete")]
    Unknown {
        /// The path named.
        path: String,
    },
    /// The path is gone or is not what the call deleted (another inode, type or change
    /// time): none of the deletes asked for is applied.
    #[error("{path} changed since the call deleted it (stale): not applied")]
    Stale {
        /// The held delete's path.
        path: String,
    },
    /// Removing the path failed (the deletes before it are applied).
    #[error("cannot apply the delete of {path}: {source}")]
    Io {
        /// The held delete's path.
        path: String,
        /// What the removal said.
        source: std::io::Error,
    },
    /// The held deletes' file or its lock could not be read or written.
    #[error("cannot read or write the held deletes {path}: {source}")]
    Store {
        /// The held deletes' file (`store_path`).
        path: String,
        /// What the file system said.
        source: std::io::Error,
    },
}

impl ApplyError {
    /// The request named something it may not (the RPC's `invalid`).
    pub fn is_invalid(&self) -> bool {
        matches!(self, ApplyError::Unknown { .. } | ApplyError::Stale { .. })
    }
}

/// The service's state dir: `$XDG_STATE_HOME/efr-sandbox`, else `~/.local/state/efr-sandbox`.
pub fn state_dir(env: &Env) -> PathBuf {
    match std::env::var_os("XDG_STATE_HOME").filter(|v| Path::new(v).is_absolute()) {
        Some(s) => PathBuf::from(s).join("efr-sandbox"),
        None => env.home.join(".local/state/efr-sandbox"),
    }
}

fn private_dirs(p: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)?;
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o700))
}

fn under(p: &Path, root: &Path) -> bool {
    p.starts_with(root)
}

/// The caches a contained call gets a layer for: each existing directory of
/// `sandbox.caches`, resolved, not inside a writable root (there it is writable already)
/// nor at or below a mask, not below another cache of the list, and spelled so that
/// overlayfs takes it.
pub fn caches_for(
    config: &Config,
    env: &Env,
    writable: &[String],
    masks: &[String],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for e in &config.sandbox.caches {
        let Some(p) = expand(&e.value, env) else {
            continue;
        };
        let Some(c) = efr_policy::path::canonical_existing(&p) else {
            continue;
        };
        if !c.is_dir() || c == Path::new("/") {
            continue;
        }
        let s = c.to_string_lossy();
        if s.contains([',', ':', '\\']) {
            continue;
        }
        // The call has its own /tmp, /dev and /proc: a cache there is not in its view.
        if ["/tmp", "/dev", "/proc", "/sys"]
            .iter()
            .any(|d| under(&c, Path::new(d)))
            || under(&c, &env.tmp)
        {
            continue;
        }
        if writable.iter().any(|w| under(&c, Path::new(w)))
            || masks
                .iter()
                .any(|m| under(&c, Path::new(m)) || under(&p, Path::new(m)))
        {
            continue;
        }
        out.push(c);
    }
    out.sort();
    out.dedup();
    // Only the outermost of nested caches.
    let mut kept: Vec<PathBuf> = Vec::new();
    for c in out {
        if !kept.iter().any(|k| under(&c, k)) {
            kept.push(c);
        }
    }
    kept
}

/// What the merge needs to verify a call's layers, beyond the layers: the merge kinds of
/// its caches, the hosts it was granted and how their names resolve, the user's cargo
/// registries; kept in the call dir's manifest for a merge by another process.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verify {
    /// Per layer, the merge kinds of its cache and of the caches inside it (path, kind).
    pub kinds: Vec<Vec<(String, String)>>,
    /// The call's host grants: the only hosts the merge fetches from.
    pub granted: Vec<fetch::Granted>,
    /// `[network] resolve`.
    pub resolve: BTreeMap<String, Vec<std::net::IpAddr>>,
    /// The sparse registries of the user's own cargo config.
    pub cargo_registries: Vec<String>,
    /// `sandbox.conversation_cache_days`.
    pub conversation_days: u64,
    /// `git.safe_config_keys`: what a git config in a conversation's layer may hold
    /// ([`conversation::move_in`]; empty in an older manifest: the launcher's short list).
    #[serde(default)]
    pub git_safe_keys: Vec<String>,
    /// What the registries answered while the call ran ([`early`]): the merge asks only for
    /// the rest. Not kept in the manifest (a later merge asks again).
    #[serde(skip)]
    pub early: std::sync::Arc<early::Answers>,
}

impl Verify {
    /// What a plan's merge needs, from the config it was built with.
    pub fn of(plan: &efr_launcher::plan::Plan, config: &Config, env: &Env) -> Verify {
        let paths: Vec<PathBuf> = plan.caches.iter().map(|l| PathBuf::from(&l.path)).collect();
        Verify::new(&paths, &plan.grants, config, env)
    }

    /// What the merge of the layers of the caches `caches` of a call with `grants` needs.
    pub fn new(
        caches: &[PathBuf],
        grants: &[efr_sandbox_wire::Grant],
        config: &Config,
        env: &Env,
    ) -> Verify {
        let entries: Vec<(PathBuf, CacheMerge)> = config
            .sandbox
            .caches
            .iter()
            .filter_map(|e| {
                let p = expand(&e.value, env)?;
                let p = std::fs::canonicalize(&p).unwrap_or(p);
                Some((p, e.merge.unwrap_or_default()))
            })
            .collect();
        let kinds = caches
            .iter()
            .map(|l| {
                let mut k: Vec<(PathBuf, CacheMerge)> = entries
                    .iter()
                    .filter(|(p, _)| p.starts_with(l))
                    .cloned()
                    .collect();
                // The innermost first: a path's kind is that of the deepest cache holding it.
                k.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
                k.into_iter()
                    .map(|(p, m)| (p.to_string_lossy().into_owned(), m.as_str().to_string()))
                    .collect()
            })
            .collect();
        let mut resolve: BTreeMap<String, Vec<std::net::IpAddr>> = BTreeMap::new();
        for r in &config.network.resolve {
            resolve.entry(r.name.clone()).or_default().push(r.address);
        }
        Verify {
            kinds,
            granted: fetch::Granted::of(grants),
            resolve,
            cargo_registries: cargo::user_registries(&env.home),
            conversation_days: config.sandbox.conversation_cache_days.value,
            git_safe_keys: config.git_safe_keys(),
            early: Default::default(),
        }
    }

    fn kinds_of(&self, i: usize) -> Vec<(PathBuf, CacheMerge)> {
        self.kinds
            .get(i)
            .map(|k| {
                k.iter()
                    .map(|(p, m)| (PathBuf::from(p), CacheMerge::parse(m).unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What the service keeps of a contained call for its merge: its layers, its masks in
/// force, what verifies them.
#[derive(Debug, Clone, Default)]
pub struct CallCaches {
    /// The service's state dir, where the layers and the held deletes are.
    pub state: PathBuf,
    /// The plan's cache layers, one per cache.
    pub layers: Vec<CacheLayer>,
    /// The masks in force in the call's view: the merge takes nothing below them.
    pub masks: Vec<String>,
    /// What the merge checks the layers' content with.
    pub verify: Verify,
    /// The caches left read-only for the call (no layer could be made), one line each.
    pub read_only: Vec<String>,
}

impl CallCaches {
    /// The caches of a prepared plan.
    pub fn of(plan: &efr_launcher::plan::Plan, config: &Config, env: &Env) -> CallCaches {
        let read_only = plan.caches_read_only.clone();
        if plan.caches.is_empty() {
            return CallCaches {
                read_only,
                ..CallCaches::default()
            };
        }
        CallCaches {
            state: state_dir(env),
            layers: plan.caches.clone(),
            masks: efr_launcher::view::masks_in_force(plan),
            verify: Verify::of(plan, config, env),
            read_only,
        }
    }

    /// Merges the layers after the call and folds what it gave into `fin`.
    pub fn finish(&self, fin: &mut efr_sandbox_wire::Finish, line: &str) {
        let refused = &mut fin.sandbox_summary.cache_refused;
        refused.extend(self.read_only.iter().cloned());
        if self.layers.is_empty() {
            return;
        }
        let (mut m, cleanup) = merge_and_hold(&self.state, &self.layers, &self.masks, &self.verify);
        if CLEAN_UP_LATER.load(std::sync::atomic::Ordering::Relaxed) {
            janitor(cleanup);
        } else {
            // A layer that could not be removed is said in the finish, as before.
            m.refused.extend(cleanup.run());
        }
        fold(&m, fin, line);
    }
}

/// Whether merged layers are removed by a thread of their own after the call's finish
/// ([`clean_up_later`]) rather than before it.
static CLEAN_UP_LATER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Removes the merged layers of later calls on a thread of this process, after their
/// finish is made: the service (`serve`) turns this on. Removing a layer's empty dirs
/// costs about 0.3 ms on ext4 (four `rmdir`s, each a journal entry), a cache each, on the
/// path of every call's finish; a home with four caches paid 1.2 ms of each
/// `sandbox.launch` for it. The call's lock is held until its dirs are gone, so no other
/// merge (of this process or another) takes them for a dead call's. A process that ends
/// first leaves them to the next merge's sweep, as a killed one does. The CLI removes them
/// before it exits (off: nothing would be left to a thread of a process about to end).
pub fn clean_up_later(on: bool) {
    CLEAN_UP_LATER.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Hands `c` to the janitor thread (started on first use); done here when it cannot be.
fn janitor(c: Cleanup) {
    use std::sync::mpsc::{Sender, channel};
    static TX: std::sync::OnceLock<Option<Sender<Cleanup>>> = std::sync::OnceLock::new();
    let tx = TX.get_or_init(|| {
        let (tx, rx) = channel::<Cleanup>();
        std::thread::Builder::new()
            .name("efr-layer-cleanup".into())
            .spawn(move || {
                for c in rx {
                    for line in c.run() {
                        eprintln!("efr-sandbox: {line}");
                    }
                }
            })
            .ok()
            .map(|_| tx)
    });
    let c = match tx {
        Some(tx) => match tx.send(c) {
            Ok(()) => return,
            Err(e) => e.0,
        },
        None => c,
    };
    c.run();
}

/// Gives a contained plan its caches' layers (none for an unsandboxed one), with its
/// conversation's layers when it has one.
pub fn attach(
    plan: &mut efr_launcher::plan::Plan,
    config: &Config,
    env: &Env,
    conversation: Option<&str>,
) -> Result<(), LayerError> {
    if plan.mode != efr_launcher::plan::PlanMode::Contained {
        return Ok(());
    }
    let mut writable = plan.projects.clone();
    for g in &plan.grants {
        if let efr_sandbox_wire::Grant::Write { path } = g {
            writable.push(path.clone());
        }
    }
    writable.extend(plan.scratch.iter().cloned());
    let masks = efr_launcher::view::masks_in_force(plan);
    crate::fresh_caches::make_missing(config, env, &plan.line, &writable, &masks);
    let caches = caches_for(config, env, &writable, &masks);
    let verify = Verify::new(&caches, &plan.grants, config, env);
    let prepared = prepare(&state_dir(env), &caches, &masks, conversation, &verify);
    plan.caches = prepared.layers;
    plan.caches_read_only = prepared.read_only;
    // The files beside a layered cache, where they exist (plain files, not links).
    let Some(call) = plan.caches.first().and_then(call_dir) else {
        return Ok(());
    };
    for (i, (cache, file, _)) in CACHE_FILES.iter().enumerate() {
        let (Some(cache), Some(file)) = (expand(cache, env), expand(file, env)) else {
            continue;
        };
        let Ok(cache) = std::fs::canonicalize(&cache) else {
            continue;
        };
        if !plan.caches.iter().any(|c| Path::new(&c.path) == cache) {
            continue;
        }
        if !std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file())
            || masks.iter().any(|m| under(&file, Path::new(m)))
            || writable.iter().any(|w| under(&file, Path::new(w)))
        {
            continue;
        }
        let private = call.join("files").join(i.to_string());
        let made = private_dirs(&call.join("files")).and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&private)
                .map(drop)
        });
        if let Err(e) = made {
            let e = LayerError::Create {
                path: private.display().to_string(),
                source: e,
            };
            plan.caches_read_only.push(read_only_note(&file, &e));
            continue;
        }
        plan.cache_files.push(efr_launcher::plan::CacheFile {
            path: file.to_string_lossy().into_owned(),
            private: private.to_string_lossy().into_owned(),
        });
    }
    Ok(())
}

/// The layers [`prepare`] made, and the caches it could not give one.
#[derive(Debug, Default)]
pub struct Prepared {
    /// One layer per cache that got one.
    pub layers: Vec<CacheLayer>,
    /// The caches that got none, one line each (the cache and why): read-only in the
    /// call, which runs all the same.
    pub read_only: Vec<String>,
}

/// Makes a layer for each cache, in a new private per-call dir under the state dir, with
/// the conversation's layer of each cache when the call has a conversation. `verify` is
/// kept in the call dir's manifest for a merge by another process.
///
/// A full disk (or any other failure to make a layer) degrades, never blocks: the cache
/// whose layer cannot be made gets none and stays read-only for the call, its half-made
/// dirs removed; when the call dir, its lock or its manifest cannot be made, every cache
/// does. The call runs either way (the `rm` that would free the space included).
pub fn prepare(
    state: &Path,
    caches: &[PathBuf],
    masks: &[String],
    conversation: Option<&str>,
    verify: &Verify,
) -> Prepared {
    let mut out = Prepared::default();
    if caches.is_empty() {
        return out;
    }
    let all_read_only = |out: &mut Prepared, e: &LayerError| {
        out.layers.clear();
        out.read_only = caches.iter().map(|c| read_only_note(c, e)).collect();
    };
    let (call, lock) = match call_dir_locked(state) {
        Ok(v) => v,
        Err(e) => {
            all_read_only(&mut out, &e);
            return out;
        }
    };
    let mut kinds = Vec::new();
    for (i, c) in caches.iter().enumerate() {
        let d = call.join(i.to_string());
        match make_layer(state, &d, c, conversation) {
            Ok(l) => {
                out.layers.push(l);
                kinds.push(verify.kinds.get(i).cloned().unwrap_or_default());
            }
            Err(e) => {
                let _ = remove_layer(&d);
                out.read_only.push(read_only_note(c, &e));
            }
        }
    }
    let manifest = Manifest {
        layers: out.layers.clone(),
        masks: masks.to_vec(),
        verify: Verify {
            kinds,
            ..verify.clone()
        },
    };
    let mp = call.join(CALL_MANIFEST);
    let written = match out.layers.is_empty() {
        true => Ok(()),
        false => std::fs::write(&mp, serde_json::to_vec(&manifest).unwrap_or_default()),
    };
    if let Err(e) = written {
        all_read_only(
            &mut out,
            &LayerError::Create {
                path: mp.display().to_string(),
                source: e,
            },
        );
    }
    if out.layers.is_empty() {
        let _ = remove_layer(&call);
        return out;
    }
    held_locks().insert(call, lock);
    out
}

/// The summary's line of a cache left read-only for a call.
fn read_only_note(cache: &Path, e: &LayerError) -> String {
    format!("{}: read-only in this call: {e}", cache.display())
}

/// A new private call dir under `state`'s `layers`, with its lock already held: a sweep
/// never takes a dir being made for a dead call's (a dir with neither lock nor manifest is
/// only removed once older than [`HALF_MADE_AGE`]).
fn call_dir_locked(state: &Path) -> Result<(PathBuf, crate::owner::Held), LayerError> {
    let create = |p: &Path| {
        let p = p.display().to_string();
        move |e| LayerError::Create { path: p, source: e }
    };
    let id = crate::sys::random_hex(8).map_err(create(state))?;
    let call = state.join("layers").join(id);
    private_dirs(&call).map_err(create(&call))?;
    let lock_path = call.join(CALL_LOCK);
    match crate::owner::hold(&lock_path) {
        Ok(l) => Ok((call, l)),
        Err(e) => {
            let _ = remove_layer(&call);
            Err(create(&lock_path)(e))
        }
    }
}

/// The layer of cache `c` in `d`: its `upper` (with the cache's mode) and `work` dirs, and
/// the conversation's layer of the cache when the call has one.
fn make_layer(
    state: &Path,
    d: &Path,
    c: &Path,
    conversation: Option<&str>,
) -> Result<CacheLayer, LayerError> {
    let create = |p: &Path| {
        let p = p.display().to_string();
        move |e| LayerError::Create { path: p, source: e }
    };
    let (upper, work) = (d.join("upper"), d.join("work"));
    for p in [&upper, &work] {
        private_dirs(p).map_err(create(p))?;
    }
    // The overlay's root takes the upper dir's mode: the cache's own (the call dir above
    // is the private one).
    if let Ok(m) = std::fs::metadata(c) {
        let mode = m.mode() & 0o7777 & !(libc::S_ISUID | libc::S_ISGID);
        std::fs::set_permissions(&upper, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .map_err(create(&upper))?;
    }
    let conversation = match conversation {
        Some(id) => {
            let l = conversation::layer(state, id, c).map_err(create(state))?;
            Some(l.to_string_lossy().into_owned())
        }
        None => None,
    };
    Ok(CacheLayer {
        path: c.to_string_lossy().into_owned(),
        upper: upper.to_string_lossy().into_owned(),
        work: work.to_string_lossy().into_owned(),
        conversation,
    })
}

/// A call dir with neither a held lock nor a manifest (left by a service that failed or
/// died while making it) is removed by a sweep once it is this old; younger, it may be
/// one being made.
const HALF_MADE_AGE: std::time::Duration = std::time::Duration::from_secs(600);

const CALL_LOCK: &str = "lock";
const CALL_MANIFEST: &str = "call.json";

/// What a call dir holds besides its layers: enough for another merge to finish it.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    layers: Vec<CacheLayer>,
    masks: Vec<String>,
    /// Absent in the manifest of an older service: nothing is then verified, so nothing
    /// is merged.
    #[serde(default)]
    verify: Verify,
}

type Locks = std::collections::HashMap<PathBuf, crate::owner::Held>;

fn held_locks() -> std::sync::MutexGuard<'static, Locks> {
    static L: std::sync::OnceLock<std::sync::Mutex<Locks>> = std::sync::OnceLock::new();
    L.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The call dir of a layer (`layers/ID/N/upper`).
fn call_dir(l: &CacheLayer) -> Option<PathBuf> {
    Path::new(&l.upper)
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
}

/// Merges the layers of calls whose service died (their lock is free), then removes them.
fn sweep(state: &Path, own: &BTreeSet<PathBuf>, m: &mut Merged) {
    let Ok(rd) = std::fs::read_dir(state.join("layers")) else {
        return;
    };
    for e in rd.flatten() {
        let dir = e.path();
        if own.contains(&dir) || held_locks().contains_key(&dir) {
            continue;
        }
        let lock = match crate::owner::take_if_free(&dir.join(CALL_LOCK)) {
            Ok(Some(l)) => Some(l),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            _ => continue,
        };
        let Ok(man) = std::fs::read(dir.join(CALL_MANIFEST))
            .map_err(|_| ())
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).map_err(|_| ()))
        else {
            // Half made (no manifest, or no lock): nothing to merge; removed once old
            // enough not to be one being made.
            if is_older(&dir, HALF_MADE_AGE) {
                if let Err(e) = remove_layer(&dir) {
                    m.refused.push(format!(
                        "{}: cannot remove a half-made layer: {e}",
                        dir.display()
                    ));
                }
            }
            drop(lock);
            continue;
        };
        let Some(lock) = lock else {
            continue;
        };
        // Only layers of this very dir (the manifest is the service's own, in its masked
        // state dir, but a path is checked before it is used).
        let mut verify = man.verify;
        let mut layers = Vec::new();
        let mut kinds = Vec::new();
        for (i, l) in man.layers.into_iter().enumerate() {
            if call_dir(&l).as_ref() == Some(&dir) && own_conversation(state, &l) {
                kinds.push(verify.kinds.get(i).cloned().unwrap_or_default());
                layers.push(l);
            }
        }
        verify.kinds = kinds;
        let mut cleanup = Cleanup::default();
        merge_layers(state, &layers, &man.masks, &verify, m, &mut cleanup);
        m.refused.extend(cleanup.run());
        drop(lock);
    }
}

/// Whether `dir` was last changed more than `age` ago (not when its time cannot be read).
fn is_older(dir: &Path, age: std::time::Duration) -> bool {
    std::fs::symlink_metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|e| e > age)
}

/// Whether a layer's conversation layer (if any) is one of the state dir's.
fn own_conversation(state: &Path, l: &CacheLayer) -> bool {
    l.conversation.as_ref().is_none_or(|c| {
        let c = Path::new(c);
        c.parent()
            .and_then(Path::parent)
            .is_some_and(|d| d == state.join("conversations"))
    })
}

/// A program a call installed in an `installs` cache: a top-level addition (or change).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    /// Its path in the real cache.
    pub path: String,
    /// Whether it changed what the real cache had there (else it is new).
    pub changed: bool,
}

/// What merging a call's layers gave.
#[derive(Debug, Default)]
pub struct Merged {
    /// The deletes held (not applied).
    pub deletes: Vec<HeldDelete>,
    /// One line per entry refused or error met (what, where, why).
    pub refused: Vec<String>,
    /// The additions in `installs` caches.
    pub installs: Vec<Install>,
    /// Whether the call has a conversation (what was not merged is kept for it).
    pub conversation: bool,
}

fn lock(state: &Path, name: &str) -> std::io::Result<nix::fcntl::Flock<File>> {
    let dir = state.join("locks");
    private_dirs(&dir)?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join(name))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from(e))
}

/// A short stable name of a cache path (for its lock and staging dir).
pub(crate) fn key(cache: &Path) -> String {
    let h = sha2::Sha256::digest(cache.as_os_str().as_encoded_bytes());
    hex(&h[..8])
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Merges each layer of a finished call into its cache, then removes the layers that
/// merged completely (with their per-call dir once empty). `masks` are the call's masks
/// in force: a path at or below one is never created.
pub fn after_call(
    state: &Path,
    layers: &[CacheLayer],
    masks: &[String],
    verify: &Verify,
) -> Merged {
    let (mut m, cleanup) = merge_and_hold(state, layers, masks, verify);
    m.refused.extend(cleanup.run());
    m
}

/// [`after_call`] but the removal of the merged layers, which the [`Cleanup`] does (its
/// call's lock held until then).
fn merge_and_hold(
    state: &Path,
    layers: &[CacheLayer],
    masks: &[String],
    verify: &Verify,
) -> (Merged, Cleanup) {
    let mut m = Merged {
        conversation: layers.iter().any(|l| l.conversation.is_some()),
        ..Default::default()
    };
    let mut cleanup = Cleanup::default();
    merge_layers(state, layers, masks, verify, &mut m, &mut cleanup);
    let own: BTreeSet<PathBuf> = layers.iter().filter_map(call_dir).collect();
    for d in &own {
        if let Some(l) = held_locks().remove(d) {
            cleanup.locks.push(l);
        }
    }
    sweep(state, &own, &mut m);
    conversation::expire(state, verify.conversation_days.max(1));
    if !m.deletes.is_empty() {
        if let Err(e) = hold(state, &m.deletes) {
            m.refused.push(e.to_string());
        }
    }
    (m, cleanup)
}

/// What is left of merged layers: their dirs to remove, then their calls' dirs, then
/// their calls' locks to let go.
#[derive(Debug, Default)]
struct Cleanup {
    /// Layer dirs (`layers/ID/N`) merged completely.
    layers: Vec<PathBuf>,
    /// Call dirs (`layers/ID`) with no layer kept.
    calls: Vec<PathBuf>,
    locks: Vec<crate::owner::Held>,
}

impl Cleanup {
    /// Removes them; gives a line for each layer it could not remove (the next merge's
    /// sweep tries again).
    fn run(self) -> Vec<String> {
        let mut failed = Vec::new();
        let mut kept = BTreeSet::new();
        for d in &self.layers {
            if let Err(e) = remove_layer(d) {
                failed.push(format!("cannot remove the layer {}: {e}", d.display()));
                if let Some(c) = d.parent() {
                    kept.insert(c.to_path_buf());
                }
            }
        }
        for d in self.calls.iter().filter(|d| !kept.contains(*d)) {
            let _ = std::fs::remove_dir_all(d.join("files"));
            let _ = std::fs::remove_file(d.join(CALL_MANIFEST));
            let _ = std::fs::remove_file(d.join(CALL_LOCK));
            let _ = std::fs::remove_dir(d);
        }
        drop(self.locks);
        failed
    }
}

/// Merges layers (of one call dir or more) and removes those merged; a call dir with
/// no layer left goes too.
fn merge_layers(
    state: &Path,
    layers: &[CacheLayer],
    masks: &[String],
    verify: &Verify,
    m: &mut Merged,
    cleanup: &mut Cleanup,
) {
    let mut call_dirs = BTreeSet::new();
    let mut kept = BTreeSet::new();
    for (i, l) in layers.iter().enumerate() {
        let upper = Path::new(&l.upper);
        let Some(cd) = call_dir(l) else { continue };
        call_dirs.insert(cd.clone());
        if !upper.is_dir() {
            continue;
        }
        match merge::merge_one(state, l, verify.kinds_of(i), masks, verify, m) {
            Ok(()) => {
                if let Some(d) = upper.parent() {
                    cleanup.layers.push(d.to_path_buf());
                }
            }
            Err(e) => {
                m.refused.push(format!(
                    "merge of {} stopped, its layer kept at {} (the next merge tries again): {e}",
                    l.path, l.upper
                ));
                kept.insert(cd);
            }
        }
    }
    cleanup.calls.extend(call_dirs.difference(&kept).cloned());
}

/// Removes a layer dir (overlayfs leaves `work/work` with mode 0).
fn remove_layer(d: &Path) -> std::io::Result<()> {
    let ww = d.join("work/work");
    if ww.is_dir() {
        let _ = std::fs::set_permissions(&ww, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    }
    std::fs::remove_dir_all(d)
}

/// Folds a merge into a finish: the held deletes as exits and the summary's bounded
/// `cache_deletes`, the refusals in `cache_refused`.
pub fn fold(m: &Merged, fin: &mut efr_sandbox_wire::Finish, line: &str) {
    let s = &mut fin.sandbox_summary;
    for d in &m.deletes {
        if s.cache_deletes.len() < MAX_SUMMARY_DELETES {
            s.cache_deletes.push(d.path.clone());
        } else {
            s.cache_deletes_more += 1;
        }
    }
    s.cache_refused.extend(m.refused.iter().cloned());
    if m.installs.len() > MAX_INSTALLS {
        s.cache_refused.push(format!(
            "{} more programs installed in caches: no exit record for them (kept {})",
            m.installs.len() - MAX_INSTALLS,
            if m.conversation {
                "for the conversation"
            } else {
                "nowhere: dropped with the call's layer"
            }
        ));
    }
    for (i, d) in m.deletes.iter().enumerate() {
        fin.exits.push(delete_record(i, d, line));
    }
    for (i, inst) in m.installs.iter().take(MAX_INSTALLS).enumerate() {
        fin.exits
            .push(install_record(i, inst, m.conversation, line));
    }
}

/// The exit record of a program a call installed in an `installs` cache: a `write` of it
/// to its real place, which only an approved launch makes (the merge never does).
pub fn install_record(n: usize, i: &Install, conversation: bool, line: &str) -> ExitRecord {
    let kept = if conversation {
        "kept for this conversation's next calls"
    } else {
        "dropped with the call's layer (the call had no conversation)"
    };
    let what = if i.changed { "changed" } else { "installed" };
    ExitRecord {
        id: format!("install-{}", n + 1),
        source: ExitSource::Denial,
        kind: ExitKind::Write,
        summary: format!(
            "write {} ({what} by the call; {kept}; approving this write installs it for real)",
            i.path
        ),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            targets: vec![Target {
                path: i.path.clone(),
                class: TargetClass::Cache,
                op: TargetOp::Write,
                backup_before_write: false,
                masked: false,
            }],
            ..Default::default()
        },
        needs: Needs::Contained {
            grants: vec![efr_sandbox_wire::Grant::Write {
                path: i.path.clone(),
            }],
        },
        judgement: Judgement {
            verdict: Verdict::Review,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the call {what} {} in a cache of installed programs; it is not merged into \
                 the real cache ({kept}); approving this write runs the line with a write \
                 grant of that path, which installs it for real",
                i.path
            )],
        },
    }
}

/// The digest of an npm integrity entry: standard base64 as ssri writes it, padding
/// optional and bits past the last byte ignored; the URL-safe alphabet is accepted too.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    use base64::alphabet::{STANDARD, URL_SAFE};
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    const STD: GeneralPurpose = GeneralPurpose::new(&STANDARD, LENIENT);
    const URL: GeneralPurpose = GeneralPurpose::new(&URL_SAFE, LENIENT);
    STD.decode(s).or_else(|_| URL.decode(s)).ok()
}

/// Standard base64 with padding, as ssri writes an integrity's digest.
pub(crate) fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A merge whose cleanup is left for later (the service's janitor) keeps the call's
    /// dirs and its lock until the cleanup runs: another process's sweep cannot take them
    /// for a dead call's meanwhile. Then nothing is left.
    #[test]
    fn a_cleanup_left_for_later_holds_the_calls_lock_until_it_runs() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let cache = d.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let layers = prepare(
            &state,
            std::slice::from_ref(&cache),
            &[],
            None,
            &Verify::default(),
        )
        .layers;
        std::fs::write(Path::new(&layers[0].upper).join("new"), "n").unwrap();
        let call = call_dir(&layers[0]).unwrap();
        let (m, cleanup) = merge_and_hold(&state, &layers, &[], &Verify::default());
        assert!(m.refused.is_empty(), "{:?}", m.refused);
        // A cache of no merge kind: nothing of the call reaches it.
        assert!(!cache.join("new").exists());
        assert!(call.join(CALL_LOCK).exists() && Path::new(&layers[0].upper).exists());
        let f = File::options()
            .write(true)
            .open(call.join(CALL_LOCK))
            .unwrap();
        assert!(
            nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err(),
            "the lock is still held"
        );
        assert!(cleanup.run().is_empty());
        assert!(!call.exists(), "removed");
    }

    /// A call dir with neither a held lock nor a manifest (a layer whose `work` dir could
    /// not be made, by a service that then died) is removed by the next sweep once old
    /// enough; a younger one, which may be one being made, is left.
    #[test]
    fn a_half_made_call_dir_is_swept_once_old() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().to_path_buf();
        let old = state.join("layers/00000000000000aa");
        let young = state.join("layers/00000000000000bb");
        let free_lock = state.join("layers/00000000000000cc");
        for d in [&old, &young, &free_lock] {
            std::fs::create_dir_all(d.join("0/upper")).unwrap();
        }
        // A lock taken by nobody, no manifest: a service that died between the two.
        std::fs::write(free_lock.join(CALL_LOCK), "").unwrap();
        let long_ago = std::time::SystemTime::now() - HALF_MADE_AGE * 2;
        for d in [&old, &free_lock] {
            File::open(d).unwrap().set_modified(long_ago).unwrap();
        }
        let mut m = Merged::default();
        sweep(&state, &BTreeSet::new(), &mut m);
        assert!(m.refused.is_empty(), "{:?}", m.refused);
        assert!(!old.exists(), "an old half-made dir was left");
        assert!(
            !free_lock.exists(),
            "an old dir with a free lock and no manifest was left"
        );
        assert!(young.join("0/upper").exists(), "a young dir was removed");
    }

    /// A state dir where no layer can be made leaves every cache read-only for the call,
    /// with a note each, and nothing behind; a cache whose layer alone fails is read-only
    /// alone.
    #[test]
    fn a_layer_that_cannot_be_made_leaves_its_cache_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let caches = [dir.path().join("c1"), dir.path().join("c2")];
        for c in &caches {
            std::fs::create_dir(c).unwrap();
        }
        // `layers` is a file: no call dir can be made.
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(state.join("layers"), "").unwrap();
        let p = prepare(&state, &caches, &[], None, &Verify::default());
        assert!(p.layers.is_empty());
        assert_eq!(p.read_only.len(), 2, "{:?}", p.read_only);
        assert!(
            p.read_only[0].starts_with(&format!(
                "{}: read-only in this call: cannot create the cache layer",
                caches[0].display()
            )),
            "{:?}",
            p.read_only
        );
        // The second cache's conversation layer is taken by a file: the first cache still
        // gets its layer, the second none, and its half-made dirs are gone.
        let state = dir.path().join("state2");
        let conv = conversation::dir(&state, "c0ffee");
        std::fs::create_dir_all(&conv).unwrap();
        std::fs::write(conv.join(key(&caches[1])), "").unwrap();
        let p = prepare(&state, &caches, &[], Some("c0ffee"), &Verify::default());
        assert_eq!(p.layers.len(), 1, "{:?}", p.layers);
        assert_eq!(p.layers[0].path, caches[0].to_string_lossy());
        assert_eq!(p.read_only.len(), 1, "{:?}", p.read_only);
        assert!(
            p.read_only[0].starts_with(&caches[1].display().to_string()),
            "{:?}",
            p.read_only
        );
        let call = call_dir(&p.layers[0]).unwrap();
        assert!(call.join("0/upper").is_dir() && call.join("0/work").is_dir());
        assert!(
            !call.join("1").exists(),
            "the failed layer's dirs were left"
        );
        let man: Manifest =
            serde_json::from_slice(&std::fs::read(call.join(CALL_MANIFEST)).unwrap()).unwrap();
        assert_eq!(man.layers, p.layers);
        held_locks().remove(&call);
    }

    #[test]
    fn base64_of_integrities() {
        // The decoder: padding optional, URL-safe too, trailing bits ignored, else nothing.
        assert_eq!(base64_decode("Zm8=").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode("Zm8").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode("Zm9").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode("-_8=").as_deref(), Some(&[0xfb, 0xff][..]));
        assert_eq!(base64_decode("+/8=").as_deref(), Some(&[0xfb, 0xff][..]));
        assert_eq!(base64_decode("Zm8*"), None);
        assert_eq!(base64_encode(b"fo"), "Zm8=");
    }
}
