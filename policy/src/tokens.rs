//! Hosts a contained call can hold a token for: such hosts are `denied`, and no host
//! grant opens them (design section 6). The proxy uses [`visible_token_hosts`] too.
//!
//! A token counts only when the call can see it: a token file of `network.token_files`
//! that no mask hides (a masked one, such as the default `~/.npmrc`, reads as empty inside
//! and denies nothing; an `unmask` grant shows it again), a variable the call's environment
//! keeps (`[environment]`; the default `drop` list keeps the known token variables out), or
//! a git credential helper the call can run and get a token from (the command knowledge's
//! `[[credential_helper]]`: `store` reads files that are masked by default, `cache` and the
//! desktop key stores ask what the call's view hides; any other helper is taken to give
//! one). Masks are decided by the same rules as the launch view and `efr-sandbox explain`:
//! the config's `sandbox.masks`, absolute or inside each project root, on the path and on
//! the path with its links resolved.
//!
//! This is the credential knowledge of the policy, a layer under the classifier (which
//! denies the hosts it finds), the explanation (which says a file is shown scrubbed) and
//! the call (whose proxy denies the same hosts, whose view shows the scrubbed copies).
//!
//! - `registries`: the registries a package manager would reach, as the user's setup says.

pub mod registries;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use efr_sandbox_wire::envfilter::glob_matches;

use crate::config::rules::RulePath;
use crate::context::{Context, rule_covers};
use crate::git::{find_git_dir, read_config};
use crate::knowledge::{Knowledge, ScrubFormat};
use crate::path::expand_home;
use crate::url::url_host_port;

/// The hosts a call of the turn could hold a token for, with no `unmask` grant and the
/// context's [`Context::call_env`].
pub fn token_hosts(ctx: &Context, roots: &[PathBuf]) -> BTreeSet<String> {
    visible_token_hosts(ctx, roots, &[], &ctx.call_env)
}

/// Whether a call whose `unmask` grants are `unmasked` can read `path`: no mask of the
/// config covers it, or its links resolved, unless an `unmask` grant names it or a
/// directory above it.
pub fn visible(ctx: &Context, roots: &[PathBuf], unmasked: &[PathBuf], path: &Path) -> bool {
    let canonical = crate::path::canonical_existing(path);
    for q in std::iter::once(path).chain(canonical.as_deref()) {
        let masked = ctx.masks.iter().any(|r| rule_covers(r, q, roots));
        if masked && !unmasked.iter().any(|u| q.starts_with(u)) {
            return false;
        }
    }
    true
}

/// The hosts for which a token visible to the call exists: a token file of the config (in
/// the home or in a project root) that no mask hides, a variable of `env` (what the call's
/// environment keeps), or a git credential helper the call can get a token from.
pub fn visible_token_hosts(
    ctx: &Context,
    roots: &[PathBuf],
    unmasked: &[PathBuf],
    env: &[(String, String)],
) -> BTreeSet<String> {
    visible_token_sources(ctx, roots, unmasked, env)
        .into_keys()
        .collect()
}

/// What makes a host a token host, and what to do about it: what a refusal says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// A token file the call can read.
    File(PathBuf),
    /// A variable the call's environment keeps.
    Variable(String),
    /// A git credential helper the call can run (its value).
    Helper(String),
}

impl TokenSource {
    /// Where the token is, and how to keep it from calls (so that a host grant opens the
    /// host), in words.
    pub fn explain(&self) -> String {
        match self {
            TokenSource::File(p) => format!(
                "the token is in {} (a file the call can read); mask it (sandbox.masks in \
                 the config) and a host grant opens the host",
                p.display()
            ),
            TokenSource::Variable(n) => format!(
                "the token is in the variable {n}, which the call's environment keeps; take \
                 it out of [environment] keep (or add it to drop) and a host grant opens the \
                 host"
            ),
            TokenSource::Helper(h) => format!(
                "git's credential helper `{h}` can give the call a token; remove it (or mask \
                 the store it reads) and a host grant opens the host"
            ),
        }
    }
}

/// What a call granted credentials holds only as placeholders: their variables (`env`
/// source, `placeholder_env`) and source files (a copy with the placeholder). The call
/// cannot send the secret of any of them anywhere, so none makes a token host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placeholders {
    /// The call's variables that hold a placeholder.
    pub vars: Vec<String>,
    /// The files the call sees only as a copy with a placeholder (`~` expanded).
    pub files: Vec<PathBuf>,
}

