//! What the surface adds to a contained call's launch: one read of the state file for the
//! answered masks (call/src/launch.rs) and [`efr_surface::state::for_calls`] for the
//! proxy's denied hosts (call/src/egress.rs), with `N` watched files (default 50) of which
//! none changed, then with all changed since the scan (each read again).
//! `cargo run --release -p efr-surface --example bench_calls [N] [ROUNDS]`.

use std::time::Instant;

use efr_surface::questions::record_scan;
use efr_surface::state::{Store, for_calls};
use efr_surface::{Class, Finding};

fn main() {
    let mut a = std::env::args().skip(1);
    let n: usize = a.next().map(|s| s.parse().unwrap()).unwrap_or(50);
    let rounds: usize = a.next().map(|s| s.parse().unwrap()).unwrap_or(2000);
    let t = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(t.path()).unwrap();
    let mut findings = Vec::new();
    for i in 0..n {
        let p = home.join(format!("p{i}/.env"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("A=1\nHF=hf_{:0>34}\n", i)).unwrap();
        findings.push(Finding {
            path: p,
            class: Class::Env,
            pattern: "glob:.env*".into(),
            host: Some("huggingface.co".into()),
            hosts: vec!["huggingface.co".into()],
        });
    }
    let store = Store::new(home.join(".local/state/efr"));
    let roots = [home.clone()];
    store
        .update(|st| {
            record_scan(st, "c", &roots, &findings, true);
            for i in 0..10 {
                st.answers.insert(
                    format!("/masked/{i}"),
                    efr_surface::state::Answer {
                        keep: false,
                        class: Class::Token,
                        hosts: Vec::new(),
                        conversation: "c".into(),
                        question_id: format!("q{}", i + 1),
                        at: 0,
                    },
                );
            }
        })
        .unwrap();
    let per = |label: &str| {
        let _ = for_calls(&store).unwrap();
        let mut v = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            let masks = efr_surface::state::read_for_calls(&store).unwrap().masks();
            let f = for_calls(&store).unwrap();
            v.push(t.elapsed());
            assert_eq!(masks.len(), 10);
            assert_eq!(f.token_hosts.contains("huggingface.co"), n > 0);
        }
        v.sort();
        println!(
            "{label}: {n} watched files, median {:?}, p90 {:?} per launch",
            v[v.len() / 2],
            v[v.len() * 9 / 10]
        );
    };
    per("unchanged");
    for f in &findings {
        std::fs::write(&f.path, "A=2\nHF=hf_0123456789012345678901234567890123\n").unwrap();
    }
    per("all changed");
}
