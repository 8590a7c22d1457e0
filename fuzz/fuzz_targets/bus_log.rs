//! Feeds arbitrary bytes, split at an arbitrary point, to the reader of xdg-dbus-proxy's
//! log. It may not panic; what it keeps stays within its bounds, and the same bytes read
//! in one piece give the same refusals.

#![no_main]

use efr_proxy::buslog::{BusLog, MAX_DISTINCT, MAX_FIELD, MAX_SUMMARY};
use efr_sandbox_wire::Bus;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map(|b| *b as usize % (data.len() + 1)).unwrap_or(0);
    let mut a = BusLog::new(Bus::Session);
    a.feed(&data[..split]);
    a.feed(&data[split..]);
    a.finish();
    let mut b = BusLog::new(Bus::Session);
    b.feed(data);
    b.finish();
    assert_eq!(a.refused(), b.refused());
    assert!(a.refused().len() <= MAX_DISTINCT);
    for r in a.refused() {
        assert!(r.name.len() <= MAX_FIELD && r.count >= 1);
        assert!(r.member.as_ref().is_none_or(|m| m.len() <= MAX_FIELD));
        assert!(r.path.as_ref().is_none_or(|p| p.len() <= MAX_FIELD));
    }
    assert!(a.summary().0.len() <= MAX_SUMMARY);
});
