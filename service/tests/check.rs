//! `efr-sandbox check` and `admin.sandbox_check`: the probe passes on a working machine, and
//! each layer broken on purpose (the launcher's test knob) makes the matching check fail
//! with the right detail.

mod common;

use std::path::Path;
use std::process::Output;

use common::{Server, command, temp_env};
use serde_json::{Value, json};

const WEAKEN_ENV: &str = "EFR_LAUNCH_ALLOW_TEST_WEAKEN";

fn must_work() -> bool {
    std::env::var_os("EFR_SANDBOX_MUST_WORK").is_some()
}

fn check(dir: &Path, args: &[&str], weaken_env: bool) -> (Value, Output) {
    let mut c = command(dir);
    c.arg("check").arg("--json").args(args);
    if weaken_env {
        c.env(WEAKEN_ENV, "1");
    }
    let o = c.output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not json ({e}): {} / {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (v, o)
}

fn test<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no test {name}: {v}"))
}

/// Whether the sandbox works here; panics under EFR_SANDBOX_MUST_WORK when it does not.
fn available(dir: &Path) -> bool {
    let (v, _) = check(dir, &[], false);
    let ok = v["status"]["available"] == json!(true);
    assert!(
        ok || !must_work(),
        "EFR_SANDBOX_MUST_WORK is set and the check fails: {v:#}"
    );
    ok
}

fn bwrap_installed() -> bool {
    let ok = Path::new(efr_launcher::backend::bwrap::BWRAP).exists();
    assert!(
        ok || !must_work(),
        "EFR_SANDBOX_MUST_WORK is set and bwrap is missing"
    );
    ok
}

