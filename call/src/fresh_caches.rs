//! A user's first run of a package manager: its cache does not exist yet, so it has no
//! layer, and the call, whose home is read-only, cannot make it (`npm install` failed on
//! `~/.npm/_cacache` with "read-only file system"). Before a contained call, the caches of
//! the managers its line runs ([`efr_policy::classify::line_caches`]) that are missing are
//! made on the host, as the manager itself would have made them there: the configured
//! cache that holds each one (`~/.cache` for pip's `~/.cache/pip`), and the lock files
//! the manager keeps beside it ([`crate::cache_paths::CACHE_FILES`]), empty. Each is then
//! layered like any other cache. A cache inside a writable root (the call makes it
//! itself), at or below a mask, or under the call's own `/tmp` is left alone, and what
//! cannot be made is left to the call's refusal (its hint names the grant).

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use efr_policy::config::{Config, Env};
use efr_policy::knowledge::Knowledge;

use crate::cache_paths::{CACHE_FILES, expand};

/// What [`make_missing`] made, for the call's summary of what it did on the host.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Made {
    /// The cache directories made, as the managers make theirs (0755 less the umask).
    pub dirs: Vec<PathBuf>,
    /// The empty files made beside them: the managers' lock files of `CACHE_FILES`.
    pub files: Vec<PathBuf>,
}

/// Makes the missing caches (and their lock files) of the managers `line` runs, of those
/// `config` lists, except where a call with writable roots `writable` and masks `masks`
/// has no use for a layer.
pub fn make_missing(
    config: &Config,
    env: &Env,
    line: &str,
    writable: &[String],
    masks: &[String],
) -> Made {
    let mut made = Made::default();
    let wanted = efr_policy::classify::line_caches::line_caches(line, Knowledge::get());
    if wanted.is_empty() {
        return made;
    }
    let configured: Vec<PathBuf> = config
        .sandbox
        .caches
        .iter()
        .filter_map(|e| expand(&e.value, env))
        .collect();
    let skip = |p: &Path| {
        !p.starts_with(&env.home)
            || p == env.home
            || p.starts_with(&env.tmp)
            || p.starts_with("/tmp")
            || writable.iter().any(|w| p.starts_with(w))
            || masks.iter().any(|m| p.starts_with(m))
    };
    for w in &wanted {
        let Some(want) = expand(w, env) else {
            continue;
        };
        // The outermost configured cache that holds it: the one the call gets a layer of.
        let Some(cache) = configured
            .iter()
            .filter(|c| want.starts_with(c))
            .min_by_key(|c| c.components().count())
        else {
            continue;
        };
        if skip(cache) || skip(&want) {
            continue;
        }
        if std::fs::symlink_metadata(cache).is_err() {
            // Mode as the managers make theirs (the umask applies).
            match std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(cache)
            {
                Ok(()) => made.dirs.push(cache.clone()),
                Err(_) => continue,
            }
        }
        for (c, file, _) in CACHE_FILES {
            let (Some(c), Some(file)) = (expand(c, env), expand(file, env)) else {
                continue;
            };
            if c != *cache || skip(&file) || std::fs::symlink_metadata(&file).is_ok() {
                continue;
            }
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&file);
            if f.is_ok() {
                made.files.push(file);
            }
        }
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Env, Config) {
        // Not under /tmp: a call has its own, and no cache there is layered.
        let d = tempfile::tempdir_in("/var/tmp").unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        std::fs::create_dir_all(&home).unwrap_or_else(|e| panic!("{e}"));
        let env = Env::new(&home);
        (d, env, Config::defaults())
    }

    #[test]
    fn a_first_npm_install_gets_its_cache_made() {
        let (_d, env, config) = setup();
        let m = make_missing(&config, &env, "npm install", &[], &[]);
        assert_eq!(m.dirs, [env.home.join(".npm")]);
        assert!(env.home.join(".npm").is_dir());
        // Made once: the next call finds it.
        assert_eq!(
            make_missing(&config, &env, "npm install", &[], &[]),
            Made::default()
        );
    }

    #[test]
    fn cargo_gets_its_caches_and_its_lock_files() {
        let (_d, env, config) = setup();
        let m = make_missing(&config, &env, "cargo fetch", &[], &[]);
        let h = &env.home;
        assert_eq!(m.dirs, [h.join(".cargo/registry"), h.join(".cargo/git")]);
        assert_eq!(
            m.files,
            [
                h.join(".cargo/.package-cache"),
                h.join(".cargo/.package-cache-mutate")
            ]
        );
        for f in &m.files {
            assert_eq!(std::fs::read(f).unwrap_or_default(), b"");
        }
        // A lock file that exists is not touched.
        std::fs::remove_dir(h.join(".cargo/git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(h.join(".cargo/.package-cache"), "held").unwrap_or_else(|e| panic!("{e}"));
        let m = make_missing(&config, &env, "cargo build", &[], &[]);
        assert_eq!(m.dirs, [h.join(".cargo/git")]);
        assert!(m.files.is_empty());
        assert_eq!(
            std::fs::read(h.join(".cargo/.package-cache")).unwrap_or_default(),
            b"held"
        );
    }

    #[test]
    fn pip_gets_the_configured_cache_that_holds_its_own() {
        let (_d, env, config) = setup();
        let m = make_missing(&config, &env, "python3 -m pip install x", &[], &[]);
        assert_eq!(m.dirs, [env.home.join(".cache")]);
        assert!(!env.home.join(".cache/pip").exists());
    }

    #[test]
    fn nothing_is_made_for_other_lines_writable_roots_or_masks() {
        let (_d, env, config) = setup();
        assert_eq!(
            make_missing(&config, &env, "echo npm", &[], &[]),
            Made::default()
        );
        let home = env.home.to_string_lossy().into_owned();
        assert_eq!(
            make_missing(&config, &env, "npm i", std::slice::from_ref(&home), &[]),
            Made::default()
        );
        let npm = env.home.join(".npm").to_string_lossy().into_owned();
        assert_eq!(
            make_missing(&config, &env, "npm i", &[], &[npm]),
            Made::default()
        );
        assert!(std::fs::read_dir(&env.home).map(|d| d.count()).unwrap_or(1) == 0);
    }

    #[test]
    fn a_cache_that_cannot_be_made_is_passed_over() {
        let (_d, env, config) = setup();
        // `~/.cargo` is a file: cargo's caches cannot be made beneath it.
        std::fs::write(env.home.join(".cargo"), "").unwrap_or_else(|e| panic!("{e}"));
        let m = make_missing(&config, &env, "cargo fetch", &[], &[]);
        assert!(m.dirs.is_empty() && m.files.is_empty(), "{m:?}");
    }
}
