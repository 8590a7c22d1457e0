//! After a contained call: the git code it left where the view could not protect it.
//!
//! The view keeps the hooks and config of every repository it finds at launch read-only
//! (the project roots and repositories up to a few levels below them). A repository the
//! call made itself (`git init`, a clone) or one deeper than the launch walk is writable,
//! and a hook or a program-running config key put there would run outside the sandbox at
//! the user's next git command. So after the call, every repository under the project
//! roots is looked at: a hook, or a config file holding such keys, that changed during the
//! call (its ctime, which a call cannot set back) and that the view did not protect, is
//! taken out of git's way. Nothing is deleted: a hook moves to a new
//! `efr-quarantine-<random>/` in its git dir, a config keeps every other line and its
//! original is copied there. Each one is reported in the summary's `quarantined`. Nothing
//! the call left (links named like our files) can steer where these writes go: the
//! quarantine is a fresh directory, files are made with O_EXCL, and git dirs outside the
//! project roots are never touched.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use efr_policy::classify::git::{find_git_dir, strip_code};
use efr_policy::config::{Config, repositories};

/// How deep below a project root repositories are looked for after a call.
const DEPTH: usize = 6;

/// The quarantine directory inside a git dir.
const QUARANTINE: &str = "efr-quarantine";

/// Whether `p` changed at or after `since_ms` (milliseconds since the epoch), by ctime.
fn changed_since(p: &Path, since_ms: u64) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| {
        let ms = m.ctime().max(0) as u64 * 1000 + m.ctime_nsec().max(0) as u64 / 1_000_000;
        ms >= since_ms
    })
}

/// Whether the launch view kept `p` read-only (it, or a directory above it, is listed).
fn protected(p: &Path, view: &[String]) -> bool {
    view.iter()
        .any(|v| p.starts_with(Path::new(v.trim_end_matches('/'))))
}

/// A free name for `name` in `dir`.
fn free_name(dir: &Path, name: &str) -> PathBuf {
    let first = dir.join(name);
    if std::fs::symlink_metadata(&first).is_err() {
        return first;
    }
    (1..)
        .map(|n| dir.join(format!("{name}.{n}")))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or(first)
}

/// A new quarantine directory in `git_dir`: `efr-quarantine-<random>`, made with mkdir
/// (which never follows a link), so that nothing the call planted in the git dir (a link
/// named like the quarantine, pointing anywhere) decides where its files go.
fn quarantine_dir(git_dir: &Path) -> std::io::Result<PathBuf> {
    for _ in 0..8 {
        let dir = git_dir.join(format!("{QUARANTINE}-{}", crate::sys::random_hex(6)?));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free quarantine directory name"))
}

/// Moves `p` into a new quarantine directory of `git_dir`; the new path. The rename moves
/// the entry itself (a link stays a link; its target is not touched).
fn move_aside(git_dir: &Path, p: &Path) -> std::io::Result<PathBuf> {
    let dir = quarantine_dir(git_dir)?;
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "item".into());
    let to = dir.join(name);
    std::fs::rename(p, &to)?;
    Ok(to)
}

