//! Feeds arbitrary bytes, as the datagrams of an inet socket diagnostics dump, to the reader
//! of a job's TCP listeners (`efr_jobs::forward::dump::ListenDump`): the first byte says
//! where the bytes are cut into two datagrams. It may not panic, and an IPv4 listener it
//! keeps is never IPv6 only.

#![no_main]

use efr_jobs::forward::dump::ListenDump;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut).min(rest.len());
    let mut d = ListenDump::default();
    for part in [&rest[..at], &rest[at..]] {
        match d.take(part) {
            Ok(true) => break,
            Ok(false) => {}
            Err(_) => return,
        }
    }
    assert!(d.listeners().iter().all(|l| l.addr.is_ipv6() || !l.v6only));
});
