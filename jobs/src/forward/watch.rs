//! The watch of a job's listeners: every [`super::POLL_INTERVAL`], a dump of the TCP
//! listeners of the job's namespace ([`super::dump`], through a `NETLINK_SOCK_DIAG` socket
//! the socket maker made there), turned into the host addresses to forward
//! ([`host_addrs`]), each decided once ([`Watch::decide`]) and reported when its outcome
//! changes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use efr_launcher::ns_sockets::SOCK_DIAG;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc::UnboundedSender;

use super::dump::{DumpError, ListenDump, Listener};
use super::helper::{Helper, HelperError};
use super::ports::{Holder, Ports};
use super::relay::Relay;
use super::{ForwardConfig, ForwardEvent, ForwardOutcome};

/// How long one dump may take before the poll is given up (the kernel answers a dump at
/// once; this bounds a socket that broke).
const DUMP_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a poll found no listeners (the next poll tries again with a new socket).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PollError {
    #[error(transparent)]
    Helper(#[from] HelperError),
    #[error("the sock_diag socket of the job: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Dump(#[from] DumpError),
    #[error("the sock_diag dump of the job took over {DUMP_TIMEOUT:?}")]
    Timeout,
}

/// The host addresses a job's listener is forwarded on: a listener on `127.0.0.1` or
/// `0.0.0.0` on the host's `127.0.0.1`, one on `::1` or `::` on the host's `::1`, and a
/// dual-stack `::` (not IPv6 only) on both. Any other address (`127.0.0.2`, ...) is not
/// forwarded.
pub fn host_addrs(l: &Listener) -> Vec<SocketAddr> {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, l.port));
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, l.port));
    match l.addr {
        IpAddr::V4(a) if a == Ipv4Addr::LOCALHOST || a.is_unspecified() => vec![v4],
        IpAddr::V6(a) if a == Ipv6Addr::LOCALHOST => vec![v6],
        IpAddr::V6(a) if a.is_unspecified() && l.v6only => vec![v6],
        IpAddr::V6(a) if a.is_unspecified() => vec![v4, v6],
        _ => Vec::new(),
    }
}

/// The same port on the host's loopback of the other family.
fn other_family(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(_) => SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port())),
        SocketAddr::V6(_) => SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port())),
    }
}

/// The host's listeners of one poll that a loopback client could reach (both families,
/// `0.0.0.0` and `::` included), less this process's own (the forwards' relays: another
/// job's is told by [`Ports`], the job's own on the other family is its own); or why they
/// could not be read, which refuses every new forward (a port the host may hold is never
/// taken unchecked).
#[derive(Debug, Default)]
struct HostView {
    foreign: Vec<Listener>,
    error: Option<String>,
}

impl HostView {
    fn read() -> HostView {
        match super::dump::host_listeners() {
            Ok(all) => {
                let candidates: Vec<Listener> = all
                    .into_iter()
                    .filter(|l| super::dump::serves_loopback(l.addr))
                    .collect();
                let own = if candidates.is_empty() {
                    HashSet::new()
                } else {
                    own_socket_inodes()
                };
                HostView {
                    foreign: candidates
                        .into_iter()
                        .filter(|l| !own.contains(&l.inode))
                        .collect(),
                    error: None,
                }
            }
            Err(e) => HostView {
                foreign: Vec::new(),
                error: Some(e.to_string()),
            },
        }
    }

    /// Why `port` is the host's: the address a host process listens on, or the error
    /// that kept the host's listeners unread.
    fn holder(&self, port: u16) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(format!("the host's listeners could not be read ({e})"));
        }
        self.foreign.iter().find(|l| l.port == port).map(|l| {
            format!(
                "a host process listens on {}",
                SocketAddr::new(l.addr, port)
            )
        })
    }
}

/// The inodes of the sockets this process holds (`socket:[N]` links of `/proc/self/fd`).
fn own_socket_inodes() -> HashSet<u32> {
    let mut out = HashSet::new();
    let Ok(rd) = std::fs::read_dir("/proc/self/fd") else {
        return out;
    };
    for e in rd.flatten() {
        if let Ok(t) = std::fs::read_link(e.path()) {
            let t = t.to_string_lossy();
            if let Some(n) = t
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse().ok())
            {
                out.insert(n);
            }
        }
    }
    out
}

/// What was last reported of one host address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Said {
    outcome: ForwardOutcome,
    by_job: Option<String>,
    reason: Option<String>,
}

impl Said {
    fn refused(reason: String) -> Said {
        Said {
            outcome: ForwardOutcome::Refused,
            by_job: None,
            reason: Some(reason),
        }
    }
}

