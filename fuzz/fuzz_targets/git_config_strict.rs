//! The strict git config reader on any bytes: it never panics, a text it accepts has only
//! keys of git's form (a section, a lower-case name of git's key characters), and a text of
//! more than its bound is refused.

#![no_main]

use efr_sandbox_wire::gitconfig::{MAX_CONFIG, parse_strict, unsafe_keys};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(keys) = parse_strict(data) else {
        return;
    };
    assert!(data.len() <= MAX_CONFIG);
    for k in &keys {
        let (section, name) = (
            k.name.split('.').next().unwrap_or(""),
            k.name.rsplit('.').next().unwrap_or(""),
        );
        assert!(!section.is_empty() && !name.is_empty(), "{k:?}");
        assert!(
            name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'),
            "{k:?}"
        );
    }
    // Nothing is safe on an empty list: every key is named.
    assert_eq!(unsafe_keys(data, &[]).map(|u| u.len()).ok(), Some(keys.len()));
});
