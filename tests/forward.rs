//! Port forwards of jobs (`efr_jobs::forward`), through real contained calls on each
//! backend (and through a launcher in standby with `EFR_TEST_WARM=1`): a
//! `python3 -m http.server` in a call is reachable from the host's loopback through its
//! forward; a second job on the same port is `in_use` (with `by_job` in the same
//! conversation, without it in another), a port a host process holds is `in_use`, port 22
//! and the deny list's are `refused`, past the job's count is `limit`; a listener that
//! closes is `stopped` and frees its slot; `stop` reports `stopped`, and after it nothing
//! listens on the host's port and no socket maker is left. Each outcome is reported once.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use efr_jobs::forward::{ForwardConfig, ForwardEvent, ForwardOutcome, Forwards, Ports, start_with};
use efr_launcher::api::{BackendChoice, Io, Running};
use efr_sandbox_tests::common::{self, Fixture, backends, launcher, python};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// How long a job may take to listen and its forward to be reported.
const WAIT: Duration = Duration::from_secs(20);

/// A port free on the host's 127.0.0.1 now (the kernel's pick), so parallel tests never
/// take the same one.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running contained call, cancelled and reaped when dropped.
struct Job {
    running: Option<Running>,
    out: tempfile::NamedTempFile,
}

impl Job {
    fn start(fx: &Fixture, line: &str, backend: BackendChoice) -> Job {
        let plan = fx.plan(line, backend, Vec::new());
        let out = tempfile::NamedTempFile::new().unwrap();
        let (o, e) = (
            Io::from(out.reopen().unwrap()),
            Io::from(out.reopen().unwrap()),
        );
        let running = if common::warm() {
            launcher()
                .spawn_warm()
                .unwrap()
                .go(&plan, Io::null(), o, e)
                .unwrap()
        } else {
            launcher().spawn(&plan, Io::null(), o, e).unwrap()
        };
        Job {
            running: Some(running),
            out,
        }
    }

    fn pid(&self) -> u32 {
        self.running.as_ref().unwrap().child.id()
    }

    fn output(&self) -> String {
        std::fs::read_to_string(self.out.path()).unwrap_or_default()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            r.cancel();
            let _ = r.wait();
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Starts the forwards of `job` (retrying while its namespace is not made yet).
async fn forwards(
    job: &Job,
    conversation: &str,
    id: &str,
    cfg: ForwardConfig,
    ports: &Arc<Ports>,
) -> (Forwards, UnboundedReceiver<ForwardEvent>) {
    let (tx, rx) = unbounded_channel();
    let t0 = Instant::now();
    loop {
        match start_with(
            &launcher(),
            job.pid(),
            conversation,
            id,
            cfg.clone(),
            ports.clone(),
            tx.clone(),
        )
        .await
        {
            Ok(f) => return (f, rx),
            Err(e) if t0.elapsed() < WAIT => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}\njob's output: {}", job.output()),
        }
    }
}

/// Events until one for `port` with `outcome` comes (all of them, in order).
async fn until(
    rx: &mut UnboundedReceiver<ForwardEvent>,
    port: u16,
    outcome: ForwardOutcome,
    job: &Job,
) -> Vec<ForwardEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(e)) => {
                let done = e.port == port && e.outcome == outcome;
                seen.push(e);
                if done {
                    return seen;
                }
            }
            _ => panic!(
                "no {outcome:?} for port {port}; events: {seen:?}\njob's output: {}",
                job.output()
            ),
        }
    }
}

/// The one event of `events` for `port`.
fn one_for(events: &[ForwardEvent], port: u16) -> ForwardEvent {
    let of: Vec<&ForwardEvent> = events.iter().filter(|e| e.port == port).collect();
    assert_eq!(of.len(), 1, "one event for port {port}: {events:?}");
    of[0].clone()
}

