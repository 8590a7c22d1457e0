//! Real traffic on loopback: openssl s_server as the registry, curl, openssl s_client and
//! python ssl as clients, raw Rust clients for the malformed cases.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use efr_proxy::dns;
use efr_proxy::inside;
use efr_proxy::tls::build_client_hello;
use efr_proxy::{HostRule, Proxy, ProxyPolicy, Refusal};
use efr_sandbox_wire::summary::{BlockReason, Blocked};

// ---------------------------------------------------------------------------------------
// Fixtures.

struct Certs {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

fn certs() -> Certs {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let st = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args([
            "-subj",
            "/CN=registry.test",
            "-addext",
            "subjectAltName=DNS:registry.test",
            "-days",
            "2",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "openssl req");
    Certs {
        _dir: dir,
        cert,
        key,
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(port: u16) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "port {port} never came up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `openssl s_server -www` for registry.test.
struct SServer {
    child: Child,
    port: u16,
    certs: Certs,
}

impl Drop for SServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn s_server() -> SServer {
    let certs = certs();
    let port = free_port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&certs.cert)
        .arg("-key")
        .arg(&certs.key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port);
    SServer { child, port, certs }
}

/// An echo server on loopback (the upstream of the raw TLS-check tests).
fn echo_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut r = c.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut c);
            });
        }
    });
    port
}

struct TestProxy {
    proxy: Proxy,
    addr: SocketAddr,
    events: tokio::sync::mpsc::Receiver<Refusal>,
    _rt: tokio::runtime::Runtime,
}

impl TestProxy {
    fn start(policy: ProxyPolicy, unix: Option<&Path>) -> TestProxy {
        TestProxy::start_proxy(Proxy::new(policy), unix)
    }

    fn start_proxy(proxy: Proxy, unix: Option<&Path>) -> TestProxy {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let events = proxy.subscribe(1024);
        let l = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = l.local_addr().unwrap();
        let p = proxy.clone();
        rt.spawn(async move { p.serve_tcp(l).await });
        if let Some(path) = unix {
            let _g = rt.enter();
            let ul = Proxy::bind_unix(path).unwrap();
            let p = proxy.clone();
            rt.spawn(async move { p.serve_unix(ul).await });
        }
        TestProxy {
            proxy,
            addr,
            events,
            _rt: rt,
        }
    }

    fn blocked(&self) -> Vec<(String, u16, BlockReason, u32)> {
        let s = self.proxy.summary();
        assert!(s.proxied);
        s.blocked
            .into_iter()
            .map(
                |Blocked {
                     host,
                     port,
                     reason,
                     count,
                 }| (host, port, reason, count),
            )
            .collect()
    }

    fn events(&mut self) -> Vec<(String, u16, BlockReason)> {
        let mut v = Vec::new();
        while let Ok(r) = self.events.try_recv() {
            v.push((r.host, r.port, r.reason));
        }
        v
    }
}

fn policy(grants: &[&str]) -> ProxyPolicy {
    let mut p = ProxyPolicy::default();
    for g in grants {
        p.grants.push(HostRule::parse_cli(g).unwrap());
    }
    p.deny("metadata.google.internal");
    p.token_host("tokens.test");
    p
}

fn map_local(p: &mut ProxyPolicy, name: &str) {
    p.map(name, vec!["127.0.0.1".parse().unwrap()]);
}

/// Send `req`, read the answer head: (status, X-Efr-Block-Reason, stream).
fn request(addr: SocketAddr, req: &[u8]) -> (u16, Option<String>, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(req).unwrap();
    let (code, reason) = read_answer(&mut s);
    (code, reason, s)
}

fn read_answer<R: Read>(s: &mut R) -> (u16, Option<String>) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            other => panic!(
                "answer cut after {:?}: {other:?}",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    let text = String::from_utf8(head).unwrap();
    let code = text.split(' ').nth(1).unwrap().parse().unwrap();
    let reason = text
        .lines()
        .find_map(|l| l.strip_prefix("X-Efr-Block-Reason: "))
        .map(|s| s.trim().to_string());
    (code, reason)
}

fn connect(addr: SocketAddr, host: &str, port: u16) -> (u16, Option<String>, TcpStream) {
    request(
        addr,
        format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").as_bytes(),
    )
}

/// Read until EOF (or error); what was read.
fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = s.read_to_end(&mut v);
    v
}

fn curl(proxy: SocketAddr, certs: &Certs, url: &str) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--proxy"])
        .arg(format!("http://{proxy}"))
        .arg("--cacert")
        .arg(&certs.cert)
        .arg(url)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

use BlockReason::*;

