//! The HTTP request head a client sends its proxy: `CONNECT host:port` or an absolute-URI
//! plain HTTP request. Incremental and bounded.

use crate::policy::Kind;

/// Bounds of a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLimits {
    /// The longest request or header line, in bytes, without its newline (8 KiB by default).
    pub max_line: usize,
    /// The most header lines (64 by default).
    pub max_headers: usize,
    /// The most bytes of the whole head, blank line included (16 KiB by default).
    pub max_head: usize,
}

impl Default for HeadLimits {
    fn default() -> Self {
        HeadLimits {
            max_line: 8 << 10,
            max_headers: 64,
            max_head: 16 << 10,
        }
    }
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// A CONNECT tunnel or a plain HTTP request.
    pub kind: Kind,
    /// The request's method as sent (`CONNECT`, `GET`, ...).
    pub method: String,
    /// Host as written (brackets kept for IPv6), not yet normalised.
    pub host: String,
    /// The target's port (80 when a plain HTTP URI names none).
    pub port: u16,
    /// Origin-form path and query of a plain HTTP request (`/` when the URI has none);
    /// empty for CONNECT.
    pub path: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: String,
    /// The header lines in order, as (name, value) with the value's spaces and tabs trimmed.
    pub headers: Vec<(String, String)>,
    /// Bytes of the head, blank line included.
    pub len: usize,
}

/// Why a head cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// A request or header line is over [`HeadLimits::max_line`].
    #[error("request or header line too long")]
    LineTooLong,
    /// More header lines than [`HeadLimits::max_headers`].
    #[error("too many header lines")]
    TooManyHeaders,
    /// The head is over [`HeadLimits::max_head`] bytes.
    #[error("request head too large")]
    HeadTooLarge,
    /// The head breaks HTTP's syntax; the text names what.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// The line parsed but the target is unusable; `host`/`port` are what could be read.
    #[error("bad request target: {why}")]
    BadTarget {
        /// The target's host as read, cut to 253 bytes.
        host: String,
        /// The target's port as read.
        port: u16,
        /// What is wrong with the target.
        why: &'static str,
    },
}

