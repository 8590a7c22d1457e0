//! The call's DNS answers (design section 7): names the call's policy allows get synthetic
//! loopback addresses from a [`NameTable`], every other name NXDOMAIN; nothing is ever
//! forwarded (a lookup is an exfiltration channel). Pure apart from the table's allocation.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use crate::name::{self, Host};
use crate::policy::ProxyPolicy;

/// The first synthetic address: names get 127.77.0.1, 127.77.0.2, ... in the order they
/// are first looked up.
pub const SYNTHETIC_BASE: Ipv4Addr = Ipv4Addr::new(127, 77, 0, 0);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Names the call may look up, and their synthetic addresses. Shared by the DNS server and
/// the synthetic relay.
#[derive(Debug)]
pub struct NameTable {
    policy: ProxyPolicy,
    base: u32,
    inner: Mutex<Names>,
}

#[derive(Debug, Default)]
struct Names {
    by_name: HashMap<String, Ipv4Addr>,
    by_ip: HashMap<Ipv4Addr, String>,
}

impl NameTable {
    /// Names that `policy` allows (grants and allow list, minus deny list and token hosts),
    /// with addresses from `base` + 1 on (a /16: at most 65534 names).
    pub fn new(policy: ProxyPolicy, base: Ipv4Addr) -> NameTable {
        NameTable {
            policy,
            base: u32::from(base) & 0xffff_0000,
            inner: Mutex::new(Names::default()),
        }
    }

    /// The synthetic address of `raw` (normalised here), allocated on first use; `None` when
    /// the name is not allowed (or the table is full).
    pub fn lookup(&self, raw: &str) -> Option<Ipv4Addr> {
        let n = match name::normalize(raw) {
            Ok(Host::Name(n)) => n,
            _ => return None,
        };
        if !self.policy.name_allowed(&n) {
            return None;
        }
        let mut t = lock(&self.inner);
        if let Some(ip) = t.by_name.get(&n) {
            return Some(*ip);
        }
        // Saturating: a count past u32::MAX is past the bound below too.
        let idx = u32::try_from(t.by_name.len() + 1).unwrap_or(u32::MAX);
        if idx >= 0xffff {
            return None;
        }
        let ip = Ipv4Addr::from(self.base + idx);
        t.by_name.insert(n.clone(), ip);
        t.by_ip.insert(ip, n);
        Some(ip)
    }

    /// The name a synthetic address was given to.
    pub fn name_of(&self, ip: Ipv4Addr) -> Option<String> {
        lock(&self.inner).by_ip.get(&ip).cloned()
    }
}

/// DNS response codes used.
const NOERROR: u8 = 0;
const FORMERR: u8 = 1;
const NXDOMAIN: u8 = 3;
const NOTIMP: u8 = 4;
const REFUSED: u8 = 5;

/// What [`answer`] did with one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsOutcome {
    /// An allowed name: `A` answered with its synthetic address, other types empty.
    Allowed(String),
    /// Refused: `Some(name)` for a lookup of a name the table refuses (class `IN`,
    /// NXDOMAIN; the name as asked, lower case, cut to 253 bytes), `None` for a query refused
    /// without a name to report (another class: REFUSED; another opcode: NOTIMP; no name,
    /// or a malformed query: FORMERR or NXDOMAIN).
    Refused(Option<String>),
    /// Not a query: no answer.
    Dropped,
}

