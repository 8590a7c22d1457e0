//! The text a person reads from `efr-sandbox explain`: one line per fact, the reason and
//! the fix.

use efr_sandbox_wire::{Access, ExplainResult, FileKind, Grant, RuleHit, TargetClass};

fn kind_words(k: FileKind) -> &'static str {
    match k {
        FileKind::File => "a file",
        FileKind::Dir => "a directory",
        FileKind::Symlink => "a symbolic link",
        FileKind::Socket => "a unix socket",
        FileKind::Fifo => "a fifo (named pipe)",
        FileKind::BlockDevice => "a block device",
        FileKind::CharDevice => "a character device",
        FileKind::Missing => "nothing",
    }
}

fn class_words(c: TargetClass) -> &'static str {
    match c {
        TargetClass::Project => "project (inside a project root of the turn)",
        TargetClass::Scratch => "scratch (the conversation's $SCRATCH)",
        TargetClass::Tmp => "tmp (the call's private /tmp)",
        TargetClass::Home => "home (in your home, outside every project)",
        TargetClass::System => "system (outside your home)",
        TargetClass::Cache => "cache (a real cache)",
        TargetClass::BuildOutput => "build_output (build output inside a project)",
        TargetClass::Trash => "trash",
        TargetClass::Floor => "floor (no mode writes it without you)",
        TargetClass::Masked => "masked (hidden from contained calls)",
    }
}

fn rule(h: &RuleHit) -> String {
    format!("{} rule {} ({})", h.key, h.rule, h.reason)
}

fn line(out: &mut String, label: &str, text: &str) {
    out.push_str(&format!("{label:<10} {text}\n"));
}

/// Renders an explanation for a person (see the module doc of [`crate::explain`]).
pub fn render_text(r: &ExplainResult) -> String {
    let mut out = String::new();
    line(&mut out, "path", &r.path);
    if r.shown != r.path {
        line(&mut out, "shown as", &r.shown);
    }
    if r.canonical != r.path && r.canonical != r.shown {
        line(&mut out, "real path", &r.canonical);
    }
    let exists = if r.exists {
        format!("yes, {}", kind_words(r.kind))
    } else {
        "no (nothing is there yet)".to_string()
    };
    line(&mut out, "exists", &exists);
    if let Some(l) = &r.link {
        let target = if l.target_kind == FileKind::Missing {
            "which does not exist".to_string()
        } else {
            format!("which is {}", kind_words(l.target_kind))
        };
        line(
            &mut out,
            "link",
            &format!(
                "{} -> {} (leads to {}, {target})",
                l.link, l.points_to, l.resolved
            ),
        );
    }
    line(&mut out, "class", class_words(r.class));
    let access = match r.access {
        Access::None => {
            if let Some(m) = &r.masked {
                format!("none: masked by {}", rule(m))
            } else if r.link.as_ref().map(|l| l.target_kind).unwrap_or(r.kind) == FileKind::Socket {
                "none: a unix socket of the host; a contained call cannot connect to it".to_string()
            } else {
                "none: a device the sandbox's /dev does not have".to_string()
            }
        }
        Access::Write => match &r.writable_by {
            Some(w) if w.rule == r.canonical => format!("write: {} ({})", w.reason, w.key),
            Some(w) => format!("write: inside {}, {} ({})", w.rule, w.reason, w.key),
            None => "write".to_string(),
        },
        Access::Read => match &r.read_only {
            Some(ro) => format!("read: read-only inside a writable root, by {}", rule(ro)),
            None if r.exists => "read: outside every writable root, so read-only".to_string(),
            None => "read: outside every writable root, so a call cannot create it".to_string(),
        },
    };
    line(&mut out, "access", &access);
    if let Some(f) = &r.floor {
        line(
            &mut out,
            "floor",
            &format!("{}: no mode writes it without you", rule(f)),
        );
    }
    let fix = match &r.grant {
        None => "none needed".to_string(),
        Some(g) => {
            let (name, path) = match &g.grant {
                Grant::Write { path } => ("write", path.as_str()),
                Grant::Unmask { path } => ("unmask", path.as_str()),
                Grant::Socket { path } => ("socket", path.as_str()),
                Grant::Device { path } => ("device", path.as_str()),
                // The other kinds name no path: the kind is the whole fix.
                other => (other.kind_str(), ""),
            };
            let what = if path.is_empty() {
                name.to_string()
            } else {
                format!("{name}={path}")
            };
            if g.user_only {
                format!(
                    "grant {what} ({}); only you can approve it, in every mode",
                    g.effect
                )
            } else {
                format!("grant {what} if this call really needs it ({})", g.effect)
            }
        }
    };
    line(&mut out, "fix", &fix);
    if r.non_utf8 {
        line(
            &mut out,
            "note",
            "the path has bytes that are not utf-8; each shows as \\xNN",
        );
    }
    out
}
