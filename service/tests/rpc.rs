//! The RPC end to end: the real `efr-sandbox serve` on a real socket in a temp dir.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Client, LIMIT, Server, code, command, is_root, message, temp_env};
use efr_sandbox_wire::frame;
use serde_json::{Value, json};

#[test]
fn hello_answers_protocol_and_methods() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    let r = c.call(1, "hello", json!({"protocol": 1, "client": "test 0.1"}));
    let end = &r["end"];
    assert_eq!(end["protocol"], json!(1), "{r}");
    assert_eq!(end["server"], json!("efr-sandbox"));
    assert!(end["version"].is_string());
    let methods: Vec<&str> = end["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    for m in ["hello", "sandbox.status", "sandbox.explain"] {
        assert!(methods.contains(&m), "{m} not in {methods:?}");
    }
    // A second hello on the same connection is a conflict.
    let r = c.call(2, "hello", json!({"protocol": 1}));
    assert_eq!(code(&r), "conflict", "{r}");
}

#[test]
fn test_methods_are_hidden_without_the_flag() {
    let dir = temp_env();
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = command(dir.path());
    cmd.arg("serve").arg("--socket").arg(&socket);
    let s = Server::spawn(cmd, dir, socket);
    let mut c = s.connect();
    let r = c.call(1, "hello", json!({"protocol": 1}));
    assert!(!r.to_string().contains("debug."), "{r}");
    let r = c.call(2, "debug.sleep", json!({"ms": 1}));
    assert_eq!(code(&r), "invalid");
    assert_eq!(message(&r), "unknown method debug.sleep");
}

#[test]
fn protocol_mismatch_fails_before_any_method() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    let r = c.call(1, "hello", json!({"protocol": 999}));
    assert_eq!(code(&r), "protocol_mismatch", "{r}");
    assert_eq!(r["error"]["data"], json!({"client": 999, "service": 1}));
    // Nothing runs until a good hello.
    let r = c.call(2, "sandbox.status", Value::Null);
    assert_eq!(code(&r), "unauthorized", "{r}");
    assert!(r.get("end").is_none());
    let r = c.call(3, "hello", json!({"protocol": 1}));
    assert!(r.get("end").is_some(), "{r}");
    let r = c.call(4, "sandbox.status", Value::Null);
    assert!(r.get("end").is_some(), "{r}");
}

#[test]
fn method_before_hello_is_unauthorized() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    for (id, m) in [
        (1, "sandbox.status"),
        (2, "sandbox.explain"),
        (3, "no.such.method"),
    ] {
        let r = c.call(id, m, json!({"path": "/"}));
        assert_eq!(code(&r), "unauthorized", "{r}");
        assert!(message(&r).contains("hello"), "{r}");
    }
}

#[test]
fn unknown_method_is_invalid() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let r = c.call(1, "sandbox.nope", json!({}));
    assert_eq!(code(&r), "invalid");
    assert_eq!(message(&r), "unknown method sandbox.nope");
}

#[test]
fn bad_params_are_invalid_with_the_reason() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    let r = c.call(1, "hello", json!({"protocol": "one"}));
    assert_eq!(code(&r), "invalid", "{r}");
    assert!(message(&r).contains("invalid type"), "{r}");
    let r = c.call(2, "hello", json!({}));
    assert!(message(&r).contains("missing field `protocol`"), "{r}");
    let r = c.call(3, "hello", json!({"protocol": 1}));
    assert!(r.get("end").is_some());
    let r = c.call(4, "sandbox.explain", json!({}));
    assert_eq!(code(&r), "invalid");
    assert!(message(&r).contains("missing field `path`"), "{r}");
    let r = c.call(5, "sandbox.explain", json!({"path": 5}));
    assert!(
        message(&r).contains("invalid type: integer `5`, expected a string"),
        "{r}"
    );
    let r = c.call(6, "sandbox.explain", json!({"path": ""}));
    assert_eq!(code(&r), "invalid", "{r}");
    assert!(message(&r).contains("empty path"), "{r}");
    let r = c.call(7, "sandbox.status", json!([1]));
    assert_eq!(code(&r), "invalid", "{r}");
    assert!(message(&r).contains("expected an object"), "{r}");
    // Members a reader does not know are ignored (additive changes).
    let r = c.call(9, "sandbox.explain", json!({"path": "/", "later": 1}));
    assert!(r.get("end").is_some(), "{r}");
    // The connection goes on.
    let r = c.call(8, "sandbox.status", json!({}));
    assert!(r.get("end").is_some(), "{r}");
}

