//! The loopback test host of the `proxy` check: a TCP listener on `127.0.0.1:<free port>`
//! that reads one TLS ClientHello per connection and answers it with a TLS alert record.
//! It completes no handshake (it has no certificate): what it proves is that a hello with
//! the expected SNI and the check's nonce (the hello's client random) crossed the call's
//! proxy and that the host's answer came back through the tunnel.
//!
//! The answer is a fatal `handshake_failure` alert ([`ALERT_OK`]) when the SNI and the
//! client random are the expected ones, an `illegal_parameter` alert otherwise; the host
//! logs every hello it saw ([`TestHost::seen`]).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use efr_proxy::tls::{HelloError, parse_client_hello};

/// The alert the host answers a hello it expected with (TLS record: alert, TLS 1.2, length
/// 2, fatal, handshake_failure).
pub const ALERT_OK: [u8; 7] = [0x15, 3, 3, 0, 2, 2, 40];
/// The alert for any other hello (fatal, illegal_parameter).
pub const ALERT_BAD: [u8; 7] = [0x15, 3, 3, 0, 2, 2, 47];

/// Where the client random sits in a hello that starts with its record: record header (5),
/// handshake header (4), client version (2).
const RANDOM_AT: usize = 11;

/// How long the host waits for a connection's hello.
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// One hello the host read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The SNI the hello named; `None` when it named none.
    pub sni: Option<String>,
    /// The client random was the expected nonce.
    pub nonce: bool,
}

/// The running host; stops on drop.
#[derive(Debug)]
pub struct TestHost {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TestHost {
    /// Listens on a free loopback port; answers [`ALERT_OK`] to a hello for `name` whose
    /// client random is `nonce`.
    pub fn start(name: &str, nonce: [u8; 32]) -> std::io::Result<TestHost> {
        let l = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        let addr = l.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st2, name) = (seen.clone(), stop.clone(), name.to_string());
        let thread = std::thread::spawn(move || {
            for c in l.incoming() {
                if st2.load(Ordering::Acquire) {
                    break;
                }
                let Ok(c) = c else { continue };
                let (s3, n3) = (s2.clone(), name.clone());
                std::thread::spawn(move || serve(c, &n3, &nonce, &s3));
            }
        });
        Ok(TestHost {
            addr,
            seen,
            stop,
            thread: Some(thread),
        })
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The hellos read so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut c: TcpStream, name: &str, nonce: &[u8; 32], seen: &Mutex<Vec<Seen>>) {
    let _ = c.set_read_timeout(Some(READ_TIMEOUT));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let hello = loop {
        match parse_client_hello(&buf) {
            Ok(h) => break h,
            Err(HelloError::Incomplete) if buf.len() < 64 * 1024 => {}
            Err(_) => {
                let _ = c.write_all(&ALERT_BAD);
                return;
            }
        }
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let got_nonce = buf.get(RANDOM_AT..RANDOM_AT + 32) == Some(&nonce[..]);
    let ok = got_nonce
        && hello
            .sni
            .as_deref()
            .is_some_and(|s| efr_proxy::tls::sni_matches(s, name));
    seen.lock().unwrap_or_else(|e| e.into_inner()).push(Seen {
        sni: hello.sni.clone(),
        nonce: got_nonce,
    });
    let _ = c.write_all(if ok { &ALERT_OK } else { &ALERT_BAD });
    let _ = c.shutdown(std::net::Shutdown::Write);
}

/// A ClientHello record for `sni` whose client random is `nonce`.
pub fn client_hello(sni: &str, nonce: &[u8; 32]) -> Vec<u8> {
    let mut h = efr_proxy::tls::build_client_hello(Some(sni));
    h[RANDOM_AT..RANDOM_AT + 32].copy_from_slice(nonce);
    h
}

/// 32 random bytes (getrandom; the time and pid when it fails).
pub fn nonce() -> [u8; 32] {
    let mut b = [0u8; 32];
    if crate::sys::getrandom(&mut b).ok() != Some(b.len()) {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ u128::from(std::process::id());
        for (i, x) in b.iter_mut().enumerate() {
            #[allow(
                clippy::cast_possible_truncation,
                reason = "a byte of the clock on purpose, and `i` is below 32"
            )]
            let byte = (t >> ((i % 16) * 8)) as u8 ^ i as u8;
            *x = byte;
        }
    }
    b
}

/// Hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Bytes of hex (`None` when malformed or not 32 bytes).
pub fn unhex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut b = [0u8; 32];
    for (i, x) in b.iter_mut().enumerate() {
        *x = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_the_expected_hello_only() {
        let n = nonce();
        let h = TestHost::start("efr-check.test", n).unwrap();
        let ask = |hello: Vec<u8>| {
            let mut c = TcpStream::connect(("127.0.0.1", h.port())).unwrap();
            c.write_all(&hello).unwrap();
            let mut a = Vec::new();
            c.read_to_end(&mut a).unwrap();
            a
        };
        assert_eq!(ask(client_hello("efr-check.test", &n)), ALERT_OK);
        assert_eq!(ask(client_hello("other.test", &n)), ALERT_BAD);
        assert_eq!(ask(client_hello("efr-check.test", &[0; 32])), ALERT_BAD);
        assert_eq!(ask(b"GET / HTTP/1.1\r\n\r\n".to_vec()), ALERT_BAD);
        let s = h.seen();
        assert_eq!(s.len(), 3, "{s:?}");
        assert!(s[0].nonce && s[0].sni.as_deref() == Some("efr-check.test"));
        assert!(!s[2].nonce);
        assert_eq!(unhex32(&hex(&n)), Some(n));
    }
}
