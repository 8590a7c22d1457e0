//! Config: the built-in defaults with the user's TOML file on top (design section 11).
//!
//! The defaults are data, in one reviewed place: `policy/defaults.toml`, embedded as
//! [`DEFAULTS_TOML`] and read with the same parser as the user's file, so every default
//! entry carries its reason. The user's file (`$XDG_CONFIG_HOME/efr/config.toml`, see
//! [`Env::config_file`]) is layered on top:
//!
//! - a scalar (`sandbox.backend`, `network.netview`, ...) replaces the default;
//! - a list (`sandbox.masks`, `floors.paths`, ...) adds to the defaults; its companion
//!   `<key>_remove` (such as `sandbox.masks_remove = ["~/.npmrc"]`) takes entries out, and
//!   naming an entry that is not there is an error (a typo must not pass silently);
//! - `network.resolve` entries replace a default of the same name;
//! - `[[always]]` rules add to the list;
//! - a `[[credential]]` entry adds a credential, or replaces the built-in profile of its
//!   name ([`credential`]).
//!
//! Unknown keys are an error naming the key. Every value remembers where it came from
//! ([`Source`]); [`Config::render_text`] and [`Config::to_json`] are what
//! `efr-sandbox config` prints. [`ConfigStore`] keeps the last good config in force when a
//! reload fails. `docs/config.md` is the reference of every key.

pub mod credential;
mod env;
pub mod git_config;
mod hint;
pub use hint::ConfigHint;
mod parse;
mod render;
mod shell;
pub use shell::{ShellChoice, ShellError};
pub(crate) mod rules;
pub(crate) mod view;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

pub use env::{Env, Vars};
pub use git_config::GitConfigItem;
pub use rules::{RulePath, RuleShape};
pub use view::{LaunchView, RepoGitDirs, ViewRepo, repositories};

/// The built-in defaults, as TOML (`policy/defaults.toml`).
pub const DEFAULTS_TOML: &str = include_str!("../defaults.toml");

/// The files a config can come from, as shown in errors and sources.
pub const DEFAULTS_NAME: &str = "<built-in defaults>";

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Built into the binary (`policy/defaults.toml`).
    Default,
    /// The user's file, at this line (1-based).
    File {
        /// The user's config file.
        path: PathBuf,
        /// The line of the value in it, 1-based.
        line: usize,
    },
    /// The user's answer to a question of the surface (`efr-sandbox surface respond ID
    /// --mask`), kept in its state file: a mask of the file the question named.
    Surface {
        /// The surface's state file holding the answer.
        path: PathBuf,
    },
}

impl Source {
    /// `default` or `path:line`.
    pub fn describe(&self) -> String {
        match self {
            Source::Default => "default".to_string(),
            Source::File { path, line } => format!("{}:{line}", path.display()),
            Source::Surface { path } => format!("your surface answer in {}", path.display()),
        }
    }
}

/// A scalar setting and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    /// The value in force.
    pub value: T,
    /// Where it was set: the built-in defaults or a line of the user's file.
    pub source: Source,
}

impl<T> Setting<T> {
    fn default_value(value: T) -> Setting<T> {
        Setting {
            value,
            source: Source::Default,
        }
    }
}

/// One entry of a list: a path, host or name, why it is there, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry as the config writes it, such as `~/.ssh` or `crates.io`.
    pub value: String,
    /// Why it is there, one line; empty when the user's entry gives none.
    pub reason: String,
    /// Where it was set: the built-in defaults or a line of the user's file.
    pub source: Source,
    /// `sandbox.caches` only: what of the cache's layer reaches the real cache after a
    /// call (`None` elsewhere; a cache entry without `merge` is [`CacheMerge::Never`]).
    pub merge: Option<CacheMerge>,
}

/// How a cache's layer is merged back into the real cache after a call (`merge` of a
/// `sandbox.caches` entry). Only content an independent source verifies is ever merged;
/// the rest stays in the call's layer, or in its conversation's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMerge {
    /// cargo's registry: `.crate` files, sparse index caches and `config.json`, each checked
    /// against what the registry serves.
    Cargo,
    /// npm's cacache: content (its hash is its path) and index lines checked against the
    /// registry's packuments.
    Npm,
    /// Installed programs (pipx, gems, conda, ...): nothing merged; each addition is an
    /// exit record the user can approve as a write.
    Installs,
    /// Nothing merged.
    #[default]
    Never,
}

