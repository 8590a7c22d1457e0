//! Credentials as config: the `[[credential]]` entries (and the built-in profiles of
//! `policy/defaults.toml`), each a secret, where it comes from, the hosts it is bound to and
//! how it is sent. A call uses one only with a `credential=NAME` grant; then it holds a
//! placeholder ([`placeholder`]) that the proxy swaps for the secret ([`resolve`]) on the
//! bound hosts only.
//!
//! Re-exported as `efr_policy::credential`. The TOML layer (`config/parse.rs`) reads an
//! entry's keys into a [`RawCredential`]; [`RawCredential::validate`] makes it a
//! [`CredentialSpec`] or says which key is wrong and why.

mod placeholder;
mod resolve;

use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;

pub use efr_sandbox_wire::grant_text::is_credential_name;
pub use placeholder::{PREFIXES, Prefix, placeholder};
pub use resolve::{ResolveError, Resolved, Secret, SecretCache, resolve};

use super::{Config, Env};

/// How long a `command` source's answer is kept when the entry does not say.
pub const DEFAULT_KEEP: Duration = Duration::from_secs(300);

/// A host a credential is bound to: an exact name or `*.suffix` (every name below it), and
/// a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundHost {
    /// The name, or `*.suffix`, lower case.
    pub pattern: String,
    /// 443 unless the entry names one.
    pub port: u16,
}

impl BoundHost {
    /// Whether `host` (lower case, no trailing dot) on `port` is this bound host.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        port == self.port
            && match self.pattern.strip_prefix("*.") {
                Some(suffix) => host
                    .strip_suffix(suffix)
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                None => host == self.pattern,
            }
    }
}

/// Where a credential's secret comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A variable of the service's environment.
    Env(String),
    /// A file (`~` is the home), and a pattern whose first group is the secret; without a
    /// pattern the whole file, trimmed.
    File {
        /// The file as the entry writes it (`~/...` or absolute).
        path: PathBuf,
        /// Multi-line (`^` and `$` match at each line); the first group is the secret, or
        /// the whole match when it has none.
        pattern: Option<Regex>,
    },
    /// A command the service runs on the host (10 s at most); the first line of its output,
    /// trimmed, kept `keep`.
    Command {
        /// The program (absolute, or a bare name looked up in `PATH`) and its arguments.
        argv: Vec<String>,
        /// How long its answer is kept.
        keep: Duration,
    },
}

impl PartialEq for Source {
    fn eq(&self, other: &Source) -> bool {
        match (self, other) {
            (Source::Env(a), Source::Env(b)) => a == b,
            (
                Source::File { path, pattern },
                Source::File {
                    path: p2,
                    pattern: r2,
                },
            ) => {
                path == p2 && pattern.as_ref().map(Regex::as_str) == r2.as_ref().map(Regex::as_str)
            }
            (Source::Command { argv, keep }, Source::Command { argv: a2, keep: k2 }) => {
                argv == a2 && keep == k2
            }
            _ => false,
        }
    }
}

/// How the secret is sent to its hosts (which header or parameter the proxy swaps in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendAs {
    /// `Authorization: Bearer SECRET`.
    Bearer,
    /// `Authorization: token SECRET`.
    Token,
    /// `Authorization: Basic base64(USER:SECRET)`.
    Basic {
        /// The user the call side writes beside the placeholder (git's credential helper).
        user: String,
    },
    /// The secret as the value of this header.
    Header(String),
    /// The secret as the value of this query parameter.
    Query(String),
}

/// One `[[credential]]` entry, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialSpec {
    /// Its name, as `credential=NAME` grants it.
    pub name: String,
    /// The hosts it is bound to: the only hosts its secret is sent to.
    pub hosts: Vec<BoundHost>,
    /// Where the secret comes from.
    pub source: Source,
    /// How it is sent.
    pub send: SendAs,
    /// The call's variable that holds the placeholder.
    pub placeholder_env: Option<String>,
    /// The call's git gets the placeholder from a credential helper for the bound hosts.
    pub git: bool,
    /// The reviewed reason of a built-in profile (or the user entry's own `reason`).
    pub reason: Option<String>,
}

impl CredentialSpec {
    /// Whether `host` on `port` is one of the credential's bound hosts.
    pub fn binds(&self, host: &str, port: u16) -> bool {
        self.hosts.iter().any(|h| h.matches(host, port))
    }

