//! The credential broker's proxy half: with [`crate::ProxyPolicy::broker`] set, every
//! allowed `CONNECT` of the call is terminated with a leaf of the per-user [`Ca`], each
//! request is relayed to the upstream (verified with the system roots + `extra_roots`) over
//! HTTP/1.1 or HTTP/2, a credential's placeholder becomes its secret for the hosts it is
//! bound to, a placeholder anywhere else is refused (`credential`), and a secret echoed back
//! is masked again. docs/broker.md describes it.

pub mod ca;
pub(crate) mod relay;
pub mod rewrite;
pub(crate) mod scanned;
pub mod upstream;

use std::path::PathBuf;
use std::sync::Arc;

pub use ca::{Ca, CaError};

use crate::name;

/// The TLS provider of both sides: ring, not aws-lc-rs (which rustls now prefers for its
/// post-quantum key exchange): aws-lc-rs needs cmake and a C toolchain of its own to build,
/// as the cache merge's fetcher says too.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    #[allow(deprecated)]
    Arc::new(rustls::crypto::ring::default_provider())
}

/// How a credential is sent to its hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Send {
    /// `Authorization: Bearer SECRET`.
    Bearer,
    /// `Authorization: token SECRET`.
    Token,
    /// `Authorization: Basic b64(user:SECRET)` (the call's user is kept).
    Basic {
        /// The user the config names (the call's own is kept on the swap).
        user: String,
    },
    /// The value of the header of this name.
    Header(String),
    /// The query parameter of this name.
    Query(String),
}

/// One credential of a call: its bound hosts, its secret and the call's placeholder of it.
#[derive(Clone)]
pub struct BrokerCredential {
    /// The credential's name (`credential=NAME`).
    pub name: String,
    /// Bound hosts: an exact name or `*.suffix`, and the port.
    pub hosts: Vec<(String, u16)>,
    /// The real secret (never printed).
    pub secret: String,
    /// The call's placeholder: as long as the secret.
    pub placeholder: String,
    /// How it is sent.
    pub send: Send,
}

impl std::fmt::Debug for BrokerCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerCredential")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("secret", &"<secret>")
            .field("send", &self.send)
            .finish_non_exhaustive()
    }
}

impl BrokerCredential {
    /// Whether `host` (normalised) on `port` is one of its bound hosts.
    pub fn binds(&self, host: &str, port: u16) -> bool {
        self.hosts
            .iter()
            .any(|(p, pp)| *pp == port && name::matches(p, host))
    }
}

/// Why a broker could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A placeholder is not as long as its secret (the echo masking needs equal lengths),
    /// is empty, or equals the secret.
    #[error(
        "broker: the placeholder of credential {0} is not a same-length stand-in of its secret"
    )]
    Placeholder(String),
    /// A bound host pattern cannot match anything.
    #[error("broker: credential {name}: bad host pattern {pattern:?}")]
    Host {
        /// The credential.
        name: String,
        /// The pattern.
        pattern: String,
    },
    /// The upstream trust could not be built.
    #[error(transparent)]
    Roots(#[from] upstream::RootsError),
}

/// The broker of one call: the CA, the upstream trust, the call's credentials.
pub struct Broker {
    ca: Arc<Ca>,
    upstream: Arc<rustls::RootCertStore>,
    creds: Vec<BrokerCredential>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("ca", &self.ca)
            .field("creds", &self.creds)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Broker {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Broker {}

impl Broker {
    /// A broker with the CA `ca`, upstreams verified with the system roots and the PEM files
    /// `extra_roots`, for `creds` (each placeholder as long as its secret and not equal to
    /// it; host patterns normalised).
    pub fn new(
        ca: Arc<Ca>,
        extra_roots: &[PathBuf],
        creds: Vec<BrokerCredential>,
    ) -> Result<Broker, BrokerError> {
        let mut out = Vec::with_capacity(creds.len());
        for mut c in creds {
            if c.placeholder.is_empty()
                || c.placeholder.len() != c.secret.len()
                || c.placeholder == c.secret
            {
                return Err(BrokerError::Placeholder(c.name));
            }
            let mut hosts = Vec::new();
            for (p, port) in &c.hosts {
                let Some(n) = name::normalize_pattern(p) else {
                    return Err(BrokerError::Host {
                        name: c.name.clone(),
                        pattern: p.clone(),
                    });
                };
                hosts.push((n, *port));
            }
            c.hosts = hosts;
            out.push(c);
        }
        Ok(Broker {
            ca,
            upstream: Arc::new(upstream::roots(extra_roots)?),
            creds: out,
        })
    }

    /// The CA.
    pub fn ca(&self) -> &Arc<Ca> {
        &self.ca
    }

    /// The credentials.
    pub fn credentials(&self) -> &[BrokerCredential] {
        &self.creds
    }

    /// The credential whose placeholder `s` holds (case-insensitive: DNS names), if any.
    pub fn placeholder_in_name(&self, s: &str) -> Option<&BrokerCredential> {
        let flat: String = s
            .chars()
            .filter(|c| *c != '.')
            .collect::<String>()
            .to_ascii_lowercase();
        self.creds
            .iter()
            .find(|c| flat.contains(&c.placeholder.to_ascii_lowercase()))
    }

    /// The credential whose placeholder is in `bytes` (the first bytes of a plain tunnel),
    /// unless it is bound to `host:port`.
    pub fn placeholder_in(&self, bytes: &[u8], host: &str, port: u16) -> Option<&BrokerCredential> {
        self.creds.iter().find(|c| {
            !c.binds(host, port) && memchr::memmem::find(bytes, c.placeholder.as_bytes()).is_some()
        })
    }

    /// The answer body of a refusal of `c`'s placeholder sent to `host`.
    pub fn refusal_text(c: &BrokerCredential, host: &str, place: &str) -> String {
        let to: Vec<String> = c
            .hosts
            .iter()
            .map(|(h, p)| {
                if *p == 443 {
                    h.clone()
                } else {
                    format!("{h}:{p}")
                }
            })
            .collect();
        format!(
            "efr sandbox proxy: a credential placeholder for {} was sent to {host} (in {place}); \
             it is only sent to {}\n",
            c.name,
            to.join(", ")
        )
    }
}

/// The question name of a DNS query (labels joined with dots, as sent) and the offset just
/// past its question (name, type, class); `None` for a datagram too short or a name that
/// does not end within it (a query's name is never compressed).
pub fn dns_qname(q: &[u8]) -> Option<(String, usize)> {
    let mut at = 12;
    let mut labels: Vec<String> = Vec::new();
    loop {
        let len = usize::from(*q.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        labels.push(String::from_utf8_lossy(q.get(at..at + len)?).into_owned());
        at += len;
    }
    let end = at + 4;
    (q.len() >= end && !labels.is_empty()).then(|| (labels.join("."), end))
}