impl CacheMerge {
    /// The config's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheMerge::Cargo => "cargo",
            CacheMerge::Npm => "npm",
            CacheMerge::Installs => "installs",
            CacheMerge::Never => "never",
        }
    }

    /// The kind a config word names.
    pub fn parse(s: &str) -> Option<CacheMerge> {
        Some(match s {
            "cargo" => CacheMerge::Cargo,
            "npm" => CacheMerge::Npm,
            "installs" => CacheMerge::Installs,
            "never" => CacheMerge::Never,
            _ => return None,
        })
    }
}

impl Entry {
    /// The reason, or where the entry was set when it has none.
    pub fn reason_or_source(&self) -> String {
        if self.reason.is_empty() {
            format!("set in {}", self.source.describe())
        } else {
            self.reason.clone()
        }
    }
}

/// `sandbox.backend`: the wire's one backend choice.
pub use efr_sandbox_wire::BackendChoice;

/// `[sandbox]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// How a contained call is built: `auto` takes what the probe finds working, or
    /// `native` or `bwrap`.
    pub backend: Setting<BackendChoice>,
    /// Present but empty inside a call.
    pub masks: Vec<Entry>,
    /// Read-only inside every writable root (relative paths).
    pub read_only_inside: Vec<Entry>,
    /// Extra writable paths of every contained call.
    pub writable: Vec<Entry>,
    /// Real caches (class `cache`).
    pub caches: Vec<Entry>,
    /// Directory names of build output inside a project (class `build_output`).
    pub build_output: Vec<Entry>,
    /// The trash (class `trash`).
    pub trash: Vec<Entry>,
    /// Writes a tool makes and goes on without (cargo's last-use record): refused like any
    /// other and listed in the summary's `denied_writes`, but no exit record and no hint.
    pub quiet_refusals: Vec<Entry>,
    /// The size of the call's own `/tmp` (a tmpfs; a conversation's `/tmp` is a directory
    /// of the runtime dir, bounded by that file system).
    pub tmp_size: Setting<efr_sandbox_wire::size::Size>,
    /// The size of the call's `/dev/shm` (a tmpfs).
    pub shm_size: Setting<efr_sandbox_wire::size::Size>,
    /// Days a conversation's cache layers are kept since the conversation's last call.
    pub conversation_cache_days: Setting<u64>,
    /// The shell that runs a call's line.
    pub shell: Setting<ShellChoice>,
}

/// One `network.resolve` entry: a name the proxy resolves to a fixed address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolve {
    /// The host name it maps.
    pub name: String,
    /// The address the proxy dials for it, without a DNS lookup (special ranges allowed).
    pub address: std::net::IpAddr,
    /// Where the entry was set: the built-in defaults or a line of the user's file.
    pub source: Source,
}

/// `[network]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    /// Hosts every contained call may reach through the proxy without a grant.
    pub allow: Vec<Entry>,
    /// Hosts no grant opens.
    pub deny: Vec<Entry>,
    /// Names the proxy resolves to a fixed address (local registries, tests).
    pub resolve: Vec<Resolve>,
    /// A `net_view` grant may be given.
    pub netview: Setting<bool>,
    /// The connections a call's proxy holds open at once, in every phase (each holds one
    /// fd of the service); past it a new one is answered `limit` and closed.
    pub proxy_connections: Setting<u64>,
    /// The tunnels (and requests past their head) of a call's proxy at once, each holding
    /// a second fd upstream; past it one is refused `limit`.
    pub proxy_tunnels: Setting<u64>,
    /// Files that can give a call a token for a host (such hosts are `denied`).
    pub token_files: Vec<Entry>,
}

/// `[bus]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusConfig {
    /// The filtered bus (`bus_filter` grants) is on.
    pub filter: Setting<bool>,
    /// xdg-dbus-proxy `--talk` names.
    pub talk: Vec<Entry>,
    /// `--see` names.
    pub see: Vec<Entry>,
    /// `--call` rules (`name=member@path`).
    pub call: Vec<Entry>,
    /// `--broadcast` rules (`name=member@path`).
    pub broadcast: Vec<Entry>,
    /// Names (or `name=interface`) no filter opens, each with why: a `talk` or `call` rule
    /// that reaches one is left out of the filter (see [`crate::bus`]). Only the built-in
    /// defaults set it.
    pub never: Vec<Entry>,
    /// Entries of `never` the user opens anyway, each said as a warning by `config` and
    /// `check`.
    pub allow_never: Vec<Entry>,
}

