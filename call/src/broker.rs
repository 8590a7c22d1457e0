//! The credential broker in a call: what a call holding a `credential=NAME` grant gets
//! besides its proxy's broker. The proxy swaps a credential's placeholder for the real
//! secret on the credential's bound hosts only (`efr_proxy::broker`); this module puts the
//! placeholder where the call's tools look for the secret, and the broker's CA where they
//! look for their roots:
//!
//! - the CA in the call's trust: a bundle of the host's system roots and the CA, bound
//!   read-only over the host's system bundles and at `/dev/efr/ca-bundle.pem`, the CA alone
//!   at `/dev/efr/ca.pem`, and the variables tools read ([`TRUST_VARIABLES`]);
//! - the placeholder in the call's environment (`placeholder_env`), in a scrubbed copy of
//!   the secret's source file ([`placeholder_copy`]), and as the answer of a git credential
//!   helper for the bound hosts ([`git_config_text`]).
//!
//! The real secret is in none of them: it lives in the service's proxy alone.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use efr_launcher::plan::{INSIDE_CA, INSIDE_CA_BUNDLE, INSIDE_GIT_CONFIG, Plan, TrustPlan};
use efr_policy::config::{Config, Env};
use efr_policy::credential::{
    CredentialSpec, Resolved, SecretCache, SendAs, Source, placeholder, resolve,
};
use efr_proxy::broker::{Broker, BrokerCredential, Ca, Send};
use efr_sandbox_wire::Grant;

/// Which trust file a variable names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustFile {
    /// The host's system roots and the broker's CA: for a tool that replaces its roots
    /// with the file.
    Bundle,
    /// The broker's CA alone: for a tool that adds the file to its own roots.
    Ca,
}

/// A variable a tool reads its roots from, set in a call that holds a credential.
#[derive(Debug, Clone, Copy)]
pub struct TrustVariable {
    /// The variable.
    pub name: &'static str,
    /// The file it names.
    pub file: TrustFile,
    /// Who reads it, and why it names that file.
    pub reason: &'static str,
}

/// The variables a call holding a credential gets (the reviewed table). The proxy of such
/// a call terminates TLS for every host it reaches, so every tool of the call must trust
/// the broker's CA, not only the one that sends the credential. A tool that reads neither
/// a variable nor the system bundle (a Java keystore, a program with built-in roots such as
/// webpki-roots) fails its handshake with an unknown issuer: docs/broker.md lists them.
pub const TRUST_VARIABLES: &[TrustVariable] = &[
    TrustVariable {
        name: "SSL_CERT_FILE",
        file: TrustFile::Bundle,
        reason: "OpenSSL's default file (Python's ssl, Ruby, PHP), Go's crypto/x509, \
                 rustls-native-certs (cargo's and uv's Rust clients): replaces the roots",
    },
    TrustVariable {
        name: "NODE_EXTRA_CA_CERTS",
        file: TrustFile::Ca,
        reason: "node (npm, npx, yarn, pnpm) adds it to its built-in roots; the CA alone, \
                 as the system roots are node's own already",
    },
    TrustVariable {
        name: "REQUESTS_CA_BUNDLE",
        file: TrustFile::Bundle,
        reason: "Python's requests (twine, most API clients) uses certifi's roots unless \
                 told: replaces them",
    },
    TrustVariable {
        name: "CURL_CA_BUNDLE",
        file: TrustFile::Bundle,
        reason: "curl's tool (and libcurl users that honour it) with a CA file compiled in \
                 elsewhere than the bound system bundle",
    },
    TrustVariable {
        name: "GIT_SSL_CAINFO",
        file: TrustFile::Bundle,
        reason: "git over HTTPS (http.sslCAInfo): a git built with its own CA path",
    },
    TrustVariable {
        name: "CARGO_HTTP_CAINFO",
        file: TrustFile::Bundle,
        reason: "cargo's HTTP client (http.cainfo): its bundled libcurl's CA path is not \
                 always the system's",
    },
    TrustVariable {
        name: "PIP_CERT",
        file: TrustFile::Bundle,
        reason: "pip verifies with its vendored certifi roots unless told (--cert)",
    },
    TrustVariable {
        name: "AWS_CA_BUNDLE",
        file: TrustFile::Bundle,
        reason: "the AWS CLI and SDKs (botocore) use certifi's roots: a call that reaches \
                 an allowed AWS host through the broker's terminating proxy needs the CA \
                 (its SigV4 credentials are never brokered: a signature cannot be swapped)",
    },
    TrustVariable {
        name: "NIX_SSL_CERT_FILE",
        file: TrustFile::Bundle,
        reason: "programs of Nix read it before SSL_CERT_FILE",
    },
    TrustVariable {
        name: "HTTPLIB2_CA_CERTS",
        file: TrustFile::Bundle,
        reason: "Python's httplib2 (Google API clients) uses its own roots unless told",
    },
    TrustVariable {
        name: "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
        file: TrustFile::Bundle,
        reason: "gRPC's C core (Python, Ruby, PHP clients) reads its roots from it",
    },
    TrustVariable {
        name: "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
        file: TrustFile::Bundle,
        reason: "the gcloud CLI verifies with its bundled roots unless told",
    },
];

