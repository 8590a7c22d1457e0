#![no_main]
//! The service's approvals file (`approvals.json` in its state dir) never panics its reader
//! on any bytes, and a store that reads writes back to a text that reads the same.

use efr_sandbox_wire::ApprovalStore;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = ApprovalStore::parse(data) {
        let text = serde_json::to_vec(&s).expect("a store that read serializes");
        assert_eq!(ApprovalStore::parse(&text).expect("reads back"), s);
    }
});
