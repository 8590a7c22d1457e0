//! The proxy pieces the init runs inside the call's network namespace (design section 7):
//! the TCP relay the proxy variables name, the DNS server on `127.0.0.1:53` and the
//! synthetic relay on port 443, each a thread of the init, all reaching the call's proxy
//! through its socket bound at [`crate::plan::INSIDE_PROXY_SOCKET`].
//!
//! The sockets are bound by [`Egress::bind`] before the init forks the line (so the line
//! finds them listening, and never holds their fds: it closes every fd but 0-2), the threads
//! start in [`Egress::start`] after the fork (a fork of a threaded process is avoided).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use efr_proxy::dns::{NameTable, SYNTHETIC_BASE};
use efr_proxy::inside::{DnsServer, run_relay, run_synthetic_relay};
use efr_proxy::{HostRule, ProxyPolicy};
use serde::{Deserialize, Serialize};

/// The DNS server's port (resolv.conf cannot name another).
pub const DNS_PORT: u16 = 53;
/// The port tools that ignore the proxy variables dial on a synthetic address.
pub const SYNTHETIC_PORT: u16 = 443;

/// What the init needs of the proxy plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSpec {
    /// The proxy socket as the init sees it.
    pub socket: String,
    pub names: Vec<String>,
    pub deny: Vec<String>,
    pub relay_port: u16,
    /// Ports besides 443 of the synthetic relay.
    #[serde(default)]
    pub ports: Vec<u16>,
}

impl EgressSpec {
    /// The name table of the DNS server: `names` allowed, `deny` refused.
    pub fn table(&self) -> NameTable {
        let mut p = ProxyPolicy {
            grants: self
                .names
                .iter()
                .filter_map(|n| HostRule::new(n, None, false))
                .collect(),
            ..Default::default()
        };
        for d in &self.deny {
            p.deny(d);
        }
        NameTable::new(p, SYNTHETIC_BASE)
    }
}

/// The bound sockets, until [`Egress::start`].
#[derive(Debug)]
pub struct Egress {
    socket: PathBuf,
    relay: TcpListener,
    dns: DnsServer,
    synthetic: Vec<TcpListener>,
    table: Arc<NameTable>,
}

impl Egress {
    /// Binds the relay on `127.0.0.1:relay_port`, the DNS server on `127.0.0.1:53` and the
    /// synthetic relay on `0.0.0.0:443` (only loopback exists in the namespace).
    pub fn bind(spec: &EgressSpec) -> Result<Egress, String> {
        let table = Arc::new(spec.table());
        let lo = Ipv4Addr::LOCALHOST;
        let relay = TcpListener::bind(SocketAddr::from((lo, spec.relay_port)))
            .map_err(|e| format!("proxy relay on 127.0.0.1:{}: {e}", spec.relay_port))?;
        let dns = DnsServer::bind(SocketAddr::from((lo, DNS_PORT)), table.clone())
            .map_err(|e| format!("dns server on 127.0.0.1:{DNS_PORT}: {e}"))?;
        let mut synthetic = Vec::new();
        for port in std::iter::once(SYNTHETIC_PORT).chain(spec.ports.iter().copied()) {
            synthetic.push(
                TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
                    .map_err(|e| format!("synthetic relay on port {port}: {e}"))?,
            );
        }
        Ok(Egress {
            socket: PathBuf::from(&spec.socket),
            relay,
            dns,
            synthetic,
            table,
        })
    }

    /// Starts the three threads; they live as long as the init.
    pub fn start(self) {
        let Egress {
            socket,
            relay,
            dns,
            synthetic,
            table,
        } = self;
        let s1 = socket.clone();
        std::thread::spawn(move || run_relay(relay, &s1));
        std::thread::spawn(move || dns.run());
        for l in synthetic {
            let (t, s) = (table.clone(), socket.clone());
            std::thread::spawn(move || run_synthetic_relay(l, t, &s, None));
        }
    }
}
