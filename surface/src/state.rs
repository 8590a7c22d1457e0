//! The surface's state on disk: `$XDG_STATE_HOME/efr/surface.json` (default
//! `~/.local/state/efr/surface.json`): the answers to the surface's questions (a path kept
//! visible or masked), each conversation's question ids and last scan, and the token files
//! the last scans saw (with the hosts their tokens are for, for the proxy).
//!
//! Written atomically (a temp file in the same directory, fsynced, renamed over the file,
//! the directory fsynced) under an exclusive `flock` of `surface.lock`, as a
//! read-modify-write: concurrent writers, threads or processes, lose nothing, and a writer
//! killed halfway leaves the old file whole. Readers take no lock (a rename is atomic).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::patterns::Class;

/// The file name of the state in the state directory.
pub const STATE_FILE: &str = "surface.json";
/// The lock beside it.
pub const LOCK_FILE: &str = "surface.lock";
/// Conversations kept (their question ids and last scan); the least recently scanned go
/// first.
pub const MAX_CONVERSATIONS: usize = 64;

/// The state directory of efr: `$XDG_STATE_HOME/efr` when `xdg_state_home` is an absolute
/// path (the XDG spec ignores a relative one), else `~/.local/state/efr`.
pub fn state_dir_from(home: &Path, xdg_state_home: Option<OsString>) -> PathBuf {
    match xdg_state_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        Some(d) => d.join("efr"),
        None => home.join(".local/state/efr"),
    }
}

/// [`state_dir_from`] with this process's `$XDG_STATE_HOME`.
pub fn state_dir(home: &Path) -> PathBuf {
    state_dir_from(home, std::env::var_os("XDG_STATE_HOME"))
}

/// A user's answer to a surface question, for a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// true: leave it visible; false: mask it in contained calls.
    pub keep: bool,
    /// What the file held when the user answered: a kept file is asked about again when
    /// its class or hosts change.
    pub class: Class,
    /// The hosts its tokens were for, when the user answered (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The conversation and question it answered.
    pub conversation: String,
    /// The question's id (`q1`, `q2`, ...).
    pub question_id: String,
    /// When, in seconds since the epoch.
    pub at: u64,
}

/// What a scan saw at a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// What the file looked like.
    pub class: Class,
    /// The hosts its tokens are for (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The pattern that matched, as [`crate::Finding::pattern`].
    pub pattern: String,
}

/// One conversation's questions and its last scan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// The number of the next question id.
    pub next: u32,
    /// The question id of each path ever asked about (stable across scans).
    #[serde(default)]
    pub questions: BTreeMap<String, String>,
    /// The last scan's findings by path.
    #[serde(default)]
    pub last: BTreeMap<String, Seen>,
    /// The state's scan counter at its last scan (which conversation goes first).
    #[serde(default)]
    pub scanned: u64,
}

/// A token file a scan saw, for the proxy of later calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenFile {
    /// The hosts the file's tokens are for.
    pub hosts: Vec<String>,
    /// (dev, ino, size, mtime, mtime_nsec) when scanned: the file is read again only when
    /// it changed.
    pub stamp: (u64, u64, u64, i64, i64),
}

/// The whole state file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The file's format: 1 as this version writes it (0 when absent).
    #[serde(default)]
    pub version: u32,
    /// Scans recorded, ever.
    #[serde(default)]
    pub scans: u64,
    /// The answers by path (for every conversation and every call of the user).
    #[serde(default)]
    pub answers: BTreeMap<String, Answer>,
    /// Each conversation's questions and last scan, by conversation name.
    #[serde(default)]
    pub conversations: BTreeMap<String, Conversation>,
    /// The token files of the last scans by path.
    #[serde(default)]
    pub tokens: BTreeMap<String, TokenFile>,
}