/// The git code a contained call left in repositories under `roots`; what was done with
/// each, one line per item. `since_ms` is when the call started; `view` the read-only
/// paths of its launch view.
pub fn after_call(
    roots: &[PathBuf],
    view: &[String],
    since_ms: u64,
    config: &Config,
) -> Vec<String> {
    let skip = config.build_output_names();
    let mut out = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for root in roots {
        for repo in repositories(root, DEPTH, &skip) {
            let Some(dirs) = find_git_dir(&repo) else {
                continue;
            };
            // Only git dirs inside the project roots are touched. A `.git` file that names
            // one elsewhere (a worktree or submodule points inside the project) would have
            // this check rewrite files that are not the project's: a `.git` file the call
            // made that way is moved aside instead, and reported.
            // Compared with every link resolved: `.git` (or a dir on the way) may be a link.
            let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            let roots_c: Vec<PathBuf> = roots.iter().map(|r| canon(r)).collect();
            let inside = |g: &Path| roots_c.iter().any(|r| canon(g).starts_with(r));
            if !inside(&dirs.git_dir) || !inside(&dirs.common) {
                let dotgit = repo.join(".git");
                // A `.git` file or link (not a real dir) that the call made.
                let is_file = std::fs::symlink_metadata(&dotgit).is_ok_and(|m| !m.is_dir());
                if is_file && !protected(&dotgit, view) && changed_since(&dotgit, since_ms) {
                    let to = free_name(&repo, ".git.efr-quarantine");
                    match std::fs::rename(&dotgit, &to) {
                        Ok(()) => out.push(format!(
                            "{}: made by the call, names the git dir {} outside the project; moved to {}",
                            dotgit.display(),
                            dirs.git_dir.display(),
                            to.display()
                        )),
                        Err(e) => out.push(format!(
                            "{}: made by the call, names the git dir {} outside the project; not moved: {e}",
                            dotgit.display(),
                            dirs.git_dir.display()
                        )),
                    }
                }
                continue;
            }
            for g in [dirs.git_dir, dirs.common] {
                if seen.contains(&g) {
                    continue;
                }
                seen.push(g.clone());
                hooks(&g, view, since_ms, &mut out);
                for name in ["config", "config.worktree"] {
                    config_file(&g, &g.join(name), view, since_ms, &mut out);
                }
            }
        }
    }
    out
}

fn hooks(g: &Path, view: &[String], since_ms: u64, out: &mut Vec<String>) {
    let dir = g.join("hooks");
    if protected(&dir, view) {
        return;
    }
    // A hooks dir that is itself a new link points git at hooks elsewhere.
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink())
        && changed_since(&dir, since_ms)
    {
        match move_aside(g, &dir) {
            Ok(to) => out.push(format!(
                "{}: a link made by the call, moved to {}",
                dir.display(),
                to.display()
            )),
            Err(e) => out.push(format!(
                "{}: a link made by the call, not moved: {e}",
                dir.display()
            )),
        }
        return;
    }
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".sample") || protected(&p, view) || !changed_since(&p, since_ms) {
            continue;
        }
        match move_aside(g, &p) {
            Ok(to) => out.push(format!(
                "{}: a hook written by the call, moved to {}",
                p.display(),
                to.display()
            )),
            Err(e) => out.push(format!(
                "{}: a hook written by the call, not moved: {e}",
                p.display()
            )),
        }
    }
}

/// Writes a file that must not exist yet (O_EXCL: a link in its place is refused).
fn new_file(p: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(p)?;
    f.write_all(data)?;
    f.sync_all()
}

fn config_file(g: &Path, p: &Path, view: &[String], since_ms: u64, out: &mut Vec<String>) {
    if protected(p, view) || !changed_since(p, since_ms) {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return;
    };
    if meta.file_type().is_symlink() {
        // A config that is a link made by the call: git would read whatever it names.
        match move_aside(g, p) {
            Ok(to) => out.push(format!(
                "{}: a link made by the call, moved to {}",
                p.display(),
                to.display()
            )),
            Err(e) => out.push(format!(
                "{}: a link made by the call, not moved: {e}",
                p.display()
            )),
        }
        return;
    }
    if !meta.is_file() || meta.len() > 1 << 20 {
        return;
    }
    let Ok(text) = std::fs::read_to_string(p) else {
        return;
    };
    let (kept, removed) = strip_code(&text);
    if removed.is_empty() {
        return;
    }
    let copy = (|| -> std::io::Result<PathBuf> {
        let dir = quarantine_dir(g)?;
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let to = dir.join(&name);
        new_file(&to, text.as_bytes(), 0o600)?;
        // The new config goes into a file of ours (create_new: never through a link the
        // call left), then over the old one.
        let tmp = dir.join(format!("{name}.new"));
        new_file(&tmp, kept.as_bytes(), meta.permissions().mode() & 0o777)?;
        std::fs::rename(&tmp, p)?;
        Ok(to)
    })();
    match copy {
        Ok(to) => out.push(format!(
            "{}: {} set by the call, taken out (the original is {})",
            p.display(),
            removed.join(", "),
            to.display()
        )),
        Err(e) => out.push(format!(
            "{}: {} set by the call, could not be taken out: {e}",
            p.display(),
            removed.join(", ")
        )),
    }
}
