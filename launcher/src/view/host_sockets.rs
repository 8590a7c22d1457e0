//! The host's path sockets a process of its network namespace could connect to, which the
//! view covers with an empty file (`hide_sockets`; the supervisor refuses the connection
//! anyway, whoever bound the socket: this is the first line).
//!
//! Asked of the kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, the unix family, through
//! the `netlink-packet-sock-diag` crate): only the sockets in a state that takes
//! connections, with their names. `/proc/net/unix` lists every unix socket of the namespace
//! as text, each end of every connection included; a logged-in desktop has thousands, and
//! reading it cost each call 1.9 ms with 2,100 of them (this way: 84 us). It stays the
//! fallback when the diagnostics cannot be had.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::unix::nlas::{Nla, UnixDiagName};
use netlink_packet_sock_diag::unix::{ShowFlags, StateFlags, UnixRequest};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_SOCK_DIAG};

/// A listening stream or seqpacket socket (`TCP_LISTEN` in the kernel's unix code).
const LISTEN: u32 = 10;
/// A socket with no peer (`TCP_CLOSE`): a bound datagram socket takes datagrams from
/// anyone in this state (one with a peer takes them from its peer alone). A connected
/// socket (`TCP_ESTABLISHED`) cannot be connected to, and is left out: those are most of
/// the sockets of a desktop.
const NO_PEER: u32 = 7;
/// The most messages read before the dump is taken as broken (a dump ends with `Done`;
/// each message is one socket, and a namespace with a million sockets is not a real one).
const MAX_MESSAGES: usize = 1 << 20;

/// Why the diagnostics could not be had.
#[derive(Debug, thiserror::Error)]
enum DiagError {
    #[error("the sock_diag netlink socket: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Dump(#[from] DumpError),
}

/// Why a dump's bytes were not a dump of unix sockets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DumpError {
    /// A message that does not decode.
    #[error("the sock_diag dump: a message that does not decode: {0}")]
    Message(String),
    /// The kernel's error message.
    #[error("the sock_diag dump: the kernel said {0}")]
    Kernel(String),
    /// More messages than any namespace has sockets.
    #[error("the sock_diag dump: over {MAX_MESSAGES} messages")]
    TooLong,
    /// The socket's end before the dump's last message.
    #[error("the sock_diag dump: ended before its last message")]
    Cut,
}

/// The names a dump has given so far.
#[derive(Debug, Default)]
pub struct Dump {
    names: BTreeSet<String>,
    messages: usize,
}

/// What ended a [`walk`] through a dump; each reader's error says which dump.
#[derive(Debug)]
pub enum WalkFail {
    /// A message that does not decode.
    Message(String),
    /// The kernel's error message.
    Kernel(String),
    /// More messages than the reader's bound.
    TooLong,
}

