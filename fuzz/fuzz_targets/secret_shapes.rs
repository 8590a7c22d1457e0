//! Feeds arbitrary text to the one secret detector (`efr_policy::secrets`): its verified
//! matches in a file's text, the hosts of a variable's value, and the shapes file parser.
//! None may panic; every hit lies inside the text at a char boundary and is verified by its
//! shape; the hosts are lower case; and each shipped shape's own matcher (the environment
//! filter's, possessive) finds a match exactly where the regex made from it (the surface's
//! prefilter) does.

#![no_main]

use std::sync::OnceLock;

use efr_policy::secrets::Shapes;
use libfuzzer_sys::fuzz_target;
use regex::Regex;

fn regexes() -> &'static Vec<Regex> {
    static R: OnceLock<Vec<Regex>> = OnceLock::new();
    R.get_or_init(|| {
        Shapes::shipped()
            .all()
            .iter()
            .map(|s| Regex::new(&s.compiled.to_regex()).expect("a shape's regex compiles"))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let shapes = Shapes::shipped();
    for h in shapes.find(text, None) {
        assert!(h.at.end <= text.len() && text.is_char_boundary(h.at.start));
        assert!(text.is_char_boundary(h.at.end));
        let shape = &shapes.all()[h.shape];
        assert!(shape.verified(text, h.at.clone()));
        assert!(h.hosts.iter().all(|x| *x == x.to_ascii_lowercase()), "{:?}", h.hosts);
    }
    let hosts = shapes.value_hosts(text);
    assert!(hosts.windows(2).all(|w| w[0] < w[1]), "{hosts:?}");
    for (shape, re) in shapes.all().iter().zip(regexes()) {
        assert_eq!(
            shape.compiled.found_in(text),
            re.is_match(text),
            "{} on {text:?}",
            shape.name
        );
    }
    let _ = Shapes::parse(text).map_err(|e| e.to_string());
});