    /// The variable an `env` source reads, when it is one.
    pub fn env_var(&self) -> Option<&str> {
        match &self.source {
            Source::Env(v) => Some(v),
            _ => None,
        }
    }

    /// The source file, `~` expanded against `env`'s home, when the source is a file.
    pub fn file(&self, env: &Env) -> Option<PathBuf> {
        match &self.source {
            Source::File { path, .. } => Some(crate::path::expand_home_path(path, &env.home)),
            _ => None,
        }
    }
}

/// A `[[credential]]` entry as the TOML layer read it, each key as written (`None` when
/// absent); [`RawCredential::validate`] checks it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawCredential {
    /// `name`.
    pub name: Option<String>,
    /// `hosts`.
    pub hosts: Option<Vec<String>>,
    /// `env`.
    pub env: Option<String>,
    /// `file`.
    pub file: Option<String>,
    /// `pattern`.
    pub pattern: Option<String>,
    /// `command`.
    pub command: Option<Vec<String>>,
    /// `keep_seconds`.
    pub keep_seconds: Option<i64>,
    /// `send`.
    pub send: Option<String>,
    /// `user`.
    pub user: Option<String>,
    /// `placeholder_env`.
    pub placeholder_env: Option<String>,
    /// `git`.
    pub git: Option<bool>,
    /// `reason`.
    pub reason: Option<String>,
}

/// The keys of a `[[credential]]` entry.
pub const KEYS: [&str; 12] = [
    "name",
    "hosts",
    "env",
    "file",
    "pattern",
    "command",
    "keep_seconds",
    "send",
    "user",
    "placeholder_env",
    "git",
    "reason",
];

/// Why an entry is not a credential: the key at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The key at fault (`send`, `hosts`, ...), or empty for the entry as a whole.
    pub key: &'static str,
    /// What is wrong, naming the entry.
    pub message: String,
}

/// The longest `keep_seconds`: a day.
const MAX_KEEP_SECONDS: i64 = 86_400;

impl RawCredential {
    /// The entry checked: one source, a known `send`, `user` with basic only, host names
    /// with optional ports, an absolute path or a bare name for a command.
    pub fn validate(self) -> Result<CredentialSpec, SpecError> {
        let err = |key: &'static str, message: String| SpecError { key, message };
        let name = self
            .name
            .ok_or_else(|| err("", "a credential needs a name".into()))?;
        if !is_credential_name(&name) {
            return Err(err(
                "name",
                format!("{name:?}: not a credential name (1 to 64 of A-Z a-z 0-9 _ . -)"),
            ));
        }
        let at = |key: &'static str, what: String| err(key, format!("credential {name}: {what}"));
        let hosts = self
            .hosts
            .filter(|h| !h.is_empty())
            .ok_or_else(|| at("hosts", "needs the hosts it is bound to".into()))?
            .iter()
            .map(|h| parse_bound_host(h).map_err(|m| at("hosts", m)))
            .collect::<Result<Vec<_>, _>>()?;
        let source = source(&self.env, &self.file, &self.command).map_err(|(k, m)| at(k, m))?;
        let source = match source {
            Which::Env(v) => {
                check_var(v).map_err(|m| at("env", m))?;
                Source::Env(v.clone())
            }
            Which::File(f) => Source::File {
                path: check_file(f).map_err(|m| at("file", m))?,
                pattern: self
                    .pattern
                    .as_deref()
                    .map(compile_pattern)
                    .transpose()
                    .map_err(|m| at("pattern", m))?,
            },
            Which::Command(argv) => Source::Command {
                argv: check_command(argv).map_err(|m| at("command", m))?,
                keep: keep(self.keep_seconds).map_err(|m| at("keep_seconds", m))?,
            },
        };
        if self.pattern.is_some() && !matches!(source, Source::File { .. }) {
            return Err(at("pattern", "a pattern goes with a file source".into()));
        }
        if self.keep_seconds.is_some() && !matches!(source, Source::Command { .. }) {
            return Err(at(
                "keep_seconds",
                "keep_seconds goes with a command source".into(),
            ));
        }
        let send = self.send.as_deref().ok_or_else(|| {
            at(
                "send",
                "needs send (bearer, token, basic, header:NAME or query:NAME)".into(),
            )
        })?;
        let send = parse_send(send, self.user.as_deref()).map_err(|(k, m)| at(k, m))?;
        if let Some(v) = &self.placeholder_env {
            check_var(v).map_err(|m| at("placeholder_env", m))?;
        }
        Ok(CredentialSpec {
            name,
            hosts,
            source,
            send,
            placeholder_env: self.placeholder_env,
            git: self.git.unwrap_or(false),
            reason: self.reason.filter(|r| !r.trim().is_empty()),
        })
    }
}

