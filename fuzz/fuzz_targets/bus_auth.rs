//! Feeds arbitrary bytes, in pieces cut where the first byte says, to the bus relay's auth
//! splitter (`efr_call::bus_relay::AuthLines`). It may not panic; each line it gives ends
//! in `\r\n` and is within the bound, the lines and the held rest are exactly the bytes fed
//! after the nul, and the same bytes fed in one piece give the same parts.

#![no_main]

use efr_call::bus_relay::{AuthError, AuthLines, AuthNext, MAX_AUTH_LINE, MAX_AUTH_LINES};
use libfuzzer_sys::fuzz_target;

fn run(pieces: &[&[u8]]) -> (Vec<AuthNext>, Option<AuthError>) {
    let mut a = AuthLines::default();
    let mut got = Vec::new();
    for p in pieces {
        a.push(p);
        loop {
            match a.next_part() {
                Ok(AuthNext::More) => break,
                Ok(AuthNext::Begin(rest)) => {
                    got.push(AuthNext::Begin(rest));
                    return (got, None);
                }
                Ok(x) => got.push(x),
                Err(e) => return (got, Some(e)),
            }
        }
    }
    (got, None)
}

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map(|b| *b as usize % (data.len() + 1)).unwrap_or(0);
    let (a, ea) = run(&[&data[..cut], &data[cut..]]);
    let (b, eb) = run(&[data]);
    assert_eq!(a, b);
    assert_eq!(ea, eb);
    let mut seen = Vec::new();
    let lines = a.iter().filter(|x| matches!(x, AuthNext::Line(_))).count();
    assert!(lines <= MAX_AUTH_LINES);
    for x in &a {
        match x {
            AuthNext::Line(l) => {
                assert!(l.ends_with(b"\r\n") && l.len() <= MAX_AUTH_LINE);
                assert!(l.as_slice() != b"BEGIN\r\n");
                seen.extend_from_slice(l);
            }
            AuthNext::Begin(rest) => {
                assert!(rest.starts_with(b"BEGIN\r\n"));
                seen.extend_from_slice(rest);
            }
            AuthNext::More => unreachable!("never kept"),
        }
    }
    if !a.is_empty() {
        assert_eq!(data.first(), Some(&0));
        assert_eq!(&data[1..1 + seen.len()], seen.as_slice());
    }
});
