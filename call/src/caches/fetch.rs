//! The merge's fetches of a registry's own metadata (a cargo index file, an npm packument),
//! made by the service on the host side to verify what a call left in a cache.
//!
//! They open no way out that the call did not have: only to hosts the call was granted
//! (scheme and port as granted), no redirect followed; a name the config's
//! `[network] resolve` maps goes to that address, any other is resolved as usual and
//! refused in the special ranges the egress proxy refuses ([`efr_proxy::addr`]), or goes
//! through the proxy of the service's environment (`HTTPS_PROXY`, `NO_PROXY`, ...). TLS
//! with the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` honoured). Each fetch is
//! bounded in time and size, all of them together by the merge's deadline, and they run in
//! parallel.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// Most bytes of one registry answer (the largest sparse index files and npm packuments are
/// a few MiB; npm's full documents of the largest packages some tens).
pub const MAX_BODY: u64 = 48 << 20;
/// Longest one fetch may take.
pub const FETCH_TIME: Duration = Duration::from_secs(15);
/// Longest all the fetches of one merge may take together.
pub const MERGE_TIME: Duration = Duration::from_secs(30);
/// Most bytes of all the answers of one merge together (they are kept until checked).
pub const MERGE_BYTES: u64 = 256 << 20;
/// Fetches at once: an install of 50 packages verified in about two round trips
/// (docs/benchmarks.md, "The verified cache merge").
pub const PARALLEL: usize = 32;

/// A host the call was granted, as the merge may fetch from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    /// The host name (lower case), or `*.suffix`.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Whether plain HTTP was granted too.
    pub plain_http: bool,
}

impl Granted {
    /// The host grants of a plan.
    pub fn of(grants: &[efr_sandbox_wire::Grant]) -> Vec<Granted> {
        grants
            .iter()
            .filter_map(|g| match g {
                efr_sandbox_wire::Grant::Host {
                    host,
                    port,
                    plain_http,
                    tcp: false,
                } => Some(Granted {
                    host: host.to_ascii_lowercase(),
                    port: port.unwrap_or(443),
                    plain_http: *plain_http,
                }),
                // Only a host grant through the proxy opens a registry host.
                _ => None,
            })
            .collect()
    }

    fn covers(&self, host: &str) -> bool {
        match self.host.strip_prefix("*.") {
            Some(suffix) => host
                .strip_suffix(suffix)
                .is_some_and(|h| h.ends_with('.') && h.len() > 1),
            None => self.host == host,
        }
    }

    /// The URL root (`https://host/`, `http://host:port/`) of a grant of one host.
    pub fn root_url(&self) -> Option<String> {
        if self.host.starts_with("*.") {
            return None;
        }
        let scheme = if self.plain_http { "http" } else { "https" };
        let default = if self.plain_http { 80 } else { 443 };
        Some(if self.port == default {
            format!("{scheme}://{}/", self.host)
        } else {
            format!("{scheme}://{}:{}/", self.host, self.port)
        })
    }
}

/// Why a fetch gave nothing to verify against.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL is not on a host, scheme and port the call was granted.
    #[error("{0}: not a host the call was granted")]
    NotGranted(String),
    /// The URL could not be read.
    #[error("{0}: not a URL the merge fetches")]
    BadUrl(String),
    /// The registry answered with another status than 200.
    #[error("{url}: the registry answered {status}")]
    Status {
        /// The URL.
        url: String,
        /// Its status.
        status: u16,
    },
    /// The merge's time was up before the fetch.
    #[error("{0}: the merge's time for fetches was up")]
    Deadline(String),
    /// Anything else: the connection, TLS, a time limit, a body over [`MAX_BODY`].
    #[error("{url}: {why}")]
    Failed {
        /// The URL.
        url: String,
        /// What went wrong.
        why: String,
    },
}

/// A registry's answer: the body of a 200, or why there is none.
pub type Answer = Result<Vec<u8>, FetchError>;

/// One fetch to make: a URL and the `Accept` header to send.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Want {
    /// The URL.
    pub url: String,
    /// The `Accept` header (`None`: `*/*`).
    pub accept: Option<String>,
}

/// The client of one merge.
#[derive(Debug, Clone)]
pub struct Fetcher {
    granted: Arc<Vec<Granted>>,
    resolve: Arc<BTreeMap<String, Vec<IpAddr>>>,
    direct: ureq::Agent,
    proxied: ureq::Agent,
    deadline: Instant,
    per_fetch: Duration,
    /// What is left of [`MERGE_BYTES`].
    bytes_left: Arc<std::sync::atomic::AtomicU64>,
}

/// Resolves the hosts of the merge's fetches: `[network] resolve` first (special ranges
/// allowed, as in the proxy), else the system's resolver with every special-range address
/// refused, but for the environment's proxy itself.
#[derive(Debug)]
struct GrantedResolver {
    resolve: Arc<BTreeMap<String, Vec<IpAddr>>>,
    proxy_host: Option<String>,
}

