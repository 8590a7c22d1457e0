//! One call's proxy load cannot take the service down for the others: the service started
//! with the soft open-file limit a systemd session gives (1024), a call whose line holds
//! 3,000 connections to its proxy and reopens each one the proxy ends. Meanwhile the RPC
//! answers within a bound, another call starts and runs normally, and the flooding call
//! reads `limit` refusals (and its finish lists them); the service logs no failed accept.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{BIN, Server, collect, have, skip, temp_env};
use serde_json::{Value, json};

/// The flood: 3,000 connections to the call's proxy (`$HTTP_PROXY`), each one the proxy
/// answers or closes reopened, for `secs`; prints how many answers said `limit`, and how
/// many connections it held open at the end.
const FLOOD: &str = r#"
import os, resource, selectors, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
hp = os.environ["HTTP_PROXY"].split("//")[1].strip("/")
host, port = hp.rsplit(":", 1)
sel = selectors.DefaultSelector()
def opened():
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((host, int(port)))
    sel.register(s, selectors.EVENT_READ)
for _ in range(3000):
    opened()
limit = reopened = 0
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for key, _ in sel.select(timeout=0.2):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if b"limit" in data:
            limit += 1
        sel.unregister(s)
        s.close()
        reopened += 1
        opened()
print("limit", limit, "reopened", reopened, "open", len(sel.get_map()), flush=True)
"#;

fn hard_nofile() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(_, h)| h)
        .unwrap_or(4096)
}

/// `serve` under `prlimit --nofile=1024:HARD`, as a systemd session starts it.
fn serve_with_1024() -> Server {
    let dir = temp_env();
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--nofile=1024:{}", hard_nofile()))
        .arg(BIN)
        .args(["serve", "--socket"])
        .arg(&socket)
        .arg("--test-methods")
        .env("HOME", dir.path().join("home"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("EFR_SANDBOX_SOCKET")
        .stdin(std::process::Stdio::null());
    Server::spawn(cmd, dir, socket)
}

fn output(items: &[Value], stream: &str) -> String {
    items
        .iter()
        .filter(|i| i["kind"] == "output" && i["stream"] == stream)
        .filter_map(|i| i["data"].as_str())
        .collect()
}

#[test]
fn a_call_flooding_its_proxy_starves_no_other_call_nor_the_rpc() {
    if !have("prlimit") || !have("python3") {
        skip("prlimit and python3 are needed");
        return;
    }
    let s = serve_with_1024();
    let proj = s.home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("flood.py"), FLOOD).unwrap();
    let mut flood = s.client();
    flood.request(
        1,
        "sandbox.launch",
        json!({"line": "python3 flood.py 12", "projects": [&proj], "cwd": &proj}),
    );
    // Until the flood is under way.
    std::thread::sleep(Duration::from_secs(3));
    let mut worst = Duration::ZERO;
    let mut rpc = s.client();
    for i in 0..10 {
        let t = Instant::now();
        let r = rpc.call(100 + i, "sandbox.status", Value::Null);
        worst = worst.max(t.elapsed());
        assert!(r.get("end").is_some(), "status failed under the flood: {r}");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        worst < Duration::from_millis(1500),
        "the RPC took {worst:?} under a neighbour's flood"
    );
    let mut other = s.client();
    let t = Instant::now();
    other.request(
        2,
        "sandbox.launch",
        json!({"line": "echo bystander", "projects": [&proj], "cwd": &proj}),
    );
    let (items, end) = collect(&mut other, 2);
    let took = t.elapsed();
    assert_eq!(end["end"]["exit_status"], 0, "{end} {items:?}");
    assert_eq!(output(&items, "stdout"), "bystander\n");
    assert!(
        took < Duration::from_secs(3),
        "another call took {took:?} under the flood"
    );
    let (items, end) = collect(&mut flood, 1);
    let out = output(&items, "stdout");
    let limit: u64 = out
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count from the flood: {out:?} {end}"));
    assert!(limit > 0, "the flooding call saw no `limit` refusal: {out}");
    let blocked = end["end"]["sandbox_summary"]["blocked"].to_string();
    assert!(
        blocked.contains("\"limit\""),
        "no limit in the finish: {end}"
    );
    let log = s.stderr();
    assert!(
        !log.contains("Too many open files"),
        "the service ran out of fds: {log}"
    );
    drop_home(&s.home);
}

fn drop_home(home: &Path) {
    let _ = std::fs::remove_dir_all(home.join("proj"));
}

/// The service's threads named `name`, with their nice values (`/proc/PID/task/*/stat`).
fn threads_named(pid: u32, name: &str) -> Vec<i64> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // After the name's ")": state is field 3; nice is field 19.
            stat.rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(16)?
                .parse()
                .ok()
        })
        .collect()
}

/// Field `n` (1-based, as in proc(5)) of `/proc/PID/stat`.
fn stat_field(pid: u32, n: usize) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(n - 3)?
        .parse()
        .ok()
}

/// The service's child processes (every thread's `children`).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// How one call is kept from the others on the processors: each call's proxy is served on
/// a thread of its own, below the service's own threads' priority (a call flooding its
/// proxy queues behind nothing of the RPC's or another call's, and yields to them), and
/// each call's launcher leads a session of its own (the kernel's autogroup shares the
/// processors per call). Two calls at once: two proxy threads at nice 10, two launchers
/// each leading its session; after they end, no proxy thread is left.
#[test]
fn each_call_gets_a_proxy_thread_and_a_session_of_its_own() {
    let s = Server::start(&[]);
    let pid = s.child.id();
    let proj = s.home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let service_sid = stat_field(pid, 6).expect("the service's session");
    let base_nice = stat_field(pid, 19).expect("the service's nice value");
    let mut a = s.client();
    let mut b = s.client();
    for (c, id) in [(&mut a, 1), (&mut b, 2)] {
        c.request(
            id,
            "sandbox.launch",
            json!({"line": "sleep 3", "projects": [&proj], "cwd": &proj}),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut proxies, mut leaders) = (Vec::new(), Vec::new());
    while Instant::now() < deadline {
        proxies = threads_named(pid, "efr-call-proxy");
        // The launchers (the service starts no other child), the one in standby included.
        leaders = children(pid)
            .into_iter()
            .filter(|&c| stat_field(c, 6) == Some(i64::from(c)))
            .collect();
        if proxies.len() >= 2 && leaders.len() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        proxies,
        vec![base_nice + 10, base_nice + 10],
        "two calls: two proxy threads at the service's nice value + 10"
    );
    assert!(
        leaders.len() >= 2,
        "each call's launcher leads a session: {leaders:?} (children {:?})",
        children(pid)
    );
    for l in &leaders {
        assert_ne!(
            i64::from(*l),
            service_sid,
            "a call in the service's session"
        );
    }
    for (c, id) in [(&mut a, 1), (&mut b, 2)] {
        let (items, end) = collect(c, id);
        assert_eq!(end["end"]["exit_status"], 0, "{end} {items:?}");
    }
    assert_eq!(
        threads_named(pid, "efr-call-proxy"),
        Vec::<i64>::new(),
        "a proxy thread outlived its call"
    );
}
