//! The questions: each finding of a scan that no answer covers is a `reported_file` with a
//! `question_id` (`q1`, `q2`, ... per conversation, the same id for the same path in every
//! scan of the conversation); what changed since the conversation's last scan is a list of
//! `surface_change`s; an answer keeps a path visible (no more questions while what it holds
//! stays the same) or masks it in every contained call from then on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use efr_sandbox_wire::{QuestionId, ReportedFile, SurfaceChange, SurfaceChangeKind};

use crate::patterns::Class;
use crate::scan::Finding;
use crate::state::{Answer, Seen, State, TokenFile, stamp};

/// What a recorded scan gives the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// One per finding, sorted by path.
    pub files: Vec<ReportedFile>,
    /// Since the conversation's last scan (none at its first).
    pub changes: Vec<SurfaceChange>,
}

/// One line on what a file holds: `holds a token for github.com (token:...)`.
pub fn describe(class: Class, hosts: &[String], pattern: &str) -> String {
    let what = match class {
        Class::Key => "looks like a private key".to_string(),
        Class::Credentials => "looks like a store of credentials".to_string(),
        Class::Token if hosts.is_empty() => "holds a token".to_string(),
        Class::Token => format!("holds a token for {}", hosts.join(", ")),
        Class::Env => "a dotenv file (keys, database URLs)".to_string(),
        Class::History => "a shell or client history (passwords typed in it)".to_string(),
    };
    let extra = match class {
        Class::Token => String::new(),
        _ if hosts.is_empty() => String::new(),
        _ => format!(", with a token for {}", hosts.join(", ")),
    };
    format!("{what}{extra} ({pattern})")
}

