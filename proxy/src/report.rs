//! Refusals counted per (host, port, reason), the call's summary, and refusal events.

use std::collections::HashMap;

use efr_sandbox_wire::summary::{BlockReason, Blocked, SandboxSummary};

/// Most `blocked` entries in a summary.
pub const MAX_BLOCKED: usize = 32;

/// One refusal, as it happened (for the service to turn into a `host` exit record with
/// source `denial`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub host: String,
    pub port: u16,
    pub reason: BlockReason,
}

/// The refusals of one call, in first-seen order.
#[derive(Debug, Default)]
pub struct Report {
    entries: Vec<Blocked>,
    index: HashMap<(String, u16, BlockReason), usize>,
}

impl Report {
    /// Count one refusal.
    pub fn add(&mut self, r: &Refusal) {
        let key = (r.host.clone(), r.port, r.reason);
        match self.index.get(&key) {
            Some(&i) => self.entries[i].count = self.entries[i].count.saturating_add(1),
            None => {
                self.index.insert(key, self.entries.len());
                self.entries.push(Blocked {
                    host: r.host.clone(),
                    port: r.port,
                    reason: r.reason,
                    count: 1,
                });
            }
        }
    }

    /// Every entry, first-seen order.
    pub fn all(&self) -> &[Blocked] {
        &self.entries
    }

    /// `(blocked, blocked_more)`: at most 32 entries, those with the highest counts (ties in
    /// first-seen order), listed in first-seen order; `blocked_more` is the number of
    /// refusals (sum of counts) of the entries left out.
    pub fn blocked(&self) -> (Vec<Blocked>, u32) {
        if self.entries.len() <= MAX_BLOCKED {
            return (self.entries.clone(), 0);
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
        let more = drop
            .iter()
            .fold(0u32, |acc, &i| acc.saturating_add(self.entries[i].count));
        (
            keep.into_iter().map(|i| self.entries[i].clone()).collect(),
            more,
        )
    }

    /// The proxy's part of the call's `sandbox_summary`: `proxied`, `blocked`, `blocked_more`.
    pub fn summary(&self) -> SandboxSummary {
        let (blocked, blocked_more) = self.blocked();
        SandboxSummary {
            proxied: true,
            blocked,
            blocked_more,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap() {
        let mut r = Report::default();
        for i in 0..40u16 {
            for _ in 0..(if i == 39 { 5 } else { 1 }) {
                r.add(&Refusal {
                    host: format!("h{i}.test"),
                    port: 443,
                    reason: BlockReason::NotAllowed,
                });
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
}