#[test]
fn bad_frames_get_an_error_and_the_connection_goes_on() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    let cases: &[(&[u8], &str)] = &[
        (b"not json", "not json"),
        (b"[1, 2]", "not an object"),
        (b"\"hello\"", "not an object"),
        (
            b"{\"method\": \"hello\", \"params\": {\"protocol\": 1}}",
            "no id",
        ),
        (
            b"{\"id\": \"seven\", \"method\": \"hello\"}",
            "unsigned integer",
        ),
        (b"{\"id\": 1.5, \"method\": \"hello\"}", "unsigned integer"),
        (b"{\"cancel\": \"x\"}", "cancel"),
        (&[0xff, 0xfe], "not json"),
    ];
    for (body, what) in cases {
        c.send_body(body);
        let r = c.recv();
        assert_eq!(r["id"], Value::Null, "{r}");
        assert_eq!(code(&r), "invalid", "{r}");
        assert!(message(&r).contains(what), "{what}: {r}");
    }
    // An empty frame.
    c.send_raw(&[0, 0, 0, 0]);
    let r = c.recv();
    assert_eq!(r["id"], Value::Null);
    assert_eq!(code(&r), "invalid");
    // The id is carried when it can be read.
    c.send_body(b"{\"id\": 9}");
    let r = c.recv();
    assert_eq!(r["id"], json!(9));
    assert!(message(&r).contains("no method"), "{r}");
    c.send_body(b"{\"id\": 10, \"method\": 3}");
    let r = c.recv();
    assert_eq!(r["id"], json!(10));
    // Still good for a hello.
    let r = c.call(11, "hello", json!({"protocol": 1}));
    assert!(r.get("end").is_some(), "{r}");
}

#[test]
fn oversized_frame_is_refused_at_its_header_and_skipped() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let len = LIMIT + 1;
    c.send_raw(&(len as u32).to_be_bytes());
    // Refused from the header alone, before its body is sent.
    let r = c.recv();
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(code(&r), "invalid");
    assert!(message(&r).contains("over the limit"), "{r}");
    // The body is skipped as it arrives; the frame after it is read as usual.
    let body = vec![b'{'; len];
    c.send_raw(&body);
    let r = c.call(5, "sandbox.status", Value::Null);
    assert!(r.get("end").is_some(), "{r}");
    // A header of 4 GiB costs nothing either.
    c.send_raw(&u32::MAX.to_be_bytes());
    let r = c.recv();
    assert!(message(&r).contains("over the limit"), "{r}");
}

#[test]
fn frame_of_exactly_16_mib_is_accepted() {
    let s = Server::start(&[]);
    let mut c = s.connect();
    let mut body = br#"{"id":7,"method":"hello","params":{"protocol":1,"client":"big"}}"#.to_vec();
    body.resize(LIMIT, b' ');
    assert_eq!(body.len(), 16 * 1024 * 1024);
    c.send_body(&body);
    let r = c.recv();
    assert_eq!(r["id"], json!(7), "{r}");
    assert!(r.get("end").is_some(), "{r}");
    // Exactly 16 MiB of params that are wrong: an error about the params, not the frame.
    let mut body = br#"{"id":8,"method":"sandbox.status","params":""#.to_vec();
    let tail = br#""}"#;
    body.resize(LIMIT - tail.len(), b'a');
    body.extend_from_slice(tail);
    assert_eq!(body.len(), LIMIT);
    c.send_body(&body);
    let r = c.recv();
    assert_eq!(r["id"], json!(8), "{r}");
    assert_eq!(code(&r), "invalid");
    assert!(
        message(&r).contains("invalid params"),
        "{}",
        &message(&r)[..100.min(message(&r).len())]
    );
}