impl Resolver for GrantedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri
            .host()
            .unwrap_or("")
            .trim_matches(|c| c == '[' || c == ']')
            .to_ascii_lowercase();
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("http") {
                80
            } else {
                443
            });
        if let Some(addrs) = self.resolve.get(&host) {
            let mut out = self.empty();
            for a in addrs.iter().take(16) {
                out.push(SocketAddr::new(*a, port));
            }
            return Ok(out);
        }
        let found = DefaultResolver::default().resolve(uri, config, timeout)?;
        if self.proxy_host.as_deref() == Some(host.as_str()) {
            return Ok(found);
        }
        let mut out = self.empty();
        for a in found.iter() {
            if efr_proxy::addr::special_range(a.ip()).is_none() {
                out.push(*a);
            }
        }
        if out.is_empty() {
            return Err(ureq::Error::Other(
                format!("{host} resolves only to special-range addresses").into(),
            ));
        }
        Ok(out)
    }
}

/// The system's roots (`SSL_CERT_FILE`, `SSL_CERT_DIR` honoured), read once a process:
/// the service's environment does not change, and reading them costs milliseconds a merge.
fn roots() -> Arc<Vec<ureq::tls::Certificate<'static>>> {
    static ROOTS: std::sync::OnceLock<Arc<Vec<ureq::tls::Certificate<'static>>>> =
        std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            Arc::new(
                found
                    .certs
                    .into_iter()
                    .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
                    .collect(),
            )
        })
        .clone()
}

impl Fetcher {
    /// A client for the hosts `granted`, with `resolve` (`[network] resolve`), whose
    /// fetches all end by `budget` from now.
    pub fn new(
        granted: Vec<Granted>,
        resolve: BTreeMap<String, Vec<IpAddr>>,
        budget: Duration,
    ) -> Fetcher {
        let resolve = Arc::new(resolve);
        // ring, not aws-lc-rs (which rustls now prefers for its post-quantum key exchange):
        // aws-lc-rs needs cmake and a C toolchain of its own to build, and no registry the
        // merge asks needs more than the classical key exchanges.
        #[allow(deprecated)]
        let provider = rustls::crypto::ring::default_provider();
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .root_certs(ureq::tls::RootCerts::Specific(roots()))
            .unversioned_rustls_crypto_provider(Arc::new(provider))
            .build();
        let env_proxy = ureq::Proxy::try_from_env();
        let agent = |proxy: Option<ureq::Proxy>| {
            let proxy_host = proxy.as_ref().map(|p| p.host().to_ascii_lowercase());
            let config = ureq::Agent::config_builder()
                .tls_config(tls.clone())
                .proxy(proxy)
                .max_redirects(0)
                .http_status_as_error(false)
                .timeout_global(Some(FETCH_TIME))
                .user_agent("efr-sandbox cache verification")
                .max_idle_connections_per_host(PARALLEL)
                .build();
            ureq::Agent::with_parts(
                config,
                ureq::unversioned::transport::DefaultConnector::default(),
                GrantedResolver {
                    resolve: resolve.clone(),
                    proxy_host,
                },
            )
        };
        Fetcher {
            granted: Arc::new(granted),
            direct: agent(None),
            proxied: agent(env_proxy),
            resolve,
            deadline: Instant::now() + budget,
            per_fetch: FETCH_TIME,
            bytes_left: Arc::new(std::sync::atomic::AtomicU64::new(MERGE_BYTES)),
        }
    }

    /// The same client with another time limit per fetch (tests).
    pub fn with_fetch_time(mut self, t: Duration) -> Fetcher {
        self.per_fetch = t;
        self
    }

    /// Whether the call was granted the host, scheme and port of `url`.
    pub fn granted(&self, url: &str) -> bool {
        let Ok(u) = url.parse::<ureq::http::Uri>() else {
            return false;
        };
        let Some(host) = u.host().map(str::to_ascii_lowercase) else {
            return false;
        };
        let (https, default) = match u.scheme_str() {
            Some("https") => (true, 443),
            Some("http") => (false, 80),
            _ => return false,
        };
        let port = u.port_u16().unwrap_or(default);
        self.granted
            .iter()
            .any(|g| g.covers(&host) && g.port == port && (https || g.plain_http))
    }

