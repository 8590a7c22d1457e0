//! Run outside any sandbox, every self-test of the probe must fail: no check passes by
//! construction. (Restrictions are applied in a child, never here: this process has none.)

use std::net::TcpListener;
use std::process::Command;

use efr_probe::inside::{InsideArgs, InsideReport};

const PROBE: &str = env!("CARGO_BIN_EXE_efr-probe");

fn probe(args: &InsideArgs, env: &[(&str, &str)]) -> InsideReport {
    let o = Command::new(PROBE)
        .args(args.to_args())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn every_test_fails_outside_a_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_str().unwrap().to_string();
    let masked = format!("{p}/masked");
    let hooks = format!("{p}/.git/hooks");
    std::fs::create_dir_all(&masked).unwrap();
    std::fs::write(format!("{masked}/secret"), "x").unwrap();
    std::fs::create_dir_all(&hooks).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let args = InsideArgs {
        port: Some(l.local_addr().unwrap().port()),
        project: Some(p.clone()),
        masked: Some(masked),
        hooks: Some(hooks.clone()),
        canary: Some("EFR_PROBE_TEST_CANARY_TOKEN".into()),
        netview: false,
    };
    let r = probe(&args, &[("EFR_PROBE_TEST_CANARY_TOKEN", "x")]);
    let names: Vec<&str> = r.tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        efr_probe::check::REQUIRED,
        "the probe runs every required test"
    );
    for t in &r.tests {
        assert!(!t.pass, "{} passed outside a sandbox: {}", t.name, t.detail);
        assert!(!t.detail.is_empty());
    }
    let d = |n: &str| r.get(n).unwrap().detail.clone();
    assert!(
        d("netns").contains("shares the host's network"),
        "{}",
        d("netns")
    );
    assert!(
        d("env").contains("EFR_PROBE_TEST_CANARY_TOKEN"),
        "{}",
        d("env")
    );
    assert!(
        d("mounts").contains("root is writable") || d("mounts").contains("not mounted read-only"),
        "{}",
        d("mounts")
    );
    assert!(
        d("masks").contains("masks are not mounted"),
        "{}",
        d("masks")
    );
    // Nothing was left behind.
    assert_eq!(std::fs::read_dir(&hooks).unwrap().count(), 0);

    let nv = probe(
        &InsideArgs {
            netview: true,
            ..Default::default()
        },
        &[],
    );
    let t = nv.get("netview").unwrap();
    assert!(
        !t.pass && t.detail.contains("socket(AF_INET) worked"),
        "{t:?}"
    );
}

#[test]
fn bad_arguments_are_refused() {
    let o = Command::new(PROBE)
        .args(["inside", "--bogus", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = Command::new(PROBE).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}