/// Walks the messages of one datagram of a socket diagnostics dump (each 4-byte aligned),
/// counting them in `messages` (at most `max` over the whole dump), and gives each inner
/// message to `each`: `true` once the dump's last message is in. The one framing of the
/// host's unix sockets here and of a job's TCP listeners (`efr_jobs::forward::dump`).
pub fn walk(
    mut bytes: &[u8],
    messages: &mut usize,
    max: usize,
    mut each: impl FnMut(SockDiagMessage),
) -> Result<bool, WalkFail> {
    while !bytes.is_empty() {
        *messages += 1;
        if *messages > max {
            return Err(WalkFail::TooLong);
        }
        let m = NetlinkMessage::<SockDiagMessage>::deserialize(bytes)
            .map_err(|e| WalkFail::Message(e.to_string()))?;
        let len = usize::try_from(m.header.length).unwrap_or(0);
        match m.payload {
            NetlinkPayload::InnerMessage(i) => each(i),
            NetlinkPayload::Done(_) => return Ok(true),
            NetlinkPayload::Error(e) => return Err(WalkFail::Kernel(format!("{e:?}"))),
            _ => {}
        }
        if len == 0 || len > bytes.len() {
            break;
        }
        bytes = bytes.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
    Ok(false)
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

impl Dump {
    /// Takes the socket names of one datagram of the dump; `true` once the dump's last
    /// message is in.
    pub fn take(&mut self, bytes: &[u8]) -> Result<bool, DumpError> {
        let names = &mut self.names;
        let done = walk(bytes, &mut self.messages, MAX_MESSAGES, |m| {
            if let SockDiagMessage::UnixResponse(r) = m {
                for nla in r.nlas {
                    if let Nla::Name(UnixDiagName::Pathname(p)) = nla {
                        if p.as_bytes().starts_with(b"/") {
                            names.insert(p.to_string_lossy().into_owned());
                        }
                    }
                }
            }
        })?;
        Ok(done)
    }

    /// The socket paths taken, sorted, each once.
    pub fn names(self) -> Vec<String> {
        self.names.into_iter().collect()
    }
}

thread_local! {
    /// The list [`read_ahead`] read for this launch's view, until the view takes it (the
    /// standby reads it and builds the view on its one thread).
    static AHEAD: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// The paths of the host's unix sockets that take connections or datagrams from anyone,
/// sorted, each once: the list [`read_ahead`] read, once, else read now (from the socket
/// diagnostics, else from `/proc/net/unix`).
pub fn listening() -> Vec<String> {
    AHEAD.with(|a| a.borrow_mut().take()).unwrap_or_else(read)
}

/// Reads [`listening`] now for the view this launch builds next: the launcher in standby
/// reads it as its call is announced, while the service makes the plan, and the call does
/// not wait for it (about 0.35 ms with 2,000 sockets on the host). A socket bound between
/// then and the view is not covered, as one bound during the call is not: the supervisor
/// refuses connections to both.
pub fn read_ahead() {
    let l = read();
    AHEAD.with(|a| *a.borrow_mut() = Some(l));
}

fn read() -> Vec<String> {
    diagnostics().unwrap_or_else(|_| proc_net_unix())
}

/// [`listening`] from the kernel's socket diagnostics.
fn diagnostics() -> Result<Vec<String>, DiagError> {
    let socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let request = UnixRequest {
        state_flags: StateFlags::from_bits_retain((1 << LISTEN) | (1 << NO_PEER)),
        inode: 0,
        show_flags: ShowFlags::NAME,
        cookie: [0xff; 8],
    };
    let mut packet = NetlinkMessage::new(header, SockDiagMessage::UnixRequest(request).into());
    packet.finalize();
    let mut out = vec![0; packet.buffer_len()];
    packet.serialize(&mut out);
    socket.send(&out, 0)?;
    let mut dump = Dump::default();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = socket.recv(&mut &mut buf[..], 0)?;
        if n == 0 {
            return Err(DumpError::Cut.into());
        }
        if dump.take(&buf[..n])? {
            return Ok(dump.names());
        }
    }
}

/// [`listening`] from `/proc/net/unix`: every path it names (a connected end names its
/// listener's path too).
fn proc_net_unix() -> Vec<String> {
    let Ok(text) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let mut out = BTreeSet::new();
    for l in text.lines().skip(1) {
        if let Some(p) = l.split_whitespace().nth(7) {
            if p.starts_with('/') {
                out.insert(p.to_string());
            }
        }
    }
    out.into_iter().collect()
}

/// Whether a call of root's could look `path` up. Root's view is built with root's power
/// over every file, but root's call holds power only over the files of the users its
/// namespace maps (root alone): another user's directory is searched by its mode bits, as
/// a user would be. A socket in another user's private directory (`/run/user/UID`, a
/// `0700` dir in `/var/tmp`) is out of the call's reach, and a mask over it could not be
/// made there; the supervisor refuses it should it open up. For a user's view the host's
/// own lookup already says the same.
pub fn reachable_by_roots_call(path: &std::path::Path) -> bool {
    let groups = own_groups();
    path.ancestors()
        .skip(1)
        .all(|dir| match std::fs::metadata(dir) {
            Ok(m) => searchable_by_root_without_power(&m, &groups),
            Err(_) => false,
        })
}

/// Root's (uid 0) search of one directory in a namespace that maps no other user: its own
/// directories always; another's by the group bits when it is in the directory's group,
/// else by the bits for others.
fn searchable_by_root_without_power(m: &std::fs::Metadata, groups: &[u32]) -> bool {
    use std::os::unix::fs::MetadataExt;
    if m.uid() == 0 {
        return true;
    }
    if groups.contains(&m.gid()) {
        return m.mode() & 0o010 != 0;
    }
    m.mode() & 0o001 != 0
}

/// This process's effective and supplementary groups, from `/proc/self/status`.
fn own_groups() -> Vec<u32> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut g = field("Groups:");
    // `Gid:` is real, effective, saved, file system: the file system gid decides access.
    g.extend(field("Gid:").get(3));
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};

    /// Sockets that take connections or datagrams are listed by the diagnostics, as
    /// `/proc/net/unix` lists them; a listener's path whose listener is closed (its accepted
    /// connection lives on) is not: nothing can connect there.
    #[test]
    fn the_diagnostics_list_what_takes_connections() {
        let d = tempfile::tempdir().unwrap();
        let p = |n: &str| d.path().join(n).to_string_lossy().into_owned();
        let stream = UnixListener::bind(p("stream")).unwrap();
        let _client = UnixStream::connect(p("stream")).unwrap();
        let _accepted = stream.accept().unwrap();
        let _dgram = UnixDatagram::bind(p("dgram")).unwrap();
        let gone = UnixListener::bind(p("gone")).unwrap();
        let _c2 = UnixStream::connect(p("gone")).unwrap();
        let _a2 = gone.accept().unwrap();
        drop(gone);
        let (_x, _y) = UnixStream::pair().unwrap();
        let diag = diagnostics().unwrap();
        let text = proc_net_unix();
        for n in ["stream", "dgram"] {
            assert!(diag.contains(&p(n)), "{n}: {diag:?}");
            assert!(text.contains(&p(n)), "{n}: {text:?}");
        }
        assert!(!diag.contains(&p("gone")), "{diag:?}");
        assert!(text.contains(&p("gone")), "{text:?}");
        // Nothing the diagnostics list that the text does not (a socket made between the
        // two reads aside: none is made here).
        let ours: Vec<&String> = diag.iter().filter(|s| s.starts_with(&p(""))).collect();
        assert!(ours.iter().all(|s| text.contains(s)), "{ours:?}");
        assert_eq!(listening(), diag);
        // Read ahead: the next view takes that list, once.
        read_ahead();
        let later = UnixListener::bind(p("later")).unwrap();
        assert!(!listening().contains(&p("later")));
        assert!(listening().contains(&p("later")));
        drop(later);
        // Sorted, each once.
        let mut sorted = diag.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, diag);
    }

    /// A dump cut short or garbled is an error (the caller falls back), never a panic;
    /// `fuzz/fuzz_targets/sock_diag_dump.rs` feeds it arbitrary bytes.
    #[test]
    fn a_bad_dump_is_an_error() {
        let mut d = Dump::default();
        assert!(matches!(d.take(&[1, 2, 3]), Err(DumpError::Message(_))));
        assert!(d.take(&[0xff; 64]).is_err());
        assert_eq!(d.take(&[]), Ok(false));
        assert!(d.names().is_empty());
    }
}
