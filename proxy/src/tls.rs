//! The first bytes of a tunnel: a TLS ClientHello, parsed only as far as the SNI (the
//! proxy never terminates TLS). Handshake messages split over several records are joined.

/// Largest ClientHello handshake message accepted (post-quantum key shares make them a few
/// KiB; 64 KiB is plenty).
pub const MAX_HELLO: usize = 64 << 10;

/// What the first bytes of a tunnel hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The `host_name` of the server_name extension, as sent.
    pub sni: Option<String>,
    /// Bytes of the records that hold the hello.
    pub len: usize,
}

/// Why the bytes are not a usable ClientHello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// Read more.
    #[error("incomplete")]
    Incomplete,
    /// Not a TLS handshake record at all.
    #[error("not TLS")]
    NotTls,
    /// A TLS record, but not a well-formed ClientHello.
    #[error("malformed ClientHello: {0}")]
    Malformed(&'static str),
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HelloError> {
        if self.b.len() < n {
            return Err(HelloError::Malformed("truncated"));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<usize, HelloError> {
        Ok(self.take(1)?[0] as usize)
    }
    fn u16(&mut self) -> Result<usize, HelloError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    fn vec8(&mut self) -> Result<&'a [u8], HelloError> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Result<&'a [u8], HelloError> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// Parse the ClientHello at the start of `buf`.
pub fn parse_client_hello(buf: &[u8]) -> Result<ClientHello, HelloError> {
    // Records: type(1) = 22 handshake, version(2) 3.x, length(2) <= 2^14 + 2048.
    let mut msg: Vec<u8> = Vec::new();
    let mut pos = 0;
    let need = loop {
        let rec = &buf[pos..];
        if rec.is_empty() {
            return Err(HelloError::Incomplete);
        }
        if rec[0] != 22 {
            return Err(if pos == 0 {
                HelloError::NotTls
            } else {
                HelloError::Malformed("record type")
            });
        }
        if rec.len() < 2 {
            return Err(HelloError::Incomplete);
        }
        if rec[1] != 3 {
            return Err(if pos == 0 {
                HelloError::NotTls
            } else {
                HelloError::Malformed("record version")
            });
        }
        if rec.len() < 5 {
            return Err(HelloError::Incomplete);
        }
        if rec[2] > 4 {
            return Err(HelloError::Malformed("record version"));
        }
        let len = u16::from_be_bytes([rec[3], rec[4]]) as usize;
        if len == 0 || len > (1 << 14) + 2048 {
            return Err(HelloError::Malformed("record length"));
        }
        if rec.len() < 5 + len {
            return Err(HelloError::Incomplete);
        }
        msg.extend_from_slice(&rec[5..5 + len]);
        pos += 5 + len;
        if msg.len() >= 4 {
            if msg[0] != 1 {
                return Err(HelloError::Malformed("not a ClientHello"));
            }
            let hl = u32::from_be_bytes([0, msg[1], msg[2], msg[3]]) as usize;
            if hl > MAX_HELLO {
                return Err(HelloError::Malformed("ClientHello too large"));
            }
            if msg.len() >= 4 + hl {
                if msg.len() > 4 + hl {
                    return Err(HelloError::Malformed("data after ClientHello"));
                }
                break hl;
            }
        }
        if pos > MAX_HELLO + 5 * 64 {
            return Err(HelloError::Malformed("ClientHello too large"));
        }
    };
    let mut r = Reader {
        b: &msg[4..4 + need],
    };
    let ver = r.take(2)?;
    if ver[0] != 3 {
        return Err(HelloError::Malformed("client version"));
    }
    r.take(32)?; // random
    let sid = r.vec8()?;
    if sid.len() > 32 {
        return Err(HelloError::Malformed("session id"));
    }
    let suites = r.vec16()?;
    if suites.is_empty() || suites.len() % 2 != 0 {
        return Err(HelloError::Malformed("cipher suites"));
    }
    let comp = r.vec8()?;
    if comp.is_empty() {
        return Err(HelloError::Malformed("compression methods"));
    }
    let mut sni = None;
    if !r.b.is_empty() {
        let mut ext = Reader { b: r.vec16()? };
        if !r.b.is_empty() {
            return Err(HelloError::Malformed("data after extensions"));
        }
        let mut seen: Vec<usize> = Vec::new();
        while !ext.b.is_empty() {
            let ty = ext.u16()?;
            let body = ext.vec16()?;
            if seen.contains(&ty) {
                return Err(HelloError::Malformed("duplicate extension"));
            }
            seen.push(ty);
            if ty == 0 {
                sni = Some(parse_server_name(body)?);
            }
        }
    }
    Ok(ClientHello { sni, len: pos })
}

fn parse_server_name(body: &[u8]) -> Result<String, HelloError> {
    let mut r = Reader { b: body };
    let mut list = Reader { b: r.vec16()? };
    if !r.b.is_empty() {
        return Err(HelloError::Malformed("server_name length"));
    }
    let mut name = None;
    while !list.b.is_empty() {
        let ty = list.u8()?;
        let n = list.vec16()?;
        if ty == 0 {
            if name.is_some() {
                return Err(HelloError::Malformed("two host names"));
            }
            if n.is_empty() || !n.iter().all(|&b| b.is_ascii_graphic()) {
                return Err(HelloError::Malformed("host name bytes"));
            }
            name = Some(String::from_utf8_lossy(n).into_owned());
        }
    }
    name.ok_or(HelloError::Malformed("server_name without a host name"))
}

/// Does the SNI name the CONNECT host? Both compared case-insensitively without a trailing dot.
pub fn sni_matches(sni: &str, host: &str) -> bool {
    let a = sni.strip_suffix('.').unwrap_or(sni);
    let b = host.strip_suffix('.').unwrap_or(host);
    a.eq_ignore_ascii_case(b)
}

/// A minimal, well-formed TLS 1.2/1.3-style ClientHello record for `sni` (tests, benches and
/// fuzz seeds; no server would complete a handshake with it).
#[allow(
    clippy::cast_possible_truncation,
    reason = "a test's hello: its lengths fit their fields for an SNI up to 65,000 bytes, and a \
              longer one makes a malformed hello either way"
)]
pub fn build_client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&[3, 3]);
    body.extend_from_slice(&[7u8; 32]);
    body.push(0); // session id
    body.extend_from_slice(&[0, 2, 0x13, 0x01]); // TLS_AES_128_GCM_SHA256
    body.extend_from_slice(&[1, 0]); // null compression
    let mut exts = Vec::new();
    if let Some(name) = sni {
        let n = name.as_bytes();
        let mut e = Vec::new();
        e.extend_from_slice(&((n.len() + 3) as u16).to_be_bytes());
        e.push(0);
        e.extend_from_slice(&(n.len() as u16).to_be_bytes());
        e.extend_from_slice(n);
        exts.extend_from_slice(&[0, 0]);
        exts.extend_from_slice(&(e.len() as u16).to_be_bytes());
        exts.extend_from_slice(&e);
    }
    // supported_versions: TLS 1.3
    exts.extend_from_slice(&[0, 0x2b, 0, 3, 2, 3, 4]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![1];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![22, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::cast_possible_truncation,
        reason = "test data: the lengths of hellos of a few hundred bytes"
    )]

    use super::*;

    #[test]
    fn hello() {
        let h = build_client_hello(Some("registry.test"));
        let p = parse_client_hello(&h).unwrap();
        assert_eq!(p.sni.as_deref(), Some("registry.test"));
        assert_eq!(p.len, h.len());
        for i in 0..h.len() {
            assert_eq!(
                parse_client_hello(&h[..i]),
                Err(HelloError::Incomplete),
                "{i}"
            );
        }
        assert_eq!(
            parse_client_hello(&build_client_hello(None)).unwrap().sni,
            None
        );
        assert_eq!(
            parse_client_hello(b"GET / HTTP/1.1\r\n"),
            Err(HelloError::NotTls)
        );
        assert_eq!(parse_client_hello(b"\x16\x02"), Err(HelloError::NotTls));
        let mut bad = h.clone();
        bad[5] = 2; // server hello
        assert!(matches!(
            parse_client_hello(&bad),
            Err(HelloError::Malformed(_))
        ));
        assert!(sni_matches("Registry.Test.", "registry.test"));
        assert!(!sni_matches("other.test", "registry.test"));
    }

    #[test]
    fn split_records() {
        let h = build_client_hello(Some("registry.test"));
        let hs = &h[5..];
        let (a, b) = hs.split_at(10);
        let mut two = vec![22, 3, 1];
        two.extend_from_slice(&(a.len() as u16).to_be_bytes());
        two.extend_from_slice(a);
        two.extend_from_slice(&[22, 3, 1]);
        two.extend_from_slice(&(b.len() as u16).to_be_bytes());
        two.extend_from_slice(b);
        let p = parse_client_hello(&two).unwrap();
        assert_eq!(p.sni.as_deref(), Some("registry.test"));
        assert_eq!(p.len, two.len());
    }

    /// `h`'s handshake message in records cut at `at` (offsets into the message).
    fn in_records(h: &[u8], at: &[usize]) -> Vec<u8> {
        let hs = &h[5..];
        let mut out = Vec::new();
        let mut prev = 0;
        for &a in at.iter().chain([hs.len()].iter()) {
            out.extend_from_slice(&[22, 3, 1]);
            out.extend_from_slice(&((a - prev) as u16).to_be_bytes());
            out.extend_from_slice(&hs[prev..a]);
            prev = a;
        }
        out
    }

    #[test]
    fn hello_over_several_records() {
        let h = build_client_hello(Some("registry.test"));
        // The handshake header itself cut (3 bytes, then 1), then the body in two.
        let four = in_records(&h, &[3, 4, 40]);
        let p = parse_client_hello(&four).unwrap();
        assert_eq!(p.sni.as_deref(), Some("registry.test"));
        assert_eq!(p.len, four.len());
        for i in 0..four.len() {
            assert_eq!(
                parse_client_hello(&four[..i]),
                Err(HelloError::Incomplete),
                "{i}"
            );
        }
        // What follows the hello's last record is not the hello's.
        let mut more = four.clone();
        more.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
        assert_eq!(parse_client_hello(&more).unwrap().len, four.len());
        // A record after the first that is not a handshake.
        let mut other = in_records(&h, &[10]);
        other[5 + 10] = 23;
        assert_eq!(
            parse_client_hello(&other),
            Err(HelloError::Malformed("record type"))
        );
    }

    /// The malformed hellos `proxy/compare` feeds to ours and to `tls-parser` (the measured
    /// reason the parser stays ours): `tls-parser` accepts every one of these but the
    /// record length 0 and the session id; ours refuses each.
    #[test]
    fn malformed_hellos() {
        let h = build_client_hello(Some("registry.test"));
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = h.clone();
            f(&mut v);
            parse_client_hello(&v)
        };
        let m = HelloError::Malformed;
        assert_eq!(bad(&|v| v[2] = 9), Err(m("record version")));
        assert_eq!(
            bad(&|v| v[3..5].copy_from_slice(&[0, 0])),
            Err(m("record length"))
        );
        assert_eq!(bad(&|v| v[9] = 4), Err(m("client version")));
        assert_eq!(bad(&|v| v[9 + 2 + 32] = 33), Err(m("session id")));
        // The cipher suites' length 0 (its bytes then read as what follows).
        assert_eq!(
            bad(&|v| v[44..46].copy_from_slice(&[0, 0])),
            Err(m("cipher suites"))
        );
        // A second supported_versions: two of one extension.
        let dup = bad(&|v| {
            let e = [0u8, 0x2b, 0, 3, 2, 3, 4];
            let el = u16::from_be_bytes([v[50], v[51]]) as usize + e.len();
            v[50..52].copy_from_slice(&(el as u16).to_be_bytes());
            v.extend_from_slice(&e);
            let hl = v.len() - 9;
            v[6..9].copy_from_slice(&(hl as u32).to_be_bytes()[1..]);
            let rl = v.len() - 5;
            v[3..5].copy_from_slice(&(rl as u16).to_be_bytes());
        });
        assert_eq!(dup, Err(m("duplicate extension")));
        for sni in ["a b.test", "a\0b.test", ""] {
            assert_eq!(
                parse_client_hello(&build_client_hello(Some(sni))),
                Err(m("host name bytes")),
                "{sni:?}"
            );
        }
    }
}