/// The answer to one DNS query datagram (pure apart from the table's allocation).
pub fn answer(table: &NameTable, q: &[u8]) -> (Option<Vec<u8>>, DnsOutcome) {
    if q.len() < 12 {
        return (None, DnsOutcome::Dropped);
    }
    let flags = u16::from_be_bytes([q[2], q[3]]);
    if flags & 0x8000 != 0 {
        return (None, DnsOutcome::Dropped);
    }
    let opcode = ((flags >> 11) & 0xf) as u8;
    let rd = flags & 0x0100;
    let qd = u16::from_be_bytes([q[4], q[5]]);
    let reply = |rcode: u8, question: Option<&[u8]>, answer: Option<Ipv4Addr>| -> Vec<u8> {
        let mut r = Vec::with_capacity(64);
        r.extend_from_slice(&q[..2]);
        let f: u16 = 0x8000 | ((opcode as u16) << 11) | 0x0400 | rd | rcode as u16;
        r.extend_from_slice(&f.to_be_bytes());
        r.extend_from_slice(&(question.is_some() as u16).to_be_bytes());
        r.extend_from_slice(&(answer.is_some() as u16).to_be_bytes());
        r.extend_from_slice(&[0, 0, 0, 0]);
        if let Some(qs) = question {
            r.extend_from_slice(qs);
        }
        if let Some(ip) = answer {
            r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
            r.extend_from_slice(&ip.octets());
        }
        r
    };
    if opcode != 0 {
        return (Some(reply(NOTIMP, None, None)), DnsOutcome::Refused(None));
    }
    if qd != 1 {
        return (Some(reply(FORMERR, None, None)), DnsOutcome::Refused(None));
    }
    // The question: labels (no compression), type, class.
    let mut pos = 12;
    let mut labels: Vec<String> = Vec::new();
    let mut ok_name = true;
    loop {
        let Some(&len) = q.get(pos) else {
            return (Some(reply(FORMERR, None, None)), DnsOutcome::Refused(None));
        };
        pos += 1;
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 || pos + len as usize > q.len() || pos > 12 + 255 {
            return (Some(reply(FORMERR, None, None)), DnsOutcome::Refused(None));
        }
        let l = &q[pos..pos + len as usize];
        if !l.iter().all(|&b| b.is_ascii_graphic() && b != b'.') {
            ok_name = false;
        }
        labels.push(String::from_utf8_lossy(l).to_ascii_lowercase());
        pos += len as usize;
    }
    if pos + 4 > q.len() {
        return (Some(reply(FORMERR, None, None)), DnsOutcome::Refused(None));
    }
    let qtype = u16::from_be_bytes([q[pos], q[pos + 1]]);
    let qclass = u16::from_be_bytes([q[pos + 2], q[pos + 3]]);
    let question = &q[12..pos + 4];
    let qname = labels.join(".");
    let mut cut = qname.len().min(253);
    while !qname.is_char_boundary(cut) {
        cut -= 1;
    }
    let shown = qname[..cut].to_string();
    if qclass != 1 {
        return (
            Some(reply(REFUSED, Some(question), None)),
            DnsOutcome::Refused(None),
        );
    }
    let ip = if ok_name && !qname.is_empty() {
        table.lookup(&qname)
    } else {
        None
    };
    // A reverse lookup names an address, not a host a grant could name: refused like any
    // other name, but reported without one (a `host` record for `1.0.0.127.in-addr.arpa`
    // would only be noise in the approval flow). So is the call's own host name, which
    // programs look up to name the machine (git, for a commit's default identity): the
    // host's `/etc/hosts` names the host, not the call.
    let reverse = ["in-addr.arpa", "ip6.arpa"]
        .iter()
        .any(|z| qname == *z || qname.ends_with(&format!(".{z}")))
        || qname == efr_sandbox_wire::CALL_HOSTNAME;
    match ip {
        None if reverse => (
            Some(reply(NXDOMAIN, Some(question), None)),
            DnsOutcome::Refused(None),
        ),
        None => (
            Some(reply(NXDOMAIN, Some(question), None)),
            DnsOutcome::Refused((!shown.is_empty()).then_some(shown)),
        ),
        Some(ip) => {
            let a = if qtype == 1 { Some(ip) } else { None };
            (
                Some(reply(NOERROR, Some(question), a)),
                DnsOutcome::Allowed(qname),
            )
        }
    }
}

/// A DNS query for `name` and `qtype` (tests and probes).
pub fn build_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(32 + name.len());
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for l in name.split('.').filter(|l| !l.is_empty()) {
        #[allow(
            clippy::cast_possible_truncation,
            reason = "a test's label: a DNS label is at most 63 bytes, a longer one makes a \
                      malformed query either way"
        )]
        q.push(l.len() as u8);
        q.extend_from_slice(l.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]);
    q
}

