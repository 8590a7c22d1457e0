//! "Allow always" rules: matching an exit against the saved `[[always]]` rules, and saving
//! a new rule into the user's config file safely (`sandbox.always_save`).

use std::io::Write as _;
use std::path::Path;

use efr_sandbox_wire::{AlwaysOutcome, ExitKind, NotSavedReason};

use super::{Finding, host_matches};
use crate::config::rules::RulePath;
use crate::config::{AlwaysRule, Config};
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

/// Save `rule` as a new `[[always]]` table of the config file at `path`.
///
/// `expected` is the file's content as the caller read it (None: the caller did not read
/// it); a file that differs now is `changed`. The new text must load as a config
/// (`load_check`); it is written to a temporary file beside the old one and renamed over it,
/// keeping the old file's mode. The index is the rule's place among the file's `[[always]]`.
pub fn save_always(path: &Path, expected: Option<&str>, rule: &AlwaysRule) -> AlwaysOutcome {
    let not = |reason| AlwaysOutcome::NotSaved { reason };
    let current = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return not(NotSavedReason::ReadOnly);
        }
        Err(_) => return not(NotSavedReason::Io),
    };
    if let Some(exp) = expected {
        if current.as_deref().unwrap_or("") != exp {
            return not(NotSavedReason::Changed);
        }
    }
    let text = current.clone().unwrap_or_default();
    let mut doc = match text.parse::<toml_edit::DocumentMut>() {
        Ok(d) => d,
        Err(_) => return not(NotSavedReason::LoadCheck),
    };
    let mut table = toml_edit::Table::new();
    if !rule.command.is_empty() {
        let mut arr = toml_edit::Array::new();
        for w in &rule.command {
            arr.push(w.as_str());
        }
        table.insert("command", toml_edit::value(arr));
    }
    if let Some(h) = &rule.host {
        table.insert("host", toml_edit::value(h.as_str()));
    }
    if let Some(p) = &rule.path {
        table.insert("path", toml_edit::value(p.as_str()));
    }
    if let Some(k) = rule.kind {
        table.insert("kind", toml_edit::value(k.as_str()));
    }
    if !rule.reason.is_empty() {
        table.insert("reason", toml_edit::value(rule.reason.as_str()));
    }
    let index = {
        let item = doc
            .entry("always")
            .or_insert(toml_edit::Item::ArrayOfTables(
                toml_edit::ArrayOfTables::new(),
            ));
        let Some(arr) = item.as_array_of_tables_mut() else {
            return not(NotSavedReason::LoadCheck);
        };
        arr.push(table);
        arr.len() - 1
    };
    let new_text = doc.to_string();
    if Config::from_toml_str(&new_text, path).is_err() {
        return not(NotSavedReason::LoadCheck);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Err(e) = std::fs::create_dir_all(dir) {
        return not(io_reason(&e));
    }
    if let Ok(m) = std::fs::metadata(path) {
        if m.permissions().readonly() {
            return not(NotSavedReason::ReadOnly);
        }
    }
    let tmp = dir.join(format!(
        ".{}.efr-save-{}",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(new_text.as_bytes())?;
        f.sync_all()?;
        if let Ok(m) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, m.permissions())?;
        }
        // the file must not have changed while we wrote
        let now = match std::fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if now != current {
            return Err(std::io::Error::other("changed"));
        }
        std::fs::rename(&tmp, path)
    };
    match write() {
        Ok(()) => AlwaysOutcome::Saved {
            // Saturating: a file of more than u32::MAX `[[always]]` tables does not load.
            index: u32::try_from(index).unwrap_or(u32::MAX),
            rule: describe(rule),
        },
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            if e.to_string() == "changed" {
                not(NotSavedReason::Changed)
            } else {
                not(io_reason(&e))
            }
        }
    }
}

fn io_reason(e: &std::io::Error) -> NotSavedReason {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem => {
            NotSavedReason::ReadOnly
        }
        _ => NotSavedReason::Io,
    }
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
