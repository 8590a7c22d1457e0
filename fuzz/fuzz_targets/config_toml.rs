//! Feeds arbitrary text to the config loader as the user's `config.toml`
//! (`efr_policy::config::Config::from_toml_str`), the `[jobs]` section among the rest. It
//! may not panic: a bad file is an error that names the key and the line, and a file that
//! loads keeps the jobs' minutes range ordered.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("/fuzz/config.toml");
    if let Ok(c) = efr_policy::config::Config::from_toml_str(text, path) {
        assert!(c.jobs.min_minutes.value <= c.jobs.max_minutes.value);
        let _ = c.render_text();
    }
});