fn e(host: &str, port: u16, r: BlockReason, n: u32) -> (String, u16, BlockReason, u32) {
    (host.to_string(), port, r, n)
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn curl_through_the_proxy() {
    let srv = s_server();
    let sp = srv.port;
    let mut p = policy(&[
        &format!("registry.test:{sp}"),
        &format!("tokens.test:{sp}"),
        "other.test",
    ]);
    map_local(&mut p, "registry.test");
    let mut tp = TestProxy::start(p, None);

    let (rc, body) = curl(tp.addr, &srv.certs, &format!("https://registry.test:{sp}/"));
    assert_eq!(rc, 0, "curl through the proxy: {body}");
    assert!(body.contains("s_server"), "{body}");
    let (rc, _) = curl(
        tp.addr,
        &srv.certs,
        &format!("https://Registry.Test.:{sp}/"),
    );
    assert_eq!(rc, 0, "normalised name");

    // Refusals: curl reports the proxy's 403 as a failed CONNECT (exit 56).
    assert_eq!(
        curl(tp.addr, &srv.certs, &format!("https://nope.test:{sp}/")).0,
        56
    );
    assert_eq!(
        curl(tp.addr, &srv.certs, &format!("https://nope.test:{sp}/")).0,
        56
    );
    assert_eq!(
        curl(tp.addr, &srv.certs, &format!("https://other.test:{sp}/")).0,
        56
    ); // port not granted
    assert_eq!(
        curl(
            tp.addr,
            &srv.certs,
            &format!("https://metadata.google.internal:{sp}/")
        )
        .0,
        56
    );
    assert_eq!(
        curl(tp.addr, &srv.certs, &format!("https://tokens.test:{sp}/")).0,
        56
    );
    assert_eq!(
        curl(tp.addr, &srv.certs, &format!("https://127.0.0.1:{sp}/")).0,
        56
    );
    // Plain HTTP to a host granted for TLS only.
    let (rc, body) = curl(tp.addr, &srv.certs, &format!("http://registry.test:{sp}/"));
    assert_eq!(rc, 0);
    assert!(body.contains("not_tls"), "{body}");

    // The answer itself: status and reason header.
    let (code, reason, _) = connect(tp.addr, "nope.test", sp);
    assert_eq!((code, reason.as_deref()), (403, Some("not_allowed")));
    let (code, reason, _) = connect(tp.addr, "0x7f.1", sp);
    assert_eq!((code, reason.as_deref()), (403, Some("ip_literal")));
    let (code, reason, _) = connect(tp.addr, "[::1]", sp);
    assert_eq!((code, reason.as_deref()), (403, Some("ip_literal")));

    assert_eq!(
        tp.blocked(),
        vec![
            e("nope.test", sp, NotAllowed, 3),
            e("other.test", sp, NotAllowed, 1),
            e("metadata.google.internal", sp, Denied, 1),
            e("tokens.test", sp, Denied, 1),
            e("127.0.0.1", sp, IpLiteral, 1),
            e("registry.test", sp, NotTls, 1),
            e("0x7f.1", sp, IpLiteral, 1),
            e("[::1]", sp, IpLiteral, 1),
        ]
    );
    let ev = tp.events();
    assert_eq!(ev.len(), 10);
    assert_eq!(ev[0], ("nope.test".to_string(), sp, NotAllowed));
    assert_eq!(tp.proxy.stats().tunnels, 2);
}

#[test]
fn plain_http_when_granted() {
    // A tiny HTTP server that answers with the request it got.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let mut c = c.unwrap();
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap();
            let body = String::from_utf8_lossy(&buf[..n]).into_owned();
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let mut p = policy(&[&format!("web.test:{port}:http")]);
    map_local(&mut p, "web.test");
    let tp = TestProxy::start(p, None);
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--proxy"])
        .arg(format!("http://{}", tp.addr))
        .args(["-H", "Host: evil.test"])
        .arg(format!("http://web.test:{port}/x?y=1"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.starts_with("GET /x?y=1 HTTP/1.1\r\n"), "{body}");
    assert!(
        body.contains(&format!("Host: web.test:{port}\r\n")),
        "{body}"
    );
    assert!(
        !body.contains("evil.test") && !body.to_ascii_lowercase().contains("proxy-"),
        "{body}"
    );
    assert_eq!(tp.blocked(), vec![]);
}

/// `CONNECT name:port` on the proxy's Unix socket: the stream once answered 200, else the
/// answer's status line.
fn unix_connect(sock: &Path, name: &str, port: u16) -> Result<UnixStream, String> {
    let mut u = UnixStream::connect(sock).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        u,
        "CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n"
    )
    .unwrap();
    let (code, reason) = read_answer(&mut u);
    if code == 200 {
        Ok(u)
    } else {
        Err(format!("{code} {reason:?}"))
    }
}

#[test]
fn unix_listener() {
    let srv = s_server();
    let sp = srv.port;
    let mut p = policy(&[&format!("registry.test:{sp}")]);
    map_local(&mut p, "registry.test");
    let (tp, sock, _dir) = unix_proxy(p);

    // A client on the Unix socket: CONNECT, a ClientHello, a TLS answer back.
    let mut u = unix_connect(&sock, "registry.test", sp).unwrap();
    u.write_all(&build_client_hello(Some("registry.test")))
        .unwrap();
    let mut b = [0u8; 1];
    u.read_exact(&mut b).unwrap();
    assert!(b[0] == 0x16 || b[0] == 0x15, "a TLS record back, got {b:?}");
    drop(u);
    let err = unix_connect(&sock, "nope.test", sp).unwrap_err();
    assert!(err.starts_with("403"), "{err}");
    assert_eq!(tp.blocked(), vec![e("nope.test", sp, NotAllowed, 1)]);
}

#[test]
fn tls_checks() {
    let ep = echo_server();
    let srv = s_server();
    let sp = srv.port;
    let mut p = policy(&[&format!("sink.test:{ep}"), &format!("registry.test:{sp}")]);
    map_local(&mut p, "sink.test");
    map_local(&mut p, "registry.test");
    let tp = TestProxy::start(p, None);

    // Good: the hello and what follows reach the upstream and come back.
    let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
    assert_eq!(code, 200);
    let hello = build_client_hello(Some("SINK.test."));
    s.write_all(&hello).unwrap();
    s.write_all(b"after").unwrap();
    let mut back = vec![0u8; hello.len() + 5];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back[..hello.len()], &hello[..]);
    assert_eq!(&back[hello.len()..], b"after");
    drop(s);

    // Hello sent together with the CONNECT (pipelined) works too.
    let mut req = format!("CONNECT sink.test:{ep} HTTP/1.1\r\n\r\n").into_bytes();
    req.extend_from_slice(&hello);
    let (code, _, mut s) = request(tp.addr, &req);
    assert_eq!(code, 200);
    let mut back = vec![0u8; hello.len()];
    s.read_exact(&mut back).unwrap();
    drop(s);

    // Not TLS at all (an nc-style tunnel).
    let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
    assert_eq!(code, 200);
    s.write_all(b"GET / HTTP/1.1\r\nHost: sink.test\r\n\r\n")
        .unwrap();
    assert_eq!(read_to_end(&mut s), b"", "nothing reaches the upstream");
    // An SNI that differs, a missing SNI, a malformed hello.
    for bytes in [
        build_client_hello(Some("other.test")),
        build_client_hello(None),
        vec![22, 3, 1, 0, 6, 2, 0, 0, 2, 3, 3],
    ] {
        let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
        assert_eq!(code, 200);
        s.write_all(&bytes).unwrap();
        assert_eq!(read_to_end(&mut s), b"");
    }
    // openssl s_client through the proxy, CONNECT registry.test, SNI other.test.
    let out = Command::new("openssl")
        .args(["s_client", "-proxy"])
        .arg(tp.addr.to_string())
        .arg("-connect")
        .arg(format!("registry.test:{sp}"))
        .args(["-servername", "other.test"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    // And with the right SNI it completes its handshake.
    let out = Command::new("openssl")
        .args(["s_client", "-proxy"])
        .arg(tp.addr.to_string())
        .arg("-connect")
        .arg(format!("registry.test:{sp}"))
        .args([
            "-servername",
            "registry.test",
            "-verify_return_error",
            "-CAfile",
        ])
        .arg(&srv.certs.cert)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Verify return code: 0"), "{text}");

    assert_eq!(
        tp.blocked(),
        vec![
            e("sink.test", ep, NotTls, 1),
            e("sink.test", ep, BadRequest, 3),
            e("registry.test", sp, BadRequest, 1)
        ]
    );
}

/// A ClientHello in several records, written in small TCP segments (the record headers
/// and the handshake header cut too), and a post-quantum-sized one (a 1220-byte key share)
/// split the same way: the proxy joins them, checks the SNI and passes every byte on.
#[test]
fn hello_in_segments_and_records() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    let tp = TestProxy::start(p, None);
    let records = |h: &[u8], at: &[usize]| {
        let hs = &h[5..];
        let mut out = Vec::new();
        let mut prev = 0;
        for &a in at.iter().chain([hs.len()].iter()) {
            out.extend_from_slice(&[22, 3, 1]);
            out.extend_from_slice(&((a - prev) as u16).to_be_bytes());
            out.extend_from_slice(&hs[prev..a]);
            prev = a;
        }
        out
    };
    // The same hello with a key share extension of 1220 bytes appended.
    let big = {
        let mut h = build_client_hello(Some("sink.test"));
        let mut ext = vec![0x00, 0x33, 0x04, 0xc4, 0x11, 0xec, 0x04, 0xc0];
        ext.extend_from_slice(&[9u8; 1216]);
        let el = u16::from_be_bytes([h[50], h[51]]) as usize + ext.len();
        h[50..52].copy_from_slice(&(el as u16).to_be_bytes());
        h.extend_from_slice(&ext);
        let hl = h.len() - 9;
        h[6..9].copy_from_slice(&(hl as u32).to_be_bytes()[1..]);
        let rl = h.len() - 5;
        h[3..5].copy_from_slice(&(rl as u16).to_be_bytes());
        h
    };
    let small = build_client_hello(Some("sink.test"));
    for (hello, segment) in [
        (records(&small, &[3, 4, 40]), 2),
        (records(&big, &[2, 700]), 7),
        (big.clone(), 500),
    ] {
        let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
        assert_eq!(code, 200);
        s.set_nodelay(true).unwrap();
        for part in hello.chunks(segment) {
            s.write_all(part).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        s.write_all(b"after").unwrap();
        let mut back = vec![0u8; hello.len() + 5];
        s.read_exact(&mut back).unwrap();
        assert_eq!(&back[..hello.len()], &hello[..]);
        assert_eq!(&back[hello.len()..], b"after");
    }
    // Cut short: the proxy waits for the rest, then the client gives up; nothing passes.
    let h = records(&small, &[10]);
    let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
    assert_eq!(code, 200);
    s.write_all(&h[..h.len() - 1]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut s), b"");
    assert!(tp.blocked().is_empty(), "{:?}", tp.blocked());
}

/// A head written in many small pieces (a client that writes each byte or header line on its
/// own) is answered as the same head in one write: the proxy reads trickled heads after a
/// pause, never drops or misreads them.
#[test]
fn a_head_in_many_pieces_is_answered() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    let tp = TestProxy::start(p, None);
    let mut head = format!("CONNECT sink.test:{ep} HTTP/1.1\r\nHost: sink.test:{ep}\r\n");
    for i in 0..40 {
        head.push_str(&format!("X-Pad-{i}: {}\r\n", "a".repeat(60)));
    }
    head.push_str("\r\n");
    for piece in [1, 7, 100] {
        let mut s = TcpStream::connect(tp.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        for part in head.as_bytes().chunks(piece) {
            s.write_all(part).unwrap();
            if piece > 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let (code, reason) = read_answer(&mut s);
        assert_eq!((code, reason), (200, None), "pieces of {piece} bytes");
        // The tunnel then carries a TLS hello for the host, echoed back by the server.
        let hello = build_client_hello(Some("sink.test"));
        s.write_all(&hello).unwrap();
        let mut back = vec![0u8; hello.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, hello, "pieces of {piece} bytes");
    }
    // A refused host written a byte at a time is refused as such.
    let mut s = TcpStream::connect(tp.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for b in b"CONNECT elsewhere.test:443 HTTP/1.1\r\n\r\n" {
        s.write_all(&[*b]).unwrap();
    }
    let (code, reason) = read_answer(&mut s);
    assert_eq!((code, reason.as_deref()), (403, Some("not_allowed")));
}

#[test]
fn resolution_into_special_ranges_is_refused() {
    let ep = echo_server();
    // `localhost` is granted but resolves to loopback and has no mapping.
    let tp = TestProxy::start(policy(&[&format!("localhost:{ep}")]), None);
    let (code, reason, mut s) = connect(tp.addr, "localhost", ep);
    assert_eq!((code, reason.as_deref()), (403, Some("denied")));
    // The answer's body names the address, its range and how to map the name on purpose.
    let body = String::from_utf8_lossy(&read_to_end(&mut s)).into_owned();
    assert!(
        body.contains("localhost resolves to 127.0.0.1, in the loopback range")
            && body.contains("map the name to it in the [network.resolve] table of the config"),
        "{body}"
    );
    assert_eq!(tp.blocked(), vec![e("localhost", ep, Denied, 1)]);
    let all = tp.proxy.refusals_all();
    let sp = all[0].special.expect("the special address is kept");
    assert_eq!(
        (sp.address.to_string().as_str(), sp.range),
        ("127.0.0.1", "loopback")
    );
}

/// A test resolver: a granted company mirror whose name resolves into 10/8, and one whose
/// answers mix an ordinary address with a CGNAT one (refused: every answer must be
/// ordinary, and the special one is named); a mapping in `[network.resolve]` opens it.
#[test]
fn special_answers_name_the_address_and_range() {
    let ep = echo_server();
    let mut pol = policy(&[
        &format!("mirror.corp.test:{ep}"),
        &format!("mixed.corp.test:{ep}"),
        &format!("mapped.corp.test:{ep}"),
    ]);
    map_local(&mut pol, "mapped.corp.test");
    let resolver: efr_proxy::Resolver = std::sync::Arc::new(|name: &str, _port| match name {
        "mirror.corp.test" => vec!["10.20.30.40".parse().unwrap()],
        "mixed.corp.test" => vec![
            "93.184.215.14".parse().unwrap(),
            "100.64.1.2".parse().unwrap(),
        ],
        _ => vec!["10.9.9.9".parse().unwrap()],
    });
    let mut tp = TestProxy::start_proxy(Proxy::with_resolver(pol, resolver), None);
    for (host, addr, range) in [
        ("mirror.corp.test", "10.20.30.40", "private"),
        ("mixed.corp.test", "100.64.1.2", "carrier-grade NAT"),
    ] {
        let (code, reason, mut s) = connect(tp.addr, host, ep);
        assert_eq!((code, reason.as_deref()), (403, Some("denied")), "{host}");
        let body = String::from_utf8_lossy(&read_to_end(&mut s)).into_owned();
        let want = format!("{host} resolves to {addr}, in the {range} range");
        assert!(body.contains(&want), "{body}");
        assert!(body.contains("the [network.resolve] table"), "{body}");
    }
    // Mapped on purpose: dialled (the echo server answers).
    let (code, _, _s) = connect(tp.addr, "mapped.corp.test", ep);
    assert_eq!(code, 200);
    let got: Vec<_> = tp
        .proxy
        .refusals_all()
        .into_iter()
        .map(|r| (r.host, r.special.map(|s| (s.address.to_string(), s.range))))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "mirror.corp.test".to_string(),
                Some(("10.20.30.40".to_string(), "private"))
            ),
            (
                "mixed.corp.test".to_string(),
                Some(("100.64.1.2".to_string(), "carrier-grade NAT"))
            ),
        ]
    );
    assert_eq!(tp.events().len(), 2);
}

