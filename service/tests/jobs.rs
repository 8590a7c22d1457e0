//! Background jobs end to end: the real service, real contained calls on both
//! backends, as root and as the CI's unprivileged user. A job outlives the connection that
//! started it; its time limit, a stop and the service's end take its whole tree; its output
//! is bounded and read from any offset; a running call moves to a job; bad requests get
//! clear errors and never reach another conversation's job.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Server, backends, code, collect, message, temp_env};
use serde_json::{Value, json};

fn project(home: &Path) -> PathBuf {
    let p = home.join("proj");
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// Processes whose command line holds `marker` (the tree of a job, seen from the host).
fn alive(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            // The job's sleeps (zombies have an empty command line; the shells that
            // started them are not counted).
            if cmd.starts_with("sleep ") && cmd.contains(marker) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Waits until `n` sleeps hold `marker`.
fn running(marker: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(marker).len() != n {
        assert!(
            Instant::now() < deadline,
            "not {n} sleeps of {marker}: {:?}",
            alive(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until no process holds `marker`.
fn gone(marker: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = alive(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the job are left: {left:?} ({marker})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether an `efr-launch --warm` of the service `pid` waits, other than `busy` (a launcher
/// a call took from standby, which keeps its command line) and its children.
fn warm_launcher_of(pid: &str, busy: u64) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let me = e.file_name().to_string_lossy().parse::<u64>().unwrap_or(0);
        let parent = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().nth(1).map(str::to_owned))
            })
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(0);
        me != busy
            && parent != busy
            && std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
                args.contains(&b"--warm".as_slice())
                    && args
                        .windows(2)
                        .any(|w| w[0] == b"--caller-pid" && w[1] == pid.as_bytes())
            })
    })
}

/// A unique `sleep` argument: the marker of one job's tree.
fn marker(tag: u32) -> String {
    format!("{}.{}{}", 3000 + tag, std::process::id() % 1000, tag)
}

/// Starts a background job; its `started` item, `job` item and end.
fn start_job(c: &mut common::Client, id: u64, params: Value) -> (Value, Value, Value) {
    c.request(id, "sandbox.launch", params);
    let (items, end) = collect(c, id);
    assert!(end.get("end").is_some(), "{end}");
    let started = items
        .iter()
        .find(|i| i["kind"] == "started")
        .cloned()
        .unwrap_or_else(|| panic!("no started: {items:?} {end}"));
    let job = items
        .iter()
        .find(|i| i["kind"] == "job")
        .cloned()
        .unwrap_or_else(|| panic!("no job item: {items:?}"));
    (started, job, end["end"].clone())
}

fn jobs(c: &mut common::Client, id: u64, conversation: Option<&str>) -> Vec<Value> {
    let p = match conversation {
        Some(c) => json!({"conversation": c}),
        None => json!({}),
    };
    let r = c.call(id, "sandbox.jobs", p);
    r["end"]["jobs"].as_array().cloned().unwrap_or_default()
}

/// The job's info, polled until `pred` holds.
fn wait_job(
    c: &mut common::Client,
    conversation: Option<&str>,
    job_id: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 1000;
    loop {
        n += 1;
        let j = jobs(c, n, conversation)
            .into_iter()
            .find(|j| j["id"] == job_id)
            .unwrap_or_else(|| panic!("no job {job_id}"));
        if pred(&j) {
            return j;
        }
        assert!(Instant::now() < deadline, "job never got there: {j}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// All the output of a job now (`sandbox.job_output` from 0, no follow).
fn output(c: &mut common::Client, id: u64, conversation: &str, job_id: &str) -> (String, Value) {
    c.request(
        id,
        "sandbox.job_output",
        json!({"conversation": conversation, "job_id": job_id}),
    );
    let (items, end) = collect(c, id);
    let text = items
        .iter()
        .filter(|i| i["kind"] == "output")
        .map(|i| i["data"].as_str().unwrap_or_default().to_owned())
        .collect();
    (text, end)
}

#[test]
fn a_job_outlives_its_connection_is_listed_and_stops_with_its_tree() {
    for (n, backend) in backends().into_iter().enumerate() {
        let s = Server::start(&[]);
        let proj = project(&s.home);
        let m = marker(10 + n as u32);
        let mut c = s.client();
        let (started, job, end) = start_job(
            &mut c,
            1,
            json!({
                "line": format!("echo up; sleep {m} & sleep {m}; echo never"),
                "projects": [proj],
                "backend": backend,
                "conversation": "c1",
                "background": {"max_minutes": 5},
            }),
        );
        assert_eq!(end["job_id"], "j1", "{end}");
        assert_eq!(job["job"]["id"], "j1");
        assert_eq!(job["job"]["state"], "running");
        assert_eq!(job["job"]["conversation_id"], "c1");
        let call_id = started["call_id"].as_str().unwrap().to_owned();
        assert_eq!(job["job"]["call_id"], call_id.as_str());
        let launcher = started["launcher_pid"].as_u64().unwrap();
        // The connection goes; the job does not.
        drop(c);
        std::thread::sleep(Duration::from_millis(300));
        let mut c = s.client();
        let j = wait_job(&mut c, Some("c1"), "j1", |j| j["output_bytes"] == 3);
        assert_eq!(j["state"], "running", "{j}");
        assert!(Path::new(&format!("/proc/{launcher}")).exists());
        running(&m, 2);
        let (text, oend) = output(&mut c, 5, "c1", "j1");
        assert_eq!(text, "up\n");
        assert_eq!(oend["end"]["next_offset"], 3);
        // Listed for every conversation too, and for no other.
        assert_eq!(jobs(&mut c, 6, None).len(), 1);
        assert!(jobs(&mut c, 7, Some("c2")).is_empty());
        // Stopped by the user: the answer is the job as it ended, its tree gone.
        let r = c.call(
            8,
            "sandbox.job_stop",
            json!({"conversation": "c1", "job_id": "j1"}),
        );
        let j = &r["end"]["job"];
        assert_eq!(j["state"], "stopped", "{r}");
        assert_eq!(j["stopped_by"], "user");
        assert!(j["ended_at"].as_u64().unwrap() >= j["started_at"].as_u64().unwrap());
        gone(&m, Duration::from_secs(5));
        // Stopping it again is a conflict.
        let r = c.call(
            9,
            "sandbox.job_stop",
            json!({"conversation": "c1", "job_id": "j1"}),
        );
        assert_eq!(code(&r), "conflict", "{r}");
    }
}

#[test]
fn a_job_ends_at_its_time_limit_with_its_whole_tree() {
    for (n, backend) in backends().into_iter().enumerate() {
        let s = Server::start(&[]);
        let proj = project(&s.home);
        let m = marker(20 + n as u32);
        let mut c = s.client();
        let begun = Instant::now();
        // 0.02 minutes: 1.2 seconds; a child in the background and a grandchild.
        let (_, _, end) = start_job(
            &mut c,
            1,
            json!({
                "line": format!("(sh -c 'sleep {m}' &); sleep {m} & sleep {m}"),
                "projects": [proj],
                "backend": backend,
                "conversation": "c1",
                "background": {"max_minutes": 0.02},
            }),
        );
        assert_eq!(end["job_id"], "j1");
        let j = wait_job(&mut c, Some("c1"), "j1", |j| j["state"] != "running");
        assert_eq!(j["state"], "timed_out", "{j}");
        assert_eq!(j["stopped_by"], "time_limit");
        assert!(begun.elapsed() >= Duration::from_millis(1100));
        gone(&m, Duration::from_secs(5));
    }
}

#[test]
fn job_events_say_a_watch_matched_and_the_job_ended_with_its_tail() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut ev = s.client();
    ev.request(50, "sandbox.job_events", json!({"conversation": "c1"}));
    let mut c = s.client();
    let (_, _, end) = start_job(
        &mut c,
        1,
        json!({
            "line": "echo booting; echo 'ready on :5173'; echo ready again; exit 4",
            "projects": [proj],
            "conversation": "c1",
            "background": {"max_minutes": 1, "watch": "^ready", "max_wakes": 1},
        }),
    );
    assert_eq!(end["job_id"], "j1");
    let first = ev.recv();
    assert_eq!(first["item"]["kind"], "job_watch_matched", "{first}");
    assert_eq!(first["item"]["line"], "ready on :5173");
    assert_eq!(first["item"]["wakes_left"], 0);
    assert_eq!(first["item"]["job_id"], "j1");
    let second = ev.recv();
    let e = &second["item"];
    assert_eq!(e["kind"], "job_ended", "{second}");
    assert_eq!(e["state"], "exited");
    assert_eq!(e["exit_code"], 4);
    assert_eq!(e["tail"], "booting\nready on :5173\nready again\n");
    // One match only (max_wakes 1); the job's info counts it.
    let j = wait_job(&mut c, Some("c1"), "j1", |j| j["state"] == "exited");
    assert_eq!(j["wakes"], 1);
    assert_eq!(j["exit_code"], 4);
    // A reader that comes back gets what it missed (`since`), and no other conversation's.
    let mut again = s.client();
    again.request(
        60,
        "sandbox.job_events",
        json!({"conversation": "c1", "since": 0}),
    );
    let a = again.recv();
    let b = again.recv();
    assert_eq!(a["item"]["kind"], "job_watch_matched");
    assert_eq!(b["item"]["kind"], "job_ended");
    let mut other = s.client();
    other.request(
        61,
        "sandbox.job_events",
        json!({"conversation": "c2", "since": 0}),
    );
    std::thread::sleep(Duration::from_millis(500));
    other.stream.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let r = std::io::Read::read(&mut other.stream, &mut b);
    assert!(
        matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "c2 sees none of c1's events: {r:?}"
    );
}

#[test]
fn a_flood_keeps_only_the_bounded_tail_and_counts_the_rest() {
    let dir = temp_env();
    std::fs::create_dir_all(dir.path().join("config/efr")).unwrap();
    std::fs::write(
        dir.path().join("config/efr/config.toml"),
        "[jobs]\noutput_max = 65536\n",
    )
    .unwrap();
    let s = Server::start_in(dir, &[]);
    let proj = project(&s.home);
    let mut c = s.client();
    start_job(
        &mut c,
        1,
        json!({
            "line": "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo last line",
            "projects": [proj],
            "conversation": "c1",
            "background": {"max_minutes": 1},
        }),
    );
    let j = wait_job(&mut c, Some("c1"), "j1", |j| j["state"] != "running");
    assert_eq!(j["state"], "exited", "{j}");
    assert_eq!(j["output_bytes"], 5_000_000 + 1 + 10);
    c.request(
        2,
        "sandbox.job_output",
        json!({"conversation": "c1", "job_id": "j1", "offset": 0}),
    );
    let (items, end) = collect(&mut c, 2);
    assert_eq!(items[0]["kind"], "skipped", "{:?}", &items[0]);
    assert_eq!(items[0]["from"], 0);
    let kept: usize = items
        .iter()
        .filter(|i| i["kind"] == "output")
        .map(|i| i["data"].as_str().unwrap().len())
        .sum();
    assert!(kept <= 64 * 1024, "{kept}");
    assert_eq!(
        items[0]["to"].as_u64().unwrap() + kept as u64,
        5_000_011,
        "skipped and kept make the whole"
    );
    assert_eq!(end["end"]["next_offset"], 5_000_011);
    let last: String = items.iter().filter_map(|i| i["data"].as_str()).collect();
    assert!(last.ends_with("\nlast line\n"));
}

#[test]
fn follow_streams_what_the_job_writes_until_it_ends() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    start_job(
        &mut c,
        1,
        json!({
            "line": "for i in 1 2 3; do echo line $i; sleep 0.2; done",
            "projects": [proj],
            "conversation": "c1",
            "background": {"max_minutes": 1},
        }),
    );
    c.request(
        2,
        "sandbox.job_output",
        json!({"conversation": "c1", "job_id": "j1", "follow": true}),
    );
    let (items, end) = collect(&mut c, 2);
    let text: String = items.iter().filter_map(|i| i["data"].as_str()).collect();
    assert_eq!(text, "line 1\nline 2\nline 3\n");
    assert_eq!(end["end"]["state"], "exited", "{end}");
    assert_eq!(end["end"]["next_offset"], 21);
}

#[test]
fn bad_requests_get_clear_errors_and_never_reach_another_conversation() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    let m = marker(40);
    start_job(
        &mut c,
        1,
        json!({
            "line": format!("sleep {m}"),
            "projects": [proj],
            "conversation": "c1",
            "background": {"max_minutes": 1},
        }),
    );
    let stop = |c: &mut common::Client, id, p: Value| c.call(id, "sandbox.job_stop", p);
    let r = stop(&mut c, 2, json!({"conversation": "c1", "job_id": "x1"}));
    assert_eq!(code(&r), "invalid", "{r}");
    assert!(message(&r).contains("not a job id"), "{r}");
    let r = stop(&mut c, 3, json!({"conversation": "c1", "job_id": "j9"}));
    assert_eq!(code(&r), "not_found", "{r}");
    // Another conversation's job is not found: nothing a client sends stops it.
    let r = stop(&mut c, 4, json!({"conversation": "c2", "job_id": "j1"}));
    assert_eq!(code(&r), "not_found", "{r}");
    let r = stop(&mut c, 5, json!({"job_id": "j1"}));
    assert_eq!(code(&r), "not_found", "{r}");
    let r = c.call(
        6,
        "sandbox.job_output",
        json!({"conversation": "c2", "job_id": "j1"}),
    );
    assert_eq!(code(&r), "not_found", "{r}");
    running(&m, 1);
    // max_minutes outside the range, with the range.
    for bad in [json!(0), json!(100000), json!(-1)] {
        let r = c.call(
            7,
            "sandbox.launch",
            json!({"line": "true", "projects": [proj], "background": {"max_minutes": bad}}),
        );
        assert_eq!(code(&r), "invalid", "{r}");
        assert!(message(&r).contains("0.005 to 1440"), "{r}");
    }
    let r = c.call(
        8,
        "sandbox.launch",
        json!({"line": "true", "projects": [proj],
               "background": {"max_minutes": 1, "watch": "(unclosed"}}),
    );
    assert_eq!(code(&r), "invalid", "{r}");
    let r = c.call(
        9,
        "sandbox.launch",
        json!({"line": "true", "projects": [proj], "unsandboxed": true,
               "background": {"max_minutes": 1}}),
    );
    assert_eq!(code(&r), "invalid", "{r}");
    assert!(message(&r).contains("unsandboxed"), "{r}");
    let r = c.call(
        10,
        "sandbox.call_background",
        json!({"call_id": "call-999", "max_minutes": 1}),
    );
    assert_eq!(code(&r), "not_found", "{r}");
    let r = stop(&mut c, 11, json!({"conversation": "c1", "job_id": "j1"}));
    assert_eq!(r["end"]["job"]["state"], "stopped", "{r}");
    gone(&m, Duration::from_secs(5));
}

#[test]
fn a_running_call_moves_to_a_job_and_its_output_goes_on() {
    for (n, backend) in backends().into_iter().enumerate() {
        let s = Server::start(&[]);
        let proj = project(&s.home);
        let m = marker(50 + n as u32);
        let mut c = s.client();
        c.request(
            1,
            "sandbox.launch",
            json!({
                "line": format!("echo before; read x < /dev/null; sleep 1; echo after; sleep {m}"),
                "projects": [proj],
                "backend": backend,
                "conversation": "c1",
            }),
        );
        let started = c.recv();
        assert_eq!(started["item"]["kind"], "started", "{started}");
        let call_id = started["item"]["call_id"].as_str().unwrap().to_owned();
        let before = c.recv();
        assert_eq!(before["item"]["data"], "before\n", "{before}");
        // Another conversation cannot move it; the right one can.
        let mut other = s.client();
        let r = other.call(
            2,
            "sandbox.call_background",
            json!({"conversation": "c2", "call_id": call_id, "max_minutes": 1}),
        );
        assert_eq!(code(&r), "not_found", "{r}");
        let r = other.call(
            3,
            "sandbox.call_background",
            json!({"conversation": "c1", "call_id": call_id, "max_minutes": 1}),
        );
        assert_eq!(r["end"]["job_id"], "j1", "{r}");
        let (items, end) = collect(&mut c, 1);
        assert_eq!(items.last().unwrap()["kind"], "moved", "{items:?}");
        assert_eq!(items.last().unwrap()["job_id"], "j1");
        assert_eq!(end["end"], json!({"job_id": "j1", "moved": true}));
        // It was not restarted: "before" is not in the job's output, "after" is.
        let j = wait_job(&mut other, Some("c1"), "j1", |j| j["output_bytes"] == 6);
        assert_eq!(j["moved_from"]["call_id"], call_id.as_str());
        assert!(j["moved_from"]["after_secs"].as_f64().unwrap() < 5.0);
        let (text, _) = output(&mut other, 4, "c1", "j1");
        assert_eq!(text, "after\n");
        // The next call finds a launcher in standby again, while the job runs on.
        let svc = s.child.id().to_string();
        let busy = started["item"]["launcher_pid"].as_u64().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !warm_launcher_of(&svc, busy) {
            assert!(
                Instant::now() < deadline,
                "no launcher in standby after the move"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        running(&m, 1);
        let r = other.call(
            5,
            "sandbox.job_stop",
            json!({"conversation": "c1", "job_id": "j1"}),
        );
        assert_eq!(r["end"]["job"]["state"], "stopped");
        gone(&m, Duration::from_secs(5));
    }
}

#[test]
fn an_unsandboxed_call_does_not_move() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    c.request(
        1,
        "sandbox.launch",
        json!({"line": "echo x; sleep 2", "projects": [proj], "unsandboxed": true}),
    );
    let started = c.recv();
    let call_id = started["item"]["call_id"].as_str().unwrap().to_owned();
    let mut other = s.client();
    let r = other.call(
        2,
        "sandbox.call_background",
        json!({"call_id": call_id, "max_minutes": 1}),
    );
    assert_eq!(code(&r), "invalid", "{r}");
    assert!(message(&r).contains("unsandboxed"), "{r}");
    let (_, end) = collect(&mut c, 1);
    assert_eq!(end["end"]["code"], 0, "the call ran to its end: {end}");
}

#[test]
fn the_services_end_ends_every_job_and_the_next_one_reports_them() {
    // A stop (SIGTERM): the service ends its jobs itself (`daemon_stop`).
    let dir = temp_env();
    let s = Server::start_in(dir, &[]);
    let proj = project(&s.home);
    let m = marker(60);
    let mut c = s.client();
    start_job(
        &mut c,
        1,
        json!({"line": format!("sleep {m}"), "projects": [proj], "conversation": "c1",
               "background": {"max_minutes": 5}}),
    );
    let mut ev = s.client();
    ev.request(2, "sandbox.job_events", json!({"conversation": "c1"}));
    running(&m, 1);
    let mut s = s;
    let st = s.signal_and_wait(nix::sys::signal::Signal::SIGTERM);
    assert!(st.success(), "{st}: {}", s.stderr());
    let e = ev.recv();
    assert_eq!(e["item"]["kind"], "job_ended", "{e}");
    assert_eq!(e["item"]["stopped_by"], "daemon_stop");
    gone(&m, Duration::from_secs(5));
    let dir = s.take_dir();
    drop(s);

    // A kill (SIGKILL): its jobs end with it, and the next service reports them ended by
    // its restart.
    let s = Server::start_in(dir, &[]);
    let m2 = marker(61);
    let mut c = s.client();
    start_job(
        &mut c,
        1,
        json!({"line": format!("sleep {m2}"), "projects": [proj], "conversation": "c1",
               "background": {"max_minutes": 5}}),
    );
    // The first service's job is listed as it ended (`daemon_stop`), and the second
    // numbers on.
    let listed = jobs(&mut c, 2, Some("c1"));
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0]["id"], "j2", "{listed:?}");
    assert_eq!(listed[0]["state"], "running", "{listed:?}");
    assert_eq!(listed[1]["id"], "j1", "{listed:?}");
    assert_eq!(listed[1]["stopped_by"], "daemon_stop", "{listed:?}");
    let mut s = s;
    s.signal_and_wait(nix::sys::signal::Signal::SIGKILL);
    gone(&m2, Duration::from_secs(5));
    let dir = s.take_dir();
    drop(s);
    let s = Server::start_in(dir, &[]);
    let mut c = s.client();
    let listed = jobs(&mut c, 1, Some("c1"));
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0]["id"], "j2", "{listed:?}");
    assert_eq!(listed[0]["state"], "stopped");
    assert_eq!(listed[0]["stopped_by"], "daemon_restart");
    // The job that ended under the first service is still listed, as it ended.
    assert_eq!(listed[1]["id"], "j1", "{listed:?}");
    assert_eq!(listed[1]["stopped_by"], "daemon_stop");
    // A new job of the conversation does not take their ids.
    let (_, _, end) = start_job(
        &mut c,
        2,
        json!({"line": "true", "projects": [proj], "conversation": "c1",
               "background": {"max_minutes": 1}}),
    );
    assert_eq!(end["job_id"], "j3", "{end}");
}

