//! The service's launcher in standby (`efr_call::standby`): a native contained call takes
//! the launcher the service started ahead (its `started` item names that launcher), the
//! next one is started once the call has ended, a call it was not made for (bubblewrap,
//! unsandboxed, the host's network) leaves it waiting, `--no-standby` keeps none, and none
//! outlives its service.

mod common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::{Value, json};

/// The launchers in standby of the service `pid`: its children started with `--warm`.
fn standbys(pid: u32) -> Vec<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    // The service's threads each have a children list: read them all.
    let mut kids: Vec<u32> = children
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in rd.flatten() {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            kids.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    kids.sort();
    kids.dedup();
    kids.into_iter()
        .filter(|k| {
            let cmd = std::fs::read(format!("/proc/{k}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains("\0--warm\0")
        })
        .collect()
}

/// Waits up to 5 s for the service to have exactly one standby other than `not`.
fn one_standby(pid: u32, not: Option<u32>) -> u32 {
    let t0 = Instant::now();
    loop {
        let s: Vec<u32> = standbys(pid)
            .into_iter()
            .filter(|&p| Some(p) != not)
            .collect();
        if s.len() == 1 {
            return s[0];
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no standby launcher: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn launch(s: &Server, id: u64, params: Value) -> (Vec<Value>, Value) {
    let mut c = s.client();
    c.request(id, "sandbox.launch", params);
    common::collect(&mut c, id)
}

/// The text of one stream (`stdout`, `stderr`) in a launch's output items.
fn text(items: &[Value], stream: &str) -> String {
    items
        .iter()
        .filter(|i| i["kind"] == "output" && i["stream"] == stream)
        .map(|i| i["data"].as_str().expect("text output"))
        .collect()
}

#[test]
fn a_native_call_takes_the_standby_and_the_next_one_is_started_after_it() {
    let s = Server::start(&[]);
    let pid = s.child.id();
    let first = one_standby(pid, None);
    let (items, end) = launch(
        &s,
        1,
        json!({"line": "echo hi", "cwd": "/", "backend": "native"}),
    );
    assert_eq!(items[0]["kind"], "started", "{items:?}");
    assert_eq!(
        items[0]["launcher_pid"].as_u64(),
        Some(u64::from(first)),
        "the call ran in the standby: {items:?}"
    );
    assert_eq!(end["end"]["exit_status"], 0, "{end}");
    let second = one_standby(pid, Some(first));
    assert_ne!(second, first);
    // Calls it was not made for leave it waiting.
    let mut others = vec![json!({"line": "true", "cwd": "/", "unsandboxed": true})];
    if std::path::Path::new("/usr/bin/bwrap").exists() {
        others.push(json!({"line": "true", "cwd": "/", "backend": "bwrap"}));
    }
    for (i, p) in others.into_iter().enumerate() {
        let (items, end) = launch(&s, 10 + i as u64, p.clone());
        assert_eq!(end["end"]["exit_status"], 0, "{p}: {end}");
        assert_ne!(
            items[0]["launcher_pid"].as_u64(),
            Some(u64::from(second)),
            "{p}: {items:?}"
        );
        assert_eq!(
            standbys(pid),
            vec![second],
            "{p}: the standby is still there"
        );
    }
}

#[test]
fn no_standby_keeps_none_and_calls_still_run() {
    let s = Server::start(&["--no-standby"]);
    let (items, end) = launch(&s, 1, json!({"line": "echo hi", "cwd": "/"}));
    assert_eq!(items[0]["kind"], "started", "{items:?}");
    assert_eq!(end["end"]["exit_status"], 0, "{end}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        standbys(s.child.id()).is_empty(),
        "a standby with --no-standby"
    );
}

/// Calls at once: one takes the standby, the others start their own launchers; every one
/// runs its own line.
#[test]
fn calls_at_once_share_one_standby() {
    let s = Server::start(&[]);
    one_standby(s.child.id(), None);
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4u64)
            .map(|i| {
                let s = &s;
                sc.spawn(move || {
                    launch(
                        s,
                        i + 1,
                        json!({"line": format!("echo call {i}"), "cwd": "/", "backend": "native"}),
                    )
                })
            })
            .collect();
        for (i, h) in hs.into_iter().enumerate() {
            let (items, end) = h.join().unwrap();
            assert_eq!(end["end"]["exit_status"], 0, "{end}");
            let out: String = items
                .iter()
                .filter(|x| x["kind"] == "output")
                .map(|x| x["data"].as_str().unwrap_or_default())
                .collect();
            assert_eq!(out, format!("call {i}\n"), "{items:?}");
        }
    });
    // And one waits again for the next.
    one_standby(s.child.id(), None);
}

/// A call through the standby hands on all of its output, both streams, in each stream's
/// order, before its end: the service reads the pipes on its runtime and goes on once they
/// are at their end and the status says how the call ended, without waiting for the
/// launcher's exit.
#[test]
fn a_call_through_the_standby_hands_on_all_its_output_before_its_end() {
    let s = Server::start(&[]);
    one_standby(s.child.id(), None);
    // 4 MiB on stdout and 1 MiB on stderr, numbered lines interleaved, then a last line
    // on each.
    let line = "i=0; while [ $i -lt 2000 ]; do \
                  printf '%05d %01990d\\n' $i 0; printf 'e%05d %01000d\\n' $i 0 >&2; \
                  i=$((i+1)); done; echo out-end; echo err-end >&2";
    let (items, end) = launch(
        &s,
        1,
        json!({"line": line, "cwd": "/", "backend": "native"}),
    );
    assert_eq!(end["end"]["exit_status"], 0, "{end}");
    let out = text(&items, "stdout");
    let err = text(&items, "stderr");
    assert_eq!(out.len(), 2000 * 1997 + "out-end\n".len(), "stdout bytes");
    assert_eq!(err.len(), 2000 * 1008 + "err-end\n".len(), "stderr bytes");
    for (n, l) in out.lines().take(2000).enumerate() {
        assert!(
            l.starts_with(&format!("{n:05} ")),
            "stdout line {n}: {}",
            &l[..10]
        );
    }
    for (n, l) in err.lines().take(2000).enumerate() {
        assert!(
            l.starts_with(&format!("e{n:05} ")),
            "stderr line {n}: {}",
            &l[..10]
        );
    }
    assert!(out.ends_with("out-end\n") && err.ends_with("err-end\n"));
    assert_eq!(items[0]["kind"], "started", "started comes first");
}

/// The service hands on output that comes after the launcher's last status line (a
/// launcher, here a stand-in, that writes its `exited` line first, then output, then
/// closes its pipes): the call's end waits for the pipes' ends, not only for the status.
#[test]
fn output_after_the_last_status_line_is_not_lost() {
    let dir = common::temp_env();
    let fake = dir.path().join("fake-launch");
    std::fs::write(
        &fake,
        "#!/bin/sh\n\
         echo '{\"event\":\"started\",\"launcher_pid\":1,\"start_time_ms\":2,\"pid\":3,\"backend\":\"native\",\"seccomp\":true}' >&4\n\
         echo '{\"event\":\"exited\",\"code\":0,\"duration_ms\":1}' >&4\n\
         exec 4>&-\n\
         sleep 0.3\n\
         head -c 200000 /dev/zero | tr '\\0' x\n\
         echo; echo last\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = common::command(dir.path());
    cmd.env("EFR_LAUNCH", &fake)
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--no-standby");
    let s = Server::spawn(cmd, dir, socket);
    let (items, end) = launch(&s, 1, json!({"line": "true", "cwd": "/"}));
    assert_eq!(end["end"]["exit_status"], 0, "{end}");
    let out = text(&items, "stdout");
    assert_eq!(
        out.len(),
        200_000 + "\nlast\n".len(),
        "{}",
        &out[out.len().saturating_sub(20)..]
    );
    assert!(out.ends_with("\nlast\n"));
}

/// A call through the standby covers the host's listening sockets in its view as a cold
/// launch does: the standby reads them as the call is announced, while the plan is made
/// (`efr_launcher`'s `view::host_sockets::read_ahead`).
#[test]
fn a_call_through_the_standby_covers_the_hosts_listening_sockets() {
    let s = Server::start(&[]);
    let first = one_standby(s.child.id(), None);
    // Outside /tmp, which every call has its own of.
    let dir = tempfile::Builder::new()
        .prefix("efr-standby-socket-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let path = dir.path().join("daemon.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let line = format!("stat -c %F '{}'", path.display());
    let (items, end) = launch(
        &s,
        1,
        json!({"line": line, "cwd": "/", "backend": "native"}),
    );
    assert_eq!(
        items[0]["launcher_pid"].as_u64(),
        Some(u64::from(first)),
        "the call ran in the standby: {items:?}"
    );
    assert_eq!(end["end"]["exit_status"], 0, "{end}");
    let out = text(&items, "stdout");
    assert_eq!(out, "regular empty file\n", "{items:?}");
}
