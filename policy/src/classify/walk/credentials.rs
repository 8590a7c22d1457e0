//! The `credential` grant a line needs: `git push`/`fetch`/`pull`/`clone` to an HTTPS remote
//! of a credential with `git = true`, `gh` commands that act with the user's GitHub token, a
//! registry's publish, `curl -H "Authorization: Bearer $VAR"` with a credential's variable.
//! Such a line runs contained: the call holds a placeholder, and the proxy swaps it for the
//! secret on the credential's hosts only.

use super::*;
use crate::config::credential::CredentialSpec;

/// `gh`'s commands that act on GitHub with the user's token and nothing else of the host:
/// they run contained with the `github` credential. The others (`auth`, `config`,
/// `extension`, `codespace`, `browse`, ...) write gh's own files, install code, open ssh
/// or a browser: they stay outside.
const GH_CONTAINED: [&str; 18] = [
    "api",
    "pr",
    "issue",
    "repo",
    "release",
    "run",
    "workflow",
    "gist",
    "search",
    "label",
    "secret",
    "variable",
    "cache",
    "ruleset",
    "project",
    "org",
    "status",
    "attestation",
];

/// The credential gh uses: the one named `github`, when it binds gh's API host.
pub(super) fn gh_credential<'c>(ctx: &'c Context, sub: &str) -> Option<&'c CredentialSpec> {
    if !GH_CONTAINED.contains(&sub) {
        return None;
    }
    ctx.credentials
        .iter()
        .find(|c| c.name == "github" && c.binds("api.github.com", 443))
}

/// The credential a registry's publish uses: one bound to a host the publish reaches, else
/// the profile of the tool's index (`twine upload` and the python tools: `pypi`).
pub(super) fn publish_credential<'c>(
    ctx: &'c Context,
    tool: &str,
    hosts: &[(String, Option<u16>)],
) -> Option<&'c CredentialSpec> {
    hosts
        .iter()
        .find_map(|(h, p)| ctx.credential_for(h, *p))
        .or_else(|| {
            let profile = match tool {
                "twine" | "pdm" | "hatch" | "poetry" | "flit" | "uv" => "pypi",
                _ => return None,
            };
            ctx.credentials.iter().find(|c| c.name == profile)
        })
}

/// The credentials whose variable (`env` source or `placeholder_env`) a header value of the
/// line names as `$VAR` or `${VAR}`.
pub(super) fn header_credentials<'c>(ctx: &'c Context, rest: &[Arg]) -> Vec<&'c CredentialSpec> {
    let mut out: Vec<&CredentialSpec> = Vec::new();
    for (i, a) in rest.iter().enumerate() {
        let value = match a.text.as_str() {
            "-H" | "--header" => rest.get(i + 1).map(|v| v.raw.as_str()),
            t => t.strip_prefix("--header=").map(|_| a.raw.as_str()),
        };
        let Some(value) = value else { continue };
        for c in &ctx.credentials {
            let names = [c.env_var(), c.placeholder_env.as_deref()];
            if names.into_iter().flatten().any(|v| names_var(value, v)) && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// Whether `text` expands the variable `var` (`$VAR` not followed by a name character, or
/// `${VAR}`).
fn names_var(text: &str, var: &str) -> bool {
    if text.contains(&format!("${{{var}}}")) {
        return true;
    }
    let needle = format!("${var}");
    text.match_indices(&needle).any(|(i, _)| {
        !text[i + needle.len()..]
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

/// Makes `f` a contained exit with credential `c`: a host grant of each of `hosts` and of
/// each exact host `c` is bound to (`all_hosts`), and `credential=NAME`.
pub(super) fn use_credential(
    f: &mut Finding,
    c: &CredentialSpec,
    hosts: &[(String, Option<u16>)],
    all_hosts: bool,
) {
    let mut grants: Vec<Grant> = Vec::new();
    let mut add = |host: &str, port: Option<u16>| {
        let port = port.filter(|&p| p != 443);
        if !grants
            .iter()
            .any(|g| matches!(g, Grant::Host { host: h, port: p, .. } if h == host && *p == port))
        {
            grants.push(Grant::Host {
                host: host.to_string(),
                port,
                plain_http: false,
                tcp: false,
            });
        }
    };
    for (h, p) in hosts {
        add(h, *p);
    }
    if all_hosts {
        for b in c.hosts.iter().filter(|b| !b.pattern.starts_with("*.")) {
            add(&b.pattern, Some(b.port));
        }
    }
    grants.push(Grant::Credential {
        name: c.name.clone(),
    });
    f.needs = Needs::Contained { grants };
    f.facts.outside_commands.retain(|o| o != &f.command);
    let bound: Vec<String> = c
        .hosts
        .iter()
        .map(|b| {
            if b.port == 443 {
                b.pattern.clone()
            } else {
                format!("{}:{}", b.pattern, b.port)
            }
        })
        .collect();
    f.reasons.push(format!(
        "runs contained with credential {}: the call holds a placeholder, which the proxy \
         swaps for the secret on {} only",
        c.name,
        bound.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use super::names_var;

    #[test]
    fn a_variable_is_named_whole() {
        assert!(names_var(
            "Authorization: Bearer $OPENAI_API_KEY",
            "OPENAI_API_KEY"
        ));
        assert!(names_var(
            "Authorization: Bearer ${OPENAI_API_KEY}",
            "OPENAI_API_KEY"
        ));
        assert!(names_var("x-api-key: $K", "K"));
        assert!(!names_var(
            "Authorization: Bearer $OPENAI_API_KEY_2",
            "OPENAI_API_KEY"
        ));
        assert!(!names_var(
            "Authorization: Bearer OPENAI_API_KEY",
            "OPENAI_API_KEY"
        ));
    }
}
