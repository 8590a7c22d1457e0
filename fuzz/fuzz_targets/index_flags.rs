#![no_main]
//! The index flags read (`efr_call::index_flags::flagged`, gix-index's decoder behind it)
//! never panics or runs away on any bytes: a call can leave any file as `.git/index`. An
//! input that decodes names only paths of the index and the two flags.

use efr_call::index_flags::flagged;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = flagged(data) {
        assert!(entries.iter().all(|(p, _)| p.len() <= data.len()));
    }
});
