//! Feeds arbitrary bytes to the ClientHello parser (the first bytes of a tunnel) and to the
//! call's DNS answers. None of it may panic; a parsed hello never claims more bytes
//! than it was given.

#![no_main]

use efr_proxy::dns::{NameTable, SYNTHETIC_BASE, answer};
use efr_proxy::tls::parse_client_hello;
use efr_proxy::{HostRule, ProxyPolicy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_client_hello(data) {
        assert!(h.len <= data.len());
    }
    let mut p = ProxyPolicy::default();
    p.grants.extend(HostRule::new("*.test", None, false));
    let t = NameTable::new(p, SYNTHETIC_BASE);
    let _ = answer(&t, data);
});
