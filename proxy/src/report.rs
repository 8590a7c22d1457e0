//! Refusals counted per (host, port, reason), the call's summary, and refusal events.

use std::collections::HashMap;
use std::net::IpAddr;

use efr_sandbox_wire::summary::{BlockReason, Blocked, CredentialUse, SandboxSummary};

/// Most `blocked` entries in a summary.
pub const MAX_BLOCKED: usize = 32;

/// Most distinct (host, port, reason) a report remembers; refusals of further ones are only
/// counted (in `blocked_more`), so a flood of made-up names cannot grow the service's memory.
pub const MAX_ENTRIES: usize = 1024;

/// One refusal, as it happened (for the service to turn into a `host` exit record with
/// source `denial`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The host refused, as [`Decision::Refuse`](crate::Decision::Refuse) names it.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// Why it was refused.
    pub reason: BlockReason,
    /// A `denied` for an answer in a special range: the address and its range (the
    /// record's reason names them, and `[network.resolve]`).
    pub special: Option<Special>,
    /// A `credential` refusal: the name of the credential whose placeholder was sent.
    pub credential: Option<String>,
}

impl Refusal {
    /// A refusal of `host:port` for `reason`, no special address.
    pub fn new(host: impl Into<String>, port: u16, reason: BlockReason) -> Refusal {
        Refusal {
            host: host.into(),
            port,
            reason,
            special: None,
            credential: None,
        }
    }
}

/// The address in a special range that a granted name resolved to (refused `denied`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Special {
    /// The address the name resolved to.
    pub address: IpAddr,
    /// The range's name, as `crate::addr::special_range` gives it ("private", "loopback",
    /// "carrier-grade NAT", ...).
    pub range: &'static str,
}

impl Special {
    /// Why the proxy refused: the address, its range, and the config table that maps a name
    /// on purpose (the exit record adds the lines to paste).
    pub fn explain(&self, host: &str) -> String {
        format!(
            "{host} resolves to {}, in the {} range, which the proxy never dials for a name \
             it resolved itself; to reach that address on purpose, map the name to it in \
             the [network.resolve] table of the config",
            self.address, self.range
        )
    }
}

/// The refusals of one call, in first-seen order.
#[derive(Debug, Default)]
pub struct Report {
    entries: Vec<Blocked>,
    /// The special address of each entry (the first seen), parallel to `entries`.
    special: Vec<Option<Special>>,
    /// The credential of each `credential` entry (the first seen), parallel to `entries`.
    credential: Vec<Option<String>>,
    index: HashMap<(String, u16, BlockReason), usize>,
    /// Refusals of entries past [`MAX_ENTRIES`].
    unlisted: u32,
    /// The broker's credential uses, first-seen order (at most [`MAX_ENTRIES`]).
    uses: Vec<CredentialUse>,
    uses_index: HashMap<(String, String, String, String), usize>,
    /// Uses of entries past [`MAX_ENTRIES`].
    uses_unlisted: u32,
}

/// Most `credentials_used` entries in a summary.
pub const MAX_USES: usize = 32;

impl Report {
    /// Count one refusal; `false` when it has no entry (past [`MAX_ENTRIES`] distinct ones:
    /// only counted in `blocked_more`).
    pub fn add(&mut self, r: &Refusal) -> bool {
        let key = (r.host.clone(), r.port, r.reason);
        match self.index.get(&key) {
            Some(&i) => {
                self.entries[i].count = self.entries[i].count.saturating_add(1);
                if self.special[i].is_none() {
                    self.special[i] = r.special;
                }
                if self.credential[i].is_none() {
                    self.credential[i].clone_from(&r.credential);
                }
            }
            None if self.entries.len() >= MAX_ENTRIES => {
                self.unlisted = self.unlisted.saturating_add(1);
                return false;
            }
            None => {
                self.index.insert(key, self.entries.len());
                self.entries.push(Blocked {
                    host: r.host.clone(),
                    port: r.port,
                    reason: r.reason,
                    count: 1,
                });
                self.special.push(r.special);
                self.credential.push(r.credential.clone());
            }
        }
        true
    }

    /// Every entry, first-seen order (at most [`MAX_ENTRIES`]).
    pub fn all(&self) -> &[Blocked] {
        &self.entries
    }