/// A service whose config holds `jobs` (the body of a `[jobs]` table).
fn server_with_jobs_config(jobs: &str) -> Server {
    let dir = temp_env();
    std::fs::create_dir_all(dir.path().join("config/efr")).unwrap();
    std::fs::write(
        dir.path().join("config/efr/config.toml"),
        format!("[jobs]\n{jobs}\n"),
    )
    .unwrap();
    Server::start_in(dir, &[])
}

/// The cgroup a job gets here: as root, one of its own (MUST_WORK: root can always make
/// one, through v2 or v1); as a user, one where the user's cgroup is delegated, else `off`
/// with why (the CI's user has no systemd user manager: `v1_only` or `no_delegation`).
fn expect_cgroup(job: &Value) -> bool {
    let cg = &job["cgroup"];
    if common::is_root() {
        assert!(cg["off"].is_null(), "root gets a cgroup: {job}");
        assert!(cg["pids_max"].as_u64().is_some(), "{job}");
        true
    } else if cg["off"].is_null() {
        true
    } else {
        let off = cg["off"].as_str().unwrap();
        assert!(
            ["v1_only", "no_delegation", "no_controllers"].contains(&off),
            "{job}"
        );
        assert!(!cg["off_detail"].as_str().unwrap_or("").is_empty(), "{job}");
        false
    }
}

