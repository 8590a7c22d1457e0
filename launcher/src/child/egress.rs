//! The proxy's sockets inside the call's network namespace (design section 7): the TCP
//! listener the proxy variables name, the DNS server's UDP socket on `127.0.0.1:53`, the
//! listeners for synthetic addresses (port 443 and the ports grants name) and the listeners
//! of the `tcp` host grants on the call's own loopback (`127.0.0.1:PORT`, `[::1]:PORT`),
//! whose connections the proxy relays to the host's same address and port.
//!
//! The init binds them before it forks the line ([`Egress::bind`]) and sends them, listening,
//! to the call's proxy through its socket at [`crate::plan::INSIDE_PROXY_SOCKET`]
//! ([`Egress::send`]); the proxy accepts and answers on them itself (they stay in the call's
//! namespace), so the init runs no thread and no byte of the call passes through it. The
//! init's copies are closed once sent, before the line exists: the line never holds them.
//!
//! The init does not wait for the proxy's answer before it forks the line: the sockets are
//! bound and listening already (a connection waits in the relay's queue, a query in the DNS
//! socket's buffer until the proxy serves them), and the proxy takes a hand-over only on
//! the first connection it accepted, which is the init's (made before the line exists). The
//! answer is watched in the init's loop ([`Pending`]); a refusal, a close or no answer
//! within [`HAND_OVER_WAIT`] ends the call with a setup error. (Waiting for it cost a launch
//! a trip through the service's runtime and back before the line could start.)

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use efr_fdpass::inside::{HandOverError, Sockets};
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
    /// The port of the proxy relay on the call's `127.0.0.1`, the one the proxy variables
    /// name.
    pub relay_port: u16,
    /// Ports besides 443 of the synthetic listeners.
    #[serde(default)]
    pub ports: Vec<u16>,
    /// The addresses of the call's loopback its `tcp` host grants open (`127.0.0.1:PORT`,
    /// `[::1]:PORT`): a listener each, relayed by the proxy to the host's same address.
    #[serde(default)]
    pub tcp: Vec<SocketAddr>,
}

/// The most `tcp` host grants' ports one call gets listeners for (two each: the hand-over
/// carries at most `efr_fdpass::MAX_HANDED` sockets).
pub const MAX_TCP_PORTS: usize = 16;

