//! What a call may reach: [`ProxyPolicy`] and the pure [`ProxyPolicy::decide`].
//!
//! The order of checks (docs/proxy.md holds the same list):
//!
//! 1. the request head parses (`CONNECT host:port`, or an absolute `http://` URI) -> else
//!    `bad_request` (done by [`crate::head`]);
//! 2. the host normalises (lower case, trailing dot, IDNA to punycode, label syntax) -> else
//!    `bad_request`;
//! 3. the host is not an IP literal (v4 in any `inet_aton` form, `[v6]`) -> else `ip_literal`;
//! 4. neither the deny list nor the token hosts match -> else `denied` (no grant opens them);
//! 5. a grant or an allow rule matches the name -> else `not_allowed`;
//! 6. one of those rules names the port -> else `not_allowed`;
//! 7. plain HTTP only when such a rule says `plain_http` -> else `not_tls`;
//! 8. (server) the connection and byte limits hold -> else `limit`;
//! 9. (server) every resolved address is ordinary, unless `resolve` maps the name -> else
//!    `denied`;
//! 10. (server) the tunnel starts with a ClientHello whose SNI is the host -> else `not_tls`
//!     (not TLS) or `bad_request` (malformed hello, missing or other SNI).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use efr_sandbox_wire::launch::{Grant, TcpGrantError, TcpRelay};
use efr_sandbox_wire::summary::BlockReason;

use crate::broker::Broker;
use crate::name::{self, Host};

/// One host rule: a grant or an allow list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// Normalised exact name or `*.suffix`.
    pub pattern: String,
    /// `None`: 443 for CONNECT, and 80 for plain HTTP when `plain_http`.
    pub port: Option<u16>,
    /// Plain HTTP (absolute-URI requests) to this host is fine.
    pub plain_http: bool,
}

impl HostRule {
    /// A rule for `pattern` (a name or `*.suffix`, normalised here). `None` when the pattern
    /// can never match (an IP literal, garbage, a bare `*`).
    pub fn new(pattern: &str, port: Option<u16>, plain_http: bool) -> Option<HostRule> {
        Some(HostRule {
            pattern: name::normalize_pattern(pattern)?,
            port,
            plain_http,
        })
    }

    /// The rule of a `host` grant; `None` for other grants, a pattern that cannot match,
    /// and a `tcp` grant (not a name the proxy's HTTP side opens: [`ProxyPolicy::tcp`]).
    pub fn from_grant(g: &Grant) -> Option<HostRule> {
        match g {
            Grant::Host {
                host,
                port,
                plain_http,
                tcp: false,
            } => HostRule::new(host, *port, *plain_http),
            // Only a host grant without tcp is a name the proxy's HTTP side opens.
            _ => None,
        }
    }

    /// Parse `NAME[:PORT][:http]` (the CLI form of a host grant, without `host=`).
    pub fn parse_cli(s: &str) -> Option<HostRule> {
        let mut parts: Vec<&str> = s.split(':').collect();
        let mut plain = false;
        if parts.len() > 1 && parts.last() == Some(&"http") {
            plain = true;
            parts.pop();
        }
        let port = match parts.len() {
            1 => None,
            2 => Some(parts[1].parse::<u16>().ok().filter(|&p| p != 0)?),
            _ => return None,
        };
        HostRule::new(parts[0], port, plain)
    }

    /// Parse `HOST:PORT:tcp` (the CLI form of a `tcp` host grant, without `host=`; `HOST`
    /// is `localhost`, `127.0.0.1`, `::1` or `[::1]`): `None` when `s` does not end in
    /// `:tcp` (another form), else the grant or why it cannot be one.
    pub fn parse_tcp_cli(s: &str) -> Option<Result<Grant, TcpGrantError>> {
        let rest = s.strip_suffix(":tcp")?;
        Some(efr_sandbox_wire::grant_text::parse_tcp(rest))
    }

    fn admits_port(&self, port: u16, kind: Kind) -> bool {
        match self.port {
            Some(p) => p == port,
            None => port == 443 || (kind == Kind::PlainHttp && self.plain_http && port == 80),
        }
    }
}