/// The host's system CA bundles a call's tools may read by compiled-in path (the reviewed
/// table): the broker's bundle is bound over each that exists as a file, and the first
/// that exists is the bundle's system half.
pub const SYSTEM_BUNDLES: &[(&str, &str)] = &[
    (
        "/etc/ssl/certs/ca-certificates.crt",
        "Debian, Ubuntu, Arch, Gentoo: update-ca-certificates' bundle",
    ),
    (
        "/etc/pki/tls/certs/ca-bundle.crt",
        "Fedora, RHEL, CentOS: the ca-certificates bundle",
    ),
    (
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
        "Fedora, RHEL: update-ca-trust's extracted bundle",
    ),
    (
        "/etc/ssl/ca-bundle.pem",
        "openSUSE: the ca-certificates bundle",
    ),
    (
        "/etc/ssl/cert.pem",
        "Alpine, macOS-like layouts, LibreSSL's default; a link to one above elsewhere",
    ),
];

/// The trust files' names in the call's private directory.
const BUNDLE_FILE: &str = "ca-bundle.pem";
const CA_FILE: &str = "ca.pem";
const GIT_CONFIG_FILE: &str = "gitconfig";

/// Why the call's trust files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A system bundle could not be read.
    #[error("reading the system CA bundle {}: {source}", path.display())]
    Read {
        /// The bundle.
        path: PathBuf,
        /// What the read said.
        source: std::io::Error,
    },
    /// A trust file could not be written.
    #[error("writing the call's CA file {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the write said.
        source: std::io::Error,
    },
}

/// The system bundles of `candidates` that exist, each once (a link to another is bound
/// at its target, once): their paths as the host resolves them.
fn existing_bundles(candidates: &[&str]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for c in candidates {
        let Ok(real) = std::fs::canonicalize(c) else {
            continue;
        };
        if real.is_file() && !out.contains(&real) {
            out.push(real);
        }
    }
    out
}

/// Writes the call's trust files into `dir` (the call's private directory, 0700): the
/// first existing system bundle followed by `ca_pem`, and `ca_pem` alone, both 0444. The
/// plan's [`TrustPlan`] binds them.
pub fn write_trust(
    dir: &Path,
    ca_pem: &str,
    git_config: Option<&str>,
) -> Result<TrustPlan, TrustError> {
    let candidates: Vec<&str> = SYSTEM_BUNDLES.iter().map(|(p, _)| *p).collect();
    let mut t = write_trust_from(dir, ca_pem, &existing_bundles(&candidates))?;
    if let Some(text) = git_config {
        t.git_config = Some(write_read_only(dir, GIT_CONFIG_FILE, text)?);
    }
    Ok(t)
}

/// Writes `text` as `dir/name`, 0444; its path.
fn write_read_only(dir: &Path, name: &str, text: &str) -> Result<String, TrustError> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let err = |source| TrustError::Write {
        path: path.clone(),
        source,
    };
    std::fs::write(&path, text).map_err(err)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).map_err(err)?;
    Ok(path.to_string_lossy().into_owned())
}

