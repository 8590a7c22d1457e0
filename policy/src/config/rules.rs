//! Path rules of the config: how one is written, checked, expanded and matched.

use std::ffi::OsStr;
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
/// covers what is below it.
pub(crate) fn pattern_covers(pattern: &Path, rel: &Path) -> bool {
    let pat: Vec<&OsStr> = pattern
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let rel: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    if pat.is_empty() {
        return false;
    }
    (1..=rel.len()).any(|n| match_components(&pat, &rel[..n]))
}

/// Whether a pattern holds a wildcard.
pub(crate) fn is_pattern(text: &Path) -> bool {
    text.as_os_str().as_bytes().contains(&b'*')
}

fn match_components(pat: &[&OsStr], path: &[&OsStr]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first.as_bytes() == b"**" => {
            (0..=path.len()).any(|skip| match_components(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((p, prest)) => {
                wildcard(first.as_bytes(), p.as_bytes()) && match_components(rest, prest)
            }
            None => false,
        },
    }
}

/// `*` matches any run of bytes; everything else matches itself.
pub(crate) fn wildcard(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pat.len() && pat[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
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
