//! The config writer: an "allow always" rule saved as a new `[[always]]` table of the user's
//! config file (`sandbox.always_save`, and an approval answered "always"). It lives in the
//! service, the one process that writes the user's config, beside the two handlers that
//! call it; the policy crate only reads and judges a config.

use std::io::Write as _;
use std::path::Path;

use efr_policy::classify::always::describe;
use efr_policy::config::{AlwaysRule, Config};
use efr_sandbox_wire::{AlwaysOutcome, NotSavedReason};

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

    fn rule(host: &str) -> AlwaysRule {
        AlwaysRule {
            command: vec!["git".into(), "push".into()],
            host: Some(host.into()),
            path: None,
            kind: None,
            reason: "the test's".into(),
            source: None,
        }
    }

    #[test]
    fn a_rule_is_appended_and_the_file_still_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("efr/config.toml");
        let first = save_always(&path, None, &rule("a.example"));
        assert!(
            matches!(first, AlwaysOutcome::Saved { index: 0, .. }),
            "{first:?}"
        );
        let text = std::fs::read_to_string(&path).expect("written");
        let second = save_always(&path, Some(&text), &rule("b.example"));
        assert!(
            matches!(second, AlwaysOutcome::Saved { index: 1, .. }),
            "{second:?}"
        );
        let config = Config::from_toml_str(&std::fs::read_to_string(&path).expect("read"), &path)
            .expect("loads");
        assert_eq!(config.always.len(), 2);
        // No temporary file left beside it.
        let left: Vec<_> = std::fs::read_dir(path.parent().expect("dir"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, ["config.toml"]);
    }

    #[test]
    fn a_file_changed_since_the_caller_read_it_or_not_toml_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "# mine\n").expect("write");
        let changed = save_always(&path, Some("# what the caller saw\n"), &rule("a.example"));
        assert!(
            matches!(
                changed,
                AlwaysOutcome::NotSaved {
                    reason: NotSavedReason::Changed
                }
            ),
            "{changed:?}"
        );
        std::fs::write(&path, "[broken").expect("write");
        let broken = save_always(&path, None, &rule("a.example"));
        assert!(
            matches!(
                broken,
                AlwaysOutcome::NotSaved {
                    reason: NotSavedReason::LoadCheck
                }
            ),
            "{broken:?}"
        );
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "[broken");
    }
}
