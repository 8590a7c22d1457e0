//! One pass of the post-call git guard over a tree, timed: what a background job pays every
//! `jobs::checks::EVERY`, and how late after a write the pass that judges it can come.
//!
//! Usage: `cargo run --release -p efr-call --example guard-pass -- ROOT [ROUNDS]`
//! (ROUNDS defaults to 20). The pass is run as a job's checks run it: over ROOT as the
//! project root, with the default config, everything before now counted as the user's
//! (nothing is quarantined in a tree the call did not change). Prints the median and the
//! slowest pass in milliseconds, as one line.

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(root) = args.next().map(PathBuf::from) else {
        eprintln!("usage: guard-pass ROOT [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(20);
    let config = efr_policy::config::Config::defaults();
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let mut ms = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let out = efr_call::git_guard::after_call(std::slice::from_ref(&root), &[], since, &config);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if !out.is_empty() {
            eprintln!("guard-pass: {out:?}");
        }
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "{}: median {:.2} ms, slowest {:.2} ms over {} passes",
        root.display(),
        ms[ms.len() / 2],
        ms[ms.len() - 1],
        ms.len()
    );
}
