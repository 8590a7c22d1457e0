//! Command knowledge: `policy/data/commands.toml`, embedded and read once.
//!
//! The file is typed: closed sets (the bus, the desktop, a registry's setup, a settings
//! file's format, ...) are serde enums, the wire's where the wire has one, so a typo such as
//! `bus = "sesion"` is a load error, not another meaning. [`Knowledge::load`] also checks
//! what serde cannot (every entry has a reason, references name a known command). A file
//! that fails to load is never empty knowledge: the classifier makes every line opaque
//! with the load error ([`crate::context::Context::knowledge`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use efr_sandbox_wire::{Bus, Desktop};
use serde::Deserialize;

/// The data file, as written.
pub const COMMANDS_TOML: &str = include_str!("../data/commands.toml");

/// The same tree as JSON, made from [`COMMANDS_TOML`] by the build script: what the
/// embedded knowledge loads from, six times faster than the TOML.
const COMMANDS_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/commands.json"));

/// `[[wrapper]]`: a command that runs the rest of its arguments as a command (`sudo`,
/// `env`, `timeout`, `nohup`); the walker reads the command it runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wrapper {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// Options that take the next word as their argument (`sudo -u USER`), so it is not the
    /// command.
    #[serde(default)]
    pub opts_with_arg: Vec<String>,
    /// Options that mean "run nothing" (`sudo -l`, `sudo -v`): with one, no command
    /// follows.
    #[serde(default)]
    pub no_command_opts: Vec<String>,
    /// How many positional words come before the command (`timeout 10 cmd`: 1).
    #[serde(default)]
    pub skip_positional: usize,
    /// `NAME=value` words before the command are the wrapper's (`env A=1 cmd`), not the
    /// command.
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
    /// The wrapper itself is a `privilege` exit: it runs the command as another user
    /// (`sudo`).
    #[serde(default)]
    pub privilege: bool,
    /// The wrapper itself is a `background` exit: the command can outlive the call
    /// (`setsid`).
    #[serde(default)]
    pub background: bool,
    /// Background only in a `&` job (`nohup cmd &`); in the foreground the line waits.
    #[serde(default)]
    pub in_job_only: bool,
    /// Options that make the wrapper wait for the command (`setsid -w`): not background.
    #[serde(default)]
    pub foreground_opts: Vec<String>,
    /// The wrapper works only outside the sandbox (`systemd-run`, `unshare`): an `outside`
    /// exit, or an unsandboxed `background` one.
    #[serde(default)]
    pub outside: bool,
    /// The command runs on the host network through the wrapper (`torsocks`): an
    /// `open_network` exit.
    #[serde(default)]
    pub open_network: bool,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[default_port]]`: the port a server listens on when the line names none.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultPort {
    /// The servers this port is the default of (a command or `python -m` module name).
    pub names: Vec<String>,
    /// The port they listen on when the line names none.
    pub port: u16,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[module_runner]]`: an interpreter whose `-m MODULE` runs a module as a command
/// (`python -m pip install`, `python -m http.server`): a registry module is read as that
/// package manager, any other as a possible server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleRunner {
    /// The interpreter's names, matched exactly.
    pub names: Vec<String>,
    /// Starts of names that are this interpreter too (`python3` for `python3.12`).
    #[serde(default)]
    pub name_prefixes: Vec<String>,
    /// The option that names the module (`-m`).
    pub option: String,
    /// Modules that are package managers: each names a `[[registry]]` command.
    #[serde(default)]
    pub registry_modules: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `handler`: the walker's code that reads a command's arguments itself (git's subcommands,
/// find's `-exec`, dd's `of=`, ...), run by `walk/dispatch.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Handler {
    /// `eval STRING...`: the string is read as a line.
    Eval,
    /// `source FILE`, `. FILE`: a downloaded or unknown script.
    Source,
    /// `trap STRING SIGNAL`: the string is read as a line.
    Trap,
    /// `git`: its subcommands reach remotes, write repositories and run git code.
    Git,
    /// `gh`, the GitHub CLI: acts on github.com with the user's token; creating a pull
    /// request, release, gist or repository uploads.
    Gh,
    /// `find`: `-exec` runs commands and `-delete` deletes.
    Find,
    /// `xargs`: runs its command with words from stdin.
    Xargs,
    /// `parallel`: runs its command for each input.
    Parallel,
    /// `dd`: `of=` writes a file or a device.
    Dd,
    /// `sed -i`, `perl -i`/`-pi`: writes the files it edits (without `-i` the roles read it).
    InPlace,
    /// `tar`: extracting writes where `-C` or the archive says.
    Tar,
    /// `unzip`, `7z`: extracting writes where `-d` or `-o` says.
    Unzip,
    /// `crontab FILE`, `crontab -e`: a floor (`-l` alone lists).
    Crontab,
    /// `mkfs*`, `mkswap`, ...: formats a disk device (a floor) or writes a file.
    Format,
    /// `ssh`, `mosh`: logs in to another machine; `-L`, `-R` and `-D` forward ports.
    Ssh,
}