/// Why a path that was seen before differs now.
fn why_changed(old: &Seen, new: &Seen) -> String {
    let added: Vec<&String> = new
        .hosts
        .iter()
        .filter(|h| !old.hosts.contains(h))
        .collect();
    if !added.is_empty() {
        let list: Vec<&str> = added.iter().map(|h| h.as_str()).collect();
        return format!("now holds a token for {}", list.join(", "));
    }
    if old.class != new.class {
        return format!("was {}, now {}", old.class.as_str(), new.class.as_str());
    }
    let gone: Vec<&str> = old
        .hosts
        .iter()
        .filter(|h| !new.hosts.contains(h))
        .map(|h| h.as_str())
        .collect();
    format!("no longer holds a token for {}", gone.join(", "))
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Records a scan of `roots` for `conversation` in `state`: gives each finding its
/// question (unless a kept answer still covers it: same class and hosts), the changes since
/// the conversation's last scan, and replaces the token files under `roots` with the
/// scan's. A scan that is not `complete` (cut by its budget) did not look everywhere: what
/// it did not see is kept as last seen, not reported gone.
pub fn record_scan(
    state: &mut State,
    conversation: &str,
    roots: &[PathBuf],
    findings: &[Finding],
    complete: bool,
) -> Recorded {
    state.scans += 1;
    let scans = state.scans;
    let conv = state
        .conversations
        .entry(conversation.to_string())
        .or_default();
    let first = conv.scanned == 0;
    conv.scanned = scans;
    let mut now: BTreeMap<String, Seen> = BTreeMap::new();
    let mut out = Recorded::default();
    for f in findings {
        let path = f.path.to_string_lossy().into_owned();
        let seen = Seen {
            class: f.class,
            hosts: f.hosts.clone(),
            pattern: f.pattern.clone(),
        };
        let qid = match conv.questions.get(&path) {
            Some(q) => q.clone(),
            None => {
                conv.next = conv.next.max(1);
                let q = QuestionId::from_number(conv.next).as_str().to_string();
                conv.next += 1;
                conv.questions.insert(path.clone(), q.clone());
                q
            }
        };
        let kept = match state.answers.get(&path) {
            Some(a) if a.keep && a.class == seen.class && a.hosts == seen.hosts => true,
            Some(a) if a.keep => {
                // What it holds changed: the answer no longer covers it.
                state.answers.remove(&path);
                false
            }
            _ => false,
        };
        let question_id = (!kept).then(|| QuestionId::new(&qid).ok()).flatten();
        if !first {
            let change = match conv.last.get(&path) {
                None => Some((SurfaceChangeKind::Appeared, describe_seen(&seen))),
                Some(old) if old.class != seen.class || old.hosts != seen.hosts => {
                    Some((SurfaceChangeKind::Changed, why_changed(old, &seen)))
                }
                Some(_) => None,
            };
            if let Some((change, why)) = change {
                out.changes.push(SurfaceChange {
                    path: path.clone(),
                    change,
                    why,
                    masked: false,
                    question_id: question_id.clone(),
                });
            }
        }
        out.files.push(ReportedFile {
            path: path.clone(),
            what: describe_seen(&seen),
            floor: false,
            backup: None,
            class: Some(seen.class.as_str().to_string()),
            hosts: seen.hosts.clone(),
            question_id,
            kept,
        });
        now.insert(path, seen);
    }
    if !complete {
        for (p, seen) in &conv.last {
            now.entry(p.clone()).or_insert_with(|| seen.clone());
        }
    }
    if !first {
        for path in conv.last.keys().filter(|p| !now.contains_key(*p)) {
            let masked = state.answers.get(path).is_some_and(|a| !a.keep);
            out.changes.push(SurfaceChange {
                path: path.clone(),
                change: SurfaceChangeKind::Disappeared,
                why: if masked {
                    "masked in contained calls (your answer)".into()
                } else {
                    "gone, or no longer readable in a contained call".into()
                },
                masked,
                question_id: None,
            });
        }
    }
    conv.last = now;
    out.changes.sort_by(|a, b| a.path.cmp(&b.path));
    // The token files under the roots are the scan's now (a cut scan only adds).
    if complete {
        state
            .tokens
            .retain(|p, _| !roots.iter().any(|r| Path::new(p).starts_with(r)));
    }
    // Files of tokens, credentials and dotenv kinds are watched even without a host yet: a
    // token for a host written into one later is noticed at the next call.
    let watched = |f: &&Finding| {
        !f.hosts.is_empty() || matches!(f.class, Class::Token | Class::Credentials | Class::Env)
    };
    for f in findings.iter().filter(watched) {
        if let Some(s) = stamp(&f.path) {
            state.tokens.insert(
                f.path.to_string_lossy().into_owned(),
                TokenFile {
                    hosts: f.hosts.clone(),
                    stamp: s,
                },
            );
        }
    }
    out
}

/// Records files the scan watches without a question (a dotenv or token file that holds no
/// secret now, [`crate::scan::Scan::watched`]): a token for a host written into one later is
/// denied at the next call, as for a finding.
pub fn record_watched(state: &mut State, watched: &[PathBuf]) {
    for p in watched {
        if let Some(s) = stamp(p) {
            state
                .tokens
                .entry(p.to_string_lossy().into_owned())
                .or_insert(TokenFile {
                    hosts: Vec::new(),
                    stamp: s,
                });
        }
    }
}

fn describe_seen(s: &Seen) -> String {
    describe(s.class, &s.hosts, &s.pattern)
}

/// Why an answer was not recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RespondError {
    /// The conversation has no such open question: an unknown id, or one whose file was not
    /// in its last scan.
    #[error(
        "no open question {question_id} in conversation {conversation:?} (unknown, or its file is gone since the last scan)"
    )]
    NotFound {
        /// The conversation named.
        conversation: String,
        /// The question id named.
        question_id: String,
    },
}