#[test]
fn connection_limit() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    p.limits.max_conns = 8;
    let tp = TestProxy::start(p, None);
    let hello = build_client_hello(Some("sink.test"));
    let mut held = Vec::new();
    for _ in 0..8 {
        let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
        assert_eq!(code, 200);
        s.write_all(&hello).unwrap();
        let mut back = vec![0u8; hello.len()];
        s.read_exact(&mut back).unwrap();
        held.push(s);
    }
    // 200 more at once: each answered 429 `limit`.
    let mut over: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut s = TcpStream::connect(tp.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            write!(s, "CONNECT sink.test:{ep} HTTP/1.1\r\n\r\n").unwrap();
            s
        })
        .collect();
    for s in &mut over {
        let (code, reason) = read_answer(s);
        assert_eq!((code, reason.as_deref()), (429, Some("limit")));
    }
    drop(over);
    drop(held);
    // Slots come back: the proxy keeps serving.
    let t = Instant::now();
    loop {
        let (code, _, _) = connect(tp.addr, "sink.test", ep);
        if code == 200 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "slots never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let b = tp.blocked();
    assert_eq!(b.len(), 1);
    assert_eq!((b[0].0.as_str(), b[0].1, b[0].2), ("sink.test", ep, Limit));
    assert!(b[0].3 >= 200, "{b:?}");
}

