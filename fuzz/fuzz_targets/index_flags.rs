#![no_main]
//! The index flags read (`efr_call::index_flags::flagged`, gix-index's decoder behind it)
//! never panics or runs away on any bytes: a call can leave any file as `.git/index`. The
//! input is taken as it is (mostly refused by its checksum) and as the body of an index
//! whose checksum is all zero (`index.skipHash`: not checked, so the decoder sees every
//! mutation). An input that decodes names only paths of the index and the two flags.

use efr_call::index_flags::flagged;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut unchecked = data.to_vec();
    unchecked.extend_from_slice(&[0u8; 20]);
    for d in [data, &unchecked[..]] {
        if let Ok(entries) = flagged(d) {
            assert!(entries.iter().all(|(p, _)| p.len() <= d.len()));
        }
    }
});
