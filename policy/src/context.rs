//! What the policy knows beyond one request: the config's path rules expanded against the
//! environment, the environment a call starts from, and the command knowledge. The
//! classifier judges a line against it and the credential knowledge ([`crate::tokens`])
//! finds the tokens a call could hold with it. Build it once with [`Context::new`] (or
//! [`Context::for_tokens`]) and reuse it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::config::rules::{RulePath, pattern_covers};
use crate::config::{AlwaysRule, Config, Env};
use crate::knowledge;

/// A path rule of the config, expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    /// The rule's path (or pattern) expanded against the environment: absolute, taken
    /// inside each root, or matching nothing when its variable is unset.
    pub path: RulePath,
    /// The entry's reason, or where it was set when it gives none.
    pub reason: String,
}

/// What the classifier knows beyond the request: the config, expanded against the process
/// environment. Build it once with [`Context::new`] and reuse it.
#[derive(Debug, Clone)]
pub struct Context {
    /// The user's home (`~`).
    pub home: PathBuf,
    /// `$XDG_RUNTIME_DIR`, when set.
    pub runtime_dir: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, or `~/.config` when it is unset (where git's user config is
    /// read).
    pub config_home: PathBuf,
    /// The call's `$SCRATCH` (or the directory of every conversation's scratch), when there
    /// is one.
    pub scratch: Option<PathBuf>,
    /// The call's private `/tmp`.
    pub tmp: PathBuf,
    /// `sandbox.masks`: paths present but empty inside a call.
    pub masks: Vec<PathRule>,
    /// `sandbox.read_only_inside`: paths read-only inside every writable root.
    pub read_only_inside: Vec<PathRule>,
    /// `sandbox.writable`: extra writable paths of every contained call.
    pub writable: Vec<PathRule>,
    /// `sandbox.caches`: the real caches (class `cache`).
    pub caches: Vec<PathRule>,
    /// `sandbox.build_output`: directory names below which a project path is class
    /// `build_output`.
    pub build_output: Vec<String>,
    /// `sandbox.trash`: the trash (class `trash`).
    pub trash: Vec<PathRule>,
    /// `floors.paths`: the floor files and directories, which only the user writes.
    pub floor_paths: Vec<PathRule>,
    /// Floor line kinds in force (`delete_home`, `download_to_shell`, ...).
    pub floor_lines: BTreeSet<String>,
    /// `network.allow`: hosts every contained call reaches without a grant.
    pub net_allow: Vec<String>,
    /// `network.deny`: hosts no grant opens.
    pub net_deny: Vec<String>,
    /// `network.token_files`: files that can give a call a token for a host, which then
    /// counts as denied while the call can read the file.
    pub token_files: Vec<PathRule>,
    /// The variables a call of the turn starts with, after the config's `[environment]`
    /// filter ([`Context::with_call_env`]): a token among them denies its host.
    pub call_env: Vec<(String, String)>,
    /// The config's `[[always]]` rules, in order: "allow always" answers a line can match.
    pub always: Vec<AlwaysRule>,
    /// The env the config's rules were expanded with (for always rule paths).
    pub env: Env,
    /// The command knowledge (the embedded file unless [`Context::with_knowledge`]); when it
    /// did not load, every line is opaque with the load error.
    pub knowledge: knowledge::Loaded,
    /// The configured credentials (`[[credential]]` and the built-in profiles): the
    /// classifier proposes a `credential` grant for a line that needs one, and a credential
    /// a call holds only as a placeholder makes no token host.
    pub credentials: Vec<crate::config::credential::CredentialSpec>,
}

/// The config entries `v` expanded against `env`, each with its reason (or where it was
/// set) when `reasons`, else none (a context that never explains).
fn expand_rules(v: &[crate::config::Entry], env: &Env, reasons: bool) -> Vec<PathRule> {
    v.iter()
        .map(|e| PathRule {
            path: RulePath::expand(&e.value, env),
            reason: if reasons {
                e.reason_or_source()
            } else {
                String::new()
            },
        })
        .collect()
}

impl Context {
    /// The context of a config in an environment.
    pub fn new(config: &Config, env: &Env) -> Context {
        let rules = |v: &[crate::config::Entry]| expand_rules(v, env, true);
        Context {
            masks: rules(&config.sandbox.masks),
            read_only_inside: rules(&config.sandbox.read_only_inside),
            writable: rules(&config.sandbox.writable),
            caches: rules(&config.sandbox.caches),
            build_output: config
                .sandbox
                .build_output
                .iter()
                .map(|e| e.value.clone())
                .collect(),
            trash: rules(&config.sandbox.trash),
            floor_paths: rules(&config.floors.paths),
            floor_lines: config.floor_lines().map(str::to_string).collect(),
            net_allow: config
                .network
                .allow
                .iter()
                .map(|e| e.value.clone())
                .collect(),
            net_deny: config
                .network
                .deny
                .iter()
                .map(|e| e.value.clone())
                .collect(),
            token_files: rules(&config.network.token_files),
            always: config.always.clone(),
            credentials: config.credentials().to_vec(),
            ..Context::of_env(env)
        }
    }

