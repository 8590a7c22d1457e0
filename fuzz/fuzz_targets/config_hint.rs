//! Feeds arbitrary text to the reader of config hints (`ConfigHint::gather`, which reads the
//! lines a refusal's reason carries after its first with the TOML parser). It may not
//! panic, and every hint it reads renders to lines that read back as the same hint, with
//! no control character in them (they are printed on the user's terminal to paste).

#![no_main]

use efr_policy::config::ConfigHint;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for h in ConfigHint::gather([text, text]) {
        let r = h.render();
        assert!(r.lines().all(|l| !l.chars().any(char::is_control)), "{r:?}");
        assert_eq!(ConfigHint::from_rendered(&r).as_ref(), Some(&h), "{r:?}");
    }
});
