//! Feeds arbitrary bytes to the surface scan's matcher, as a file's first bytes and (when
//! UTF-8) as a file name, and as the text of a patterns file. None may panic; a match's
//! class is one the shipped patterns have, and matching is the same twice; the hosts of
//! the tokens are sorted, once each and lower case.

#![no_main]

use std::sync::OnceLock;

use efr_surface::Patterns;
use libfuzzer_sys::fuzz_target;

fn shipped() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns::shipped().expect("the shipped patterns load"))
}

fuzz_target!(|data: &[u8]| {
    let p = shipped();
    let a = p.by_content(data);
    assert_eq!(a, p.by_content(data));
    // The hosts of the tokens: sorted, once each, lower case, and a content match with a
    // host has it among them.
    let hosts = p.hosts(data);
    assert!(hosts.windows(2).all(|w| w[0] < w[1]), "{hosts:?}");
    assert!(hosts.iter().all(|h| *h == h.to_ascii_lowercase()), "{hosts:?}");
    if let Some(h) = a.as_ref().and_then(|m| m.host.as_ref()) {
        assert!(hosts.contains(h), "{h} not in {hosts:?}");
    }
    for needs in [
        efr_surface::patterns::Needs::PrivateKey,
        efr_surface::patterns::Needs::RandomWord,
        efr_surface::patterns::Needs::Dotenv,
    ] {
        assert_eq!(
            p.holds(needs, data, data.len() as u64),
            p.holds(needs, data, data.len() as u64)
        );
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = p.by_name(s);
        let comps: Vec<&str> = s.split('/').collect();
        let _ = p.skips_dir(&comps);
        // Any text as a patterns file: a value or a clear error, never a panic.
        let _ = Patterns::parse(s).map_err(|e| e.to_string());
    }
});