/// `[git]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitConfig {
    /// Git config keys known to make git run nothing (`section.name`, or
    /// `section.*.name` for any subsection). After a contained call, a repository it made
    /// or whose config it changed keeps only these keys (see `docs/threat-model.md`).
    pub safe_config_keys: Vec<Entry>,
}

/// `[environment]`: what of the caller's environment a contained call starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentConfig {
    /// Variables kept (names, or globs such as `LC_*`).
    pub keep: Vec<Entry>,
    /// Names never kept, whatever keeps them (globs, ASCII case ignored).
    pub drop: Vec<Entry>,
    /// Value patterns of secrets: a kept variable whose value holds one is dropped and said
    /// (see `efr_sandbox_wire::envfilter`).
    pub secret_values: Vec<Entry>,
}

/// `[permissions]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionsConfig {
    /// Full mode may be chosen.
    pub allow_full: Setting<bool>,
}

/// `[proxy]`: the egress proxy's own settings (docs/config.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// More roots the credential broker verifies upstream servers with, besides the host's
    /// system roots: PEM files (a private CA, a test's CA), `~` the home.
    pub extra_roots: Vec<Entry>,
}

/// `[jobs]`: background jobs' bounds (docs/config.md).
#[derive(Debug, Clone, PartialEq)]
pub struct JobsConfig {
    /// The least `max_minutes` a job may ask for.
    pub min_minutes: Setting<f64>,
    /// The most `max_minutes` a job may ask for.
    pub max_minutes: Setting<f64>,
    /// Jobs running at once, every conversation together.
    pub max_running: Setting<u64>,
    /// Bytes of output kept per job (its tail).
    pub output_max: Setting<u64>,
    /// Each job in a cgroup of its own when one can be had.
    pub cgroups: Setting<bool>,
    /// A job's memory limit in bytes (`None`: no limit).
    pub memory_max: Setting<Option<u64>>,
    /// A job's process limit.
    pub pids_max: Setting<u64>,
    /// Forward a job's loopback listeners to the host's loopback.
    pub forwards: Setting<bool>,
    /// Forwards a job may have.
    pub forward_max: Setting<u64>,
    /// Connections one forward relays at once.
    pub forward_connections: Setting<u64>,
    /// Ports never forwarded (besides those below 1024), with why.
    pub forward_deny: Vec<Entry>,
}

impl JobsConfig {
    /// The ports of `forward_deny` with their reasons (entries are checked ports).
    pub fn denied_ports(&self) -> Vec<(u16, String)> {
        self.forward_deny
            .iter()
            .filter_map(|e| {
                e.value
                    .parse::<u16>()
                    .ok()
                    .map(|p| (p, e.reason_or_source()))
            })
            .collect()
    }
}

/// `[floors]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloorsConfig {
    /// Floor files and directories.
    pub paths: Vec<Entry>,
    /// Floor line kinds the classifier checks, by name (see [`FLOOR_LINES`]).
    pub lines: Vec<Entry>,
}

/// Whether the git config key `key` (section and name lower case, the subsection as
/// written) matches `pattern` (`section.name`, `section.sub.name`, or `section.*.name`
/// where `*` is any subsection; section and name compared without case).
pub fn git_key_matches(pattern: &str, key: &str) -> bool {
    efr_sandbox_wire::gitconfig::key_matches(pattern, key)
}

/// The floor line kinds the classifier knows; `floors.lines` names a subset.
pub const FLOOR_LINES: [&str; 6] = [
    "delete_home",
    "delete_root",
    "delete_project_root",
    "device_write",
    "chmod_home_recursive",
    "download_to_shell",
];

/// One `[[always]]` rule: an "allow always" answer the classifier matches.
///
/// Every field that is set must match; at least one of `command`, `host`, `path` is set.
/// It deserializes too, for `sandbox.always_save`; a rule read that way is checked by
/// loading the config it would make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlwaysRule {
    /// The first words of the simple command; each word is a pattern where `*` matches any
    /// run of characters (`["cargo", "publish"]`, `["git", "push", "origin", "*"]`). The
    /// command's further words are free.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// A host the exit reaches (`crates.io`, `*.example.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// A path (as in the masks: `~/...`, absolute, `$VAR/...`): the exit's targets or its
    /// working directory are this path or below it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The exit kind it covers (`upload`, `host`, ...); any kind when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<efr_sandbox_wire::ExitKind>,
    /// Why, in words (what the user answered to); may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Where the rule was read (the defaults or a line of the user's file); `None` for a
    /// rule deserialized, as `sandbox.always_save` gets one.
    #[serde(skip)]
    pub source: Option<Source>,
}