#[test]
fn truncated_stream_ends_the_connection_cleanly() {
    let s = Server::start(&[]);
    for partial in [&[0u8, 0][..], &[0, 0, 0, 100, b'{', b'"'][..]] {
        let mut c = s.client();
        c.send_raw(partial);
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        let r = c.recv();
        assert_eq!(r["id"], Value::Null, "{r}");
        assert!(message(&r).contains("ended inside a frame"), "{r}");
        assert!(c.try_recv().is_none(), "the connection should end");
    }
    // The service goes on.
    let mut c = s.client();
    assert!(
        c.call(1, "sandbox.status", Value::Null)
            .get("end")
            .is_some()
    );
}

#[test]
fn answers_of_requests_running_at_eof_are_still_sent() {
    let s = Server::start(&[]);
    let mut c = s.client();
    c.request(1, "debug.sleep", json!({"ms": 300}));
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let r = c.recv();
    assert_eq!(r["end"]["slept_ms"], json!(300), "{r}");
    assert!(c.try_recv().is_none());
}

#[test]
fn cancel_ends_a_running_request() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let t = Instant::now();
    c.request(5, "debug.sleep", json!({"ms": 60_000}));
    std::thread::sleep(Duration::from_millis(100));
    // An id that is still running cannot be reused.
    let r = c.call(5, "sandbox.status", Value::Null);
    assert_eq!(code(&r), "conflict", "{r}");
    c.send(&json!({"cancel": 5}));
    let r = c.recv();
    assert_eq!(r["id"], json!(5), "{r}");
    assert_eq!(code(&r), "cancelled", "{r}");
    assert!(t.elapsed() < Duration::from_secs(30));
    // Cancelling an id that is not running is a no-op: no frame at all.
    c.send(&json!({"cancel": 5}));
    c.send(&json!({"cancel": 12345}));
    // The id can be used again, and the next frame is its answer.
    let r = c.call(5, "sandbox.status", Value::Null);
    assert!(r.get("end").is_some(), "{r}");
}

#[test]
fn requests_on_one_connection_run_concurrently() {
    let s = Server::start(&[]);
    let mut c = s.client();
    c.request(1, "debug.sleep", json!({"ms": 1500}));
    c.request(2, "sandbox.status", Value::Null);
    let r = c.recv();
    assert_eq!(
        r["id"],
        json!(2),
        "status should not wait for the sleep: {r}"
    );
    let r = c.recv();
    assert_eq!(r["id"], json!(1), "{r}");
    assert_eq!(r["end"]["slept_ms"], json!(1500));
}

#[test]
fn a_second_client_is_served_at_the_same_time() {
    let s = Server::start(&[]);
    let mut a = s.client();
    a.request(1, "debug.sleep", json!({"ms": 3000}));
    let t = Instant::now();
    let mut b = s.client();
    let r = b.call(1, "sandbox.status", Value::Null);
    assert!(r.get("end").is_some(), "{r}");
    assert!(t.elapsed() < Duration::from_millis(2500), "b waited for a");
    let r = a.recv();
    assert_eq!(r["id"], json!(1));
    // Many clients at once.
    let socket = s.socket.clone();
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket);
                let r = c.call(i, "hello", json!({"protocol": 1}));
                assert!(r.get("end").is_some(), "{r}");
                let r = c.call(i + 1, "sandbox.status", Value::Null);
                assert!(r.get("end").is_some(), "{r}");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn streams_send_items_then_end() {
    let s = Server::start(&[]);
    let mut c = s.client();
    c.request(3, "debug.stream", json!({"count": 3, "size": 4}));
    for n in 0..3 {
        let r = c.recv();
        assert_eq!(r, json!({"id": 3, "item": {"n": n, "data": "xxxx"}}));
    }
    assert_eq!(c.recv(), json!({"id": 3, "end": {"sent": 3}}));
}

#[test]
fn a_panicking_handler_is_an_internal_error_not_a_dead_service() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let r = c.call(1, "debug.panic", Value::Null);
    assert_eq!(code(&r), "internal", "{r}");
    assert!(message(&r).contains("debug.panic"), "{r}");
    let r = c.call(2, "sandbox.status", Value::Null);
    assert!(r.get("end").is_some(), "{r}");
    let mut d = s.client();
    assert!(
        d.call(1, "sandbox.status", Value::Null)
            .get("end")
            .is_some()
    );
}