/// `GET /` on the host's `127.0.0.1:port` (HTTP/1.0: the server closes after it), the
/// request's end a half-close: the answer still comes back through the forward.
fn get(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// The socket makers (`--ns-sockets`) of `jobs` alive: this process's children whose
/// `--pid` is a process of one of them (the other test of this binary has its own).
fn socket_makers(jobs: &[&Job]) -> Vec<i32> {
    let of_jobs: Vec<String> = jobs
        .iter()
        .flat_map(|j| common::descendants(j.pid() as i32))
        .map(|p| p.to_string())
        .collect();
    common::descendants(std::process::id() as i32)
        .into_iter()
        .filter(|&p| {
            let Ok(c) = std::fs::read(format!("/proc/{p}/cmdline")) else {
                return false;
            };
            let args: Vec<String> = c
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            common::alive(p)
                && args.iter().any(|a| a == "--ns-sockets")
                && args
                    .windows(2)
                    .any(|w| w[0] == "--pid" && of_jobs.contains(&w[1]))
        })
        .collect()
}

/// A python line that listens on 127.0.0.1 at each of `ports`, and closes the first of
/// them once `/tmp/close` exists.
fn listeners_line(ports: &[u16]) -> String {
    let list = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let script = format!(
        "import os, socket, time\n\
         def l(p):\n    s = socket.socket()\n    s.bind(('127.0.0.1', p))\n    s.listen()\n    return s\n\
         ss = [l(p) for p in ({list},)]\n\
         print('listening', flush=True)\n\
         while not os.path.exists('/tmp/close'):\n    time.sleep(0.05)\n\
         ss[0].close()\n\
         print('closed', flush=True)\n\
         time.sleep(3600)\n"
    );
    format!("exec {} -c \"{}\"", python(), script.replace('"', "\\\""))
}

#[test]
fn a_server_is_reachable_and_its_port_is_in_use_for_others() {
    for backend in backends() {
        let fx = Fixture::new();
        let port = free_port();
        // A host process's port.
        let host = TcpListener::bind("127.0.0.1:0").unwrap();
        let host_port = host.local_addr().unwrap().port();
        let server = Job::start(
            &fx,
            &format!("exec {} -m http.server {port} --bind 127.0.0.1", python()),
            backend,
        );
        let same_port = listeners_line(&[port]);
        let second = Job::start(&fx, &same_port, backend);
        let third = Job::start(&fx, &listeners_line(&[port, host_port]), backend);
        runtime().block_on(async {
            let ports = Arc::new(Ports::new());
            let cfg = ForwardConfig::default();
            let (f1, mut rx1) = forwards(&server, "conv", "job-1", cfg.clone(), &ports).await;
            let ev = until(&mut rx1, port, ForwardOutcome::Forwarded, &server).await;
            assert_eq!(
                ev,
                [ForwardEvent {
                    listen: "127.0.0.1".into(),
                    port,
                    outcome: ForwardOutcome::Forwarded,
                    by_job: None,
                    reason: None,
                }],
                "{backend:?}"
            );
            assert_eq!(f1.current(), [("127.0.0.1".to_string(), port)]);
            let page = tokio::task::spawn_blocking(move || get(port))
                .await
                .unwrap();
            assert!(
                page.starts_with("HTTP/1.0 200") && page.contains("README"),
                "{backend:?}: the listing of the project through the forward: {page}"
            );

            // The same port in a second job of the conversation: in use by the first.
            let (f2, mut rx2) = forwards(&second, "conv", "job-2", cfg.clone(), &ports).await;
            let ev = until(&mut rx2, port, ForwardOutcome::InUse, &second).await;
            assert_eq!(one_for(&ev, port).by_job.as_deref(), Some("job-1"));
            assert_eq!(one_for(&ev, port).reason, None);
            // In another conversation: in use, by no job named; a host process's port: in
            // use by it.
            let (f3, mut rx3) = forwards(&third, "other", "job-3", cfg.clone(), &ports).await;
            let mut ev = until(&mut rx3, port, ForwardOutcome::InUse, &third).await;
            if !ev.iter().any(|e| e.port == host_port) {
                ev.extend(until(&mut rx3, host_port, ForwardOutcome::InUse, &third).await);
            }
            let other = one_for(&ev, port);
            assert_eq!(other.by_job, None);
            assert_eq!(other.reason.as_deref(), Some("another conversation's job"));
            let by_host = one_for(&ev, host_port);
            assert_eq!(
                (by_host.outcome, by_host.reason.as_deref()),
                (
                    ForwardOutcome::InUse,
                    Some(format!("a host process listens on 127.0.0.1:{host_port}").as_str())
                )
            );
            assert!(f3.current().is_empty());
            // The third job's forwards stop first (it had none: nothing to say), so that
            // the port the first gives back has one job waiting for it.
            f3.stop().await;

            // The first job's forwards stop: `stopped`, and the port goes to the job of
            // the conversation that waited for it.
            f1.stop().await;
            let ev = until(&mut rx1, port, ForwardOutcome::Stopped, &server).await;
            assert_eq!(ev.len(), 1, "{ev:?}");
            let taken_again = until(&mut rx2, port, ForwardOutcome::Forwarded, &second).await;
            assert_eq!(taken_again.len(), 1, "{taken_again:?}");
            assert_eq!(f2.current(), [("127.0.0.1".to_string(), port)]);
            f2.stop().await;
            let ev = until(&mut rx2, port, ForwardOutcome::Stopped, &second).await;
            assert_eq!(ev.len(), 1, "{ev:?}");
            // The third job had no forward: nothing more to say.
            let more = rx3.try_recv();
            assert!(more.is_err(), "{more:?}");
            // The forward's listener is closed by its task right after `stopped` is said:
            // on a loaded machine that may take a moment.
            let mut last = Ok(());
            for _ in 0..40 {
                last = TcpStream::connect(("127.0.0.1", port))
                    .map(|_| ())
                    .map_err(|e| e.kind());
                if last.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert_eq!(
                last,
                Err(std::io::ErrorKind::ConnectionRefused),
                "{backend:?}: nothing listens on the host's port after the stops"
            );
            assert_eq!(ports.holder(SocketAddr::from(([127, 0, 0, 1], port))), None);
        });
        assert_eq!(
            socket_makers(&[&server, &second, &third]),
            Vec::<i32>::new(),
            "{backend:?}"
        );
        drop(host);
    }
}

#[test]
fn privileged_denied_and_past_the_limit_are_refused_and_a_closed_listener_stops() {
    for backend in backends() {
        let fx = Fixture::new();
        let mut p = [free_port(), free_port(), free_port()];
        p.sort_unstable();
        let [first, second, denied] = p;
        let job = Job::start(&fx, &listeners_line(&[first, 22, second, denied]), backend);
        runtime().block_on(async {
            let ports = Arc::new(Ports::new());
            let cfg = ForwardConfig {
                deny: vec![(denied, "a port the test denies".into())],
                max_per_job: 1,
                max_conns: 4,
            };
            let (f, mut rx) = forwards(&job, "conv", "job-1", cfg, &ports).await;
            let mut ev = Vec::new();
            for (port, outcome) in [
                (22, ForwardOutcome::Refused),
                (denied, ForwardOutcome::Refused),
                (first, ForwardOutcome::Forwarded),
                (second, ForwardOutcome::Limit),
            ] {
                if !ev
                    .iter()
                    .any(|e: &ForwardEvent| e.port == port && e.outcome == outcome)
                {
                    ev.extend(until(&mut rx, port, outcome, &job).await);
                }
            }
            // A second's worth of polls more: nothing is said again.
            tokio::time::sleep(Duration::from_secs(1)).await;
            while let Ok(e) = rx.try_recv() {
                ev.push(e);
            }
            assert_eq!(ev.len(), 4, "{backend:?}: once each: {ev:?}");
            let e22 = one_for(&ev, 22);
            assert_eq!(e22.outcome, ForwardOutcome::Refused);
            assert!(
                e22.reason.as_deref().unwrap_or("").contains("privileged"),
                "{e22:?}"
            );
            assert_eq!(
                one_for(&ev, denied).reason.as_deref(),
                Some("a port the test denies")
            );
            assert_eq!(
                one_for(&ev, second).reason.as_deref(),
                Some("at most 1 forwards a job")
            );
            assert_eq!(f.current(), [("127.0.0.1".to_string(), first)]);
            // The host's port 22 and the denied port are not the job's.
            assert!(
                ports
                    .holder(SocketAddr::from(([127, 0, 0, 1], denied)))
                    .is_none()
            );

            // The forwarded listener closes: `stopped`, and the slot goes to the other.
            std::fs::write(format!("{}/close", fx.tmp), "").unwrap();
            let ev = until(&mut rx, first, ForwardOutcome::Stopped, &job).await;
            assert_eq!(ev.len(), 1, "{ev:?}");
            let ev = until(&mut rx, second, ForwardOutcome::Forwarded, &job).await;
            assert_eq!(ev.len(), 1, "{ev:?}");
            assert_eq!(f.current(), [("127.0.0.1".to_string(), second)]);
            // At most `max_conns` (4) connections at once: the job's listener never
            // accepts, but the kernel completes its handshakes, so four relays stay open
            // (a read waits) and the fifth is closed at once (a read sees its end).
            let held = tokio::task::spawn_blocking(move || {
                let open = |_| {
                    let c = TcpStream::connect(("127.0.0.1", second)).unwrap();
                    c.set_read_timeout(Some(Duration::from_millis(500)))
                        .unwrap();
                    c
                };
                let conns: Vec<TcpStream> = (0..4).map(open).collect();
                // Each of the four is relayed before the fifth comes (a relay holds its
                // slot from its accept).
                std::thread::sleep(Duration::from_millis(300));
                let read = |mut c: &TcpStream| c.read(&mut [0u8; 16]).map_err(|e| e.kind());
                let fifth = read(&open(4));
                let first = read(&conns[0]);
                (fifth, first)
            })
            .await
            .unwrap();
            assert_eq!(held.0, Ok(0), "the fifth connection is closed at once");
            assert_eq!(
                held.1,
                Err(std::io::ErrorKind::WouldBlock),
                "the first waits"
            );
            // Its socket maker runs until the stop (the check after it can see one).
            assert_eq!(socket_makers(&[&job]).len(), 1);
            f.stop().await;
            let ev = until(&mut rx, second, ForwardOutcome::Stopped, &job).await;
            assert_eq!(ev.len(), 1, "{ev:?}");
            for port in [first, second] {
                assert_eq!(
                    TcpStream::connect(("127.0.0.1", port))
                        .map(|_| ())
                        .map_err(|e| e.kind()),
                    Err(std::io::ErrorKind::ConnectionRefused),
                    "{backend:?}: port {port} after the stop"
                );
            }
        });
        assert_eq!(socket_makers(&[&job]), Vec::<i32>::new(), "{backend:?}");
    }
}

/// A python line that listens on each `(address, port)` (IPv4 or IPv6 by the address).
fn listeners_at(addrs: &[(&str, u16)]) -> String {
    let list = addrs
        .iter()
        .map(|(a, p)| format!("('{a}', {p})"))
        .collect::<Vec<_>>()
        .join(", ");
    let script = format!(
        "import socket, time\n\
         def l(a, p):\n    s = socket.socket(socket.AF_INET6 if ':' in a else socket.AF_INET)\n    s.bind((a, p))\n    s.listen()\n    return s\n\
         ss = [l(a, p) for (a, p) in [{list}]]\n\
         print('listening', flush=True)\n\
         time.sleep(3600)\n"
    );
    format!("exec {} -c \"{}\"", python(), script.replace('"', "\\\""))
}

/// A server of another process of the host (this process's own sockets are the
/// forwards' side, as in the service), listening on `addr`:`port` until dropped.
struct HostServer(std::process::Child);

impl HostServer {
    fn start(addr: &str, port: u16) -> HostServer {
        use std::io::BufRead;
        let script = format!(
            "import socket, sys\n\
             s = socket.socket(socket.AF_INET6 if ':' in '{addr}' else socket.AF_INET)\n\
             s.bind(('{addr}', {port}))\n\
             s.listen()\n\
             print('ready', flush=True)\n\
             sys.stdin.read()\n"
        );
        let mut c = std::process::Command::new(python())
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(c.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n", "the host's server on {addr}:{port}");
        HostServer(c)
    }
}

impl Drop for HostServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port free on both of the host's loopback addresses now.
fn free_port_both() -> u16 {
    loop {
        let p = free_port();
        if TcpListener::bind(("::1", p)).is_ok() {
            return p;
        }
    }
}

/// A host server on one family keeps the port on the other too: a `localhost` client may
/// try either first, and the one that reached the job would hand it what it sends the
/// host's server (a bearer token). Checked before the forward (both families, `0.0.0.0`
/// and `::`), and while it runs: a host server that comes later takes its port back.
#[test]
fn a_host_listener_on_either_family_keeps_the_port() {
    if TcpListener::bind("[::1]:0").is_err() {
        common::skip("no IPv6 loopback on this host");
        return;
    }
    for backend in backends() {
        let fx = Fixture::new();
        let (v4, v6, any, later) = (
            free_port_both(),
            free_port_both(),
            free_port_both(),
            free_port_both(),
        );
        let host_v4 = HostServer::start("127.0.0.1", v4);
        let host_v6 = HostServer::start("::1", v6);
        let host_any = HostServer::start("0.0.0.0", any);
        let job = Job::start(
            &fx,
            &listeners_at(&[("::1", v4), ("127.0.0.1", v6), ("::1", any), ("::1", later)]),
            backend,
        );
        runtime().block_on(async {
            let ports = Arc::new(Ports::new());
            let (f, mut rx) =
                forwards(&job, "conv", "job-1", ForwardConfig::default(), &ports).await;
            let mut ev = Vec::new();
            for (port, outcome) in [
                (v4, ForwardOutcome::InUse),
                (v6, ForwardOutcome::InUse),
                (any, ForwardOutcome::InUse),
                (later, ForwardOutcome::Forwarded),
            ] {
                if !ev
                    .iter()
                    .any(|e: &ForwardEvent| e.port == port && e.outcome == outcome)
                {
                    ev.extend(until(&mut rx, port, outcome, &job).await);
                }
            }
            for (port, listen, holder) in [
                (v4, "::1", format!("127.0.0.1:{v4}")),
                (v6, "127.0.0.1", format!("[::1]:{v6}")),
                (any, "::1", format!("0.0.0.0:{any}")),
            ] {
                let e = one_for(&ev, port);
                assert_eq!(
                    (e.listen.as_str(), e.by_job.as_deref()),
                    (listen, None),
                    "{backend:?}: {e:?}"
                );
                assert_eq!(
                    e.reason.as_deref(),
                    Some(format!("a host process listens on {holder}").as_str()),
                    "{backend:?}: {e:?}"
                );
            }
            assert_eq!(f.current(), [("::1".to_string(), later)]);
            // The host's servers still answer on their own ports: nothing was taken.
            for (addr, port) in [("127.0.0.1", v4), ("::1", v6), ("127.0.0.1", any)] {
                assert!(TcpStream::connect((addr, port)).is_ok(), "{addr}:{port}");
            }
            // A host server on the other family after the forward started: the forward
            // ends, its port is `in_use`, and the host's ::1 is free again.
            let host_later = HostServer::start("127.0.0.1", later);
            let ev = until(&mut rx, later, ForwardOutcome::InUse, &job).await;
            let e = one_for(&ev, later);
            assert_eq!(
                e.reason.as_deref(),
                Some(format!("a host process listens on 127.0.0.1:{later}").as_str()),
                "{backend:?}: {e:?}"
            );
            assert!(f.current().is_empty(), "{:?}", f.current());
            assert_eq!(
                TcpStream::connect(("::1", later))
                    .map(|_| ())
                    .map_err(|e| e.kind()),
                Err(std::io::ErrorKind::ConnectionRefused),
                "{backend:?}: the job's forward on [::1]:{later} was ended"
            );
            assert_eq!(
                ports.holder(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, later))),
                None
            );
            f.stop().await;
            drop(host_later);
        });
        drop((host_v4, host_v6, host_any));
    }
}
