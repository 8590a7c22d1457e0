//! The service's own socket is the one door that opens everything (an unsandboxed launch),
//! and a contained call runs as the same uid, so the uid check would let it in: the call
//! must not be able to reach it at all.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Server, collect, command, temp_env};
use serde_json::json;

#[test]
fn a_contained_call_cannot_reach_the_service_socket() {
    let dir = temp_env();
    // Not under /tmp: a contained call has its own /tmp, which would hide the socket
    // whatever the masks do, and the test would prove nothing.
    let rt = tempfile::Builder::new()
        .prefix("efr-runtime-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(rt.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = rt.path().join("efr/sandbox.sock");
    let mut cmd = command(dir.path());
    cmd.env("XDG_RUNTIME_DIR", rt.path()).arg("serve");
    let s = Server::spawn(cmd, dir, socket.clone());
    let proj = s.home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let mut c = s.client();
    // From inside: connect by path (and by the path through /proc/self/root), send hello,
    // and ask for an unsandboxed launch.
    let attempt = format!(
        r#"
import json, socket, struct
for path in ["{sock}", "/proc/self/root{sock}"]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        for frame in [{{"id": 1, "method": "hello", "params": {{"protocol": 1}}}},
                      {{"id": 2, "method": "sandbox.launch", "params": {{"line": "echo ESCAPED", "unsandboxed": True}}}}]:
            b = json.dumps(frame).encode()
            s.sendall(struct.pack(">I", len(b)) + b)
        print("CONNECTED", s.recv(4096))
    except OSError as e:
        print("refused", e.errno)
"#,
        sock = socket.display()
    );
    c.request(
        1,
        "sandbox.launch",
        json!({"line": format!("python3 -c '{}'", attempt.replace('\'', "'\\''")), "projects": [proj]}),
    );
    let (items, end) = collect(&mut c, 1);
    let out: String = items
        .iter()
        .filter(|i| i["kind"] == "output")
        .map(|i| i["data"].as_str().unwrap_or_default())
        .collect();
    assert!(end.get("end").is_some(), "{end}");
    assert_eq!(out.matches("refused").count(), 2, "{out}\n{end}");
    assert!(
        !out.contains("CONNECTED") && !out.contains("ESCAPED"),
        "{out}"
    );
    // The same attempt outside the sandbox does connect: the refusal above is the
    // sandbox's, not a broken attempt.
    let line = format!("python3 -c '{}'", attempt.replace('\'', "'\\''"));
    c.request(
        2,
        "sandbox.launch",
        json!({"line": line, "projects": [proj], "unsandboxed": true}),
    );
    let (items, _) = collect(&mut c, 2);
    let out: String = items
        .iter()
        .filter(|i| i["kind"] == "output")
        .map(|i| i["data"].as_str().unwrap_or_default())
        .collect();
    assert!(out.contains("CONNECTED"), "{out}");
    // The socket is there and answers outside.
    assert!(socket.exists());
    let mut outside = s.connect();
    let r = outside.call(9, "hello", json!({"protocol": 1}));
    assert!(r.get("end").is_some(), "{r}");
}

/// A service whose socket is at `socket` (its directory the runtime dir), with
/// `XDG_RUNTIME_DIR` unset and `env` set; the temp dir holds its home and config.
fn service_at(socket: &std::path::Path, env: &[(&str, &str)]) -> Server {
    let dir = tempfile::Builder::new()
        .prefix("efr-own-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::create_dir(dir.path().join("home")).unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    let mut cmd = command(dir.path());
    cmd.arg("serve").arg("--socket").arg(socket);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Server::spawn(cmd, dir, socket.to_path_buf())
}

fn stdout_of(items: &[serde_json::Value]) -> String {
    items
        .iter()
        .filter(|i| i["kind"] == "output")
        .map(|i| i["data"].as_str().unwrap_or_default())
        .collect()
}

/// The socket outside `$XDG_RUNTIME_DIR` (unset here), in a directory a call would see:
/// its runtime dir (every conversation's `/tmp` and `$SCRATCH`, `serve.log`, the jobs) is
/// masked all the same, so conversation B reads nothing of A's.
#[test]
fn the_runtime_dir_is_masked_wherever_the_socket_lives() {
    let rt = tempfile::Builder::new()
        .prefix("efr-elsewhere-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(rt.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let runtime = rt.path().join("efr");
    let socket = runtime.join("sandbox.sock");
    let s = service_at(&socket, &[]);
    std::fs::write(runtime.join("serve.log"), "the service's log\n").unwrap();
    let proj = s.home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    for (n, backend) in common::backends().into_iter().enumerate() {
        let mut c = s.client();
        let a = format!("a-{backend}");
        let id = 2 * n as u64 + 1;
        c.request(
            id,
            "sandbox.launch",
            json!({"line": "echo secret-of-a > /tmp/a.txt; echo scratch-of-a > $SCRATCH/s.txt; echo wrote",
                   "projects": [proj], "conversation": a, "backend": backend}),
        );
        let (items, _) = collect(&mut c, id);
        assert!(stdout_of(&items).contains("wrote"), "{backend}: {items:?}");
        let r = runtime.display();
        let line = format!(
            "ls -a {r}; cat {r}/tmp/{a}/a.txt {r}/scratch/{a}/s.txt {r}/serve.log; \
             ls {r}/jobs; echo end"
        );
        c.request(
            id + 1,
            "sandbox.launch",
            json!({"line": line, "projects": [proj], "conversation": format!("b-{backend}"),
                   "backend": backend}),
        );
        let (items, _) = collect(&mut c, id + 1);
        let out = stdout_of(&items);
        assert!(out.contains("end"), "{backend}: {items:?}");
        for secret in [
            "secret-of-a",
            "scratch-of-a",
            "the service's log",
            "sandbox.sock",
        ] {
            assert!(!out.contains(secret), "{backend}: B read {secret}: {out}");
        }
    }
    // Conversation A still reads its own.
    let mut c = s.client();
    c.request(
        99,
        "sandbox.launch",
        json!({"line": "cat /tmp/a.txt", "projects": [proj], "conversation": "a-native"}),
    );
    let (items, _) = collect(&mut c, 99);
    assert!(stdout_of(&items).contains("secret-of-a"), "{items:?}");
}

/// `socket=` of the service's socket (by its path, through a hard link, by `unmask` of a
/// directory above it) is refused as a grant: `forbidden` over RPC, a usage error in `run`.
#[test]
fn grants_of_the_control_plane_are_refused() {
    let rt = tempfile::Builder::new()
        .prefix("efr-grant-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(rt.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let runtime = rt.path().join("efr");
    let socket = runtime.join("sandbox.sock");
    let s = service_at(&socket, &[]);
    let link = rt.path().join("elsewhere.sock");
    std::fs::hard_link(&socket, &link).unwrap();
    let proj = s.home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let mut c = s.client();
    for (i, grant) in [
        json!({"kind": "socket", "path": socket}),
        json!({"kind": "socket", "path": link}),
        json!({"kind": "unmask", "path": rt.path()}),
        json!({"kind": "write", "path": runtime.join("tmp")}),
    ]
    .into_iter()
    .enumerate()
    {
        let r = c.call(
            10 + i as u64,
            "sandbox.launch",
            json!({"line": "echo RAN", "projects": [proj], "grants": [grant]}),
        );
        assert_eq!(r["error"]["code"], "forbidden", "{grant}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("control plane"),
            "{r}"
        );
    }
    // `run` as the user types it, with the socket as EFR_SANDBOX_SOCKET names it.
    let o = command(s.home.parent().unwrap())
        .env("EFR_SANDBOX_SOCKET", &socket)
        .args(["run", "--project"])
        .arg(&proj)
        .arg("--grant")
        .arg(format!("socket={}", socket.display()))
        .args(["--", "echo RAN"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("control plane"), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("RAN"));
}

/// The second lock: a contained call that reaches the service's socket by a route the
/// masks do not close (here the masks are turned off for the test and the socket is in the
/// project, where a call's connects are its own) gets `hello` and nothing else.
#[test]
fn a_contained_peer_gets_nothing_but_hello() {
    let dir = tempfile::Builder::new()
        .prefix("efr-peer-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let proj = dir.path().join("proj");
    std::fs::create_dir_all(proj.join("rt")).unwrap();
    std::fs::set_permissions(proj.join("rt"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = proj.join("rt/sandbox.sock");
    let s = service_at(
        &socket,
        &[
            ("EFR_SANDBOX_TEST_WEAKEN", "no_masks"),
            ("EFR_LAUNCH_ALLOW_TEST_WEAKEN", "1"),
        ],
    );
    let attempt = format!(
        r#"
import json, socket, struct
s = socket.socket(socket.AF_UNIX)
s.connect("{sock}")
def send(frame):
    b = json.dumps(frame).encode()
    s.sendall(struct.pack(">I", len(b)) + b)
def recv():
    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(s.recv(n, socket.MSG_WAITALL))
send({{"id": 1, "method": "hello", "params": {{"protocol": 1}}}})
print("HELLO", "end" in recv())
send({{"id": 2, "method": "sandbox.launch", "params": {{"line": "echo ESCAPED", "unsandboxed": True}}}})
print("LAUNCH", json.dumps(recv()))
"#,
        sock = socket.display()
    );
    for (n, backend) in common::backends().into_iter().enumerate() {
        let mut c = s.client();
        let id = n as u64 + 1;
        c.request(
            id,
            "sandbox.launch",
            json!({"line": format!("python3 -c '{}'", attempt.replace('\'', "'\\''")),
                   "projects": [proj], "backend": backend}),
        );
        let (items, _) = collect(&mut c, id);
        let out = stdout_of(&items);
        assert!(
            out.contains("HELLO True"),
            "{backend}: the call reached the socket: {items:?}"
        );
        assert!(out.contains("\"forbidden\""), "{backend}: {out}");
        assert!(out.contains("pid namespace"), "{backend}: {out}");
        assert!(!out.contains("ESCAPED"), "{backend}: {out}");
    }
    assert!(
        s.stderr().contains("pid namespace below the service's"),
        "{}",
        s.stderr()
    );
}
