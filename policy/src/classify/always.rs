//! "Allow always" rules: matching an exit against the saved `[[always]]` rules, and a rule
//! in words. The policy only reads and judges; the service writes a new rule into the
//! user's config file (`sandbox.always_save`).

use efr_sandbox_wire::ExitKind;

use super::{Finding, host_matches};
use crate::config::AlwaysRule;
use crate::config::rules::RulePath;
use crate::context::Context;

/// `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == t[ti] || p[pi] == '?') {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

fn rule_matches(ctx: &Context, rule: &AlwaysRule, f: &Finding) -> bool {
    if rule.command.is_empty() && rule.host.is_none() && rule.path.is_none() {
        return false;
    }
    if rule.kind.is_some_and(|k| k != f.kind) {
        return false;
    }
    if f.kind == ExitKind::Floor {
        return false;
    }
    if !rule.command.is_empty() {
        // the words of the command, with a leading path taken off the first
        let words: Vec<&str> = f.words.iter().map(String::as_str).collect();
        if words.len() < rule.command.len() {
            return false;
        }
        for (i, (p, w)) in rule.command.iter().zip(words.iter()).enumerate() {
            let w = if i == 0 {
                w.rsplit('/').next().unwrap_or(w)
            } else {
                w
            };
            if !glob(p, w) {
                return false;
            }
        }
    }
    if let Some(h) = &rule.host {
        if f.facts.hosts.is_empty()
            || !f
                .facts
                .hosts
                .iter()
                .all(|x| host_matches(h, &x.host) || glob(h, &x.host))
        {
            return false;
        }
    }
    if let Some(p) = &rule.path {
        let base = match RulePath::expand(p, &ctx.env) {
            RulePath::Abs(b) => b,
            _ => return false,
        };
        let under = |s: &str| -> bool {
            let s = crate::path::expand_home(s, &ctx.home);
            s.starts_with(&base)
        };
        let ok = if f.facts.targets.is_empty() {
            f.cwd.as_ref().is_some_and(|c| c.starts_with(&base))
        } else {
            f.facts.targets.iter().all(|t| under(&t.path))
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The index of the first rule that allows this finding.
pub(crate) fn matching_rule(ctx: &Context, f: &Finding) -> Option<usize> {
    ctx.always.iter().position(|r| rule_matches(ctx, r, f))
}

/// A rule in words.
pub fn describe(rule: &AlwaysRule) -> String {
    let mut parts = Vec::new();
    if let Some(k) = rule.kind {
        parts.push(format!("{} exits", k.as_str()));
    }
    if !rule.command.is_empty() {
        let of = if rule.kind.is_some() { "of " } else { "" };
        parts.push(format!("{of}`{}`", rule.command.join(" ")));
    }
    if let Some(h) = &rule.host {
        parts.push(format!("to {h}"));
    }
    if let Some(p) = &rule.path {
        parts.push(format!("under {p}"));
    }
    format!("allow {}", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("git", "git"));
        assert!(glob("*", "anything"));
        assert!(glob("orig*", "origin"));
        assert!(!glob("orig*", "upstream"));
        assert!(glob("*.example.com", "a.example.com"));
    }
}
