//! Real caches through the sandbox: each call's per-call layer, the merge of what it added
//! after the call, and the deletes it made, held until the user applies them.
//!
//! - Before a contained call, [`prepare`] gives each existing cache of `sandbox.caches`
//!   (outside the call's writable roots and masks) a layer: `upper` and `work` dirs in a
//!   private (0700) per-call directory of the service's state dir
//!   (`$XDG_STATE_HOME/efr-sandbox/layers/ID`), which the launcher mounts as overlayfs on
//!   the cache in the call's user namespace (`efr_launcher::plan::CacheLayer`).
//! - After the call, [`after_call`] merges each upper dir into its cache under a lock per
//!   cache: plain files and directories only, each file written to a temp name in a staging
//!   dir (cleaned at the start of every merge, never in the cache), fsynced and renamed into
//!   place; every directory of the real cache is opened with `openat2` beneath the cache
//!   and with no link followed. Links, devices, fifos, sockets, setuid and setgid bits and
//!   masked paths are refused and reported. A full disk stops the merge: the layer is kept
//!   and the error reported. [`RULES`] says what the merge verifies in formats it knows.
//! - The merged layers' dirs are removed after the merge, or by a thread of the service
//!   after the call's finish ([`clean_up_later`]), the call's lock held until then.
//! - A whiteout or an opaque directory (a delete) is not applied: it becomes a held delete
//!   (`<state>/cache-deletes.json`, written atomically), an exit of source and kind
//!   `cache_delete`, and an entry of the summary's `cache_deletes`. [`apply`]
//!   (`sandbox.cache_delete_apply`, `efr-sandbox cache apply`) applies approved ones.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use efr_launcher::plan::CacheLayer;
use efr_policy::config::{Config, Env};
use efr_sandbox_wire::{
    Action, ExitKind, ExitRecord, ExitSource, Facts, JudgedBy, Judgement, Needs, Target,
    TargetClass, TargetOp, Verdict,
};
use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// Most entries of the summary's `cache_deletes` (then `cache_deletes_more`), as its
/// `blocked` list.
pub const MAX_SUMMARY_DELETES: usize = 32;
/// Most held deletes remembered (the oldest go first).
pub const MAX_HELD: usize = 10_000;
/// The prefix of the merge's temp files (in its staging dir only).
const TEMP_PREFIX: &str = ".efr-merge-";
/// The xattr overlayfs marks an opaque directory with in a user namespace (`userxattr`).
const OPAQUE_XATTR: &str = "user.overlay.opaque";

/// What the merge does with a path it knows the format of: one reviewed place, a reason
/// each. A pattern is matched against the path's components, anywhere in it (`*` one
/// component, `**` any number).
#[derive(Debug)]
pub struct Rule {
    /// The components to match, `*` and `**` as wildcards.
    pub pattern: &'static [&'static str],
    /// What the merge does with a path that matches.
    pub kind: RuleKind,
    /// Why, for the review; a refused path's report quotes it.
    pub reason: &'static str,
}

/// How the merge treats a path a [`Rule`] matches: verified and merged, skipped, or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// npm cacache content: the file's hash must match its path; an existing file is kept.
    NpmContent,
    /// npm cacache index bucket: lines added to the real bucket (a union), those whose
    /// content is missing or does not verify dropped.
    NpmIndex,
    /// A cargo `.crate`: checked against the checksum of the real (host's) index cache when
    /// that names the version; an existing one is kept, other bytes refused.
    CargoCrate,
    /// Not merged: derived from verified files by the tool itself.
    Skip,
    /// Refused (and reported): code or settings a tool runs outside the sandbox.
    Refuse,
}

/// The merge's rules, the first match of a path deciding: the reviewed list of the formats
/// it verifies, the files it skips and those it refuses.
pub const RULES: &[Rule] = &[
    Rule {
        pattern: &[".git", "config"],
        kind: RuleKind::Refuse,
        reason: "a git config can name programs git runs (core.sshCommand, core.fsmonitor)",
    },
    Rule {
        pattern: &[".git", "hooks", "**"],
        kind: RuleKind::Refuse,
        reason: "git hooks run outside the sandbox",
    },
    Rule {
        pattern: &["git", "db", "*", "config"],
        kind: RuleKind::Refuse,
        reason: "the config of cargo's bare git repositories: `git fetch` (net.git-fetch-with-cli) \
                 runs what it names",
    },
    Rule {
        pattern: &["git", "db", "*", "hooks", "**"],
        kind: RuleKind::Refuse,
        reason: "hooks of cargo's bare git repositories",
    },
    Rule {
        pattern: &["_cacache", "content-v2", "**"],
        kind: RuleKind::NpmContent,
        reason: "npm's content is addressed by its hash: verified, never replaced",
    },
    Rule {
        pattern: &["_cacache", "index-v5", "**"],
        kind: RuleKind::NpmIndex,
        reason: "npm's index entries must point at content that exists and verifies",
    },
    Rule {
        pattern: &["registry", "cache", "*", "*.crate"],
        kind: RuleKind::CargoCrate,
        reason: "a crate's version never changes: checked against the host's index cache",
    },
    Rule {
        pattern: &["registry", "src", "**"],
        kind: RuleKind::Skip,
        reason: "cargo builds from these unpacked sources without checking them: it unpacks \
                 them again from the verified .crate",
    },
    Rule {
        pattern: &["pip", "http-v2", "**"],
        kind: RuleKind::Skip,
        reason: "pip's http cache is keyed by a hash of the URL: a call could plant any \
                 answer for any URL",
    },
    Rule {
        pattern: &["pip", "http", "**"],
        kind: RuleKind::Skip,
        reason: "pip's old http cache: keyed by the URL's hash, unverifiable",
    },
    Rule {
        pattern: &["pip", "wheels", "**"],
        kind: RuleKind::Skip,
        reason: "wheels pip built locally: nothing to verify them against",
    },
];