/// [`write_trust`] with the system bundles given.
fn write_trust_from(dir: &Path, ca_pem: &str, system: &[PathBuf]) -> Result<TrustPlan, TrustError> {
    let mut bundle = match system.first() {
        Some(p) => std::fs::read_to_string(p).map_err(|source| TrustError::Read {
            path: p.clone(),
            source,
        })?,
        None => String::new(),
    };
    if !bundle.is_empty() && !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    bundle.push_str("# efr sandbox: the credential broker's CA\n");
    bundle.push_str(ca_pem);
    Ok(TrustPlan {
        bundle: write_read_only(dir, BUNDLE_FILE, &bundle)?,
        ca: write_read_only(dir, CA_FILE, ca_pem)?,
        system: system
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
        git_config: None,
    })
}

/// The variables of [`TRUST_VARIABLES`] with the paths the call sees them at, and
/// `GIT_CONFIG_SYSTEM` naming the helpers' git config when the trust has one.
pub fn trust_env(t: &TrustPlan) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = TRUST_VARIABLES
        .iter()
        .map(|v| {
            let path = match v.file {
                TrustFile::Bundle => INSIDE_CA_BUNDLE,
                TrustFile::Ca => INSIDE_CA,
            };
            (v.name.to_string(), path.to_string())
        })
        .collect();
    if t.git_config.is_some() {
        v.push(("GIT_CONFIG_SYSTEM".into(), INSIDE_GIT_CONFIG.into()));
        v.push(("GIT_CONFIG_NOSYSTEM".into(), "0".into()));
    }
    v
}

/// The copy of a credential's source file the call reads: `original` with the secret's
/// `span` replaced by `placeholder`. When the file has a scrubbed copy already (a settings
/// file that holds other tokens, such as `~/.npmrc`: `scrubbed`), every other line is the
/// scrubbed copy's, so that the call sees no other secret of the file; that needs the
/// copy line for line (the line-based scrubbers keep the line count). A copy that is not
/// (a TOML file written anew) is taken only for the lines that read the same in both, and
/// a line of the original that is not in it is left out.
pub fn placeholder_copy(
    original: &str,
    span: Range<usize>,
    placeholder: &str,
    scrubbed: Option<&str>,
) -> Option<String> {
    if span.end > original.len()
        || !original.is_char_boundary(span.start)
        || !original.is_char_boundary(span.end)
    {
        return None;
    }
    let swapped = format!(
        "{}{placeholder}{}",
        &original[..span.start],
        &original[span.end..]
    );
    let Some(scrubbed) = scrubbed else {
        return Some(swapped);
    };
    // The lines of the original that hold the span, by number.
    let first = original[..span.start].matches('\n').count();
    let last = first + original[span.clone()].matches('\n').count();
    let orig_lines: Vec<&str> = original.split_inclusive('\n').collect();
    let swapped_lines: Vec<&str> = swapped.split_inclusive('\n').collect();
    let scrub_lines: Vec<&str> = scrubbed.split_inclusive('\n').collect();
    let aligned = scrub_lines.len() == orig_lines.len();
    let mut out = String::new();
    for (i, line) in orig_lines.iter().enumerate() {
        if i == first {
            // The span's lines, with the placeholder in place (one line of the swapped
            // text for every line of the original the span covered).
            for l in swapped_lines.iter().skip(first).take(1) {
                out.push_str(l);
            }
            continue;
        }
        if i > first && i <= last {
            continue;
        }
        if aligned {
            out.push_str(scrub_lines[i]);
        } else if scrub_lines.contains(line) {
            out.push_str(line);
        }
    }
    if !out.ends_with('\n') && original.ends_with('\n') {
        out.push('\n');
    }
    Some(out)
}

/// The shell snippet git runs as the credential helper of a bound host: it answers `get`
/// with the user and the placeholder, and nothing else (a `store` or `erase` is ignored).
/// Git runs a helper that starts with `!` with the shell, the action appended.
fn helper_snippet(user: &str, placeholder: &str) -> String {
    format!(
        "!f() {{ test \"$1\" = get || return 0; printf 'username=%s\\npassword=%s\\n' {} {}; }}; f",
        shell_quote(user),
        shell_quote(placeholder)
    )
}

/// `s` single-quoted for the shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The URL git matches a bound host's credential config with: `https://HOST[:PORT]`
/// (`*.suffix` is git's own one-label wildcard of URL matching).
fn git_url(pattern: &str, port: u16) -> String {
    if port == 443 {
        format!("https://{pattern}")
    } else {
        format!("https://{pattern}:{port}")
    }
}

