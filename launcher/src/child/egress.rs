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
#[derive(Debug)]
pub struct Egress {
    socket: PathBuf,
    socks: Sockets,
}

impl Egress {
    /// Binds the relay on `127.0.0.1:relay_port`, the DNS socket on `127.0.0.1:53` and the
    /// synthetic listeners on `0.0.0.0:443` and each extra port (only loopback exists in the
    /// namespace).
    pub fn bind(spec: &EgressSpec) -> Result<Egress, String> {
        let lo = Ipv4Addr::LOCALHOST;
        let relay = TcpListener::bind(SocketAddr::from((lo, spec.relay_port)))
            .map_err(|e| format!("proxy relay on 127.0.0.1:{}: {e}", spec.relay_port))?;
        let dns = UdpSocket::bind(SocketAddr::from((lo, DNS_PORT)))
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
            socks: Sockets {
                relay: Some(relay),
                dns: Some(dns),
                synthetic,
            },
        })
    }

    /// Hands every socket to the call's proxy and waits until it took them; our copies are
    /// closed when this returns.
    pub fn hand_over(self) -> Result<(), String> {
        hand_over(&self.socket, self.socks, HAND_OVER_WAIT)
            .map_err(|e| format!("the call's proxy did not take its sockets: {e}"))
    }
}
