//! Command knowledge: `policy/data/commands.toml`, embedded and read once.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// The data file, as written.
pub const COMMANDS_TOML: &str = include_str!("../../data/commands.toml");

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wrapper {
    pub names: Vec<String>,
    #[serde(default)]
    pub opts_with_arg: Vec<String>,
    #[serde(default)]
    pub no_command_opts: Vec<String>,
    #[serde(default)]
    pub skip_positional: usize,
    #[serde(default)]
    pub skip_assignments: bool,
    /// Options whose argument is a command string (`su -c`).
    #[serde(default)]
    pub string_opts: Vec<String>,
    /// The command is only ever a string option (`su`, `script`): positional words are not
    /// a command.
    #[serde(default)]
    pub string_only: bool,
    /// The rest of the words are joined and run through `sh -c` (`watch`).
    #[serde(default)]
    pub string_joined: bool,
    #[serde(default)]
    pub privilege: bool,
    #[serde(default)]
    pub background: bool,
    /// Background only in a `&` job (`nohup cmd &`); in the foreground the line waits.
    #[serde(default)]
    pub in_job_only: bool,
    /// Options that make the wrapper wait for the command (`setsid -w`): not background.
    #[serde(default)]
    pub foreground_opts: Vec<String>,
    #[serde(default)]
    pub outside: bool,
    #[serde(default)]
    pub open_network: bool,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shell {
    pub names: Vec<String>,
    #[serde(default)]
    pub opts_with_arg: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inline {
    pub names: Vec<String>,
    pub code_opts: Vec<String>,
    #[serde(default)]
    pub stdin_runs: bool,
    #[serde(default)]
    pub system_call: bool,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOp {
    Write,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgRole {
    All,
    Last,
    RestAfterFirst,
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Writer {
    pub names: Vec<String>,
    pub op: WriteOp,
    pub args: ArgRole,
    #[serde(default)]
    pub dest_opts: Vec<String>,
    #[serde(default)]
    pub opts_with_arg: Vec<String>,
    #[serde(default)]
    pub sources_deleted: bool,
    #[serde(default)]
    pub privilege: bool,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Named {
    pub names: Vec<String>,
    /// For package managers: only these subcommands are outside (`apt install`, not
    /// `apt list`).
    #[serde(default)]
    pub install_only: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    pub names: Vec<String>,
    pub port_opts: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BusSpec {
    pub names: Vec<String>,
    pub bus: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesktopSpec {
    pub names: Vec<String>,
    pub desktop: String,
    #[serde(default)]
    pub read_subcommands: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketSpec {
    pub names: Vec<String>,
    pub sockets: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostArgs {
    Urls,
    First,
    Remote,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub names: Vec<String>,
    pub host_args: HostArgs,
    #[serde(default)]
    pub downloader: bool,
    pub reason: String,
}

/// A host of a registry, with why it is needed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryHost {
    pub host: String,
    pub reason: String,
}

/// A cache a package manager writes (`~/...`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryCache {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub names: Vec<String>,
    #[serde(default)]
    pub fetch: Vec<String>,
    /// Subcommands that fetch only when the lock file names what the cache lacks.
    #[serde(default)]
    pub fetch_if_missing: Vec<String>,
    /// Words that alone make the command fetch nothing (`mvn --version`).
    #[serde(default)]
    pub quiet: Vec<String>,
    #[serde(default)]
    pub publish: Vec<String>,
    #[serde(default)]
    pub global_opts: Vec<String>,
    #[serde(default)]
    pub runner: bool,
    /// Whose configuration names the user's own registry (`npm`, `pip`, `cargo`, ...).
    #[serde(default)]
    pub setup: Option<String>,
    /// Every host the default registry needs.
    pub hosts: Vec<RegistryHost>,
    /// The hosts publishing reaches, when they are not `hosts`.
    #[serde(default)]
    pub publish_hosts: Vec<RegistryHost>,
    #[serde(default)]
    pub caches: Vec<RegistryCache>,
    pub reason: String,
}

/// A git credential helper and whether a contained call could get a token from it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialHelper {
    /// The helper as `credential.helper` names it (`store`, `gh auth git-credential`).
    pub names: Vec<String>,
    /// The token files it reads (`~/...`): a call gets a token only when one is visible.
    #[serde(default)]
    pub reads: Vec<String>,
    /// It asks a socket or service the call's view hides: never a token.
    #[serde(default)]
    pub hidden: bool,
    pub reason: String,
}

/// A settings file shown to a call with its secret values removed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    /// `~/...`.
    pub path: String,
    /// How its secrets are found (`npmrc`, `yarnrc`, `cargo`, `maven`, `urls`).
    pub format: String,
    pub reason: String,
}

/// Variables that hold a token for hosts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEnv {
    pub names: Vec<String>,
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The registry (a `setup` name) whose host, as the user's setup names it, the token
    /// is for.
    #[serde(default)]
    pub registry: Option<String>,
    pub reason: String,
}

/// `[[install_dest]]`: where an installing command writes (dests.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallDest {
    pub names: Vec<String>,
    #[serde(default)]
    pub subcommands: Vec<String>,
    #[serde(default)]
    pub targets: Vec<String>,
    #[serde(default)]
    pub when_opts: Vec<String>,
    #[serde(default)]
    pub dest_opts: Vec<String>,
    #[serde(default)]
    pub var_args: Vec<String>,
    #[serde(default)]
    pub env_vars: Vec<String>,
    pub reason: String,
}

/// `[git_writes]`: git subcommands that change the repository they run in (dests.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitWrites {
    #[serde(default)]
    pub subcommands: Vec<String>,
    #[serde(default)]
    pub with_args: Vec<String>,
    #[serde(default)]
    pub reason: String,
}

/// `[[lasting]]`: a command form that leaves a job running after the call (lasting.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lasting {
    pub names: Vec<String>,
    #[serde(default)]
    pub subcommands: Vec<String>,
    #[serde(default)]
    pub when_opts: Vec<String>,
    #[serde(default)]
    pub also_opts: Vec<String>,
    /// Options that stop, list or ask instead of starting (`daemon --stop`).
    #[serde(default)]
    pub unless_opts: Vec<String>,
    pub reason: String,
}

/// `[[cache_clean]]`: a subcommand that deletes a real cache (cleaning.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheClean {
    pub names: Vec<String>,
    pub words: Vec<String>,
    #[serde(default)]
    pub when_opts: Vec<String>,
    /// Options that name the cache directory instead (`uv cache clean --cache-dir DIR`).
    #[serde(default)]
    pub dir_opts: Vec<String>,
    pub caches: Vec<String>,
    pub reason: String,
}

/// `[[cloud_copy]]`: a subcommand that uploads to a storage service (cloud.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudCopy {
    pub names: Vec<String>,
    pub words: Vec<String>,
    #[serde(default)]
    pub schemes: Vec<String>,
    #[serde(default)]
    pub account_opts: Vec<String>,
    #[serde(default)]
    pub account_env: String,
    pub host: String,
    pub reason: String,
}

