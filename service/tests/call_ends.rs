//! Every way a `sandbox.launch` ends runs the same end as a call read to its finish: a
//! cancel, a client that hangs up, a client that stops reading while the line floods its
//! output; and a `sandbox.run` whose CLI is killed (its connection hangs up). After each, on each backend: no launcher of the call is left (running or a
//! zombie), the service holds no more fds than before, the call's cache layer is merged
//! and gone (its lock with it), and the service's log has the call's finish.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Client, Server, backends, code};
use serde_json::json;

/// A temp dir outside `/tmp` (each call has its own) with `home/proj` and `home/.npm` (a
/// cache the calls get a layer of).
fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir_all(dir.path().join("home/proj")).unwrap();
    std::fs::create_dir_all(dir.path().join("home/.npm")).unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    dir
}

fn layers(s: &Server) -> Vec<PathBuf> {
    std::fs::read_dir(s.home.join(".local/state/efr-sandbox/layers"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The service's children: (pid, state, name).
fn children(pid: u32) -> Vec<(u32, char, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold spaces, the last ')' ends it.
            let (head, rest) = stat.rsplit_once(") ")?;
            let name = head.split_once(" (")?.1.to_owned();
            let mut f = rest.split(' ');
            let state = f.next()?.chars().next()?;
            let ppid: u32 = f.next()?.parse().ok()?;
            (ppid == pid).then_some((p, state, name))
        })
        .collect()
}

/// What is left of the service after its calls: fds, children (a launcher in standby is
/// one), zombies, cache layers.
#[derive(Debug, PartialEq)]
struct Left {
    fds: usize,
    children: usize,
    zombies: Vec<(u32, char, String)>,
    layers: Vec<PathBuf>,
}

fn left(s: &Server) -> Left {
    let kids = children(s.child.id());
    Left {
        fds: fds(s.child.id()),
        children: kids.len(),
        zombies: kids.into_iter().filter(|k| k.1 == 'Z').collect(),
        layers: layers(s),
    }
}

/// Waits until what is left is no more than `before` (the service's background work, such
/// as refilling its standby, takes a moment); fails with what is left.
fn settles_to(s: &Server, before: &Left, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = left(s);
        let ok = now.fds <= before.fds
            && now.children <= before.children
            && now.zombies.is_empty()
            && now.layers.is_empty();
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the calls were not finished: before {before:?}, now {now:?}\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn launch(c: &mut Client, id: u64, home: &Path, backend: &str, line: &str) {
    c.request(
        id,
        "sandbox.launch",
        json!({
            "line": line,
            "projects": [home.join("proj")],
            "cwd": home.join("proj"),
            "backend": backend,
        }),
    );
}

/// Reads the call's frames until `started`.
fn until_started(c: &mut Client, id: u64) {
    loop {
        let f = c.recv();
        assert_eq!(f["id"], json!(id), "{f}");
        assert!(
            f.get("item").is_some(),
            "the call ended before it started: {f}"
        );
        if f["item"]["kind"] == "started" {
            return;
        }
    }
}

/// Whether a file named `name` is anywhere below `dir`.
fn holds(dir: &Path, name: &str) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        e.file_name().to_str() == Some(name)
            || (e.file_type().is_ok_and(|t| t.is_dir()) && holds(&e.path(), name))
    })
}