/// The limits of one call's proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, in every phase (each holds one fd of the process); past
    /// it a new connection is answered `limit` and closed at once.
    pub max_open: usize,
    /// Connections (tunnels, and requests past their head) at once.
    pub max_conns: usize,
    /// Connections still sending their head at once; past it a connection is closed unread.
    pub max_pending: usize,
    /// Total bytes through all tunnels of the call, both ways.
    pub max_bytes: u64,
    /// A tunnel with no byte either way for this long ends.
    pub idle_timeout: Duration,
    /// Time for the request head, the resolution + dial, and the ClientHello, each.
    pub handshake_timeout: Duration,
    /// Longest request or header line.
    pub max_line: usize,
    /// Most header lines.
    pub max_headers: usize,
    /// Largest request head.
    pub max_head: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_open: 256,
            max_conns: 128,
            max_pending: 1024,
            max_bytes: 64 << 30,
            idle_timeout: Duration::from_secs(300),
            handshake_timeout: Duration::from_secs(10),
            max_line: 8 << 10,
            max_headers: 64,
            max_head: 16 << 10,
        }
    }
}

/// What one call may reach through its proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyPolicy {
    /// The call's `host` grants.
    pub grants: Vec<HostRule>,
    /// The config's allow list.
    pub allow: Vec<HostRule>,
    /// The config's deny list: normalised names or `*.suffix`.
    pub deny: Vec<String>,
    /// Hosts the call could hold a token for (same form as `deny`).
    pub token_hosts: Vec<String>,
    /// Why each token host is one (where the token is and how to keep it from calls), by
    /// its pattern: what a refusal of it says.
    pub token_why: BTreeMap<String, String>,
    /// `[network.resolve]`: names the proxy resolves to these addresses, special ranges
    /// allowed (local registries, tests). Keys normalised.
    pub resolve: BTreeMap<String, Vec<IpAddr>>,
    /// The call's bounds: connections, bytes, timeouts and the request head's size.
    pub limits: Limits,
    /// The call's `tcp` host grants: the host loopback ports its own loopback's listeners
    /// relay to.
    pub tcp: Vec<TcpRelay>,
    /// The credential broker of a call that holds a `credential` grant: every allowed
    /// `CONNECT` is then terminated and relayed by it (`crate::broker`); `None`: tunnels.
    pub broker: Option<Arc<Broker>>,
}

/// Kind of proxy request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `CONNECT host:port`: a TLS tunnel.
    Connect,
    /// An absolute-URI `http://` request.
    PlainHttp,
}

/// The result of [`ProxyPolicy::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go on: `host` normalised; `addrs` the mapped addresses when `resolve` names it.
    Allow {
        /// The host, normalised.
        host: String,
        /// The port asked for.
        port: u16,
        /// The addresses `[network.resolve]` maps the name to; `None`: resolve it as usual.
        addrs: Option<Vec<IpAddr>>,
    },
    /// Refuse; `host` normalised when possible, else the raw host (cut to 253 bytes).
    Refuse {
        /// The host, normalised when possible, else as sent (cut to 253 bytes).
        host: String,
        /// The port asked for.
        port: u16,
        /// Why the proxy refuses.
        reason: BlockReason,
    },
}

