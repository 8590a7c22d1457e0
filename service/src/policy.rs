//! The service's link to efr-policy: the config in force and `explain`.
//!
//! The service reads the config file at start and again whenever the file changes (its
//! size, mtime or inode, checked before each use). A file that fails to load is reported
//! on stderr and the last good config stays in force (defaults when none was ever good).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use efr_policy::config::{Config, ConfigStore, Env};
use efr_policy::explain;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{ExplainParams, ExplainResult};

use crate::cli::{ConfigArgs, ExplainArgs};

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
        let mut l = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let now = stamp(l.store.path());
        if now != l.stamp {
            l.stamp = now;
            if let Err(e) = l.store.reload() {
                eprintln!("efr-sandbox: {e}; the last good config stays in force");
            }
        }
        l.store.config()
    }

    /// `sandbox.explain`.
    /// Every failure of explain is about its input (an empty path, a relative cwd, ...):
    /// `invalid`.
    pub fn explain(&self, params: ExplainParams) -> Result<ExplainResult, ErrorBody> {
        let config = self.config();
        explain::explain(&params, &config, &self.env)
            .map_err(|e| ErrorBody::new(ErrorCode::Invalid, e.to_string()))
    }
}

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

/// `efr-sandbox explain`: runs explain in this process (no service needed) and prints
/// policy's text, or the wire JSON with `--json`. The path is taken as bytes, so a name
/// that is not UTF-8 is explained as it is. A broken config file, or a `--cwd` or
/// `--project` that is not a directory, is an error.
pub fn explain_cli(args: ExplainArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    let config = Config::load(&env)?;
    let (cwd, projects) = cli_dirs(args.cwd, args.projects)?;
    if args.path.is_empty() {
        bail!("the path to explain is empty");
    }
    let result =
        explain::explain_path(Path::new(&args.path), Some(&cwd), &projects, &config, &env)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        let text = explain::render_text(&result);
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}

/// `efr-sandbox config`: the effective config with the source of each value. A broken file
/// is an error (with its line and column) and a non-zero exit.
pub fn config_cli(args: ConfigArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    let config = Config::load(&env)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&config.to_json())?);
    } else {
        print!("{}", config.render_text());
    }
    // What the bus filter leaves out of the config's rules, or opens through allow_never.
    for w in efr_policy::bus::filter_rules(&config.bus).warnings() {
        eprintln!("efr-sandbox: warning: {w}");
    }
    Ok(())
}