impl State {
    /// The paths the user answered to mask, sorted.
    pub fn masks(&self) -> Vec<String> {
        self.answers
            .iter()
            .filter(|(_, a)| !a.keep)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Drops the least recently scanned conversations past [`MAX_CONVERSATIONS`].
    pub(crate) fn trim(&mut self) {
        while self.conversations.len() > MAX_CONVERSATIONS {
            let Some(oldest) = self
                .conversations
                .iter()
                .min_by_key(|(_, c)| c.scanned)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.conversations.remove(&oldest);
        }
    }
}

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Making the state directory, or reading or tightening its mode (0700), failed.
    #[error("cannot create the state directory {path}: {source}")]
    Dir {
        /// The state directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The state directory is a link or another user's.
    #[error(
        "the state directory {path} is not a directory of this user (a link, or another owner)"
    )]
    NotOurs {
        /// The state directory.
        path: PathBuf,
    },
    /// Taking the state's lock failed.
    #[error("cannot lock {path}: {source}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Reading the state file failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The state file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The state file is not the state's JSON.
    #[error("cannot parse {path}: {source}")]
    Parse {
        /// The state file.
        path: PathBuf,
        /// What serde_json said.
        source: serde_json::Error,
    },
    /// Writing the state file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The state file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The state file of one state directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store of the state directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// The store of this user: [`state_dir`] of `home`.
    pub fn for_home(home: &Path) -> Store {
        Store::new(state_dir(home))
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state file.
    pub fn file(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The state as it is on disk; empty when there is no file yet.
    pub fn read(&self) -> Result<State, StateError> {
        let path = self.file();
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
            Err(source) => return Err(StateError::Read { path, source }),
        };
        serde_json::from_slice(&text).map_err(|source| StateError::Parse { path, source })
    }

    /// Reads the state, lets `f` change it, and writes it back atomically, all under the
    /// lock. `f`'s value is returned; the file is written only when the state changed.
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> Result<T, StateError> {
        self.make_dir()?;
        let lock_path = self.dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&lock_path)
            .map_err(|source| StateError::Lock {
                path: lock_path.clone(),
                source,
            })?;
        let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).map_err(
            |(_, e)| StateError::Lock {
                path: lock_path.clone(),
                source: e.into(),
            },
        )?;
        let mut state = self.read()?;
        let before = state.clone();
        let out = f(&mut state);
        state.version = 1;
        state.trim();
        if state != before {
            self.write(&state)?;
        }
        Ok(out)
    }

    fn make_dir(&self) -> Result<(), StateError> {
        private_dir(&self.dir)
    }

    /// Writes the state: a temp file beside it (only the lock holder writes one), fsynced,
    /// renamed over the file, the directory fsynced.
    fn write(&self, state: &State) -> Result<(), StateError> {
        let path = self.file();
        let tmp = self.dir.join(format!(".{STATE_FILE}.tmp"));
        let err = |source| StateError::Write {
            path: path.clone(),
            source,
        };
        let mut text = serde_json::to_vec_pretty(state).map_err(|e| err(io::Error::other(e)))?;
        text.push(b'\n');
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(err)?;
        write_all_synced(&mut f, &text).map_err(err)?;
        drop(f);
        fs::rename(&tmp, &path).map_err(err)?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(err)?;
        Ok(())
    }
}

/// Makes the directory `dir` (0700, parents as needed) and checks that it is a directory
/// of this user and not a link; tightens it to 0700.
pub(crate) fn private_dir(dir: &Path) -> Result<(), StateError> {
    if let Err(source) = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        return Err(StateError::Dir {
            path: dir.to_path_buf(),
            source,
        });
    }
    let md = fs::symlink_metadata(dir).map_err(|source| StateError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    if !md.is_dir() || md.uid() != nix::unistd::geteuid().as_raw() {
        return Err(StateError::NotOurs {
            path: dir.to_path_buf(),
        });
    }
    if md.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|source| {
            StateError::Dir {
                path: dir.to_path_buf(),
                source,
            }
        })?;
    }
    Ok(())
}

/// Tests only: with this variable set, `write_all_synced` writes half, waits this many
/// milliseconds, then writes the rest (so a test can kill a writer halfway).
pub const TEST_SLOW_WRITE_ENV: &str = "EFR_SURFACE_TEST_SLOW_WRITE_MS";

