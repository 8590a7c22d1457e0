//! Feeds arbitrary bytes to the ClientHello parser (the first bytes of a tunnel). It may
//! not panic; a parsed hello never claims more bytes than it was given, its bytes alone
//! parse to the same hello, and an SNI it reports is printable ASCII, never empty. (The
//! call's DNS answers have their own target, `proxy_dns`.)

#![no_main]

use efr_proxy::tls::parse_client_hello;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_client_hello(data) {
        assert!(h.len <= data.len());
        assert_eq!(parse_client_hello(&data[..h.len]).as_ref(), Ok(&h));
        if let Some(sni) = &h.sni {
            assert!(!sni.is_empty() && sni.bytes().all(|b| b.is_ascii_graphic()));
        }
    }
});
