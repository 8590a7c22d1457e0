#![no_main]
//! The call log's reader (`efr-sandbox log`) never panics on any bytes of a log file: each
//! line is a record or is reported unreadable, never both, never lost; a record that reads
//! writes back to a line that reads the same.

use efr_call::history::{parse_line, read_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let read = read_bytes(std::path::Path::new("calls.jsonl"), data);
    let lines = data
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert_eq!(read.records.len() + read.unreadable.len(), lines);
    for r in &read.records {
        let text = serde_json::to_string(r).expect("a record that read serializes");
        assert_eq!(&parse_line(&text).expect("reads back"), r);
    }
});
