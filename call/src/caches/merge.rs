//! The merge of one call's layer of one cache, after the call:
//!
//! 1. the upper dir is read: its whiteouts and opaque dirs become held deletes of the real
//!    cache's entries; the files a verifier knows ([`Candidate`]) are listed; for an
//!    `installs` cache each top-level addition is listed;
//! 2. npm's content (its hash is its path) is checked and merged;
//! 3. the registries are asked ([`super::fetch`]) what the rest should be, in parallel;
//! 4. what they confirm is merged (a `.crate`, an index cache, an npm index line); what
//!    they contradict is refused; what they could not confirm is counted;
//! 5. what is left in the upper dir is moved into the conversation's layer, or dropped
//!    with the layer when the call has no conversation.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use efr_launcher::plan::CacheLayer;
use efr_policy::config::CacheMerge;
use nix::fcntl::OFlag;
use sha2::Digest;

use super::fetch::{Fetcher, Want};
use super::{HeldDelete, Install, Merged, OPAQUE_XATTR, TEMP_PREFIX, Verify, cargo, npm};

/// Most examples of files not merged for want of a check kept in the report.
const UNVERIFIED_EXAMPLES: usize = 3;

/// A failure that stops the merge of one cache (the layer is kept).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct Stop(pub(super) String);

fn stop_on(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EROFS) | Some(libc::EIO)
    )
}

/// A file of the upper dir a verifier knows, by its path below the cache.
#[derive(Debug)]
enum Candidate {
    Cargo(cargo::CargoFile),
    NpmContent,
    /// An index bucket; its path below `index-v5`.
    NpmIndex(String),
}

struct Ctx<'a> {
    cache: PathBuf,
    upper: PathBuf,
    root: OwnedFd,
    staging: OwnedFd,
    masks: Vec<PathBuf>,
    /// The merge kinds of the cache and the caches inside it, the innermost first.
    kinds: Vec<(PathBuf, CacheMerge)>,
    out: &'a mut Merged,
    candidates: Vec<(PathBuf, Candidate)>,
    /// Files not merged for want of a check: how many, and the first few with why.
    unverified: usize,
    examples: Vec<String>,
}

impl Ctx<'_> {
    fn refused(&mut self, rel: &Path, why: &str) {
        self.out
            .refused
            .push(format!("{}: {why}", self.cache.join(rel).display()));
    }

    fn unverified(&mut self, rel: &Path, why: &str) {
        self.unverified += 1;
        if self.examples.len() < UNVERIFIED_EXAMPLES {
            self.examples.push(format!("{}: {why}", rel.display()));
        }
    }

    /// The merge kind of `rel` and its path below the cache that kind is of.
    fn kind(&self, rel: &Path) -> (CacheMerge, PathBuf) {
        let full = self.cache.join(rel);
        for (root, k) in &self.kinds {
            if let Ok(sub) = full.strip_prefix(root) {
                return (*k, sub.to_path_buf());
            }
        }
        (CacheMerge::Never, rel.to_path_buf())
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

    /// Opens (making what is missing, as the upper dir's modes say) the directory `dir`
    /// of the real cache beneath its root, no link followed.
    fn real_dir_made(&mut self, dir: &Path) -> Result<Option<OwnedFd>, Stop> {
        let mut fd = self.root.try_clone().map_err(|e| Stop(e.to_string()))?;
        let mut at = PathBuf::new();
        for c in dir.components() {
            at.push(c);
            let name = c.as_os_str();
            let mode = std::fs::symlink_metadata(self.upper.join(&at))
                .map(|m| m.mode())
                .unwrap_or(0o755);
            let mode = nix::sys::stat::Mode::from_bits_truncate((mode & 0o755) | 0o700);
            match nix::sys::stat::mkdirat(&fd, name, mode) {
                Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                Err(e) => {
                    let e = std::io::Error::from(e);
                    if stop_on(&e) {
                        return Err(Stop(format!("{}: {e}", self.cache.join(&at).display())));
                    }
                    self.refused(&at, &e.to_string());
                    return Ok(None);
                }
            }
            match crate::sys::open_beneath(
                &fd,
                Path::new(name),
                OFlag::O_DIRECTORY | OFlag::O_RDONLY,
                0,
            ) {
                Ok(next) => fd = next,
                Err(e) => {
                    self.refused(
                        &at,
                        &format!("cannot open it in the real cache (a link?): {e}"),
                    );
                    return Ok(None);
                }
            }
        }
        Ok(Some(fd))
    }
}

