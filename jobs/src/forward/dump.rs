//! The TCP listeners of a network namespace, from the kernel's socket diagnostics
//! (`NETLINK_SOCK_DIAG`, the inet families, through the `netlink-packet-sock-diag` crate):
//! the request of a dump of listening TCP sockets of one family, and [`ListenDump`], the
//! reader of the dump's datagrams (fuzzed: `fuzz/fuzz_targets/inet_diag_dump.rs`).

use std::net::IpAddr;

use efr_launcher::view::host_sockets::{WalkFail, walk};
use netlink_packet_core::{NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::inet::nlas::Nla;
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};

/// The most messages read before the dump is taken as broken (a dump ends with `Done`;
/// each message is one listening socket, and a job with a million listeners is not a real
/// one).
const MAX_MESSAGES: usize = 1 << 16;

/// A listening TCP socket of the namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Listener {
    /// The address it is bound to (`0.0.0.0` and `::` for any).
    pub addr: IpAddr,
    /// Its port.
    pub port: u16,
    /// An IPv6 socket that takes IPv6 only (`IPV6_V6ONLY`); false for IPv4.
    pub v6only: bool,
    /// Its inode (the number of `socket:[N]` of an fd that holds it).
    pub inode: u32,
}

/// Why a dump's bytes were not a dump of listening inet sockets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    /// A message that does not decode.
    #[error("the inet sock_diag dump: a message that does not decode: {0}")]
    Message(String),
    /// The kernel's error message.
    #[error("the inet sock_diag dump: the kernel said {0}")]
    Kernel(String),
    /// More messages than any job has listeners.
    #[error("the inet sock_diag dump: over {MAX_MESSAGES} messages")]
    TooLong,
    /// The socket's end before the dump's last message.
    #[error("the inet sock_diag dump: ended before its last message")]
    Cut,
}

/// `AF_INET` as the byte of a sock_diag request (linux/socket.h).
pub const AF_INET: u8 = 2;
/// `AF_INET6` as the byte of a sock_diag request (linux/socket.h).
pub const AF_INET6: u8 = 10;

/// The bytes of a request for a dump of the listening TCP sockets of `family`
/// ([`AF_INET`] or [`AF_INET6`]).
pub fn request(family: u8) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let socket_id = if family == AF_INET6 {
        SocketId::new_v6()
    } else {
        SocketId::new_v4()
    };
    let request = InetRequest {
        family,
        // IPPROTO_TCP is 6.
        protocol: 6,
        extensions: ExtensionFlags::empty(),
        states: StateFlags::LISTEN,
        socket_id,
    };
    let mut packet = NetlinkMessage::new(header, SockDiagMessage::InetRequest(request).into());
    packet.finalize();
    let mut out = vec![0; packet.buffer_len()];
    packet.serialize(&mut out);
    out
}

/// The listeners a dump has given so far.
#[derive(Debug, Default)]
pub struct ListenDump {
    listeners: Vec<Listener>,
    messages: usize,
}

impl From<WalkFail> for DumpError {
    fn from(f: WalkFail) -> DumpError {
        match f {
            WalkFail::Message(m) => DumpError::Message(m),
            WalkFail::Kernel(m) => DumpError::Kernel(m),
            WalkFail::TooLong => DumpError::TooLong,
        }
    }
}

impl ListenDump {
    /// Takes the listeners of one datagram of the dump; `true` once the dump's last
    /// message is in. A socket not in the listening state (the kernel filters by state;
    /// checked again here) is left out.
    pub fn take(&mut self, bytes: &[u8]) -> Result<bool, DumpError> {
        let listeners = &mut self.listeners;
        let done = walk(bytes, &mut self.messages, MAX_MESSAGES, |m| match m {
            // TCP_LISTEN is 10.
            SockDiagMessage::InetResponse(r) if r.header.state == 10 => {
                let v6only = r.nlas.iter().any(|n| matches!(n, Nla::SkV6Only(true)));
                listeners.push(Listener {
                    addr: r.header.socket_id.source_address,
                    port: r.header.socket_id.source_port,
                    v6only: v6only && r.header.socket_id.source_address.is_ipv6(),
                    inode: r.header.inode,
                });
            }
            _ => {}
        })?;
        Ok(done)
    }

    /// The listeners taken, in the dump's order.
    pub fn listeners(self) -> Vec<Listener> {
        self.listeners
    }
}

/// Why the host's listeners could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostDumpError {
    /// The `NETLINK_SOCK_DIAG` socket of this process's namespace, or its send or receive.
    #[error("the host's sock_diag socket: {0}")]
    Io(#[from] std::io::Error),
    /// The dump's bytes.
    #[error(transparent)]
    Dump(#[from] DumpError),
}

/// How long the host's dump may take (the kernel answers at once; this bounds a socket
/// that broke).
const HOST_DUMP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The listening TCP sockets of this process's own network namespace (the host's, for the
/// service), both families, read blocking with a socket of its own.
pub fn host_listeners() -> Result<Vec<Listener>, HostDumpError> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, recv, send, setsockopt, socket,
        sockopt::ReceiveTimeout,
    };
    use std::os::fd::AsRawFd;
    let s = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .map_err(std::io::Error::from)?;
    let timeout =
        nix::sys::time::TimeVal::new(i64::try_from(HOST_DUMP_TIMEOUT.as_secs()).unwrap_or(2), 0);
    setsockopt(&s, ReceiveTimeout, &timeout).map_err(std::io::Error::from)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    for family in [AF_INET, AF_INET6] {
        send(s.as_raw_fd(), &request(family), MsgFlags::empty()).map_err(std::io::Error::from)?;
        let mut d = ListenDump::default();
        loop {
            let n =
                recv(s.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(std::io::Error::from)?;
            if n == 0 {
                return Err(DumpError::Cut.into());
            }
            if d.take(buf.get(..n).unwrap_or_default())? {
                break;
            }
        }
        out.extend(d.listeners());
    }
    Ok(out)
}