/// `v` as a quoted value of a git config file.
fn git_quote(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

/// One credential git asks for: its bound hosts, the user and the placeholder it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitHelper {
    /// The bound hosts (pattern, port).
    pub hosts: Vec<(String, u16)>,
    /// The user git sends.
    pub user: String,
    /// The placeholder it sends as the password.
    pub placeholder: String,
}

/// The system git config of a call whose credentials have `git = true`, which its
/// `GIT_CONFIG_SYSTEM` names: the host's system configs included first (`include` of a
/// missing file is nothing to git), then for each bound host `credential.URL.helper`
/// emptied (no helper of the system config answers there; the user's global config is
/// read after this one, and a store or cache of theirs answers from a masked file or a
/// hidden socket: nothing), the helper (`helper_snippet`), and `credential.URL.username`. A
/// `GIT_CONFIG_SET` of the call is not used: the launcher judges that set as a whole and
/// refuses a helper that names a program (rightly, for the sets agents pass in).
pub fn git_config_text(system: &[&str], helpers: &[GitHelper]) -> String {
    let mut out =
        String::from("# efr sandbox: the credential broker's helpers (placeholders only)\n");
    for s in system {
        out.push_str(&format!("[include]\n\tpath = {}\n", git_quote(s)));
    }
    for h in helpers {
        for (pattern, port) in &h.hosts {
            out.push_str(&format!(
                "[credential {}]\n\thelper =\n\thelper = {}\n\tusername = {}\n",
                git_quote(&git_url(pattern, *port)),
                git_quote(&helper_snippet(&h.user, &h.placeholder)),
                git_quote(&h.user)
            ));
        }
    }
    out
}

