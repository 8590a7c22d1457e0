//! The registries asked while the call runs: the cargo merge's answers fetched early.
//!
//! The merge of a cargo cache asks the registry for the index file of every crate the call
//! left and for its `config.json` (`merge.rs`): after a `cargo fetch`, those round trips on
//! fresh TLS connections were most of what the merge added to the call
//! (`docs/benchmarks.md`, "The verified cache merge"). cargo writes the index cache entry of
//! a crate when it resolves it, before it downloads anything, so the names are known long
//! before the call ends: while the call runs, a thread of the process that owns the call
//! looks at the index caches and crate files in the call's cargo layers every [`EVERY`]
//! (backing off to [`EVERY_MAX`] while nothing new appears) and asks the registry for what
//! each of them needs, with the merge's own client: only the hosts the call was granted,
//! the same bounds per fetch, and at most [`super::fetch::MERGE_BYTES`] of answers in all.
//! The merge then asks only for what is not answered yet. An early answer is the
//! registry's as much as a late one; a registry that changed in between only leaves a
//! file unmerged.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use efr_launcher::plan::CacheLayer;

use super::fetch::{Fetcher, Want};
use super::{CacheMerge, Verify, cargo};

/// The registries' answers by what was asked.
pub type Answers = BTreeMap<Want, Result<Vec<u8>, String>>;

/// How often the layers are looked at at first, and after something new.
pub const EVERY: Duration = Duration::from_millis(100);
/// The longest wait between two looks (a long call that downloads nothing more).
pub const EVERY_MAX: Duration = Duration::from_secs(2);
/// Most index cache files and crates looked at in one layer at one look.
const MAX_FILES: usize = 20_000;