#[test]
fn byte_limit_and_idle_timeout() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    p.limits.max_bytes = 1 << 20;
    p.limits.idle_timeout = Duration::from_millis(300);
    let tp = TestProxy::start(p, None);
    let hello = build_client_hello(Some("sink.test"));

    // Idle: the tunnel ends on its own.
    let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
    assert_eq!(code, 200);
    s.write_all(&hello).unwrap();
    let t = Instant::now();
    let back = read_to_end(&mut s);
    assert_eq!(back.len(), hello.len());
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(tp.proxy.stats().timeouts, 1);

    // Bytes: 2 MiB through a call allowed 1 MiB.
    let (code, _, s) = connect(tp.addr, "sink.test", ep);
    assert_eq!(code, 200);
    let mut w = s.try_clone().unwrap();
    let h2 = hello.clone();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&h2);
        let chunk = vec![b'x'; 64 << 10];
        for _ in 0..32 {
            if w.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let mut r = s;
    let got = read_to_end(&mut r);
    let _ = r.shutdown(Shutdown::Both);
    writer.join().unwrap();
    assert!(got.len() < (1 << 20) + (1 << 19), "{}", got.len());
    // Over the byte limit, new connections are refused at once.
    let (code, reason, _) = connect(tp.addr, "sink.test", ep);
    assert_eq!((code, reason.as_deref()), (429, Some("limit")));
    assert_eq!(tp.blocked(), vec![e("sink.test", ep, Limit, 2)]);
}

