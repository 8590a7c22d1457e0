//! Feeds arbitrary bytes to the credential broker's rewrite of a request: the first bytes
//! pick the credential's `Send` and the host; the rest is split into a head (target and
//! header lines) and body chunks. Nothing may panic; a request with a placeholder to an
//! unbound host is never passed; a swap to a bound host leaves no placeholder in the named
//! place; the streamed masker's output is as long as its input and holds no secret when
//! the input was split anywhere.

#![no_main]

use efr_proxy::broker::rewrite::{Masker, ReqHead, Scanner, mask_pairs, rewrite_head};
use efr_proxy::broker::{BrokerCredential, Send};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "ghp_S3CRETs3cretS3CRETs3cretS3CRET0123";
const PH: &str = "ghp_PLACEHOLDERplaceholderPLACEHOL9876";

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let send = match data[0] % 5 {
        0 => Send::Bearer,
        1 => Send::Token,
        2 => Send::Basic { user: "x-access-token".into() },
        3 => Send::Header("X-Api-Key".into()),
        _ => Send::Query("key".into()),
    };
    let host = if data[1] & 1 == 0 { "api.test" } else { "evil.test" };
    let creds = [BrokerCredential {
        name: "forge".into(),
        hosts: vec![("api.test".into(), 443)],
        secret: SECRET.into(),
        placeholder: PH.into(),
        send,
    }];
    let rest = String::from_utf8_lossy(&data[3..]).replace("{PH}", PH);
    let (head_text, body) = rest.split_once("\n\n").unwrap_or((&rest, ""));
    let mut lines = head_text.split('\n');
    let mut head = ReqHead {
        target: lines.next().unwrap_or("/").to_string(),
        headers: lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.to_string(), v.trim().as_bytes().to_vec()))
            .collect(),
    };
    let r = rewrite_head(&creds, host, 443, &mut head);
    if host == "evil.test" && r.is_ok() {
        // Each part on its own line: a name and its value are checked apart.
        let mut all = head.target.clone();
        for (n, v) in &head.headers {
            all.push('\n');
            all.push_str(n);
            all.push('\n');
            all.push_str(&String::from_utf8_lossy(v));
        }
        assert!(!all.contains(PH), "a placeholder passed to an unbound host");
    }
    // The body, scanned and masked in chunks of the size data[2] gives.
    let step = usize::from(data[2]).max(1);
    let mut scan = Scanner::new(&creds, host, 443);
    let mut m = Masker::new(mask_pairs(&creds, "api.test", 443));
    let echoed = body.replace("{SECRET}", SECRET);
    let mut out = Vec::new();
    let mut seen = false;
    for c in echoed.as_bytes().chunks(step) {
        seen |= scan.feed(c).is_some();
        out.extend(m.feed(c));
    }
    out.extend(m.finish());
    assert_eq!(out.len(), echoed.len());
    assert!(memchr_find(&out, SECRET.as_bytes()).is_none(), "a secret left in the echo");
    if host == "evil.test" && echoed.contains(PH) {
        assert!(seen, "a placeholder in the body not seen");
    }
});

fn memchr_find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}
