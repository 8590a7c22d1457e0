//! The process facts the config and explain read paths against (home, runtime dir, ...).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The variables of a process's environment (those whose name and value are UTF-8), by
/// name: where a credential's `env` source reads its secret. Its `Debug` lists the names
/// only, so that an `Env` printed in a log shows no secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Vars(BTreeMap<String, String>);

impl Vars {
    /// The variables of this process.
    pub fn from_process() -> Vars {
        Vars(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        )
    }

    /// The value of `name`, when set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Sets `name` (for tests and callers that build an environment).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.insert(name.into(), value.into());
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Vars {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Vars {
        Vars(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl fmt::Debug for Vars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Where the home, the runtime dir, the config dir, `$SCRATCH` and `/tmp` are.
///
/// Library functions never read the process environment: they take an `Env`. Build one with
/// [`Env::from_process`] in a binary, or with [`Env::new`] and the fields in a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// The user's home (`~`).
    pub home: PathBuf,
    /// `$XDG_RUNTIME_DIR`; `None` when unset (its mask then matches nothing).
    pub runtime_dir: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`; `None` when unset (then `~/.config`).
    pub config_home: Option<PathBuf>,
    /// The call's `$SCRATCH` (or the directory under which every conversation's scratch
    /// lives); `None` when there is none. The service sets it.
    pub scratch: Option<PathBuf>,
    /// The call's private `/tmp`: `/tmp` unless a test moves it.
    pub tmp: PathBuf,
    /// The directory a relative path is read from when the request names none.
    pub cwd: Option<PathBuf>,
    /// `$XDG_STATE_HOME`; `None` when unset (then `~/.local/state`): where efr keeps the
    /// surface's answers and the sandbox its cache layers ([`crate::control`]).
    pub state_home: Option<PathBuf>,
    /// The sockets of the sandbox's services this process knows besides the default one
    /// (`$XDG_RUNTIME_DIR/efr/sandbox.sock`): `$EFR_SANDBOX_SOCKET`, and the service's own
    /// `--socket`. Each, with its directory, is part of the control plane no call reaches
    /// ([`crate::control`]).
    pub service_sockets: Vec<PathBuf>,
    /// The process's variables ([`Vars`]), where a credential's `env` source is read: the
    /// service's own environment in the service, none in [`Env::new`].
    pub vars: Vars,
}

impl Env {
    /// An environment with this home, `/tmp`, and nothing else set.
    pub fn new(home: impl Into<PathBuf>) -> Env {
        Env {
            home: home.into(),
            runtime_dir: None,
            config_home: None,
            scratch: None,
            tmp: PathBuf::from("/tmp"),
            cwd: None,
            state_home: None,
            service_sockets: Vec::new(),
            vars: Vars::default(),
        }
    }

    /// The environment of this process: `$HOME`, `$XDG_RUNTIME_DIR`, `$XDG_CONFIG_HOME`,
    /// `$XDG_STATE_HOME`, `$EFR_SANDBOX_SOCKET` and the current directory. Relative values of the XDG variables are ignored, as the XDG
    /// spec says. `scratch` stays `None`: the service sets it.
    pub fn from_process() -> Env {
        let abs = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
        let home = abs(std::env::var_os("HOME")).unwrap_or_else(|| PathBuf::from("/"));
        Env {
            home,
            runtime_dir: abs(std::env::var_os("XDG_RUNTIME_DIR")),
            config_home: abs(std::env::var_os("XDG_CONFIG_HOME")),
            scratch: None,
            tmp: PathBuf::from("/tmp"),
            cwd: std::env::current_dir().ok(),
            state_home: abs(std::env::var_os("XDG_STATE_HOME")),
            service_sockets: abs(std::env::var_os("EFR_SANDBOX_SOCKET"))
                .into_iter()
                .collect(),
            vars: Vars::from_process(),
        }
    }

    /// `$XDG_CONFIG_HOME`, or `~/.config` when it is unset.
    pub fn config_dir(&self) -> PathBuf {
        match &self.config_home {
            Some(d) => d.clone(),
            None => self.home.join(".config"),
        }
    }

    /// The config file: `$XDG_CONFIG_HOME/efr/config.toml` (or `~/.config/efr/config.toml`).
    pub fn config_file(&self) -> PathBuf {
        self.config_dir().join("efr").join("config.toml")
    }

    /// Expands a config path: `~` and `~/...` against the home, `$HOME`,
    /// `$XDG_RUNTIME_DIR` and `$XDG_CONFIG_HOME` (alone or followed by `/...`), and an
    /// absolute path as it is. `None` for a relative path (taken inside roots by the
    /// caller) and for a variable that is not set.
    pub fn expand(&self, text: &str) -> Option<PathBuf> {
        if text == "~" || text.starts_with("~/") {
            return Some(crate::path::expand_home(text, &self.home));
        }
        if let Some(var) = text.strip_prefix('$') {
            let (name, rest) = match var.find('/') {
                Some(i) => (&var[..i], &var[i + 1..]),
                None => (var, ""),
            };
            let base = match name {
                "HOME" => self.home.clone(),
                "XDG_RUNTIME_DIR" => self.runtime_dir.clone()?,
                "XDG_CONFIG_HOME" => self.config_dir(),
                _ => return None,
            };
            return Some(join_rel(&base, rest));
        }
        let p = Path::new(text);
        if p.is_absolute() {
            return Some(p.to_path_buf());
        }
        None
    }
}

fn join_rel(base: &Path, rest: &str) -> PathBuf {
    let rest = rest.trim_start_matches('/');
    if rest.is_empty() {
        base.to_path_buf()
    } else {
        base.join(rest)
    }
}

/// The variables [`Env::expand`] knows.
pub(crate) const KNOWN_VARS: [&str; 3] = ["HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME"];