enum Which<'a> {
    Env(&'a String),
    File(&'a String),
    Command(&'a Vec<String>),
}

/// The one source of `env`, `file`, `command`.
fn source<'a>(
    env: &'a Option<String>,
    file: &'a Option<String>,
    command: &'a Option<Vec<String>>,
) -> Result<Which<'a>, (&'static str, String)> {
    match (env, file, command) {
        (Some(v), None, None) => Ok(Which::Env(v)),
        (None, Some(f), None) => Ok(Which::File(f)),
        (None, None, Some(c)) => Ok(Which::Command(c)),
        (None, None, None) => Err((
            "",
            "needs one source of its secret: env, file or command".into(),
        )),
        _ => {
            let named: Vec<&str> = [
                env.as_ref().map(|_| "env"),
                file.as_ref().map(|_| "file"),
                command.as_ref().map(|_| "command"),
            ]
            .into_iter()
            .flatten()
            .collect();
            Err((
                if command.is_some() { "command" } else { "file" },
                format!(
                    "has {} sources ({}); give one of env, file or command",
                    named.len(),
                    named.join(" and ")
                ),
            ))
        }
    }
}

/// `NAME[:PORT]` of `hosts`: a host name (or `*.suffix`) as the config's other host lists
/// take it, and a port (443 when absent).
pub fn parse_bound_host(s: &str) -> Result<BoundHost, String> {
    let (name, port) = match s.rsplit_once(':') {
        Some((n, p)) => {
            let port = p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("{s}: {p:?} is not a port (1 to 65535)"))?;
            (n, port)
        }
        None => (s, 443),
    };
    if name == "*" || name.starts_with("*.") && name.matches('.').count() < 2 {
        return Err(format!(
            "{s}: *.suffix needs a suffix of two labels or more (such as *.example.com)"
        ));
    }
    super::rules::check_host(name)?;
    Ok(BoundHost {
        pattern: name.to_string(),
        port,
    })
}

/// `send` (and `user`, which only basic takes and basic needs).
fn parse_send(send: &str, user: Option<&str>) -> Result<SendAs, (&'static str, String)> {
    let out = match send {
        "bearer" => SendAs::Bearer,
        "token" => SendAs::Token,
        "basic" => match user {
            Some(u) if !u.is_empty() && !u.contains(':') && !u.contains(char::is_control) => {
                SendAs::Basic {
                    user: u.to_string(),
                }
            }
            Some(u) => {
                return Err((
                    "user",
                    format!("{u:?}: a basic user is not empty and holds no colon"),
                ));
            }
            None => return Err(("user", "send = \"basic\" needs user".into())),
        },
        _ => {
            if let Some(h) = send.strip_prefix("header:") {
                if h.is_empty() || !h.bytes().all(is_tchar) {
                    return Err(("send", format!("{send}: {h:?} is not a header name")));
                }
                SendAs::Header(h.to_string())
            } else if let Some(q) = send.strip_prefix("query:") {
                if q.is_empty()
                    || !q.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'~')
                    })
                {
                    return Err((
                        "send",
                        format!("{send}: {q:?} is not a query parameter name"),
                    ));
                }
                SendAs::Query(q.to_string())
            } else {
                return Err((
                    "send",
                    format!(
                        "{send:?}: not a way to send (bearer, token, basic, header:NAME or \
                         query:NAME)"
                    ),
                ));
            }
        }
    };
    if user.is_some() && !matches!(out, SendAs::Basic { .. }) {
        return Err(("user", "user goes with send = \"basic\"".into()));
    }
    Ok(out)
}

/// A character of an HTTP header name (RFC 9110's `tchar`).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A variable's name: `[A-Za-z_][A-Za-z0-9_]*`.
fn check_var(v: &str) -> Result<(), String> {
    let ok = v
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!("{v:?}: not a variable name"))
    }
}

/// A source file: absolute or `~/...`.
fn check_file(f: &str) -> Result<PathBuf, String> {
    if f.starts_with('/') || f.starts_with("~/") {
        Ok(PathBuf::from(f))
    } else {
        Err(format!("{f:?}: a source file is absolute or ~/..."))
    }
}

