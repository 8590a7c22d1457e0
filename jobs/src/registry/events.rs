//! The jobs' events (`job_ended`, `job_watch_matched`, `job_port_forwarded`): numbered in
//! one sequence, the last [`KEPT`] kept for a reader that comes back (`since`), and sent to
//! the readers of `sandbox.job_events` as they happen. A reader too slow for [`LIVE`]
//! events gets a `lagged` event with how many it missed.

use std::collections::VecDeque;
use std::sync::Mutex;

use efr_sandbox_wire::job::{JobEvent, JobEventKind};
use tokio::sync::broadcast;

/// Events kept for replay.
pub const KEPT: usize = 4096;
/// Events a live reader may be behind before it misses some.
pub const LIVE: usize = 1024;

#[derive(Debug, Default)]
struct Log {
    seq: u64,
    kept: VecDeque<JobEvent>,
}

/// The service's job events.
#[derive(Debug)]
pub struct Events {
    log: Mutex<Log>,
    live: broadcast::Sender<JobEvent>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            log: Mutex::new(Log::default()),
            live: broadcast::channel(LIVE).0,
        }
    }
}

/// A reader's view: what it missed since its `since`, and the live events after.
#[derive(Debug)]
pub struct Reader {
    /// Kept events after `since` (of the reader's conversation).
    pub replay: Vec<JobEvent>,
    /// Events from now on (of every conversation: filter them).
    pub live: broadcast::Receiver<JobEvent>,
}

impl Events {
    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records and sends an event; its number.
    pub fn emit(&self, conversation: Option<&str>, job_id: &str, what: JobEventKind) -> u64 {
        let mut log = self.lock();
        log.seq += 1;
        let ev = JobEvent {
            seq: log.seq,
            conversation_id: conversation.map(str::to_owned),
            job_id: job_id.to_owned(),
            what,
        };
        if log.kept.len() == KEPT {
            log.kept.pop_front();
        }
        log.kept.push_back(ev.clone());
        // Sent under the lock: a reader that subscribes sees each event once, in its
        // replay or live. No reader is no error.
        let _ = self.live.send(ev);
        log.seq
    }

    /// A reader of `conversation`'s events after `since` (none replayed when `None`).
    pub fn read(&self, conversation: Option<&str>, since: Option<u64>) -> Reader {
        let log = self.lock();
        let replay = match since {
            Some(s) => log
                .kept
                .iter()
                .filter(|e| e.seq > s && e.conversation_id.as_deref() == conversation)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        Reader {
            replay,
            live: self.live.subscribe(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matched(n: u32) -> JobEventKind {
        JobEventKind::JobWatchMatched {
            line: format!("line {n}"),
            wakes_left: n,
        }
    }

    #[test]
    fn a_reader_gets_each_event_once_and_only_its_conversations() {
        let ev = Events::default();
        ev.emit(Some("a"), "j1", matched(1));
        ev.emit(Some("b"), "j1", matched(2));
        let s = ev.emit(Some("a"), "j2", matched(3));
        let mut r = ev.read(Some("a"), Some(0));
        assert_eq!(
            r.replay.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![1, s]
        );
        ev.emit(Some("a"), "j2", matched(4));
        let live = r.live.try_recv().unwrap();
        assert_eq!(live.seq, 4);
        assert!(r.live.try_recv().is_err());
        // Since the last one: nothing to replay.
        assert!(ev.read(Some("a"), Some(4)).replay.is_empty());
        assert!(ev.read(None, Some(0)).replay.is_empty());
    }

    #[test]
    fn only_the_last_events_are_kept() {
        let ev = Events::default();
        let kept = u32::try_from(KEPT).expect("KEPT fits a u32");
        for i in 0..kept + 10 {
            ev.emit(None, "j1", matched(i));
        }
        let r = ev.read(None, Some(0));
        assert_eq!(r.replay.len(), KEPT);
        assert_eq!(r.replay[0].seq, 11);
    }
}
