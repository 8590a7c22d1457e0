//! Feeds arbitrary text to the config loader with a `[[credential]]` head, so that most
//! inputs reach the credential entries' reader (`config/parse.rs`'s `credential` and
//! `RawCredential::validate`). It may not panic; a file that loads holds only valid
//! credentials: a name of the grant's form, bound hosts, and a user entry's source file
//! among the masks.

#![no_main]

use efr_policy::credential::{Source, is_credential_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    let text = format!("[[credential]]\n{body}");
    let path = std::path::Path::new("/fuzz/config.toml");
    let Ok(c) = efr_policy::config::Config::from_toml_str(&text, path) else {
        return;
    };
    for cred in c.credentials() {
        assert!(is_credential_name(&cred.name), "{:?}", cred.name);
        assert!(!cred.hosts.is_empty(), "{}", cred.name);
        assert!(cred.hosts.iter().all(|h| h.port != 0), "{}", cred.name);
        if let Source::Command { argv, .. } = &cred.source {
            assert!(!argv.is_empty());
        }
        if cred.reason.is_none() {
            if let Source::File { path, .. } = &cred.source {
                let p = path.to_string_lossy();
                assert!(c.sandbox.masks.iter().any(|m| m.value == p), "{p}");
            }
        }
    }
    let _ = c.render_text();
});
