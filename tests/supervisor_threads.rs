//! How many threads the write supervisor serves a call with: one while the line makes its
//! supervised calls one after another (every waiting thread is woken by each notification,
//! so a thread more costs a wake-up per call), more once calls come at once from several
//! processes, and fewer again when they stop coming at once. The line counts the init's supervising threads itself, by their names in
//! `/proc/*/task/*/comm`.

mod common;

use common::Fixture;

/// A shell snippet that prints `threads N`: the supervising threads of the call's init.
const COUNT: &str = "n=0; for c in /proc/[0-9]*/task/[0-9]*/comm; do \
     [ \"$(cat \"$c\" 2>/dev/null)\" = efr-supervise ] && n=$((n+1)); done; echo threads $n";

fn threads(out: &str) -> Vec<usize> {
    out.lines()
        .filter_map(|l| l.strip_prefix("threads "))
        .map(|n| n.trim().parse().unwrap())
        .collect()
}

#[test]
fn one_thread_for_calls_one_after_another_more_for_calls_at_once() {
    let py = common::python();
    for b in common::backends() {
        let fx = Fixture::new();
        std::fs::write(
            format!("{}/ops.py", fx.proj),
            "import os, sys\n\
             tag = sys.argv[1]\n\
             for i in range(int(sys.argv[2])):\n\
             \x20   p = 'f-%s-%d' % (tag, i % 20)\n\
             \x20   os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))\n\
             \x20   os.chmod(p, 0o600)\n",
        )
        .unwrap();
        // One after another, then eight writers at once, then one after another again.
        let line = format!(
            "{py} ops.py a 400; {COUNT}; \
             for w in 1 2 3 4 5 6 7 8; do {py} ops.py w$w 400 & done; wait; {COUNT}; \
             {py} ops.py b 400; {COUNT}"
        );
        let ran = common::run(&fx, &line, b);
        assert!(ran.status.success(), "{b:?}: {}", ran.all_output());
        let t = threads(&ran.stdout);
        assert_eq!(t.len(), 3, "{b:?}: {}", ran.all_output());
        assert_eq!(t[0], 1, "{b:?}: sequential calls took {} threads", t[0]);
        assert!(
            t[1] > 1,
            "{b:?}: eight writers at once were served by one thread"
        );
        // The threads the writers needed end once the calls come one at a time again.
        assert!(
            t[2] <= 2,
            "{b:?}: {} threads stayed after the writers were done (of {})",
            t[2],
            t[1]
        );
    }
}