impl Placeholders {
    /// What the grants `granted` (credential names) of `ctx`'s credentials turn into
    /// placeholders.
    pub fn of_grants<'a>(
        ctx: &Context,
        granted: impl IntoIterator<Item = &'a str>,
    ) -> Placeholders {
        let mut p = Placeholders::default();
        for name in granted {
            let Some(c) = ctx.credentials.iter().find(|c| c.name == name) else {
                continue;
            };
            for v in [c.env_var(), c.placeholder_env.as_deref()]
                .into_iter()
                .flatten()
            {
                if !p.vars.iter().any(|x| x == v) {
                    p.vars.push(v.to_string());
                }
            }
            if let Some(f) = c.file(&ctx.env) {
                if !p.files.contains(&f) {
                    p.files.push(f);
                }
            }
        }
        p
    }

    /// Whether `f` is one of the files, as written or with links resolved.
    fn holds_file(&self, f: &Path) -> bool {
        let canonical = crate::path::canonical_existing(f);
        self.files.iter().any(|p| {
            p == f || (canonical.is_some() && crate::path::canonical_existing(p) == canonical)
        })
    }
}

/// [`visible_token_hosts`] with what made each host one (the first source found).
pub fn visible_token_sources(
    ctx: &Context,
    roots: &[PathBuf],
    unmasked: &[PathBuf],
    env: &[(String, String)],
) -> std::collections::BTreeMap<String, TokenSource> {
    visible_token_sources_except(ctx, roots, unmasked, env, &Placeholders::default())
}

/// [`visible_token_sources`] of a call that holds `placeholders` in place of some
/// credentials: their variables and files make no token host (a token the call can read
/// still does).
pub fn visible_token_sources_except(
    ctx: &Context,
    roots: &[PathBuf],
    unmasked: &[PathBuf],
    env: &[(String, String)],
    placeholders: &Placeholders,
) -> std::collections::BTreeMap<String, TokenSource> {
    let env: Vec<(String, String)> = env
        .iter()
        .filter(|(n, _)| !placeholders.vars.iter().any(|v| v == n))
        .cloned()
        .collect();
    let env = env.as_slice();
    let mut out = std::collections::BTreeMap::new();
    let mut add = |hosts: BTreeSet<String>, src: TokenSource| {
        for h in hosts {
            out.entry(h).or_insert_with(|| src.clone());
        }
    };
    for rule in &ctx.token_files {
        let files: Vec<PathBuf> = match &rule.path {
            RulePath::Abs(p) => vec![p.clone()],
            RulePath::InRoot(rel) => roots.iter().map(|r| r.join(rel)).collect(),
            RulePath::Unset => Vec::new(),
        };
        for f in files {
            // A missing file holds no token: one statx, where `visible` resolves every
            // component of the path (most of the config's token files are not there).
            if std::fs::symlink_metadata(&f).is_ok()
                && visible(ctx, roots, unmasked, &f)
                && !placeholders.holds_file(&f)
            {
                let mut hosts = BTreeSet::new();
                hosts_of_file(&f, &mut hosts);
                add(hosts, TokenSource::File(f));
            }
        }
    }
    for (name, value) in env {
        let mut hosts = BTreeSet::new();
        env_token_hosts(
            ctx,
            roots,
            env,
            &[(name.clone(), value.clone())],
            &mut hosts,
        );
        add(hosts, TokenSource::Variable(name.clone()));
    }
    // git credential helpers: `credential.<url>.helper` names its host; a helper for every
    // url gives tokens for the hosts of the projects' remotes
    let mut cfg = Vec::new();
    read_config(
        &ctx.config_home.join("git/config"),
        &ctx.home,
        None,
        &mut cfg,
        0,
    );
    read_config(&ctx.home.join(".gitconfig"), &ctx.home, None, &mut cfg, 0);
    let mut remote_hosts = Vec::new();
    for r in roots {
        if let Some(d) = find_git_dir(r) {
            read_config(
                &d.common.join("config"),
                &ctx.home,
                Some(&d.git_dir),
                &mut cfg,
                0,
            );
        }
    }
    for e in &cfg {
        if e.key.starts_with("remote.") && e.key.ends_with(".url") {
            if let Some((h, _, ssh)) = url_host_port(&e.value) {
                if !ssh {
                    remote_hosts.push(h);
                }
            }
        }
    }
    // The helpers in force per scope, as git lists them (an empty value clears the list).
    let mut helpers: Vec<(String, String)> = Vec::new();
    for e in &cfg {
        let Some(mid) = e
            .key
            .strip_prefix("credential")
            .and_then(|r| r.strip_suffix("helper"))
        else {
            continue;
        };
        let mid = mid.trim_matches('.').to_string();
        if e.value.trim().is_empty() {
            helpers.retain(|(m, _)| *m != mid);
        } else {
            helpers.push((mid, e.value.clone()));
        }
    }
    for (mid, value) in &helpers {
        if !helper_gives_token(ctx, roots, unmasked, value) {
            continue;
        }
        let mut hosts = BTreeSet::new();
        if mid.is_empty() {
            hosts.extend(remote_hosts.iter().cloned());
        } else if let Some((h, _, _)) = crate::url::url_host(mid, true) {
            hosts.insert(h);
        }
        add(hosts, TokenSource::Helper(value.clone()));
    }
    out
}

