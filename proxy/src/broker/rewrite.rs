//! The swap and the misuse check of one request, pure (fuzzed: `broker_rewrite`).
//!
//! For a request to `host:port`, for each credential of the call:
//!
//! - **bound** (`host:port` matches one of its hosts): the placeholder becomes the secret in
//!   the one place its [`Send`] names, and only there (`Authorization: Bearer|token X`,
//!   `Authorization: Basic b64(user:X)` decoded, swapped, encoded again, a named header, a
//!   query parameter). A placeholder elsewhere in a request to a bound host is left as it is
//!   and refused nowhere: the host is the one the secret is for, and a placeholder is worth
//!   nothing anywhere.
//! - **not bound**: the placeholder in any header value (raw; `Basic` credentials decoded),
//!   in the request target (raw and percent-decoded), or in the body ([`Scanner`]: streamed,
//!   a window of the placeholder's length - 1 across chunks) is a [`Misuse`]: the request is
//!   refused. Not covered: a body that carries the placeholder encoded (base64, gzip, ...).
//!
//! Responses: [`Masker`] and [`mask_value`] replace the secret (and its `Basic` form) by the
//! placeholder, same length, so an API that echoes the token never shows it to the call.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use memchr::memmem;

use super::{BrokerCredential, Send};

/// Where a placeholder was seen in a request to a host its credential is not bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// In the value of this header.
    Header(String),
    /// In the request target (path or query).
    Url,
    /// In the request body.
    Body,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Header(h) => write!(f, "the header {h}"),
            Place::Url => f.write_str("the URL"),
            Place::Body => f.write_str("the body"),
        }
    }
}

/// A placeholder sent to a host its credential is not bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misuse {
    /// The credential's index in the broker's list.
    pub cred: usize,
    /// Where it was.
    pub place: Place,
}

/// A request head as the rewrite sees it: the target (`/path?query`) and the headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReqHead {
    /// Path and query.
    pub target: String,
    /// Header names (any case) and raw values.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Swap the placeholders of the credentials bound to `host:port` in their named place, and
/// check that no other credential's placeholder is anywhere in the head. `Ok`: the indexes
/// of the credentials swapped (each once).
pub fn rewrite_head(
    creds: &[BrokerCredential],
    host: &str,
    port: u16,
    head: &mut ReqHead,
) -> Result<Vec<usize>, Misuse> {
    let mut used = Vec::new();
    for (i, c) in creds.iter().enumerate() {
        if c.binds(host, port) {
            if swap(c, head) {
                used.push(i);
            }
        } else if let Some(place) = find_in_head(c.placeholder.as_bytes(), head) {
            return Err(Misuse { cred: i, place });
        }
    }
    Ok(used)
}

/// Swap `c`'s placeholder for its secret in the place `c.send` names; whether it did.
fn swap(c: &BrokerCredential, head: &mut ReqHead) -> bool {
    let (ph, secret) = (c.placeholder.as_str(), c.secret.as_str());
    match &c.send {
        Send::Bearer | Send::Token => {
            let mut done = false;
            for (n, v) in head.headers.iter_mut() {
                if !n.eq_ignore_ascii_case("authorization") {
                    continue;
                }
                if let Some((scheme, cred)) = split_auth(v)
                    && (scheme.eq_ignore_ascii_case("bearer")
                        || scheme.eq_ignore_ascii_case("token"))
                    && cred == ph
                {
                    *v = format!("{scheme} {secret}").into_bytes();
                    done = true;
                }
            }
            done
        }
        Send::Basic { .. } => {
            let mut done = false;
            for (n, v) in head.headers.iter_mut() {
                if !n.eq_ignore_ascii_case("authorization") {
                    continue;
                }
                let Some(plain) = basic_decoded(v) else {
                    continue;
                };
                let Some((user, pass)) = plain.split_once(':') else {
                    continue;
                };
                if pass == ph {
                    let scheme = split_auth(v)
                        .map(|(s, _)| s.to_string())
                        .unwrap_or_default();
                    let enc = B64.encode(format!("{user}:{secret}"));
                    *v = format!("{scheme} {enc}").into_bytes();
                    done = true;
                }
            }
            done
        }
        Send::Header(name) => {
            let mut done = false;
            for (n, v) in head.headers.iter_mut() {
                if n.eq_ignore_ascii_case(name) && memmem::find(v, ph.as_bytes()).is_some() {
                    *v = replace_all(v, ph.as_bytes(), secret.as_bytes());
                    done = true;
                }
            }
            done
        }
        Send::Query(param) => swap_query(&mut head.target, param, ph, secret),
    }
}