    /// The body of `url` (status 200), fetched with `accept`.
    pub fn get(&self, want: &Want) -> Result<Vec<u8>, FetchError> {
        let url = &want.url;
        if !self.granted(url) {
            return Err(FetchError::NotGranted(url.clone()));
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(FetchError::Deadline(url.clone()));
        }
        let host = url
            .parse::<ureq::http::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_ascii_lowercase))
            .ok_or_else(|| FetchError::BadUrl(url.clone()))?;
        let agent = if self.resolve.contains_key(&host) {
            &self.direct
        } else {
            &self.proxied
        };
        let failed = |e: ureq::Error| FetchError::Failed {
            url: url.clone(),
            why: e.to_string(),
        };
        let mut req = agent
            .get(url)
            .config()
            .timeout_global(Some(left.min(self.per_fetch)))
            .build();
        req = req.header("accept", want.accept.as_deref().unwrap_or("*/*"));
        let mut resp = req.call().map_err(failed)?;
        if resp.status().as_u16() != 200 {
            return Err(FetchError::Status {
                url: url.clone(),
                status: resp.status().as_u16(),
            });
        }
        use std::sync::atomic::Ordering::SeqCst;
        let left = self.bytes_left.load(SeqCst);
        if left == 0 {
            return Err(FetchError::Failed {
                url: url.clone(),
                why: format!("the merge's {MERGE_BYTES} bytes of answers are spent"),
            });
        }
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY.min(left))
            .read_to_vec()
            .map_err(failed)?;
        let n = body.len() as u64;
        let spent = self
            .bytes_left
            .fetch_update(SeqCst, SeqCst, |l| l.checked_sub(n));
        match spent {
            Ok(_) => Ok(body),
            Err(_) => {
                self.bytes_left.store(0, SeqCst);
                Err(FetchError::Failed {
                    url: url.clone(),
                    why: format!("the merge's {MERGE_BYTES} bytes of answers are spent"),
                })
            }
        }
    }

    /// Every fetch of `wants`, [`PARALLEL`] at a time; the answers in the same order.
    pub fn get_all(&self, wants: &[Want]) -> Vec<Answer> {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let out: std::sync::Mutex<Vec<Option<Answer>>> =
            std::sync::Mutex::new(vec![None; wants.len()]);
        std::thread::scope(|s| {
            for _ in 0..PARALLEL.min(wants.len()) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(w) = wants.get(i) else { break };
                        let r = self.get(w);
                        out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                    }
                });
            }
        });
        out.into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .zip(wants)
            .map(|(r, w)| r.unwrap_or_else(|| Err(FetchError::Deadline(w.url.clone()))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(host: &str, port: u16, plain_http: bool) -> Granted {
        Granted {
            host: host.into(),
            port,
            plain_http,
        }
    }

    #[test]
    fn only_granted_hosts_schemes_and_ports() {
        let f = Fetcher::new(
            vec![
                g("index.crates.io", 443, false),
                g("registry.test", 8080, true),
                g("*.example.com", 443, false),
            ],
            BTreeMap::new(),
            Duration::from_secs(1),
        );
        assert!(f.granted("https://index.crates.io/1/a"));
        assert!(f.granted("https://INDEX.crates.io:443/1/a"));
        assert!(!f.granted("http://index.crates.io/1/a"));
        assert!(!f.granted("https://index.crates.io:8443/1/a"));
        assert!(f.granted("http://registry.test:8080/x"));
        assert!(f.granted("https://registry.test:8080/x"));
        assert!(!f.granted("http://registry.test/x"));
        assert!(f.granted("https://a.example.com/x"));
        assert!(!f.granted("https://example.com/x"));
        assert!(!f.granted("https://aexample.com/x"));
        assert!(!f.granted("ftp://index.crates.io/x"));
        assert!(!f.granted("not a url"));
        assert_eq!(
            f.get(&Want {
                url: "https://static.crates.io/x".into(),
                accept: None
            }),
            Err(FetchError::NotGranted("https://static.crates.io/x".into()))
        );
        assert_eq!(
            g("registry.test", 8080, true).root_url().as_deref(),
            Some("http://registry.test:8080/")
        );
        assert_eq!(
            g("index.crates.io", 443, false).root_url().as_deref(),
            Some("https://index.crates.io/")
        );
        assert_eq!(g("*.example.com", 443, false).root_url(), None);
    }

    /// A granted name that resolves to loopback is refused unless `resolve` maps it (no
    /// fetch from the host's own services by a name a call chose).
    #[test]
    fn special_ranges_are_refused_unless_resolve_names_the_host() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                use std::io::{Read, Write};
                let mut c = c;
                let mut b = [0u8; 1024];
                let _ = c.read(&mut b);
                let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        let want = Want {
            url: format!("http://localhost:{port}/x"),
            accept: None,
        };
        let f = Fetcher::new(
            vec![g("localhost", port, true)],
            BTreeMap::new(),
            Duration::from_secs(5),
        );
        let e = f.get(&want).unwrap_err();
        assert!(e.to_string().contains("special-range"), "{e}");
        let f = Fetcher::new(
            vec![g("localhost", port, true)],
            BTreeMap::from([("localhost".to_string(), vec!["127.0.0.1".parse().unwrap()])]),
            Duration::from_secs(5),
        );
        assert_eq!(f.get(&want).unwrap(), b"ok");
    }
}