/// Records the answer to question `qid` of `conversation`: the path it is about, which
/// must be a finding of the conversation's last scan.
pub fn respond(
    state: &mut State,
    conversation: &str,
    qid: &QuestionId,
    keep: bool,
) -> Result<String, RespondError> {
    let not_found = || RespondError::NotFound {
        conversation: conversation.to_string(),
        question_id: qid.as_str().to_string(),
    };
    let conv = state
        .conversations
        .get(conversation)
        .ok_or_else(not_found)?;
    let path = conv
        .questions
        .iter()
        .find(|(_, q)| q.as_str() == qid.as_str())
        .map(|(p, _)| p.clone())
        .ok_or_else(not_found)?;
    let seen = conv.last.get(&path).ok_or_else(not_found)?.clone();
    state.answers.insert(
        path.clone(),
        Answer {
            keep,
            class: seen.class,
            hosts: seen.hosts,
            conversation: conversation.to_string(),
            question_id: qid.as_str().to_string(),
            at: now_secs(),
        },
    );
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(path: &str, class: Class, hosts: &[&str]) -> Finding {
        Finding {
            path: PathBuf::from(path),
            class,
            pattern: "glob:x".into(),
            host: hosts.first().map(|h| h.to_string()),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn qid(r: &Recorded, path: &str) -> Option<String> {
        r.files
            .iter()
            .find(|x| x.path == path)
            .and_then(|x| x.question_id.as_ref())
            .map(|q| q.as_str().to_string())
    }

    #[test]
    fn ids_are_per_conversation_and_stable_and_changes_come_from_the_second_scan() {
        let mut st = State::default();
        let roots = [PathBuf::from("/h")];
        let a = f("/h/.aws/credentials", Class::Credentials, &[]);
        let b = f("/h/.npmrc", Class::Token, &["r.example"]);
        let r = record_scan(&mut st, "c1", &roots, &[a.clone(), b.clone()], true);
        assert!(r.changes.is_empty());
        assert_eq!(qid(&r, "/h/.aws/credentials").as_deref(), Some("q1"));
        assert_eq!(qid(&r, "/h/.npmrc").as_deref(), Some("q2"));
        // Another conversation numbers its own.
        let r2 = record_scan(&mut st, "c2", &roots, std::slice::from_ref(&b), true);
        assert_eq!(qid(&r2, "/h/.npmrc").as_deref(), Some("q1"));
        // A token added: changed, with why; a file gone: disappeared; a new one: appeared.
        let b2 = f(
            "/h/.npmrc",
            Class::Token,
            &["r.example", "registry.npmjs.org"],
        );
        let c = f("/h/.env", Class::Env, &[]);
        let r = record_scan(&mut st, "c1", &roots, &[c.clone(), b2.clone()], true);
        assert_eq!(qid(&r, "/h/.npmrc").as_deref(), Some("q2"));
        assert_eq!(qid(&r, "/h/.env").as_deref(), Some("q3"));
        let ch: Vec<(&str, SurfaceChangeKind, &str)> = r
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.change, c.why.as_str()))
            .collect();
        assert_eq!(
            ch,
            [
                (
                    "/h/.aws/credentials",
                    SurfaceChangeKind::Disappeared,
                    "gone, or no longer readable in a contained call"
                ),
                (
                    "/h/.env",
                    SurfaceChangeKind::Appeared,
                    "a dotenv file (keys, database URLs) (glob:x)"
                ),
                (
                    "/h/.npmrc",
                    SurfaceChangeKind::Changed,
                    "now holds a token for registry.npmjs.org"
                ),
            ]
        );
        // The credentials file comes back: the same id as before.
        let r = record_scan(&mut st, "c1", &roots, &[a, c, b2], true);
        assert_eq!(qid(&r, "/h/.aws/credentials").as_deref(), Some("q1"));
    }

    #[test]
    fn keep_stops_asking_until_the_class_or_hosts_change_and_mask_is_listed() {
        let mut st = State::default();
        let roots = [PathBuf::from("/h")];
        let b = f("/h/.npmrc", Class::Token, &["r.example"]);
        let e = f("/h/.env", Class::Env, &[]);
        record_scan(&mut st, "c", &roots, &[e.clone(), b.clone()], true);
        let q1 = QuestionId::new("q1").unwrap();
        let q2 = QuestionId::new("q2").unwrap();
        assert_eq!(respond(&mut st, "c", &q2, true).unwrap(), "/h/.npmrc");
        assert_eq!(respond(&mut st, "c", &q1, false).unwrap(), "/h/.env");
        assert_eq!(st.masks(), ["/h/.env"]);
        let r = record_scan(&mut st, "c", &roots, std::slice::from_ref(&b), true);
        let npmrc = &r.files[0];
        assert!(npmrc.kept && npmrc.question_id.is_none(), "{npmrc:?}");
        // The masked one is not in the scan (the call cannot read it): it disappeared,
        // masked.
        assert_eq!(r.changes.len(), 1);
        assert!(r.changes[0].masked, "{:?}", r.changes);
        // A new token in the kept file: asked again, same id.
        let b2 = f(
            "/h/.npmrc",
            Class::Token,
            &["r.example", "registry.npmjs.org"],
        );
        let r = record_scan(&mut st, "c", &roots, &[b2], true);
        assert_eq!(qid(&r, "/h/.npmrc").as_deref(), Some("q2"));
        assert!(!r.files[0].kept);
        assert!(!st.answers.contains_key("/h/.npmrc"));
    }

    #[test]
    fn a_cut_scan_reports_nothing_gone_and_keeps_what_it_did_not_see() {
        let mut st = State::default();
        let roots = [PathBuf::from("/h")];
        let a = f("/h/a/.env", Class::Env, &[]);
        let b = f("/h/b/.env", Class::Env, &[]);
        record_scan(&mut st, "c", &roots, &[a.clone(), b.clone()], true);
        let r = record_scan(&mut st, "c", &roots, std::slice::from_ref(&a), false);
        assert!(r.changes.is_empty(), "{:?}", r.changes);
        assert!(st.conversations["c"].last.contains_key("/h/b/.env"));
        // Its question stays open.
        let q2 = QuestionId::new("q2").unwrap();
        assert_eq!(respond(&mut st, "c", &q2, true).unwrap(), "/h/b/.env");
        // A full scan that does not see it: gone.
        let r = record_scan(&mut st, "c", &roots, &[a], true);
        assert_eq!(r.changes.len(), 1);
        assert_eq!(r.changes[0].change, SurfaceChangeKind::Disappeared);
    }

    #[test]
    fn unknown_and_stale_ids_are_not_found() {
        let mut st = State::default();
        let roots = [PathBuf::from("/h")];
        let q1 = QuestionId::new("q1").unwrap();
        assert!(matches!(
            respond(&mut st, "c", &q1, true),
            Err(RespondError::NotFound { .. })
        ));
        record_scan(&mut st, "c", &roots, &[f("/h/.env", Class::Env, &[])], true);
        let q9 = QuestionId::new("q9").unwrap();
        assert!(respond(&mut st, "c", &q9, true).is_err());
        assert!(respond(&mut st, "other", &q1, true).is_err());
        // The file is gone at the next scan: its question is stale.
        record_scan(&mut st, "c", &roots, &[], true);
        let e = respond(&mut st, "c", &q1, true).unwrap_err().to_string();
        assert!(e.contains("no open question q1"), "{e}");
    }

    #[test]
    fn token_files_under_the_scanned_roots_are_replaced_others_kept() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let b = t.path().join("b");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("t"), "x").unwrap();
        std::fs::write(b.join("t"), "x").unwrap();
        let mut st = State::default();
        let fa = f(a.join("t").to_str().unwrap(), Class::Token, &["a.example"]);
        let fb = f(b.join("t").to_str().unwrap(), Class::Token, &["b.example"]);
        record_scan(&mut st, "c", std::slice::from_ref(&a), &[fa], true);
        record_scan(&mut st, "c", std::slice::from_ref(&b), &[fb], true);
        assert_eq!(st.tokens.len(), 2);
        record_scan(&mut st, "c", std::slice::from_ref(&a), &[], true);
        assert_eq!(st.tokens.len(), 1);
    }
}