/// `[[handler]]`: commands read by a [`Handler`] before (and, when it applies, instead of)
/// their roles. Names match exactly (no version suffix is taken off); `name_prefixes`
/// match the start of the name (`mkfs` for `mkfs.ext4`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandlerSpec {
    /// The command names it reads, matched exactly.
    pub names: Vec<String>,
    /// Starts of command names it reads too (`mkfs` for `mkfs.ext4`).
    #[serde(default)]
    pub name_prefixes: Vec<String>,
    /// The walker's code that reads them.
    pub handler: Handler,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[shell]]`: a shell, whose `-c STRING` is read as a line; a script file runs code efr
/// does not read, and no script and no `-c` reads stdin (`curl ... | sh`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shell {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// Options that take the next word (`-o OPTION`, `--rcfile FILE`), so it is not the
    /// script.
    #[serde(default)]
    pub opts_with_arg: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[inline]]`: an interpreter whose inline code (`python -c`, `perl -e`) efr does not
/// read, so such a line is opaque.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inline {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The options whose argument is code (`-c`, `-e`): with one the line is opaque.
    pub code_opts: Vec<String>,
    /// With no script (or `-`), it runs what stdin gives: a download piped into it is the
    /// `download_to_shell` floor.
    #[serde(default)]
    pub stdin_runs: bool,
    /// Its program can call `system()` and write files (awk): the walker reads the
    /// program's redirections instead of making the line opaque.
    #[serde(default)]
    pub system_call: bool,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// What a `[[writer]]` does to the paths it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOp {
    /// It creates, writes or changes (mode, owner) the paths.
    Write,
    /// It deletes the paths.
    Delete,
}

/// `args` of a `[[writer]]`: which of the command's arguments it writes or deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgRole {
    /// Every argument that is not an option.
    All,
    /// The last argument (the destination of `cp`, `mv`).
    Last,
    /// All arguments but the first (`chmod MODE FILE...`).
    RestAfterFirst,
    /// No argument: only what the `dest_opts` name.
    None,
}

/// `[[writer]]`: a command that writes or deletes paths among its arguments (`rm`, `cp`,
/// `chmod`, `tee`) or given by an option.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Writer {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// Whether it writes or deletes them.
    pub op: WriteOp,
    /// Which of its arguments it writes or deletes.
    pub args: ArgRole,
    /// Options whose argument is a target it writes (`-t DIR`, `-o FILE`).
    #[serde(default)]
    pub dest_opts: Vec<String>,
    /// Options that take the next word (`-m MODE`), so it is not a target.
    #[serde(default)]
    pub opts_with_arg: Vec<String>,
    /// The arguments before the destination are deleted (`mv`).
    #[serde(default)]
    pub sources_deleted: bool,
    /// The command is a `privilege` exit as well (`setcap`: root-equivalent).
    #[serde(default)]
    pub privilege: bool,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// An entry of `[[outside]]`, `[[privilege]]`, `[[background]]` or `[[signal]]`: commands
/// that are that exit by their name alone (they work only outside the sandbox, gain another
/// user's rights, leave a job after the call, or signal processes the line names).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Named {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// For package managers: only these subcommands are outside (`apt install`, not
    /// `apt list`).
    #[serde(default)]
    pub install_only: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[server]]`: a command that listens on a port.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// The server names: a command, a `python -m` module (`http.server`), or a command with
    /// its subcommand or option (`hugo-server`, `php-S`).
    pub names: Vec<String>,
    /// Options that take the port it listens on (`-p`, `--port`).
    pub port_opts: Vec<String>,
    /// Subcommands (the first positional word) that do not listen (`vite build`).
    #[serde(default)]
    pub not_subcommands: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[bus]]`: a command that talks to a D-Bus bus (a `bus` or `bus_filter` grant).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BusSpec {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The bus it talks to: the session bus or the system bus.
    pub bus: Bus,
    /// Names for which the filtered bus is enough (`notify-send`: a notification, which the
    /// filter lets through); the others need the real bus.
    #[serde(default)]
    pub filtered: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[desktop]]`: a command that talks to the desktop's compositor or display server (a
/// `desktop` grant).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesktopSpec {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The desktop whose socket it needs (Wayland, X11, Hyprland, Sway, i3, Niri).
    pub desktop: Desktop,
    /// Names and subcommands that only read the desktop's state or reload its config
    /// (`hyprctl clients`, `grim`): the exit says so.
    #[serde(default)]
    pub read_subcommands: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[socket]]`: a command that talks to a daemon of the host through its socket (docker).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketSpec {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The daemon's sockets, in the order they are tried (`$XDG_RUNTIME_DIR` expanded); the
    /// first that exists is the one the exit names, else the first.
    pub sockets: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `host_args` of a `[[network]]` entry: how the hosts the command reaches are read from
/// its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostArgs {
    /// The hosts of its URL arguments (`curl URL`).
    Urls,
    /// The first positional argument (or a `-h`/`--host` option) is the host (`nc HOST
    /// PORT`).
    First,
    /// A `host:path` argument names the remote host (`scp`, `rsync`).
    Remote,
}

/// `[[network]]`: a command whose arguments name the hosts it reaches (downloaders,
/// clients, copies to a remote).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// How its arguments name the hosts it reaches.
    pub host_args: HostArgs,
    /// It downloads from the hosts it names (curl, wget and their kin).
    #[serde(default)]
    pub downloader: bool,
    /// Names read as sending their download to stdout whatever the options (`xh URL | sh`
    /// runs a download); curl and wget are read by their output options in the walker.
    #[serde(default)]
    pub to_stdout: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `setup`: whose configuration files name the user's own registry