/// Writes `bytes` to `f` and fsyncs it.
pub(crate) fn write_all_synced(f: &mut File, bytes: &[u8]) -> io::Result<()> {
    let pause = std::env::var(TEST_SLOW_WRITE_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    match pause {
        Some(ms) if bytes.len() > 1 => {
            let (a, b) = bytes.split_at(bytes.len() / 2);
            f.write_all(a)?;
            f.sync_all()?;
            std::thread::sleep(std::time::Duration::from_millis(ms));
            f.write_all(b)?;
        }
        _ => f.write_all(bytes)?,
    }
    f.sync_all()
}

/// (dev, ino, size, mtime, mtime_nsec) of the file at `path`, not following a link.
pub fn stamp(path: &Path) -> Option<(u64, u64, u64, i64, i64)> {
    let m = fs::symlink_metadata(path).ok()?;
    m.is_file()
        .then(|| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

/// What a contained call's launch takes from the state: the masked answers, and the hosts
/// of the token files the last scans saw that no answer masks (each read again when it
/// changed since; one gone is left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForCalls {
    /// The paths the user answered to mask, sorted.
    pub masks: Vec<String>,
    /// The hosts of the token files no answer masks.
    pub token_hosts: BTreeSet<String>,
    /// For each of those hosts, the file that makes it one (the first in path order): what
    /// a refusal of the host names.
    pub token_files: std::collections::BTreeMap<String, String>,
}

/// The state of a store as the call path reads it: the file's bytes read each time, and
/// parsed again only when they differ from the bytes this process parsed last (a stamp
/// would not do: a new file renamed in may reuse a freed inode within one mtime tick).
pub fn read_for_calls(store: &Store) -> Result<std::sync::Arc<State>, StateError> {
    type Cached = Option<(PathBuf, Vec<u8>, std::sync::Arc<State>)>;
    static CACHE: std::sync::Mutex<Cached> = std::sync::Mutex::new(None);
    let file = store.file();
    let bytes = match fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(std::sync::Arc::new(State::default()));
        }
        Err(source) => return Err(StateError::Read { path: file, source }),
    };
    let mut c = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((f, b, st)) = c.as_ref() {
        if *f == file && *b == bytes {
            return Ok(st.clone());
        }
    }
    let st: State = serde_json::from_slice(&bytes).map_err(|source| StateError::Parse {
        path: file.clone(),
        source,
    })?;
    let st = std::sync::Arc::new(st);
    *c = Some((file, bytes, st.clone()));
    Ok(st)
}