#[test]
fn a_slow_reader_is_disconnected_and_wedges_no_one() {
    let s = Server::start(&["--slow-reader-ms", "300"]);
    let mut slow = s.client();
    // 200 MiB of answers it never reads.
    slow.request(1, "debug.stream", json!({"count": 200, "size": 1 << 20}));
    let mut other = s.client();
    for id in 1..5 {
        let t = Instant::now();
        assert!(
            other
                .call(id, "sandbox.status", Value::Null)
                .get("end")
                .is_some()
        );
        assert!(t.elapsed() < Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(200));
    }
    s.wait_log("does not read its answers");
    // The slow client finds its connection closed once it reads.
    slow.stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut sink = Vec::new();
    let _ = slow.stream.read_to_end(&mut sink);
    assert!(sink.len() < 200 << 20, "the slow client got everything");
}

#[test]
fn connections_over_the_limit_are_busy() {
    let s = Server::start(&["--max-connections", "2"]);
    let _a = s.client();
    let _b = s.client();
    let mut c = s.connect();
    let r = c.recv();
    assert_eq!(r["id"], Value::Null, "{r}");
    assert_eq!(code(&r), "busy", "{r}");
    assert!(c.try_recv().is_none());
    drop(_a);
    // A slot frees up once a client leaves.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // The service may refuse (busy) and close before the hello is written: tolerate it.
        let served = (|| {
            let mut d = UnixStream::connect(&s.socket).ok()?;
            d.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
            let hello =
                frame::encode(&json!({"id": 1, "method": "hello", "params": {"protocol": 1}}))
                    .ok()?;
            let _ = d.write_all(&hello);
            let r = frame::read_frame(&mut d).ok()??;
            Some(r.contains_key("end"))
        })();
        if served == Some(true) {
            break;
        }
        assert!(Instant::now() < deadline, "no slot freed up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn status_tells_what_exists_and_the_paths() {
    let s = Server::start(&[]);
    let mut c = s.client();
    let r = c.call(1, "sandbox.status", Value::Null);
    let end = &r["end"];
    // A real trial launch of `true`: available with a backend, or a reason why not.
    let st = &end["status"];
    assert!(st["checked_at"].as_str().unwrap().ends_with('Z'), "{r}");
    if st["available"] == json!(true) {
        assert!(
            ["native", "bwrap"].contains(&st["backend"].as_str().unwrap()),
            "{r}"
        );
        assert_eq!(st["seccomp"], json!(true), "{r}");
        assert!(st.get("unavailable").is_none());
    } else {
        assert!(!st["unavailable"].as_str().unwrap().is_empty(), "{r}");
        assert!(
            std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
            "EFR_SANDBOX_MUST_WORK is set and the sandbox is unavailable: {r}"
        );
    }
    // Cached: the same check.
    let r2 = c.call(2, "sandbox.status", Value::Null);
    assert_eq!(r2["end"]["status"], end["status"]);
    let run = s.dir.path().join("run");
    assert_eq!(end["paths"]["socket"], json!(s.socket.to_str().unwrap()));
    assert_eq!(end["paths"]["runtime_dir"], json!(run.to_str().unwrap()));
    assert_eq!(
        end["paths"]["scratch"],
        json!(run.join("scratch").to_str().unwrap())
    );
    let config = s.dir.path().join("config/efr/config.toml");
    assert_eq!(end["paths"]["config_file"], json!(config.to_str().unwrap()));
}

#[test]
fn explain_through_rpc() {
    let s = Server::start(&[]);
    std::fs::create_dir_all(s.home.join(".ssh")).unwrap();
    std::fs::write(s.home.join(".ssh/id_ed25519"), "secret").unwrap();
    let mut c = s.client();
    let r = c.call(1, "sandbox.explain", json!({"path": "~/.ssh/id_ed25519"}));
    let end = &r["end"];
    assert_eq!(end["path"], json!("~/.ssh/id_ed25519"), "{r}");
    assert_eq!(end["access"], json!("none"), "{r}");
    assert!(end["masked"].is_object(), "{r}");
    assert_eq!(end["exists"], json!(true), "{r}");
    let r = c.call(2, "sandbox.explain", json!({"path": "/etc/passwd"}));
    assert_eq!(r["end"]["access"], json!("read"), "{r}");
}

#[test]
fn default_socket_is_0600_in_a_0700_dir_and_a_live_one_is_not_replaced() {
    let dir = temp_env();
    let rt = dir.path().join("rt");
    std::fs::create_dir(&rt).unwrap();
    let mut cmd = command(dir.path());
    cmd.env("XDG_RUNTIME_DIR", &rt).arg("serve");
    let socket = rt.join("efr/sandbox.sock");
    let s = Server::spawn(cmd, dir, socket.clone());
    let dmeta = std::fs::symlink_metadata(rt.join("efr")).unwrap();
    assert!(dmeta.is_dir());
    assert_eq!(dmeta.mode() & 0o7777, 0o700);
    let smeta = std::fs::symlink_metadata(&socket).unwrap();
    assert_eq!(smeta.mode() & 0o7777, 0o600);
    s.client();

    // A second service on the same socket refuses to start.
    let out = command(s.dir.path())
        .env("XDG_RUNTIME_DIR", &rt)
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another service runs on"), "{err}");

    // A stale socket (its service killed) is replaced.
    let mut s = s;
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    assert!(socket.exists());
    let dir2 = temp_env();
    let mut cmd = command(dir2.path());
    cmd.env("XDG_RUNTIME_DIR", &rt).arg("serve");
    let s2 = Server::spawn(cmd, dir2, socket.clone());
    // (The first one's temp dir holds the runtime dir: keep it.)
    let _first = s;
    let s = s2;
    assert!(
        s.stderr().contains("removed the stale socket"),
        "{}",
        s.stderr()
    );
    s.client();

    // SIGTERM removes the socket.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut s = s;
    s.child.wait().unwrap();
    assert!(!socket.exists());
}

#[test]
fn unsafe_runtime_dirs_are_refused() {
    let dir = temp_env();
    // No XDG_RUNTIME_DIR and no --socket.
    let out = command(dir.path()).arg("serve").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("XDG_RUNTIME_DIR is not set"), "{err}");

    // A group- or world-writable efr dir.
    let rt = dir.path().join("rt");
    std::fs::create_dir_all(rt.join("efr")).unwrap();
    std::fs::set_permissions(rt.join("efr"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = command(dir.path())
        .env("XDG_RUNTIME_DIR", &rt)
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("writable by group or others"), "{err}");

    // Something that is not a socket at the socket's path.
    std::fs::set_permissions(rt.join("efr"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(rt.join("efr/sandbox.sock"), "").unwrap();
    let out = command(dir.path())
        .env("XDG_RUNTIME_DIR", &rt)
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a socket"), "{err}");
}

/// The client half of `a_peer_of_another_uid_is_refused`, run in a child process as uid
/// 65534. As a test of its own it does nothing.
#[test]
fn child_client_of_another_uid() {
    let Some(socket) = std::env::var_os("EFR_TEST_CHILD_SOCKET") else {
        return;
    };
    std::process::exit(try_hello(std::path::Path::new(&socket)));
}

/// Connects and sends a hello: 0 when the service closes the connection without a word,
/// 1 when it answers, 3 when the connect itself fails.
fn try_hello(socket: &std::path::Path) -> i32 {
    let mut s = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("connect {}: {e}", socket.display());
            return 3;
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let hello =
        frame::encode(&json!({"id": 1, "method": "hello", "params": {"protocol": 1}})).unwrap();
    let _ = s.write_all(&hello);
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("read: {e}");
            4
        }
    }
}

#[test]
fn a_peer_of_another_uid_is_refused() {
    // Without privileges: the service allows only a uid that is not ours, so this process
    // is the peer of another uid.
    let me = nix::unistd::geteuid().as_raw();
    let other = if me == 4242 { 4243 } else { 4242 };
    let s = Server::start(&["--allow-uid", &other.to_string()]);
    assert_eq!(try_hello(&s.socket), 0, "a refused peer must get no answer");
    s.wait_log(&format!("refused a peer of uid {me}"));

    // As root: a real process of uid 65534 against the default allow list (our own uid).
    if !is_root() {
        eprintln!("not root: the setuid half of this test needs root; the allow-list half ran");
        return;
    }
    let s = Server::start(&[]);
    // Let uid 65534 reach the socket, so only the SO_PEERCRED check stands in its way.
    for (p, mode) in [
        (s.dir.path().to_path_buf(), 0o755),
        (s.socket.parent().unwrap().to_path_buf(), 0o755),
        (s.socket.clone(), 0o666),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // A copy of this test binary that uid 65534 can run.
    let exe_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(exe_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = exe_dir.path().join("rpc-client");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(&exe)
        .args([
            "--exact",
            "child_client_of_another_uid",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("EFR_TEST_CHILD_SOCKET", &s.socket)
        .current_dir(exe_dir.path())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the peer of uid 65534 was not refused: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    s.wait_log("refused a peer of uid 65534");
    // Our own uid is still served.
    let mut c = s.client();
    assert!(
        c.call(1, "sandbox.status", Value::Null)
            .get("end")
            .is_some()
    );
}

#[test]
fn the_service_follows_config_changes_and_keeps_the_last_good_one() {
    let dir = temp_env();
    let cfg = dir.path().join("config/efr");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[sandbox]\nmasks = [\"~/secret\"]\n",
    )
    .unwrap();
    let s = Server::start_in(dir, &[]);
    let mut c = s.client();
    let masked = |c: &mut Client, id| {
        let r = c.call(id, "sandbox.explain", json!({"path": "~/secret"}));
        assert!(r.get("end").is_some(), "{r}");
        r["end"]["masked"].is_object()
    };
    assert!(masked(&mut c, 1), "the mask of the config file should hold");
    // A broken file: reported, and the last good config stays in force.
    std::fs::write(cfg.join("config.toml"), "[sandbox]\nmasks = [\n").unwrap();
    assert!(
        masked(&mut c, 2),
        "the last good config should stay in force"
    );
    s.wait_log("the last good config stays in force");
    assert!(s.stderr().contains("line "), "{}", s.stderr());
    // A good file again: in force.
    std::fs::write(cfg.join("config.toml"), "# no masks of mine\n").unwrap();
    assert!(!masked(&mut c, 3), "the new config should be in force");
}

#[test]
fn garbage_from_many_clients_kills_nothing() {
    let s = Server::start(&[]);
    let socket = s.socket.clone();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                // A small deterministic generator: the same garbage on every run.
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                for _ in 0..20 {
                    let Ok(mut c) = UnixStream::connect(&socket) else { continue };
                    let mut bytes = Vec::new();
                    for _ in 0..50 {
                        let r = next();
                        match r % 6 {
                            0 => bytes.extend_from_slice(&((r >> 8) as u32 % 64).to_be_bytes()),
                            1 => bytes.extend((0..(r >> 8) % 64).map(|i| (next() >> (i % 8)) as u8)),
                            2 => bytes.extend(frame::encode(&json!({"id": r >> 40, "method": "hello", "params": {"protocol": r % 3}})).unwrap()),
                            3 => bytes.extend(frame::encode(&json!({"id": r >> 40, "method": "sandbox.explain", "params": {"path": format!("/proc/{}/../\u{0}x", r % 5)}})).unwrap()),
                            4 => bytes.extend(frame::encode(&json!({"cancel": r >> 40})).unwrap()),
                            _ => bytes.extend(frame::encode(&json!({"id": r >> 40, "method": "debug.sleep", "params": {"ms": r % 20}})).unwrap()),
                        }
                    }
                    let _ = c.write_all(&bytes);
                    let _ = c.shutdown(std::net::Shutdown::Write);
                    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    let mut sink = Vec::new();
                    let _ = c.read_to_end(&mut sink);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = s.client();
    assert!(
        c.call(1, "sandbox.status", Value::Null)
            .get("end")
            .is_some()
    );
    assert!(!s.stderr().contains("panicked"), "{}", s.stderr());
}
