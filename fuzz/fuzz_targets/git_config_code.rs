#![no_main]
//! What the launch view reads from a git config never panics: the program paths of a key's
//! value (shell words, `!`, `~/`, relative to the work tree) and the target of an include,
//! for any key and value bytes; every path it gives is absolute and has no `..`.

use std::path::{Component, Path};

use efr_policy::config::git_config::include_target;
use efr_policy::git::programs::{PROGRAM_KEYS, program_paths};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, value)) = data.split_first() else {
        return;
    };
    let key = PROGRAM_KEYS[usize::from(k) % PROGRAM_KEYS.len()]
        .key
        .replace('*', "sub");
    let top = Path::new("/w/p");
    let home = Path::new("/h");
    let mut all = program_paths(&key, value, top, home);
    all.extend(include_target(value, &top.join(".git/config"), home));
    for p in all {
        assert!(p.is_absolute(), "{}", p.display());
        assert!(!p.components().any(|c| c == Component::ParentDir), "{}", p.display());
    }
});