/// One host address the job listens on.
#[derive(Debug)]
struct Entry {
    said: Said,
    relay: Option<Relay>,
}

/// The watch of one job.
#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) job: Holder,
    pub(crate) cfg: ForwardConfig,
    pub(crate) ports: Arc<Ports>,
    /// The socket maker (taken at the end, to be ended and reaped).
    pub(crate) helper: Option<Arc<Helper>>,
    pub(crate) events: UnboundedSender<ForwardEvent>,
    pub(crate) current: Arc<Mutex<Vec<(String, u16)>>>,
    /// The sock_diag socket in the job's namespace (asked again after a failed poll).
    diag: Option<AsyncFd<OwnedFd>>,
    entries: BTreeMap<SocketAddr, Entry>,
    /// The listeners' inodes of the last poll.
    seen: HashSet<u32>,
    /// Whether each inode seen twice is one of this process's own sockets.
    ours: HashMap<u32, bool>,
    /// The events of the step under way, sent once [`Watch::current`] says the same.
    pending: Vec<ForwardEvent>,
}

impl Watch {
    pub(crate) fn new(
        job: Holder,
        cfg: ForwardConfig,
        ports: Arc<Ports>,
        helper: Arc<Helper>,
        events: UnboundedSender<ForwardEvent>,
    ) -> Watch {
        Watch {
            job,
            cfg,
            ports,
            helper: Some(helper),
            events,
            current: Arc::new(Mutex::new(Vec::new())),
            diag: None,
            entries: BTreeMap::new(),
            seen: HashSet::new(),
            ours: HashMap::new(),
            pending: Vec::new(),
        }
    }