/// `[[device_use]]`: a program that opens a device it does not name (devices.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceUse {
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub name_prefixes: Vec<String>,
    #[serde(default)]
    pub when_opts: Vec<String>,
    #[serde(default)]
    pub value_opts: Vec<String>,
    #[serde(default)]
    pub value_has: String,
    pub devices: Vec<String>,
    pub reason: String,
}

/// `[[keygen]]`: a command that writes the keys it makes (keys.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Keygen {
    pub names: Vec<String>,
    #[serde(default)]
    pub when_opts: Vec<String>,
    #[serde(default)]
    pub read_opts: Vec<String>,
    #[serde(default)]
    pub file_opts: Vec<String>,
    #[serde(default)]
    pub type_opts: Vec<String>,
    #[serde(default)]
    pub dir_opts: Vec<String>,
    #[serde(default)]
    pub dir_env: String,
    pub default: String,
    #[serde(default)]
    pub default_type: String,
    /// These options write `other_default` instead (`ssh-keygen -R` edits known_hosts).
    #[serde(default)]
    pub other_opts: Vec<String>,
    #[serde(default)]
    pub other_default: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    #[serde(default)]
    pub wrapper: Vec<Wrapper>,
    #[serde(default)]
    pub shell: Vec<Shell>,
    #[serde(default)]
    pub inline: Vec<Inline>,
    #[serde(default)]
    pub writer: Vec<Writer>,
    #[serde(default)]
    pub outside: Vec<Named>,
    #[serde(default)]
    pub privilege: Vec<Named>,
    #[serde(default)]
    pub background: Vec<Named>,
    #[serde(default)]
    pub signal: Vec<Named>,
    #[serde(default)]
    pub server: Vec<Server>,
    #[serde(default)]
    pub bus: Vec<BusSpec>,
    #[serde(default)]
    pub desktop: Vec<DesktopSpec>,
    #[serde(default)]
    pub socket: Vec<SocketSpec>,
    #[serde(default)]
    pub network: Vec<Network>,
    #[serde(default)]
    pub registry: Vec<Registry>,
    #[serde(default)]
    pub credential_helper: Vec<CredentialHelper>,
    #[serde(default)]
    pub token_env: Vec<TokenEnv>,
    #[serde(default)]
    pub settings_file: Vec<SettingsFile>,
    #[serde(default)]
    pub install_dest: Vec<InstallDest>,
    #[serde(default)]
    pub git_writes: GitWrites,
    #[serde(default)]
    pub lasting: Vec<Lasting>,
    #[serde(default)]
    pub cache_clean: Vec<CacheClean>,
    #[serde(default)]
    pub cloud_copy: Vec<CloudCopy>,
    #[serde(default)]
    pub device_use: Vec<DeviceUse>,
    #[serde(default)]
    pub keygen: Vec<Keygen>,
}

