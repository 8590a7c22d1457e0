//! Path rules of the config: how one is written, checked, expanded and matched.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::Env;
use super::env::KNOWN_VARS;

/// Which forms a key accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleShape {
    /// `~/...`, `$VAR/...` or `/...` only.
    Anchored,
    /// A relative path only (taken inside each root).
    Relative,
    /// Either.
    Any,
}

/// A path rule expanded against an [`Env`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulePath {
    /// An absolute path (or pattern).
    Abs(PathBuf),
    /// A relative path (or pattern), taken inside each root.
    InRoot(PathBuf),
    /// Its variable is not set here: the rule matches nothing.
    Unset,
}

impl RulePath {
    /// Expands `text` against `env`.
    pub fn expand(text: &str, env: &Env) -> RulePath {
        if is_anchored(text) {
            match env.expand(text) {
                Some(p) => RulePath::Abs(p),
                None => RulePath::Unset,
            }
        } else {
            RulePath::InRoot(PathBuf::from(text))
        }
    }
}

fn is_anchored(text: &str) -> bool {
    text == "~" || text.starts_with("~/") || text.starts_with('$') || text.starts_with('/')
}

/// Checks a path rule; the message says what is wrong.
pub(crate) fn check_path(text: &str, shape: RuleShape) -> Result<(), String> {
    if text.is_empty() {
        return Err("a path may not be empty".into());
    }
    if text.contains('\0') {
        return Err("a path may not hold a nul byte".into());
    }
    if text.starts_with('~') && text != "~" && !text.starts_with("~/") {
        return Err(format!(
            "{text}: only ~ and ~/... are understood, not ~user"
        ));
    }
    if let Some(var) = text.strip_prefix('$') {
        let name = var.split('/').next().unwrap_or("");
        if !KNOWN_VARS.contains(&name) {
            return Err(format!(
                "{text}: unknown variable ${name} (known: {})",
                KNOWN_VARS.map(|v| format!("${v}")).join(", ")
            ));
        }
    }
    let anchored = is_anchored(text);
    match shape {
        RuleShape::Anchored if !anchored => {
            return Err(format!("{text}: must start with ~/, $VAR/ or /"));
        }
        RuleShape::Relative if anchored => {
            return Err(format!(
                "{text}: must be relative (it is taken inside each root)"
            ));
        }
        _ => {}
    }
    if text.split('/').any(|c| c == "..") {
        return Err(format!("{text}: a `..` component is not allowed"));
    }
    Ok(())
}

/// Whether the relative pattern (components with `*` inside one component and `**` for
/// any number of components) matches `rel` or one of its ancestors: a rule for a directory
/// covers what is below it (`efr_sandbox_wire::pattern`, the launcher's syntax too).
pub(crate) fn pattern_covers(pattern: &Path, rel: &Path) -> bool {
    let normal = |p: &Path| -> Vec<Vec<u8>> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.as_bytes().to_vec()),
                _ => None,
            })
            .collect()
    };
    let (pat, rel) = (normal(pattern), normal(rel));
    let pat: Vec<&[u8]> = pat.iter().map(Vec::as_slice).collect();
    let rel: Vec<&[u8]> = rel.iter().map(Vec::as_slice).collect();
    efr_sandbox_wire::pattern::covers_components(&pat, &rel)
}

/// Whether a pattern holds a wildcard.
pub(crate) fn is_pattern(text: &Path) -> bool {
    text.as_os_str().as_bytes().contains(&b'*')
}

pub(crate) use efr_sandbox_wire::pattern::wildcard;

/// A host name of the config's host lists (lower case, such as `crates.io`), or `*.suffix`.
pub(crate) fn check_host(s: &str) -> Result<(), String> {
    let body = s.strip_prefix("*.").unwrap_or(s);
    let ok = !body.is_empty()
        && body.len() <= 253
        && body.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s}: not a host name (lower case, such as crates.io or *.example.com)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(pattern_covers(
            Path::new(".git/hooks"),
            Path::new(".git/hooks/pre-push")
        ));
        assert!(pattern_covers(
            Path::new(".git/hooks"),
            Path::new(".git/hooks")
        ));
        assert!(!pattern_covers(Path::new(".git/hooks"), Path::new(".git")));
        assert!(pattern_covers(
            Path::new(".git/modules/**/hooks"),
            Path::new(".git/modules/a/b/hooks/x")
        ));
        assert!(pattern_covers(
            Path::new(".git/worktrees/*/commondir"),
            Path::new(".git/worktrees/w1/commondir")
        ));
        assert!(!pattern_covers(
            Path::new(".git/worktrees/*/commondir"),
            Path::new(".git/worktrees/commondir")
        ));
        assert!(wildcard(b"*.example.com", b"a.example.com"));
        assert!(!wildcard(b"*.example.com", b"example.org"));
    }

    #[test]
    fn checks() {
        assert!(check_path("~/.ssh", RuleShape::Anchored).is_ok());
        assert!(check_path(".git/hooks", RuleShape::Anchored).is_err());
        assert!(check_path("~bob/x", RuleShape::Any).is_err());
        assert!(check_path("$FOO/x", RuleShape::Any).is_err());
        assert!(check_path("a/../b", RuleShape::Any).is_err());
        assert!(check_path("/etc", RuleShape::Relative).is_err());
    }
}