fn component_match(pat: &str, c: &str) -> bool {
    match pat.strip_prefix('*') {
        Some("") => true,
        Some(suffix) => c.ends_with(suffix),
        None => pat == c,
    }
}

fn matches_at(pat: &[&str], comps: &[&str]) -> bool {
    match pat.first() {
        None => comps.is_empty(),
        Some(&"**") => (0..=comps.len()).any(|i| matches_at(&pat[1..], &comps[i..])),
        Some(p) => {
            !comps.is_empty() && component_match(p, comps[0]) && matches_at(&pat[1..], &comps[1..])
        }
    }
}

/// The rule of the path `rel` below its cache `cache` (matched on the whole path, so
/// `~/.cache` holding `pip/...` and a cache at `~/.cache/pip` both match).
pub fn rule_of(cache: &Path, rel: &Path) -> Option<&'static Rule> {
    let full = cache.join(rel);
    let comps: Vec<&str> = full
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    RULES
        .iter()
        .find(|r| (0..comps.len()).any(|i| matches_at(r.pattern, &comps[i..])))
}

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

/// A cache path of the config: `~/...` (through the one home expansion) or absolute.
pub(crate) fn expand(p: &str, env: &Env) -> Option<PathBuf> {
    if p.starts_with("~/") || p.starts_with('/') {
        Some(efr_policy::path::expand_home(p, &env.home))
    } else {
        None
    }
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

/// What the service keeps of a contained call for its merge: its layers, its masks in force.
#[derive(Debug, Clone, Default)]
pub struct CallCaches {
    /// The service's state dir, where the layers and the held deletes are.
    pub state: PathBuf,
    /// The plan's cache layers, one per cache.
    pub layers: Vec<CacheLayer>,
    /// The masks in force in the call's view: the merge takes nothing below them.
    pub masks: Vec<String>,
}

impl CallCaches {
    /// The caches of a prepared plan.
    pub fn of(plan: &efr_launcher::plan::Plan, env: &Env) -> CallCaches {
        if plan.caches.is_empty() {
            return CallCaches::default();
        }
        CallCaches {
            state: state_dir(env),
            layers: plan.caches.clone(),
            masks: efr_launcher::view::masks_in_force(plan),
        }
    }

    /// Merges the layers after the call and folds what it gave into `fin`.
    pub fn finish(&self, fin: &mut efr_sandbox_wire::Finish, line: &str) {
        if self.layers.is_empty() {
            return;
        }
        let (mut m, cleanup) = merge_and_hold(&self.state, &self.layers, &self.masks);
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

/// Gives a contained plan its caches' layers (none for an unsandboxed one).
pub fn attach(
    plan: &mut efr_launcher::plan::Plan,
    config: &Config,
    env: &Env,
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
    plan.caches = prepare(&state_dir(env), &caches, &masks)?;
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
        made.map_err(|e| LayerError::Create {
            path: private.display().to_string(),
            source: e,
        })?;
        plan.cache_files.push(efr_launcher::plan::CacheFile {
            path: file.to_string_lossy().into_owned(),
            private: private.to_string_lossy().into_owned(),
        });
    }
    Ok(())
}

/// Makes a layer for each cache, in a new private per-call dir under the state dir.
pub fn prepare(
    state: &Path,
    caches: &[PathBuf],
    masks: &[String],
) -> Result<Vec<CacheLayer>, LayerError> {
    if caches.is_empty() {
        return Ok(Vec::new());
    }
    let create = |p: &Path| {
        let p = p.display().to_string();
        move |e| LayerError::Create { path: p, source: e }
    };
    let id = crate::sys::random_hex(8).map_err(create(state))?;
    let call = state.join("layers").join(id);
    let mut out = Vec::new();
    for (i, c) in caches.iter().enumerate() {
        let d = call.join(i.to_string());
        let (upper, work) = (d.join("upper"), d.join("work"));
        for p in [&upper, &work] {
            private_dirs(p).map_err(create(p))?;
        }
        // The overlay's root takes the upper dir's mode: the cache's own (the call dir
        // above is the private one).
        if let Ok(m) = std::fs::metadata(c) {
            let mode = m.mode() & 0o7777 & !(libc::S_ISUID | libc::S_ISGID);
            std::fs::set_permissions(&upper, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .map_err(create(&upper))?;
        }
        out.push(CacheLayer {
            path: c.to_string_lossy().into_owned(),
            upper: upper.to_string_lossy().into_owned(),
            work: work.to_string_lossy().into_owned(),
        });
    }
    // The call's lock, held by this process until the merge: a call dir whose lock is free
    // belongs to a service that died, and the next merge merges it ([`sweep`]).
    let lock_path = call.join(CALL_LOCK);
    let lock = crate::owner::hold(&lock_path).map_err(create(&lock_path))?;
    let manifest = Manifest {
        layers: out.clone(),
        masks: masks.to_vec(),
    };
    let mp = call.join(CALL_MANIFEST);
    std::fs::write(&mp, serde_json::to_vec(&manifest).unwrap_or_default()).map_err(create(&mp))?;
    held_locks().insert(call, lock);
    Ok(out)
}

const CALL_LOCK: &str = "lock";
const CALL_MANIFEST: &str = "call.json";

/// What a call dir holds besides its layers: enough for another merge to finish it.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    layers: Vec<CacheLayer>,
    masks: Vec<String>,
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
        let Ok(Some(lock)) = crate::owner::take_if_free(&dir.join(CALL_LOCK)) else {
            continue;
        };
        let Ok(man) = std::fs::read(dir.join(CALL_MANIFEST))
            .map_err(|_| ())
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).map_err(|_| ()))
        else {
            continue;
        };
        // Only layers of this very dir (the manifest is the service's own, in its masked
        // state dir, but a path is checked before it is used).
        let layers: Vec<CacheLayer> = man
            .layers
            .into_iter()
            .filter(|l| call_dir(l).as_ref() == Some(&dir))
            .collect();
        let mut cleanup = Cleanup::default();
        merge_layers(state, &layers, &man.masks, m, &mut cleanup);
        m.refused.extend(cleanup.run());
        drop(lock);
    }
}