/// What the knowledge says about one command name.
#[derive(Debug, Clone, Copy, Default)]
pub struct Roles {
    pub wrapper: Option<usize>,
    pub shell: Option<usize>,
    pub inline: Option<usize>,
    pub writer: Option<usize>,
    pub outside: Option<usize>,
    pub privilege: Option<usize>,
    pub background: Option<usize>,
    pub signal: Option<usize>,
    pub server: Option<usize>,
    pub bus: Option<usize>,
    pub desktop: Option<usize>,
    pub socket: Option<usize>,
    pub network: Option<usize>,
    pub registry: Option<usize>,
}

/// The loaded knowledge with an index by name.
#[derive(Debug)]
pub struct Knowledge {
    pub file: File,
    index: HashMap<String, Roles>,
}

impl Knowledge {
    /// The embedded knowledge (parsed once; the `knowledge_parses` test keeps it valid).
    pub fn get() -> &'static Knowledge {
        static K: OnceLock<Knowledge> = OnceLock::new();
        K.get_or_init(|| match Knowledge::parse(COMMANDS_TOML) {
            Ok(k) => k,
            // A build defect, not input: the unit test parses the same text.
            Err(_) => Knowledge {
                file: File::default(),
                index: HashMap::new(),
            },
        })
    }

    /// Parse a knowledge file.
    pub fn parse(text: &str) -> Result<Knowledge, toml::de::Error> {
        let file: File = toml::from_str(text)?;
        let mut index: HashMap<String, Roles> = HashMap::new();
        macro_rules! idx {
            ($list:ident) => {
                for (i, e) in file.$list.iter().enumerate() {
                    for n in &e.names {
                        index.entry(n.clone()).or_default().$list = Some(i);
                    }
                }
            };
        }
        idx!(wrapper);
        idx!(shell);
        idx!(inline);
        idx!(writer);
        idx!(outside);
        idx!(privilege);
        idx!(background);
        idx!(signal);
        idx!(server);
        idx!(bus);
        idx!(desktop);
        idx!(socket);
        idx!(network);
        idx!(registry);
        Ok(Knowledge { file, index })
    }

    /// The roles of a command name (its base name).
    pub fn roles(&self, name: &str) -> Roles {
        if let Some(r) = self.index.get(name) {
            return *r;
        }
        // python3.12 -> python3, pip3.11 -> pip3
        let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if trimmed.len() < name.len() && !trimmed.is_empty() {
            if let Some(r) = self.index.get(trimmed) {
                return *r;
            }
            if let Some(r) = self.index.get(&format!("{trimmed}3")) {
                return *r;
            }
        }
        Roles::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knowledge_parses() {
        let k = Knowledge::parse(COMMANDS_TOML).unwrap_or_else(|e| panic!("commands.toml: {e}"));
        for w in &k.file.wrapper {
            assert!(!w.reason.is_empty(), "{:?}", w.names);
        }
        assert!(k.roles("sudo").wrapper.is_some());
        assert!(k.roles("python3.12").inline.is_some());
        assert!(k.roles("rm").writer.is_some());
        for r in &k.file.registry {
            assert!(!r.reason.is_empty(), "{:?}", r.names);
            assert!(!r.hosts.is_empty(), "{:?} names no host", r.names);
            for h in r.hosts.iter().chain(&r.publish_hosts) {
                assert!(!h.reason.is_empty(), "{:?} {}", r.names, h.host);
                assert!(
                    !h.host.contains(['/', ':', ' ']),
                    "{:?}: {} is not a host name",
                    r.names,
                    h.host
                );
            }
            for c in &r.caches {
                assert!(c.path.starts_with("~/") && !c.reason.is_empty(), "{c:?}");
            }
            if let Some(s) = &r.setup {
                assert!(
                    super::super::registries::SETUPS.contains(&s.as_str()),
                    "{:?}: setup {s} is not read",
                    r.names
                );
            }
        }
        for t in &k.file.token_env {
            assert!(!t.reason.is_empty() && (!t.hosts.is_empty() || t.registry.is_some()));
        }
        for f in &k.file.settings_file {
            assert!(f.path.starts_with("~/") && !f.reason.is_empty(), "{f:?}");
            assert!(
                super::super::tokens::SCRUB_FORMATS.contains(&f.format.as_str()),
                "{f:?}"
            );
        }
        for h in &k.file.credential_helper {
            assert!(!h.reason.is_empty() && (h.hidden || !h.reads.is_empty()));
        }
    }

    #[test]
    fn every_registry_manager_of_the_issue_is_known() {
        let k = Knowledge::get();
        for m in [
            "cargo", "npm", "pnpm", "yarn", "bun", "pip", "uv", "poetry", "pipx", "go", "gem",
            "composer", "mvn", "gradle",
        ] {
            let r = k.roles(m).registry.map(|i| &k.file.registry[i]);
            assert!(r.is_some_and(|r| !r.caches.is_empty()), "{m}");
        }
        let hosts = |m: &str| -> Vec<String> {
            let i = k.roles(m).registry.unwrap_or_default();
            k.file.registry[i]
                .hosts
                .iter()
                .map(|h| h.host.clone())
                .collect()
        };
        assert_eq!(hosts("cargo"), ["index.crates.io", "static.crates.io"]);
        for m in ["pip", "uv", "poetry", "pipx"] {
            assert_eq!(hosts(m), ["pypi.org", "files.pythonhosted.org"], "{m}");
        }
        assert_eq!(hosts("go"), ["proxy.golang.org", "sum.golang.org"]);
        // Every cache a manager writes is a cache of the defaults (class `cache`).
        let config = crate::config::Config::defaults();
        let caches: Vec<&str> = config
            .sandbox
            .caches
            .iter()
            .map(|e| e.value.as_str())
            .collect();
        for r in &k.file.registry {
            for c in &r.caches {
                let covered = caches.iter().any(|d| {
                    c.path == *d || c.path.starts_with(&format!("{}/", d.trim_end_matches('/')))
                });
                assert!(
                    covered,
                    "{:?}: {} is not in sandbox.caches",
                    r.names, c.path
                );
            }
        }
    }
}