impl ProxyPolicy {
    /// A policy from the call's grants (other kinds ignored; a `tcp` grant that is not
    /// valid too: the call's params are checked before) and default limits.
    pub fn from_grants<'a>(grants: impl IntoIterator<Item = &'a Grant>) -> ProxyPolicy {
        let grants: Vec<&Grant> = grants.into_iter().collect();
        let mut tcp: Vec<TcpRelay> = Vec::new();
        for r in grants.iter().filter_map(|g| g.tcp_relay().ok().flatten()) {
            if !tcp.contains(&r) {
                tcp.push(r);
            }
        }
        ProxyPolicy {
            grants: grants
                .iter()
                .filter_map(|g| HostRule::from_grant(g))
                .collect(),
            tcp,
            ..Default::default()
        }
    }

    /// Whether a `tcp` grant opens the host's `addr` (a loopback address and port): the
    /// address a connection to the call's own `addr` is relayed to.
    pub fn tcp_allows(&self, addr: SocketAddr) -> bool {
        self.tcp
            .iter()
            .any(|r| r.port == addr.port() && r.host.names(addr.ip()))
    }

    /// Add a deny list or token host pattern (normalised; garbage ignored).
    pub fn deny(&mut self, pattern: &str) {
        if let Some(p) = name::normalize_pattern(pattern) {
            self.deny.push(p);
        }
    }

    /// Add a token host pattern.
    pub fn token_host(&mut self, pattern: &str) {
        if let Some(p) = name::normalize_pattern(pattern) {
            self.token_hosts.push(p);
        }
    }

    /// Add a token host pattern with why it is one (the first why of a pattern is kept).
    pub fn token_host_because(&mut self, pattern: &str, why: String) {
        if let Some(p) = name::normalize_pattern(pattern) {
            self.token_why.entry(p.clone()).or_insert(why);
            self.token_hosts.push(p);
        }
    }

    /// Why the token host that `host` matches is one, when the policy says.
    pub fn token_reason(&self, host: &str) -> Option<&str> {
        self.token_why
            .iter()
            .find(|(p, _)| name::matches(p, host))
            .map(|(_, w)| w.as_str())
    }

    /// Map a name to addresses (`[network.resolve]`).
    pub fn map(&mut self, host: &str, addrs: Vec<IpAddr>) {
        if let Ok(Host::Name(n)) = name::normalize(host) {
            self.resolve.insert(n, addrs);
        }
    }

    /// Decide on a request for `host` (raw, as in the request) and `port`. Pure.
    pub fn decide(&self, kind: Kind, host: &str, port: u16) -> Decision {
        let refuse = |host: String, reason| Decision::Refuse { host, port, reason };
        if port == 0 {
            return refuse(cut(host), BlockReason::BadRequest);
        }
        let name = match name::normalize(host) {
            Err(_) => return refuse(cut(host), BlockReason::BadRequest),
            Ok(Host::Ip(_)) => {
                return refuse(cut(host).to_ascii_lowercase(), BlockReason::IpLiteral);
            }
            Ok(Host::Name(n)) => n,
        };
        if self.is_denied(&name) {
            return refuse(name, BlockReason::Denied);
        }
        let rules: Vec<&HostRule> = self
            .grants
            .iter()
            .chain(&self.allow)
            .filter(|r| name::matches(&r.pattern, &name))
            .collect();
        if rules.is_empty() {
            return refuse(name, BlockReason::NotAllowed);
        }
        let at_port: Vec<&&HostRule> = rules.iter().filter(|r| r.admits_port(port, kind)).collect();
        if at_port.is_empty() {
            return refuse(name, BlockReason::NotAllowed);
        }
        if kind == Kind::PlainHttp && !at_port.iter().any(|r| r.plain_http) {
            return refuse(name, BlockReason::NotTls);
        }
        let addrs = self.resolve.get(&name).cloned();
        Decision::Allow {
            host: name,
            port,
            addrs,
        }
    }

    fn is_denied(&self, name: &str) -> bool {
        self.deny
            .iter()
            .chain(&self.token_hosts)
            .any(|p| name::matches(p, name))
    }

    /// May the in-namespace DNS server answer `name` (normalised)? True when a CONNECT to it
    /// on some port could pass the name checks (steps 2 to 5).
    pub fn name_allowed(&self, name: &str) -> bool {
        !self.is_denied(name)
            && self
                .grants
                .iter()
                .chain(&self.allow)
                .any(|r| name::matches(&r.pattern, name))
    }
}