/// Parse a head from the start of `buf`. `Ok(None)`: incomplete, read more (the caller
/// bounds the bytes by `max_head`; more than that without a complete head is an error here).
pub fn parse_head(buf: &[u8], lim: HeadLimits) -> Result<Option<Head>, HeadError> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut pos = 0;
    let end;
    loop {
        let rest = &buf[pos..];
        match rest.iter().position(|&b| b == b'\n') {
            None => {
                if rest.len() > lim.max_line {
                    return Err(HeadError::LineTooLong);
                }
                if buf.len() > lim.max_head {
                    return Err(HeadError::HeadTooLarge);
                }
                return Ok(None);
            }
            Some(i) => {
                if i > lim.max_line {
                    return Err(HeadError::LineTooLong);
                }
                let line = &rest[..i];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                pos += i + 1;
                if pos > lim.max_head {
                    return Err(HeadError::HeadTooLarge);
                }
                if line.is_empty() {
                    if lines.is_empty() {
                        // Tolerate blank lines before the request line (RFC 9112 2.2), but
                        // only a few.
                        if pos > 8 {
                            return Err(HeadError::Malformed("blank lines"));
                        }
                        continue;
                    }
                    end = pos;
                    break;
                }
                if lines.len() > lim.max_headers {
                    return Err(HeadError::TooManyHeaders);
                }
                lines.push(line);
            }
        }
    }
    let request = std::str::from_utf8(lines[0])
        .map_err(|_| HeadError::Malformed("request line not UTF-8"))?;
    let mut parts = request.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) => (m, t, v),
        _ => return Err(HeadError::Malformed("request line")),
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(HeadError::Malformed("method"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HeadError::Malformed("version"));
    }
    if target.is_empty() || !target.bytes().all(|b| b > 0x20 && b < 0x7f) {
        return Err(HeadError::Malformed("target"));
    }
    let mut headers = Vec::with_capacity(lines.len() - 1);
    for line in &lines[1..] {
        let line =
            std::str::from_utf8(line).map_err(|_| HeadError::Malformed("header not UTF-8"))?;
        if line.starts_with([' ', '\t']) {
            return Err(HeadError::Malformed("obsolete line folding"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(HeadError::Malformed("header without colon"))?;
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(HeadError::Malformed("header name"));
        }
        if value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
            return Err(HeadError::Malformed("header value"));
        }
        headers.push((
            name.to_string(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
    }
    let (kind, host, port, path) = if method == "CONNECT" {
        let (host, port) = split_authority(target, None)?;
        (Kind::Connect, host, port, String::new())
    } else {
        let lower = target
            .get(..8)
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default();
        let rest = if lower.starts_with("http://") {
            &target[7..]
        } else if lower.starts_with("https://") {
            return Err(bad(target, 443, "https URI without CONNECT"));
        } else {
            return Err(HeadError::Malformed(
                "not a proxy request (no absolute http URI)",
            ));
        };
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (auth, path) = rest.split_at(split);
        if path.starts_with('#') {
            return Err(HeadError::Malformed("fragment"));
        }
        let path = if path.is_empty() {
            "/".to_string()
        } else if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        let (host, port) = split_authority(auth, Some(80))?;
        (Kind::PlainHttp, host, port, path)
    };
    Ok(Some(Head {
        kind,
        method: method.to_string(),
        host,
        port,
        path,
        version: version.to_string(),
        headers,
        len: end,
    }))
}

fn bad(host: &str, port: u16, why: &'static str) -> HeadError {
    let mut h = host.to_string();
    h.truncate(253);
    HeadError::BadTarget { host: h, port, why }
}

/// `host:port` or `[v6]:port`; `default` when the port may be absent.
fn split_authority(auth: &str, default: Option<u16>) -> Result<(String, u16), HeadError> {
    if auth.contains('@') {
        return Err(bad(
            auth.rsplit('@').next().unwrap_or(""),
            default.unwrap_or(0),
            "userinfo in authority",
        ));
    }
    let (host, port) = if auth.starts_with('[') {
        match auth.find(']') {
            None => return Err(bad(auth, 0, "unclosed bracket")),
            Some(i) => {
                let (h, rest) = auth.split_at(i + 1);
                match rest.strip_prefix(':') {
                    Some(p) => (h, Some(p)),
                    None if rest.is_empty() => (h, None),
                    None => return Err(bad(h, 0, "junk after bracket")),
                }
            }
        }
    } else {
        match auth.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => return Err(bad(auth, 0, "IPv6 address without brackets")),
            None => (auth, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => match p.parse::<u16>() {
            Ok(n) if n != 0 && !p.starts_with('+') => n,
            _ => return Err(bad(host, 0, "bad port")),
        },
        (None, Some(d)) => d,
        (None, None) => return Err(bad(host, 0, "CONNECT without a port")),
    };
    if host.is_empty() {
        return Err(bad(host, port, "empty host"));
    }
    Ok((host.to_string(), port))
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl Head {
    /// The head to send upstream for a plain HTTP request: origin-form target, hop-by-hop
    /// and `Proxy-*` headers dropped, `Connection: close` (one request per upstream
    /// connection, so a second request on the same client connection cannot reach a host
    /// other than the one checked).
    pub fn origin_request(&self, host: &str) -> Vec<u8> {
        let mut out = format!("{} {} {}\r\n", self.method, self.path, self.version).into_bytes();
        for (n, v) in &self.headers {
            let l = n.to_ascii_lowercase();
            if l.starts_with("proxy-")
                || ["connection", "keep-alive", "upgrade", "te", "host"].contains(&l.as_str())
            {
                continue;
            }
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        // The Host is the one checked, whatever the client wrote.
        let host = if self.port == 80 {
            host.to_string()
        } else {
            format!("{host}:{}", self.port)
        };
        out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Option<Head>, HeadError> {
        parse_head(s.as_bytes(), HeadLimits::default())
    }

    #[test]
    fn connect() {
        let h = p("CONNECT registry.test:443 HTTP/1.1\r\nHost: registry.test:443\r\n\r\nextra")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.kind, h.host.as_str(), h.port),
            (Kind::Connect, "registry.test", 443)
        );
        assert_eq!(
            h.len,
            "CONNECT registry.test:443 HTTP/1.1\r\nHost: registry.test:443\r\n\r\n".len()
        );
        let h = p("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.host.as_str(), h.port), ("[::1]", 8443));
        assert_eq!(p("CONNECT registry.test:443 HTTP/1.1\r\nHost: x"), Ok(None));
        assert!(matches!(
            p("CONNECT registry.test HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadTarget { .. })
        ));
        assert!(matches!(
            p("CONNECT ::1:443 HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadTarget { .. })
        ));
        assert!(matches!(
            p("CONNECT a:99999 HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadTarget { .. })
        ));
        assert!(matches!(
            p("CONNECT a:443 HTTP/2\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            p("\x16\x03\x01garbage\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
    }

    #[test]
    fn plain() {
        let h = p("GET http://Web.test/a?b HTTP/1.1\r\nProxy-Connection: keep-alive\r\nHost: evil.test\r\nAccept: */*\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.kind, h.host.as_str(), h.port, h.path.as_str()),
            (Kind::PlainHttp, "Web.test", 80, "/a?b")
        );
        let up = String::from_utf8(h.origin_request("web.test")).unwrap();
        assert_eq!(
            up,
            "GET /a?b HTTP/1.1\r\nAccept: */*\r\nHost: web.test\r\nConnection: close\r\n\r\n"
        );
        let h = p("GET http://web.test:8080?q HTTP/1.0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.port, h.path.as_str()), (8080, "/?q"));
        assert!(matches!(
            p("GET https://web.test/ HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadTarget { port: 443, .. })
        ));
        assert!(matches!(
            p("GET / HTTP/1.1\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            p("GET http://u:p@web.test/ HTTP/1.1\r\n\r\n"),
            Err(HeadError::BadTarget { .. })
        ));
    }

    #[test]
    fn bounds() {
        let long = format!("CONNECT {}:443 HTTP/1.1\r\n\r\n", "a".repeat(9000));
        assert_eq!(p(&long), Err(HeadError::LineTooLong));
        assert_eq!(p(&"a".repeat(9000)), Err(HeadError::LineTooLong));
        let flood = format!("CONNECT a:443 HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(100));
        assert_eq!(p(&flood), Err(HeadError::TooManyHeaders));
        let big = format!(
            "CONNECT a:443 HTTP/1.1\r\n{}\r\n",
            format!("X: {}\r\n", "y".repeat(4000)).repeat(5)
        );
        assert_eq!(p(&big), Err(HeadError::HeadTooLarge));
        assert!(matches!(
            p("CONNECT a:443 HTTP/1.1\r\n folded\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
    }
}
