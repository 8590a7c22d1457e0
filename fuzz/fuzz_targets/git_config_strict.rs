//! The strict git config reader on any bytes: it never panics, a text it accepts has only
//! keys of git's form (a section, a lower-case name of git's key characters), and a text of
//! more than its bound is refused. The supervisor's reader of todo lists on the same bytes:
//! a list never gains an exec line against itself, and one against an empty list is refused
//! exactly when it holds an exec line.

#![no_main]

use efr_launcher::supervise::gitdir::{exec_lines, todo_text};
use efr_sandbox_wire::gitconfig::{MAX_CONFIG, parse_strict, unsafe_keys};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert!(todo_text(data, data).is_none());
    assert_eq!(todo_text(data, b"").is_some(), !exec_lines(data).is_empty());
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