fn cut(s: &str) -> String {
    let mut end = s.len().min(name::MAX_NAME);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use BlockReason::*;

    fn policy() -> ProxyPolicy {
        let mut p = ProxyPolicy::default();
        p.grants.push(HostRule::parse_cli("registry.test").unwrap());
        p.grants
            .push(HostRule::parse_cli("*.crates.test:8443").unwrap());
        p.grants
            .push(HostRule::parse_cli("plain.test:8080:http").unwrap());
        p.grants.push(HostRule::parse_cli("web.test:http").unwrap());
        p.grants.push(HostRule::parse_cli("secret.test").unwrap());
        p.allow
            .push(HostRule::new("*.allowed.test", None, false).unwrap());
        p.deny("metadata.google.internal");
        p.token_host("secret.test");
        p.map("registry.test", vec!["127.0.0.1".parse().unwrap()]);
        p
    }

    fn reason(kind: Kind, host: &str, port: u16) -> Option<BlockReason> {
        match policy().decide(kind, host, port) {
            Decision::Allow { .. } => None,
            Decision::Refuse { reason, .. } => Some(reason),
        }
    }

    #[test]
    fn order() {
        use Kind::*;
        assert_eq!(reason(Connect, "registry.test", 443), None);
        assert_eq!(reason(Connect, "REGISTRY.test.", 443), None);
        assert_eq!(reason(Connect, "registry.test", 444), Some(NotAllowed));
        assert_eq!(reason(Connect, "other.test", 443), Some(NotAllowed));
        assert_eq!(reason(Connect, "a.crates.test", 8443), None);
        assert_eq!(reason(Connect, "a.crates.test", 443), Some(NotAllowed));
        assert_eq!(reason(Connect, "crates.test", 8443), Some(NotAllowed));
        assert_eq!(reason(Connect, "x.allowed.test", 443), None);
        assert_eq!(reason(Connect, "allowed.test", 443), Some(NotAllowed));
        assert_eq!(
            reason(Connect, "metadata.google.internal", 443),
            Some(Denied)
        );
        assert_eq!(reason(Connect, "secret.test", 443), Some(Denied));
        assert_eq!(reason(Connect, "127.0.0.1", 443), Some(IpLiteral));
        assert_eq!(reason(Connect, "2130706433", 443), Some(IpLiteral));
        assert_eq!(reason(Connect, "0x7f.1", 443), Some(IpLiteral));
        assert_eq!(reason(Connect, "[::1]", 443), Some(IpLiteral));
        assert_eq!(reason(Connect, "bad host", 443), Some(BadRequest));
        assert_eq!(reason(Connect, "registry.test", 0), Some(BadRequest));
        assert_eq!(reason(PlainHttp, "registry.test", 443), Some(NotTls));
        assert_eq!(reason(PlainHttp, "plain.test", 8080), None);
        assert_eq!(reason(PlainHttp, "plain.test", 80), Some(NotAllowed));
        assert_eq!(reason(PlainHttp, "web.test", 80), None);
        assert_eq!(reason(Connect, "web.test", 443), None);
        assert_eq!(reason(Connect, "web.test", 80), Some(NotAllowed));
    }

    #[test]
    fn cli_and_grants() {
        let g = Grant::Host {
            host: "Example.com".into(),
            port: None,
            plain_http: false,
            tcp: false,
        };
        assert_eq!(HostRule::from_grant(&g).unwrap().pattern, "example.com");
        assert_eq!(
            HostRule::parse_cli("a.test:80:http").unwrap().port,
            Some(80)
        );
        assert!(HostRule::parse_cli("a.test:0").is_none());
        assert!(HostRule::parse_cli("a.test:x").is_none());
        assert!(HostRule::parse_cli("1.2.3.4").is_none());
        assert!(policy().name_allowed("registry.test"));
        assert!(!policy().name_allowed("secret.test"));
        assert!(!policy().name_allowed("nope.test"));
    }

    #[test]
    fn tcp_grants_open_their_loopback_port_and_no_name() {
        let tcp = |s: &str| HostRule::parse_tcp_cli(s).unwrap().unwrap();
        let grants = [
            tcp("localhost:5432:tcp"),
            tcp("[::1]:6379:tcp"),
            tcp("127.0.0.1:8000:tcp"),
        ];
        let p = ProxyPolicy::from_grants(&grants);
        assert!(p.grants.is_empty(), "a tcp grant is no name rule: {p:?}");
        let at = |a: &str| p.tcp_allows(a.parse().unwrap());
        assert!(at("127.0.0.1:5432") && at("[::1]:5432") && at("[::ffff:127.0.0.1]:5432"));
        assert!(at("[::1]:6379") && !at("127.0.0.1:6379"));
        assert!(at("127.0.0.1:8000") && !at("[::1]:8000"));
        assert!(!at("127.0.0.1:5433") && !at("127.0.0.2:5432") && !at("10.0.0.1:5432"));
        // The HTTP side does not open the name.
        assert!(matches!(
            p.decide(Kind::Connect, "localhost", 5432),
            Decision::Refuse {
                reason: NotAllowed,
                ..
            }
        ));
        assert!(!p.name_allowed("localhost"));
        // Not the CLI form of a tcp grant.
        assert!(HostRule::parse_tcp_cli("localhost:5432").is_none());
        assert!(HostRule::parse_tcp_cli("a.test:http").is_none());
        // The CLI form, with its errors.
        assert_eq!(
            grants[1],
            Grant::Host {
                host: "::1".into(),
                port: Some(6379),
                plain_http: false,
                tcp: true
            }
        );
        assert_eq!(
            HostRule::parse_tcp_cli("LOCALHOST:1:tcp").unwrap().unwrap(),
            Grant::Host {
                host: "localhost".into(),
                port: Some(1),
                plain_http: false,
                tcp: true
            }
        );
        for (bad, e) in [
            (
                "db.test:5432:tcp",
                TcpGrantError::NotLoopback("db.test".into()),
            ),
            (
                "127.0.0.2:5432:tcp",
                TcpGrantError::NotLoopback("127.0.0.2".into()),
            ),
            ("localhost:tcp", TcpGrantError::NoPort("localhost".into())),
            ("localhost:0:tcp", TcpGrantError::NoPort("localhost".into())),
            ("localhost:x:tcp", TcpGrantError::NoPort("localhost".into())),
            (
                "localhost:70000:tcp",
                TcpGrantError::NoPort("localhost".into()),
            ),
        ] {
            assert_eq!(HostRule::parse_tcp_cli(bad), Some(Err(e)), "{bad}");
        }
        // The HTTP form does not take tcp.
        assert!(HostRule::parse_cli("localhost:5432:tcp").is_none());
    }
}
