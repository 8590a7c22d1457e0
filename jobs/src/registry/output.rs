//! A job's output: the last `max` bytes it wrote, addressed by offset from its first byte,
//! with the count of all of them. Readers (`sandbox.job_output`) wait for more on
//! [`Output::changed`]; what the bound dropped is reported to them as skipped.

use std::collections::VecDeque;
use std::sync::Mutex;

use efr_sandbox_wire::OutputStream;
use tokio::sync::watch;

/// The largest piece of output one read gives (the size of a launch's `output` items).
pub const PIECE: usize = efr_call::launch::OUTPUT_CHUNK;

/// One piece of output as it came.
#[derive(Debug, Clone)]
pub struct Piece {
    /// The offset of its first byte.
    pub offset: u64,
    /// The stream it came on.
    pub stream: OutputStream,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

#[derive(Debug, Default)]
struct Buf {
    pieces: VecDeque<Piece>,
    kept: usize,
    total: u64,
}

impl Buf {
    fn first_kept(&self) -> u64 {
        self.pieces.front().map_or(self.total, |p| p.offset)
    }
}

/// The bounded output of one job.
#[derive(Debug)]
pub struct Output {
    buf: Mutex<Buf>,
    max: usize,
    /// Bumped at each push and at the end: readers wait on it.
    changed: watch::Sender<u64>,
}

/// What [`Output::read`] gives.
#[derive(Debug, Default)]
pub struct Read {
    /// Bytes before the first kept one that the reader asked for: `(from, to)`.
    pub skipped: Option<(u64, u64)>,
    /// The pieces from the offset asked (the first one may start inside a piece).
    pub pieces: Vec<Piece>,
    /// Where the next read starts.
    pub next: u64,
}

impl Output {
    /// An empty output that keeps at most `max` bytes (at least one piece).
    pub fn new(max: usize) -> Output {
        Output {
            buf: Mutex::new(Buf::default()),
            max: max.max(PIECE),
            changed: watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buf> {
        self.buf.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `bytes` of `stream`; drops the oldest pieces past the bound.
    pub fn push(&self, stream: OutputStream, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut b = self.lock();
        for part in bytes.chunks(PIECE) {
            let offset = b.total;
            b.total += part.len() as u64;
            b.kept += part.len();
            b.pieces.push_back(Piece {
                offset,
                stream,
                bytes: part.to_vec(),
            });
        }
        while b.kept > self.max {
            let Some(front) = b.pieces.pop_front() else {
                break;
            };
            b.kept -= front.bytes.len();
        }
        let total = b.total;
        drop(b);
        self.changed.send_replace(total);
    }

    /// Wakes the readers with nothing new (the job ended).
    pub fn close(&self) {
        self.changed.send_modify(|_| {});
    }

    /// A receiver that sees each change.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Every byte written, kept or not.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    /// Some bytes were dropped by the bound.
    pub fn truncated(&self) -> bool {
        self.lock().first_kept() > 0
    }

    /// The output from `offset`, at most `limit` bytes of it.
    pub fn read(&self, offset: u64, limit: usize) -> Read {
        let b = self.lock();
        let first = b.first_kept();
        let mut r = Read::default();
        let mut at = offset.min(b.total);
        if at < first {
            r.skipped = Some((at, first));
            at = first;
        }
        let mut left = limit;
        for p in &b.pieces {
            let end = p.offset + p.bytes.len() as u64;
            if end <= at || left == 0 {
                if left == 0 {
                    break;
                }
                continue;
            }
            // `at` is inside this piece or before it: both differences fit the piece.
            let skip = usize::try_from(at.saturating_sub(p.offset)).unwrap_or(0);
            let take = (p.bytes.len() - skip).min(left);
            r.pieces.push(Piece {
                offset: p.offset + skip as u64,
                stream: p.stream,
                bytes: p.bytes[skip..skip + take].to_vec(),
            });
            left -= take;
            at = p.offset + (skip + take) as u64;
        }
        r.next = at;
        r
    }

    /// The last lines of the output: at most `max_bytes` of its end, cut at a line start
    /// when there is one, as text (invalid UTF-8 replaced).
    pub fn tail(&self, max_bytes: usize) -> String {
        let b = self.lock();
        let mut bytes: Vec<u8> = Vec::new();
        for p in b.pieces.iter().rev() {
            let mut v = p.bytes.clone();
            v.extend_from_slice(&bytes);
            bytes = v;
            if bytes.len() >= max_bytes {
                break;
            }
        }
        if bytes.len() > max_bytes {
            let cut = bytes.len() - max_bytes;
            let start = bytes[cut..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(cut, |i| cut + i + 1);
            bytes.drain(..start);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_from_any_offset_and_reports_what_the_bound_dropped() {
        let o = Output::new(PIECE);
        o.push(OutputStream::Stdout, &vec![b'a'; PIECE]);
        o.push(OutputStream::Stderr, b"bcd");
        assert_eq!(o.total(), PIECE as u64 + 3);
        // The first piece went: past the bound.
        assert!(o.truncated());
        let r = o.read(0, 1 << 20);
        assert_eq!(r.skipped, Some((0, PIECE as u64)));
        assert_eq!(r.pieces.len(), 1);
        assert_eq!(r.pieces[0].bytes, b"bcd");
        assert_eq!(r.pieces[0].stream, OutputStream::Stderr);
        assert_eq!(r.next, PIECE as u64 + 3);
        let r = o.read(PIECE as u64 + 1, 1);
        assert_eq!(r.skipped, None);
        assert_eq!(r.pieces[0].bytes, b"c");
        assert_eq!(r.next, PIECE as u64 + 2);
        // Past the end: nothing, and the next read starts at the end.
        let r = o.read(1 << 40, 10);
        assert!(r.pieces.is_empty());
        assert_eq!(r.next, PIECE as u64 + 3);
    }

    #[test]
    fn the_tail_starts_at_a_line() {
        let o = Output::new(PIECE);
        o.push(OutputStream::Stdout, b"one\ntwo\nthree\n");
        assert_eq!(o.tail(9), "three\n");
        assert_eq!(o.tail(100), "one\ntwo\nthree\n");
        let e = Output::new(10);
        assert_eq!(e.tail(10), "");
    }

    #[test]
    fn a_flood_keeps_the_bound() {
        let o = Output::new(2 * PIECE);
        for _ in 0..100 {
            o.push(OutputStream::Stdout, &vec![b'x'; 10_000]);
        }
        assert_eq!(o.total(), 1_000_000);
        let r = o.read(0, usize::MAX);
        let kept: usize = r.pieces.iter().map(|p| p.bytes.len()).sum();
        assert!(kept <= 2 * PIECE, "{kept}");
        assert_eq!(r.skipped.map(|(_, to)| to), Some(1_000_000 - kept as u64));
    }
}
