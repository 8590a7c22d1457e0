//! Feeds arbitrary bytes, as one report line, to the decoder of the init's report to the
//! launcher (`efr_launcher::child::report`). It may not panic; whatever decodes encodes to a line
//! without a newline that decodes to the same report (when it is not longer than a
//! line may be: a `ready` line without the optional fields grows by them).

#![no_main]

use efr_launcher::child::report::Report;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    if let Ok(r) = Report::decode(&line) {
        let again = r.encode();
        assert!(!again.contains('\n'));
        if again.len() <= efr_launcher::child::report::MAX_LINE {
            assert_eq!(Report::decode(&again), Ok(r));
        }
    }
});