#[test]
fn check_passes_and_reports_every_layer() {
    let dir = temp_env();
    let (v, o) = check(dir.path(), &[], false);
    if v["status"]["available"] != json!(true) {
        assert!(!must_work(), "the check fails: {v:#}");
        assert_eq!(o.status.code(), Some(1));
        assert!(v["status"]["unavailable"].as_str().is_some(), "{v:#}");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{v:#}");
    for name in efr_probe::check::REQUIRED {
        let t = test(&v, name.as_str());
        assert_eq!(t["outcome"], "pass", "{t}");
        assert_eq!(t["required"], true, "{t}");
        assert!(!t["detail"].as_str().unwrap().is_empty());
    }
    let st = &v["status"];
    assert_eq!(st["seccomp"], true);
    assert!(st["landlock_abi"].as_u64().unwrap() >= 1, "{st}");
    assert_eq!(st["netview"], true, "{v:#}");
    // The proxy: reached the loopback test host from inside a call, refused another name.
    let px = test(&v, "proxy");
    assert_eq!(px["outcome"], "pass", "{px}");
    assert_ne!(px["required"], true, "{px}");
    let d = px["detail"].as_str().unwrap();
    for want in [
        "CONNECT efr-check.test:",
        " 200, a ClientHello with SNI efr-check.test reached the loopback test host",
        "CONNECT efr-check-denied.invalid:",
        "403 not_allowed",
    ] {
        assert!(d.contains(want), "{d:?} lacks {want:?}");
    }
    assert_eq!(st["proxy"], true, "{st}");
    // The bus filter's self-test: a private dbus-daemon, a filtered call to it (not
    // required: without xdg-dbus-proxy it is skipped, and CI installs it).
    let bus = test(&v, "bus_proxy");
    assert_ne!(bus["required"], true, "{bus}");
    if bus_tools() {
        assert_eq!(bus["outcome"], "pass", "{bus}");
        assert_eq!(st["bus_proxy"], true, "{st}");
        assert_eq!(st.get("bus_proxy_off"), None, "{st}");
        let d = bus["detail"].as_str().unwrap();
        assert!(d.contains("BecomeMonitor were refused and logged"), "{d}");
    } else {
        assert!(
            !must_work(),
            "xdg-dbus-proxy, dbus-daemon and dbus-send are needed"
        );
        assert_eq!(st.get("bus_proxy"), None);
        assert!(st["bus_proxy_off"].is_string());
    }
    if common::is_root() {
        assert_eq!(st["fallback"], json!({"asked": "full", "reason": "root"}));
        assert_eq!(test(&v, "user")["outcome"], "fail");
    } else {
        assert_eq!(st.get("fallback"), None);
    }
    // The text form: one line per test and a verdict.
    let o = command(dir.path()).arg("check").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("sandbox available: backend"), "{text}");
    // A failed test that is not required is named, and the exit status stays 0.
    if bus["outcome"] == "fail" {
        assert!(
            text.contains("not required, failed (the verdict does not count them): ")
                && text.contains("bus_proxy"),
            "{text}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("pass") && l.contains("seccomp")),
        "{text}"
    );
}

fn bus_tools() -> bool {
    ["xdg-dbus-proxy", "dbus-daemon", "dbus-send"]
        .iter()
        .all(|t| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// A bus filter that filters nothing (xdg-dbus-proxy without `--filter`) fails the
/// self-test: the refused name and BecomeMonitor get through.
#[test]
fn an_unfiltered_bus_proxy_fails_the_bus_check() {
    let dir = temp_env();
    if !bus_tools() {
        assert!(
            !must_work(),
            "xdg-dbus-proxy, dbus-daemon and dbus-send are needed"
        );
        return;
    }
    if !available(dir.path()) {
        return;
    }
    let fake = dir.path().join("unfiltered-proxy");
    std::fs::write(
        &fake,
        "#!/bin/sh\nfor a in \"$@\"; do shift; [ \"$a\" = --filter ] || set -- \"$@\" \"$a\"; done\n\
         exec xdg-dbus-proxy \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = command(dir.path())
        .env("EFR_XDG_DBUS_PROXY", &fake)
        .args(["check", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let bus = test(&v, "bus_proxy");
    assert_eq!(bus["outcome"], "fail", "{bus}");
    assert!(
        bus["detail"]
            .as_str()
            .unwrap()
            .contains("was not refused and logged"),
        "{bus}"
    );
    assert_eq!(v["status"]["bus_proxy_off"], "self_test", "{v:#}");
    assert_eq!(v["status"].get("bus_proxy"), None);
    // Not required: the verdict stands.
    assert_eq!(o.status.code(), Some(0), "{v:#}");
}

#[test]
fn bus_filter_off_or_warned_in_the_config() {
    let dir = temp_env();
    if !bus_tools() || !available(dir.path()) {
        return;
    }
    let cfg = dir.path().join("config/efr");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[bus]\nfilter = false\n").unwrap();
    let (v, _) = check(dir.path(), &[], false);
    assert_eq!(test(&v, "bus_proxy")["outcome"], "skip");
    assert_eq!(v["status"]["bus_proxy_off"], "config");
    std::fs::write(
        cfg.join("config.toml"),
        "[bus]\ntalk = [\"org.freedesktop.secrets\"]\n",
    )
    .unwrap();
    let (v, _) = check(dir.path(), &[], false);
    let bus = test(&v, "bus_proxy");
    assert_eq!(bus["outcome"], "pass", "{bus}");
    assert!(
        bus["detail"].as_str().unwrap().contains(
            "warning: bus rule talk org.freedesktop.secrets is left out of the bus filter: \
             the secret service hands out every stored password"
        ),
        "{bus}"
    );
}

fn broken(args: &[&str], failing: &str, detail: &str, required: bool) {
    let dir = temp_env();
    if !available(dir.path()) {
        return;
    }
    let (v, o) = check(dir.path(), args, true);
    let t = test(&v, failing);
    assert_eq!(t["outcome"], "fail", "{args:?}: {v:#}");
    let d = t["detail"].as_str().unwrap();
    assert!(
        d.contains(detail),
        "{args:?}: detail {d:?} lacks {detail:?}"
    );
    if required {
        assert_eq!(o.status.code(), Some(1), "{v:#}");
        assert_eq!(v["status"]["available"], false);
        assert!(
            v["status"]["unavailable"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{failing}:")),
            "{v:#}"
        );
        assert_eq!(v["status"]["fallback"]["asked"], "auto", "{v:#}");
        assert_eq!(v["status"]["fallback"]["reason"], "sandbox_unavailable");
    } else {
        assert_eq!(o.status.code(), Some(0), "{v:#}");
    }
}

#[test]
fn a_plan_without_landlock_fails_the_landlock_check() {
    broken(
        &["--test-weaken", "no_landlock"],
        "landlock",
        "applied no Landlock",
        true,
    );
}

#[test]
fn a_seccomp_program_missing_an_entry_fails_the_seccomp_check() {
    broken(
        &["--test-weaken", "seccomp_drop=keyctl"],
        "seccomp",
        "lacks its `keyctl` entry",
        true,
    );
    broken(
        &["--test-weaken", "seccomp_drop=unshare"],
        "seccomp",
        "lacks its `unshare` entry",
        true,
    );
    broken(
        &["--test-weaken", "seccomp_drop=clone3"],
        "seccomp",
        "clone3(NULL, 0) gave EINVAL instead of ENOSYS",
        true,
    );
}

#[test]
fn missing_masks_fail_the_masks_check() {
    broken(
        &["--test-weaken", "no_masks"],
        "masks",
        "masks are not mounted",
        true,
    );
}

#[test]
fn a_net_view_that_allows_inet_fails_the_netview_check() {
    broken(
        &["--test-weaken", "seccomp_drop=socket"],
        "netview",
        "socket(AF_INET) worked",
        false,
    );
}

#[test]
fn a_proxy_that_is_down_fails_the_proxy_check() {
    broken(
        &["--test-weaken", "proxy_down"],
        "proxy",
        "the sandbox did not start: the call's proxy did not take its sockets: connect \
         /dev/efr/proxy.sock:",
        false,
    );
    let dir = temp_env();
    if !available(dir.path()) {
        return;
    }
    let (v, o) = check(dir.path(), &["--test-weaken", "proxy_down"], true);
    assert_eq!(o.status.code(), Some(0), "not required: {v:#}");
    assert_eq!(v["status"].get("proxy"), None, "{v:#}");
    assert_eq!(v["status"]["available"], true, "{v:#}");
}

#[test]
fn a_proxy_that_lets_every_name_through_fails_the_proxy_check() {
    broken(
        &["--test-weaken", "proxy_open"],
        "proxy",
        "the proxy let CONNECT efr-check-denied.invalid:",
        false,
    );
}

#[test]
fn the_proxy_knobs_need_the_variable_too() {
    let dir = temp_env();
    if !available(dir.path()) {
        return;
    }
    let (v, _) = check(dir.path(), &["--test-weaken", "proxy_open"], false);
    let t = test(&v, "proxy");
    assert_eq!(t["outcome"], "fail", "{t}");
    assert!(t["detail"].as_str().unwrap().contains(WEAKEN_ENV), "{t}");
}

#[test]
fn a_backend_forced_to_fail_fails_its_check() {
    if !bwrap_installed() {
        return;
    }
    broken(
        &["--backend", "bwrap", "--test-weaken", "bwrap=/bin/false"],
        "backend_bwrap",
        "the sandbox did not start",
        true,
    );
    // The other backend, not in force, fails without making the sandbox unavailable.
    broken(
        &["--backend", "native", "--test-weaken", "bwrap=/bin/false"],
        "backend_bwrap",
        "the sandbox did not start",
        false,
    );
}

#[test]
fn the_test_knob_needs_its_variable() {
    let dir = temp_env();
    if !available(dir.path()) {
        return;
    }
    let (v, o) = check(dir.path(), &["--test-weaken", "no_landlock"], false);
    assert_eq!(o.status.code(), Some(1));
    let d = test(&v, "landlock")["detail"].as_str().unwrap().to_string();
    assert!(d.contains(WEAKEN_ENV), "{d}");
}

#[test]
fn netview_off_in_the_config_skips_the_netview_check() {
    let dir = temp_env();
    if !available(dir.path()) {
        return;
    }
    let cfg = dir.path().join("config/efr");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[network]\nnetview = false\n").unwrap();
    let (v, o) = check(dir.path(), &[], false);
    assert_eq!(o.status.code(), Some(0), "{v:#}");
    assert_eq!(test(&v, "netview")["outcome"], "skip");
    assert_eq!(v["status"]["netview_off"], true);
    assert_eq!(v["status"].get("netview"), None);
}

#[test]
fn admin_sandbox_check_updates_the_status() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let r = c.call(1, "admin.sandbox_check", Value::Null);
    let chk = &r["end"];
    assert!(chk["tests"].as_array().unwrap().len() >= 12, "{r}");
    assert!(chk["ms"].is_u64());
    assert!(!must_work() || chk["status"]["available"] == true, "{r}");
    // The service's own runtime serves the proxy of the check's call.
    assert!(!must_work() || chk["status"]["proxy"] == true, "{r}");
    let st = c.call(2, "sandbox.status", Value::Null);
    assert_eq!(st["end"]["status"], chk["status"]);
    let r2 = c.call(3, "admin.sandbox_check", Value::Null);
    let st2 = c.call(4, "sandbox.status", Value::Null);
    assert_eq!(st2["end"]["status"], r2["end"]["status"]);
    let bad = c.call(5, "admin.sandbox_check", json!([1]));
    assert_eq!(common::code(&bad), "invalid", "{bad}");
}