    /// Every entry as a refusal with its special address and credential, first-seen order.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.entries
            .iter()
            .zip(&self.special)
            .zip(&self.credential)
            .map(|((b, s), c)| Refusal {
                host: b.host.clone(),
                port: b.port,
                reason: b.reason,
                special: *s,
                credential: c.clone(),
            })
            .collect()
    }

    /// `(blocked, blocked_more)`: at most 32 entries, those with the highest counts (ties in
    /// first-seen order), listed in first-seen order; `blocked_more` is the number of
    /// refusals (sum of counts) of the entries left out, and of those past [`MAX_ENTRIES`].
    pub fn blocked(&self) -> (Vec<Blocked>, u32) {
        if self.entries.len() <= MAX_BLOCKED {
            return (self.entries.clone(), self.unlisted);
        }
        let mut order: Vec<usize> = (0..self.entries.len()).collect();
        order.sort_by(|&a, &b| {
            self.entries[b]
                .count
                .cmp(&self.entries[a].count)
                .then(a.cmp(&b))
        });
        let (keep, drop) = order.split_at(MAX_BLOCKED);
        let mut keep = keep.to_vec();
        keep.sort_unstable();
        let more = drop.iter().fold(self.unlisted, |acc, &i| {
            acc.saturating_add(self.entries[i].count)
        });
        (
            keep.into_iter().map(|i| self.entries[i].clone()).collect(),
            more,
        )
    }

    /// The proxy's part of the call's `sandbox_summary`: `proxied`, `blocked`, `blocked_more`.
    pub fn summary(&self) -> SandboxSummary {
        let (blocked, blocked_more) = self.blocked();
        let shown = self.uses.len().min(MAX_USES);
        let more: u32 = self.uses[shown..]
            .iter()
            .map(|u| u.count)
            .fold(0, u32::saturating_add);
        SandboxSummary {
            proxied: true,
            blocked,
            blocked_more,
            credentials_used: self.uses[..shown].to_vec(),
            credentials_used_more: more.saturating_add(self.uses_unlisted),
            ..Default::default()
        }
    }

    /// Count one request in which the broker sent credential `name` to `host` (`path`
    /// without its query).
    pub fn add_use(&mut self, name: &str, host: &str, method: &str, path: &str) {
        let key = (
            name.to_string(),
            host.to_string(),
            method.to_string(),
            path.to_string(),
        );
        match self.uses_index.get(&key) {
            Some(&i) => self.uses[i].count = self.uses[i].count.saturating_add(1),
            None if self.uses.len() >= MAX_ENTRIES => {
                self.uses_unlisted = self.uses_unlisted.saturating_add(1);
            }
            None => {
                self.uses_index.insert(key, self.uses.len());
                self.uses.push(CredentialUse {
                    name: name.to_string(),
                    host: host.to_string(),
                    method: method.to_string(),
                    path: path.to_string(),
                    count: 1,
                });
            }
        }
    }

    /// Every credential use, first-seen order (at most [`MAX_ENTRIES`]).
    pub fn uses(&self) -> &[CredentialUse] {
        &self.uses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_address_is_kept_per_entry() {
        let mut r = Report::default();
        let sp = Special {
            address: "10.1.2.3".parse().unwrap(),
            range: "private",
        };
        r.add(&Refusal::new("a.test", 443, BlockReason::Denied));
        r.add(&Refusal {
            special: Some(sp),
            ..Refusal::new("a.test", 443, BlockReason::Denied)
        });
        r.add(&Refusal::new("b.test", 443, BlockReason::NotAllowed));
        r.add(&Refusal {
            credential: Some("forge".into()),
            ..Refusal::new("paste.test", 443, BlockReason::Credential)
        });
        let all = r.refusals();
        assert_eq!(all[2].credential.as_deref(), Some("forge"));
        let all = &all[..2];
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].special, Some(sp));
        assert_eq!(all[1].special, None);
        let why = sp.explain("a.test");
        assert!(
            why.contains("10.1.2.3") && why.contains("private range"),
            "{why}"
        );
        assert!(why.contains("the [network.resolve] table"), "{why}");
    }

    #[test]
    fn cap() {
        let mut r = Report::default();
        for i in 0..40u16 {
            for _ in 0..(if i == 39 { 5 } else { 1 }) {
                r.add(&Refusal::new(
                    format!("h{i}.test"),
                    443,
                    BlockReason::NotAllowed,
                ));
            }
        }
        let s = r.summary();
        assert!(s.proxied);
        assert_eq!(s.blocked.len(), 32);
        assert_eq!(s.blocked_more, 8);
        assert_eq!(s.blocked.last().unwrap().host, "h39.test");
        assert_eq!(s.blocked.last().unwrap().count, 5);
        assert_eq!(s.blocked[0].host, "h0.test");
    }

    #[test]
    fn distinct_entries_are_bounded() {
        let mut r = Report::default();
        let refusal = |i: usize| Refusal::new(format!("n{i}.test"), 443, BlockReason::NotAllowed);
        for i in 0..MAX_ENTRIES + 10 {
            assert_eq!(r.add(&refusal(i)), i < MAX_ENTRIES, "{i}");
        }
        // A known entry still counts; a new one past the bound does not get one.
        assert!(r.add(&refusal(0)));
        assert!(!r.add(&refusal(MAX_ENTRIES + 20)));
        assert_eq!(r.all().len(), MAX_ENTRIES);
        let s = r.summary();
        assert_eq!(s.blocked.len(), MAX_BLOCKED);
        assert_eq!(s.blocked[0].host, "n0.test");
        assert_eq!(s.blocked[0].count, 2);
        // Every refusal is in the summary: 32 listed (one of them twice), the rest more.
        let listed: u32 = s.blocked.iter().map(|b| b.count).sum();
        assert_eq!(
            listed + s.blocked_more,
            u32::try_from(MAX_ENTRIES + 10 + 2).unwrap()
        );
    }
}