    /// The part of [`Context::new`] that [`crate::tokens::visible_token_hosts`] reads (the home,
    /// the config home, the masks, the token files, the knowledge), the rest left empty:
    /// for the proxy of every call, which needs no classifier. Half the time of the whole
    /// context (its hundreds of rules, each with its reason), on the launch's path.
    pub fn for_tokens(config: &Config, env: &Env) -> Context {
        let rules = |v: &[crate::config::Entry]| expand_rules(v, env, false);
        Context {
            masks: rules(&config.sandbox.masks),
            token_files: rules(&config.network.token_files),
            credentials: config.credentials().to_vec(),
            ..Context::of_env(env)
        }
    }

    /// A context of `env` with no rule of a config (what both constructors start from).
    fn of_env(env: &Env) -> Context {
        Context {
            home: env.home.clone(),
            runtime_dir: env.runtime_dir.clone(),
            config_home: env.config_dir(),
            scratch: env.scratch.clone(),
            tmp: env.tmp.clone(),
            masks: Vec::new(),
            read_only_inside: Vec::new(),
            writable: Vec::new(),
            caches: Vec::new(),
            build_output: Vec::new(),
            trash: Vec::new(),
            floor_paths: Vec::new(),
            floor_lines: BTreeSet::new(),
            net_allow: Vec::new(),
            net_deny: Vec::new(),
            token_files: Vec::new(),
            call_env: Vec::new(),
            always: Vec::new(),
            env: env.clone(),
            knowledge: knowledge::Knowledge::embedded().clone(),
            credentials: Vec::new(),
        }
    }

    /// The context with other command knowledge: a file loaded with
    /// [`knowledge::Knowledge::load`] or [`knowledge::Knowledge::load_file`], or its error.
    pub fn with_knowledge(mut self, k: knowledge::Loaded) -> Context {
        self.knowledge = k;
        self
    }

    /// The credential bound to `host` on `port` (443 when `None`), the first configured.
    pub fn credential_for(
        &self,
        host: &str,
        port: Option<u16>,
    ) -> Option<&crate::config::credential::CredentialSpec> {
        self.credentials
            .iter()
            .find(|c| c.binds(host, port.unwrap_or(443)))
    }

    /// The command knowledge, or why it did not load.
    pub fn knowledge(&self) -> Result<&knowledge::Knowledge, &knowledge::KnowledgeError> {
        self.knowledge.as_ref().as_ref()
    }

    /// The command knowledge, or none when it did not load (the walker notes the line
    /// opaque for that; the token checks then know no token variable or helper).
    pub(crate) fn knowledge_or_empty(&self) -> &knowledge::Knowledge {
        self.knowledge()
            .unwrap_or_else(|_| knowledge::Knowledge::empty())
    }

    /// The context with the environment a call starts from: `vars` (the caller's), kept as
    /// the launcher keeps them (the config's `[environment]`: listed in `keep`, not in
    /// `drop`, no secret value; the `GIT_CONFIG_*` set whole or not at all). A config whose
    /// lists do not compile keeps nothing.
    pub fn with_call_env(
        mut self,
        config: &Config,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Context {
        use efr_sandbox_wire::gitenv;
        let Ok(p) = config.env_policy().compile() else {
            return self;
        };
        let listed: Vec<(String, String)> = vars.into_iter().filter(|(k, _)| p.listed(k)).collect();
        // The GIT_CONFIG_* set passes or goes as one, as the launcher judges it.
        let set = gitenv::judge(
            listed.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &config.git_safe_keys(),
            |v| p.secret_value(v),
            p.dropped_name(gitenv::COUNT),
        );
        self.call_env = listed
            .into_iter()
            .filter(|(k, v)| match gitenv::is_member(k) {
                true => set.pass.contains(k),
                false => p.dropped_name(k).is_none() && p.secret_value(v).is_none(),
            })
            .collect();
        self
    }

    /// The built-in defaults with this home (tests, benchmarks).
    pub fn defaults(home: impl Into<PathBuf>) -> Context {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        let config = CONFIG.get_or_init(Config::defaults);
        Context::new(config, &Env::new(home))
    }

    pub(crate) fn floor_line(&self, name: &str) -> bool {
        self.floor_lines.contains(name)
    }
}

/// A rule matches `path` (it or a directory above it).
pub(crate) fn rule_covers(rule: &PathRule, path: &Path, roots: &[PathBuf]) -> bool {
    match &rule.path {
        RulePath::Abs(p) => {
            if p.as_os_str().to_string_lossy().contains('*') {
                pattern_covers(p, path)
            } else {
                path.starts_with(p)
            }
        }
        RulePath::InRoot(rel) => roots.iter().any(|r| {
            path.strip_prefix(r)
                .is_ok_and(|rest| pattern_covers(rel, rest))
        }),
        RulePath::Unset => false,
    }
}