    /// One poll: the dump, then each host address decided.
    pub(crate) async fn poll(&mut self) -> Result<(), PollError> {
        let listeners = match tokio::time::timeout(DUMP_TIMEOUT, self.listeners()).await {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                self.diag = None;
                return Err(e);
            }
            Err(_) => {
                self.diag = None;
                return Err(PollError::Timeout);
            }
        };
        let wanted = self.wanted(listeners);
        self.apply(wanted).await;
        Ok(())
    }

    /// The listeners of both families.
    async fn listeners(&mut self) -> Result<Vec<Listener>, PollError> {
        if self.diag.is_none() {
            let Some(helper) = &self.helper else {
                return Ok(Vec::new());
            };
            let fd = helper.socket(SOCK_DIAG).await?;
            nix::fcntl::fcntl(
                &fd,
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
            )
            .map_err(std::io::Error::from)?;
            self.diag = Some(crate::sys::async_owned(fd)?);
        }
        let Some(diag) = &self.diag else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for family in [super::dump::AF_INET, super::dump::AF_INET6] {
            out.extend(dump(diag, family).await?);
        }
        Ok(out)
    }

    /// The host addresses to forward: each listener's ([`host_addrs`]), once seen in two
    /// polls in a row and not one of this process's own sockets.
    ///
    /// The egress proxy's relay and synthetic listeners are in the job's namespace too
    /// (bound by its init, served by the service): they are this process's sockets, and
    /// never a job's. A listener's first sighting is not acted on: the init hands those
    /// sockets to the proxy before the line starts, but one seen on its way (in no fd
    /// table) would look like the job's; by the next poll the proxy holds it. A listener
    /// the job opens and closes within a poll is not forwarded either.
    fn wanted(&mut self, listeners: Vec<Listener>) -> BTreeSet<SocketAddr> {
        let now: HashSet<u32> = listeners.iter().map(|l| l.inode).collect();
        let mature: Vec<&Listener> = listeners
            .iter()
            .filter(|l| self.seen.contains(&l.inode))
            .collect();
        if mature.iter().any(|l| !self.ours.contains_key(&l.inode)) {
            let own = own_socket_inodes();
            for l in &mature {
                self.ours
                    .entry(l.inode)
                    .or_insert_with(|| own.contains(&l.inode));
            }
        }
        self.ours.retain(|i, _| now.contains(i));
        let wanted = mature
            .into_iter()
            .filter(|l| self.ours.get(&l.inode) == Some(&false))
            .flat_map(host_addrs)
            .collect();
        self.seen = now;
        wanted
    }

    /// Stops what is no longer wanted or what a host process now holds on the other
    /// family, decides what is new or was not forwarded, reports each change.
    async fn apply(&mut self, wanted: BTreeSet<SocketAddr>) {
        let gone: Vec<SocketAddr> = self
            .entries
            .keys()
            .filter(|a| !wanted.contains(a))
            .copied()
            .collect();
        for addr in gone {
            if let Some(e) = self.entries.remove(&addr) {
                self.stop_one(addr, e).await;
            }
        }
        // The host's own listeners, read once a poll while the job has a forward or an
        // address to decide.
        let host = if wanted.is_empty() {
            HostView::default()
        } else {
            HostView::read()
        };
        self.shadowed(&host).await;
        let mut forwarded = self.entries.values().filter(|e| e.relay.is_some()).count();
        for addr in wanted {
            if self.entries.get(&addr).is_some_and(|e| e.relay.is_some()) {
                continue;
            }
            let (said, relay) = self.decide(addr, forwarded, &host);
            if relay.is_some() {
                forwarded += 1;
            }
            if self.entries.get(&addr).map(|e| &e.said) != Some(&said) {
                self.report(addr, &said);
            }
            self.entries.insert(addr, Entry { said, relay });
        }
        self.publish();
    }

    /// Ends each forward whose port a host process has come to hold on the other family
    /// (or on `0.0.0.0`, `::`) since it started: a `localhost` client that tries that
    /// family first would reach the host's server, the other one the job's; the host's
    /// wins, and the address is `in_use` from then on.
    async fn shadowed(&mut self, host: &HostView) {
        if host.error.is_some() {
            // Unread this poll: the forwards stand, the next poll looks again.
            return;
        }
        let taken: Vec<(SocketAddr, String)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.relay.is_some())
            .filter_map(|(a, _)| host.holder(a.port()).map(|why| (*a, why)))
            .collect();
        for (addr, why) in taken {
            let Some(e) = self.entries.remove(&addr) else {
                continue;
            };
            if let Some(relay) = e.relay {
                relay.end().await;
            }
            self.ports.release(addr, &self.job);
            let said = Said {
                outcome: ForwardOutcome::InUse,
                by_job: None,
                reason: Some(why),
            };
            self.report(addr, &said);
            self.entries.insert(addr, Entry { said, relay: None });
        }
    }

    /// The outcome for `addr` now, `forwarded` forwards of the job running, `host` the
    /// host's listeners: a refusal, or the forward started.
    fn decide(&self, addr: SocketAddr, forwarded: usize, host: &HostView) -> (Said, Option<Relay>) {
        let port = addr.port();
        if port < 1024 {
            return (
                Said::refused(format!(
                    "port {port} is a privileged port of the host (below 1024)"
                )),
                None,
            );
        }
        if let Some((_, reason)) = self.cfg.deny.iter().find(|(p, _)| *p == port) {
            return (Said::refused(reason.clone()), None);
        }
        let in_use = |h: Holder| {
            if h.conversation == self.job.conversation {
                Said {
                    outcome: ForwardOutcome::InUse,
                    by_job: Some(h.job_id),
                    reason: None,
                }
            } else {
                Said {
                    outcome: ForwardOutcome::InUse,
                    by_job: None,
                    reason: Some("another conversation's job".into()),
                }
            }
        };
        if let Some(h) = self.ports.holder(addr).filter(|h| *h != self.job) {
            return (in_use(h), None);
        }
        // The same port on the other family: a `localhost` client may try either first.
        let other = other_family(addr);
        if let Some(h) = self.ports.holder(other).filter(|h| *h != self.job) {
            return (in_use(h), None);
        }
        if let Some(why) = host.holder(port) {
            return (
                Said {
                    outcome: ForwardOutcome::InUse,
                    by_job: None,
                    reason: Some(why),
                },
                None,
            );
        }
        if forwarded >= self.cfg.max_per_job {
            return (
                Said {
                    outcome: ForwardOutcome::Limit,
                    by_job: None,
                    reason: Some(format!("at most {} forwards a job", self.cfg.max_per_job)),
                },
                None,
            );
        }
        if let Err(h) = self.ports.claim(addr, &self.job) {
            return (in_use(h), None);
        }
        let Some(helper) = self.helper.clone() else {
            return (Said::refused("the job's forwards are ending".into()), None);
        };
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(tokio::net::TcpListener::from_std);
        match listener {
            Ok(l) => (
                Said {
                    outcome: ForwardOutcome::Forwarded,
                    by_job: None,
                    reason: None,
                },
                Some(Relay::start(l, addr, helper, self.cfg.max_conns)),
            ),
            Err(e) => {
                self.ports.release(addr, &self.job);
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    (
                        Said {
                            outcome: ForwardOutcome::InUse,
                            by_job: None,
                            reason: Some(format!("a host process listens on {addr}")),
                        },
                        None,
                    )
                } else {
                    (Said::refused(format!("bind {addr} on the host: {e}")), None)
                }
            }
        }
    }

    fn report(&mut self, addr: SocketAddr, said: &Said) {
        self.pending.push(ForwardEvent {
            listen: addr.ip().to_string(),
            port: addr.port(),
            outcome: said.outcome,
            by_job: said.by_job.clone(),
            reason: said.reason.clone(),
        });
    }

    /// Ends one address's forward, if it had one: the relay ended, the address given
    /// back, `stopped` reported.
    async fn stop_one(&mut self, addr: SocketAddr, e: Entry) {
        if let Some(relay) = e.relay {
            relay.end().await;
            self.ports.release(addr, &self.job);
            self.report(
                addr,
                &Said {
                    outcome: ForwardOutcome::Stopped,
                    by_job: None,
                    reason: None,
                },
            );
        }
    }

    /// Ends every forward (`stopped` for each).
    pub(crate) async fn stop_all(&mut self) {
        let all = std::mem::take(&mut self.entries);
        for (addr, e) in all {
            self.stop_one(addr, e).await;
        }
        self.diag = None;
        self.publish();
    }

    /// [`Watch::current`] updated, then the step's events sent (a receiver that asks for
    /// the current forwards on an event sees them).
    fn publish(&mut self) {
        let now: Vec<(String, u16)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.relay.is_some())
            .map(|(a, _)| (a.ip().to_string(), a.port()))
            .collect();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = now;
        for e in self.pending.drain(..) {
            let _ = self.events.send(e);
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Dropped without `stop_all` (the forwards dropped, not stopped): the addresses are
        // given back all the same (the relays end as they drop).
        for (addr, e) in &self.entries {
            if e.relay.is_some() {
                self.ports.release(*addr, &self.job);
            }
        }
    }
}