/// Waits until the running call's write in the cache is in its layer.
fn wait_written(s: &Server, n: usize) {
    let path = put_path(&seed(n));
    let name = path.rsplit('/').next().unwrap();
    let dir = s.home.join(".local/state/efr-sandbox/layers");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !holds(&dir, name) {
        assert!(Instant::now() < deadline, "the call's write is in no layer");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell function for a call's line: `put SEED` writes the npm content SEED addressed by
/// its sha512 (a file the merge verifies without asking a registry, so that it reaches the
/// cache once the call's layer is merged). The file gets its name by a rename in the
/// cache, whole: a test that sees the name knows the content is there.
const PUT: &str = "put() { c=~/.npm/_cacache; mkdir -p $c; printf '%s' \"$1\" > $c/put.t; \
    h=$(sha512sum $c/put.t | cut -c1-128); \
    p=content-v2/sha512/$(echo $h | cut -c1-2)/$(echo $h | cut -c3-4); \
    mkdir -p $c/$p && mv $c/put.t $c/$p/$(echo $h | cut -c5-); }; ";

/// Where `put SEED` puts its content, below the home.
fn put_path(seed: &str) -> String {
    use sha2::Digest;
    let h: String = sha2::Sha512::digest(seed.as_bytes())
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    format!(
        ".npm/_cacache/content-v2/sha512/{}/{}/{}",
        &h[..2],
        &h[2..4],
        &h[4..]
    )
}

fn seed(n: usize) -> String {
    format!("ends-{n}-{}", std::process::id())
}

/// A call that writes in the cache and then waits.
fn sleeps(n: usize) -> String {
    format!("{PUT}put {}; exec sleep 1000", seed(n))
}

/// A call that writes in the cache and then floods its output.
fn floods(n: usize) -> String {
    format!("{PUT}put {}; exec cat /dev/zero", seed(n))
}

/// Runs calls of `line` each ended by `end`, on every backend; checks that each was
/// finished as a call read to its end is.
fn each_ends(
    what: &str,
    extra: &[&str],
    line: fn(usize) -> String,
    end: impl Fn(&Server, Client, u64, usize),
) {
    for b in backends() {
        let s = Server::start_in(temp_env(), extra);
        // One call read to its end first: what the service holds between calls.
        let mut c = s.client();
        launch(&mut c, 1, &s.home, b, &format!("{PUT}put {}", seed(0)));
        let (_, fin) = common::collect(&mut c, 1);
        assert_eq!(fin["end"]["exit_status"], 0, "{b}: {fin}");
        drop(c);
        std::thread::sleep(Duration::from_millis(500));
        let before = left(&s);
        assert!(before.layers.is_empty(), "{b}: {before:?}");
        let calls = 6;
        for n in 1..=calls {
            let mut c = s.client();
            launch(&mut c, 7, &s.home, b, &line(n));
            until_started(&mut c, 7);
            wait_written(&s, n);
            end(&s, c, 7, n);
            // Each one's layer is merged before the next.
            settles_to(&s, &before, &format!("{b}: {what} {n}"));
        }
        for n in 0..=calls {
            let f = s.home.join(put_path(&seed(n)));
            assert_eq!(
                std::fs::read_to_string(&f).ok(),
                Some(seed(n)),
                "{b}: {what}: the write of call {n} was not merged"
            );
        }
        // The log line comes last, after the call's record and its proxy's end: waited for.
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.stderr().matches("ended after its caller left").count() < calls
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let logged = s.stderr().matches("ended after its caller left").count();
        assert_eq!(logged, calls, "{b}: {what}: {}", s.stderr());
    }
}

#[test]
fn a_cancelled_call_is_finished() {
    each_ends("cancel", &[], sleeps, |_, mut c, id, _| {
        c.send(&json!({"cancel": id}));
        // Items sent before the cancel was read may come first.
        let f = loop {
            let f = c.recv();
            if f.get("item").is_none() {
                break f;
            }
        };
        assert_eq!(code(&f), "cancelled", "{f}");
    });
}

#[test]
fn a_call_whose_client_hung_up_is_finished() {
    each_ends("hang-up", &[], sleeps, |_, c, _, _| drop(c));
}

#[test]
fn a_call_whose_client_stopped_reading_is_finished() {
    // The client reads nothing after `started` and keeps its connection open; the service
    // closes it after the (test-short) time a client may leave its answers unread.
    each_ends(
        "stopped reading",
        &["--slow-reader-ms", "300"],
        floods,
        |s, c, _, n| {
            let deadline = Instant::now() + Duration::from_secs(20);
            while s
                .stderr()
                .matches("client does not read its answers")
                .count()
                < n
            {
                assert!(
                    Instant::now() < deadline,
                    "the service did not drop a client that stopped reading: {}",
                    s.stderr()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(c);
        },
    );
}

/// `efr-sandbox run --backend B -- LINE` handed to the service `s` (`sandbox.run`; the
/// CLI's own launcher made unusable, so that a call it ran itself would fail).
fn run_cli(s: &Server, backend: &str, line: &str) -> std::process::Command {
    let proj = s.home.join("proj");
    let mut c = common::command(s.dir.path());
    c.env_remove("EFR_SANDBOX_NO_SERVICE")
        .env("EFR_SANDBOX_SOCKET", &s.socket)
        .env("EFR_LAUNCH", "/nonexistent/efr-launch")
        .current_dir(&proj)
        .args(["run", "--backend", backend, "--project"])
        .arg(&proj)
        .args(["--", line]);
    c
}

#[test]
fn a_run_whose_cli_was_killed_is_finished() {
    use std::io::BufRead;
    for b in backends() {
        let s = Server::start_in(temp_env(), &[]);
        let o = run_cli(&s, b, &format!("{PUT}put {}", seed(0)))
            .output()
            .unwrap();
        assert!(o.status.success(), "{b}: {o:?}\n{}", s.stderr());
        std::thread::sleep(Duration::from_millis(500));
        let before = left(&s);
        assert!(before.layers.is_empty(), "{b}: {before:?}");
        let calls = 3;
        for n in 1..=calls {
            let line = format!("{PUT}put {}; echo ready; exec sleep 1000", seed(n));
            let mut child = run_cli(&s, b, &line)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            assert_eq!(l, "ready\n", "{b}: {}", s.stderr());
            // Killed outright: its connection to the service hangs up mid-call.
            child.kill().unwrap();
            child.wait().unwrap();
            settles_to(&s, &before, &format!("{b}: killed run {n}"));
        }
        for n in 0..=calls {
            let f = s.home.join(put_path(&seed(n)));
            assert_eq!(
                std::fs::read_to_string(&f).ok(),
                Some(seed(n)),
                "{b}: the write of run {n} was not merged"
            );
        }
        // The log line comes last, after the call's record and its proxy's end: waited for.
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.stderr().matches("ended after its caller left").count() < calls
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let logged = s.stderr().matches("ended after its caller left").count();
        assert_eq!(logged, calls, "{b}: {}", s.stderr());
    }
}