/// Whether a listener on `addr` takes the connections of a client of the host's loopback
/// (`localhost`, `127.0.0.1`, `::1`, either family first): a loopback address (`127/8`,
/// `::1`), the unspecified ones (`0.0.0.0`, `::`), or those as IPv4-mapped addresses.
pub fn serves_loopback(addr: IpAddr) -> bool {
    let v4 = match addr {
        IpAddr::V4(a) => a,
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(m) => m,
            None => return a.is_loopback() || a.is_unspecified(),
        },
    };
    v4.is_loopback() || v4.is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};
    use std::os::fd::AsRawFd;

    /// Dumps the listeners of `family` of this process's namespace with a socket of its own.
    fn dump(family: u8) -> Vec<Listener> {
        use nix::sys::socket::{
            AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, recv, send, socket,
        };
        let s = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkSockDiag,
        )
        .unwrap();
        send(s.as_raw_fd(), &request(family), MsgFlags::empty()).unwrap();
        let mut d = ListenDump::default();
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = recv(s.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap();
            assert!(n > 0, "{}", DumpError::Cut);
            if d.take(&buf[..n]).unwrap() {
                return d.listeners();
            }
        }
    }

    /// A listener of this process is in the dump with its address, port and inode; a
    /// connected socket is not; an IPv6 listener says whether it is IPv6 only.
    #[test]
    fn the_dump_lists_listeners() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_a, _) = l.accept().unwrap();
        let ino = |fd: i32| {
            let t = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
            let t = t.to_string_lossy().into_owned();
            t.trim_start_matches("socket:[")
                .trim_end_matches(']')
                .parse::<u32>()
                .unwrap()
        };
        let v4 = dump(AF_INET);
        let mine: Vec<&Listener> = v4.iter().filter(|x| x.port == port).collect();
        assert_eq!(
            mine,
            [&Listener {
                addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port,
                v6only: false,
                inode: ino(l.as_raw_fd()),
            }]
        );
        let client_port = c.local_addr().unwrap().port();
        assert!(v4.iter().all(|x| x.port != client_port));
        // IPv6: a listener on `::1` is IPv6 only (the kernel sets it for a bind to an
        // address that is not `::` or v4-mapped), one on `::` as the sysctl says (std sets
        // no IPV6_V6ONLY).
        let (Ok(one), Ok(any)) = (TcpListener::bind("[::1]:0"), TcpListener::bind("[::]:0")) else {
            eprintln!("no IPv6 here: the IPv6 half is not checked");
            return;
        };
        let default_only = std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only")
            .unwrap()
            .trim()
            == "1";
        let v6 = dump(AF_INET6);
        for (l, addr, v6only) in [
            (&one, Ipv6Addr::LOCALHOST, true),
            (&any, Ipv6Addr::UNSPECIFIED, default_only),
        ] {
            let port = l.local_addr().unwrap().port();
            let got: Vec<&Listener> = v6.iter().filter(|x| x.port == port).collect();
            assert_eq!(
                got,
                [&Listener {
                    addr: IpAddr::V6(addr),
                    port,
                    v6only,
                    inode: ino(l.as_raw_fd()),
                }]
            );
        }
    }

    /// The addresses a loopback client of either family reaches.
    #[test]
    fn loopback_and_unspecified_serve_loopback_clients() {
        for a in [
            "127.0.0.1",
            "127.0.0.2",
            "0.0.0.0",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:0.0.0.0",
        ] {
            assert!(serves_loopback(a.parse().unwrap()), "{a}");
        }
        for a in [
            "10.0.0.1",
            "192.168.1.2",
            "fe80::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!serves_loopback(a.parse().unwrap()), "{a}");
        }
    }

    /// This process's listener on `127.0.0.1` is among the host's listeners.
    #[test]
    fn the_hosts_listeners_are_read() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let all = host_listeners().unwrap();
        assert!(
            all.iter()
                .any(|x| x.port == port && x.addr == IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
    }

    /// Bytes that are no dump are an error or nothing, never a panic; the family bytes
    /// are the kernel's.
    #[test]
    fn bad_bytes_are_refused() {
        assert_eq!(
            (i32::from(AF_INET), i32::from(AF_INET6)),
            (libc::AF_INET, libc::AF_INET6)
        );
        let mut d = ListenDump::default();
        assert!(d.take(&[1, 2, 3]).is_err());
        let mut d = ListenDump::default();
        let mut b = request(AF_INET);
        b.truncate(b.len() - 3);
        assert!(d.take(&b).is_err() || d.listeners().is_empty());
    }
}
