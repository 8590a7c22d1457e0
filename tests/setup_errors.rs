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