/// The effective config.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The user's file it was read from; `None` when there was none (defaults only).
    pub file: Option<PathBuf>,
    /// `[sandbox]`: backend, masks, read-only and writable paths, caches, tmpfs sizes.
    pub sandbox: SandboxConfig,
    /// `[network]`: allowed and denied hosts, fixed resolutions, token files.
    pub network: NetworkConfig,
    /// `[bus]`: the filtered D-Bus proxy's rules.
    pub bus: BusConfig,
    /// `[git]`: the git config keys a contained call's repository may keep.
    pub git: GitConfig,
    /// `[environment]`: what of the caller's environment a contained call starts with.
    pub environment: EnvironmentConfig,
    /// `[permissions]`: whether full mode may be chosen.
    pub permissions: PermissionsConfig,
    /// `[floors]`: floor files and the floor line kinds checked.
    pub floors: FloorsConfig,
    /// `[jobs]`: background jobs' bounds.
    pub jobs: JobsConfig,
    /// `[proxy]`: the egress proxy's own settings.
    pub proxy: ProxyConfig,
    /// The `[[always]]` rules, in order (a rule's index is its number).
    pub always: Vec<AlwaysRule>,
    /// The `[[credential]]` entries and built-in profiles ([`Config::credentials`]).
    pub(crate) credentials: Vec<credential::CredentialSpec>,
    /// Where each of `credentials` was set, by index.
    pub(crate) credential_sources: Vec<Source>,
    /// Top-level tables of the file that are not the sandbox's (efrd keeps its own sections,
    /// such as `[model]`, in the same file); they are ignored, and `efr-sandbox config`
    /// names them so that a misspelt section does not go unseen.
    pub ignored_sections: Vec<String>,
}

/// Why a config could not be loaded. The file it names stays unapplied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The file exists but cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Io {
        /// The config file.
        path: PathBuf,
        /// What reading it gave.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The file is not valid TOML (or not UTF-8).
    #[error("config file {} is not valid toml at line {line}, column {column}: {message}", path.display())]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The line of the error, 1-based.
        line: usize,
        /// The column of the error, 1-based.
        column: usize,
        /// What the TOML parser (or the size or UTF-8 check) said.
        message: String,
    },
    /// The TOML is fine but a key or value is not.
    #[error("config file {} has a bad value at line {line}, column {column}: {key}: {message}", path.display())]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// The dotted key, such as `sandbox.masks` or `always[2].kind`.
        key: String,
        /// The line of the bad value, 1-based.
        line: usize,
        /// The column of the bad value, 1-based.
        column: usize,
        /// What is wrong with the key or value.
        message: String,
    },
}

impl LoadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Io { path, .. }
            | LoadError::Parse { path, .. }
            | LoadError::Invalid { path, .. } => path,
        }
    }

    /// `(line, column)`, 1-based, when the error has a place.
    pub fn line_column(&self) -> Option<(usize, usize)> {
        match self {
            LoadError::Io { .. } => None,
            LoadError::Parse { line, column, .. } | LoadError::Invalid { line, column, .. } => {
                Some((*line, *column))
            }
        }
    }

    /// The dotted key, when the error is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            LoadError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// The largest config file read, so a runaway file cannot eat the service's memory.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

impl Config {
    /// The same config with the files the user answered `mask` to in the surface's
    /// questions (`masks`, absolute paths, kept in the state file `file`) as masks of
    /// `sandbox.masks`, each with that answer as its source: what a contained call gets
    /// masked, so that `explain` and a refusal's grant (`unmask=`) see them as the launch
    /// does.
    pub fn with_answered_masks(mut self, masks: &[String], file: &Path) -> Config {
        for m in masks {
            if self.sandbox.masks.iter().any(|e| e.value == *m) {
                continue;
            }
            self.sandbox.masks.push(Entry {
                value: m.clone(),
                reason: format!(
                    "you answered --mask to it in `efr-sandbox surface`; kept in {}",
                    file.display()
                ),
                source: Source::Surface {
                    path: file.to_path_buf(),
                },
                merge: None,
            });
        }
        self
    }