/// Merges the layer `l` of a finished call into its cache; see the module's doc.
pub(super) fn merge_one(
    state: &Path,
    l: &CacheLayer,
    kinds: Vec<(PathBuf, CacheMerge)>,
    masks: &[String],
    verify: &Verify,
    out: &mut Merged,
) -> Result<(), Stop> {
    let cache = PathBuf::from(&l.path);
    let io = |what: &str, e: std::io::Error| Stop(format!("{what}: {e}"));
    let _lock =
        super::lock(state, &format!("{}.lock", super::key(&cache))).map_err(|e| io("lock", e))?;
    let root: OwnedFd = File::open(&cache).map_err(|e| io(&l.path, e))?.into();
    let staging = staging(state, &cache)?;
    let staging_fd: OwnedFd = File::open(&staging).map_err(|e| io("staging", e))?.into();
    let upper = PathBuf::from(&l.upper);
    let mut cx = Ctx {
        cache: cache.clone(),
        upper: upper.clone(),
        root,
        staging: staging_fd,
        masks: masks.iter().map(PathBuf::from).collect(),
        kinds,
        out,
        candidates: Vec::new(),
        unverified: 0,
        examples: Vec::new(),
    };
    let real = cx.root.try_clone().map_err(|e| Stop(e.to_string()))?;
    scan(&mut cx, Path::new(""), Some(real))?;
    let candidates = std::mem::take(&mut cx.candidates);
    verify_and_merge(&mut cx, candidates, verify)?;
    if cx.unverified > 0 {
        let n = cx.unverified;
        let fate = if l.conversation.is_some() {
            "kept for the conversation"
        } else {
            "dropped with the call's layer"
        };
        let examples = cx.examples.join("; ");
        cx.out.refused.push(format!(
            "{}: {n} files not merged, nothing confirmed them ({fate}): {examples}",
            cache.display()
        ));
    }
    if let Some(conv) = &l.conversation {
        let id = Path::new(conv)
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _conv_lock = super::lock(
            state,
            &super::conversation::lock_name(&id, &super::key(&cache)),
        )
        .map_err(|e| io("conversation lock", e))?;
        let mut taken = Vec::new();
        super::conversation::move_in(
            &upper,
            Path::new(conv),
            Path::new(""),
            &cx.root,
            &verify.git_safe_keys,
            &mut taken,
        )
        .map_err(|e| io(&format!("moving the layer into {conv}"), e))?;
        cx.out.refused.extend(taken);
        super::conversation::touch(state, &id);
    }
    if staging.starts_with(&cache) {
        let _ = std::fs::remove_dir(&staging);
    }
    Ok(())
}

