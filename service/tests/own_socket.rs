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