/// The early asking of one call: stopped by [`Early::finish`] (or when dropped).
#[derive(Debug)]
pub struct Early {
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Answers>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Early {
    /// Starts asking for what the cargo layers of `layers` will need (`None`: the call
    /// has none, or no registry to ask).
    pub fn start(layers: &[CacheLayer], verify: &Verify) -> Option<Early> {
        let roots = cargo_roots(layers, verify);
        if roots.is_empty() || verify.granted.is_empty() {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(Mutex::new(Answers::new()));
        let (s, a, v) = (stop.clone(), answers.clone(), verify.clone());
        let thread = std::thread::Builder::new()
            .name("efr-cache-early".into())
            .spawn(move || run(&roots, &v, &s, &a))
            .ok()?;
        Some(Early {
            stop,
            answers,
            thread: Some(thread),
        })
    }

    /// Stops asking (a fetch under way is waited for) and gives what was answered.
    pub fn finish(mut self) -> Answers {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        std::mem::take(&mut *self.answers.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Early {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

/// The cargo caches' roots in the layers' upper dirs.
fn cargo_roots(layers: &[CacheLayer], verify: &Verify) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, l) in layers.iter().enumerate() {
        for (path, kind) in verify.kinds_of(i) {
            if kind != CacheMerge::Cargo {
                continue;
            }
            if let Ok(rel) = path.strip_prefix(&l.path) {
                out.push(Path::new(&l.upper).join(rel));
            }
        }
    }
    out
}

fn run(roots: &[PathBuf], v: &Verify, stop: &AtomicBool, answers: &Mutex<Answers>) {
    let registries = super::merge::cargo_candidates(v);
    let mut asked: BTreeSet<Want> = BTreeSet::new();
    let mut bytes: u64 = 0;
    let mut wait = EVERY;
    while !stop.load(Ordering::SeqCst) {
        let new = look(roots, &registries, &mut asked);
        if new.is_empty() {
            wait = (wait * 2).min(EVERY_MAX);
        } else {
            wait = EVERY;
            let f = Fetcher::new(
                v.granted.clone(),
                v.resolve.clone(),
                super::fetch::MERGE_TIME,
            );
            let got = f.get_all(&new);
            let mut a = answers.lock().unwrap_or_else(|e| e.into_inner());
            for (w, r) in new.into_iter().zip(got) {
                let r = r.map_err(|e| e.to_string());
                bytes += r.as_ref().map_or(0, |b| b.len() as u64);
                a.insert(w, r);
            }
            if bytes > super::fetch::MERGE_BYTES {
                return;
            }
        }
        std::thread::park_timeout(wait);
    }
}

/// What the cargo files under `roots` need that was not asked yet (then counted as asked).
fn look(roots: &[PathBuf], registries: &[String], asked: &mut BTreeSet<Want>) -> Vec<Want> {
    let mut new = Vec::new();
    for root in roots {
        for rel in cargo_files(root) {
            let Some(f) = cargo::classify(&rel) else {
                continue;
            };
            let dir = match &f {
                cargo::CargoFile::Crate { dir, .. }
                | cargo::CargoFile::IndexCache { dir, .. }
                | cargo::CargoFile::Config { dir } => dir.clone(),
            };
            let Some(index) = cargo::registry_of(&dir, registries) else {
                continue;
            };
            let config = cargo::CargoFile::Config { dir };
            for w in cargo::wants(&f, &index)
                .into_iter()
                .chain(cargo::wants(&config, &index))
            {
                if asked.insert(w.clone()) {
                    new.push(w);
                }
            }
        }
    }
    new
}

/// The index cache files (`index/DIR/.cache/**`) and crates (`cache/DIR/*.crate`) below a
/// cargo cache's root, relative to it (no link followed, at most [`MAX_FILES`]).
fn cargo_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let list = |d: &Path| -> Vec<(std::ffi::OsString, bool)> {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let t = e.file_type().ok()?;
                        (!t.is_symlink()).then(|| (e.file_name(), t.is_dir()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    for (dir, is_dir) in list(&root.join("cache")) {
        if !is_dir {
            continue;
        }
        for (f, is_dir) in list(&root.join("cache").join(&dir)) {
            if !is_dir && out.len() < MAX_FILES {
                out.push(Path::new("cache").join(&dir).join(f));
            }
        }
    }
    for (dir, is_dir) in list(&root.join("index")) {
        if !is_dir {
            continue;
        }
        let base = Path::new("index").join(&dir).join(".cache");
        let mut stack = vec![(base, 0usize)];
        while let Some((rel, depth)) = stack.pop() {
            for (name, is_dir) in list(&root.join(&rel)) {
                if out.len() >= MAX_FILES {
                    return out;
                }
                if is_dir && depth < 3 {
                    stack.push((rel.join(name), depth + 1));
                } else if !is_dir {
                    out.push(rel.join(name));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files of a cargo layer are found where cargo writes them, and each registry dir
    /// of a registry the call was granted gives its index files and `config.json` once.
    #[test]
    fn the_files_of_a_cargo_layer_give_their_wants_once() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let dir = cargo::dir_names("sparse+https://index.crates.io/")
            .into_iter()
            .next()
            .unwrap();
        for p in [
            format!("index/{dir}/.cache/3/s"),
            format!("cache/{dir}"),
            "src".into(),
        ] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        std::fs::write(root.join(format!("index/{dir}/.cache/3/s/syn")), "x").unwrap();
        std::fs::write(root.join(format!("cache/{dir}/md-5-0.10.6.crate")), "x").unwrap();
        std::fs::write(root.join("src/lib.rs"), "x").unwrap();
        let files = cargo_files(root);
        assert_eq!(files.len(), 2, "{files:?}");
        let registries = vec![cargo::CRATES_IO.to_string()];
        let mut asked = BTreeSet::new();
        let wants: Vec<String> = look(&[root.to_path_buf()], &registries, &mut asked)
            .into_iter()
            .map(|w| w.url)
            .collect();
        for u in [
            "https://index.crates.io/3/s/syn",
            "https://index.crates.io/config.json",
            "https://index.crates.io/md/-5/md-5",
        ] {
            assert!(wants.iter().any(|w| w == u), "{u} not in {wants:?}");
        }
        assert!(look(&[root.to_path_buf()], &registries, &mut asked).is_empty());
    }
}
