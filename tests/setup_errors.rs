//! A backend that is not there is a setup error: one status line, exit status 125, and
//! the command never ran.

mod common;

use common::Fixture;
use efr_launcher::api::BackendChoice;

#[test]
fn a_missing_backend_is_a_setup_error_and_nothing_runs() {
    let fx = Fixture::new();
    let base = fx.dir.path().canonicalize().unwrap();
    let marker = format!("{}/ran", fx.proj);
    let mut plan = fx.plan(&format!("touch {marker}"), BackendChoice::Bwrap, Vec::new());
    // bubblewrap "installed" at a path where there is none.
    plan.test_weaken = vec![format!("bwrap={}/no-such-bwrap", base.display())];
    let out = common::run_weakened(&plan, &base, &["--status-fd", "1"]);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let msg = lines[0]["setup_error"]["message"]
        .as_str()
        .or_else(|| lines[0]["message"].as_str())
        .unwrap_or_default();
    assert!(
        msg.contains("backend bwrap unavailable") && msg.contains("no-such-bwrap"),
        "{stdout}"
    );
    assert!(!std::path::Path::new(&marker).exists(), "the command ran");
}

/// A setup step that fails inside the call's namespaces (here a cache layer whose upper and
/// work directories are on two file systems, which overlayfs refuses) is a setup error that
/// names the operation and the path, on both backends; the command never ran.
#[test]
fn a_failed_mount_names_the_operation_and_the_path() {
    for b in common::backends() {
        let fx = Fixture::new();
        let base = fx.dir.path().canonicalize().unwrap();
        let cache = base.join("cache");
        let upper = base.join("upper");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::create_dir_all(&upper).unwrap();
        // The work dir on another file system than the upper dir.
        let other = tempfile::tempdir_in("/dev/shm").unwrap();
        let work = other.path().canonicalize().unwrap();
        let marker = format!("{}/ran", fx.proj);
        let mut plan = fx.plan(&format!("touch {marker}"), b, Vec::new());
        plan.caches = vec![efr_launcher::plan::CacheLayer {
            path: cache.display().to_string(),
            upper: upper.display().to_string(),
            work: work.display().to_string(),
            conversation: None,
        }];
        let ran = common::run_plan(&plan, None);
        let msg = ran.outcome.setup_error.clone().unwrap_or_default();
        assert_eq!(ran.status.code(), Some(125), "{b:?}: {ran:?}");
        assert!(
            msg.contains("mount overlay") && msg.contains(&cache.display().to_string()),
            "{b:?}: the setup error names neither the operation nor the path: {msg:?}"
        );
        assert!(
            !std::path::Path::new(&marker).exists(),
            "{b:?}: the command ran"
        );
    }
}

/// The init does not wait for the proxy's answer before the line starts (the sockets are
/// bound and listening already), but a proxy that refuses them (here one that closes the
/// connection unanswered) still ends the call with a setup error that says so, on both
/// backends: the line is killed, long before it would have ended.
#[test]
fn a_proxy_that_refuses_the_sockets_ends_the_call() {
    for b in common::backends() {
        let fx = Fixture::new();
        let sock = fx.dir.path().join("proxy.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let refuser = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut buf = [0u8; 64];
            let _ = std::io::Read::read(&mut c, &mut buf);
            // Closed unanswered, the sockets unread.
        });
        let marker = format!("{}/ran", fx.proj);
        let mut plan = fx.plan(&format!("sleep 20; touch {marker}"), b, Vec::new());
        plan.proxy = Some(efr_sandbox_wire::plan::ProxyPlan {
            socket: sock.to_string_lossy().into_owned(),
            relay_port: 3128,
            ports: Vec::new(),
        });
        let t = std::time::Instant::now();
        let r = common::run_plan(&plan, None);
        refuser.join().unwrap();
        let err = r.outcome.setup_error.clone().unwrap_or_default();
        assert!(
            err.contains("the call's proxy did not take its sockets"),
            "[{b:?}] {r:?}"
        );
        assert!(
            t.elapsed() < std::time::Duration::from_secs(15),
            "[{b:?}] {r:?}"
        );
        assert!(
            !std::path::Path::new(&marker).exists(),
            "[{b:?}] the line ran on"
        );
    }
}
