//! Bytes relayed both ways with what the call sends scanned for placeholders: the relays of
//! a call holding a credential that carry no HTTP the broker could read request by request
//! (a `tcp` grant's relay, an upgraded connection such as a websocket).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::rewrite::Scanner;

/// The reads of a scanned relay.
const CHUNK: usize = 16 << 10;

/// Relays `call` and `up` both ways until both have ended (or `count`, given every chunk's
/// length before it is written, says the budget is spent). What the call sends is fed to
/// `scan`: a placeholder seen ends the relay at once, before the chunk that completes it is
/// written, and its credential's index is returned.
pub(crate) async fn relay<A, B>(
    call: A,
    up: B,
    mut scan: Scanner,
    count: &(dyn Fn(usize) -> bool + Sync),
) -> Option<usize>
where
    A: AsyncRead + AsyncWrite,
    B: AsyncRead + AsyncWrite,
{
    let (mut cr, mut cw) = tokio::io::split(call);
    let (mut ur, mut uw) = tokio::io::split(up);
    let upward = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Some(i) = scan.feed(&buf[..n]) {
                return Some(i);
            }
            if !count(n) || uw.write_all(&buf[..n]).await.is_err() {
                return None;
            }
        }
        let _ = uw.shutdown().await;
        None
    };
    let downward = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match ur.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if !count(n) || cw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
        let _ = cw.shutdown().await;
    };
    tokio::pin!(upward, downward);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        tokio::select! {
            seen = &mut upward, if !up_done => {
                if seen.is_some() {
                    return seen;
                }
                up_done = true;
            }
            () = &mut downward, if !down_done => down_done = true,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::{BrokerCredential, Send};

    fn creds() -> Vec<BrokerCredential> {
        vec![BrokerCredential {
            name: "forge".into(),
            hosts: vec![("forge.test".into(), 443)],
            secret: "glpat-RealSecretRealSecret01".into(),
            placeholder: "glpat-PlaceholderPlaceholde".into(),
            send: Send::Bearer,
        }]
    }

    /// Clean bytes pass both ways; a placeholder split over two writes ends the relay and
    /// the part that completes it never reaches the other side.
    #[tokio::test]
    async fn a_placeholder_ends_the_relay_before_it_is_written() {
        let c = creds();
        let (call, mut call_far) = tokio::io::duplex(1 << 16);
        let (up, mut up_far) = tokio::io::duplex(1 << 16);
        let scan = Scanner::new(&c, "127.0.0.1", 9000);
        let relay = tokio::spawn(async move { relay(call, up, scan, &|_| true).await });
        call_far.write_all(b"hello ").await.unwrap();
        let mut got = [0u8; 6];
        up_far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello ");
        up_far.write_all(b"answer").await.unwrap();
        call_far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"answer");
        call_far.write_all(b"token=glpat-Placeh").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        call_far
            .write_all(b"olderPlaceholde and more")
            .await
            .unwrap();
        assert_eq!(relay.await.unwrap(), Some(0));
        let mut rest = Vec::new();
        up_far.read_to_end(&mut rest).await.unwrap();
        let rest = String::from_utf8_lossy(&rest);
        assert!(!rest.contains("olderPlaceholde"), "{rest}");
    }

    /// Without a placeholder the relay ends when both sides have, every byte counted.
    #[tokio::test]
    async fn clean_relays_end_with_both_sides_and_count_every_byte() {
        let c = creds();
        let (call, mut call_far) = tokio::io::duplex(1 << 16);
        let (up, mut up_far) = tokio::io::duplex(1 << 16);
        let scan = Scanner::new(&c, "forge.test", 443);
        let counted = std::sync::atomic::AtomicUsize::new(0);
        let relay = async {
            relay(call, up, scan, &|n| {
                counted.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                true
            })
            .await
        };
        let far = async {
            // The bound host may receive the placeholder: nothing to scan for.
            call_far
                .write_all(b"glpat-PlaceholderPlaceholde")
                .await
                .unwrap();
            call_far.shutdown().await.unwrap();
            let mut got = Vec::new();
            up_far.read_to_end(&mut got).await.unwrap();
            up_far.write_all(b"ok").await.unwrap();
            up_far.shutdown().await.unwrap();
            let mut back = Vec::new();
            call_far.read_to_end(&mut back).await.unwrap();
            (got, back)
        };
        let (r, (got, back)) = tokio::join!(relay, far);
        assert_eq!(r, None);
        assert_eq!(got, b"glpat-PlaceholderPlaceholde");
        assert_eq!(back, b"ok");
        assert_eq!(counted.load(std::sync::atomic::Ordering::Relaxed), 29);
    }
}
