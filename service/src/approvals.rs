//! Approvals the user gives to the CLI routes' refused calls (`efr-sandbox run` and
//! `efr-sandbox shell`/`efr-bash` handed to the service): a call refused something a grant
//! opens waits here as a pending approval; `efr-sandbox approve ID` makes its grants
//! standing grants of the call's conversation (added by `sandbox.run` to that
//! conversation's later calls of the same uid), `deny ID` drops it.
//!
//! Both live in `approvals.json` in the service's state dir (`$XDG_STATE_HOME/efr-sandbox`,
//! masked in every call, like the socket: nothing inside a call reads or writes them), an
//! [`ApprovalStore`] written whole to a temporary file and renamed over the old one on
//! every change, so that they outlast the service's idle exit. A file that does not read
//! is kept aside as `approvals.json.bad` (said in the service's log) and the service
//! starts with none: a corrupt file never stops a call.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use efr_sandbox_wire::approval::{PendingApproval, valid_approval_id};
use efr_sandbox_wire::{
    Approval, ApprovalRef, ApprovalStore, ExitRecord, Grant, Needs, StandingGrants,
};

/// The bounds of the store, in one place.
pub mod limits {
    use std::time::Duration;

    /// Most pending approvals kept (per service, all uids); the oldest goes first. A
    /// conversation of malicious calls can refuse itself many times: the user's list stays
    /// readable and the file small (one approval is a few KiB of exit records).
    pub const PENDING_MAX: usize = 256;
    /// How long a pending approval waits: a day covers a user who comes back to an agent's
    /// session the next morning; older ones are of calls nobody will retry.
    pub const PENDING_TTL: Duration = Duration::from_secs(24 * 3600);
    /// Most conversations with standing grants kept; the oldest approved goes first.
    pub const STANDING_MAX: usize = 1024;
    /// The characters of an id: short enough to type, and with 36^4 ids far more than
    /// [`PENDING_MAX`] (a collision draws again).
    pub const ID_LEN: usize = 4;
}

/// The store's file name in the state dir.
pub const FILE: &str = "approvals.json";

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("no pending approval {0:?} (`efr-sandbox approvals` lists them)")]
    Unknown(String),
    #[error(
        "approval {0} is of a call of no conversation, so there is none to grant it to: \
         retry that call with its --grant, or approve it with --always"
    )]
    NoConversation(String),
    #[error("cannot save {path}: {source}")]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The service's approvals: the store and its file.
#[derive(Debug)]
pub struct Approvals {
    path: PathBuf,
    store: Mutex<ApprovalStore>,
}

/// Now, in Unix milliseconds.
fn now() -> u64 {
    efr_jobs::now_ms()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The grants of a record that a grant opens; `None` when none does.
fn record_grants(r: &ExitRecord) -> Option<&[Grant]> {
    match &r.needs {
        Needs::Contained { grants } if !grants.is_empty() => Some(grants),
        _ => None,
    }
}

/// A new id none of `taken` has.
fn new_id(taken: &[&str]) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    loop {
        let mut bytes = [0u8; limits::ID_LEN];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if read.is_err() {
            // No urandom: the clock's nanoseconds, still unique by the loop below.
            let n = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            bytes = n.to_le_bytes();
        }
        let id: String = bytes
            .iter()
            .map(|b| char::from(CHARS[usize::from(*b) % CHARS.len()]))
            .collect();
        if !taken.contains(&id.as_str()) {
            return id;
        }
    }
}

