//! Clients that stall hold nothing of the service for long: 16 silent clients, 16 that
//! sent half a `hello` and 32 that stopped 12 MiB into a 16 MiB frame fill every slot, and
//! still another client is served once the hello deadline has passed; the stalled ones are
//! dropped after their deadlines (the mid-frame ones past the buffer budget refused with
//! `busy` at once); the service's memory stays within the budget; and an autostarted
//! service left with only stalled clients reaches its idle exit. The service runs with
//! 1024 open files at most (the soft limit a desktop session gives, here the hard limit
//! too, since `serve` raises its soft limit to the hard one).

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{BIN, Client, Server};
use serde_json::{Value, json};

/// The defaults of the service's deadlines (`service/src/state.rs`).
const HELLO_DEADLINE: Duration = Duration::from_secs(5);
const FRAME_DEADLINE: Duration = Duration::from_secs(10);
/// The service's buffer budget for unfinished frames, and the most it may hold over it
/// (the reads of the refused frames, the allocator's slack).
const BUDGET: u64 = 64 << 20;
const SLACK: u64 = 48 << 20;

/// `serve --idle-exit 1` with at most 1024 open files.
fn serve() -> Server {
    let dir = common::temp_env();
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"ulimit -n 1024 && exec "$0" "$@""#)
        .arg(BIN)
        .args(["serve", "--idle-exit", "1", "--socket"])
        .arg(&socket)
        .env("HOME", dir.path().join("home"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("EFR_SANDBOX_SOCKET")
        .stdin(std::process::Stdio::null());
    Server::spawn(cmd, dir, socket)
}

fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb << 10
}

fn soft_nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

fn connect(s: &Server) -> UnixStream {
    let c = UnixStream::connect(&s.socket).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c
}

/// The frames the service sends until it closes the connection.
fn frames_until_closed(c: UnixStream) -> Vec<Value> {
    let mut c = Client { stream: c };
    let mut out = Vec::new();
    while let Ok(Some(f)) = efr_sandbox_wire::frame::read_frame(&mut c.stream) {
        out.push(Value::Object(f));
    }
    out
}

/// Another client, connecting again while it is refused `busy`: how long until its hello
/// is answered.
fn served_after(s: &Server, give_up: Duration) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < give_up {
        let mut c = connect(s);
        let hello = json!({"id": 0, "method": "hello", "params": {"protocol": 1, "client": "t"}});
        // A refused client may find the connection closed before its hello is written.
        let _ = c.write_all(&efr_sandbox_wire::frame::encode(&hello).unwrap());
        match efr_sandbox_wire::frame::read_frame(&mut c) {
            Ok(Some(f)) if f.contains_key("end") => return Some(t.elapsed()),
            Ok(Some(f)) => assert_eq!(f["error"]["code"], "busy", "{f:?}"),
            Ok(None) | Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// A client that did its hello and stopped `stalled` bytes into a frame of `len`.
fn mid_frame(s: &Server, len: u32, stalled: &[u8]) -> UnixStream {
    let mut c = s.client();
    c.send_raw(&len.to_be_bytes());
    c.send_raw(stalled);
    c.stream
}

/// Checks that each of `clients` is closed with one last error whose message says `why`,
/// and returns how many were refused `busy` before.
fn dropped_for(clients: Vec<UnixStream>, why: &str) -> usize {
    let mut refused = 0;
    for c in clients {
        let f = frames_until_closed(c);
        refused += f.iter().filter(|f| f["error"]["code"] == "busy").count();
        let last = f.last().unwrap_or_else(|| panic!("closed with no error"));
        assert!(
            last["error"]["message"].as_str().unwrap().contains(why),
            "{f:?}"
        );
    }
    refused
}

#[test]
fn stalled_clients_free_their_slots_and_the_idle_exit_comes() {
    let mut s = serve();
    let pid = s.child.id();
    assert_eq!(soft_nofile(pid), 1024);
    let silent: Vec<UnixStream> = (0..16).map(|_| connect(&s)).collect();
    let hello = br#"{"id":0,"method":"hello","params":{"protocol":1,"client":"t"}}"#;
    let half: Vec<UnixStream> = (0..16)
        .map(|_| {
            let mut c = connect(&s);
            c.write_all(&(hello.len() as u32).to_be_bytes()).unwrap();
            c.write_all(&hello[..hello.len() / 2]).unwrap();
            c
        })
        .collect();
    let began = Instant::now();
    let stalled: Vec<UnixStream> = (0..32).map(|_| mid_frame(&s, 1000, b"{\"id\"")).collect();
    // Every slot is taken; the silent and half-hello ones go after the hello deadline.
    let give_up = HELLO_DEADLINE + Duration::from_secs(5);
    let waited = served_after(&s, give_up);
    eprintln!("another client served after {waited:?}");
    assert!(
        waited.is_some(),
        "another client was refused for {give_up:?}: {}",
        s.stderr()
    );
    let no_hello: Vec<UnixStream> = silent.into_iter().chain(half).collect();
    assert_eq!(dropped_for(no_hello, "no hello"), 0);
    assert_eq!(dropped_for(stalled, "not complete"), 0);
    assert!(
        began.elapsed() < FRAME_DEADLINE + Duration::from_secs(5),
        "the clients stalled mid-frame were dropped after {:?}",
        began.elapsed()
    );
    // Only stalled clients were left (still connected on their side): the service stops.
    let t = Instant::now();
    loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            assert!(st.success(), "{st}: {}", s.stderr());
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no idle exit: {}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn large_stalled_frames_are_held_within_the_budget() {
    let s = serve();
    let pid = s.child.id();
    let before = rss(pid);
    let big = vec![b' '; 12 << 20];
    let began = Instant::now();
    let stalled: Vec<UnixStream> = (0..32).map(|_| mid_frame(&s, 16 << 20, &big)).collect();
    let held = rss(pid).saturating_sub(before);
    eprintln!(
        "held by 32 clients stalled 12 MiB into 16 MiB frames: {} MiB",
        held >> 20
    );
    assert!(
        held < BUDGET + SLACK,
        "32 clients stalled mid-frame made the service hold {} MiB",
        held >> 20
    );
    // Another client is served meanwhile: its frames are small.
    assert!(served_after(&s, Duration::from_secs(2)).is_some());
    let refused = dropped_for(stalled, "not complete");
    assert!(
        began.elapsed() < FRAME_DEADLINE + Duration::from_secs(5),
        "the clients stalled mid-frame were dropped after {:?}",
        began.elapsed()
    );
    // The budget holds four frames of 16 MiB; the rest were refused at once.
    assert_eq!(refused, 32 - (BUDGET >> 24) as usize, "{}", s.stderr());
    // Their memory is given back for the next ones: the budget is whole again.
    let again: Vec<UnixStream> = (0..4).map(|_| mid_frame(&s, 16 << 20, &big)).collect();
    assert_eq!(dropped_for(again, "not complete"), 0);
}
