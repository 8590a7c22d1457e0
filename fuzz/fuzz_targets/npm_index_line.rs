//! Feeds arbitrary text to the cache merge's readers of npm's cacache: an index bucket line
//! (`efr_call::caches::npm::parse_line`), its key's URL (`url_of`), an integrity string
//! (`digests`), and a registry's answer checked against the line (`verify`). None may
//! panic; a tarball's packument URL is on the tarball's own scheme and host.

#![no_main]

use efr_call::caches::npm::{Url, digests, parse_line, url_of, verify, want};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (line, rest) = text.split_once('\n').unwrap_or((text, ""));
    let _ = digests(line);
    if let Some(u) = url_of(line) {
        if let Url::Tarball { url, packument, .. } = &u {
            let origin = |s: &str| s.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
            assert_eq!(origin(url), origin(packument));
        }
    }
    let bucket = rest.get(..rest.len().min(70)).unwrap_or("");
    if let Ok(l) = parse_line(line, bucket) {
        if let Some(u) = url_of(&l.key) {
            let _ = want(&u, &l);
            let _ = verify(&u, &l, Some(&Ok(rest.as_bytes().to_vec())));
        }
    }
});