/// (`crate::tokens::registries::setup_of` reads each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetupName {
    /// npm's: `--registry`, `npm_config_registry`, the `.npmrc` files and their
    /// `@scope:registry` lines.
    Npm,
    /// yarn's: `YARN_NPM_REGISTRY_SERVER`, `.yarnrc.yml` (`npmRegistryServer`,
    /// `npmScopes`).
    Yarn,
    /// pip's: `-i`/`--index-url`, `--extra-index-url`, `PIP_INDEX_URL`, a requirements
    /// file, `pip.conf`.
    Pip,
    /// uv's: `--index`, `--default-index`, `UV_DEFAULT_INDEX`, `UV_INDEX`, `uv.toml` or
    /// `[tool.uv]`.
    Uv,
    /// poetry's: the `[[tool.poetry.source]]` of `pyproject.toml`.
    Poetry,
    /// cargo's: `.cargo/config.toml` source replacement and `[registries]`,
    /// `CARGO_REGISTRIES_<NAME>_INDEX`.
    Cargo,
    /// go's: `GOPROXY`, `GOSUMDB` and go's env file.
    Go,
    /// gem's and bundler's: `--source`, a Gemfile's `source`, `~/.gemrc`.
    Gem,
    /// composer's: the repositories of `composer.json` and composer's `config.json`.
    Composer,
    /// maven's: the repositories of `pom.xml` and the `settings.xml` mirrors of `central`.
    Maven,
    /// gradle's: the wrapper's `distributionUrl`.
    Gradle,
}

/// `format` of a settings file: how its secrets are found (`crate::tokens::scrub`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScrubFormat {
    /// `_authToken`, `_auth`, `_password`, `username` keys.
    Npmrc,
    /// `npmAuthToken`, `npmAuthIdent`, `npmPassword`.
    Yarnrc,
    /// `token` keys of `[registry]` and `[registries.*]`.
    Cargo,
    /// `<password>`, `<passphrase>`, `<privateKey>` of `<servers>`.
    Maven,
    /// Only passwords in urls.
    Urls,
}

/// A host of a registry, with why it is needed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryHost {
    /// The host name.
    pub host: String,
    /// Why the registry needs it (what is fetched from it).
    pub reason: String,
}

/// A cache a package manager writes (`~/...`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryCache {
    /// The cache's path, `~/...`, at or below one of the defaults' `sandbox.caches`.
    pub path: String,
    /// What the manager keeps there.
    pub reason: String,
}