/// The system git configs a call's git reads without `GIT_CONFIG_SYSTEM`: the one its
/// environment names, else `/etc/gitconfig` and a `/usr/local` build's; none when the call
/// has `GIT_CONFIG_NOSYSTEM` (it reads no system config).
pub fn git_system_configs(call_env: &[(String, String)]) -> Vec<String> {
    let get = |k: &str| {
        call_env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    if get("GIT_CONFIG_NOSYSTEM").is_some_and(|v| !v.is_empty() && v != "0" && v != "false") {
        return Vec::new();
    }
    match get("GIT_CONFIG_SYSTEM") {
        Some(p) if !p.is_empty() => vec![p.to_string()],
        _ => vec!["/etc/gitconfig".into(), "/usr/local/etc/gitconfig".into()],
    }
}

/// Sets `vars` in the plan's `env_set`, each replacing an entry of the same name.
pub fn set_env(plan: &mut Plan, vars: Vec<(String, String)>) {
    for (name, value) in vars {
        plan.env_set.retain(|e| e.name != name);
        plan.env_set
            .push(efr_launcher::plan::EnvVar { name, value });
    }
}

/// The names of the credentials a plan's grants hold, each once.
pub fn granted_names(plan: &Plan) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for g in &plan.grants {
        if let Grant::Credential { name } = g {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// Why a call's credentials could not be made ready: the call does not start, and its
/// setup error names the credential and what failed.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// A grant names a credential no config entry or built-in profile defines.
    #[error(
        "credential {0}: no [[credential]] of that name in the config, nor a built-in profile \
         (`efr-sandbox config` lists them)"
    )]
    Unknown(String),
    /// The call has no proxy to swap the placeholder in (open_network, net_view,
    /// unsandboxed).
    #[error(
        "credential {0}: a credential grant needs the call's own network and proxy (the \
         placeholder is swapped there); open_network, net_view and an unsandboxed call have none"
    )]
    NoProxy(String),
    /// The secret could not be had from its source (the error names the credential and
    /// the source).
    #[error(transparent)]
    Resolve(#[from] efr_policy::credential::ResolveError),
    /// The secret's source file could not be read again for its placeholder copy.
    #[error("credential {name}: reading {} for its placeholder copy: {source}", path.display())]
    File {
        /// The credential.
        name: String,
        /// The source file.
        path: PathBuf,
        /// What the read said.
        source: std::io::Error,
    },
    /// The broker's CA could not be loaded or made.
    #[error("the credential broker's CA: {0}")]
    Ca(#[source] efr_proxy::broker::CaError),
    /// The broker refused its credentials or roots.
    #[error("the credential broker: {0}")]
    Broker(#[source] efr_proxy::broker::BrokerError),
    /// The call's trust files could not be written.
    #[error(transparent)]
    Trust(#[from] TrustError),
}

/// The service's answers of the credentials' commands (`gh auth token`), kept
/// `keep_seconds`: one cache for the process.
fn cache() -> &'static SecretCache {
    static CACHE: std::sync::OnceLock<SecretCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(SecretCache::default)
}

/// The broker's CA of the state dir `dir` (`$XDG_STATE_HOME/efr-sandbox`), loaded or made
/// once per process and state dir, shared by every call.
fn ca(dir: &Path) -> Result<Arc<Ca>, CredentialError> {
    static CAS: Mutex<Vec<(PathBuf, Arc<Ca>)>> = Mutex::new(Vec::new());
    let mut cas = CAS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = cas.iter().find(|(d, _)| d == dir) {
        return Ok(c.clone());
    }
    let c = Arc::new(Ca::load_or_create(dir).map_err(CredentialError::Ca)?);
    cas.push((dir.to_path_buf(), c.clone()));
    Ok(c)
}

/// How the proxy sends the secret.
fn send_of(s: &SendAs) -> Send {
    match s {
        SendAs::Bearer => Send::Bearer,
        SendAs::Token => Send::Token,
        SendAs::Basic { user } => Send::Basic { user: user.clone() },
        SendAs::Header(h) => Send::Header(h.clone()),
        SendAs::Query(q) => Send::Query(q.clone()),
    }
}

/// The user git sends with the placeholder: the credential's Basic user, else the
/// forges' own token user.
fn git_user(s: &SendAs) -> &str {
    match s {
        SendAs::Basic { user } => user,
        _ => "x-access-token",
    }
}

/// The credentials of a call, made ready: its proxy's broker, its bound hosts (allowed to
/// the call: the grant implies their host grants) and the variables that hold a
/// placeholder only.
pub struct Granted {
    /// The broker of the call's proxy.
    pub broker: Arc<Broker>,
    /// The CA the call trusts.
    pub ca: Arc<Ca>,
    /// Every credential's bound hosts: (pattern, port).
    pub hosts: Vec<(String, u16)>,
    /// The call's variables that hold a placeholder, not a token it can read.
    pub placeholder_vars: Vec<String>,
    /// The placeholders (a variable holding one holds no token).
    pub placeholders: Vec<String>,
    /// The git config of the credentials with `git = true` ([`git_config_text`]).
    pub git_config: Option<String>,
}

impl std::fmt::Debug for Granted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted")
            .field("hosts", &self.hosts)
            .field("placeholder_vars", &self.placeholder_vars)
            .finish_non_exhaustive()
    }
}