    /// The built-in defaults alone.
    pub fn defaults() -> Config {
        static DEFAULTS: OnceLock<Config> = OnceLock::new();
        DEFAULTS
            .get_or_init(|| {
                let mut config = Config::empty();
                // The defaults are data of this crate; the `defaults_parse` test keeps them
                // valid, so an error here is a build defect, not input.
                // The secret values the environment filter drops first: the one reviewed
                // set of secret shapes (`data/secrets.toml`), shared with the surface.
                config.environment.secret_values = crate::secrets::Shapes::shipped()
                    .env_patterns()
                    .map(|sh| Entry {
                        value: sh.pattern.clone(),
                        reason: format!("{} ({}; {})", sh.reason, sh.name, sh.source),
                        source: Source::Default,
                        merge: None,
                    })
                    .collect();
                if let Err(e) = parse::apply(DEFAULTS_TOML, None, &mut config) {
                    panic!("built-in defaults are invalid: {e}");
                }
                credential::mask_source_files(&mut config);
                config
            })
            .clone()
    }

    fn empty() -> Config {
        Config {
            file: None,
            ignored_sections: Vec::new(),
            sandbox: SandboxConfig {
                backend: Setting::default_value(BackendChoice::Auto),
                masks: Vec::new(),
                read_only_inside: Vec::new(),
                writable: Vec::new(),
                caches: Vec::new(),
                build_output: Vec::new(),
                trash: Vec::new(),
                quiet_refusals: Vec::new(),
                tmp_size: Setting::default_value(efr_sandbox_wire::size::Size::Percent(25)),
                shm_size: Setting::default_value(efr_sandbox_wire::size::Size::Percent(10)),
                conversation_cache_days: Setting::default_value(7),
                shell: Setting::default_value(ShellChoice::Bash),
            },
            network: NetworkConfig {
                allow: Vec::new(),
                deny: Vec::new(),
                resolve: Vec::new(),
                netview: Setting::default_value(true),
                proxy_connections: Setting::default_value(256),
                proxy_tunnels: Setting::default_value(128),
                token_files: Vec::new(),
            },
            bus: BusConfig {
                filter: Setting::default_value(true),
                talk: Vec::new(),
                see: Vec::new(),
                call: Vec::new(),
                broadcast: Vec::new(),
                never: Vec::new(),
                allow_never: Vec::new(),
            },
            git: GitConfig {
                safe_config_keys: Vec::new(),
            },
            environment: EnvironmentConfig {
                keep: Vec::new(),
                drop: Vec::new(),
                secret_values: Vec::new(),
            },
            permissions: PermissionsConfig {
                allow_full: Setting::default_value(false),
            },
            floors: FloorsConfig {
                paths: Vec::new(),
                lines: Vec::new(),
            },
            proxy: ProxyConfig {
                extra_roots: Vec::new(),
            },
            jobs: JobsConfig {
                min_minutes: Setting::default_value(0.005),
                max_minutes: Setting::default_value(1440.0),
                max_running: Setting::default_value(32),
                output_max: Setting::default_value(1 << 20),
                cgroups: Setting::default_value(true),
                memory_max: Setting::default_value(None),
                pids_max: Setting::default_value(1024),
                forwards: Setting::default_value(true),
                forward_max: Setting::default_value(8),
                forward_connections: Setting::default_value(64),
                forward_deny: Vec::new(),
            },
            always: Vec::new(),
            credentials: Vec::new(),
            credential_sources: Vec::new(),
        }
    }

