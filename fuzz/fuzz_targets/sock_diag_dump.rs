//! Feeds arbitrary bytes, as the datagrams of a socket diagnostics dump, to the reader of
//! the host's listening sockets (`efr_launcher::view::host_sockets::Dump`): the first byte
//! says where the bytes are cut into two datagrams. It may not panic, and every name it
//! keeps is a path (starts with `/`).

#![no_main]

use efr_launcher::view::host_sockets::Dump;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut).min(rest.len());
    let mut d = Dump::default();
    for part in [&rest[..at], &rest[at..]] {
        match d.take(part) {
            Ok(true) => break,
            Ok(false) => {}
            Err(_) => return,
        }
    }
    assert!(d.names().iter().all(|n| n.starts_with('/')));
});
