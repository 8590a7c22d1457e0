//! The servers of `scripts/bench-broker.sh`: an HTTPS upstream on loopback (hyper, h1 and
//! h2, certificate of a test CA for `localhost`), a proxy with the credential broker (a
//! credential bound to the upstream) and a proxy without it (today's tunnel). Prints one
//! JSON line with the ports, then serves until killed.
//!
//! Upstream paths: `/big/N` (N bytes of `z`, streamed), anything else: a 2-byte `ok`.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use efr_proxy::broker::{Broker, BrokerCredential, Ca, Send};
use efr_proxy::{HostRule, Proxy, ProxyPolicy};
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

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
        let n = usize::try_from(n).unwrap_or(ZS.len());
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&ZS[..n])))))
    }
    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.0)
    }
}

type B = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn handle(req: Request<Incoming>) -> Result<Response<B>, Infallible> {
    let path = req.uri().path().to_string();
    let mut body = req.into_body();
    while let Some(Ok(_)) = body.frame().await {}
    Ok(match path.strip_prefix("/big/") {
        Some(n) => Response::new(Zeros(n.parse().unwrap_or(0)).boxed()),
        None => Response::new(http_body_util::Full::new(Bytes::from_static(b"ok")).boxed()),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    std::fs::create_dir_all(&dir)?;
    // The test CA and the upstream's leaf for localhost.
    let ca_key = KeyPair::generate()?;
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name
        .push(DnType::CommonName, "efr bench upstream CA");
    let ca_cert = p.self_signed(&ca_key)?;
    std::fs::write(dir.join("test-ca.pem"), ca_cert.pem())?;
    let issuer = Issuer::new(p, ca_key);
    let key = KeyPair::generate()?;
    let mut lp = CertificateParams::new(vec!["localhost".to_string()])?;
    lp.distinguished_name = DistinguishedName::new();
    lp.distinguished_name.push(DnType::CommonName, "localhost");
    let leaf = lp.signed_by(&key, &issuer)?;
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acc = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let up = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let up_port = up.local_addr()?.port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = up.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acc = acc.clone();
            tokio::spawn(async move {
                let Ok(tls) = acc.accept(tcp).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), hyper::service::service_fn(handle))
                    .await;
            });
        }
    });
    let policy = || {
        let mut p = ProxyPolicy::default();
        p.grants
            .extend(HostRule::new("localhost", Some(up_port), false));
        p.map("localhost", vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        p
    };
    let ca = Arc::new(Ca::load_or_create(&dir.join("state"))?);
    let secret = "ghp_benchSECRETbenchSECRETbench01234567".to_string();
    let placeholder = "ghp_benchPLACEHOLDERbenchPLACEHOLD76543".to_string();
    let cred = BrokerCredential {
        name: "bench".into(),
        hosts: vec![("localhost".into(), up_port)],
        secret,
        placeholder,
        send: Send::Bearer,
    };
    let mut bp = policy();
    bp.broker = Some(Arc::new(Broker::new(
        ca,
        &[dir.join("test-ca.pem")],
        vec![cred],
    )?));
    let mut ports = Vec::new();
    for p in [bp, policy()] {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        ports.push(l.local_addr()?.port());
        let proxy = Proxy::new(p);
        tokio::spawn(async move { proxy.serve_tcp(l).await });
    }
    println!(
        "{{\"upstream\": {up_port}, \"broker\": {}, \"tunnel\": {}, \"broker_ca\": \"{}\"}}",
        ports[0],
        ports[1],
        dir.join("state/ca.pem").display()
    );
    std::future::pending::<()>().await;
    Ok(())
}
