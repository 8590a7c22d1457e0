//! The relay against a strict stand-in for xdg-dbus-proxy 0.1.4: it reads the auth one line
//! at a time and closes a client whose next bytes are already there before it answered (what
//! 0.1.4 does to a client that sends `BEGIN` and a message too early), then echoes bytes and
//! passes fds back.

use super::*;
use std::io::Read;
use std::os::fd::AsFd;

/// A strict server on `path`; each connection's outcome on the channel: `Ok(n)` the bytes
/// echoed after BEGIN, `Err(why)` when it closed the client.
fn strict_server(path: &Path) -> std::sync::mpsc::Receiver<Result<usize, String>> {
    let l = UnixListener::bind(path).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(strict_one(c));
            });
        }
    });
    rx
}

fn pending(c: &UnixStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let r = matches!(
        nix::sys::socket::recv(
            std::os::fd::AsRawFd::as_raw_fd(c),
            &mut b,
            nix::sys::socket::MsgFlags::MSG_PEEK
        ),
        Ok(n) if n > 0
    );
    c.set_nonblocking(false).unwrap();
    r
}

fn strict_one(mut c: UnixStream) -> Result<usize, String> {
    let mut b = [0u8; 1];
    c.read_exact(&mut b).map_err(|e| e.to_string())?;
    if b[0] != 0 {
        return Err("no nul".into());
    }
    loop {
        let mut line = Vec::new();
        while !line.ends_with(b"\r\n") {
            c.read_exact(&mut b).map_err(|e| e.to_string())?;
            line.push(b[0]);
        }
        if line == b"BEGIN\r\n" {
            break;
        }
        if pending(&c) {
            return Err(format!(
                "bytes after {:?} before its answer",
                String::from_utf8_lossy(&line)
            ));
        }
        let answer: &[u8] = if line.starts_with(b"AUTH EXTERNAL") {
            b"OK 0123456789abcdef\r\n"
        } else if line == b"NEGOTIATE_UNIX_FD\r\n" {
            b"AGREE_UNIX_FD\r\n"
        } else {
            b"ERROR\r\n"
        };
        c.write_all(answer).map_err(|e| e.to_string())?;
    }
    // Echo, fds included.
    let mut buf = [0u8; 4096];
    let mut n = 0;
    loop {
        match crate::sys::recv_with_fds(&c, &mut buf) {
            Ok((0, _)) => return Ok(n),
            Ok((k, fds)) => {
                n += k;
                crate::sys::send_with_fds(&c, &buf[..k], &fds).map_err(|e| e.to_string())?;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn relay(
    d: &Path,
) -> (
    Relay,
    PathBuf,
    std::sync::mpsc::Receiver<Result<usize, String>>,
) {
    let up = d.join("s.up");
    let rx = strict_server(&up);
    let sock = d.join("s.sock");
    (Relay::start(&sock, &up).unwrap(), sock, rx)
}

fn read_until(c: &mut UnixStream, want: &[u8]) -> Vec<u8> {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 256];
    while !got.windows(want.len()).any(|w| w == want) {
        let n = c.read(&mut b).unwrap();
        assert!(n > 0, "ended after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&b[..n]);
    }
    got
}

const HANDSHAKE: &[u8] = b"\0AUTH EXTERNAL 30\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\nl-hello-message";

#[test]
fn the_stand_in_closes_a_client_that_sends_its_handshake_at_once() {
    // The premise: without the relay, the whole handshake at once is refused.
    let d = tempfile::tempdir().unwrap();
    let up = d.path().join("s.up");
    let rx = strict_server(&up);
    let mut c = UnixStream::connect(&up).unwrap();
    c.write_all(HANDSHAKE).unwrap();
    let r = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(r.unwrap_err().contains("before its answer"));
}

#[test]
fn a_handshake_sent_at_once_goes_through_in_lock_step() {
    let d = tempfile::tempdir().unwrap();
    let (mut r, sock, rx) = relay(d.path());
    let mut c = UnixStream::connect(&sock).unwrap();
    c.write_all(HANDSHAKE).unwrap();
    let got = read_until(&mut c, b"l-hello-message");
    assert_eq!(
        got,
        b"OK 0123456789abcdef\r\nAGREE_UNIX_FD\r\nl-hello-message"
    );
    drop(c);
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Ok(15));
    r.stop();
    assert!(!sock.exists());
}

#[test]
fn a_client_that_waits_for_each_answer_is_served_the_same() {
    let d = tempfile::tempdir().unwrap();
    let (_r, sock, _rx) = relay(d.path());
    let mut c = UnixStream::connect(&sock).unwrap();
    c.write_all(b"\0AUTH EXTERNAL 30\r\n").unwrap();
    assert_eq!(read_until(&mut c, b"\r\n"), b"OK 0123456789abcdef\r\n");
    c.write_all(b"NEGOTIATE_UNIX_FD\r\n").unwrap();
    assert_eq!(read_until(&mut c, b"\r\n"), b"AGREE_UNIX_FD\r\n");
    c.write_all(b"BEGIN\r\n").unwrap();
    c.write_all(b"msg").unwrap();
    assert_eq!(read_until(&mut c, b"msg"), b"msg");
}

#[test]
fn fds_pass_both_ways_after_begin_and_with_the_held_bytes() {
    let d = tempfile::tempdir().unwrap();
    let (_r, sock, _rx) = relay(d.path());
    let c = UnixStream::connect(&sock).unwrap();
    // An fd sent together with the pipelined handshake (it rides on the held bytes).
    let (pr, pw) = nix::unistd::pipe().unwrap();
    crate::sys::send_with_fds(&c, HANDSHAKE, &[pw]).unwrap();
    let mut got = Vec::new();
    let mut back = Vec::new();
    let mut b = [0u8; 256];
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    while !got.ends_with(b"l-hello-message") {
        let (n, fds) = crate::sys::recv_with_fds(&c, &mut b).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&b[..n]);
        back.extend(fds);
    }
    assert_eq!(back.len(), 1, "the fd came back through the relay");
    std::fs::File::from(back.pop().unwrap())
        .write_all(b"through")
        .unwrap();
    let mut s = String::new();
    std::fs::File::from(pr).read_to_string(&mut s).unwrap();
    assert_eq!(s, "through");
    // One after BEGIN as well.
    let (pr, pw) = nix::unistd::pipe().unwrap();
    crate::sys::send_with_fds(&c, b"x", &[pw]).unwrap();
    let (n, mut fds) = crate::sys::recv_with_fds(&c, &mut b).unwrap();
    assert_eq!((n, fds.len()), (1, 1));
    std::fs::File::from(fds.pop().unwrap())
        .write_all(b"2")
        .unwrap();
    let mut s = String::new();
    std::fs::File::from(pr).read_to_string(&mut s).unwrap();
    assert_eq!(s, "2");
}

#[test]
fn bad_auth_closes_the_client_and_nothing_else() {
    let d = tempfile::tempdir().unwrap();
    let (_r, sock, _rx) = relay(d.path());
    let closed = |bytes: &[u8]| {
        let mut c = UnixStream::connect(&sock).unwrap();
        let _ = c.write_all(bytes);
        let _ = c.shutdown(Shutdown::Write);
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut all = Vec::new();
        let _ = c.read_to_end(&mut all);
        all
    };
    // No nul byte first.
    assert!(closed(b"AUTH EXTERNAL 30\r\n").is_empty());
    // A line longer than the bound.
    let mut long = vec![0u8];
    long.extend(std::iter::repeat_n(b'A', MAX_AUTH_LINE + 10));
    assert!(closed(&long).is_empty());
    // Too many lines: each gets its answer, then the connection closes.
    let mut many = vec![0u8];
    for _ in 0..MAX_AUTH_LINES + 5 {
        many.extend_from_slice(b"NEGOTIATE_UNIX_FD\r\n");
    }
    let got = closed(&many);
    assert_eq!(
        got.windows(15)
            .filter(|w| *w == b"AGREE_UNIX_FD\r\n")
            .count(),
        MAX_AUTH_LINES
    );
    // Ended mid-line.
    assert!(closed(b"\0AUTH EXT").is_empty());
    // The relay still serves the next client.
    let mut c = UnixStream::connect(&sock).unwrap();
    c.write_all(HANDSHAKE).unwrap();
    read_until(&mut c, b"l-hello-message");
}

#[test]
fn stop_closes_every_client_and_joins() {
    let d = tempfile::tempdir().unwrap();
    let (mut r, sock, _rx) = relay(d.path());
    // One in the auth, one past it, both idle.
    let mut a = UnixStream::connect(&sock).unwrap();
    a.write_all(b"\0AUTH EXT").unwrap();
    let mut b = UnixStream::connect(&sock).unwrap();
    b.write_all(HANDSHAKE).unwrap();
    read_until(&mut b, b"l-hello-message");
    let t = Instant::now();
    r.stop();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    for c in [&mut a, &mut b] {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        // Closed either way: an end of file, or a reset when the relay
        // closed its end with bytes of ours still unread (as it may for `a`,
        // whose half line it had no reason to read yet). A timeout fails.
        match c.read_to_end(&mut rest) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the client was not closed: {e}"),
        }
    }
    assert!(UnixStream::connect(&sock).is_err());
}

#[test]
fn the_proxy_gone_closes_the_client() {
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("s.sock");
    let _r = Relay::start(&sock, &d.path().join("nothing.up")).unwrap();
    let mut c = UnixStream::connect(&sock).unwrap();
    let _ = c.write_all(HANDSHAKE);
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    assert!(all.is_empty());
    let _ = c.as_fd();
}

#[test]
fn clients_over_the_bound_are_closed_at_once() {
    let d = tempfile::tempdir().unwrap();
    let (_r, sock, _rx) = relay(d.path());
    let mut held = Vec::new();
    for _ in 0..MAX_CLIENTS {
        let mut c = UnixStream::connect(&sock).unwrap();
        c.write_all(HANDSHAKE).unwrap();
        read_until(&mut c, b"l-hello-message");
        held.push(c);
    }
    let mut extra = UnixStream::connect(&sock).unwrap();
    let _ = extra.write_all(HANDSHAKE);
    extra
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut all = Vec::new();
    let _ = extra.read_to_end(&mut all);
    assert!(all.is_empty());
    // One leaves: the next is served.
    held.pop();
    let t = Instant::now();
    loop {
        let mut c = UnixStream::connect(&sock).unwrap();
        let _ = c.write_all(HANDSHAKE);
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 64];
        if matches!(c.read(&mut b), Ok(n) if n > 0) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "never served again");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn auth_lines_split_what_a_client_sends_in_any_pieces() {
    let mut a = AuthLines::default();
    let mut got = Vec::new();
    for b in HANDSHAKE {
        a.push(&[*b]);
        loop {
            match a.next_part().unwrap() {
                AuthNext::More => break,
                x => got.push(x),
            }
        }
        if matches!(got.last(), Some(AuthNext::Begin(_))) {
            break;
        }
    }
    assert_eq!(
        got,
        [
            AuthNext::Line(b"AUTH EXTERNAL 30\r\n".to_vec()),
            AuthNext::Line(b"NEGOTIATE_UNIX_FD\r\n".to_vec()),
            AuthNext::Begin(b"BEGIN\r\n".to_vec()),
        ]
    );
    let mut a = AuthLines::default();
    a.push(b"x");
    assert_eq!(a.next_part(), Err(AuthError::NoNul));
    let mut a = AuthLines::default();
    a.push(&[0]);
    a.push(&vec![b'a'; MAX_AUTH_LINE]);
    assert_eq!(a.next_part(), Err(AuthError::LongLine));
    // A line of the longest length is whole.
    let mut a = AuthLines::default();
    a.push(&[0]);
    a.push(&vec![b'a'; MAX_AUTH_LINE - 2]);
    a.push(b"\r\n");
    assert!(matches!(a.next_part(), Ok(AuthNext::Line(l)) if l.len() == MAX_AUTH_LINE));
}
