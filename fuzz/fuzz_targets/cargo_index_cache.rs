//! Feeds arbitrary bytes to the cache merge's readers of cargo's formats: its binary index
//! cache (`efr_call::caches::cargo::parse_index_cache`), a registry's index file as an
//! answer (`index_lines`, `cksum_of`, `index_cache_matches`) and a `.crate`'s name
//! (`splits`). None may panic; an index cache that matches an index has as many entries
//! as the index has distinct lines, and each split of a name gives back the name.

#![no_main]

use efr_call::caches::cargo::{
    cksum_of, index_cache_matches, index_lines, index_path, parse_index_cache, splits,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map(|b| *b as usize % (data.len() + 1)).unwrap_or(0);
    let (cache, index) = data.split_at(cut);
    if let Ok(c) = parse_index_cache(cache) {
        if index_cache_matches(&c, index) {
            let mut lines = index_lines(index);
            lines.sort();
            lines.dedup();
            assert_eq!(lines.len(), c.entries.len());
        }
    }
    if let Ok(name) = std::str::from_utf8(index) {
        for (n, v) in splits(name) {
            assert_eq!(format!("{n}-{v}"), name);
            assert!(index_path(n).is_some());
            let _ = cksum_of(cache, n, v);
        }
    }
});
