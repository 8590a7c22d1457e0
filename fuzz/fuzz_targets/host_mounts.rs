//! Feeds arbitrary text to the reader of the host's mount table (`efr_launcher::view::
//! host_mounts::parse`), which tells a write the host's read-only mount refused from one the
//! sandbox refused. It may not panic; every mount it keeps has an absolute point, and a path
//! it answers for is never refused by a mount it did not keep.

#![no_main]

use efr_launcher::view::host_mounts::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let m = parse(text);
    for h in &m.0 {
        assert!(h.point.starts_with('/'), "{h:?}");
        let _ = m.read_only(h.point.as_bytes());
    }
    if m.0.iter().all(|h| !h.read_only) {
        assert!(!m.read_only(b"/a/b"));
    }
});
