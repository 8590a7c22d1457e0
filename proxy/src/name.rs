//! Host names: normalisation (case, trailing dot, IDNA to punycode), IP literal detection
//! (including the integer forms `inet_aton` accepts) and `*.suffix` wildcard matching.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A CONNECT or URI host after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A DNS name: lower case ASCII, no trailing dot, non-ASCII labels as `xn--` punycode.
    Name(String),
    /// An IP literal, in any of the forms a resolver library would take for an address.
    Ip(IpAddr),
}

/// Why a host string is not a usable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The host is empty.
    #[error("empty host")]
    Empty,
    /// The name is longer than [`MAX_NAME`] characters.
    #[error("host longer than 253 characters")]
    TooLong,
    /// A label is empty or longer than 63 characters.
    #[error("label empty or longer than 63 characters")]
    BadLabel,
    /// A character a host name may not hold.
    #[error("character not allowed in a host name")]
    BadChar,
}

/// Longest name accepted (DNS limit).
pub const MAX_NAME: usize = 253;

/// Normalise a host as it appears in a request (`[v6]` brackets allowed).
///
/// Order: brackets (must hold an IPv6 address) -> IPv6 without brackets -> lower case,
/// IDNA label separators (U+3002, U+FF0E, U+FF61) to `.`, one trailing dot dropped ->
/// IPv4 in any `inet_aton` form, or a last label that is a number (WHATWG "ends in a
/// number") -> [`Host::Ip`] / error; otherwise every label is checked (letters, digits,
/// `-`, `_`; not starting or ending with `-`; 1..=63 bytes) after punycode.
pub fn normalize(raw: &str) -> Result<Host, NameError> {
    if raw.is_empty() {
        return Err(NameError::Empty);
    }
    if raw.len() > 4 * MAX_NAME {
        return Err(NameError::TooLong);
    }
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(NameError::BadChar)?;
        // Zone ids (`%eth0`) are refused with the rest of the garbage.
        return inner
            .parse::<Ipv6Addr>()
            .map(|a| Host::Ip(IpAddr::V6(a)))
            .map_err(|_| NameError::BadChar);
    }
    if raw.contains(':') {
        return raw
            .parse::<Ipv6Addr>()
            .map(|a| Host::Ip(IpAddr::V6(a)))
            .map_err(|_| NameError::BadChar);
    }
    let mut s = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '\u{3002}' | '\u{ff0e}' | '\u{ff61}' => s.push('.'),
            c if c.is_ascii() => s.push(c.to_ascii_lowercase()),
            c => s.extend(c.to_lowercase()),
        }
    }
    if let Some(t) = s.strip_suffix('.') {
        s.truncate(t.len());
    }
    if s.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(ip) = parse_ipv4_loose(&s) {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    let last = s.rsplit('.').next().unwrap_or("");
    if ends_in_number(last) {
        // `1.2.3.4.5`, `0x7f.1.2.3.4` and the like: not a name any resolver would treat as
        // one, and some treat as an address. Refuse as an IP literal.
        return Ok(Host::Ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, label) in s.split('.').enumerate() {
        if i > 0 {
            out.push('.');
        }
        if label.is_empty() {
            return Err(NameError::BadLabel);
        }
        if label.is_ascii() {
            check_ascii_label(label)?;
            out.push_str(label);
        } else {
            for c in label.chars() {
                if c.is_control() || c.is_whitespace() || (c.is_ascii() && !is_ldh(c)) {
                    return Err(NameError::BadChar);
                }
                if !c.is_ascii() && (c.is_ascii_punctuation() || is_unicode_punct(c)) {
                    return Err(NameError::BadChar);
                }
            }
            let enc = punycode_encode(label).ok_or(NameError::BadLabel)?;
            let ace = format!("xn--{enc}");
            check_ascii_label(&ace)?;
            out.push_str(&ace);
        }
    }
    if out.len() > MAX_NAME {
        return Err(NameError::TooLong);
    }
    Ok(Host::Name(out))
}

fn is_unicode_punct(c: char) -> bool {
    // A small set of look-alike separators and symbols that never belong in a host name.
    matches!(
        c,
        '\u{2024}' | '\u{2044}' | '\u{2215}' | '\u{ff0f}' | '\u{ff20}' | '\u{ff1a}' | '\u{fe52}'
    )
}

fn is_ldh(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

fn check_ascii_label(label: &str) -> Result<(), NameError> {
    if label.is_empty() || label.len() > 63 {
        return Err(NameError::BadLabel);
    }
    if !label.chars().all(is_ldh) {
        return Err(NameError::BadChar);
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(NameError::BadLabel);
    }
    Ok(())
}

fn ends_in_number(label: &str) -> bool {
    if label.is_empty() {
        return false;
    }
    if label.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    if let Some(h) = label.strip_prefix("0x") {
        return h.bytes().all(|b| b.is_ascii_hexdigit());
    }
    false
}

/// Parse one part of an `inet_aton` address: decimal, octal (`0` prefix) or hex (`0x`).
fn parse_part(p: &str) -> Option<u64> {
    if p.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(h) = p.strip_prefix("0x") {
        (h, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() {
        // `0x` alone is 0 for inet_aton.
        return if radix == 16 { Some(0) } else { None };
    }
    if digits.len() > 32 {
        return None;
    }
    let v = u64::from_str_radix(digits, radix).ok()?;
    Some(v)
}

/// IPv4 in every form `inet_aton` takes: `a.b.c.d`, `a.b.c` (c 16 bits), `a.b` (b 24 bits),
/// `a` (32 bits), each part decimal, octal or hex. `None` when it is not such a form.
pub fn parse_ipv4_loose(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let nums: Vec<u64> = parts.iter().map(|p| parse_part(p)).collect::<Option<_>>()?;
    let (head, last) = nums.split_at(nums.len() - 1);
    if head.iter().any(|&n| n > 255) {
        return None;
    }
    let last_bits = 8 * (5 - nums.len());
    if last[0] >= (1u64 << last_bits) {
        return None;
    }
    let mut v: u64 = 0;
    for (i, &n) in head.iter().enumerate() {
        v |= n << (24 - 8 * i);
    }
    v |= last[0];
    // In range: the parts' bounds above keep `v` within 32 bits.
    Some(Ipv4Addr::from(u32::try_from(v).ok()?))
}

/// Does `name` (normalised) match `pattern` (normalised)? `*.suffix` matches any name with at
/// least one more label before `suffix`, never `suffix` itself; anything else is exact.
pub fn matches(pattern: &str, name: &str) -> bool {
    if let Some(suffix) = pattern.strip_prefix("*.") {
        name.len() > suffix.len() + 1
            && name.ends_with(suffix)
            && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
    } else {
        pattern == name
    }
}

/// Normalise a rule pattern (`name` or `*.suffix`). `None` for a pattern that can never match.
pub fn normalize_pattern(p: &str) -> Option<String> {
    if let Some(suffix) = p.strip_prefix("*.") {
        match normalize(suffix) {
            Ok(Host::Name(n)) => Some(format!("*.{n}")),
            _ => None,
        }
    } else {
        match normalize(p) {
            Ok(Host::Name(n)) => Some(n),
            _ => None,
        }
    }
}

/// RFC 3492 punycode encoding of one label (without the `xn--` prefix).
pub fn punycode_encode(input: &str) -> Option<String> {
    const BASE: u32 = 36;
    const TMIN: u32 = 1;
    const TMAX: u32 = 26;
    const SKEW: u32 = 38;
    const DAMP: u32 = 700;
    fn adapt(mut delta: u32, numpoints: u32, first: bool) -> u32 {
        delta /= if first { DAMP } else { 2 };
        delta += delta / numpoints;
        let mut k = 0;
        while delta > ((BASE - TMIN) * TMAX) / 2 {
            delta /= BASE - TMIN;
            k += BASE;
        }
        k + (((BASE - TMIN + 1) * delta) / (delta + SKEW))
    }
    /// The digit of value `d` (0 to 35: `a`-`z`, then `0`-`9`).
    fn digit(d: u32) -> Option<char> {
        const DIGITS: &[u8; BASE as usize] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        DIGITS.get(usize::try_from(d).ok()?).map(|&b| char::from(b))
    }
    let cps: Vec<u32> = input.chars().map(|c| c as u32).collect();
    let mut out: String = input.chars().filter(|c| c.is_ascii()).collect();
    let b = u32::try_from(out.len()).ok()?;
    let mut h = b;
    if b > 0 {
        out.push('-');
    }
    let mut n: u32 = 0x80;
    let mut delta: u32 = 0;
    let mut bias: u32 = 72;
    let total = u32::try_from(cps.len()).ok()?;
    while h < total {
        let m = *cps.iter().filter(|&&c| c >= n).min()?;
        delta = delta.checked_add((m - n).checked_mul(h + 1)?)?;
        n = m;
        for &c in &cps {
            if c < n {
                delta = delta.checked_add(1)?;
            }
            if c == n {
                let mut q = delta;
                let mut k = BASE;
                loop {
                    let t = if k <= bias {
                        TMIN
                    } else if k >= bias + TMAX {
                        TMAX
                    } else {
                        k - bias
                    };
                    if q < t {
                        break;
                    }
                    out.push(digit(t + (q - t) % (BASE - t))?);
                    q = (q - t) / (BASE - t);
                    k += BASE;
                }
                out.push(digit(q)?);
                bias = adapt(delta, h + 1, h == b);
                delta = 0;
                h += 1;
            }
        }
        delta += 1;
        n += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> String {
        match normalize(s) {
            Ok(Host::Name(n)) => n,
            other => panic!("{s}: {other:?}"),
        }
    }

    fn ip(s: &str) -> IpAddr {
        match normalize(s) {
            Ok(Host::Ip(a)) => a,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn names() {
        assert_eq!(name("Example.COM."), "example.com");
        assert_eq!(name("bücher.example"), "xn--bcher-kva.example");
        assert_eq!(name("BÜCHER.example"), "xn--bcher-kva.example");
        assert_eq!(name("münchen\u{3002}de"), "xn--mnchen-3ya.de");
        assert_eq!(name("例え.テスト"), "xn--r8jz45g.xn--zckzah");
        assert_eq!(name("_srv.example.com"), "_srv.example.com");
        assert!(normalize("").is_err());
        assert!(normalize(".").is_err());
        assert!(normalize("a..b").is_err());
        assert!(normalize("-a.com").is_err());
        assert!(normalize("a b.com").is_err());
        assert!(normalize("a/b.com").is_err());
        assert!(normalize("a@b.com").is_err());
        assert!(normalize(&"a".repeat(64)).is_err());
        assert!(normalize(&format!("{}.com", ["a"; 130].join("."))).is_err());
        assert!(normalize("[::1").is_err());
        assert!(normalize("[foo]").is_err());
    }

    #[test]
    fn ip_literals() {
        assert_eq!(ip("127.0.0.1"), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(ip("2130706433"), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(ip("0x7f.1"), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(ip("0177.0.0.01"), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(ip("0x7f000001"), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(ip("127.1"), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(ip("[::1]"), "::1".parse::<IpAddr>().unwrap());
        assert_eq!(
            ip("::ffff:127.0.0.1"),
            "::ffff:127.0.0.1".parse::<IpAddr>().unwrap()
        );
        ip("1.2.3.4.5");
        ip("foo.0x10");
        ip("foo.123");
        ip("99999999999");
    }

    #[test]
    fn wildcards() {
        assert!(matches("*.example.com", "a.example.com"));
        assert!(matches("*.example.com", "a.b.example.com"));
        assert!(!matches("*.example.com", "example.com"));
        assert!(!matches("*.example.com", "badexample.com"));
        assert!(matches("example.com", "example.com"));
        assert!(!matches("example.com", "a.example.com"));
        assert_eq!(
            normalize_pattern("*.Example.COM."),
            Some("*.example.com".into())
        );
        assert_eq!(normalize_pattern("*"), None);
        assert_eq!(normalize_pattern("*.1.2.3.4"), None);
    }
}