/// Read an answer: `(rcode, A addresses)`.
pub fn parse_response(r: &[u8]) -> Option<(u8, Vec<Ipv4Addr>)> {
    if r.len() < 12 {
        return None;
    }
    let rcode = r[3] & 0xf;
    let qd = u16::from_be_bytes([r[4], r[5]]);
    let an = u16::from_be_bytes([r[6], r[7]]);
    let mut pos = 12;
    for _ in 0..qd {
        while *r.get(pos)? != 0 {
            pos += 1 + *r.get(pos)? as usize;
        }
        pos += 5;
    }
    let mut out = Vec::new();
    for _ in 0..an {
        if r.get(pos)? & 0xc0 == 0xc0 {
            pos += 2;
        } else {
            while *r.get(pos)? != 0 {
                pos += 1 + *r.get(pos)? as usize;
            }
            pos += 1;
        }
        let ty = u16::from_be_bytes([*r.get(pos)?, *r.get(pos + 1)?]);
        let len = u16::from_be_bytes([*r.get(pos + 8)?, *r.get(pos + 9)?]) as usize;
        pos += 10;
        if ty == 1 && len == 4 {
            let b = r.get(pos..pos + 4)?;
            out.push(Ipv4Addr::new(b[0], b[1], b[2], b[3]));
        }
        pos += len;
    }
    Some((rcode, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::HostRule;

    fn table() -> NameTable {
        let mut p = ProxyPolicy::default();
        p.grants.push(HostRule::parse_cli("registry.test").unwrap());
        p.grants.push(HostRule::parse_cli("*.wild.test").unwrap());
        p.grants.push(HostRule::parse_cli("tok.test").unwrap());
        p.token_host("tok.test");
        NameTable::new(p, SYNTHETIC_BASE)
    }

    #[test]
    fn dns_answers() {
        let t = table();
        let (r, o) = answer(&t, &build_query(7, "Registry.Test", 1));
        assert_eq!(o, DnsOutcome::Allowed("registry.test".into()));
        let r = r.unwrap();
        assert_eq!(&r[..2], &[0, 7]);
        assert_eq!(
            parse_response(&r),
            Some((0, vec![Ipv4Addr::new(127, 77, 0, 1)]))
        );
        let (r, _) = answer(&t, &build_query(8, "a.wild.test", 1));
        assert_eq!(
            parse_response(&r.unwrap()),
            Some((0, vec![Ipv4Addr::new(127, 77, 0, 2)]))
        );
        let (r, _) = answer(&t, &build_query(9, "registry.test", 28));
        assert_eq!(parse_response(&r.unwrap()), Some((0, vec![])));
        for n in ["wild.test", "tok.test", "evil.test", "127.0.0.1"] {
            let (r, o) = answer(&t, &build_query(10, n, 1));
            assert_eq!(parse_response(&r.unwrap()), Some((3, vec![])), "{n}");
            assert_eq!(o, DnsOutcome::Refused(Some(n.into())));
        }
        assert_eq!(
            t.name_of(Ipv4Addr::new(127, 77, 0, 1)).as_deref(),
            Some("registry.test")
        );
        // Reverse lookups: refused, with no host to report.
        for n in ["1.0.0.127.in-addr.arpa", "b.a.ip6.arpa", "in-addr.arpa"] {
            let (r, o) = answer(&t, &build_query(11, n, 12));
            assert_eq!(parse_response(&r.unwrap()), Some((3, vec![])), "{n}");
            assert_eq!(o, DnsOutcome::Refused(None), "{n}");
        }
        let (_, o) = answer(&t, &build_query(12, "in-addr.arpa.evil.test", 1));
        assert_eq!(
            o,
            DnsOutcome::Refused(Some("in-addr.arpa.evil.test".into()))
        );
        assert_eq!(answer(&t, b"short").1, DnsOutcome::Dropped);
        let mut resp = build_query(1, "x.test", 1);
        resp[2] |= 0x80;
        assert_eq!(answer(&t, &resp).1, DnsOutcome::Dropped);
        // A long name of non-UTF-8 labels (cut at a character boundary).
        let mut q = build_query(2, "", 1);
        q.truncate(12);
        for _ in 0..4 {
            q.push(63);
            q.extend_from_slice(&[0xff; 63]);
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        assert!(matches!(answer(&t, &q).1, DnsOutcome::Refused(Some(_))));
        // Another class (CHAOS): REFUSED, no name to report; the root: NXDOMAIN, no name.
        let mut ch = build_query(3, "version.bind", 16);
        let n = ch.len();
        ch[n - 1] = 3;
        let (r, o) = answer(&t, &ch);
        assert_eq!(parse_response(&r.unwrap()).unwrap().0, REFUSED);
        assert_eq!(o, DnsOutcome::Refused(None));
        let (r, o) = answer(&t, &build_query(4, ".", 2));
        assert_eq!(parse_response(&r.unwrap()).unwrap().0, NXDOMAIN);
        assert_eq!(o, DnsOutcome::Refused(None));
        let mut bad = build_query(1, "x.test", 1);
        bad.truncate(15);
        assert_eq!(
            parse_response(&answer(&t, &bad).0.unwrap()).unwrap().0,
            FORMERR
        );
    }

    /// The malformed queries `proxy/compare` feeds to ours and to `hickory-proto` (the
    /// measured reason the parser stays ours): what ours answers to each.
    #[test]
    fn malformed_queries() {
        let t = table();
        let ok = build_query(7, "registry.test", 1);
        let rcode = |q: &[u8]| parse_response(&answer(&t, q).0.unwrap()).unwrap().0;
        let raw = |name: &[u8]| {
            let mut q = ok[..12].to_vec();
            q.extend_from_slice(name);
            q.extend_from_slice(&[0, 1, 0, 1]);
            q
        };
        // A compression pointer in the question (here a loop), a label of type 0x40, a
        // name over 255 bytes, no question, two questions announced: FORMERR, no name.
        let mut two = ok.clone();
        two[5] = 2;
        let mut none = ok.clone();
        none[5] = 0;
        let mut long = Vec::new();
        for _ in 0..5 {
            long.push(63);
            long.extend_from_slice(&[b'a'; 63]);
        }
        long.push(0);
        let mut t40 = vec![0x41];
        t40.extend_from_slice(&[b'a'; 65]);
        t40.push(0);
        for q in [raw(&[1, b'a', 0xc0, 12]), raw(&t40), raw(&long), two, none] {
            assert_eq!(rcode(&q), FORMERR, "{q:02x?}");
            assert_eq!(answer(&t, &q).1, DnsOutcome::Refused(None), "{q:02x?}");
        }
        // The call's own host name: NXDOMAIN, reported without a name (no host record).
        let own = build_query(8, efr_sandbox_wire::CALL_HOSTNAME, 1);
        assert_eq!(rcode(&own), NXDOMAIN);
        assert_eq!(answer(&t, &own).1, DnsOutcome::Refused(None));
        // A dot or a NUL inside a label is not the name it would spell: refused.
        for name in [&b"\x0dregistry.test\0"[..], b"\x08reg\0stry\x04test\0"] {
            assert_eq!(rcode(&raw(name)), NXDOMAIN, "{name:02x?}");
        }
        // Sections after the question are not read: an EDNS OPT record (as dig sends),
        // trailing bytes, counts of records that are not there; the name is answered.
        let mut opt = ok.clone();
        opt[11] = 1;
        opt.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
        let mut junk = ok.clone();
        junk.extend_from_slice(b"junk");
        let mut an = ok.clone();
        an[7] = 1;
        for q in [opt, junk, an] {
            let (r, o) = answer(&t, &q);
            assert_eq!(o, DnsOutcome::Allowed("registry.test".into()));
            assert_eq!(
                parse_response(&r.unwrap()),
                Some((NOERROR, vec![Ipv4Addr::new(127, 77, 0, 1)]))
            );
        }
        // Another opcode (UPDATE): NOTIMP.
        let mut up = ok.clone();
        up[2] = 0x28;
        assert_eq!(rcode(&up), NOTIMP);
    }
}
