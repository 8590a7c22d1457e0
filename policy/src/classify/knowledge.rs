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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub names: Vec<String>,
    #[serde(default)]
    pub fetch: Vec<String>,
    #[serde(default)]
    pub publish: Vec<String>,
    #[serde(default)]
    pub global_opts: Vec<String>,
    #[serde(default)]
    pub runner: bool,
    pub host: String,
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
    }
}
