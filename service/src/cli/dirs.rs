//! What the commands that run in this process share: their `--cwd` and `--project`.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The `--cwd` and `--project` options of a command run in this process: the cwd (the
/// current directory when absent; a relative one is taken from it) and the project roots
/// (taken from the cwd), each of which must be a directory.
pub fn cli_dirs(
    cwd: Option<PathBuf>,
    projects: Vec<PathBuf>,
) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match cwd {
        Some(c) => here.join(c),
        None => here,
    };
    if !cwd.is_dir() {
        bail!("--cwd {} is not a directory", cwd.display());
    }
    let mut roots = Vec::new();
    for p in projects {
        let p = cwd.join(p);
        if !p.is_dir() {
            bail!("--project {} is not a directory", p.display());
        }
        roots.push(p);
    }
    Ok((cwd, roots))
}

/// [`cli_dirs`], and without `--project` the project `run` would take in that cwd (the git
/// top level of the cwd, else the cwd; never `/`, the home or above it: then none), said on
/// stderr as `run` says it: `explain` and `classify` answer for the call `run` would make
/// there, not for one with no project.
pub fn cli_dirs_as_run(
    cwd: Option<PathBuf>,
    projects: Vec<PathBuf>,
    home: &Path,
) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    let (cwd, mut roots) = cli_dirs(cwd, projects)?;
    if roots.is_empty() {
        let home = std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf());
        match crate::cli::run::default_project(&lexical(&cwd), &lexical(&home)) {
            Ok((dir, why)) => {
                eprintln!("efr-sandbox: project: {} ({why})", dir.display());
                roots.push(dir);
            }
            Err(why) => {
                eprintln!("efr-sandbox: project: none ({why}); pass --project DIR");
            }
        }
    }
    Ok((cwd, roots))
}

/// `p` with `.` and `..` taken out by name (as `run` takes its cwd).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}