/// One delete a call made in a real cache, held until applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldDelete {
    /// The path deleted (absolute, in the real cache).
    pub path: String,
    /// The cache it is in.
    pub cache: String,
    /// What it was when the call deleted it: its inode, type and change time, so that a
    /// delete of something that changed since is stale. This is its inode.
    pub ino: u64,
    /// Whether it was a directory.
    pub dir: bool,
    /// Its change time's seconds since the epoch.
    pub ctime: i64,
    /// Its change time's nanoseconds.
    pub ctime_nsec: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    deletes: Vec<HeldDelete>,
}

/// What merging a call's layers gave.
#[derive(Debug, Default)]
pub struct Merged {
    /// The deletes held (not applied).
    pub deletes: Vec<HeldDelete>,
    /// One line per entry refused or error met (what, where, why).
    pub refused: Vec<String>,
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
fn key(cache: &Path) -> String {
    let h = sha2::Sha256::digest(cache.as_os_str().as_encoded_bytes());
    hex(&h[..8])
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Merges each layer of a finished call into its cache, then removes the layers that
/// merged completely (with their per-call dir once empty). `masks` are the call's masks
/// in force: a path at or below one is never created.
pub fn after_call(state: &Path, layers: &[CacheLayer], masks: &[String]) -> Merged {
    let (mut m, cleanup) = merge_and_hold(state, layers, masks);
    m.refused.extend(cleanup.run());
    m
}

/// [`after_call`] but the removal of the merged layers, which the [`Cleanup`] does (its
/// call's lock held until then).
fn merge_and_hold(state: &Path, layers: &[CacheLayer], masks: &[String]) -> (Merged, Cleanup) {
    let mut m = Merged::default();
    let mut cleanup = Cleanup::default();
    merge_layers(state, layers, masks, &mut m, &mut cleanup);
    let own: BTreeSet<PathBuf> = layers.iter().filter_map(call_dir).collect();
    for d in &own {
        if let Some(l) = held_locks().remove(d) {
            cleanup.locks.push(l);
        }
    }
    sweep(state, &own, &mut m);
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
    m: &mut Merged,
    cleanup: &mut Cleanup,
) {
    let mut call_dirs = BTreeSet::new();
    let mut kept = BTreeSet::new();
    for l in layers {
        let upper = Path::new(&l.upper);
        let Some(cd) = call_dir(l) else { continue };
        call_dirs.insert(cd.clone());
        if !upper.is_dir() {
            continue;
        }
        match merge_one(state, l, masks, m) {
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

struct Ctx<'a> {
    cache: PathBuf,
    root: OwnedFd,
    staging: OwnedFd,
    masks: Vec<PathBuf>,
    out: &'a mut Merged,
    /// Files of the npm index, merged after the content.
    later: Vec<PathBuf>,
}

/// A failure that stops the merge of one cache (the layer is kept).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Stop(String);

fn stop_on(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EROFS) | Some(libc::EIO)
    )
}

fn merge_one(state: &Path, l: &CacheLayer, masks: &[String], out: &mut Merged) -> Result<(), Stop> {
    let cache = PathBuf::from(&l.path);
    let io = |what: &str, e: std::io::Error| Stop(format!("{what}: {e}"));
    let _lock = lock(state, &format!("{}.lock", key(&cache))).map_err(|e| io("lock", e))?;
    let root: OwnedFd = File::open(&cache).map_err(|e| io(&l.path, e))?.into();
    // The staging dir: beside the layers when on the cache's file system (a rename must
    // not cross one), else a hidden dir of the cache itself. Whatever an earlier merge
    // left there (it died) is removed first, under the lock.
    let dev = std::fs::metadata(&cache).map_err(|e| io(&l.path, e))?.dev();
    let mut staging = state.join("staging").join(key(&cache));
    private_dirs(&staging).map_err(|e| io("staging", e))?;
    if std::fs::metadata(&staging).map(|m| m.dev()).ok() != Some(dev) {
        let _ = std::fs::remove_dir(&staging);
        staging = cache.join(".efr-merge");
        if let Ok(md) = std::fs::symlink_metadata(&staging) {
            if !md.is_dir() {
                return Err(Stop(format!("{} is not a directory", staging.display())));
            }
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&staging)
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| io("staging", e))?;
    }
    let staging_fd: OwnedFd = File::open(&staging).map_err(|e| io("staging", e))?.into();
    for e in std::fs::read_dir(&staging)
        .map_err(|e| io("staging", e))?
        .flatten()
    {
        let _ = nix::unistd::unlinkat(
            &staging_fd,
            e.file_name().as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    let mut cx = Ctx {
        cache: cache.clone(),
        root,
        staging: staging_fd,
        masks: masks.iter().map(PathBuf::from).collect(),
        out,
        later: Vec::new(),
    };
    let upper = PathBuf::from(&l.upper);
    walk(&mut cx, &upper, Path::new(""))?;
    for rel in std::mem::take(&mut cx.later) {
        npm_index(&mut cx, &upper, &rel)?;
    }
    // A staging dir inside the cache goes when the merge is done (it is empty then).
    if staging.starts_with(&cache) {
        let _ = std::fs::remove_dir(&staging);
    }
    Ok(())
}

/// Merges the directory `upper/rel` into `cache/rel` (which exists).
fn walk(cx: &mut Ctx, upper: &Path, rel: &Path) -> Result<(), Stop> {
    let udir = upper.join(rel);
    let Some(real_dir) = cx.real_dir(rel, rel) else {
        return Ok(());
    };
    let mut entries: Vec<_> = match std::fs::read_dir(&udir) {
        Ok(r) => r.flatten().collect(),
        Err(e) => return Err(Stop(format!("{}: {e}", udir.display()))),
    };
    entries.sort_by_key(|e| e.file_name());
    let opaque = !rel.as_os_str().is_empty()
        && crate::sys::lgetxattr(&udir, OPAQUE_XATTR)
            .ok()
            .flatten()
            .is_some_and(|v| v == b"y");
    if opaque {
        // The call removed the directory and made it again: what the real one holds that
        // the call's does not is deleted (held).
        let names: BTreeSet<_> = entries.iter().map(|e| e.file_name()).collect();
        if let Ok(d) =
            nix::dir::Dir::from_fd(real_dir.try_clone().map_err(|e| Stop(e.to_string()))?)
        {
            let mut gone = Vec::new();
            let mut d = d;
            for e in d.iter().flatten() {
                let n = std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
                if n == "." || n == ".." || names.contains(&n) {
                    continue;
                }
                gone.push(n);
            }
            for n in gone {
                cx.hold(&real_dir, &rel.join(&n));
            }
        }
    }
    let mut changed = false;
    for e in entries {
        let name = e.file_name();
        let r = rel.join(&name);
        let up = udir.join(&name);
        if name.as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes()) && rel.as_os_str().is_empty()
        {
            cx.refused(&r, "a name the merge keeps for itself");
            continue;
        }
        if name == ".efr-merge" && rel.as_os_str().is_empty() {
            cx.refused(&r, "a name the merge keeps for itself");
            continue;
        }
        let full = cx.cache.join(&r);
        if cx.masks.iter().any(|m| full.starts_with(m)) {
            cx.refused(&r, "a masked path: never created by a call");
            continue;
        }
        let Ok(md) = std::fs::symlink_metadata(&up) else {
            continue;
        };
        let ft = md.file_type();
        if ft.is_char_device() && md.rdev() == 0 {
            cx.hold(&real_dir, &r);
            continue;
        }
        let rule = rule_of(&cx.cache, &r);
        // Not merged, by the reviewed rule (not a refusal: the tool makes these again).
        if rule.is_some_and(|r| r.kind == RuleKind::Skip) && (ft.is_dir() || ft.is_file()) {
            continue;
        }
        if let Some(rule) = rule.filter(|r| r.kind == RuleKind::Refuse) {
            // Said once, at the top of what is refused.
            if rule_of(&cx.cache, rel).map(|p| p.kind) != Some(RuleKind::Refuse) {
                cx.refused(&r, &format!("not merged: {}", rule.reason));
            }
            continue;
        }
        if md.mode() & (libc::S_ISUID | libc::S_ISGID) != 0 {
            cx.refused(&r, "setuid or setgid bit");
            continue;
        }
        if ft.is_dir() {
            match nix::sys::stat::fstatat(
                &real_dir,
                name.as_os_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            ) {
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {}
                Ok(_) => {
                    cx.refused(&r, "exists in the real cache and is not a directory");
                    continue;
                }
                Err(nix::errno::Errno::ENOENT) => {
                    let mode =
                        nix::sys::stat::Mode::from_bits_truncate((md.mode() & 0o755) | 0o700);
                    match nix::sys::stat::mkdirat(&real_dir, name.as_os_str(), mode) {
                        Ok(()) | Err(nix::errno::Errno::EEXIST) => changed = true,
                        Err(e) => {
                            let e = std::io::Error::from(e);
                            if stop_on(&e) {
                                return Err(Stop(format!("{}: {e}", full.display())));
                            }
                            cx.refused(&r, &e.to_string());
                            continue;
                        }
                    }
                }
                Err(e) => {
                    cx.refused(&r, &e.to_string());
                    continue;
                }
            }
            walk(cx, upper, &r)?;
        } else if ft.is_file() {
            if rule.map(|r| r.kind) == Some(RuleKind::NpmIndex) {
                cx.later.push(r);
                continue;
            }
            if file(cx, &real_dir, &up, &r, rule.map(|r| r.kind))? {
                changed = true;
            }
        } else {
            let what = if ft.is_symlink() {
                "a symbolic link"
            } else if ft.is_fifo() {
                "a fifo"
            } else if ft.is_socket() {
                "a socket"
            } else {
                "a device"
            };
            cx.refused(
                &r,
                &format!("{what}: only plain files and directories are merged"),
            );
        }
    }
    if changed {
        let _ = nix::unistd::fsync(&real_dir);
    }
    Ok(())
}

use std::os::unix::ffi::OsStrExt;

impl Ctx<'_> {
    fn refused(&mut self, rel: &Path, why: &str) {
        self.out
            .refused
            .push(format!("{}: {why}", self.cache.join(rel).display()));
    }

    /// The directory `dir` of the real cache, opened beneath its root (no link followed);
    /// `None` when it cannot be, with `rel` refused.
    fn real_dir(&mut self, dir: &Path, rel: &Path) -> Option<OwnedFd> {
        match crate::sys::open_beneath(&self.root, dir, OFlag::O_DIRECTORY | OFlag::O_RDONLY, 0) {
            Ok(fd) => Some(fd),
            Err(e) => {
                self.refused(
                    rel,
                    &format!("cannot open it in the real cache (a link?): {e}"),
                );
                None
            }
        }
    }

    /// Holds the delete of `rel` when the real cache has it.
    fn hold(&mut self, real_dir: &OwnedFd, rel: &Path) {
        let Some(name) = rel.file_name() else { return };
        if let Ok(st) =
            nix::sys::stat::fstatat(real_dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        {
            self.out.deletes.push(HeldDelete {
                path: self.cache.join(rel).to_string_lossy().into_owned(),
                cache: self.cache.to_string_lossy().into_owned(),
                ino: st.st_ino,
                dir: st.st_mode & libc::S_IFMT == libc::S_IFDIR,
                ctime: st.st_ctime,
                ctime_nsec: st.st_ctime_nsec,
            });
        }
    }
}

fn same_content(a: &mut File, b: &mut File) -> std::io::Result<bool> {
    if a.metadata()?.len() != b.metadata()?.len() {
        return Ok(false);
    }
    let (mut x, mut y) = (vec![0u8; 65536], vec![0u8; 65536]);
    loop {
        let n = a.read(&mut x)?;
        if n == 0 {
            return Ok(true);
        }
        b.read_exact(&mut y[..n])?;
        if x[..n] != y[..n] {
            return Ok(false);
        }
    }
}

/// Merges one plain file; whether it wrote one.
fn file(
    cx: &mut Ctx,
    real_dir: &OwnedFd,
    up: &Path,
    rel: &Path,
    kind: Option<RuleKind>,
) -> Result<bool, Stop> {
    let name = rel.file_name().unwrap_or_default();
    let mut src = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(up)
    {
        Ok(f) => f,
        Err(e) => {
            cx.refused(rel, &e.to_string());
            return Ok(false);
        }
    };
    let mode = src.metadata().map(|m| m.mode()).unwrap_or(0o644);
    match kind {
        Some(RuleKind::NpmContent) => match npm_content_ok(rel, &mut src) {
            Ok(()) => {}
            Err(why) => {
                cx.refused(rel, &why);
                return Ok(false);
            }
        },
        Some(RuleKind::CargoCrate) => match cargo_crate_ok(&cx.cache, rel, &mut src) {
            Ok(()) => {}
            Err(why) => {
                cx.refused(rel, &why);
                return Ok(false);
            }
        },
        _ => {}
    }
    let content_addressed = matches!(
        kind,
        Some(RuleKind::NpmContent) | Some(RuleKind::CargoCrate)
    );
    // What the real cache has there now.
    match crate::sys::open_beneath(real_dir, Path::new(name), OFlag::O_RDONLY, 0) {
        Ok(fd) => {
            let mut real = File::from(fd);
            let is_file = real.metadata().map(|m| m.is_file()).unwrap_or(false);
            if !is_file {
                cx.refused(rel, "exists in the real cache and is not a plain file");
                return Ok(false);
            }
            let _ = std::io::Seek::rewind(&mut src);
            match same_content(&mut src, &mut real) {
                Ok(true) => return Ok(false),
                Ok(false) if content_addressed => {
                    cx.refused(
                        rel,
                        "the real cache holds other bytes under this name: kept",
                    );
                    return Ok(false);
                }
                Ok(false) => {}
                Err(e) => {
                    cx.refused(rel, &e.to_string());
                    return Ok(false);
                }
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => {
            cx.refused(
                rel,
                &format!("cannot open it in the real cache (a link?): {e}"),
            );
            return Ok(false);
        }
    }
    let _ = std::io::Seek::rewind(&mut src);
    let tmp = format!(
        "{TEMP_PREFIX}{}",
        crate::sys::random_hex(8).map_err(|e| Stop(e.to_string()))?
    );
    let full = cx.cache.join(rel);
    let stop = |e: std::io::Error| Stop(format!("{}: {e}", full.display()));
    let written = (|| -> std::io::Result<()> {
        let fd = crate::sys::open_beneath(
            &cx.staging,
            Path::new(&tmp),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY,
            0o600,
        )?;
        let mut dst = File::from(fd);
        std::io::copy(&mut src, &mut dst)?;
        dst.flush()?;
        nix::sys::stat::fchmod(
            dst.as_fd(),
            nix::sys::stat::Mode::from_bits_truncate(mode & 0o755 | 0o400),
        )?;
        dst.sync_all()?;
        Ok(())
    })();
    let unlink_tmp = || {
        let _ = nix::unistd::unlinkat(
            &cx.staging,
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    };
    if let Err(e) = written {
        unlink_tmp();
        if stop_on(&e) {
            return Err(stop(e));
        }
        cx.refused(rel, &e.to_string());
        return Ok(false);
    }
    let renamed = if content_addressed {
        nix::fcntl::renameat2(
            &cx.staging,
            tmp.as_str(),
            real_dir,
            name,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
    } else {
        nix::fcntl::renameat(&cx.staging, tmp.as_str(), real_dir, name)
    };
    match renamed {
        Ok(()) => Ok(true),
        // A concurrent merge put it there first: its bytes were verified too.
        Err(nix::errno::Errno::EEXIST) => {
            unlink_tmp();
            Ok(false)
        }
        Err(e) => {
            unlink_tmp();
            let e = std::io::Error::from(e);
            if stop_on(&e) {
                return Err(stop(e));
            }
            cx.refused(rel, &e.to_string());
            Ok(false)
        }
    }
}

fn digest(algo: &str, f: &mut File) -> Option<Vec<u8>> {
    fn run<D: Digest>(f: &mut File) -> Option<Vec<u8>> {
        let mut d = D::new();
        let mut b = vec![0u8; 65536];
        loop {
            let n = f.read(&mut b).ok()?;
            if n == 0 {
                break;
            }
            d.update(&b[..n]);
        }
        Some(d.finalize().to_vec())
    }
    let _ = std::io::Seek::rewind(f);
    let r = match algo {
        "sha512" => run::<sha2::Sha512>(f),
        "sha384" => run::<sha2::Sha384>(f),
        "sha256" => run::<sha2::Sha256>(f),
        _ => None,
    };
    let _ = std::io::Seek::rewind(f);
    r
}

/// `content-v2/<algo>/<aa>/<bb>/<rest>`: the content's hash must be the path's.
fn npm_content_ok(rel: &Path, f: &mut File) -> Result<(), String> {
    let comps: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let Some(i) = comps.iter().position(|c| c == "content-v2") else {
        return Err("not npm content".into());
    };
    let rest = &comps[i + 1..];
    if rest.len() != 4 {
        return Err("an npm content path is content-v2/ALGO/XX/YY/REST".into());
    }
    let want = format!("{}{}{}", rest[1], rest[2], rest[3]);
    let Some(got) = digest(&rest[0], f) else {
        return Err(format!(
            "npm content of algorithm {:?}: cannot verify it",
            rest[0]
        ));
    };
    if hex(&got) != want {
        return Err("npm content whose hash is not its path's".into());
    }
    Ok(())
}

/// `<cache>/.../registry/cache/<index>/<name>-<version>.crate`: when the host's index
/// cache (`registry/index/<index>/.cache/...`) names the version, the sha256 of the bytes
/// must be its `cksum`.
fn cargo_crate_ok(cache: &Path, rel: &Path, f: &mut File) -> Result<(), String> {
    let full = cache.join(rel);
    let (Some(file), Some(index_dir)) = (
        full.file_name().and_then(|n| n.to_str()),
        full.parent().and_then(|p| p.file_name()),
    ) else {
        return Ok(());
    };
    let Some(stem) = file.strip_suffix(".crate") else {
        return Ok(());
    };
    // name-version: the version starts after the last '-' followed by a digit.
    let Some(cut) = stem
        .char_indices()
        .filter(|&(i, c)| c == '-' && stem[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
        .map(|(i, _)| i)
        .next()
    else {
        return Ok(());
    };
    let (name, vers) = (&stem[..cut], &stem[cut + 1..]);
    let Some(registry) = full.parent().and_then(Path::parent).and_then(Path::parent) else {
        return Ok(());
    };
    let lname = name.to_ascii_lowercase();
    let prefix = match lname.len() {
        1 => "1".to_string(),
        2 => "2".to_string(),
        3 => format!("3/{}", &lname[..1]),
        _ => format!("{}/{}", &lname[..2], &lname[2..4]),
    };
    let idx = registry
        .join("index")
        .join(index_dir)
        .join(".cache")
        .join(prefix)
        .join(&lname);
    let Ok(bytes) = std::fs::read(&idx) else {
        return Ok(());
    };
    let want = bytes.split(|&b| b == 0).find_map(|chunk| {
        let v: serde_json::Value = serde_json::from_slice(chunk).ok()?;
        (v.get("vers")?.as_str()? == vers).then(|| v.get("cksum")?.as_str().map(String::from))?
    });
    let Some(want) = want else { return Ok(()) };
    let got = digest("sha256", f).map(|d| hex(&d)).unwrap_or_default();
    if got != want {
        return Err(format!(
            "a crate whose sha256 is not the checksum of {name} {vers} in the host's index cache"
        ));
    }
    Ok(())
}

/// The digest of an npm integrity entry: standard base64 as ssri writes it, padding
/// optional and bits past the last byte ignored; the URL-safe alphabet is accepted too.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
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

/// The content path (below `_cacache`) an npm integrity string names first, of an
/// algorithm the merge verifies.
fn npm_content_path(integrity: &str) -> Option<PathBuf> {
    integrity.split_whitespace().find_map(|i| {
        let (algo, b64) = i.split_once('-')?;
        if !matches!(algo, "sha512" | "sha384" | "sha256") {
            return None;
        }
        let h = hex(&base64_decode(b64.split('?').next()?)?);
        if h.len() < 5 {
            return None;
        }
        Some(
            PathBuf::from("content-v2")
                .join(algo)
                .join(&h[..2])
                .join(&h[2..4])
                .join(&h[4..]),
        )
    })
}

/// Merges an npm index bucket: the lines of the call's bucket that the real one lacks are
/// appended (a new file written and renamed), but those whose content is missing from the
/// real cache (merged before) or of no algorithm the merge verifies.
fn npm_index(cx: &mut Ctx, upper: &Path, rel: &Path) -> Result<(), Stop> {
    let text = match std::fs::read_to_string(upper.join(rel)) {
        Ok(t) => t,
        Err(e) => {
            cx.refused(rel, &e.to_string());
            return Ok(());
        }
    };
    let comps: Vec<_> = rel.components().collect();
    let Some(i) = comps.iter().position(|c| c.as_os_str() == "index-v5") else {
        return Ok(());
    };
    let cacache: PathBuf = comps[..i].iter().collect();
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    let Some(real_dir) = cx.real_dir(parent, rel) else {
        return Ok(());
    };
    let name = rel.file_name().unwrap_or_default();
    let mut existing = String::new();
    match crate::sys::open_beneath(&real_dir, Path::new(name), OFlag::O_RDONLY, 0) {
        Ok(fd) => {
            let mut f = File::from(fd);
            if !f.metadata().map(|m| m.is_file()).unwrap_or(false) {
                cx.refused(rel, "exists in the real cache and is not a plain file");
                return Ok(());
            }
            let _ = f.read_to_string(&mut existing);
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => {
            cx.refused(rel, &e.to_string());
            return Ok(());
        }
    }
    let have: BTreeSet<&str> = existing.lines().collect();
    let mut add = Vec::new();
    let mut dropped = 0;
    for line in text.lines() {
        if line.is_empty() || have.contains(line) {
            continue;
        }
        let ok = line.split_once('\t').and_then(|(_, json)| {
            let v: serde_json::Value = serde_json::from_str(json).ok()?;
            match v.get("integrity") {
                // A deletion entry (integrity null) removes nothing here: the bucket only
                // grows, and npm takes the newest line.
                Some(serde_json::Value::Null) => None,
                Some(i) => {
                    let p = npm_content_path(i.as_str()?)?;
                    let full = cacache.join(p);
                    let fd = crate::sys::open_beneath(&cx.root, &full, OFlag::O_RDONLY, 0).ok()?;
                    let mut f = File::from(fd);
                    let algo = full
                        .components()
                        .nth_back(3)?
                        .as_os_str()
                        .to_str()?
                        .to_string();
                    let want: String = full
                        .components()
                        .rev()
                        .take(3)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    (hex(&digest(&algo, &mut f)?) == want).then_some(())
                }
                None => None,
            }
        });
        if ok.is_some() {
            add.push(line);
        } else {
            dropped += 1;
        }
    }
    if dropped > 0 {
        cx.refused(
            rel,
            &format!(
                "{dropped} npm index entries dropped: their content is missing or does not verify"
            ),
        );
    }
    if add.is_empty() {
        return Ok(());
    }
    let mut body = existing.clone();
    if !body.is_empty() && !body.ends_with('\n') {
        body.push('\n');
    }
    for l in add {
        body.push_str(l);
        body.push('\n');
    }
    let tmp = format!(
        "{TEMP_PREFIX}{}",
        crate::sys::random_hex(8).map_err(|e| Stop(e.to_string()))?
    );
    let written = (|| -> std::io::Result<()> {
        let fd = crate::sys::open_beneath(
            &cx.staging,
            Path::new(&tmp),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY,
            0o644,
        )?;
        let mut f = File::from(fd);
        f.write_all(body.as_bytes())?;
        f.sync_all()?;
        nix::fcntl::renameat(&cx.staging, tmp.as_str(), &real_dir, name)
            .map_err(std::io::Error::from)?;
        let _ = nix::unistd::fsync(&real_dir);
        Ok(())
    })();
    if let Err(e) = written {
        let _ = nix::unistd::unlinkat(
            &cx.staging,
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        if stop_on(&e) {
            return Err(Stop(format!("{}: {e}", cx.cache.join(rel).display())));
        }
        cx.refused(rel, &e.to_string());
    }
    Ok(())
}

/// The file of the held deletes in the state dir `state`.
pub fn store_path(state: &Path) -> PathBuf {
    state.join("cache-deletes.json")
}

fn read_store(state: &Path) -> std::io::Result<Store> {
    match std::fs::read(store_path(state)) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
        Err(e) => Err(e),
    }
}

fn write_store(state: &Path, s: &Store) -> std::io::Result<()> {
    private_dirs(state)?;
    let p = store_path(state);
    let tmp = state.join(format!(".cache-deletes.{}.tmp", crate::sys::random_hex(8)?));
    let r = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &p)?;
        File::open(state)?.sync_all()
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Remembers held deletes (a path held again replaces its older record).
fn hold(state: &Path, new: &[HeldDelete]) -> Result<(), ApplyError> {
    let store_err = |e| ApplyError::Store {
        path: store_path(state).display().to_string(),
        source: e,
    };
    let _l = lock(state, "cache-deletes.lock").map_err(store_err)?;
    let mut s = read_store(state).map_err(store_err)?;
    s.deletes.retain(|d| !new.iter().any(|n| n.path == d.path));
    s.deletes.extend(new.iter().cloned());
    if s.deletes.len() > MAX_HELD {
        let cut = s.deletes.len() - MAX_HELD;
        s.deletes.drain(..cut);
    }
    write_store(state, &s).map_err(store_err)
}

/// The held deletes.
pub fn held(state: &Path) -> std::io::Result<Vec<HeldDelete>> {
    Ok(read_store(state)?.deletes)
}

/// What applying held deletes did.
#[derive(Debug, Default)]
pub struct Applied {
    /// The paths removed, in the order asked.
    pub paths: Vec<String>,
    /// The bytes freed: the sizes of the plain files removed that had no other link.
    pub freed_bytes: u64,
}

/// Applies the held deletes of `paths`: every one must be held and unchanged since the
/// call deleted it (else nothing is applied); each is removed without following a link
/// (from its cache's directory, opened beneath the cache).
pub fn apply(state: &Path, paths: &[String]) -> Result<Applied, ApplyError> {
    let store_err = |e| ApplyError::Store {
        path: store_path(state).display().to_string(),
        source: e,
    };
    let _l = lock(state, "cache-deletes.lock").map_err(store_err)?;
    let mut s = read_store(state).map_err(store_err)?;
    let mut todo = Vec::new();
    let mut seen = BTreeSet::new();
    for p in paths {
        if !seen.insert(p.trim_end_matches('/')) {
            continue;
        }
        let p = p.trim_end_matches('/');
        let Some(d) = s.deletes.iter().find(|d| d.path == p) else {
            return Err(ApplyError::Unknown {
                path: p.to_string(),
            });
        };
        let (root, rel) = open_held(d).map_err(|_| ApplyError::Stale {
            path: p.to_string(),
        })?;
        let parent = crate::sys::open_beneath(
            &root,
            rel.parent().unwrap_or(Path::new("")),
            OFlag::O_DIRECTORY | OFlag::O_RDONLY,
            0,
        )
        .map_err(|_| ApplyError::Stale {
            path: p.to_string(),
        })?;
        let name = rel.file_name().unwrap_or_default().to_os_string();
        let st = nix::sys::stat::fstatat(
            &parent,
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|_| ApplyError::Stale {
            path: p.to_string(),
        })?;
        let dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if st.st_ino != d.ino
            || dir != d.dir
            || st.st_ctime != d.ctime
            || st.st_ctime_nsec != d.ctime_nsec
        {
            return Err(ApplyError::Stale {
                path: p.to_string(),
            });
        }
        todo.push((p.to_string(), parent, name, dir));
    }
    let mut out = Applied::default();
    for (p, parent, name, dir) in todo {
        let io = |e: std::io::Error| ApplyError::Io {
            path: p.clone(),
            source: e,
        };
        out.freed_bytes += remove_at(&parent, &name, dir).map_err(io)?;
        out.paths.push(p.clone());
        s.deletes.retain(|d| d.path != p);
        write_store(state, &s).map_err(store_err)?;
    }
    Ok(out)
}

fn open_held(d: &HeldDelete) -> std::io::Result<(OwnedFd, PathBuf)> {
    let cache = Path::new(&d.cache);
    let rel = Path::new(&d.path)
        .strip_prefix(cache)
        .map_err(|_| std::io::Error::other("not in its cache"))?
        .to_path_buf();
    if rel.as_os_str().is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(std::io::Error::other("not below its cache"));
    }
    let root = File::open(cache)?.into();
    Ok((root, rel))
}

/// Removes `name` of the directory `dir` (a directory with everything in it), links never
/// followed; the bytes freed (the sizes of the plain files).
fn remove_at(dir: &OwnedFd, name: &std::ffi::OsStr, is_dir: bool) -> std::io::Result<u64> {
    use nix::unistd::{UnlinkatFlags, unlinkat};
    if !is_dir {
        let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
        unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?;
        let size = if st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_nlink <= 1 {
            // A plain file's size is never negative.
            u64::try_from(st.st_size).unwrap_or(0)
        } else {
            0
        };
        return Ok(size);
    }
    let sub = crate::sys::open_beneath(
        dir,
        Path::new(name),
        OFlag::O_DIRECTORY | OFlag::O_RDONLY,
        0,
    )?;
    let mut names = Vec::new();
    let mut d = nix::dir::Dir::from_fd(sub.try_clone()?)?;
    for e in d.iter() {
        let e = e?;
        let n = std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
        if n == "." || n == ".." {
            continue;
        }
        let is_dir = matches!(e.file_type(), Some(nix::dir::Type::Directory));
        names.push((n, is_dir));
    }
    let mut freed = 0;
    for (n, is_dir) in names {
        freed += remove_at(&sub, &n, is_dir)?;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)?;
    Ok(freed)
}

/// The exit record of one held delete.
pub fn delete_record(n: usize, d: &HeldDelete, line: &str) -> ExitRecord {
    ExitRecord {
        id: format!("cache-delete-{}", n + 1),
        source: ExitSource::CacheDelete,
        kind: ExitKind::CacheDelete,
        summary: format!("delete {} in the cache {} (held)", d.path, d.cache),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            targets: vec![Target {
                path: d.path.clone(),
                class: TargetClass::Cache,
                op: TargetOp::Delete,
                backup_before_write: false,
                masked: false,
            }],
            ..Default::default()
        },
        needs: Needs::Contained { grants: Vec::new() },
        judgement: Judgement {
            verdict: Verdict::Review,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the call deleted {} in a real cache; the delete was held, not applied: \
                 `efr-sandbox cache apply {}` (or sandbox.cache_delete_apply) applies it",
                d.path, d.path
            )],
        },
    }
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
    for (i, d) in m.deletes.iter().enumerate() {
        fin.exits.push(delete_record(i, d, line));
    }
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
        let layers = prepare(&state, std::slice::from_ref(&cache), &[]).unwrap();
        std::fs::write(Path::new(&layers[0].upper).join("new"), "n").unwrap();
        let call = call_dir(&layers[0]).unwrap();
        let (m, cleanup) = merge_and_hold(&state, &layers, &[]);
        assert!(m.refused.is_empty(), "{:?}", m.refused);
        assert_eq!(std::fs::read_to_string(cache.join("new")).unwrap(), "n");
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

    #[test]
    fn rules_match() {
        let c = Path::new("/h/.npm");
        assert_eq!(
            rule_of(c, Path::new("_cacache/content-v2/sha512/ab/cd/ef")).map(|r| r.kind),
            Some(RuleKind::NpmContent)
        );
        let c = Path::new("/h/.cargo/registry");
        assert_eq!(
            rule_of(c, Path::new("cache/idx/serde-1.0.0.crate")).map(|r| r.kind),
            Some(RuleKind::CargoCrate)
        );
        assert_eq!(
            rule_of(c, Path::new("src/idx/serde-1.0.0/lib.rs")).map(|r| r.kind),
            Some(RuleKind::Skip)
        );
        assert!(rule_of(c, Path::new("index/idx/config.json")).is_none());
        let c = Path::new("/h/.cache");
        assert_eq!(
            rule_of(c, Path::new("pip/http-v2/a/b")).map(|r| r.kind),
            Some(RuleKind::Skip)
        );
    }

    #[test]
    fn integrity_to_path() {
        // sha512 of the empty string.
        let i = "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==";
        let p = npm_content_path(i).unwrap();
        assert_eq!(
            p,
            PathBuf::from(
                "content-v2/sha512/cf/83/e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"
            )
        );
        // The decoder: padding optional, URL-safe too, trailing bits ignored, else nothing.
        assert_eq!(base64_decode("Zm8=").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode("Zm8").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode("Zm9").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode("-_8=").as_deref(), Some(&[0xfb, 0xff][..]));
        assert_eq!(base64_decode("+/8=").as_deref(), Some(&[0xfb, 0xff][..]));
        assert_eq!(base64_decode("Zm8*"), None);
        assert_eq!(npm_content_path("sha512-not*base64"), None);
    }
}
