//! Feeds arbitrary datagrams to the call's DNS answers (`dns::answer`: the query parser and
//! the reply builder). None may panic; a reply carries the query's id with the response
//! bit set, reads back as a DNS answer, holds at most the query's question and one `A`
//! record, and an allowed name gets NOERROR; a name reported refused fits a record.

#![no_main]

use efr_proxy::dns::{DnsOutcome, NameTable, SYNTHETIC_BASE, answer, parse_response};
use efr_proxy::{HostRule, ProxyPolicy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut p = ProxyPolicy::default();
    p.grants.extend(HostRule::new("*.test", None, false));
    let t = NameTable::new(p, SYNTHETIC_BASE);
    let (reply, outcome) = answer(&t, data);
    match (&reply, &outcome) {
        (None, DnsOutcome::Dropped) => {}
        (Some(r), o) if *o != DnsOutcome::Dropped => {
            assert_eq!(&r[..2], &data[..2]);
            assert!(r[2] & 0x80 != 0);
            assert!(r.len() <= data.len().max(12) + 16);
            let (rcode, addrs) = parse_response(r).expect("a reply that reads back");
            assert!(addrs.len() <= 1);
            if let DnsOutcome::Allowed(_) = o {
                assert_eq!(rcode, 0);
            }
            if let DnsOutcome::Refused(Some(n)) = o {
                assert!(!n.is_empty() && n.len() <= 253);
            }
        }
        other => panic!("a reply and its outcome disagree: {other:?}"),
    }
});