/// Whether the credential helper `value` (as `credential.helper` says it) can give a
/// contained call a token (see the module doc).
pub fn helper_gives_token(
    ctx: &Context,
    roots: &[PathBuf],
    unmasked: &[PathBuf],
    value: &str,
) -> bool {
    let v = value.trim();
    let (shell, v) = match v.strip_prefix('!') {
        Some(rest) => (true, rest.trim()),
        None => (false, v),
    };
    // A shell snippet efr does not read is a program it cannot judge.
    if shell && v.contains(['$', ';', '|', '&', '`', '(', ')', '<', '>', '{', '\n']) {
        return true;
    }
    let words: Vec<&str> = v.split_whitespace().collect();
    let Some(first) = words.first() else {
        return false;
    };
    let base = first.rsplit('/').next().unwrap_or(first);
    let base = base.strip_prefix("git-credential-").unwrap_or(base);
    let full = std::iter::once(base)
        .chain(words[1..].iter().copied().filter(|w| !w.starts_with('-')))
        .collect::<Vec<_>>()
        .join(" ");
    let k = ctx.knowledge_or_empty();
    let Some(h) = k
        .file
        .credential_helper
        .iter()
        .find(|h| h.names.iter().any(|n| *n == full || *n == base))
    else {
        return true;
    };
    if h.hidden {
        return false;
    }
    // `store --file PATH` reads that file instead.
    let file = words
        .iter()
        .position(|w| *w == "--file")
        .and_then(|i| words.get(i + 1))
        .map(|f| f.to_string())
        .or_else(|| {
            words
                .iter()
                .find_map(|w| w.strip_prefix("--file=").map(str::to_string))
        });
    let reads: Vec<PathBuf> = match file {
        Some(f) => vec![expand_home(&f, &ctx.home)],
        None => h.reads.iter().map(|r| expand_home(r, &ctx.home)).collect(),
    };
    reads
        .iter()
        .any(|p| p.is_file() && visible(ctx, roots, unmasked, p))
}

/// The hosts the variables `of` (of the call's environment `env`) hold a token for: the command
/// knowledge's `[[token_env]]`, npm's per-registry keys (`npm_config_//HOST/:_authToken`)
/// and any value that holds a secret shape with a host ([`crate::secrets`]: a URL with a
/// user part, with or without a password, is for the URL's host; a GitHub token for
/// GitHub's, ...). The registry of a `[[token_env]]` entry
/// is the one the setup names for the first project root.
fn env_token_hosts(
    ctx: &Context,
    roots: &[PathBuf],
    env: &[(String, String)],
    of: &[(String, String)],
    out: &mut BTreeSet<String>,
) {
    let k = ctx.knowledge_or_empty();
    let var = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    for (name, value) in of {
        if value.trim().is_empty() {
            continue;
        }
        for t in &k.file.token_env {
            if !t.names.iter().any(|g| glob_matches(g, name, false)) {
                continue;
            }
            out.extend(t.hosts.iter().cloned());
            if let Some(setup) = &t.registry {
                if let Some(spec) = k.file.registry.iter().find(|r| r.setup == Some(*setup)) {
                    for h in registries::proposal(
                        spec,
                        false,
                        &[],
                        &var,
                        roots.first().map(PathBuf::as_path),
                        &ctx.home,
                    )
                    .into_iter()
                    .take(1)
                    {
                        out.insert(h.host);
                    }
                }
            }
        }
        let lower = name.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("npm_config_//") {
            if let Some(h) = host_of(rest.split(':').next().unwrap_or("")) {
                out.insert(h);
            }
        }
        out.extend(crate::secrets::Shapes::shipped().value_hosts(value));
    }
}