/// `[[registry]]`: a package manager: the subcommands that fetch or publish, every host its
/// default registry needs, and the caches it writes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// Subcommands that fetch from the registry (a `host` exit); a two-word subcommand is
    /// written `first-second` (`pip-install`), and `*` is any.
    #[serde(default)]
    pub fetch: Vec<String>,
    /// Subcommands that fetch only when the lock file names what the cache lacks.
    #[serde(default)]
    pub fetch_if_missing: Vec<String>,
    /// Words that alone make the command fetch nothing (`mvn --version`).
    #[serde(default)]
    pub quiet: Vec<String>,
    /// Subcommands that publish (an `upload` exit, needing the user's registry token).
    #[serde(default)]
    pub publish: Vec<String>,
    /// Options (or words, yarn's `global`) that install outside the project (`-g`,
    /// `--user`): the install is a write there.
    #[serde(default)]
    pub global_opts: Vec<String>,
    /// The command fetches a package and runs its code (`npx`, `uvx`), whatever the
    /// subcommand.
    #[serde(default)]
    pub runner: bool,
    /// Names of the entry that fetch when run with no subcommand (a bare `yarn` installs).
    #[serde(default)]
    pub bare_fetch: Vec<String>,
    /// Whose configuration names the user's own registry (`npm`, `pip`, `cargo`, ...).
    #[serde(default)]
    pub setup: Option<SetupName>,
    /// Every host the default registry needs.
    pub hosts: Vec<RegistryHost>,
    /// The hosts publishing reaches, when they are not `hosts`.
    #[serde(default)]
    pub publish_hosts: Vec<RegistryHost>,
    /// The caches the manager writes, made before a contained call that runs it when they
    /// do not exist yet.
    #[serde(default)]
    pub caches: Vec<RegistryCache>,
    /// Why the entry is here, in words (every entry gives one).
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
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// A settings file shown to a call with its secret values removed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    /// `~/...`.
    pub path: String,
    /// How its secrets are found.
    pub format: ScrubFormat,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// Variables that hold a token for hosts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEnv {
    /// The environment variables that hold such a token.
    pub names: Vec<String>,
    /// The hosts a token in one of them is for.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The registry (a `setup` name) whose host, as the user's setup names it, the token
    /// is for.
    #[serde(default)]
    pub registry: Option<SetupName>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[install_dest]]`: where an installing command writes (dests.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallDest {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The first positional word must be one of these (empty: any).
    #[serde(default)]
    pub subcommands: Vec<String>,
    /// Some positional word must be one of these (`install*` matches a prefix; empty: any).
    #[serde(default)]
    pub targets: Vec<String>,
    /// Some word must be one of these (empty: none needed).
    #[serde(default)]
    pub when_opts: Vec<String>,
    /// Options that take the destination (`--opt DIR` or `--opt=DIR`).
    #[serde(default)]
    pub dest_opts: Vec<String>,
    /// `NAME=value` arguments whose value is a destination (`make install PREFIX=...`).
    #[serde(default)]
    pub var_args: Vec<String>,
    /// Variables of the command's environment whose value is the destination, when the line
    /// names none.
    #[serde(default)]
    pub env_vars: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[git_writes]`: git subcommands that change the repository they run in (dests.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitWrites {
    /// Subcommands that write the repository they run in (`pull`, `commit`, `checkout`,
    /// ...).
    #[serde(default)]
    pub subcommands: Vec<String>,
    /// Subcommands that write only when given an argument (`git branch` alone lists).
    #[serde(default)]
    pub with_args: Vec<String>,
    /// Why these subcommands count as writes, in words.
    #[serde(default)]
    pub reason: String,
}

/// `[[lasting]]`: a command form that leaves a job running after the call (lasting.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lasting {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The first positional word must be one of these (empty: any).
    #[serde(default)]
    pub subcommands: Vec<String>,
    /// A word must equal one of these, or be a single-dash group holding one of their
    /// letters (`-dmS`); empty: none needed.
    #[serde(default)]
    pub when_opts: Vec<String>,
    /// Every one of these must be present too (the same way).
    #[serde(default)]
    pub also_opts: Vec<String>,
    /// Options that stop, list or ask instead of starting (`daemon --stop`).
    #[serde(default)]
    pub unless_opts: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[script_runner]]`: a package manager that runs a script of the project's manifest
/// (`npm run dev`), which the walker reads as a line (scripts.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRunner {
    /// The command names this entry applies to.
    pub names: Vec<String>,
    /// Subcommands whose next positional word names the script (`run`, `run-script`).
    pub run: Vec<String>,
    /// Subcommands that run the script of their own name (`start`, `test`).
    #[serde(default)]
    pub direct: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[cache_clean]]`: a subcommand that deletes a real cache (cleaning.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheClean {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The positional words, in order (after options), that make the subcommand (`cache`,
    /// `clean`).
    pub words: Vec<String>,
    /// One of these words must be present (empty: none needed).
    #[serde(default)]
    pub when_opts: Vec<String>,
    /// Options that name the cache directory instead (`uv cache clean --cache-dir DIR`).
    #[serde(default)]
    pub dir_opts: Vec<String>,
    /// The paths it deletes (`~` the home), each one of `sandbox.caches` of the defaults.
    pub caches: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[cloud_copy]]`: a subcommand that uploads to a storage service (cloud.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudCopy {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The positional words that make the subcommand (`s3`, `cp`).
    pub words: Vec<String>,
    /// URL schemes (`s3://`) of a remote destination, the last positional word: only a copy
    /// to one uploads (empty: the subcommand always uploads).
    #[serde(default)]
    pub schemes: Vec<String>,
    /// Options whose value is the storage account (`--account-name`).
    #[serde(default)]
    pub account_opts: Vec<String>,
    /// The variable that names the storage account when no option does (empty: none).
    #[serde(default)]
    pub account_env: String,
    /// The endpoint the upload reaches: `{bucket}` is the first part after the scheme,
    /// `{account}` the account.
    pub host: String,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[device_use]]`: a program that opens a device it does not name (devices.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceUse {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    #[serde(default)]
    pub names: Vec<String>,
    /// Starts of command names it applies to too (`qemu-system-`).
    #[serde(default)]
    pub name_prefixes: Vec<String>,
    /// A word equal to one of these makes the command open the devices.
    #[serde(default)]
    pub when_opts: Vec<String>,
    /// Options whose value, when it holds `value_has`, makes the command open the devices
    /// (`-accel kvm`).
    #[serde(default)]
    pub value_opts: Vec<String>,
    /// The text a `value_opts` value must hold (`kvm`). With `when_opts`, both empty: the
    /// command always opens the devices.
    #[serde(default)]
    pub value_has: String,
    /// The devices it opens (`/dev/kvm`, `/dev/fuse`).
    pub devices: Vec<String>,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// `[[keygen]]`: a command that writes the keys it makes (keys.rs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Keygen {
    /// The command names this entry applies to, matched against a command's base name
    /// (`/usr/bin/rm` is `rm`).
    pub names: Vec<String>,
    /// The command writes keys only with one of these (empty: always, unless one of
    /// `read_opts` is given).
    #[serde(default)]
    pub when_opts: Vec<String>,
    /// Options that only read a key (`ssh-keygen -l -f KEY`): nothing is written.
    #[serde(default)]
    pub read_opts: Vec<String>,
    /// Options that name the key file written (`-f`).
    #[serde(default)]
    pub file_opts: Vec<String>,
    /// Options that name the key type, which `{type}` of `default` stands for (`-t`).
    #[serde(default)]
    pub type_opts: Vec<String>,
    /// Options that name the key directory instead of the default (`--homedir`).
    #[serde(default)]
    pub dir_opts: Vec<String>,
    /// The variable that names the key directory instead of the default (`GNUPGHOME`;
    /// empty: none).
    #[serde(default)]
    pub dir_env: String,
    /// What is written when no file or directory is named, `~/...`; `{type}` is the key
    /// type.
    pub default: String,
    /// The key type `{type}` stands for when no type option is given (`ed25519`).
    #[serde(default)]
    pub default_type: String,
    /// These options write `other_default` instead (`ssh-keygen -R` edits known_hosts).
    #[serde(default)]
    pub other_opts: Vec<String>,
    /// The file the `other_opts` write (`~/.ssh/known_hosts`).
    #[serde(default)]
    pub other_default: String,
    /// Why the entry is here, in words (every entry gives one).
    pub reason: String,
}

/// The whole of `commands.toml`, as parsed: one list per table kind (`[[wrapper]]`,
/// `[[registry]]`, ...), each in file order.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// `[[handler]]`: commands read by the walker's own code.
    #[serde(default)]
    pub handler: Vec<HandlerSpec>,
    /// `[[module_runner]]`: interpreters whose `-m MODULE` runs a module as a command.
    #[serde(default)]
    pub module_runner: Vec<ModuleRunner>,
    /// `[[default_port]]`: the port a server listens on when the line names none.
    #[serde(default)]
    pub default_port: Vec<DefaultPort>,
    /// `[[wrapper]]`: commands that run the rest of their arguments as a command.
    #[serde(default)]
    pub wrapper: Vec<Wrapper>,
    /// `[[shell]]`: shells, whose `-c` string is read as a line.
    #[serde(default)]
    pub shell: Vec<Shell>,
    /// `[[inline]]`: interpreters whose inline code efr does not read.
    #[serde(default)]
    pub inline: Vec<Inline>,
    /// `[[writer]]`: commands that write or delete their arguments.
    #[serde(default)]
    pub writer: Vec<Writer>,
    /// `[[outside]]`: commands that only work outside the sandbox (their socket, keys or
    /// system state is outside).
    #[serde(default)]
    pub outside: Vec<Named>,
    /// `[[privilege]]`: commands that gain another user's rights and are not wrappers.
    #[serde(default)]
    pub privilege: Vec<Named>,
    /// `[[background]]`: commands (or keywords) that leave a job running after the call.
    #[serde(default)]
    pub background: Vec<Named>,
    /// `[[signal]]`: commands that send signals to processes the line names.
    #[serde(default)]
    pub signal: Vec<Named>,
    /// `[[server]]`: commands that listen on a port.
    #[serde(default)]
    pub server: Vec<Server>,
    /// `[[bus]]`: commands that talk to a D-Bus bus.
    #[serde(default)]
    pub bus: Vec<BusSpec>,
    /// `[[desktop]]`: commands that talk to the desktop.
    #[serde(default)]
    pub desktop: Vec<DesktopSpec>,
    /// `[[socket]]`: commands that talk to a daemon through a socket of the host.
    #[serde(default)]
    pub socket: Vec<SocketSpec>,
    /// `[[network]]`: commands whose arguments name the hosts they reach.
    #[serde(default)]
    pub network: Vec<Network>,
    /// `[[registry]]`: package managers, their registries' hosts and their caches.
    #[serde(default)]
    pub registry: Vec<Registry>,
    /// `[[credential_helper]]`: git credential helpers and whether a call could get a token
    /// from one.
    #[serde(default)]
    pub credential_helper: Vec<CredentialHelper>,
    /// `[[token_env]]`: environment variables that hold a token for a host.
    #[serde(default)]
    pub token_env: Vec<TokenEnv>,
    /// `[[settings_file]]`: settings files shown to a call with their secrets removed.
    #[serde(default)]
    pub settings_file: Vec<SettingsFile>,
    /// `[[install_dest]]`: where installing commands write.
    #[serde(default)]
    pub install_dest: Vec<InstallDest>,
    /// `[git_writes]`: git subcommands that change the repository they run in.
    #[serde(default)]
    pub git_writes: GitWrites,
    /// `[[lasting]]`: command forms that leave a job running after the call.
    #[serde(default)]
    pub lasting: Vec<Lasting>,
    /// `[[script_runner]]`: package managers that run a script of `package.json`.
    #[serde(default)]
    pub script_runner: Vec<ScriptRunner>,
    /// `[[cache_clean]]`: subcommands that delete a real cache.
    #[serde(default)]
    pub cache_clean: Vec<CacheClean>,
    /// `[[cloud_copy]]`: subcommands that upload to a storage service.
    #[serde(default)]
    pub cloud_copy: Vec<CloudCopy>,
    /// `[[device_use]]`: programs that open a device they do not name.
    #[serde(default)]
    pub device_use: Vec<DeviceUse>,
    /// `[[keygen]]`: commands that write the keys they make.
    #[serde(default)]
    pub keygen: Vec<Keygen>,
}

/// ` (line N)` for a parse error's span.
fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(r) => {
            let at = r.start.min(text.len());
            let n = text.as_bytes()[..at]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            format!(" (line {n})")
        }
        None => String::new(),
    }
}

impl File {
    /// What serde does not check: every entry names a command and says why, and what one
    /// entry refers to exists.
    fn check(&self) -> Result<(), String> {
        macro_rules! named {
            ($list:ident) => {
                for (i, e) in self.$list.iter().enumerate() {
                    if e.reason.trim().is_empty() {
                        return Err(format!(
                            "[[{}]] entry {} ({:?}) has no reason",
                            stringify!($list),
                            i + 1,
                            e.names
                        ));
                    }
                    if e.names.is_empty() || e.names.iter().any(|n| n.trim().is_empty()) {
                        return Err(format!(
                            "[[{}]] entry {} names no command (or an empty one)",
                            stringify!($list),
                            i + 1
                        ));
                    }
                }
            };
        }
        named!(handler);
        let mut seen = std::collections::HashSet::new();
        for h in &self.handler {
            for n in &h.names {
                if !seen.insert(n.as_str()) {
                    return Err(format!("[[handler]]: {n} has two handlers"));
                }
            }
        }
        named!(module_runner);
        named!(default_port);
        named!(wrapper);
        named!(shell);
        named!(inline);
        named!(writer);
        named!(outside);
        named!(privilege);
        named!(background);
        named!(signal);
        named!(server);
        named!(bus);
        named!(desktop);
        named!(socket);
        named!(network);
        named!(registry);
        named!(credential_helper);
        named!(token_env);
        named!(install_dest);
        named!(lasting);
        named!(script_runner);
        named!(cache_clean);
        named!(cloud_copy);
        named!(keygen);
        for (i, d) in self.device_use.iter().enumerate() {
            if d.reason.trim().is_empty() || (d.names.is_empty() && d.name_prefixes.is_empty()) {
                return Err(format!(
                    "[[device_use]] entry {} needs a reason and a name or a name prefix",
                    i + 1
                ));
            }
        }
        for m in &self.module_runner {
            for rm in &m.registry_modules {
                if !self.registry.iter().any(|r| r.names.contains(rm)) {
                    return Err(format!(
                        "[[module_runner]] {:?}: registry module {rm} is no [[registry]] command",
                        m.names
                    ));
                }
            }
        }
        for b in &self.bus {
            if let Some(n) = b.filtered.iter().find(|n| !b.names.contains(n)) {
                return Err(format!(
                    "[[bus]] {:?}: filtered {n} is not one of its names",
                    b.names
                ));
            }
        }
        for e in &self.network {
            if let Some(n) = e.to_stdout.iter().find(|n| !e.names.contains(n)) {
                return Err(format!(
                    "[[network]] {:?}: to_stdout {n} is not one of its names",
                    e.names
                ));
            }
        }
        for r in &self.registry {
            if let Some(n) = r.bare_fetch.iter().find(|n| !r.names.contains(n)) {
                return Err(format!(
                    "[[registry]] {:?}: bare_fetch {n} is not one of its names",
                    r.names
                ));
            }
            if r.hosts.is_empty() {
                return Err(format!("[[registry]] {:?} names no host", r.names));
            }
            for h in r.hosts.iter().chain(&r.publish_hosts) {
                if h.reason.trim().is_empty()
                    || h.host.is_empty()
                    || h.host.contains(['/', ':', ' '])
                {
                    return Err(format!(
                        "[[registry]] {:?}: host {:?} is not a host name with a reason",
                        r.names, h.host
                    ));
                }
            }
            for c in &r.caches {
                if !c.path.starts_with("~/") || c.reason.trim().is_empty() {
                    return Err(format!(
                        "[[registry]] {:?}: cache {:?} is not a ~/ path with a reason",
                        r.names, c.path
                    ));
                }
            }
        }
        for t in &self.token_env {
            if t.hosts.is_empty() && t.registry.is_none() {
                return Err(format!(
                    "[[token_env]] {:?} names no host and no registry",
                    t.names
                ));
            }
            if let Some(s) = t.registry {
                if !self.registry.iter().any(|r| r.setup == Some(s)) {
                    return Err(format!(
                        "[[token_env]] {:?}: registry {s:?} is the setup of no [[registry]]",
                        t.names
                    ));
                }
            }
        }
        for f in &self.settings_file {
            if !f.path.starts_with("~/") || f.reason.trim().is_empty() {
                return Err(format!(
                    "[[settings_file]] {:?} is not a ~/ path with a reason",
                    f.path
                ));
            }
        }
        for h in &self.credential_helper {
            if !h.hidden && h.reads.is_empty() {
                return Err(format!(
                    "[[credential_helper]] {:?} reads no file and is not hidden",
                    h.names
                ));
            }
        }
        Ok(())
    }
}

/// What the knowledge says about one command name.
#[derive(Debug, Clone, Copy, Default)]
pub struct Roles {
    /// The `[[wrapper]]` entry that names the command, as an index in `File::wrapper`.
    pub wrapper: Option<usize>,
    /// The `[[shell]]` entry that names the command, as an index in `File::shell`.
    pub shell: Option<usize>,
    /// The `[[inline]]` entry that names the command, as an index in `File::inline`.
    pub inline: Option<usize>,
    /// The `[[writer]]` entry that names the command, as an index in `File::writer`.
    pub writer: Option<usize>,
    /// The `[[outside]]` entry that names the command, as an index in `File::outside`.
    pub outside: Option<usize>,
    /// The `[[privilege]]` entry that names the command, as an index in `File::privilege`.
    pub privilege: Option<usize>,
    /// The `[[background]]` entry that names the command, as an index in
    /// `File::background`.
    pub background: Option<usize>,
    /// The `[[signal]]` entry that names the command, as an index in `File::signal`.
    pub signal: Option<usize>,
    /// The `[[server]]` entry that names the command, as an index in `File::server`.
    pub server: Option<usize>,
    /// The `[[bus]]` entry that names the command, as an index in `File::bus`.
    pub bus: Option<usize>,
    /// The `[[desktop]]` entry that names the command, as an index in `File::desktop`.
    pub desktop: Option<usize>,
    /// The `[[socket]]` entry that names the command, as an index in `File::socket`.
    pub socket: Option<usize>,
    /// The `[[network]]` entry that names the command, as an index in `File::network`.
    pub network: Option<usize>,
    /// The `[[registry]]` entry that names the command, as an index in `File::registry`.
    pub registry: Option<usize>,
}

/// Why a knowledge file did not load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnowledgeError {
    /// The file could not be read.
    #[error("cannot read the command knowledge {origin}: {message}")]
    Read {
        /// The file: its path, or `EMBEDDED_ORIGIN` for the embedded one.
        origin: String,
        /// What reading it gave.
        message: String,
    },
    /// The TOML does not parse, or names a field or an enum value that does not exist.
    #[error("the command knowledge {origin} does not parse: {message}")]
    Parse {
        /// The file: its path, or `EMBEDDED_ORIGIN` for the embedded one.
        origin: String,
        /// What the TOML parser said, with the line.
        message: String,
    },
    /// It parses but says something the classifier cannot use (an entry with no reason, a
    /// reference to a command it does not know, ...).
    #[error("the command knowledge {origin} is not valid: {message}")]
    Invalid {
        /// The file: its path, or `EMBEDDED_ORIGIN` for the embedded one.
        origin: String,
        /// What is wrong, naming the table and entry.
        message: String,
    },
}

/// The knowledge a classifier context uses: loaded, or why not (then every line is opaque).
pub type Loaded = Arc<Result<Knowledge, KnowledgeError>>;

/// Where the embedded file comes from, in load errors.
pub const EMBEDDED_ORIGIN: &str = "policy/data/commands.toml (embedded)";

/// The loaded knowledge with an index by name.
#[derive(Debug)]
pub struct Knowledge {
    /// The file as loaded, every table in file order (the roles index into its lists).
    pub file: File,
    index: HashMap<String, Roles>,
    /// `[[handler]]` by exact name.
    handlers: HashMap<String, Handler>,
}

impl Knowledge {
    /// The embedded knowledge, loaded once (from its JSON form). The `knowledge_loads` test
    /// keeps it valid, so an error here is a build defect; it is kept, not hidden
    /// ([`Knowledge::get`]).
    pub fn embedded() -> &'static Loaded {
        static K: OnceLock<Loaded> = OnceLock::new();
        K.get_or_init(|| Arc::new(Knowledge::load_embedded_json(COMMANDS_JSON)))
    }

    /// The embedded knowledge from its JSON form. Errors name the TOML file, which is what
    /// a reader edits; the test `the_json_copy_is_the_toml` keeps both the same.
    fn load_embedded_json(json: &str) -> Result<Knowledge, KnowledgeError> {
        let file: File = serde_json::from_str(json).map_err(|e| KnowledgeError::Parse {
            origin: EMBEDDED_ORIGIN.to_string(),
            message: e.to_string(),
        })?;
        Knowledge::checked(file, EMBEDDED_ORIGIN)
    }

    /// The embedded knowledge for what has no classifier context (the scrubbed copies of a
    /// launch): empty when it did not load, which shows no scrubbed copy (a masked settings
    /// file stays masked). The classifier itself uses [`crate::context::Context::knowledge`], which
    /// makes every line opaque instead.
    pub fn get() -> &'static Knowledge {
        match Knowledge::embedded().as_ref() {
            Ok(k) => k,
            Err(_) => Knowledge::empty(),
        }
    }

    /// No knowledge at all: the walker's stand-in when the file did not load (the line is
    /// then opaque, so nothing reads this as "the command does nothing").
    pub fn empty() -> &'static Knowledge {
        static EMPTY: OnceLock<Knowledge> = OnceLock::new();
        EMPTY.get_or_init(|| Knowledge::index(File::default()))
    }

    /// Load a knowledge file's text; `origin` (a path, or [`EMBEDDED_ORIGIN`]) names it in
    /// errors.
    pub fn load(text: &str, origin: &str) -> Result<Knowledge, KnowledgeError> {
        let file: File = toml::from_str(text).map_err(|e| KnowledgeError::Parse {
            origin: origin.to_string(),
            message: e.message().to_string() + &line_of(text, e.span()),
        })?;
        Knowledge::checked(file, origin)
    }

    fn checked(file: File, origin: &str) -> Result<Knowledge, KnowledgeError> {
        file.check().map_err(|message| KnowledgeError::Invalid {
            origin: origin.to_string(),
            message,
        })?;
        Ok(Knowledge::index(file))
    }

    /// Load a knowledge file from disk.
    pub fn load_file(path: &Path) -> Result<Knowledge, KnowledgeError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| KnowledgeError::Read {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        Knowledge::load(&text, &origin)
    }

    fn index(file: File) -> Knowledge {
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
        let mut handlers = HashMap::new();
        for h in &file.handler {
            for n in &h.names {
                handlers.insert(n.clone(), h.handler);
            }
        }
        Knowledge {
            file,
            index,
            handlers,
        }
    }

    /// The module runner `name` is (`python`, `python3.12`): an exact name or a prefix.
    pub fn module_runner(&self, name: &str) -> Option<&ModuleRunner> {
        self.file.module_runner.iter().find(|r| {
            r.names.iter().any(|n| n == name)
                || r.name_prefixes.iter().any(|p| name.starts_with(p.as_str()))
        })
    }

    /// The handler that reads the command `name` (its base name), if one does: an exact
    /// name, else a name prefix of `[[handler]]`.
    pub fn handler(&self, name: &str) -> Option<Handler> {
        if let Some(h) = self.handlers.get(name) {
            return Some(*h);
        }
        self.file
            .handler
            .iter()
            .find(|h| h.name_prefixes.iter().any(|p| name.starts_with(p.as_str())))
            .map(|h| h.handler)
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
    fn knowledge_loads() {
        // The embedded file: a parse error, an unknown enum value or an invalid reference
        // fails `cargo test` here.
        let k = Knowledge::load(COMMANDS_TOML, EMBEDDED_ORIGIN).unwrap_or_else(|e| panic!("{e}"));
        assert!(k.roles("sudo").wrapper.is_some());
        assert!(k.roles("python3.12").inline.is_some());
        assert!(k.roles("rm").writer.is_some());
        assert!(Knowledge::embedded().is_ok());
    }

    /// The embedded copy (JSON, made by the build script) is the reviewed TOML, field for
    /// field, and a broken copy is an error, not empty knowledge.
    #[test]
    fn the_json_copy_is_the_toml() {
        let toml =
            Knowledge::load(COMMANDS_TOML, EMBEDDED_ORIGIN).unwrap_or_else(|e| panic!("{e}"));
        let json = Knowledge::embedded()
            .as_ref()
            .as_ref()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format!("{:?}", json.file), format!("{:?}", toml.file));
        assert!(!json.file.wrapper.is_empty());
        let e = Knowledge::load_embedded_json("{\"wrapper\": 3}")
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("commands.toml")),
            "{e:?}"
        );
    }

    fn err(text: &str) -> String {
        match Knowledge::load(text, "test.toml") {
            Ok(_) => panic!("loaded: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_typo_in_a_closed_set_is_a_load_error() {
        let e = err("[[bus]]\nnames = [\"x\"]\nbus = \"sesion\"\nreason = \"r\"\n");
        assert!(e.contains("test.toml") && e.contains("sesion"), "{e}");
        assert!(e.contains("line 3"), "{e}");
        let e = err("[[desktop]]\nnames = [\"x\"]\ndesktop = \"wayladn\"\nreason = \"r\"\n");
        assert!(e.contains("wayladn"), "{e}");
        let e = err("[[settings_file]]\npath = \"~/.x\"\nformat = \"npmrcc\"\nreason = \"r\"\n");
        assert!(e.contains("npmrcc"), "{e}");
        let e = err("[[wrapper]]\nnames = [\"x\"]\nreason = \"r\"\nprivilge = true\n");
        assert!(e.contains("privilge"), "{e}");
    }

    #[test]
    fn an_entry_without_a_reason_or_a_known_reference_is_a_load_error() {
        let e = err("[[signal]]\nnames = [\"kill\"]\nreason = \" \"\n");
        assert!(e.contains("[[signal]]") && e.contains("no reason"), "{e}");
        let e = err("[[token_env]]\nnames = [\"T\"]\nregistry = \"npm\"\nreason = \"r\"\n");
        assert!(e.contains("setup of no [[registry]]"), "{e}");
        let e = err("[[token_env]]\nnames = [\"T\"]\nregistry = \"nmp\"\nreason = \"r\"\n");
        assert!(e.contains("nmp"), "{e}");
    }

    #[test]
    fn a_reference_to_a_command_that_is_not_there_is_a_load_error() {
        let e = err("[[module_runner]]\nnames = [\"python\"]\noption = \"-m\"\n\
                     registry_modules = [\"pipp\"]\nreason = \"r\"\n");
        assert!(
            e.contains("registry module pipp is no [[registry]] command"),
            "{e}"
        );
        let e = err("[[bus]]\nnames = [\"gdbus\"]\nbus = \"session\"\n\
                     filtered = [\"notify-send\"]\nreason = \"r\"\n");
        assert!(
            e.contains("filtered notify-send is not one of its names"),
            "{e}"
        );
        let k = Knowledge::get();
        assert!(k.module_runner("python3.12").is_some());
        assert!(k.module_runner("pythonista").is_none());
        assert_eq!(k.handler("mkfs.ext4"), Some(Handler::Format));
        assert_eq!(k.handler("git2"), None);
        // every handler the walker has is named by the embedded table
        for h in [
            Handler::Eval,
            Handler::Source,
            Handler::Trap,
            Handler::Git,
            Handler::Gh,
            Handler::Find,
            Handler::Xargs,
            Handler::Parallel,
            Handler::Dd,
            Handler::InPlace,
            Handler::Tar,
            Handler::Unzip,
            Handler::Crontab,
            Handler::Format,
            Handler::Ssh,
        ] {
            assert!(k.file.handler.iter().any(|e| e.handler == h), "{h:?}");
        }
    }

    #[test]
    fn a_missing_file_is_a_read_error_naming_the_path() {
        let e = Knowledge::load_file(Path::new("/nonexistent/efr/commands.toml"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.starts_with("cannot read the command knowledge /nonexistent/efr/commands.toml"),
            "{e}"
        );
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
