//! What the commands that run in this process share: their `--cwd` and `--project`.

use std::path::PathBuf;

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
