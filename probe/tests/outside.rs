//! Run outside any sandbox, every self-test of the probe must fail: no check passes by
//! construction. (Restrictions are applied in a child, never here: this process has none.)

use efr_sandbox_wire::SelfTest;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;

use efr_probe::inside::{InsideArgs, InsideReport};

const PROBE: &str = env!("CARGO_BIN_EXE_efr-probe");

fn probe(args: &InsideArgs, env: &[(&str, &str)]) -> InsideReport {
    let o = Command::new(PROBE)
        .args(args.to_args())
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
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
        ..Default::default()
    };
    let r = probe(&args, &[("EFR_PROBE_TEST_CANARY_TOKEN", "x")]);
    let names: Vec<SelfTest> = r.tests.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        efr_probe::check::REQUIRED,
        "the probe runs every required test"
    );
    for t in &r.tests {
        assert!(!t.pass, "{} passed outside a sandbox: {}", t.name, t.detail);
        assert!(!t.detail.is_empty());
    }
    let d = |n: SelfTest| r.get(n).unwrap().detail.clone();
    assert!(
        d(SelfTest::Netns).contains("shares the host's network"),
        "{}",
        d(SelfTest::Netns)
    );
    assert!(
        d(SelfTest::Env).contains("EFR_PROBE_TEST_CANARY_TOKEN"),
        "{}",
        d(SelfTest::Env)
    );
    assert!(
        d(SelfTest::Mounts).contains("root is writable")
            || d(SelfTest::Mounts).contains("not mounted read-only"),
        "{}",
        d(SelfTest::Mounts)
    );
    assert!(
        d(SelfTest::Masks).contains("masks are not mounted"),
        "{}",
        d(SelfTest::Masks)
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
    let t = nv.get(SelfTest::Netview).unwrap();
    assert!(
        !t.pass && t.detail.contains("socket(AF_INET) worked"),
        "{t:?}"
    );
}

/// A fake proxy that lets every CONNECT through to `port` on loopback (a proxy that lets
/// everything through).
fn open_proxy(port: u16) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let me = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if c.read(&mut b).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                let up = TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .unwrap();
                let (mut r1, mut w1) = (c.try_clone().unwrap(), up.try_clone().unwrap());
                std::thread::spawn(move || std::io::copy(&mut r1, &mut w1));
                let (mut r2, mut w2) = (up, c);
                let _ = std::io::copy(&mut r2, &mut w2);
                let _ = w2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    me
}

#[test]
fn the_proxy_test_fails_without_a_proxy_and_with_an_open_one() {
    use efr_probe::testhost::{TestHost, hex, nonce};
    let n = nonce();
    let host = TestHost::start("efr-check.test", n).unwrap();
    let args = InsideArgs {
        proxy: Some(format!("efr-check.test:{}", host.port())),
        denied: Some(format!("efr-check-denied.invalid:{}", host.port())),
        nonce: Some(hex(&n)),
        ..Default::default()
    };
    // No proxy variables.
    let r = probe(&args, &[]);
    let t = r.get(SelfTest::Proxy).unwrap();
    assert!(!t.pass && t.detail.contains("no HTTPS_PROXY"), "{t:?}");
    // Nobody on the relay port.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let r = probe(&args, &[("HTTPS_PROXY", &dead_url)]);
    let t = r.get(SelfTest::Proxy).unwrap();
    assert!(
        !t.pass && t.detail.contains("the proxy did not answer"),
        "{t:?}"
    );
    // A proxy that lets every name through: (a) holds, (b) fails.
    let url = format!("http://127.0.0.1:{}", open_proxy(host.port()));
    let r = probe(&args, &[("HTTPS_PROXY", &url)]);
    let t = r.get(SelfTest::Proxy).unwrap();
    assert!(
        !t.pass
            && t.detail
                .contains("the proxy let CONNECT efr-check-denied.invalid:"),
        "{t:?}"
    );
    assert!(host.seen().iter().any(|s| s.nonce), "{:?}", host.seen());
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