/// Makes the credentials `plan`'s grants name ready for its proxy: each resolved (its
/// secret from its source, the service's cache of command answers), a placeholder made
/// for this call, put where the call's tools look (`place`); the broker built with the
/// CA and the config's `[proxy] extra_roots`. `None` for a plan with no credential grant.
pub fn prepare(
    plan: &mut Plan,
    config: &Config,
    env: &Env,
    has_proxy: bool,
) -> Result<Option<Granted>, CredentialError> {
    let names = granted_names(plan);
    let Some(first) = names.first() else {
        return Ok(None);
    };
    if !has_proxy {
        return Err(CredentialError::NoProxy(first.clone()));
    }
    let call_env = crate::egress::call_env(plan);
    let mut creds = Vec::new();
    let mut hosts: Vec<(String, u16)> = Vec::new();
    let mut placeholder_vars = Vec::new();
    let mut placeholders = Vec::new();
    let mut git = Vec::new();
    for name in &names {
        let spec = config
            .credentials()
            .iter()
            .find(|c| &c.name == name)
            .ok_or_else(|| CredentialError::Unknown(name.clone()))?;
        let resolved = resolve(spec, env, cache())?;
        let ph = placeholder(resolved.secret.expose());
        place(plan, spec, &resolved, &ph)?;
        placeholder_vars.extend(spec.placeholder_env.iter().cloned());
        let bound: Vec<(String, u16)> = spec
            .hosts
            .iter()
            .map(|h| (h.pattern.clone(), h.port))
            .collect();
        for h in &bound {
            if !hosts.contains(h) {
                hosts.push(h.clone());
            }
        }
        placeholders.push(ph.clone());
        if spec.git {
            git.push(GitHelper {
                hosts: bound.clone(),
                user: git_user(&spec.send).to_string(),
                placeholder: ph.clone(),
            });
        }
        creds.push(BrokerCredential {
            name: name.clone(),
            hosts: bound,
            secret: resolved.secret.expose().to_string(),
            placeholder: ph,
            send: send_of(&spec.send),
        });
    }
    let ca = ca(&efr_policy::control::state_home(env).join("efr-sandbox"))?;
    let roots: Vec<PathBuf> = config
        .proxy
        .extra_roots
        .iter()
        .map(|r| efr_policy::path::expand_home(&r.value, &env.home))
        .collect();
    let broker = Broker::new(ca.clone(), &roots, creds).map_err(CredentialError::Broker)?;
    Ok(Some(Granted {
        broker: Arc::new(broker),
        ca,
        hosts,
        placeholder_vars,
        placeholders,
        git_config: (!git.is_empty()).then(|| {
            let system = git_system_configs(&call_env);
            let system: Vec<&str> = system.iter().map(String::as_str).collect();
            git_config_text(&system, &git)
        }),
    }))
}

/// `p` for a call holding credentials (`g`): the credentials' bound hosts allowed (the grant
/// implies their host grants; the port named unless 443) and the broker set, so the proxy
/// terminates the call's TLS and swaps each placeholder on its hosts only.
pub fn with_broker(p: &mut efr_proxy::ProxyPolicy, g: &Granted) {
    for (pattern, port) in &g.hosts {
        let port = (*port != 443).then_some(*port);
        if let Some(rule) = efr_proxy::HostRule::new(pattern, port, false) {
            if !p.grants.contains(&rule) {
                p.grants.push(rule);
            }
        }
    }
    p.broker = Some(g.broker.clone());
}

/// The call's variables without those that hold only a placeholder (`vars`, or a value
/// holding one of `placeholders`): what the visible-token rule judges, since a placeholder
/// is no token the call can send anywhere.
pub fn without_placeholders(
    call_env: Vec<(String, String)>,
    vars: &[String],
    placeholders: &[String],
) -> Vec<(String, String)> {
    call_env
        .into_iter()
        .filter(|(k, v)| !vars.contains(k) && !placeholders.iter().any(|p| v.contains(p.as_str())))
        .collect()
}

/// Puts one credential's placeholder where the call's tools look: its `placeholder_env`
/// (and its source variable dropped from the call, whatever its name: the real one never
/// reaches it); a file source's placeholder copy over the file's mask. (Its git helper
/// is written with the call's trust files: [`Granted::git_config`].)
fn place(
    plan: &mut Plan,
    spec: &CredentialSpec,
    resolved: &Resolved,
    ph: &str,
) -> Result<(), CredentialError> {
    if let Source::Env(var) = &spec.source {
        drop_variable(plan, var);
    }
    if let Some(v) = &spec.placeholder_env {
        set_env(plan, vec![(v.clone(), ph.to_string())]);
    }
    if let Some((path, span)) = &resolved.file_span {
        let text = std::fs::read_to_string(path).map_err(|source| CredentialError::File {
            name: spec.name.clone(),
            path: path.clone(),
            source,
        })?;
        let p = path.to_string_lossy().into_owned();
        let scrubbed = plan
            .scrubbed
            .iter()
            .find(|s| s.path == p)
            .map(|s| s.content.clone());
        if let Some(copy) = placeholder_copy(&text, span.clone(), ph, scrubbed.as_deref()) {
            if !plan.masks.contains(&p) {
                plan.masks.push(p.clone());
            }
            plan.scrubbed.retain(|s| s.path != p);
            plan.scrubbed.push(efr_launcher::plan::ScrubbedFile {
                path: p,
                content: copy,
            });
        }
    }
    Ok(())
}