#[test]
fn malformed_requests() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    p.limits.handshake_timeout = Duration::from_secs(1);
    let tp = TestProxy::start(p, None);

    // Garbage.
    let (code, reason, _) = request(tp.addr, b"\x00\x01\x02garbage\r\n\r\n");
    assert_eq!((code, reason.as_deref()), (400, Some("bad_request")));
    // A request line of 1 MiB.
    let mut s = TcpStream::connect(tp.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(b"CONNECT ");
        let _ = w.write_all(&vec![b'a'; 1 << 20]);
        let _ = w.write_all(b":443 HTTP/1.1\r\n\r\n");
    });
    assert_eq!(read_answer(&mut s).0, 431);
    writer.join().unwrap();
    // A header flood.
    let mut s = TcpStream::connect(tp.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(format!("CONNECT sink.test:{ep} HTTP/1.1\r\n").as_bytes());
        for _ in 0..10_000 {
            if w.write_all(b"X-A: b\r\n").is_err() {
                break;
            }
        }
    });
    assert_eq!(read_answer(&mut s).0, 431);
    writer.join().unwrap();
    // Half-open: part of a head, then the write side closed.
    let mut s = TcpStream::connect(tp.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("CONNECT sink.test:{ep} HTTP/1.1\r\n").as_bytes())
        .unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_answer(&mut s).0, 400);
    // A client that never sends: 408 after the handshake timeout.
    let t = Instant::now();
    let mut s = TcpStream::connect(tp.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(read_answer(&mut s).0, 408);
    assert!(t.elapsed() < Duration::from_secs(5));
    // A client that stops after CONNECT's 200: the tunnel ends, no upstream bytes.
    let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
    assert_eq!(code, 200);
    assert_eq!(read_to_end(&mut s), b"");
    // A bad name, a bad port.
    let (code, reason, _) = connect(tp.addr, "exa$mple.test", 443);
    assert_eq!((code, reason.as_deref()), (400, Some("bad_request")));
    let (code, _, _) = request(tp.addr, b"CONNECT sink.test:0 HTTP/1.1\r\n\r\n");
    assert_eq!(code, 400);

    // Still serving.
    let (code, _, mut s) = connect(tp.addr, "sink.test", ep);
    assert_eq!(code, 200);
    let hello = build_client_hello(Some("sink.test"));
    s.write_all(&hello).unwrap();
    let mut back = vec![0u8; hello.len()];
    s.read_exact(&mut back).unwrap();

    let st = tp.proxy.stats();
    assert_eq!(st.malformed, 4, "{st:?}");
    assert_eq!(st.timeouts, 2, "{st:?}");
    assert_eq!(
        tp.blocked(),
        vec![
            e("exa$mple.test", 443, BadRequest, 1),
            e("sink.test", 0, BadRequest, 1)
        ]
    );
}

/// A proxy serving a Unix socket in a fresh directory: (proxy, socket path, directory).
fn unix_proxy(p: ProxyPolicy) -> (TestProxy, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("proxy.sock");
    let tp = TestProxy::start(p, Some(&sock));
    (tp, sock, dir)
}

