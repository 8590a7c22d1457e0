//! Launches while the host changes under them: a host socket that vanishes between the
//! moment the launcher computes the view (which hides every host socket) and the moment the
//! backend mounts it must not make the call fail. (bubblewrap cannot cover a path that is
//! gone on its read-only root; the launcher tries again with a fresh view.)

mod common;

use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Fixture, backends, run};

#[test]
fn sockets_that_come_and_go_do_not_fail_a_launch() {
    let fx = Fixture::new();
    // Outside every writable root and mask, so the launcher hides each one it sees.
    let churn = tempfile::Builder::new()
        .prefix("efr-socket-churn-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let dir = churn.path().to_path_buf();
    let stop2 = stop.clone();
    // Like a host where other programs (or other test suites) come and go: a new socket
    // every 40 ms, each living for about half a second, about a dozen at a time.
    let churner = std::thread::spawn(move || {
        let mut live = std::collections::VecDeque::new();
        let mut n = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            let p = dir.join(format!("s{n}"));
            if let Ok(l) = UnixListener::bind(&p) {
                live.push_back((p, l));
            }
            if live.len() > 12 {
                if let Some((p, l)) = live.pop_front() {
                    drop(l);
                    let _ = std::fs::remove_file(p);
                }
            }
            n += 1;
            std::thread::sleep(std::time::Duration::from_millis(40));
        }
    });
    let mut failures = Vec::new();
    for backend in backends() {
        for i in 0..25 {
            let r = run(&fx, "echo launched", backend);
            if r.outcome.setup_error.is_some() || !r.stdout.contains("launched") {
                failures.push(format!(
                    "[{backend:?}] launch {i}: setup_error {:?}, stderr {}",
                    r.outcome.setup_error, r.stderr
                ));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    churner.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} launches failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
