//! Feeds arbitrary bytes to the proxy's request-head parser, then every head that parses to
//! the decision and the upstream request builder. None of it may panic; a head never
//! claims more bytes than it was given, nor more than the bound.

#![no_main]

use efr_proxy::head::{HeadLimits, parse_head};
use efr_proxy::{HostRule, ProxyPolicy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lim = HeadLimits::default();
    if let Ok(Some(h)) = parse_head(data, lim) {
        assert!(h.len <= data.len() && h.len <= lim.max_head);
        let mut p = ProxyPolicy::default();
        p.grants.extend(HostRule::new("*.test", None, true));
        p.deny("deny.test");
        let _ = p.decide(h.kind, &h.host, h.port);
        let _ = h.origin_request(&h.host);
    }
    // The same bytes as a host: normalisation must not panic either.
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = efr_proxy::name::normalize(s);
        let _ = efr_proxy::name::normalize_pattern(s);
    }
});
