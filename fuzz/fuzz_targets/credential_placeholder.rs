//! Feeds arbitrary text to `efr_policy::credential::placeholder` as a secret. It may not
//! panic or loop, and the placeholder has the secret's length, its documented prefix when
//! it has one, and is never the secret (but for the empty one).

#![no_main]

use efr_policy::credential::{PREFIXES, placeholder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(secret) = std::str::from_utf8(data) else {
        return;
    };
    let p = placeholder(secret);
    assert_eq!(p.len(), secret.len(), "{secret:?}");
    if !secret.is_empty() {
        assert_ne!(p, secret);
    }
    if let Some(k) = PREFIXES.iter().find(|k| secret.starts_with(k.prefix)) {
        if secret.len() > k.prefix.len() {
            assert!(p.starts_with(k.prefix), "{secret:?} -> {p:?}");
        }
    }
});
