//! The proxy's sockets inside the call's network namespace (design section 7): the TCP
//! listener the proxy variables name, the DNS server's UDP socket on `127.0.0.1:53` and the
//! listeners for synthetic addresses (port 443 and the ports grants name).
//!
//! The init binds them before it forks the line ([`Egress::bind`]) and hands them, listening,
//! to the call's proxy through its socket at [`crate::plan::INSIDE_PROXY_SOCKET`]
//! ([`Egress::hand_over`], `efr_fdpass::inside::hand_over`); the proxy accepts and answers on
//! them itself (they stay in the call's namespace), so the init runs no thread and no byte of
//! the call passes through it. The init's copies are closed once the proxy took them, before
//! the line exists: the line never holds them.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use efr_fdpass::inside::{Sockets, hand_over};
use serde::{Deserialize, Serialize};

/// The DNS server's port (resolv.conf cannot name another).
pub const DNS_PORT: u16 = 53;
/// The port tools that ignore the proxy variables dial on a synthetic address.
pub const SYNTHETIC_PORT: u16 = 443;
/// How long the init waits for the proxy to take the sockets.
pub const HAND_OVER_WAIT: Duration = Duration::from_secs(10);

/// What the init needs of the proxy plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSpec {
    /// The proxy socket as the init sees it.
    pub socket: String,
    pub relay_port: u16,
    /// Ports besides 443 of the synthetic listeners.
    #[serde(default)]
    pub ports: Vec<u16>,
}

/// The bound sockets, until [`Egress::hand_over`].
/// Why the proxy's sockets could not be bound in the call's namespace or handed over.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// A socket bound (`what`: the proxy relay, the dns server, a synthetic relay) at `addr`.
    #[error("{what} on {addr}: {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The proxy did not take the sockets (the hand-over's error names the socket's path).
    #[error("the call's proxy did not take its sockets: {0}")]
    HandOver(#[source] efr_fdpass::inside::HandOverError),
}

#[derive(Debug)]
pub struct Egress {
    socket: PathBuf,
    socks: Sockets,
}

impl Egress {
    /// Binds the relay on `127.0.0.1:relay_port`, the DNS socket on `127.0.0.1:53` and the
    /// synthetic listeners on `0.0.0.0:443` and each extra port (only loopback exists in the
    /// namespace).
    pub fn bind(spec: &EgressSpec) -> Result<Egress, EgressError> {
        let lo = Ipv4Addr::LOCALHOST;
        let err = |what: &'static str, addr: SocketAddr| {
            move |source| EgressError::Bind { what, addr, source }
        };
        let addr = SocketAddr::from((lo, spec.relay_port));
        let relay = TcpListener::bind(addr).map_err(err("proxy relay", addr))?;
        let addr = SocketAddr::from((lo, DNS_PORT));
        let dns = UdpSocket::bind(addr).map_err(err("dns server", addr))?;
        let mut synthetic = Vec::new();
        for port in std::iter::once(SYNTHETIC_PORT).chain(spec.ports.iter().copied()) {
            let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
            synthetic.push(TcpListener::bind(addr).map_err(err("synthetic relay", addr))?);
        }
        Ok(Egress {
            socket: PathBuf::from(&spec.socket),
            socks: Sockets {
                relay: Some(relay),
                dns: Some(dns),
                synthetic,
            },
        })
    }

    /// Hands every socket to the call's proxy and waits until it took them; our copies are
    /// closed when this returns.
    pub fn hand_over(self) -> Result<(), EgressError> {
        hand_over(&self.socket, self.socks, HAND_OVER_WAIT).map_err(EgressError::HandOver)
    }
}