/// [`ForCalls`] of the state in `store`: the state read as [`read_for_calls`] does, a
/// `stat` per watched file, and a read of one only when it changed since the scan (and
/// since this process last read it).
pub fn for_calls(store: &Store) -> Result<ForCalls, StateError> {
    type Reread = std::collections::HashMap<String, ((u64, u64, u64, i64, i64), Vec<String>)>;
    static REREAD: std::sync::Mutex<Option<Reread>> = std::sync::Mutex::new(None);
    let state = read_for_calls(store)?;
    let masks = state.masks();
    let mut token_files = std::collections::BTreeMap::new();
    let mut add = |hosts: &[String], path: &str| {
        for h in hosts {
            token_files
                .entry(h.clone())
                .or_insert_with(|| path.to_string());
        }
    };
    for (path, t) in &state.tokens {
        if masks.iter().any(|m| Path::new(path).starts_with(m)) {
            continue;
        }
        let p = Path::new(path);
        match stamp(p) {
            None => {}
            Some(s) if s == t.stamp => add(&t.hosts, path),
            Some(s) => {
                let mut rr = REREAD.lock().unwrap_or_else(|p| p.into_inner());
                let rr = rr.get_or_insert_with(Default::default);
                match rr.get(path) {
                    Some((was, hosts)) if *was == s => add(hosts, path),
                    _ => {
                        let hosts =
                            crate::scan::file_hosts(p, crate::patterns::shipped(), 64 * 1024)
                                .unwrap_or_default();
                        add(&hosts, path);
                        if rr.len() > 4096 {
                            rr.clear();
                        }
                        rr.insert(path.clone(), (s, hosts));
                    }
                }
            }
        }
    }
    let token_hosts = token_files.keys().cloned().collect();
    Ok(ForCalls {
        masks,
        token_hosts,
        token_files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(keep: bool) -> Answer {
        Answer {
            keep,
            class: Class::Token,
            hosts: Vec::new(),
            conversation: "c".into(),
            question_id: "q1".into(),
            at: 0,
        }
    }

    #[test]
    fn the_state_dir_follows_xdg_state_home_when_absolute() {
        let h = Path::new("/home/u");
        assert_eq!(state_dir_from(h, None), h.join(".local/state/efr"));
        assert_eq!(
            state_dir_from(h, Some("rel".into())),
            h.join(".local/state/efr")
        );
        assert_eq!(
            state_dir_from(h, Some("/s".into())),
            PathBuf::from("/s/efr")
        );
    }

    #[test]
    fn an_update_persists_with_mode_0600_and_a_read_of_nothing_is_empty() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path().join("a/efr"));
        assert_eq!(s.read().unwrap(), State::default());
        s.update(|st| st.answers.insert("/x".into(), answer(false)))
            .unwrap();
        assert_eq!(s.read().unwrap().masks(), ["/x"]);
        let m = fs::metadata(s.file()).unwrap().mode() & 0o777;
        assert_eq!(m, 0o600);
        let d = fs::metadata(s.dir()).unwrap().mode() & 0o777;
        assert_eq!(d, 0o700);
    }

    #[test]
    fn concurrent_updates_from_threads_lose_nothing() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("efr");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    // Each thread its own store (its own open of the lock: flock between
                    // open file descriptions, as between processes).
                    let s = Store::new(dir);
                    for j in 0..25 {
                        s.update(|st| st.answers.insert(format!("/t{i}/f{j}"), answer(j % 2 == 0)))
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let st = Store::new(&dir).read().unwrap();
        assert_eq!(st.answers.len(), 200);
        assert_eq!(st.masks().len(), 8 * 12);
    }

    #[test]
    fn the_call_path_sees_every_write_at_once() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path().join("efr"));
        assert!(read_for_calls(&s).unwrap().masks().is_empty());
        for i in 0..50 {
            // The same size each time, back to back: within one mtime tick.
            s.update(|st| {
                st.answers.clear();
                st.answers.insert(format!("/m{:02}", i), answer(false));
            })
            .unwrap();
            assert_eq!(read_for_calls(&s).unwrap().masks(), [format!("/m{:02}", i)]);
        }
    }

    #[test]
    fn for_calls_gives_the_hosts_of_watched_files_but_those_masked_or_gone() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path().join("efr"));
        let a = t.path().join("a.env");
        let b = t.path().join("b.env");
        let gone = t.path().join("gone.env");
        for p in [&a, &b, &gone] {
            fs::write(p, "X=1\n").unwrap();
        }
        s.update(|st| {
            for (p, h) in [(&a, "a.example"), (&b, "b.example"), (&gone, "g.example")] {
                st.tokens.insert(
                    p.to_string_lossy().into_owned(),
                    TokenFile {
                        hosts: vec![h.into()],
                        stamp: stamp(p).unwrap(),
                    },
                );
            }
            st.answers
                .insert(b.to_string_lossy().into_owned(), answer(false));
        })
        .unwrap();
        fs::remove_file(&gone).unwrap();
        let f = for_calls(&s).unwrap();
        assert_eq!(f.token_hosts.into_iter().collect::<Vec<_>>(), ["a.example"]);
        assert_eq!(f.masks, [b.to_string_lossy().into_owned()]);
        // A token written into a watched file: its hosts are the file's now.
        let token = efr_policy::secrets::checksummed_token("ghp", "Vq8Zc2mPx7LkT4rWn9bYd3sGh6JfQa")
            .unwrap();
        fs::write(&a, format!("X=1\nT={token}\n")).unwrap();
        let f = for_calls(&s).unwrap();
        assert_eq!(
            f.token_hosts.into_iter().collect::<Vec<_>>(),
            ["api.github.com", "github.com"]
        );
    }

    #[test]
    fn a_broken_file_is_an_error_that_names_it() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path());
        fs::write(s.file(), b"{not json").unwrap();
        let e = s.read().unwrap_err().to_string();
        assert!(
            e.starts_with("cannot parse ") && e.contains(STATE_FILE),
            "{e}"
        );
        let e = s.update(|_| ()).unwrap_err().to_string();
        assert!(e.contains("cannot parse"), "{e}");
    }

    #[test]
    fn a_state_dir_that_is_a_link_is_refused() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("real")).unwrap();
        std::os::unix::fs::symlink(t.path().join("real"), t.path().join("efr")).unwrap();
        let e = Store::new(t.path().join("efr"))
            .update(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory of this user"), "{e}");
    }

    #[test]
    fn conversations_are_bounded_oldest_first() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path());
        s.update(|st| {
            for i in 0..(MAX_CONVERSATIONS as u64 + 5) {
                st.conversations.insert(
                    format!("c{i}"),
                    Conversation {
                        scanned: i,
                        ..Conversation::default()
                    },
                );
            }
        })
        .unwrap();
        let st = s.read().unwrap();
        assert_eq!(st.conversations.len(), MAX_CONVERSATIONS);
        assert!(!st.conversations.contains_key("c0"));
        assert!(st.conversations.contains_key("c68"));
    }
}
