//! Reading a head or a TLS hello that arrives in many small pieces less often.
//!
//! A client sends a request head in one write, or a few; a line that writes it a hundred
//! bytes at a time on many connections makes the proxy wake, read and re-parse for every
//! piece, and the proxy's thread then takes a processor the other calls need (measured in
//! `scripts/bench-isolation.sh`, neighbour `heads`: the proxy used as much CPU as the line
//! itself). After a few pieces that did not complete it, the reader waits a moment before
//! each further read, so what arrived meanwhile is read and parsed at once. A head sent in a
//! few writes never waits; a trickled one waits at most its length in pauses (16 KiB heads
//! are read 4 KiB at a time), well inside the handshake deadline.

use std::time::Duration;

/// Pieces read at once, as they arrive.
pub const PROMPT_READS: u32 = 4;

/// The wait before each further read.
pub const PAUSE: Duration = Duration::from_millis(25);

/// Counts the reads of one head (or hello) and waits before those past [`PROMPT_READS`].
#[derive(Debug, Default)]
pub struct Pacer {
    reads: u32,
}

impl Pacer {
    /// Call before each read.
    pub async fn before_read(&mut self) {
        if self.reads >= PROMPT_READS {
            tokio::time::sleep(PAUSE).await;
        }
        self.reads = self.reads.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

    /// Counts the reads that returned data.
    struct Counting<R> {
        inner: R,
        reads: Arc<AtomicUsize>,
    }

    impl<R: AsyncRead + Unpin> AsyncRead for Counting<R> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let before = buf.filled().len();
            let r = Pin::new(&mut self.inner).poll_read(cx, buf);
            if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                self.reads.fetch_add(1, Ordering::Relaxed);
            }
            r
        }
    }

    /// Reads until `want` bytes arrived, pacing as the proxy does; the number of reads.
    async fn paced_reads(pieces: usize, piece: usize, pace: bool) -> usize {
        let (mut w, r) = tokio::io::duplex(64 << 10);
        let reads = Arc::new(AtomicUsize::new(0));
        let mut r = Counting {
            inner: r,
            reads: reads.clone(),
        };
        let writer = tokio::spawn(async move {
            for _ in 0..pieces {
                w.write_all(&vec![b'a'; piece]).await.unwrap();
                tokio::task::yield_now().await;
            }
            w
        });
        let mut pacer = Pacer::default();
        let mut got = 0;
        let mut chunk = [0u8; 4096];
        while got < pieces * piece {
            if pace {
                pacer.before_read().await;
            }
            got += r.read(&mut chunk).await.unwrap();
        }
        drop(writer.await.unwrap());
        reads.load(Ordering::Relaxed)
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickled_head_is_read_in_a_few_reads_not_one_per_piece() {
        // 64 header lines of 100 bytes, each its own write.
        let unpaced = paced_reads(64, 100, false).await;
        let paced = paced_reads(64, 100, true).await;
        assert!(unpaced >= 32, "the unpaced reader read {unpaced} times");
        // The prompt reads, then one read of all that arrived during the pause (4 KiB at most).
        assert!(
            paced <= PROMPT_READS as usize + 2,
            "the paced reader read {paced} times"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_head_in_a_few_writes_never_waits() {
        let start = tokio::time::Instant::now();
        let reads = paced_reads(PROMPT_READS as usize, 200, true).await;
        assert!(reads <= PROMPT_READS as usize);
        assert_eq!(tokio::time::Instant::now(), start, "a prompt head waited");
    }
}