/// Python's ssl to `ip:port` with `sni` as the server name: `OK` when the s_server page came
/// back, else `FAIL ...`.
fn py_tls(ip: Ipv4Addr, port: u16, sni: &str, certs: &Certs) -> String {
    let script = format!(
        "import socket, ssl\n\
         ctx = ssl.create_default_context(cafile={cafile:?})\n\
         s = socket.create_connection(('{ip}', {port}), timeout=20)\n\
         try:\n\
         \x20   t = ctx.wrap_socket(s, server_hostname='{sni}')\n\
         \x20   t.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n\
         \x20   data = b''\n\
         \x20   while True:\n\
         \x20       d = t.recv(65536)\n\
         \x20       if not d: break\n\
         \x20       data += d\n\
         \x20   print('OK' if b's_server' in data else 'NODATA')\n\
         except (ssl.SSLError, OSError) as e:\n\
         \x20   print('FAIL', e)\n",
        cafile = certs.cert.to_str().unwrap(),
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The hand-over: the sockets the init binds (relay, DNS, synthetic listeners) go to the
/// proxy once, and the proxy serves them itself with every check: the relay like its own
/// TCP listener, DNS from the call's name table (refused names reported on port 443 with the
/// reason a CONNECT would get), a synthetic address as a CONNECT to its name on the port
/// dialled. A second hand-over is refused; garbage on the DNS socket changes nothing.
#[test]
fn handed_sockets_are_served() {
    let srv = s_server();
    let sp = srv.port;
    let mut p = policy(&[&format!("registry.test:{sp}"), "tokens.test"]);
    map_local(&mut p, "registry.test");
    let (mut tp, sock, _dir) = unix_proxy(p);

    // What the init binds: names get 127.77.0.1, ... in lookup order, so registry.test (the
    // first looked up) is 127.77.0.1; its listener on the registry's own port, another on a
    // port no grant names, one on an address never given out.
    let synth = Ipv4Addr::new(127, 77, 0, 1);
    let other_port = free_port();
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let raddr = relay.local_addr().unwrap();
    let dns_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let daddr = dns_sock.local_addr().unwrap();
    let unknown = TcpListener::bind("127.77.0.99:0").unwrap();
    let uaddr = unknown.local_addr().unwrap();
    let socks = inside::Sockets {
        relay: Some(relay),
        dns: Some(dns_sock),
        synthetic: vec![
            TcpListener::bind((synth, sp)).unwrap(),
            TcpListener::bind((synth, other_port)).unwrap(),
            unknown,
        ],
        tcp: Vec::new(),
    };
    inside::hand_over(&sock, socks, Duration::from_secs(10)).unwrap();
    // Only the first hand-over is taken.
    let again = inside::Sockets {
        relay: Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        ..Default::default()
    };
    let err = inside::hand_over(&sock, again, Duration::from_secs(10)).unwrap_err();
    assert!(
        matches!(err, inside::HandOverError::Refused),
        "a second hand-over: {err}"
    );

    // DNS, answered by the proxy from the name table; nothing forwarded.
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The answer with the query's id (garbage sent before may have been answered too).
    let ask_raw = |q: &[u8]| {
        c.send_to(q, daddr).unwrap();
        loop {
            let mut buf = [0u8; 512];
            let (n, _) = c.recv_from(&mut buf).unwrap();
            if buf[..2] == q[..2] {
                break buf[..n].to_vec();
            }
        }
    };
    let ask = |name: &str, ty: u16| {
        let r = ask_raw(&dns::build_query(0x1234, name, ty));
        assert_eq!(&r[..2], &[0x12, 0x34]);
        dns::parse_response(&r).unwrap()
    };
    assert_eq!(ask("registry.test", 1), (0, vec![synth]));
    assert_eq!(ask("REGISTRY.test", 1), (0, vec![synth]));
    assert_eq!(ask("registry.test", 28), (0, vec![]));
    assert_eq!(ask("evil.test", 1), (3, vec![]));
    assert_eq!(ask("evil.test", 28), (3, vec![]));
    assert_eq!(ask("tokens.test", 1), (3, vec![]));
    assert_eq!(ask("Metadata.Google.Internal.", 1), (3, vec![]));
    // Garbage: a response, a short datagram, random bytes; then still answering.
    let mut resp = dns::build_query(1, "registry.test", 1);
    resp[2] |= 0x80;
    c.send_to(&resp, daddr).unwrap();
    c.send_to(b"short", daddr).unwrap();
    c.send_to(&payload(300, 99), daddr).unwrap();
    let mut bad = dns::build_query(2, "x.test", 1);
    bad.truncate(15);
    assert_eq!(dns::parse_response(&ask_raw(&bad)).unwrap().0, 1); // FORMERR
    assert_eq!(ask("registry.test", 1), (0, vec![synth]));

    // The relay: curl through it, as through the proxy's own listener.
    let (rc, body) = curl(raddr, &srv.certs, &format!("https://registry.test:{sp}/"));
    assert_eq!(rc, 0, "{body}");
    assert!(body.contains("s_server"));
    let (code, reason, _) = connect(raddr, "nope.test", sp);
    assert_eq!((code, reason.as_deref()), (403, Some("not_allowed")));

    // Synthetic: TLS straight to the name's address, the CONNECT checks on the port dialled.
    assert_eq!(py_tls(synth, sp, "registry.test", &srv.certs), "OK");
    assert!(py_tls(synth, sp, "other.test", &srv.certs).starts_with("FAIL"));
    let mut s = TcpStream::connect((synth, sp)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(read_to_end(&mut s), b"", "not TLS: closed");
    assert!(py_tls(synth, other_port, "registry.test", &srv.certs).starts_with("FAIL"));
    // An address the table never gave out: closed at once.
    let mut s = TcpStream::connect(uaddr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(read_to_end(&mut s), b"");

    let want = vec![
        e("evil.test", 443, NotAllowed, 2),
        e("tokens.test", 443, Denied, 1),
        e("metadata.google.internal", 443, Denied, 1),
        e("nope.test", sp, NotAllowed, 1),
        e("registry.test", sp, BadRequest, 1),
        e("registry.test", sp, NotTls, 1),
        e("registry.test", other_port, NotAllowed, 1),
    ];
    // The refusals after a closed connection are counted once the proxy saw the close.
    let t = Instant::now();
    while tp.blocked() != want && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(tp.blocked(), want);
    let ev = tp.events();
    assert_eq!(ev.len(), 8, "{ev:?}");
    assert_eq!(ev[0], ("evil.test".to_string(), 443, NotAllowed));
    let st = tp.proxy.stats();
    assert_eq!(st.lookups, 4, "{st:?}");
    // The second hand-over, 3 DNS datagrams, the FORMERR query, the unknown address.
    assert_eq!(st.malformed, 6, "{st:?}");
    assert_eq!(st.tunnels, 2, "{st:?}");
}

/// What else could come as a hand-over (a contained process can connect to the proxy
/// socket too, though never before the init's hand-over): each bad one is refused with no
/// answer and every fd closed, and it uses up the proxy's one hand-over; the proxy keeps
/// serving ordinary requests.
#[test]
fn hand_over_is_checked() {
    use efr_proxy::fdpass::{self, HAND_OVER};
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    p.limits.handshake_timeout = Duration::from_secs(1);
    let listener = || -> OwnedFd { TcpListener::bind("127.0.0.1:0").unwrap().into() };
    let udp = || -> OwnedFd { UdpSocket::bind("127.0.0.1:0").unwrap().into() };
    let srv = TcpListener::bind("127.0.0.1:0").unwrap();
    let connected: OwnedFd = TcpStream::connect(srv.local_addr().unwrap())
        .unwrap()
        .into();
    let (pipe_r, _pipe_w) = std::io::pipe().unwrap();
    let pipe_r: OwnedFd = pipe_r.into();
    let (unix_a, _unix_b) = UnixStream::pair().unwrap();
    let unix_a: OwnedFd = unix_a.into();
    // Each case owns its fds (the message carries copies; ours close with the case).
    let cases: Vec<(&str, Vec<u8>, Vec<OwnedFd>)> = vec![
        ("no fd", vec![HAND_OVER, 1, b'r'], vec![]),
        ("a pipe", vec![HAND_OVER, 1, b'r'], vec![pipe_r]),
        ("a Unix socket", vec![HAND_OVER, 1, b's'], vec![unix_a]),
        (
            "a connected socket",
            vec![HAND_OVER, 1, b'r'],
            vec![connected],
        ),
        ("UDP as a listener", vec![HAND_OVER, 1, b'r'], vec![udp()]),
        (
            "a listener as DNS",
            vec![HAND_OVER, 1, b'd'],
            vec![listener()],
        ),
        (
            "an unknown role",
            vec![HAND_OVER, 1, b'x'],
            vec![listener()],
        ),
        (
            "two relays",
            vec![HAND_OVER, 2, b'r', b'r'],
            vec![listener(), listener()],
        ),
        (
            "two DNS sockets",
            vec![HAND_OVER, 2, b'd', b'd'],
            vec![udp(), udp()],
        ),
        (
            "more roles than fds",
            vec![HAND_OVER, 2, b'r', b's'],
            vec![listener()],
        ),
        (
            "roles cut short",
            vec![HAND_OVER, 3, b'r'],
            vec![listener()],
        ),
    ];
    for (what, bytes, fds) in cases {
        let (tp, sock, _dir) = unix_proxy(p.clone());
        let mut u = UnixStream::connect(&sock).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if fds.is_empty() {
            u.write_all(&bytes).unwrap();
        } else {
            let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|f| f.as_fd()).collect();
            fdpass::send_fds(u.as_fd(), &bytes, &borrowed).unwrap();
        }
        if what == "roles cut short" {
            u.shutdown(Shutdown::Write).unwrap();
        }
        let mut back = Vec::new();
        let _ = u.read_to_end(&mut back);
        assert_eq!(back, b"", "{what}: no answer");
        // The one hand-over is used up: a good one now is refused too.
        let good = inside::Sockets {
            relay: Some(TcpListener::bind("127.0.0.1:0").unwrap()),
            ..Default::default()
        };
        let err = inside::hand_over(&sock, good, Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(err, inside::HandOverError::Refused),
            "{what}: {err}"
        );
        // Ordinary requests are still served.
        let (code, _, _) = connect(tp.addr, "nope.test", 443);
        assert_eq!(code, 403, "{what}");
        assert_eq!(tp.proxy.stats().malformed, 2, "{what}");
    }
    // A hand-over that never sends its roles: closed after the handshake timeout.
    let (tp, sock, _dir) = unix_proxy(p.clone());
    let mut u = UnixStream::connect(&sock).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let l = listener();
    fdpass::send_fds(u.as_fd(), &[HAND_OVER], &[l.as_fd()]).unwrap();
    let t = Instant::now();
    let mut back = Vec::new();
    let _ = u.read_to_end(&mut back);
    assert_eq!(back, b"");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(tp.proxy.stats().malformed, 1);
    // The hand-over helper refuses what it cannot send.
    let (_tp, sock, _dir) = unix_proxy(p.clone());
    let none = inside::hand_over(&sock, inside::Sockets::default(), Duration::from_secs(1));
    assert!(matches!(none, Err(inside::HandOverError::Nothing)));
    let many = inside::Sockets {
        synthetic: (0..fdpass::MAX_HANDED + 1)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect(),
        ..Default::default()
    };
    let many = inside::hand_over(&sock, many, Duration::from_secs(1));
    assert!(matches!(many, Err(inside::HandOverError::TooMany(_))));
    // ... and the whole set of a real call goes over in one message.
    let full = inside::Sockets {
        relay: Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        dns: Some(UdpSocket::bind("127.0.0.1:0").unwrap()),
        synthetic: (0..65)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect(),
        tcp: Vec::new(),
    };
    inside::hand_over(&sock, full, Duration::from_secs(10)).unwrap();
}

/// The init does not wait for the proxy's answer before it forks the line, so a line could
/// send a hand-over of its own before the proxy has read the init's: the proxy takes one
/// only on the first connection it accepted (the init's, made before the line exists),
/// whichever message arrives first.
#[test]
fn only_the_first_connection_may_hand_over() {
    let p = policy(&[]);
    let (tp, sock, _dir) = unix_proxy(p);
    // The init's connection, first in the queue; its message comes last.
    let first = UnixStream::connect(&sock).unwrap();
    // A later connection hands over at once: refused, and it does not use up the one
    // hand-over.
    let late = inside::Sockets {
        relay: Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        ..Default::default()
    };
    let late_sock = sock.clone();
    let err = std::thread::spawn(move || {
        inside::hand_over(&late_sock, late, Duration::from_secs(10)).unwrap_err()
    })
    .join()
    .unwrap();
    assert!(matches!(err, inside::HandOverError::Refused), "{err}");
    // The first connection's hand-over, sent now, is taken and served.
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let raddr = relay.local_addr().unwrap();
    efr_proxy::fdpass::send_hand_over(
        first.as_fd(),
        &[(efr_proxy::fdpass::Role::Relay, relay.as_fd())],
    )
    .unwrap();
    drop(relay);
    let mut first = first;
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8];
    first.read_exact(&mut b).unwrap();
    assert_eq!(b, [efr_proxy::fdpass::HAND_OVER]);
    let (code, _, _) = connect(raddr, "nope.test", 443);
    assert_eq!(code, 403, "the handed relay is served");
    assert_eq!(tp.proxy.stats().malformed, 1);
}

/// A pseudo-random payload (xorshift).
fn payload(len: usize, mut seed: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.extend_from_slice(&seed.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Through a handed relay listener: a large payload goes through the tunnel and back
/// intact, half-closes pass, refusals are answered on the client's own connection.
#[test]
fn handed_relay_integrity() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    let (tp, sock, _dir) = unix_proxy(p);
    let rl = TcpListener::bind("127.0.0.1:0").unwrap();
    let raddr = rl.local_addr().unwrap();
    let socks = inside::Sockets {
        relay: Some(rl),
        ..Default::default()
    };
    inside::hand_over(&sock, socks, Duration::from_secs(10)).unwrap();

    for round in 0..3u64 {
        let (code, _, mut s) = connect(raddr, "sink.test", ep);
        assert_eq!(code, 200);
        let mut data = build_client_hello(Some("sink.test"));
        data.extend_from_slice(&payload((6 << 20) + 77, 0x1234_5678 + round));
        let (d2, mut w) = (data.clone(), s.try_clone().unwrap());
        let t = std::thread::spawn(move || {
            w.write_all(&d2).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let back = read_to_end(&mut s);
        t.join().unwrap();
        assert_eq!(back.len(), data.len());
        assert!(back == data, "the echo differs");
    }
    let (code, head, _) = connect(raddr, "nope.test", 443);
    assert_eq!(code, 403, "{head:?}");
    assert_eq!(tp.blocked(), vec![e("nope.test", 443, NotAllowed, 1)]);
    assert_eq!(tp.proxy.stats().tunnels, 3);
}

/// Fds sent with anything but a hand-over: closed unread. The old client-socket pass (first
/// byte 0) is a bad request head now; an HTTP request with an fd attached is served.
#[test]
fn other_fds_are_dropped() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    let (tp, sock, _dir) = unix_proxy(p);
    let ended = |u: &mut UnixStream| {
        u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = Vec::new();
        let _ = u.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    };
    // A byte 0 with a connected client socket, as the relay once passed them.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (served, _) = l.accept().unwrap();
    let mut u = UnixStream::connect(&sock).unwrap();
    efr_proxy::fdpass::send_fds(u.as_fd(), &[0], &[served.as_fd()]).unwrap();
    u.write_all(b"\r\n\r\n").unwrap();
    assert!(ended(&mut u).starts_with("HTTP/1.1 400"));
    // An HTTP request on the Unix connection with an fd attached: served, fd dropped.
    let mut u = UnixStream::connect(&sock).unwrap();
    let (x, _y) = UnixStream::pair().unwrap();
    efr_proxy::fdpass::send_fds(u.as_fd(), b"C", &[x.as_fd()]).unwrap();
    u.write_all(b"ONNECT nope.test:443 HTTP/1.1\r\n\r\n")
        .unwrap();
    assert!(ended(&mut u).starts_with("HTTP/1.1 403"));
    assert_eq!(tp.proxy.stats().malformed, 1);
    assert_eq!(tp.blocked(), vec![e("nope.test", 443, NotAllowed, 1)]);
}

/// A `tcp` grant's listener is taken only on an address and port a `tcp` grant of the
/// policy opens: one on another port (or address) refuses the whole hand-over. (The relay
/// itself needs the call's own network namespace, where the listener's address is not the
/// host's: `service/tests/tcp_calls.rs`.)
#[test]
fn a_tcp_listener_is_taken_only_where_a_tcp_grant_opens_it() {
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = granted.local_addr().unwrap().port();
    let grant = HostRule::parse_tcp_cli(&format!("127.0.0.1:{port}:tcp"))
        .unwrap()
        .unwrap();
    let p = ProxyPolicy::from_grants([&grant]);
    // Another port of the same address: refused, and counted.
    let (tp, sock, _dir) = unix_proxy(p.clone());
    let other = inside::Sockets {
        tcp: vec![TcpListener::bind("127.0.0.1:0").unwrap()],
        ..Default::default()
    };
    let err = inside::hand_over(&sock, other, Duration::from_secs(10)).unwrap_err();
    assert!(matches!(err, inside::HandOverError::Refused), "{err}");
    assert_eq!(tp.proxy.stats().malformed, 1);
    // The granted port: taken.
    let (tp, sock, _dir) = unix_proxy(p);
    let ok = inside::Sockets {
        tcp: vec![granted],
        ..Default::default()
    };
    inside::hand_over(&sock, ok, Duration::from_secs(10)).unwrap();
    assert_eq!(tp.proxy.stats().malformed, 0);
}

/// Past `max_open` connections open at once (in any phase: these four never send a byte),
/// a new one reads a `limit` answer at once and is closed, the refusal listed under host
/// `*`; once the four close, connections are served again.
#[test]
fn open_connection_budget() {
    let ep = echo_server();
    let mut p = policy(&[&format!("sink.test:{ep}")]);
    map_local(&mut p, "sink.test");
    p.limits.max_open = 4;
    let tp = TestProxy::start(p, None);
    let idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(tp.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..3 {
        let mut s = TcpStream::connect(tp.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (code, reason) = read_answer(&mut s);
        assert_eq!((code, reason.as_deref()), (429, Some("limit")));
    }
    assert!(
        tp.blocked()
            .iter()
            .any(|(h, port, r, n)| h == efr_proxy::ANY_HOST
                && *port == 0
                && *r == BlockReason::Limit
                && *n == 3),
        "{:?}",
        tp.blocked()
    );
    drop(idle);
    let t = Instant::now();
    loop {
        let (code, _, _) = connect(tp.addr, "sink.test", ep);
        if code == 200 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "slots never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
