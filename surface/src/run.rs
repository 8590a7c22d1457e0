//! The surface as the service and the CLI run it: the scan of the home and the project
//! roots with what a contained call could read under the config in force (the launch
//! view's masks, the settings files shown scrubbed, the answered masks), recorded for a
//! conversation; and the answers.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use efr_policy::config::{Config, Env};
use efr_sandbox_wire::{QuestionId, SurfacePartial, SurfaceRespondResult, SurfaceResult};

use crate::questions::{RespondError, record_scan, respond};
use crate::scan::{Budget, scan};
use crate::state::{StateError, Store};

/// Why a surface scan could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum SurfaceError {
    /// A project root that is not an absolute path (as given).
    #[error("project {0:?} is not an absolute path")]
    Project(String),
    /// A conversation name the launch would not take (as given).
    #[error("conversation {0:?}: 1 to 128 of A-Z a-z 0-9 . _ -")]
    Conversation(String),
    /// Reading or writing the surface's state failed.
    #[error("surface state: {0}")]
    State(#[from] StateError),
}

/// Why an answer could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum SurfaceRespondError {
    /// A conversation name the launch would not take (as given).
    #[error("conversation {0:?}: 1 to 128 of A-Z a-z 0-9 . _ -")]
    Conversation(String),
    /// No open question of that id in the conversation.
    #[error(transparent)]
    NotFound(#[from] RespondError),
    /// Reading or writing the surface's state failed.
    #[error("surface state: {0}")]
    State(#[from] StateError),
}

/// A conversation name as the launch takes it (the same rule as `sandbox.launch`).
pub fn conversation_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The paths a contained call of these projects does not see as they are: the launch
/// view's masks, the settings files it shows scrubbed, and `answered` (the masked
/// answers), each also as its real path.
pub fn hidden(
    config: &Config,
    env: &Env,
    projects: &[PathBuf],
    answered: &[String],
) -> HashSet<PathBuf> {
    let view = config.launch_view(env, projects);
    let mut masks = view.masks;
    let _ = efr_policy::tokens::scrubbed_copies(&env.home, &mut masks);
    masks.extend(answered.iter().cloned());
    let mut set = HashSet::new();
    for m in masks {
        let p = PathBuf::from(m.trim_end_matches('/'));
        if let Ok(c) = std::fs::canonicalize(&p) {
            set.insert(c);
        }
        set.insert(p);
    }
    set
}

/// Scans the home and `projects` as a contained call could read them, and records the
/// scan for `conversation` in `store`: the findings with their questions and the changes
/// since the conversation's last scan.
pub fn surface(
    config: &Config,
    env: &Env,
    store: &Store,
    conversation: &str,
    projects: &[String],
    budget: &Budget,
) -> Result<SurfaceResult, SurfaceError> {
    if !conversation_ok(conversation) {
        return Err(SurfaceError::Conversation(conversation.to_string()));
    }
    let mut roots = Vec::new();
    for p in projects {
        if !p.starts_with('/') {
            return Err(SurfaceError::Project(p.clone()));
        }
        roots.push(PathBuf::from(p));
    }
    let start = Instant::now();
    let answered = store.read()?.masks();
    let hide = hidden(config, env, &roots, &answered);
    // The projects first: a scan cut by its budget has looked at them.
    roots.push(env.home.clone());
    let visible = |p: &Path| !hide.contains(p);
    let s = scan(&roots, &visible, crate::patterns::shipped(), budget);
    let canonical: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    let complete = s.partial.is_none();
    let rec = store.update(|st| {
        let rec = record_scan(st, conversation, &canonical, &s.findings, complete);
        crate::questions::record_watched(st, &s.watched);
        rec
    })?;
    Ok(SurfaceResult {
        files: rec.files,
        changes: rec.changes,
        partial: s.partial.map(|p| SurfacePartial {
            why: p.why.to_string(),
            at: p.at.display().to_string(),
        }),
        // Saturating: u64::MAX milliseconds are 584 million years.
        ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// Records the answer to a question of `conversation`.
pub fn surface_respond(
    store: &Store,
    conversation: &str,
    question_id: &QuestionId,
    keep: bool,
) -> Result<SurfaceRespondResult, SurfaceRespondError> {
    if !conversation_ok(conversation) {
        return Err(SurfaceRespondError::Conversation(conversation.to_string()));
    }
    let path = store.update(|st| respond(st, conversation, question_id, keep))??;
    Ok(SurfaceRespondResult {
        path,
        keep,
        masked: !keep,
    })
}
