#![no_main]
//! bash's command line reader (`efr-sandbox shell`, `efr-bash`) never panics on any words,
//! keeps them as given, and what it reads is one of them.

use efr_policy::shell::invocation::{Run, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Words separated by NUL, as a command line is.
    let text = String::from_utf8_lossy(data);
    let words: Vec<String> = text.split('\0').map(String::from).collect();
    if let Ok(inv) = parse(&words) {
        assert_eq!(inv.args, words);
        match &inv.run {
            Run::Command(l) | Run::Script(l) => assert!(words.contains(l)),
            Run::Stdin => {}
        }
        assert!(inv.positional.len() <= words.len());
    }
});
