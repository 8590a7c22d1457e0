//! Feeds arbitrary text to the reader of a grant's text form (`Grant`'s `FromStr`, what
//! `run --grant` reads). It may not panic, and every grant it reads prints (`Display`) to a
//! text that reads back as the same grant: exactly, or for a `tcp` host grant (whose host
//! loses one pair of brackets on the way) as the same relay, printing the same text again.

#![no_main]

use efr_sandbox_wire::Grant;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = text.parse::<Grant>() else {
        return;
    };
    let shown = g.to_string();
    let back: Grant = match shown.parse() {
        Ok(b) => b,
        Err(e) => panic!("{text:?} -> {shown:?} does not read back: {e}"),
    };
    assert_eq!(back.to_string(), shown, "{text:?}");
    assert_eq!(back.tcp_relay(), g.tcp_relay(), "{text:?}");
    if !matches!(g, Grant::Host { tcp: true, .. }) {
        assert_eq!(back, g, "{text:?}");
    }
});