impl Approvals {
    /// The store at `dir/approvals.json`, read now (see the module doc for a bad file).
    pub fn open(dir: &Path) -> Approvals {
        let path = dir.join(FILE);
        let store = match std::fs::read(&path) {
            Ok(text) => ApprovalStore::parse(&text).unwrap_or_else(|e| {
                let bad = dir.join(format!("{FILE}.bad"));
                let kept = std::fs::rename(&path, &bad)
                    .map(|()| format!("kept as {}", bad.display()))
                    .unwrap_or_else(|e| format!("cannot keep it aside: {e}"));
                eprintln!(
                    "efr-sandbox: {} does not read ({e}); {kept}; starting with no approvals",
                    path.display()
                );
                ApprovalStore::default()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ApprovalStore::default(),
            Err(e) => {
                eprintln!(
                    "efr-sandbox: cannot read {}: {e}; starting with no approvals",
                    path.display()
                );
                ApprovalStore::default()
            }
        };
        Approvals {
            path,
            store: Mutex::new(store),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ApprovalStore> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the store whole (a temporary file renamed over the old one).
    fn save(&self, s: &ApprovalStore) -> Result<(), DecideError> {
        let err = |source| DecideError::Save {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(dir).map_err(err)?;
        let mut s = s.clone();
        s.version = ApprovalStore::VERSION;
        let text = serde_json::to_vec_pretty(&s).map_err(|e| err(e.into()))?;
        let tmp = dir.join(format!(".{FILE}.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(err)?;
        f.write_all(&text)
            .and_then(|()| f.sync_all())
            .map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)
    }

    /// Saves, saying in the log when it fails (the call's end is not held up by it).
    fn save_logged(&self, s: &ApprovalStore) {
        if let Err(e) = self.save(s) {
            eprintln!("efr-sandbox: {e}");
        }
    }

    /// Drops what has expired: pending approvals older than a day, standing grants older
    /// than `standing_ttl`.
    fn prune(s: &mut ApprovalStore, standing_ttl: Duration) {
        let t = now();
        s.pending
            .retain(|p| t.saturating_sub(p.approval.at) < ms(limits::PENDING_TTL));
        s.standing
            .retain(|g| t.saturating_sub(g.at) < ms(standing_ttl));
    }

    /// Records the refused call's approvable exit records as one pending approval (the same
    /// line, conversation and grants refused again keep their id); the refs for the finish.
    pub fn record(
        &self,
        uid: u32,
        line: &str,
        conversation: Option<&str>,
        projects: &[String],
        exits: &[ExitRecord],
        standing_ttl: Duration,
    ) -> Vec<ApprovalRef> {
        let approvable: Vec<&ExitRecord> = exits
            .iter()
            .filter(|r| record_grants(r).is_some())
            .collect();
        if approvable.is_empty() {
            return Vec::new();
        }
        let mut grants: Vec<Grant> = Vec::new();
        for g in approvable.iter().filter_map(|r| record_grants(r)).flatten() {
            if !grants.contains(g) {
                grants.push(g.clone());
            }
        }
        let mut s = self.lock();
        Self::prune(&mut s, standing_ttl);
        let same = s.pending.iter().position(|p| {
            p.uid == uid
                && p.approval.line == line
                && p.approval.conversation.as_deref() == conversation
                && p.approval.grants == grants
        });
        let id = match same {
            Some(i) => s.pending.remove(i).approval.id,
            None => {
                let taken: Vec<&str> = s.pending.iter().map(|p| p.approval.id.as_str()).collect();
                new_id(&taken)
            }
        };
        let approval = Approval {
            id: id.clone(),
            line: line.to_string(),
            conversation: conversation.map(str::to_string),
            projects: projects.to_vec(),
            exits: approvable.iter().map(|r| (*r).clone()).collect(),
            grants,
            at: now(),
        };
        s.pending.push(PendingApproval { uid, approval });
        let over = s.pending.len().saturating_sub(limits::PENDING_MAX);
        s.pending.drain(..over);
        self.save_logged(&s);
        approvable
            .iter()
            .map(|r| ApprovalRef {
                exit: r.id.clone(),
                approval: id.clone(),
            })
            .collect()
    }

    /// The pending approvals of `uid`, oldest first.
    pub fn list(&self, uid: u32, standing_ttl: Duration) -> Vec<Approval> {
        let mut s = self.lock();
        Self::prune(&mut s, standing_ttl);
        s.pending
            .iter()
            .filter(|p| p.uid == uid)
            .map(|p| p.approval.clone())
            .collect()
    }

    /// The pending approval `id` of `uid`.
    pub fn get(&self, uid: u32, id: &str) -> Result<Approval, DecideError> {
        let s = self.lock();
        s.pending
            .iter()
            .find(|p| p.uid == uid && p.approval.id == id && valid_approval_id(id))
            .map(|p| p.approval.clone())
            .ok_or_else(|| DecideError::Unknown(id.to_string()))
    }

    /// Takes the pending approval `id` of `uid` off the list; with `grant`, its grants
    /// become standing grants of its conversation first.
    pub fn decide(&self, uid: u32, id: &str, grant: bool) -> Result<Approval, DecideError> {
        let mut s = self.lock();
        let i = s
            .pending
            .iter()
            .position(|p| p.uid == uid && p.approval.id == id)
            .ok_or_else(|| DecideError::Unknown(id.to_string()))?;
        let a = s.pending[i].approval.clone();
        if grant {
            let conv = a
                .conversation
                .clone()
                .ok_or_else(|| DecideError::NoConversation(id.to_string()))?;
            let at = now();
            match s
                .standing
                .iter_mut()
                .find(|g| g.uid == uid && g.conversation == conv)
            {
                Some(g) => {
                    for x in &a.grants {
                        if !g.grants.contains(x) {
                            g.grants.push(x.clone());
                        }
                    }
                    g.at = at;
                }
                None => s.standing.push(StandingGrants {
                    conversation: conv,
                    uid,
                    grants: a.grants.clone(),
                    at,
                }),
            }
            s.standing.sort_by_key(|g| g.at);
            let over = s.standing.len().saturating_sub(limits::STANDING_MAX);
            s.standing.drain(..over);
        }
        s.pending.remove(i);
        self.save(&s)?;
        Ok(a)
    }

    /// The standing grants of `conversation` for calls of `uid`.
    pub fn standing(&self, uid: u32, conversation: &str, standing_ttl: Duration) -> Vec<Grant> {
        let t = now();
        self.lock()
            .standing
            .iter()
            .filter(|g| {
                g.uid == uid
                    && g.conversation == conversation
                    && t.saturating_sub(g.at) < ms(standing_ttl)
            })
            .flat_map(|g| g.grants.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86400);

    fn host_record(id: &str, host: &str) -> ExitRecord {
        let mut r = efr_sandbox_wire::fixtures::example_exit_record();
        r.id = id.into();
        r.needs = Needs::Contained {
            grants: vec![Grant::Host {
                host: host.into(),
                port: None,
                plain_http: false,
                tcp: false,
            }],
        };
        r
    }

    #[test]
    fn pending_are_kept_bounded_reused_and_granted_per_conversation() {
        let d = tempfile::tempdir().unwrap();
        let a = Approvals::open(d.path());
        let r = [host_record("host-1", "a.test")];
        let refs = a.record(1, "curl a.test", Some("c1"), &[], &r, DAY);
        assert_eq!(refs.len(), 1);
        let again = a.record(1, "curl a.test", Some("c1"), &[], &r, DAY);
        assert_eq!(refs, again, "the same refusal keeps its id");
        // A record no grant opens is no approval.
        let mut none = host_record("x", "b.test");
        none.needs = Needs::Nothing;
        assert!(a.record(1, "y", Some("c1"), &[], &[none], DAY).is_empty());
        assert_eq!(a.list(1, DAY).len(), 1);
        assert!(a.list(2, DAY).is_empty(), "another uid sees none");
        // Another uid cannot decide it.
        let id = refs[0].approval.clone();
        assert!(matches!(
            a.decide(2, &id, true),
            Err(DecideError::Unknown(_))
        ));
        a.decide(1, &id, true).unwrap();
        assert_eq!(a.standing(1, "c1", DAY).len(), 1);
        assert!(a.standing(1, "c2", DAY).is_empty());
        assert!(a.standing(2, "c1", DAY).is_empty());
        // Kept across a restart.
        let b = Approvals::open(d.path());
        assert_eq!(b.standing(1, "c1", DAY).len(), 1);
        assert!(b.list(1, DAY).is_empty());
        // Bounded.
        for i in 0..(limits::PENDING_MAX + 10) {
            b.record(1, &format!("curl {i}"), Some("c1"), &[], &r, DAY);
        }
        let l = b.list(1, DAY);
        assert_eq!(l.len(), limits::PENDING_MAX);
        assert_eq!(l[0].line, "curl 10");
        let mut ids: Vec<&str> = l.iter().map(|a| a.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), limits::PENDING_MAX, "ids are unique");
    }

    #[test]
    fn a_corrupt_file_is_kept_aside_and_no_call_fails() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(FILE), b"{\"version\": 1, \"pending\": [{]").unwrap();
        let a = Approvals::open(d.path());
        assert!(a.list(1, DAY).is_empty());
        assert!(d.path().join("approvals.json.bad").exists());
        let refs = a.record(1, "l", Some("c"), &[], &[host_record("h", "a.test")], DAY);
        assert_eq!(refs.len(), 1);
        let text = std::fs::read(d.path().join(FILE)).unwrap();
        assert_eq!(ApprovalStore::parse(&text).unwrap().pending.len(), 1);
    }
}