/// The largest pattern, so that a config cannot make the service compile a huge automaton.
const MAX_PATTERN_BYTES: usize = 1 << 20;

fn compile_pattern(p: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(p)
        .multi_line(true)
        .size_limit(MAX_PATTERN_BYTES)
        .build()
        .map_err(|e| format!("{p:?}: not a regular expression: {e}"))
}

/// A command's words: at least one, the program absolute or a bare name.
fn check_command(argv: &[String]) -> Result<Vec<String>, String> {
    let Some(prog) = argv.first() else {
        return Err("a command needs at least its program".into());
    };
    if prog.is_empty() || (prog.contains('/') && !prog.starts_with('/')) {
        return Err(format!(
            "{prog:?}: the program is an absolute path or a bare name looked up in PATH"
        ));
    }
    if argv.iter().any(|w| w.contains('\0')) {
        return Err("a command word holds a NUL".into());
    }
    Ok(argv.to_vec())
}

fn keep(seconds: Option<i64>) -> Result<Duration, String> {
    match seconds {
        None => Ok(DEFAULT_KEEP),
        Some(s) if (0..=MAX_KEEP_SECONDS).contains(&s) => Ok(Duration::from_secs(s.unsigned_abs())),
        Some(s) => Err(format!("{s}: keep_seconds is 0 to {MAX_KEEP_SECONDS}")),
    }
}

impl Config {
    /// The credentials: the user's entries and the built-in profiles (a user entry of a
    /// profile's name replaces it).
    pub fn credentials(&self) -> &[CredentialSpec] {
        &self.credentials
    }

    /// The credential named `name`.
    pub fn credential(&self, name: &str) -> Option<&CredentialSpec> {
        self.credentials.iter().find(|c| c.name == name)
    }
}

