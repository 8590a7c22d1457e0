//! The supervisor's rules on arbitrary name patterns and arbitrary path bytes (what a
//! contained call names): they never panic; a path outside the writable roots is never
//! refused; a path refused as protected stays refused with `.lock` added (git's lock files).

#![no_main]

use efr_launcher::supervise::rules::{Act, Fs, Refusal, Rules};
use libfuzzer_sys::fuzz_target;

struct NoRepos;
impl Fs for NoRepos {
    fn has_git(&self, _: &[u8]) -> bool {
        false
    }
    fn made_by_call(&self, _: &[u8]) -> bool {
        false
    }
}

fuzz_target!(|data: &[u8]| {
    // Patterns up to the first NUL (one per line), then the path.
    let (pats, path) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => return,
    };
    let names: Vec<String> = String::from_utf8_lossy(pats)
        .lines()
        .map(str::to_string)
        .collect();
    let Ok(rules) = Rules::new(&["/p".into()], &["/p/abs".into()], &names) else {
        return;
    };
    let mut p = b"/p/".to_vec();
    p.extend_from_slice(path);
    for act in [Act::Write, Act::Create, Act::Mkdir, Act::Remove] {
        let refused = matches!(rules.check(&p, act, &NoRepos), Err(Refusal::Protected(_)));
        let mut outside = b"/q/".to_vec();
        outside.extend_from_slice(path);
        assert!(rules.check(&outside, act, &NoRepos).is_ok());
        if refused && act == Act::Write && !p.ends_with(b"/") {
            let mut lock = p.clone();
            lock.extend_from_slice(b".lock");
            assert!(rules.check(&lock, act, &NoRepos).is_err(), "{p:?}");
        }
    }
});