    /// The defaults with `text` (the content of the file at `path`) on top.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Config, LoadError> {
        let mut config = Config::defaults();
        parse::apply(text, Some(path), &mut config)?;
        credential::mask_source_files(&mut config);
        config.file = Some(path.to_path_buf());
        Ok(config)
    }

    /// The defaults with the file at `path` on top; the defaults alone when there is no
    /// file.
    pub fn load_file(path: &Path) -> Result<Config, LoadError> {
        let io = |e: std::io::Error| LoadError::Io {
            path: path.to_path_buf(),
            source: Arc::new(e),
        };
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::defaults()),
            Err(e) => return Err(io(e)),
        };
        let mut bytes = Vec::new();
        use std::io::Read;
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(LoadError::Parse {
                path: path.to_path_buf(),
                line: 1,
                column: 1,
                message: format!("the file is larger than {MAX_CONFIG_BYTES} bytes"),
            });
        }
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            Err(e) => {
                let good = &bytes[..e.valid_up_to()];
                let (line, column) = parse::line_column(&String::from_utf8_lossy(good), good.len());
                return Err(LoadError::Parse {
                    path: path.to_path_buf(),
                    line,
                    column,
                    message: "the file is not utf-8".to_string(),
                });
            }
        };
        Config::from_toml_str(text, path)
    }

    /// The defaults with the user's file ([`Env::config_file`]) on top.
    pub fn load(env: &Env) -> Result<Config, LoadError> {
        Config::load_file(&env.config_file())
    }

    /// Every value of the effective config with its source, in the order
    /// `efr-sandbox config` prints them.
    pub fn entries(&self) -> Vec<ShownValue> {
        render::entries(self)
    }

    /// The effective config as `efr-sandbox config` prints it: one value a line with where
    /// it came from.
    pub fn render_text(&self) -> String {
        render::text(self)
    }

    /// The effective config as JSON (`efr-sandbox config --json`): `{file, values: [...]}`,
    /// each value `{key, value, reason?, source}`.
    pub fn to_json(&self) -> serde_json::Value {
        render::json(self)
    }

    /// The build output directory names (`sandbox.build_output`): where no repository is
    /// looked for.
    pub fn build_output_names(&self) -> Vec<String> {
        self.sandbox
            .build_output
            .iter()
            .map(|e| e.value.clone())
            .collect()
    }

    /// Whether the git config key `key` (as `git config --list` writes it: section and name
    /// lower case, the subsection as written) with `value` is on `git.safe_config_keys`. A
    /// URL key whose value is an `ext::` URL (which runs a command when
    /// `protocol.ext.allow` lets it) is never safe.
    pub fn git_key_is_safe(&self, key: &str, value: &[u8]) -> bool {
        !efr_sandbox_wire::gitconfig::url_runs_command(key, value)
            && self
                .git
                .safe_config_keys
                .iter()
                .any(|e| git_key_matches(&e.value, key))
    }

    /// `git.safe_config_keys` as the plan carries them to the launcher's write supervisor.
    pub fn git_safe_keys(&self) -> Vec<String> {
        self.git
            .safe_config_keys
            .iter()
            .map(|e| e.value.clone())
            .collect()
    }

    /// The `[environment]` lists as the plan carries them to the launcher.
    pub fn env_policy(&self) -> efr_sandbox_wire::envfilter::EnvPolicy {
        let values = |l: &[Entry]| l.iter().map(|e| e.value.clone()).collect();
        efr_sandbox_wire::envfilter::EnvPolicy {
            keep: values(&self.environment.keep),
            drop: values(&self.environment.drop),
            secret_values: values(&self.environment.secret_values),
        }
    }

    /// The floor line kinds in force, by name.
    pub fn floor_lines(&self) -> impl Iterator<Item = &str> {
        self.floors.lines.iter().map(|e| e.value.as_str())
    }
}

/// One value of the effective config, as `efr-sandbox config` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownValue {
    /// The dotted key, such as `sandbox.masks` or `always[0]`.
    pub key: String,
    /// The value, as JSON: a string or bool, or for an always rule its table without the
    /// reason.
    pub value: serde_json::Value,
    /// The entry's or always rule's reason; empty for a scalar or one that gives none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Where the value was set: the built-in defaults or a line of the user's file.
    pub source: Source,
}

/// The config in force, reloaded on demand; a reload that fails keeps the last good config
/// and reports the error.
#[derive(Debug)]
pub struct ConfigStore {
    path: PathBuf,
    current: Arc<Config>,
    last_error: Option<LoadError>,
}

impl ConfigStore {
    /// Loads the file at `path` (the defaults alone when there is none). When it is broken
    /// the defaults are in force and [`ConfigStore::last_error`] says why.
    pub fn open(path: PathBuf) -> ConfigStore {
        let mut store = ConfigStore {
            path,
            current: Arc::new(Config::defaults()),
            last_error: None,
        };
        // The error is kept in `last_error`; the defaults stay in force.
        let _ = store.reload();
        store
    }

    /// The config file this store reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The config in force.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.current)
    }

    /// The error of the last load, when it failed (cleared by a good one).
    pub fn last_error(&self) -> Option<&LoadError> {
        self.last_error.as_ref()
    }

    /// Reads the file again. On success the new config is in force; on failure the last good
    /// one stays and the error is returned (and kept in [`ConfigStore::last_error`]).
    pub fn reload(&mut self) -> Result<Arc<Config>, LoadError> {
        match Config::load_file(&self.path) {
            Ok(config) => {
                self.current = Arc::new(config);
                self.last_error = None;
                Ok(self.config())
            }
            Err(e) => {
                self.last_error = Some(e.clone());
                Err(e)
            }
        }
    }
}