/// The source files of every configured credential, `~` expanded: the user's entries
/// whether or not the file exists (a file made later is masked too), the built-in
/// profiles' only where the file exists (a profile the user does not use adds no mask).
/// Masked in every call, granted or not: the call holds a placeholder copy at most.
pub fn source_files(config: &Config, env: &Env) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for (c, src) in config.credentials.iter().zip(&config.credential_sources) {
        let Some(f) = c.file(env) else { continue };
        let user = !matches!(src, super::Source::Default);
        if (user || std::fs::symlink_metadata(&f).is_ok()) && !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

/// Adds the source file of every credential of the user's file to `sandbox.masks` (as the
/// entry writes it, unless a mask of that text is there already), with the credential as
/// its reason: the one place the masks of every call are computed from (the launch view,
/// `explain`, the classifier and the token hosts all read `sandbox.masks`), so the file is
/// masked in every call, granted or not. The built-in profiles' files are masks of the
/// defaults already (a test keeps them so), which the user's `masks_remove` may take out on
/// purpose (the call then reads the token, and its hosts are token hosts). Called after each
/// layer of the config is applied.
pub(crate) fn mask_source_files(config: &mut Config) {
    for (c, src) in config.credentials.iter().zip(&config.credential_sources) {
        let Source::File { path, .. } = &c.source else {
            continue;
        };
        if matches!(src, super::Source::Default) {
            continue;
        }
        let value = path.to_string_lossy().into_owned();
        if config.sandbox.masks.iter().any(|e| e.value == value) {
            continue;
        }
        config.sandbox.masks.push(super::Entry {
            value,
            reason: format!(
                "the source file of credential {} (a call granted it sees a copy with a \
                 placeholder)",
                c.name
            ),
            source: src.clone(),
            merge: None,
        });
    }
}

/// What a grant of credentials turns into placeholders in a call: the `(variable, file)` of
/// each named credential (its `env` source or `placeholder_env`, and its source file), which
/// the visible-token rule leaves out (the call holds only a placeholder of them).
pub fn placeholder_sources<'a>(
    config: &'a Config,
    env: &Env,
    granted: impl IntoIterator<Item = &'a str>,
) -> (Vec<String>, Vec<PathBuf>) {
    let mut vars = Vec::new();
    let mut files = Vec::new();
    for name in granted {
        let Some(c) = config.credential(name) else {
            continue;
        };
        for v in [c.env_var(), c.placeholder_env.as_deref()]
            .into_iter()
            .flatten()
        {
            if !vars.iter().any(|x| x == v) {
                vars.push(v.to_string());
            }
        }
        if let Some(f) = c.file(env) {
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    (vars, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str) -> RawCredential {
        RawCredential {
            name: Some(name.into()),
            hosts: Some(vec!["git.example.com".into(), "*.example.com:8443".into()]),
            env: Some("FORGE_TOKEN".into()),
            send: Some("bearer".into()),
            ..RawCredential::default()
        }
    }

    #[test]
    fn a_good_entry_reads() {
        let c = raw("forge").validate().unwrap();
        assert_eq!(
            c.hosts,
            vec![
                BoundHost {
                    pattern: "git.example.com".into(),
                    port: 443
                },
                BoundHost {
                    pattern: "*.example.com".into(),
                    port: 8443
                }
            ]
        );
        assert!(c.binds("git.example.com", 443));
        assert!(!c.binds("git.example.com", 80));
        assert!(c.binds("git.example.com", 8443), "also below *.example.com");
        assert!(c.binds("a.b.example.com", 8443));
        assert!(!c.binds("example.com", 8443));
        assert!(!c.binds("evilexample.com", 8443));
        assert_eq!(c.source, Source::Env("FORGE_TOKEN".into()));
    }

    #[test]
    fn bad_entries_say_which_key() {
        let e = |f: &dyn Fn(&mut RawCredential)| {
            let mut r = raw("forge");
            f(&mut r);
            r.validate().unwrap_err()
        };
        let two = e(&|r| r.file = Some("~/.t".into()));
        assert_eq!(two.key, "file");
        assert!(
            two.message.starts_with("credential forge: has 2 sources"),
            "{two:?}"
        );
        let none = e(&|r| r.env = None);
        assert!(none.message.contains("needs one source"), "{none:?}");
        assert_eq!(e(&|r| r.send = Some("digest".into())).key, "send");
        assert_eq!(e(&|r| r.send = Some("header:a b".into())).key, "send");
        let basic = e(&|r| r.send = Some("basic".into()));
        assert_eq!(
            (basic.key, basic.message.as_str()),
            ("user", "credential forge: send = \"basic\" needs user")
        );
        assert_eq!(e(&|r| r.user = Some("u".into())).key, "user");
        for h in [
            "Git.Example.com",
            "a b",
            "*",
            "*.com",
            "x.com:0",
            "x.com:http",
            "1.2.3.4:99999",
        ] {
            let got = e(&|r| r.hosts = Some(vec![h.into()]));
            assert_eq!(got.key, "hosts", "{h}");
            assert!(got.message.contains(h), "{h}: {got:?}");
        }
        assert_eq!(e(&|r| r.hosts = Some(vec![])).key, "hosts");
        for c in [
            vec![],
            vec!["bin/gh".to_string()],
            vec!["./gh".into()],
            vec![String::new()],
        ] {
            let got = e(&|r| {
                r.env = None;
                r.command = Some(c.clone());
            });
            assert_eq!(got.key, "command", "{c:?}");
        }
        assert_eq!(e(&|r| r.pattern = Some("(x)".into())).key, "pattern");
        assert_eq!(e(&|r| r.keep_seconds = Some(3)).key, "keep_seconds");
        assert_eq!(e(&|r| r.env = Some("A-B".into())).key, "env");
        assert_eq!(
            e(&|r| r.placeholder_env = Some("1X".into())).key,
            "placeholder_env"
        );
        let bad_re = e(&|r| {
            r.env = None;
            r.file = Some("~/.t".into());
            r.pattern = Some("(".into());
        });
        assert_eq!(bad_re.key, "pattern");
        assert_eq!(
            e(&|r| {
                r.env = None;
                r.file = Some("rel/t".into());
            })
            .key,
            "file"
        );
        assert_eq!(e(&|r| r.name = Some("a b".into())).key, "name");
        assert_eq!(e(&|r| r.name = None).key, "");
    }

    #[test]
    fn a_command_is_absolute_or_a_bare_name_and_keeps_300_s() {
        let mut r = raw("gh");
        r.env = None;
        r.command = Some(vec!["gh".into(), "auth".into(), "token".into()]);
        let c = r.clone().validate().unwrap();
        assert_eq!(
            c.source,
            Source::Command {
                argv: vec!["gh".into(), "auth".into(), "token".into()],
                keep: Duration::from_secs(300)
            }
        );
        r.command = Some(vec!["/usr/bin/gh".into()]);
        r.keep_seconds = Some(5);
        assert!(matches!(
            r.validate().unwrap().source,
            Source::Command { keep, .. } if keep == Duration::from_secs(5)
        ));
    }
}