/// `SCHEME CREDENTIALS` of an `Authorization` value (UTF-8, trimmed).
fn split_auth(v: &[u8]) -> Option<(&str, &str)> {
    let s = std::str::from_utf8(v).ok()?.trim();
    let (scheme, rest) = s.split_once(' ')?;
    Some((scheme, rest.trim()))
}

/// The decoded `user:password` of a `Basic` value.
fn basic_decoded(v: &[u8]) -> Option<String> {
    let (scheme, cred) = split_auth(v)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    String::from_utf8(B64.decode(cred).ok()?).ok()
}

fn swap_query(target: &mut String, param: &str, ph: &str, secret: &str) -> bool {
    let Some((path, query)) = target.split_once('?') else {
        return false;
    };
    let mut done = false;
    let parts: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if k == param && v == ph => {
                done = true;
                format!("{k}={secret}")
            }
            _ => kv.to_string(),
        })
        .collect();
    if done {
        *target = format!("{path}?{}", parts.join("&"));
    }
    done
}

/// Where `ph` is in the head: a header name (any case), a header value (raw, a `Basic`
/// value decoded, percent-decoded), or the target (raw or percent-decoded).
pub fn find_in_head(ph: &[u8], head: &ReqHead) -> Option<Place> {
    let ph_lower = ph.to_ascii_lowercase();
    for (n, v) in &head.headers {
        let decoded = basic_decoded(v);
        // Header names travel in lower case on HTTP/2.
        if memmem::find(n.to_ascii_lowercase().as_bytes(), &ph_lower).is_some()
            || memmem::find(v, ph).is_some()
            || decoded.is_some_and(|d| memmem::find(d.as_bytes(), ph).is_some())
            || memmem::find(&percent_decode(v), ph).is_some()
        {
            return Some(Place::Header(n.clone()));
        }
    }
    let t = head.target.as_bytes();
    if memmem::find(t, ph).is_some() || memmem::find(&percent_decode(t), ph).is_some() {
        return Some(Place::Url);
    }
    None
}

/// `%XX` decoded (and `+` as a space); bytes that are not a valid escape stay as they are.
pub fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match (
            s[i],
            s.get(i + 1).copied().and_then(hex),
            s.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                // Two hex digits: at most 255.
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut last = 0;
    for at in memmem::find_iter(hay, from) {
        if at < last {
            continue;
        }
        out.extend_from_slice(&hay[last..at]);
        out.extend_from_slice(to);
        last = at + from.len();
    }
    out.extend_from_slice(&hay[last..]);
    out
}

/// A streamed search for placeholders in a body: `feed` each chunk in order; the first
/// credential whose placeholder is seen, even across chunks.
#[derive(Debug)]
pub struct Scanner {
    pats: Vec<(usize, Vec<u8>)>,
    keep: usize,
    carry: Vec<u8>,
}

impl Scanner {
    /// Scan for the placeholders of `creds` not bound to `host:port` (empty: nothing to
    /// scan).
    pub fn new(creds: &[BrokerCredential], host: &str, port: u16) -> Scanner {
        let pats: Vec<(usize, Vec<u8>)> = creds
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.binds(host, port) && !c.placeholder.is_empty())
            .map(|(i, c)| (i, c.placeholder.as_bytes().to_vec()))
            .collect();
        let keep = pats.iter().map(|(_, p)| p.len()).max().unwrap_or(1) - 1;
        Scanner {
            pats,
            keep,
            carry: Vec::new(),
        }
    }

    /// Nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.pats.is_empty()
    }

    /// The credential index of a placeholder that ends in `chunk` (or spans into it).
    pub fn feed(&mut self, chunk: &[u8]) -> Option<usize> {
        if self.pats.is_empty() {
            return None;
        }
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(chunk);
        let hit = self
            .pats
            .iter()
            .find(|(_, p)| memmem::find(&window, p).is_some())
            .map(|(i, _)| *i);
        let from = window.len().saturating_sub(self.keep);
        self.carry = window[from..].to_vec();
        hit
    }
}