#[test]
fn a_fork_bomb_in_a_job_stops_at_its_process_limit() {
    let s = server_with_jobs_config("pids_max = 64");
    let proj = project(&s.home);
    let m = marker(70);
    let mut c = s.client();
    let bomb = format!(
        "exec python3 -c 'import os, time\nsaid = False\nwhile True:\n    try:\n        if os.fork() == 0:\n            \
         time.sleep(60); os._exit(0)\n    except OSError:\n        if not said:\n            \
         print(\"fork refused\", flush=True); said = True\n        time.sleep(0.01)' {m}"
    );
    let (_, job, _) = start_job(
        &mut c,
        1,
        json!({"line": bomb, "projects": [proj], "conversation": "c1",
               "background": {"max_minutes": 2}}),
    );
    // With a cgroup, its pids.max; without (a user with no delegation), the line's
    // RLIMIT_NPROC, which the kernel counts in the job's own user namespace.
    expect_cgroup(&job["job"]);
    assert_eq!(job["job"]["cgroup"]["pids_max"], 64, "{job}");
    // The bomb fills its limit and goes on trying: it never gets past it.
    let count = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains(&m))
                    .unwrap_or(false)
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut most = 0;
    while Instant::now() < deadline && most < 60 {
        most = most.max(count());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    most = most.max(count());
    // The kernel refused a fork (the limit stopped the bomb, not its own pace) once it
    // had filled its bound: the init and its threads count too, the bomb has fewer than 64.
    let mut said = String::new();
    for id in 100..300 {
        c.request(
            id,
            "sandbox.job_output",
            json!({"conversation": "c1", "job_id": "j1", "offset": 0}),
        );
        let (items, _) = collect(&mut c, id);
        said = items.iter().filter_map(|i| i["data"].as_str()).collect();
        if said.contains("fork refused") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        said.contains("fork refused"),
        "no fork was refused: {said:?}"
    );
    assert!(most >= 56, "the bomb forked: {most}");
    assert!(most <= 64, "the bomb stayed under its bound: {most}");
    let j = wait_job(&mut c, Some("c1"), "j1", |_| true);
    assert_eq!(j["state"], "running", "{j}");
    let r = c.call(
        3,
        "sandbox.job_stop",
        json!({"conversation": "c1", "job_id": "j1"}),
    );
    assert_eq!(r["end"]["job"]["state"], "stopped", "{r}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while count() > 0 {
        assert!(Instant::now() < deadline, "the bomb's processes are left");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_job_that_reaches_its_memory_limit_fails_with_the_reason() {
    let s = server_with_jobs_config("memory_max = \"64M\"");
    let proj = project(&s.home);
    let mut c = s.client();
    let m = marker(80);
    let (_, job, _) = start_job(
        &mut c,
        1,
        json!({"line": format!("sleep {m} & python3 -c 'b = bytearray(300 * 1024 * 1024); \
                                import time; time.sleep(60)'; wait"),
               "projects": [proj], "conversation": "c1",
               "background": {"max_minutes": 2}}),
    );
    if !expect_cgroup(&job["job"]) {
        let r = c.call(
            2,
            "sandbox.job_stop",
            json!({"conversation": "c1", "job_id": "j1"}),
        );
        assert_eq!(r["end"]["job"]["state"], "stopped", "{r}");
        return;
    }
    assert_eq!(job["job"]["cgroup"]["memory_max"], 64 * 1024 * 1024);
    let j = wait_job(&mut c, Some("c1"), "j1", |j| j["state"] != "running");
    assert_eq!(j["state"], "failed", "{j}");
    assert!(
        j["reason"].as_str().unwrap().contains("memory limit"),
        "{j}"
    );
    // The whole job ended, not only the process the kernel chose.
    gone(&m, Duration::from_secs(5));
    let peak = j["cgroup"]["memory_bytes"].as_u64().unwrap();
    assert!(peak > 32 * 1024 * 1024, "the peak is near the limit: {j}");
}

/// A port free on the host's loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The next `job_port_forwarded` event of `ev` for `job_id`.
fn forwarded(ev: &mut common::Client, job_id: &str) -> Value {
    loop {
        let f = ev.recv();
        let e = &f["item"];
        if e["kind"] == "job_port_forwarded" && e["job_id"] == job_id {
            return e.clone();
        }
    }
}

#[test]
fn a_jobs_server_is_reachable_from_the_hosts_loopback_through_its_forward() {
    for backend in backends() {
        let s = Server::start(&[]);
        let proj = project(&s.home);
        std::fs::write(proj.join("index.html"), "served by the job\n").unwrap();
        let port = free_port();
        let mut ev = s.client();
        ev.request(90, "sandbox.job_events", json!({"conversation": "c1"}));
        let mut c = s.client();
        let server = |p: u16| {
            json!({"line": format!("exec python3 -m http.server {p} --bind 127.0.0.1"),
                   "projects": [proj], "backend": backend, "conversation": "c1",
                   "background": {"max_minutes": 2}})
        };
        start_job(&mut c, 1, server(port));
        let e = forwarded(&mut ev, "j1");
        assert_eq!(e["outcome"], "forwarded", "{e} ({backend})");
        assert_eq!(e["listen"], "127.0.0.1");
        assert_eq!(e["port"], port);
        // The host's loopback reaches the job's server.
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        std::io::Write::write_all(
            &mut conn,
            b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n",
        )
        .unwrap();
        let mut page = String::new();
        std::io::Read::read_to_string(&mut conn, &mut page).unwrap();
        assert!(page.contains("served by the job"), "{page}");
        // More connections than the sockets made ahead at a time (16): each is served.
        for n in 0..40 {
            let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            std::io::Write::write_all(&mut conn, b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
            let mut page = String::new();
            std::io::Read::read_to_string(&mut conn, &mut page).unwrap();
            assert!(page.contains("served by the job"), "connection {n}: {page}");
        }
        let j = wait_job(&mut c, Some("c1"), "j1", |j| j["forwards"].is_array());
        assert_eq!(j["forwards"][0]["port"], port, "{j}");
        // A second job of the conversation on the same port: in use, by j1.
        start_job(&mut c, 2, server(port));
        let e = forwarded(&mut ev, "j2");
        assert_eq!(e["outcome"], "in_use", "{e}");
        assert_eq!(e["by_job"], "j1");
        // Port 22: a job may listen there in its own namespace; it is not forwarded.
        start_job(&mut c, 3, server(22));
        let e = forwarded(&mut ev, "j3");
        assert_eq!(e["outcome"], "refused", "{e}");
        assert!(!e["reason"].as_str().unwrap_or("").is_empty(), "{e}");
        // Stopped with the job: the port is the host's again.
        let r = c.call(
            4,
            "sandbox.job_stop",
            json!({"conversation": "c1", "job_id": "j1"}),
        );
        assert_eq!(r["end"]["job"]["state"], "stopped", "{r}");
        assert!(r["end"]["job"]["forwards"].is_null(), "{r}");
        let e = forwarded(&mut ev, "j1");
        assert_eq!(e["outcome"], "stopped", "{e}");
        for id in ["j2", "j3"] {
            c.call(
                5,
                "sandbox.job_stop",
                json!({"conversation": "c1", "job_id": id}),
            );
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the host port stays taken");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_job_whose_launcher_dies_is_reported_lost_and_leaves_nothing() {
    for (n, backend) in backends().into_iter().enumerate() {
        let s = Server::start(&[]);
        let proj = project(&s.home);
        let m = marker(90 + n as u32);
        let mut c = s.client();
        let (started, _, _) = start_job(
            &mut c,
            1,
            json!({"line": format!("sleep {m} & sleep {m}"), "projects": [proj],
                   "backend": backend, "conversation": "c1",
                   "background": {"max_minutes": 2}}),
        );
        running(&m, 2);
        let launcher = started["launcher_pid"].as_u64().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(launcher).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let j = wait_job(&mut c, Some("c1"), "j1", |j| j["state"] != "running");
        assert_eq!(j["state"], "failed", "{j} ({backend})");
        assert_eq!(j["launcher_lost"], true, "{j}");
        assert!(!j["reason"].as_str().unwrap_or("").is_empty(), "{j}");
        gone(&m, Duration::from_secs(5));
    }
}

#[test]
fn only_sandbox_launch_starts_a_job() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    let r = c.call(
        1,
        "sandbox.plan",
        json!({"line": "true", "projects": [proj], "background": {"max_minutes": 1}}),
    );
    assert_eq!(code(&r), "invalid", "{r}");
    assert!(message(&r).contains("sandbox.launch"), "{r}");
    assert!(jobs(&mut c, 2, None).is_empty());
}

#[test]
fn a_second_service_beside_the_first_leaves_its_jobs_alone() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let m = marker(95);
    let mut c = s.client();
    start_job(
        &mut c,
        1,
        json!({"line": format!("sleep {m}"), "projects": [proj], "conversation": "c1",
               "background": {"max_minutes": 2}}),
    );
    running(&m, 1);
    // Another socket in the same runtime dir: another service, with a record of its own.
    let other = s.dir.path().join("run/other.sock");
    // Killed however the test ends.
    let second = common::KillOnDrop(
        common::command(s.dir.path())
            .args(["serve", "--socket"])
            .arg(&other)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !other.exists() {
        assert!(
            Instant::now() < deadline,
            "the second service did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c2 = common::Client::connect(&other);
    c2.call(0, "hello", json!({"protocol": 1, "client": "test"}));
    assert!(jobs(&mut c2, 1, Some("c1")).is_empty());
    drop(second);
    // The first one's job runs on, and is its own.
    running(&m, 1);
    let j = wait_job(&mut c, Some("c1"), "j1", |_| true);
    assert_eq!(j["state"], "running", "{j}");
    c.call(
        2,
        "sandbox.job_stop",
        json!({"conversation": "c1", "job_id": "j1"}),
    );
    gone(&m, Duration::from_secs(5));
}

#[test]
fn a_jobs_server_on_ipv6_loopback_is_forwarded_to_the_hosts() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        // The host has no IPv6 loopback: nothing to forward to.
        assert!(
            std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
            "EFR_SANDBOX_MUST_WORK is set and the host has no ::1"
        );
        return;
    }
    let s = Server::start(&[]);
    let proj = project(&s.home);
    std::fs::write(proj.join("index.html"), "served on ::1\n").unwrap();
    let port = std::net::TcpListener::bind("[::1]:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut ev = s.client();
    ev.request(90, "sandbox.job_events", json!({"conversation": "c1"}));
    let mut c = s.client();
    start_job(
        &mut c,
        1,
        json!({"line": format!("exec python3 -m http.server {port} --bind ::1"),
               "projects": [proj], "conversation": "c1",
               "background": {"max_minutes": 2}}),
    );
    let e = forwarded(&mut ev, "j1");
    assert_eq!(e["outcome"], "forwarded", "{e}");
    assert_eq!(e["listen"], "::1");
    let mut conn = std::net::TcpStream::connect(("::1", port)).unwrap();
    std::io::Write::write_all(&mut conn, b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
    let mut page = String::new();
    std::io::Read::read_to_string(&mut conn, &mut page).unwrap();
    assert!(page.contains("served on ::1"), "{page}");
    // Only ::1: the host's 127.0.0.1 of that port is not the job's.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    c.call(
        2,
        "sandbox.job_stop",
        json!({"conversation": "c1", "job_id": "j1"}),
    );
}

#[test]
fn a_jobs_line_runs_under_bash() {
    let s = Server::start(&[]);
    let proj = project(&s.home);
    let mut c = s.client();
    for (n, b) in backends().into_iter().enumerate() {
        let conv = format!("bash-{b}");
        let (_, job, _) = start_job(
            &mut c,
            1 + n as u64,
            json!({"line": "[[ -n x ]] && echo {a,b}", "projects": [proj], "backend": b,
                   "conversation": conv, "background": {"max_minutes": 1}}),
        );
        let id = job["job"]["id"].as_str().unwrap().to_string();
        wait_job(&mut c, Some(&conv), &id, |j| j["state"] != "running");
        let (text, _) = output(&mut c, 100 + n as u64, &conv, &id);
        assert_eq!(text, "a b\n", "{b}");
    }
}