impl EgressSpec {
    /// The listeners of `grants`' `tcp` host grants: `127.0.0.1:PORT` and `[::1]:PORT` of
    /// each (only the one its host names for `127.0.0.1` and `::1`), each address once, at
    /// most [`MAX_TCP_PORTS`] ports. A `tcp` grant that is not valid opens nothing (the
    /// plan's check refuses it: [`crate::plan`]).
    pub fn tcp_of(grants: &[efr_sandbox_wire::Grant]) -> Vec<SocketAddr> {
        let mut out: Vec<SocketAddr> = Vec::new();
        let mut ports: Vec<u16> = Vec::new();
        for r in grants.iter().filter_map(|g| g.tcp_relay().ok().flatten()) {
            if !ports.contains(&r.port) {
                if ports.len() == MAX_TCP_PORTS {
                    continue;
                }
                ports.push(r.port);
            }
            for ip in r.host.addrs() {
                let a = SocketAddr::new(*ip, r.port);
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        out
    }
}

/// Why the proxy's sockets could not be bound in the call's namespace or handed over.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// A socket bound (`what`: the proxy relay, the dns server, a synthetic relay, a tcp
    /// grant's relay) at `addr`.
    #[error("{what} on {addr}: {source}")]
    Bind {
        /// Which socket: the proxy relay, the dns server, a synthetic relay, a tcp grant's
        /// relay.
        what: &'static str,
        /// The address it was to be bound at.
        addr: SocketAddr,
        /// What the bind said.
        #[source]
        source: std::io::Error,
    },
    /// The proxy did not take the sockets (the hand-over's error names the socket's path).
    #[error("the call's proxy did not take its sockets: {0}")]
    HandOver(#[source] efr_fdpass::inside::HandOverError),
}

/// The bound sockets, until [`Egress::send`].
#[derive(Debug)]
pub struct Egress {
    socket: PathBuf,
    socks: Sockets,
}

impl Egress {
    /// Binds the relay on `127.0.0.1:relay_port`, the DNS socket on `127.0.0.1:53`, the
    /// synthetic listeners on `0.0.0.0:443` and each extra port (only loopback exists in the
    /// namespace) and the `tcp` grants' listeners. A `tcp` address `127.0.0.1:PORT` whose
    /// port has a synthetic listener is that listener's already (the proxy relays a
    /// connection to `127.0.0.1` there as a `tcp` one); an IPv6 one is left out when the
    /// namespace has no `::1` (IPv6 off: nothing of the call can connect there).
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
        let mut tcp = Vec::new();
        for &addr in &spec.tcp {
            let covered = addr.is_ipv4()
                && (addr.port() == SYNTHETIC_PORT || spec.ports.contains(&addr.port()));
            if covered {
                continue;
            }
            match TcpListener::bind(addr) {
                Ok(l) => tcp.push(l),
                Err(e)
                    if matches!(addr.ip(), IpAddr::V6(_))
                        && matches!(
                            e.raw_os_error(),
                            Some(libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT)
                        ) => {}
                Err(source) => {
                    return Err(EgressError::Bind {
                        what: "tcp grant's relay",
                        addr,
                        source,
                    });
                }
            }
        }
        Ok(Egress {
            socket: PathBuf::from(&spec.socket),
            socks: Sockets {
                relay: Some(relay),
                dns: Some(dns),
                synthetic,
                tcp,
            },
        })
    }

    /// Sends every socket to the call's proxy, in one message on a connection of its own
    /// (`efr_fdpass::inside::send`); our copies are closed when this returns. The answer
    /// comes later ([`Pending`]).
    pub fn send(self) -> Result<Pending, EgressError> {
        let u = efr_fdpass::inside::send(&self.socket, self.socks, HAND_OVER_WAIT)
            .map_err(EgressError::HandOver)?;
        u.set_nonblocking(true).map_err(|source| {
            EgressError::HandOver(HandOverError::Timeout {
                path: self.socket.clone(),
                source,
            })
        })?;
        Ok(Pending {
            stream: u,
            deadline: Instant::now() + HAND_OVER_WAIT,
        })
    }
}

/// A hand-over sent and not answered yet, watched by the init while the line runs.
#[derive(Debug)]
pub struct Pending {
    stream: UnixStream,
    deadline: Instant,
}

impl Pending {
    /// The connection, to poll for `POLLIN` (the answer or a close).
    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Milliseconds until the answer is late (at least 1, for a poll timeout).
    pub fn ms_left(&self) -> i32 {
        let left = self.deadline.saturating_duration_since(Instant::now());
        i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1)
    }

    /// What the proxy answered: `Some(Ok(()))` it took the sockets, `Some(Err(_))` it
    /// refused them, closed or did not answer in time; `None` no answer yet.
    pub fn answer(&mut self) -> Option<Result<(), EgressError>> {
        let mut b = [0u8];
        let read = self.stream.read(&mut b);
        // Non-blocking: no answer yet is not a failure until the wait is over.
        if matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            if Instant::now() < self.deadline {
                return None;
            }
            let late = HandOverError::NoAnswer(std::io::ErrorKind::TimedOut.into());
            return Some(Err(EgressError::HandOver(late)));
        }
        efr_fdpass::inside::answer(read, b[0]).map(|r| r.map_err(EgressError::HandOver))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use efr_sandbox_wire::Grant;

    fn tcp(host: &str, port: u16) -> Grant {
        Grant::Host {
            host: host.into(),
            port: Some(port),
            plain_http: false,
            tcp: true,
        }
    }

    /// `localhost` opens both loopback addresses, `127.0.0.1` and `::1` one each; each
    /// address once; a grant without `tcp`, or a `tcp` one that is not valid, opens none.
    #[test]
    fn the_listeners_of_tcp_grants() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        let grants = [
            tcp("localhost", 5432),
            tcp("127.0.0.1", 5432),
            tcp("::1", 6379),
            tcp("127.0.0.1", 8000),
            tcp("db.test", 9000),
            Grant::Host {
                host: "localhost".into(),
                port: Some(9001),
                plain_http: false,
                tcp: false,
            },
        ];
        assert_eq!(
            EgressSpec::tcp_of(&grants),
            vec![
                a("127.0.0.1:5432"),
                a("[::1]:5432"),
                a("[::1]:6379"),
                a("127.0.0.1:8000")
            ]
        );
        let many: Vec<Grant> = (1..=40).map(|p| tcp("127.0.0.1", p)).collect();
        assert_eq!(EgressSpec::tcp_of(&many).len(), MAX_TCP_PORTS);
    }
}
