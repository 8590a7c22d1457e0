//! The GIT_CONFIG_* set rule on any environment (lines `NAME=VALUE`): it never panics,
//! every variable of the set is either passed or dropped with a reason (no other name is
//! touched), and what passes is a whole set git reads as the agent wrote it: the count, a
//! key and a value for every index below it, each key one git parses and either on the safe
//! list or turned off by its value, and no value the secret check flags.

#![no_main]

use efr_sandbox_wire::envfilter::DropReason;
use efr_sandbox_wire::gitconfig::key_is_safe;
use efr_sandbox_wire::gitenv::{
    COUNT, KEY_PREFIX, VALUE_PREFIX, canonical_key, is_member, judge, turns_off,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut env: Vec<(&str, &str)> = Vec::new();
    for line in text.lines() {
        let (n, v) = line.split_once('=').unwrap_or((line, ""));
        if !env.iter().any(|(m, _)| *m == n) {
            env.push((n, v));
        }
    }
    let safe = vec!["user.name".to_string(), "remote.*.url".to_string()];
    let secret = |v: &str| v.contains("SECRET").then_some(DropReason::Pattern(0));
    let j = judge(env.iter().copied(), &safe, secret, None);
    let members: Vec<&str> = env.iter().map(|(n, _)| *n).filter(|n| is_member(n)).collect();
    assert_eq!(j.pass.len() + j.dropped.len(), members.len());
    for m in &members {
        let passed = j.pass.iter().any(|p| p == m);
        let dropped = j.dropped.iter().any(|(d, _)| d == m);
        assert!(passed != dropped, "{m}: {j:?}");
    }
    let get = |n: &str| env.iter().find(|(m, _)| *m == n).map(|(_, v)| *v);
    if !j.pass.is_empty() {
        let count: u64 = get(COUNT).and_then(|c| c.parse().ok()).expect("a count");
        assert!(j.pass.iter().any(|p| p == COUNT));
        for i in 0..count {
            let key = get(&format!("{KEY_PREFIX}{i}")).expect("every key");
            let value = get(&format!("{VALUE_PREFIX}{i}")).expect("every value");
            assert!(!key.contains("SECRET") && !value.contains("SECRET"));
            let canon = canonical_key(key).expect("a key git parses");
            assert!(key_is_safe(&safe, &canon, value.as_bytes()) || turns_off(&canon, value));
        }
    }
    for (n, _) in &env {
        if let Some(c) = canonical_key(n) {
            assert_eq!(c.len(), n.len());
            assert_eq!(canonical_key(&c).as_deref(), Some(c.as_str()));
        }
    }
});