/// The pairs a response is masked with for `creds` bound to `host:port`: the secret ->
/// the placeholder, and its `Basic` form (`b64(user:secret)` -> `b64(user:placeholder)`).
pub fn mask_pairs(creds: &[BrokerCredential], host: &str, port: u16) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut pairs = Vec::new();
    for c in creds
        .iter()
        .filter(|c| c.binds(host, port) && !c.secret.is_empty())
    {
        pairs.push((
            c.secret.as_bytes().to_vec(),
            c.placeholder.as_bytes().to_vec(),
        ));
        if let Send::Basic { user } = &c.send {
            let s = B64.encode(format!("{user}:{}", c.secret));
            let p = B64.encode(format!("{user}:{}", c.placeholder));
            pairs.push((s.into_bytes(), p.into_bytes()));
        }
    }
    pairs
}

/// A header value with every secret of `pairs` replaced by its placeholder.
pub fn mask_value(pairs: &[(Vec<u8>, Vec<u8>)], v: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    for (from, to) in pairs {
        let cur = out.as_deref().unwrap_or(v);
        if memmem::find(cur, from).is_some() {
            out = Some(replace_all(cur, from, to));
        }
    }
    out
}

/// A streamed replacement of secrets by their placeholders (same lengths): `feed` returns
/// the bytes that may go out now (all but a window of the longest secret's length - 1,
/// held until the next chunk shows whether a secret spans the boundary), `finish` the rest.
#[derive(Debug)]
pub struct Masker {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    keep: usize,
    carry: Vec<u8>,
}

impl Masker {
    /// A masker of `pairs` (a pair whose sides differ in length, or an empty one, is
    /// dropped: [`super::Broker::new`] refuses such credentials).
    pub fn new(mut pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Masker {
        pairs.retain(|(f, t)| f.len() == t.len() && !f.is_empty());
        let keep = pairs
            .iter()
            .map(|(f, _)| f.len())
            .max()
            .unwrap_or(1)
            .saturating_sub(1);
        Masker {
            pairs,
            keep,
            carry: Vec::new(),
        }
    }

    /// Nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The masked bytes that may go out after `chunk`.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(chunk);
        for (from, to) in &self.pairs {
            let hits: Vec<usize> = memmem::find_iter(&window, from).collect();
            let mut last_end = 0;
            for at in hits {
                if at < last_end {
                    continue;
                }
                window[at..at + from.len()].copy_from_slice(to);
                last_end = at + from.len();
            }
        }
        let cut = window.len().saturating_sub(self.keep);
        self.carry = window.split_off(cut);
        window
    }

    /// Nothing held back.
    pub fn is_drained(&self) -> bool {
        self.carry.is_empty()
    }

