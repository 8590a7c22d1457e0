//! The broker's side toward the upstream: the roots it trusts (the system's, through
//! `rustls-native-certs`, and the config's `extra_roots`) and the TLS dial with the ALPN the
//! call offered and SNI the `CONNECT` host.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Why the upstream roots could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    /// An `extra_roots` file could not be read or holds no certificate.
    #[error("broker: extra root {path}: {why}")]
    Extra {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The system roots (those that parse) and every certificate of the `extra` PEM files.
pub fn roots(extra: &[PathBuf]) -> Result<RootCertStore, RootsError> {
    let mut store = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    store.add_parsable_certificates(native.certs);
    for p in extra {
        let certs = read_pem(p)?;
        for c in certs {
            store.add(c).map_err(|e| RootsError::Extra {
                path: p.clone(),
                why: e.to_string(),
            })?;
        }
    }
    Ok(store)
}

fn read_pem(p: &Path) -> Result<Vec<CertificateDer<'static>>, RootsError> {
    let bad = |why: String| RootsError::Extra {
        path: p.to_path_buf(),
        why,
    };
    let data = std::fs::read(p).map_err(|e| bad(e.to_string()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<_, _>>()
        .map_err(|e| bad(format!("{e:?}")))?;
    if certs.is_empty() {
        return Err(bad("no certificate in it".into()));
    }
    Ok(certs)
}

/// A client config trusting `roots`, offering `alpn`.
pub fn client_config(roots: Arc<RootCertStore>, alpn: Vec<Vec<u8>>) -> ClientConfig {
    let provider = super::provider();
    let mut c =
        match ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
            Ok(b) => b.with_root_certificates(roots).with_no_client_auth(),
            // The ring provider supports the default versions.
            Err(_) => ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        };
    c.alpn_protocols = alpn;
    c
}

/// TLS over `tcp` to `host` (SNI and the name verified), offering `alpn`; the error text
/// says why (an untrusted certificate, another name, a reset).
pub async fn connect(
    roots: Arc<RootCertStore>,
    alpn: Vec<Vec<u8>>,
    host: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, String> {
    let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let conn = TlsConnector::from(Arc::new(client_config(roots, alpn)));
    conn.connect(name, tcp).await.map_err(|e| e.to_string())
}
