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
//!   helper for the bound hosts ([`git_helper`]).
//!
//! The real secret is in none of them: it lives in the service's proxy alone.

use std::ops::Range;
use std::path::{Path, PathBuf};

use efr_launcher::plan::{INSIDE_CA, INSIDE_CA_BUNDLE, TrustPlan};

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
pub fn write_trust(dir: &Path, ca_pem: &str) -> Result<TrustPlan, TrustError> {
    let candidates: Vec<&str> = SYSTEM_BUNDLES.iter().map(|(p, _)| *p).collect();
    write_trust_from(dir, ca_pem, &existing_bundles(&candidates))
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
    let write = |name: &str, text: &str| -> Result<String, TrustError> {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        let err = |source| TrustError::Write {
            path: path.clone(),
            source,
        };
        std::fs::write(&path, text).map_err(err)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).map_err(err)?;
        Ok(path.to_string_lossy().into_owned())
    };
    Ok(TrustPlan {
        bundle: write(BUNDLE_FILE, &bundle)?,
        ca: write(CA_FILE, ca_pem)?,
        system: system
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
    })
}

/// The variables of [`TRUST_VARIABLES`] with the paths the call sees them at.
pub fn trust_env() -> Vec<(String, String)> {
    TRUST_VARIABLES
        .iter()
        .map(|v| {
            let path = match v.file {
                TrustFile::Bundle => INSIDE_CA_BUNDLE,
                TrustFile::Ca => INSIDE_CA,
            };
            (v.name.to_string(), path.to_string())
        })
        .collect()
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

/// The `GIT_CONFIG_*` variables that make the call's git ask the broker's helper for the
/// bound `hosts` (pattern, port): for each, `credential.URL.helper` emptied (no helper of
/// the user's config answers there, nor hands out the user's real password) and then set
/// to [`helper_snippet`]. Appended to the set `call_env` carries already (the count
/// raised, its pairs kept), as the call's git reads the whole set.
pub fn git_helper(
    call_env: &[(String, String)],
    hosts: &[(String, u16)],
    user: &str,
    placeholder: &str,
) -> Vec<(String, String)> {
    use efr_sandbox_wire::gitenv::{COUNT, KEY_PREFIX, VALUE_PREFIX};
    let mut n: usize = call_env
        .iter()
        .find(|(k, _)| k == COUNT)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut out = Vec::new();
    for (pattern, port) in hosts {
        let key = format!("credential.{}.helper", git_url(pattern, *port));
        for value in [String::new(), helper_snippet(user, placeholder)] {
            out.push((format!("{KEY_PREFIX}{n}"), key.clone()));
            out.push((format!("{VALUE_PREFIX}{n}"), value));
            n += 1;
        }
        // The user name the helper gives is the one git sends, whatever the remote's URL
        // names (`https://user@host/`): the proxy swaps the password only.
        out.push((
            format!("{KEY_PREFIX}{n}"),
            format!("credential.{}.username", git_url(pattern, *port)),
        ));
        out.push((format!("{VALUE_PREFIX}{n}"), user.to_string()));
        n += 1;
    }
    out.push((COUNT.to_string(), n.to_string()));
    out
}

/// Sets `vars` in the plan's `env_set`, each replacing an entry of the same name.
pub fn set_env(plan: &mut efr_launcher::plan::Plan, vars: Vec<(String, String)>) {
    for (name, value) in vars {
        plan.env_set.retain(|e| e.name != name);
        plan.env_set
            .push(efr_launcher::plan::EnvVar { name, value });
    }
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
        let env = trust_env();
        assert_eq!(env.len(), TRUST_VARIABLES.len());
        for (n, v) in &env {
            assert!(v == INSIDE_CA || v == INSIDE_CA_BUNDLE, "{n}={v}");
        }
        assert!(env.contains(&("NODE_EXTRA_CA_CERTS".into(), INSIDE_CA.into())));
        assert!(env.contains(&("SSL_CERT_FILE".into(), INSIDE_CA_BUNDLE.into())));
    }

    #[test]
    fn the_placeholder_copy_has_the_placeholder_and_no_other_secret() {
        let secret = "npm_REALREALREAL";
        let orig = format!(
            "registry=https://r.test/\n//r.test/:_authToken={secret}\n//other.test/:_authToken=npm_OTHER\n"
        );
        let start = orig.find(secret).unwrap();
        let span = start..start + secret.len();
        let scrubbed = "registry=https://r.test/\n; removed\n; removed\n";
        let copy =
            placeholder_copy(&orig, span.clone(), "npm_PLACEHOLDER", Some(scrubbed)).unwrap();
        assert_eq!(
            copy,
            "registry=https://r.test/\n//r.test/:_authToken=npm_PLACEHOLDER\n; removed\n"
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

    #[test]
    fn the_git_helper_extends_the_calls_git_config_set() {
        let ce = vec![
            ("GIT_CONFIG_COUNT".to_string(), "1".to_string()),
            ("GIT_CONFIG_KEY_0".to_string(), "core.fsmonitor".to_string()),
            ("GIT_CONFIG_VALUE_0".to_string(), String::new()),
        ];
        let v = git_helper(
            &ce,
            &[("git.test".into(), 443), ("*.forge.test".into(), 8443)],
            "x-access-token",
            "ghp_PLACE'HOLDER",
        );
        let get = |k: &str| v.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("GIT_CONFIG_COUNT"), Some("7"));
        assert_eq!(
            get("GIT_CONFIG_KEY_1"),
            Some("credential.https://git.test.helper")
        );
        assert_eq!(get("GIT_CONFIG_VALUE_1"), Some(""));
        assert_eq!(
            get("GIT_CONFIG_KEY_4"),
            Some("credential.https://*.forge.test:8443.helper")
        );
        // The snippet, run as git runs it, answers `get` with the placeholder only.
        let snippet = get("GIT_CONFIG_VALUE_2").unwrap();
        let run = |action: &str| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{} {action}", &snippet[1..]))
                .output()
                .unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(
            run("get"),
            "username=x-access-token\npassword=ghp_PLACE'HOLDER\n"
        );
        assert_eq!(run("store"), "");
    }
}