fn read(p: &Path) -> Option<String> {
    let m = std::fs::metadata(p).ok()?;
    if !m.is_file() || m.len() > 4 << 20 {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

fn host_of(s: &str) -> Option<String> {
    crate::url::url_host(s.trim().trim_matches('"').trim_matches('\''), true).map(|h| h.0)
}

/// The hosts one token file names, by its kind (its file name).
pub fn hosts_of_file(path: &Path, out: &mut BTreeSet<String>) {
    let Some(text) = read(path) else { return };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.as_str() {
        ".npmrc" => {
            let mut registry = None;
            let mut global_token = false;
            for l in text.lines().map(str::trim) {
                if let Some(r) = l
                    .strip_prefix("registry=")
                    .or_else(|| l.strip_prefix("registry ="))
                {
                    registry = host_of(r);
                }
                if let Some(rest) = l.strip_prefix("//") {
                    if rest.contains(":_authToken")
                        || rest.contains(":_auth")
                        || rest.contains(":_password")
                    {
                        if let Some(h) = host_of(rest.split(':').next().unwrap_or("")) {
                            out.insert(h);
                        }
                    }
                } else if l.starts_with("_authToken")
                    || l.starts_with("_auth")
                    || l.starts_with("_password")
                {
                    global_token = true;
                }
            }
            if global_token {
                out.insert(registry.unwrap_or_else(|| "registry.npmjs.org".into()));
            }
        }
        ".yarnrc.yml" if text.contains("npmAuthToken") || text.contains("npmAuthIdent") => {
            out.insert("registry.yarnpkg.com".into());
            for l in text.lines() {
                let t = l.trim().trim_end_matches(':');
                if t.starts_with("\"http") || t.starts_with("http") || t.starts_with("'http") {
                    if let Some(h) = host_of(t) {
                        out.insert(h);
                    }
                }
            }
        }
        ".netrc" | "_netrc" => {
            let words: Vec<&str> = text.split_whitespace().collect();
            for w in words.windows(2) {
                if w[0] == "machine" {
                    out.insert(w[1].to_ascii_lowercase());
                }
            }
        }
        ".pypirc" => {
            let mut section = String::new();
            let mut repo = None;
            let mut secret = false;
            let flush = |section: &str,
                         repo: &mut Option<String>,
                         secret: &mut bool,
                         out: &mut BTreeSet<String>| {
                if *secret && section != "distutils" {
                    let h =
                        repo.take()
                            .and_then(|r| host_of(&r))
                            .unwrap_or_else(|| match section {
                                "testpypi" => "test.pypi.org".into(),
                                _ => "upload.pypi.org".into(),
                            });
                    out.insert(h);
                }
                *secret = false;
                *repo = None;
            };
            for l in text.lines().map(str::trim) {
                if l.starts_with('[') {
                    flush(&section, &mut repo, &mut secret, out);
                    section = l.trim_matches(['[', ']']).to_string();
                } else if let Some((k, v)) = l.split_once('=').or_else(|| l.split_once(':')) {
                    match k.trim() {
                        "repository" => repo = Some(v.trim().to_string()),
                        "password" => secret = !v.trim().is_empty(),
                        _ => {}
                    }
                }
            }
            flush(&section, &mut repo, &mut secret, out);
        }
        ".git-credentials" | "credentials" if text.contains("://") => {
            for l in text.lines() {
                if let Some(h) = crate::url::url_host(l.trim(), false).map(|h| h.0) {
                    out.insert(h);
                }
            }
        }
        "config.json" => {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                for key in ["auths", "credHelpers"] {
                    if let Some(m) = v.get(key).and_then(|a| a.as_object()) {
                        for k in m.keys() {
                            let h = host_of(k).unwrap_or_else(|| k.to_ascii_lowercase());
                            out.insert(if h == "index.docker.io" {
                                "registry-1.docker.io".into()
                            } else {
                                h.clone()
                            });
                            out.insert(h);
                        }
                    }
                }
            }
        }
        "hosts.yml" => {
            for l in text.lines() {
                if !l.starts_with([' ', '\t', '#', '-']) && l.trim_end().ends_with(':') {
                    out.insert(l.trim().trim_end_matches(':').to_ascii_lowercase());
                }
            }
        }
        "credentials.toml" | "credentials" => {
            if text.contains("token") {
                out.insert("crates.io".into());
                out.insert("index.crates.io".into());
                for l in text.lines() {
                    if let Some(name) = l.trim().strip_prefix("[registries.") {
                        let _ = name;
                    }
                }
            }
            if text.contains(":rubygems_api_key") || text.contains("rubygems_api_key") {
                out.insert("rubygems.org".into());
            }
        }
        _ => {}
    }
}

/// A line put where a secret was.
const REMOVED: &str = "removed by the efr sandbox: a secret";

/// `text` without the password of any url in it (`scheme://user:pass@host` becomes
/// `scheme://user@host`), and whether there was one.
pub fn scrub_url_passwords(text: &str) -> (String, bool) {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut any = false;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(['/', '?', '#', ' ', '"', '\'', '\n', '<', '\t'])
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rsplit_once('@') {
            Some((user, host)) if user.contains(':') => {
                let name = user.split(':').next().unwrap_or("");
                out.push_str(name);
                if !name.is_empty() {
                    out.push('@');
                }
                out.push_str(host);
                any = true;
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    (out, any)
}

/// `text` (a settings file of `format`) with its secret values removed, and whether it
/// held one. `None` for a cargo file that does not parse (it is then
/// shown empty, as the mask shows it).
pub fn scrub(format: ScrubFormat, text: &str) -> Option<(String, bool)> {
    let mut any = false;
    let body = match format {
        ScrubFormat::Npmrc => {
            let mut out = String::new();
            for l in text.lines() {
                let key = l.split_once('=').map(|(k, _)| k.trim()).unwrap_or("");
                let key = key.rsplit(':').next().unwrap_or(key);
                if matches!(
                    key,
                    "_authToken" | "_auth" | "_password" | "username" | "password" | "otp"
                ) {
                    any = true;
                    out.push_str(&format!("; {REMOVED}\n"));
                } else {
                    out.push_str(l);
                    out.push('\n');
                }
            }
            out
        }
        ScrubFormat::Yarnrc => {
            let mut out = String::new();
            for l in text.lines() {
                let t = l.trim_start();
                let key = t
                    .split_once(':')
                    .map(|(k, _)| k.trim_matches(['"', '\'']))
                    .unwrap_or("");
                if matches!(key, "npmAuthToken" | "npmAuthIdent" | "npmPassword") {
                    any = true;
                    let indent = &l[..l.len() - t.len()];
                    out.push_str(&format!("{indent}# {REMOVED}\n"));
                } else {
                    out.push_str(l);
                    out.push('\n');
                }
            }
            out
        }
        ScrubFormat::Cargo => {
            let mut t: toml::Table = text.parse().ok()?;
            if let Some(r) = t.get_mut("registry").and_then(|r| r.as_table_mut()) {
                any |= r.remove("token").is_some();
            }
            if let Some(rs) = t.get_mut("registries").and_then(|r| r.as_table_mut()) {
                for (_, r) in rs.iter_mut() {
                    if let Some(r) = r.as_table_mut() {
                        any |= r.remove("token").is_some();
                    }
                }
            }
            if any {
                toml::to_string(&t).ok()?
            } else {
                text.to_string()
            }
        }
        ScrubFormat::Maven => {
            let mut out = text.to_string();
            for tag in ["password", "passphrase", "privateKey"] {
                let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
                let mut at = 0;
                while let Some(i) = out[at..].find(&open) {
                    let start = at + i + open.len();
                    let Some(j) = out[start..].find(&close) else {
                        break;
                    };
                    if j > 0 {
                        out.replace_range(start..start + j, "");
                        any = true;
                    }
                    at = start + close.len();
                }
            }
            out
        }
        ScrubFormat::Urls => text.to_string(),
    };
    let (body, urls) = scrub_url_passwords(&body);
    Some((body, any || urls))
}

/// Whether a contained call reading `path` gets its scrubbed copy (a settings file of the
/// command knowledge that [`scrubbed_copies`] copies): such a read needs no `unmask`.
pub fn shown_scrubbed(home: &Path, path: &Path) -> bool {
    let k = Knowledge::get();
    k.file.settings_file.iter().any(|f| {
        let p = expand_home(&f.path, home);
        p == path
            && std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.len() <= 64 * 1024)
            && std::fs::read_to_string(&p)
                .ok()
                .is_some_and(|t| !t.contains('\0') && scrub(f.format, &t).is_some())
    })
}

/// The scrubbed copies of the command knowledge's settings files for a call whose masks
/// are `masks` (absolute paths, the launch view's): a masked settings file is shown
/// scrubbed; one that is not masked is added to `masks` and shown scrubbed when it holds
/// a secret. A file that is missing, not a regular file, over 64 KiB or holds NUL gets no
/// copy (a masked one stays empty). Returns (path, content) pairs.
pub fn scrubbed_copies(home: &Path, masks: &mut Vec<String>) -> Vec<(String, String)> {
    let k = Knowledge::get();
    let mut out = Vec::new();
    for f in &k.file.settings_file {
        let path = expand_home(&f.path, home);
        let ps = path.to_string_lossy().into_owned();
        let masked = masks.iter().any(|m| m.trim_end_matches('/') == ps);
        // A mask above it (a masked directory) hides it whole. Compared as text (the masks
        // and the path are both absolute and normal): `Path::starts_with` walks components,
        // once per mask and file, which was most of this function's time.
        let below = |m: &str| {
            let m = m.trim_end_matches('/');
            ps.len() > m.len()
                && ps.starts_with(m)
                && (m.is_empty() || ps.as_bytes()[m.len()] == b'/')
        };
        if masks.iter().any(|m| below(m)) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > 64 * 1024 {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if text.contains('\0') {
            continue;
        }
        let Some((body, secret)) = scrub(f.format, &text) else {
            continue;
        };
        if masked || secret {
            if !masked {
                masks.push(ps.clone());
            }
            out.push((ps, body));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = |n: &str, t: &str| {
            let p = d.path().join(n);
            std::fs::write(&p, t).unwrap_or_else(|e| panic!("{e}"));
            let mut s = BTreeSet::new();
            hosts_of_file(&p, &mut s);
            s.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(
            w(".npmrc", "//npm.pkg.github.com/:_authToken=x\n"),
            vec!["npm.pkg.github.com"]
        );
        assert_eq!(
            w(".npmrc", "registry=https://r.example/\n_authToken=x\n"),
            vec!["r.example"]
        );
        assert_eq!(
            w(".netrc", "machine api.example.com login a password b\n"),
            vec!["api.example.com"]
        );
        assert_eq!(
            w(".git-credentials", "https://u:tok@github.com\n"),
            vec!["github.com"]
        );
        assert_eq!(
            w(
                ".pypirc",
                "[distutils]\nindex-servers=pypi\n[pypi]\nusername=__token__\npassword=pypi-x\n"
            ),
            vec!["upload.pypi.org"]
        );
        assert_eq!(
            w("hosts.yml", "github.com:\n    oauth_token: x\n"),
            vec!["github.com"]
        );
        assert!(
            w("config.json", "{\"auths\":{\"ghcr.io\":{\"auth\":\"x\"}}}")
                .contains(&"ghcr.io".to_string())
        );
    }

    #[test]
    fn scrub_keeps_settings_and_drops_secrets() {
        let (t, any) = scrub(ScrubFormat::Npmrc,
            "registry=https://r.example/\n//r.example/:_authToken=${NPM_TOKEN}\n_auth=abc\ncafile=/ca.pem\n",
        )
        .unwrap_or_default();
        assert!(any && t.contains("registry=https://r.example/") && t.contains("cafile=/ca.pem"));
        assert!(!t.contains("NPM_TOKEN") && !t.contains("abc"), "{t}");
        let (t, any) = scrub(ScrubFormat::Maven,
            "<servers><server><id>c</id><username>u</username><password>pw</password></server></servers><mirrors><mirror><url>https://m.example</url></mirror></mirrors>",
        )
        .unwrap_or_default();
        assert!(
            any && !t.contains(">pw<") && t.contains("https://m.example"),
            "{t}"
        );
        let (t, any) = scrub(
            ScrubFormat::Urls,
            "index-url = https://u:p@h.example/simple https://h2.example/\n",
        )
        .unwrap_or_default();
        assert!(any, "{t}");
        assert_eq!(
            t,
            "index-url = https://u@h.example/simple https://h2.example/\n"
        );
        let (t, any) = scrub(
            ScrubFormat::Cargo,
            "[registries.corp]\nindex = \"https://c.example\"\ntoken = \"x\"\n",
        )
        .unwrap_or_default();
        assert!(
            any && t.contains("https://c.example") && !t.contains("token"),
            "{t}"
        );
        let (_, any) =
            scrub(ScrubFormat::Npmrc, "registry=https://r.example/\n").unwrap_or_default();
        assert!(!any);
        assert!(scrub(ScrubFormat::Cargo, "[broken").is_none());
    }
}