/// Drops `var` from the call's environment: the scrubber's drop list of the plan names it.
fn drop_variable(plan: &mut Plan, var: &str) {
    if let Some(p) = plan.env_policy.as_mut() {
        if !p.drop.iter().any(|d| d == var) {
            p.drop.push(var.to_string());
        }
    }
    if let Some(env) = plan.env.as_mut() {
        env.retain(|e| e.name != var);
    }
    plan.env_keep.retain(|k| k != var);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_files_are_the_system_roots_and_the_ca() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("system.crt");
        std::fs::write(
            &sys,
            "-----BEGIN CERTIFICATE-----\nSYS\n-----END CERTIFICATE-----",
        )
        .unwrap();
        let ca = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
        let t = write_trust_from(d.path(), ca, std::slice::from_ref(&sys)).unwrap();
        let bundle = std::fs::read_to_string(&t.bundle).unwrap();
        assert!(
            bundle.starts_with("-----BEGIN CERTIFICATE-----\nSYS\n-----END CERTIFICATE-----\n")
        );
        assert!(bundle.ends_with(ca), "{bundle}");
        assert_eq!(std::fs::read_to_string(&t.ca).unwrap(), ca);
        assert_eq!(t.system, vec![sys.to_string_lossy().into_owned()]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&t.bundle).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o444);
        // No system bundle: the CA alone.
        let e = tempfile::tempdir().unwrap();
        let t = write_trust_from(e.path(), ca, &[]).unwrap();
        assert!(std::fs::read_to_string(&t.bundle).unwrap().ends_with(ca));
        assert!(t.system.is_empty());
    }

    #[test]
    fn the_system_bundles_are_found_once_each() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("bundle.crt");
        std::fs::write(&real, "x").unwrap();
        let link = d.path().join("cert.pem");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let (r, l, m) = (
            real.to_string_lossy().into_owned(),
            link.to_string_lossy().into_owned(),
            d.path().join("missing").to_string_lossy().into_owned(),
        );
        let found = existing_bundles(&[&m, &l, &r]);
        assert_eq!(found, vec![std::fs::canonicalize(&real).unwrap()]);
    }

    #[test]
    fn every_trust_variable_names_an_inside_file() {
        let mut t = TrustPlan {
            bundle: "/b".into(),
            ca: "/c".into(),
            system: Vec::new(),
            git_config: None,
        };
        let env = trust_env(&t);
        assert_eq!(env.len(), TRUST_VARIABLES.len());
        for (n, v) in &env {
            assert!(v == INSIDE_CA || v == INSIDE_CA_BUNDLE, "{n}={v}");
        }
        assert!(env.contains(&("NODE_EXTRA_CA_CERTS".into(), INSIDE_CA.into())));
        assert!(env.contains(&("SSL_CERT_FILE".into(), INSIDE_CA_BUNDLE.into())));
        t.git_config = Some("/g".into());
        let env = trust_env(&t);
        assert!(env.contains(&("GIT_CONFIG_SYSTEM".into(), INSIDE_GIT_CONFIG.into())));
    }

    #[test]
    fn the_placeholder_copy_has_the_placeholder_and_no_other_secret() {
        // npm's token key in two pieces: the surface's secret scan of a clone of this
        // repository must find no token-shaped line in it.
        const NPM_KEY: &str = concat!("_auth", "Token");
        let secret = "npm_REALREALREAL";
        let orig = format!(
            "registry=https://r.test/\n//r.test/:{NPM_KEY}={secret}\n//other.test/:{NPM_KEY}=npm_OTHER\n"
        );
        let start = orig.find(secret).unwrap();
        let span = start..start + secret.len();
        let scrubbed = "registry=https://r.test/\n; removed\n; removed\n";
        let copy =
            placeholder_copy(&orig, span.clone(), "npm_PLACEHOLDER", Some(scrubbed)).unwrap();
        assert_eq!(
            copy,
            format!("registry=https://r.test/\n//r.test/:{NPM_KEY}=npm_PLACEHOLDER\n; removed\n")
        );
        // A whole-file token: the placeholder alone.
        let copy = placeholder_copy("tok123\n", 0..6, "plc456", None).unwrap();
        assert_eq!(copy, "plc456\n");
        // A copy written anew (TOML): only the lines it kept.
        let orig = "[registry]\ntoken = \"cio_SECRET\"\n[registries.x]\ntoken = \"cio_OTHER\"\n";
        let s = orig.find("cio_SECRET").unwrap();
        let scrubbed = "[registry]\n\n[registries.x]\n";
        let copy = placeholder_copy(orig, s..s + 10, "cio_PLACEHO", Some(scrubbed)).unwrap();
        assert_eq!(
            copy,
            "[registry]\ntoken = \"cio_PLACEHO\"\n[registries.x]\n"
        );
        assert!(!copy.contains("OTHER") && !copy.contains("SECRET"));
        // A span out of the file: none.
        assert!(placeholder_copy("abc", 2..9, "x", None).is_none());
    }

    /// A variable holding a placeholder makes no token host; the same variable holding a
    /// token the call can read does.
    #[test]
    fn a_placeholder_variable_denies_no_host() {
        let d = tempfile::tempdir().unwrap();
        let env = Env::new(d.path());
        let config = Config::defaults();
        let ph = "ghp_PlaceholderPlaceholderPlaceholder0001".to_string();
        let ce = vec![("GH_TOKEN".to_string(), ph.clone())];
        let allowed = |ce: &[(String, String)]| {
            let grants = vec![Grant::Host {
                host: "api.github.com".into(),
                port: None,
                plain_http: false,
                tcp: false,
            }];
            let p = crate::egress::policy(&grants, &config, &env, &[], ce);
            matches!(
                p.decide(efr_proxy::Kind::Connect, "api.github.com", 443),
                efr_proxy::Decision::Allow { .. }
            )
        };
        assert!(
            !allowed(&ce),
            "a token variable the call keeps denies its host"
        );
        let judged = without_placeholders(ce.clone(), &["GH_TOKEN".to_string()], &[]);
        assert!(allowed(&judged));
        let judged = without_placeholders(ce, &[], &[ph]);
        assert!(allowed(&judged));
    }

    /// The call's git, reading the helpers' config as its system config, gets the user and
    /// the placeholder for a bound host (and a `*.suffix` one), nothing for another host, and
    /// the host's system config still applies.
    #[test]
    fn the_git_config_answers_the_placeholder_for_the_bound_hosts_only() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("system-gitconfig");
        std::fs::write(&sys, "[user]\n\tname = From System\n").unwrap();
        let sys = sys.to_string_lossy().into_owned();
        let text = git_config_text(
            &[sys.as_str(), "/nonexistent/gitconfig"],
            &[GitHelper {
                hosts: vec![("git.test".into(), 443), ("*.forge.test".into(), 8443)],
                user: "x-access-token".into(),
                placeholder: "ghp_PLACE'HOLDER\"x".into(),
            }],
        );
        let cfg = d.path().join("gitconfig");
        std::fs::write(&cfg, &text).unwrap();
        let git = |args: &[&str], input: &str| {
            use std::io::Write;
            let mut c = std::process::Command::new("git")
                .args(args)
                .env("GIT_CONFIG_SYSTEM", &cfg)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_TERMINAL_PROMPT", "0")
                .env_remove("GIT_ASKPASS")
                .env_remove("SSH_ASKPASS")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
            let o = c.wait_with_output().unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let fill = |host: &str| {
            git(
                &["credential", "fill"],
                &format!("protocol=https\nhost={host}\n\n"),
            )
        };
        let got = fill("git.test");
        assert!(got.contains("username=x-access-token\n"), "{got}\n{text}");
        assert!(
            got.contains("password=ghp_PLACE'HOLDER\"x\n"),
            "{got}\n{text}"
        );
        let got = fill("a.forge.test:8443");
        assert!(
            got.contains("password=ghp_PLACE'HOLDER\"x\n"),
            "{got}\n{text}"
        );
        assert!(!fill("other.test").contains("password="));
        assert_eq!(git(&["config", "user.name"], ""), "From System\n");
        // A call that reads no system config keeps reading none.
        let none = git_system_configs(&[("GIT_CONFIG_NOSYSTEM".into(), "1".into())]);
        assert!(none.is_empty());
        let named = git_system_configs(&[("GIT_CONFIG_SYSTEM".into(), "/x/gitconfig".into())]);
        assert_eq!(named, vec!["/x/gitconfig".to_string()]);
    }
}