    /// What is left (the last window).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(send: Send) -> BrokerCredential {
        BrokerCredential {
            name: "forge".into(),
            hosts: vec![("git.test".into(), 443), ("*.api.test".into(), 8443)],
            secret: "ghp_SECRETsecretSECRET0123".into(),
            placeholder: "ghp_PLACEHOLDERplaceho0123".into(),
            send,
        }
    }

    fn head(target: &str, headers: &[(&str, &str)]) -> ReqHead {
        ReqHead {
            target: target.into(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    const PH: &str = "ghp_PLACEHOLDERplaceho0123";
    const SECRET: &str = "ghp_SECRETsecretSECRET0123";

    #[test]
    fn bearer_and_token_swap_only_at_a_bound_host() {
        let c = [cred(Send::Bearer)];
        let mut h = head("/", &[("Authorization", &format!("Bearer {PH}"))]);
        assert_eq!(rewrite_head(&c, "git.test", 443, &mut h), Ok(vec![0]));
        assert_eq!(h.headers[0].1, format!("Bearer {SECRET}").as_bytes());
        let mut h = head("/", &[("authorization", &format!("token {PH}"))]);
        assert_eq!(rewrite_head(&c, "x.api.test", 8443, &mut h), Ok(vec![0]));
        assert_eq!(h.headers[0].1, format!("token {SECRET}").as_bytes());
        // The wrong port of a bound name is not bound.
        let mut h = head("/", &[("Authorization", &format!("Bearer {PH}"))]);
        let e = rewrite_head(&c, "git.test", 8443, &mut h).unwrap_err();
        assert_eq!(e.place, Place::Header("Authorization".into()));
        assert_eq!(h.headers[0].1, format!("Bearer {PH}").as_bytes());
    }

    #[test]
    fn basic_is_decoded_swapped_and_encoded() {
        let c = [cred(Send::Basic {
            user: "x-access-token".into(),
        })];
        let v = format!("Basic {}", B64.encode(format!("x-access-token:{PH}")));
        let mut h = head("/repo.git/info/refs", &[("Authorization", &v)]);
        assert_eq!(rewrite_head(&c, "git.test", 443, &mut h), Ok(vec![0]));
        let want = format!("Basic {}", B64.encode(format!("x-access-token:{SECRET}")));
        assert_eq!(h.headers[0].1, want.as_bytes());
        let mut h = head("/", &[("Authorization", &v)]);
        assert!(rewrite_head(&c, "evil.test", 443, &mut h).is_err());
    }

    #[test]
    fn named_header_and_query() {
        let c = [cred(Send::Header("X-Api-Key".into()))];
        let mut h = head("/", &[("x-api-key", PH), ("X-Other", PH)]);
        assert_eq!(rewrite_head(&c, "git.test", 443, &mut h), Ok(vec![0]));
        assert_eq!(h.headers[0].1, SECRET.as_bytes());
        assert_eq!(h.headers[1].1, PH.as_bytes(), "only the named place");
        let c = [cred(Send::Query("key".into()))];
        let mut h = head(&format!("/v1?a=1&key={PH}&b=2"), &[]);
        assert_eq!(rewrite_head(&c, "git.test", 443, &mut h), Ok(vec![0]));
        assert_eq!(h.target, format!("/v1?a=1&key={SECRET}&b=2"));
    }

    #[test]
    fn misuse_in_url_percent_encoded_and_headers() {
        let c = [cred(Send::Bearer)];
        let enc: String = PH.bytes().map(|b| format!("%{b:02X}")).collect();
        for t in [format!("/x?q={PH}"), format!("/x/{enc}")] {
            let mut h = head(&t, &[]);
            let e = rewrite_head(&c, "evil.test", 443, &mut h).unwrap_err();
            assert_eq!(e.place, Place::Url, "{t}");
        }
        let mut h = head("/", &[("Cookie", &format!("a={PH}"))]);
        assert!(rewrite_head(&c, "evil.test", 443, &mut h).is_err());
        let mut h = head("/", &[(&format!("x-{}", PH.to_lowercase()), "1")]);
        assert!(rewrite_head(&c, "evil.test", 443, &mut h).is_err());
        let mut h = head("/", &[("Cookie", "a=b")]);
        assert_eq!(rewrite_head(&c, "evil.test", 443, &mut h), Ok(vec![]));
    }

    #[test]
    fn body_scan_across_chunks() {
        let c = [cred(Send::Bearer)];
        let body = format!("{{\"token\":\"{PH}\"}}");
        for split in 0..body.len() {
            let mut s = Scanner::new(&c, "evil.test", 443);
            let (a, b) = body.as_bytes().split_at(split);
            let hit = s.feed(a).or_else(|| s.feed(b));
            assert_eq!(hit, Some(0), "split at {split}");
        }
        assert!(Scanner::new(&c, "git.test", 443).is_empty());
    }

    #[test]
    fn echo_masked_across_chunks_same_length() {
        let c = [cred(Send::Basic { user: "u".into() })];
        let pairs = mask_pairs(&c, "git.test", 443);
        let b64 = B64.encode(format!("u:{SECRET}"));
        let body = format!("you sent {SECRET} and Basic {b64}.");
        for split in 0..body.len() {
            let mut m = Masker::new(pairs.clone());
            let (a, b) = body.as_bytes().split_at(split);
            let mut out = m.feed(a);
            out.extend(m.feed(b));
            out.extend(m.finish());
            let want = format!("you sent {PH} and Basic {}.", B64.encode(format!("u:{PH}")));
            assert_eq!(String::from_utf8(out).unwrap(), want, "split {split}");
        }
        assert_eq!(
            mask_value(&pairs, format!("Bearer {SECRET}").as_bytes()).unwrap(),
            format!("Bearer {PH}").as_bytes()
        );
    }
}
