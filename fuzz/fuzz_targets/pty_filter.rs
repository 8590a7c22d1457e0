//! The escape filter of the call's pty on arbitrary output: it never panics, its output
//! never holds a sequence that must not reach the terminal (`first_leak`, a recognizer of
//! its own), how the output is cut into reads changes nothing, and filtered output goes
//! through the filter again unchanged.

#![no_main]

use efr_launcher::pty::filter::{Filter, first_leak};
use libfuzzer_sys::fuzz_target;

fn filtered(chunks: &[&[u8]]) -> Vec<u8> {
    let mut f = Filter::new();
    let mut out = Vec::new();
    for c in chunks {
        f.feed(c, &mut out);
    }
    f.finish(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let out = filtered(&[input]);
    assert_eq!(first_leak(&out), None, "{input:?} -> {out:?}");
    let at = (cut as usize).min(input.len());
    assert_eq!(filtered(&[&input[..at], &input[at..]]), out);
    assert_eq!(filtered(&[&out]), out);
});