/// The staging dir of a cache's merge, emptied: beside the layers when on the cache's file
/// system (a rename must not cross one), else a hidden dir of the cache itself.
fn staging(state: &Path, cache: &Path) -> Result<PathBuf, Stop> {
    let io = |what: &str, e: std::io::Error| Stop(format!("{what}: {e}"));
    let dev = std::fs::metadata(cache)
        .map_err(|e| io(&cache.display().to_string(), e))?
        .dev();
    let mut staging = state.join("staging").join(super::key(cache));
    super::private_dirs(&staging).map_err(|e| io("staging", e))?;
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
    let fd: OwnedFd = File::open(&staging).map_err(|e| io("staging", e))?.into();
    for e in std::fs::read_dir(&staging)
        .map_err(|e| io("staging", e))?
        .flatten()
    {
        let _ = nix::unistd::unlinkat(
            &fd,
            e.file_name().as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    Ok(staging)
}

fn is_opaque(p: &Path) -> bool {
    crate::sys::lgetxattr(p, OPAQUE_XATTR)
        .ok()
        .flatten()
        .is_some_and(|v| v == b"y")
}

/// Reads the upper dir below `rel`: deletes held, candidates and installs listed. `real`
/// is the real cache's dir at `rel` (`None`: it has none there).
fn scan(cx: &mut Ctx, rel: &Path, real: Option<OwnedFd>) -> Result<(), Stop> {
    let udir = cx.upper.join(rel);
    let mut entries: Vec<_> = match std::fs::read_dir(&udir) {
        Ok(r) => r.flatten().collect(),
        Err(e) => return Err(Stop(format!("{}: {e}", udir.display()))),
    };
    entries.sort_by_key(|e| e.file_name());
    if let Some(real_dir) = &real {
        if !rel.as_os_str().is_empty() && is_opaque(&udir) {
            // The call removed the directory and made it again: what the real one holds
            // that the call's does not is deleted (held).
            let names: BTreeSet<_> = entries.iter().map(|e| e.file_name()).collect();
            let mut gone = Vec::new();
            if let Ok(mut d) =
                nix::dir::Dir::from_fd(real_dir.try_clone().map_err(|e| Stop(e.to_string()))?)
            {
                for e in d.iter().flatten() {
                    let n = std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
                    if n != "." && n != ".." && !names.contains(&n) {
                        gone.push(n);
                    }
                }
            }
            for n in gone {
                cx.hold(real_dir, &rel.join(&n));
            }
        }
    }
    for e in entries {
        let name = e.file_name();
        let r = rel.join(&name);
        let Ok(md) = std::fs::symlink_metadata(cx.upper.join(&r)) else {
            continue;
        };
        let ft = md.file_type();
        if ft.is_char_device() && md.rdev() == 0 {
            if let Some(real_dir) = &real {
                cx.hold(real_dir, &r);
            }
            continue;
        }
        let in_real = real.as_ref().map(|d| {
            nix::sys::stat::fstatat(
                d,
                name.as_os_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .ok()
        });
        let (kind, sub) = cx.kind(&r);
        if kind == CacheMerge::Installs {
            if let Some(found) = &in_real {
                let existing_dir =
                    found.is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
                if !(existing_dir && ft.is_dir()) {
                    cx.out.installs.push(Install {
                        path: cx.cache.join(&r).to_string_lossy().into_owned(),
                        changed: found.is_some(),
                    });
                    continue;
                }
            }
        }
        if ft.is_dir() {
            let sub_real = match (&real, in_real.flatten()) {
                (Some(d), Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
                    crate::sys::open_beneath(
                        d,
                        Path::new(&name),
                        OFlag::O_DIRECTORY | OFlag::O_RDONLY,
                        0,
                    )
                    .ok()
                }
                _ => None,
            };
            scan(cx, &r, sub_real)?;
        } else if ft.is_file() {
            let c = match kind {
                CacheMerge::Cargo => cargo::classify(&sub).map(Candidate::Cargo),
                CacheMerge::Npm => npm_candidate(&sub),
                _ => None,
            };
            if let Some(c) = c {
                cx.candidates.push((r, c));
            }
        }
    }
    Ok(())
}

fn npm_candidate(sub: &Path) -> Option<Candidate> {
    let comps: Vec<&str> = sub
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    match comps.as_slice() {
        ["_cacache", "content-v2", ..] => Some(Candidate::NpmContent),
        ["_cacache", "index-v5", rest @ ..] if !rest.is_empty() => {
            Some(Candidate::NpmIndex(rest.join("/")))
        }
        _ => None,
    }
}

/// The npm lines of the call's buckets the real ones lack, read: by bucket, the lines with
/// what they are (or why they cannot be checked).
type Lines = Vec<(String, Result<(npm::IndexLine, npm::Url), String>)>;

/// What the registries are asked for the candidates of one layer, and what each answer
/// will check.
#[derive(Default)]
struct Plan {
    wants: BTreeSet<Want>,
    /// Cargo files: their path, what they are, their registry's index URL.
    cargo: Vec<(PathBuf, cargo::CargoFile, String)>,
    /// npm buckets: their path, their new lines, the real bucket's text.
    npm: Vec<(PathBuf, Lines, String)>,
}

fn verify_and_merge(
    cx: &mut Ctx,
    candidates: Vec<(PathBuf, Candidate)>,
    verify: &Verify,
) -> Result<(), Stop> {
    let (content, others): (Vec<_>, Vec<_>) = candidates
        .into_iter()
        .partition(|(_, c)| matches!(c, Candidate::NpmContent));
    let plan = plan(cx, others, verify);
    let wants: Vec<Want> = plan.wants.iter().cloned().collect();
    // The registries answer while the files are written: npm's content merged (an index
    // line is merged only when its content is there), each cargo file staged, fsynced,
    // waiting for its verdict. The answers' round trips are most of a merge's cost.
    let (answers, staged) = std::thread::scope(|s| {
        let asked = s.spawn(|| ask(&wants, verify));
        let staged = stage_while_asking(cx, &content, &plan.cargo);
        let answers = asked
            .join()
            .unwrap_or_else(|_| vec![Err("the fetches' thread ended".to_string()); wants.len()]);
        (answers, staged)
    });
    let staged = staged?;
    let by_url: BTreeMap<String, Result<Vec<u8>, String>> = wants
        .iter()
        .zip(&answers)
        .filter(|(w, _)| w.accept.is_none())
        .map(|(w, a)| (w.url.clone(), a.clone()))
        .collect();
    let by_want: BTreeMap<&Want, &Result<Vec<u8>, String>> = wants.iter().zip(&answers).collect();
    for ((rel, f, index), (bytes, st)) in plan.cargo.iter().zip(staged) {
        check_cargo(cx, rel, f, index, &bytes, st, &by_url)?;
    }
    for (rel, lines, existing) in plan.npm {
        let mut ok = Vec::new();
        let total = lines.len();
        for (text, l) in lines {
            match l {
                Err(why) => cx.unverified(&rel, &why),
                Ok((line, url)) => {
                    let want = npm::want(&url, &line);
                    match npm::verify(&url, &line, by_want.get(&want).copied()) {
                        npm::Verdict::Verified => ok.push((text, line)),
                        npm::Verdict::Mismatch(why) => cx.refused(&rel, &why),
                        npm::Verdict::Unverified(why) => cx.unverified(&rel, &why),
                    }
                }
            }
        }
        merge_npm_lines(cx, &rel, existing, ok, total)?;
    }
    Ok(())
}

/// A cargo file's bytes and its staged copy (none: nothing to merge or refused).
type StagedCargo = (Vec<u8>, Option<Staged>);

/// Merges npm's content and stages each cargo file, while the registries are asked.
fn stage_while_asking(
    cx: &mut Ctx,
    content: &[(PathBuf, Candidate)],
    cargo_files: &[(PathBuf, cargo::CargoFile, String)],
) -> Result<Vec<StagedCargo>, Stop> {
    for (rel, _) in content {
        let Some(mut f) = open_upper(cx, rel) else {
            continue;
        };
        match npm_content_ok(rel, &mut f) {
            Ok(()) => {
                merge_file(cx, rel, &mut f, true)?;
            }
            Err(why) => cx.refused(rel, &why),
        }
    }
    let mut out = Vec::new();
    for (rel, f, _) in cargo_files {
        let mut bytes = Vec::new();
        let Some(mut file) = open_upper(cx, rel) else {
            out.push((bytes, None));
            continue;
        };
        if let Err(e) = file.read_to_end(&mut bytes) {
            cx.refused(rel, &e.to_string());
            out.push((bytes, None));
            continue;
        }
        let content_addressed = matches!(f, cargo::CargoFile::Crate { .. });
        let st = stage(cx, rel, &mut file, content_addressed)?;
        out.push((bytes, st));
    }
    Ok(out)
}

/// What to ask the registries for the candidates other than npm's content.
fn plan(cx: &mut Ctx, candidates: Vec<(PathBuf, Candidate)>, verify: &Verify) -> Plan {
    let registries = cargo_candidates(verify);
    let mut plan = Plan::default();
    for (rel, c) in candidates {
        match c {
            Candidate::NpmContent => {}
            Candidate::Cargo(f) => {
                let dir = match &f {
                    cargo::CargoFile::Crate { dir, .. }
                    | cargo::CargoFile::IndexCache { dir, .. }
                    | cargo::CargoFile::Config { dir } => dir.clone(),
                };
                match cargo::registry_of(&dir, &registries) {
                    Some(index) => {
                        plan.wants.extend(cargo::wants(&f, &index));
                        plan.cargo.push((rel, f, index));
                    }
                    None => {
                        cx.unverified(&rel, "no registry the call was granted has this dir's name")
                    }
                }
            }
            Candidate::NpmIndex(bucket) => {
                let (lines, existing) = npm_lines(cx, &rel, &bucket);
                for (line, url) in lines.iter().filter_map(|(_, l)| l.as_ref().ok()) {
                    plan.wants.insert(npm::want(url, line));
                }
                plan.npm.push((rel, lines, existing));
            }
        }
    }
    plan
}

/// Checks one cargo file (its bytes, staged) against its registry's answers: committed
/// when they confirm it, else its staged copy discarded.
fn check_cargo(
    cx: &mut Ctx,
    rel: &Path,
    f: &cargo::CargoFile,
    index: &str,
    bytes: &[u8],
    staged: Option<Staged>,
    answers: &BTreeMap<String, Result<Vec<u8>, String>>,
) -> Result<(), Stop> {
    let verdict = cargo::verify(f, index, bytes, answers);
    let Some(st) = staged else {
        // Nothing staged: the same bytes are there already, or it was refused. A
        // contradiction is still said.
        if let cargo::Verdict::Mismatch(why) = verdict {
            cx.refused(rel, &why);
        }
        return Ok(());
    };
    match verdict {
        cargo::Verdict::Verified => {
            commit(cx, st)?;
        }
        cargo::Verdict::Mismatch(why) => {
            discard(cx, st);
            cx.refused(rel, &why);
        }
        cargo::Verdict::Unverified(why) => {
            discard(cx, st);
            cx.unverified(rel, &why);
        }
    }
    Ok(())
}

/// The candidate sparse registries of a cargo dir: the call's own host grants, crates.io,
/// the user's cargo config's.
pub(super) fn cargo_candidates(v: &Verify) -> Vec<String> {
    let mut out: Vec<String> = v
        .granted
        .iter()
        .filter_map(|g| g.root_url())
        .map(|u| format!("sparse+{u}"))
        .collect();
    out.push(cargo::CRATES_IO.to_string());
    out.extend(v.cargo_registries.iter().cloned());
    out
}

/// Asks the registries for what they did not answer while the call ran (nothing when
/// nothing is wanted).
fn ask(wants: &[Want], v: &Verify) -> Vec<Result<Vec<u8>, String>> {
    let missing: Vec<Want> = wants
        .iter()
        .filter(|w| !v.early.contains_key(w))
        .cloned()
        .collect();
    let mut late: BTreeMap<&Want, Result<Vec<u8>, String>> = BTreeMap::new();
    if !missing.is_empty() {
        let f = Fetcher::new(
            v.granted.clone(),
            v.resolve.clone(),
            super::fetch::MERGE_TIME,
        );
        for (w, r) in missing.iter().zip(f.get_all(&missing)) {
            late.insert(w, r.map_err(|e| e.to_string()));
        }
    }
    wants
        .iter()
        .map(|w| match v.early.get(w) {
            Some(r) => r.clone(),
            None => late
                .remove(w)
                .unwrap_or_else(|| Err(format!("{}: not asked", w.url))),
        })
        .collect()
}

fn open_upper(cx: &mut Ctx, rel: &Path) -> Option<File> {
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(cx.upper.join(rel))
    {
        Ok(f) => Some(f),
        Err(e) => {
            cx.refused(rel, &e.to_string());
            None
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

/// A file written to the staging dir, fsynced, waiting to be renamed into place.
struct Staged {
    rel: PathBuf,
    tmp: String,
    content_addressed: bool,
}

/// Writes the verified file `rel` (open as `src`) into the real cache: [`stage`] then
/// [`commit`]. Whether it wrote one.
fn merge_file(
    cx: &mut Ctx,
    rel: &Path,
    src: &mut File,
    content_addressed: bool,
) -> Result<bool, Stop> {
    match stage(cx, rel, src, content_addressed)? {
        Some(s) => commit(cx, s),
        None => Ok(false),
    }
}

/// Writes `rel` (open as `src`) to a temp file of the staging dir, fsynced; nothing when
/// the real cache holds the same bytes there already (the call's copy is then taken out of
/// its layer), or may not get them (a masked path, another file of a content-addressed
/// name, a link), which is refused. Nothing of the real cache is changed.
fn stage(
    cx: &mut Ctx,
    rel: &Path,
    src: &mut File,
    content_addressed: bool,
) -> Result<Option<Staged>, Stop> {
    let full = cx.cache.join(rel);
    if cx.masks.iter().any(|m| full.starts_with(m)) {
        cx.refused(rel, "a masked path: never created by a call");
        return Ok(None);
    }
    let name = rel.file_name().unwrap_or_default();
    let parent = rel.parent().unwrap_or(Path::new(""));
    let mode = src.metadata().map(|m| m.mode()).unwrap_or(0o644);
    let existing =
        crate::sys::open_beneath(&cx.root, parent, OFlag::O_DIRECTORY | OFlag::O_RDONLY, 0)
            .ok()
            .map(|d| crate::sys::open_beneath(&d, Path::new(name), OFlag::O_RDONLY, 0));
    match existing {
        Some(Ok(fd)) => {
            let mut real = File::from(fd);
            if !real.metadata().map(|m| m.is_file()).unwrap_or(false) {
                cx.refused(rel, "exists in the real cache and is not a plain file");
                return Ok(None);
            }
            let _ = std::io::Seek::rewind(src);
            match same_content(src, &mut real) {
                Ok(true) => {
                    let _ = std::fs::remove_file(cx.upper.join(rel));
                    return Ok(None);
                }
                Ok(false) if content_addressed => {
                    cx.refused(
                        rel,
                        "the real cache holds other bytes under this name: kept",
                    );
                    return Ok(None);
                }
                Ok(false) => {}
                Err(e) => {
                    cx.refused(rel, &e.to_string());
                    return Ok(None);
                }
            }
        }
        Some(Err(e)) if e.raw_os_error() != Some(libc::ENOENT) => {
            cx.refused(
                rel,
                &format!("cannot open it in the real cache (a link?): {e}"),
            );
            return Ok(None);
        }
        _ => {}
    }
    let _ = std::io::Seek::rewind(src);
    let tmp = format!(
        "{TEMP_PREFIX}{}",
        crate::sys::random_hex(8).map_err(|e| Stop(e.to_string()))?
    );
    let written = (|| -> std::io::Result<()> {
        let fd = crate::sys::open_beneath(
            &cx.staging,
            Path::new(&tmp),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY,
            0o600,
        )?;
        let mut dst = File::from(fd);
        std::io::copy(src, &mut dst)?;
        dst.flush()?;
        nix::sys::stat::fchmod(
            dst.as_fd(),
            nix::sys::stat::Mode::from_bits_truncate(mode & 0o644 | 0o400),
        )?;
        dst.sync_all()?;
        Ok(())
    })();
    let staged = Staged {
        rel: rel.to_path_buf(),
        tmp,
        content_addressed,
    };
    if let Err(e) = written {
        discard(cx, staged);
        if stop_on(&e) {
            return Err(Stop(format!("{}: {e}", full.display())));
        }
        cx.refused(rel, &e.to_string());
        return Ok(None);
    }
    Ok(Some(staged))
}

/// Removes a staged file that is not to be merged.
fn discard(cx: &Ctx, s: Staged) {
    let _ = nix::unistd::unlinkat(
        &cx.staging,
        s.tmp.as_str(),
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    );
}

/// Renames a staged file into place (never over another file when it is content
/// addressed), its directory made and fsynced; the call's copy is then taken out of its
/// layer: the real one shows through. Whether it wrote one.
fn commit(cx: &mut Ctx, s: Staged) -> Result<bool, Stop> {
    let rel = s.rel.clone();
    let full = cx.cache.join(&rel);
    let name = rel.file_name().unwrap_or_default();
    let Some(real_dir) = cx.real_dir_made(rel.parent().unwrap_or(Path::new("")))? else {
        discard(cx, s);
        return Ok(false);
    };
    let drop_upper = |cx: &Ctx| {
        let _ = std::fs::remove_file(cx.upper.join(&rel));
    };
    let renamed = if s.content_addressed {
        nix::fcntl::renameat2(
            &cx.staging,
            s.tmp.as_str(),
            &real_dir,
            name,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
    } else {
        nix::fcntl::renameat(&cx.staging, s.tmp.as_str(), &real_dir, name)
    };
    match renamed {
        Ok(()) => {
            let _ = nix::unistd::fsync(&real_dir);
            drop_upper(cx);
            Ok(true)
        }
        // A concurrent merge put it there first: its bytes were verified too.
        Err(nix::errno::Errno::EEXIST) => {
            discard(cx, s);
            drop_upper(cx);
            Ok(false)
        }
        Err(e) => {
            discard(cx, s);
            let e = std::io::Error::from(e);
            if stop_on(&e) {
                return Err(Stop(format!("{}: {e}", full.display())));
            }
            cx.refused(&rel, &e.to_string());
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

/// `.../content-v2/<algo>/<aa>/<bb>/<rest>`: the content's hash must be the path's.
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
    if super::hex(&got) != want {
        return Err("npm content whose hash is not its path's".into());
    }
    Ok(())
}

/// The content path (below `_cacache`) an npm integrity string names first, of an
/// algorithm the merge verifies.
fn npm_content_path(integrity: &str) -> Option<PathBuf> {
    npm::digests(integrity)
        .into_iter()
        .max_by_key(|(a, _)| a.clone())
        .and_then(|(algo, d)| {
            let h = super::hex(&d);
            (h.len() >= 5).then(|| {
                PathBuf::from("content-v2")
                    .join(algo)
                    .join(&h[..2])
                    .join(&h[2..4])
                    .join(&h[4..])
            })
        })
}

/// The lines of the call's bucket `rel` that the real bucket lacks, read, and the real
/// bucket's text.
fn npm_lines(cx: &mut Ctx, rel: &Path, bucket: &str) -> (Lines, String) {
    let text = match std::fs::read_to_string(cx.upper.join(rel)) {
        Ok(t) => t,
        Err(e) => {
            cx.refused(rel, &e.to_string());
            return (Vec::new(), String::new());
        }
    };
    let existing = read_real(cx, rel).unwrap_or_default();
    let have: BTreeSet<&str> = existing.lines().collect();
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || have.contains(line) {
            continue;
        }
        let read = npm::parse_line(line, bucket)
            .map_err(|e| e.to_string())
            .and_then(|l| {
                let u = npm::url_of(&l.key)
                    .ok_or_else(|| "an index key the merge does not read".to_string())?;
                Ok((l, u))
            });
        out.push((line.to_string(), read));
    }
    (out, existing)
}

fn read_real(cx: &mut Ctx, rel: &Path) -> Option<String> {
    let fd = crate::sys::open_beneath(&cx.root, rel, OFlag::O_RDONLY, 0).ok()?;
    let mut f = File::from(fd);
    if !f.metadata().map(|m| m.is_file()).unwrap_or(false) {
        return None;
    }
    let mut s = String::new();
    f.read_to_string(&mut s).ok()?;
    Some(s)
}

/// Whether the content an integrity names is in the real cache and verifies.
fn content_in_real(cx: &Ctx, cacache: &Path, integrity: &str) -> bool {
    let Some(p) = npm_content_path(integrity) else {
        return false;
    };
    let full = cacache.join(&p);
    let Ok(fd) = crate::sys::open_beneath(&cx.root, &full, OFlag::O_RDONLY, 0) else {
        return false;
    };
    let mut f = File::from(fd);
    let comps: Vec<String> = p
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let want = format!("{}{}{}", comps[2], comps[3], comps[4]);
    digest(&comps[1], &mut f).is_some_and(|d| super::hex(&d) == want)
}

/// Adds the verified lines `ok` of the call's bucket `rel` to the real bucket (a new file
/// written and renamed) when their content is in the real cache; the call's bucket is
/// then taken out of its layer when every one of its `total` new lines went in.
fn merge_npm_lines(
    cx: &mut Ctx,
    rel: &Path,
    existing: String,
    ok: Vec<(String, npm::IndexLine)>,
    total: usize,
) -> Result<(), Stop> {
    let comps: Vec<_> = rel.components().collect();
    let Some(i) = comps.iter().position(|c| c.as_os_str() == "index-v5") else {
        return Ok(());
    };
    let cacache: PathBuf = comps[..i].iter().collect();
    let mut add = Vec::new();
    for (text, line) in ok {
        if content_in_real(cx, &cacache, &line.integrity) {
            add.push(text);
        } else {
            cx.unverified(rel, "an index entry whose content is not in the cache");
        }
    }
    if add.is_empty() {
        return Ok(());
    }
    let all = add.len() == total;
    let mut body = existing;
    if !body.is_empty() && !body.ends_with('\n') {
        body.push('\n');
    }
    for l in add {
        body.push_str(&l);
        body.push('\n');
    }
    let Some(real_dir) = cx.real_dir_made(rel.parent().unwrap_or(Path::new("")))? else {
        return Ok(());
    };
    let name = rel.file_name().unwrap_or_default();
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
    match written {
        Ok(()) => {
            if all {
                let _ = std::fs::remove_file(cx.upper.join(rel));
            }
        }
        Err(e) => {
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
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(npm_content_path("sha512-not*base64"), None);
    }
}