/// One dump of the listening TCP sockets of `family` on `diag`.
async fn dump(diag: &AsyncFd<OwnedFd>, family: u8) -> Result<Vec<Listener>, PollError> {
    use nix::sys::socket::{MsgFlags, recv, send};
    let req = super::dump::request(family);
    loop {
        let mut guard = diag.writable().await?;
        match guard.try_io(|d| {
            send(d.get_ref().as_raw_fd(), &req, MsgFlags::empty()).map_err(std::io::Error::from)
        }) {
            Ok(r) => {
                r?;
                break;
            }
            Err(_would_block) => continue,
        }
    }
    let mut d = ListenDump::default();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let mut guard = diag.readable().await?;
        let n = match guard.try_io(|d| {
            recv(d.get_ref().as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(std::io::Error::from)
        }) {
            Ok(r) => r?,
            Err(_would_block) => continue,
        };
        if n == 0 {
            return Err(DumpError::Cut.into());
        }
        if d.take(buf.get(..n).unwrap_or_default())? {
            return Ok(d.listeners());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(addr: &str, port: u16, v6only: bool) -> Listener {
        Listener {
            addr: addr.parse().unwrap(),
            port,
            v6only,
            inode: 1,
        }
    }

    fn s(v: &[&str]) -> Vec<SocketAddr> {
        v.iter().map(|a| a.parse().unwrap()).collect()
    }

    /// Which host addresses each listener address gets.
    #[test]
    fn listeners_map_to_the_hosts_loopback() {
        assert_eq!(
            host_addrs(&l("127.0.0.1", 8000, false)),
            s(&["127.0.0.1:8000"])
        );
        assert_eq!(
            host_addrs(&l("0.0.0.0", 8000, false)),
            s(&["127.0.0.1:8000"])
        );
        assert_eq!(host_addrs(&l("::1", 8000, false)), s(&["[::1]:8000"]));
        assert_eq!(host_addrs(&l("::", 8000, true)), s(&["[::1]:8000"]));
        assert_eq!(
            host_addrs(&l("::", 8000, false)),
            s(&["127.0.0.1:8000", "[::1]:8000"])
        );
        assert!(host_addrs(&l("127.0.0.2", 8000, false)).is_empty());
        assert!(host_addrs(&l("::ffff:127.0.0.1", 8000, false)).is_empty());
    }

    /// This process's own listening socket is among its own inodes; a socket of another
    /// process is not.
    #[test]
    fn own_sockets_are_known() {
        use std::os::fd::AsRawFd;
        let mine = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let link = std::fs::read_link(format!("/proc/self/fd/{}", mine.as_raw_fd())).unwrap();
        let ino: u32 = link
            .to_string_lossy()
            .trim_start_matches("socket:[")
            .trim_end_matches(']')
            .parse()
            .unwrap();
        let own = own_socket_inodes();
        assert!(own.contains(&ino));
        drop(mine);
        assert!(!own_socket_inodes().contains(&ino));
    }
}
