//! Throughput and connection setup through the efr proxy, against a direct loopback
//! connection and (optionally) another HTTP CONNECT proxy such as tinyproxy.
//!
//! `proxy-bench [--bytes N] [--conns N] [--rounds N] [--sink-port P] [--http-proxy ADDR
//! [--http-proxy-pid PID]] [--relay ADDR [--relay-pid PID] [--relay-tls ADDR]] [--tls
//! [--tls-bytes N] [--tls-port P]] [--tls-only] [--only MODE]`; `proxy/bench.sh` builds it
//! in release mode, starts tinyproxy and HAProxy and prints the ratios. `--tls-only`: the TLS
//! downloads alone (no raw transfers or setups); `--only MODE`: one mode, no table (for
//! profiling; a TLS mode prints its CPU split). `EFR_BENCH_TRACE=1`: each TLS download's
//! round, place in the round, mode and figures on stderr.
//!
//! `--relay`: a plain TCP relay (HAProxy in `mode tcp` with splice: the best a relay does on
//! this machine) listening at ADDR and forwarding to the sink on `--sink-port` (the script
//! picks the port and writes the relay's config before this runs); `--relay-tls` the same to
//! the TLS server on `--tls-port`, which curl reaches with `--connect-to`. The efr modes are
//! then also given as ratios to the relay: the ratio of the medians and the median of the
//! per-round paired ratios (each efr run against the relay's run of the same round).
//!
//! Every mode uses the same client code. The modes run interleaved: each round runs every
//! mode once (the order rotated per round; efr-handed and the relay back to back, their order
//! swapped, see `round_order`), and a mode's ratio in a round is against the direct run of
//! that same round; the table gives the median of the per-round ratios (and the median
//! absolute figures), so load from other work on the machine hits all modes alike.
//! `CPU s/GiB`: CPU time (user + system) of the whole transfer per GiB, every process of it
//! together (this process: client, sink and efr proxy; the other proxy's process given by
//! `--http-proxy-pid`; for TLS also the server and curl): what the proxy hop costs, less
//! sensitive to load than MB/s; for TLS also split by process (curl, the server, the efr
//! proxy's worker threads, the other proxy or relay). `EFR_BENCH_WORKERS`: tokio workers of
//! the in-process proxy (default 2, as the service).
//!
//! Raw modes: the upstream is a sink on loopback. Each connection starts with a ClientHello
//! for `sink.test` (so the efr proxy's TLS check passes) and a mode byte: `S` (setup: the
//! sink answers one byte and closes) or `T` (throughput: 8 bytes of length follow; the sink
//! reads that many and answers the count as 8 bytes; no half-close, which some proxies do
//! not pass). `efr-handed` is the contained call's path: a listener bound here and handed to
//! the proxy over its Unix socket (`efr_proxy::inside::hand_over`), as the launcher's init
//! does; the proxy accepts on it. `efr-synthetic` is the DNS path of a tool that ignores the
//! proxy variables: `sink.test` looked up on the handed DNS socket, then a connection
//! straight to its synthetic address, whose handed listener the proxy serves as a `CONNECT`.
//!
//! `--tls`: a real TLS transfer too: `openssl s_server -WWW` (a certificate for `localhost`
//! made here) sends a file of `--tls-bytes` (default `--bytes`; sparse) to `curl --cacert`,
//! directly, through the handed listener of the efr proxy, and through the other proxy.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use efr_proxy::tls::build_client_hello;
use efr_proxy::{HostRule, Proxy, ProxyPolicy};

const CHUNK: usize = 256 << 10;

fn sink(hello_len: usize, port: u16) -> u16 {
    let l = TcpListener::bind(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("bind the sink on 127.0.0.1:{port}: {e}"));
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let _ = c.set_nodelay(true);
                let mut head = vec![0u8; hello_len + 1];
                if c.read_exact(&mut head).is_err() {
                    return;
                }
                if head[hello_len] == b'S' {
                    let _ = c.write_all(b"k");
                    return;
                }
                let mut len = [0u8; 8];
                if c.read_exact(&mut len).is_err() {
                    return;
                }
                let want = u64::from_be_bytes(len);
                let mut buf = vec![0u8; CHUNK];
                let mut n: u64 = 0;
                while n < want {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k as u64,
                    }
                }
                let _ = c.write_all(&n.to_be_bytes());
            });
        }
    });
    port
}

#[derive(Clone)]
enum Via {
    /// Straight to this address: the sink itself, or a synthetic address whose handed
    /// listener the efr proxy serves (the DNS path: no CONNECT, the ClientHello at once).
    Direct(SocketAddr),
    /// An HTTP proxy at this address; CONNECT to this authority.
    Proxy(SocketAddr, String),
    /// The contained call's path: a listener handed to the efr proxy.
    Relay(SocketAddr, String),
}

fn open(via: &Via) -> TcpStream {
    match via {
        Via::Direct(a) => {
            let s = TcpStream::connect(a).unwrap();
            s.set_nodelay(true).unwrap();
            s
        }
        Via::Proxy(a, auth) | Via::Relay(a, auth) => {
            let mut s = TcpStream::connect(a).unwrap();
            s.set_nodelay(true).unwrap();
            write!(s, "CONNECT {auth} HTTP/1.1\r\nHost: {auth}\r\n\r\n").unwrap();
            // The proxy sends nothing after its answer until the client speaks, so a read
            // may take the whole answer at once (as curl does), not byte by byte.
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut b).unwrap();
                assert!(n > 0, "proxy closed");
                head.extend_from_slice(&b[..n]);
            }
            let line = String::from_utf8_lossy(&head);
            assert!(
                line.starts_with("HTTP/1.1 200") || line.starts_with("HTTP/1.0 200"),
                "proxy said: {line}"
            );
            s
        }
    }
}

/// CPU seconds (user + system) a process used so far, its threads and its waited-for
/// children included (`/proc/PID/stat` fields 14 to 17, in clock ticks: `USER_HZ`, 100 on
/// Linux); 0 when it cannot be read.
fn cpu_of(pid: &str) -> f64 {
    stat_ticks(&format!("/proc/{pid}/stat"), 11..15)
}

/// The sum of the fields `range` (counted from 0 after "(comm) ") of the stat file at
/// `path`, in seconds; 0 when it cannot be read.
fn stat_ticks(path: &str, range: std::ops::Range<usize>) -> f64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit_once(") ").map(|x| x.1) else {
        return 0.0;
    };
    // Fields 14..17 of stat (utime stime cutime cstime) are 11..15 after "(comm) ".
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = range.filter_map(|i| f.get(i)?.parse::<f64>().ok()).sum();
    ticks / 100.0
}

/// CPU seconds used so far by this process's tokio workers (the in-process efr proxy; its
/// threads are named `tokio-rt-worker`).
fn cpu_of_workers() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    dir.filter_map(|t| t.ok())
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim_end() == "tokio-rt-worker")
        })
        // utime + stime: a thread's cutime and cstime are its process's.
        .map(|t| stat_ticks(&t.path().join("stat").to_string_lossy(), 11..13))
        .sum()
}

/// CPU seconds of the curl runs waited for (this process's `cutime + cstime`).
fn cpu_of_children() -> f64 {
    stat_ticks("/proc/self/stat", 13..15)
}

/// CPU seconds used so far by this process (with the curl runs it waited for) and the
/// other processes given.
fn cpu_secs(others: &[u32]) -> f64 {
    cpu_of("self") + others.iter().map(|p| cpu_of(&p.to_string())).sum::<f64>()
}

/// (MB/s, CPU seconds per GiB of every process involved).
fn throughput(via: &Via, hello: &[u8], bytes: u64, others: &[u32]) -> (f64, f64) {
    let mut s = open(via);
    let cpu = cpu_secs(others);
    let t = Instant::now();
    s.write_all(hello).unwrap();
    s.write_all(b"T").unwrap();
    s.write_all(&bytes.to_be_bytes()).unwrap();
    let buf = vec![0x5au8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let k = left.min(CHUNK as u64) as usize;
        s.write_all(&buf[..k]).unwrap();
        left -= k as u64;
    }
    let mut n = [0u8; 8];
    s.read_exact(&mut n).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_secs(others) - cpu;
    assert_eq!(u64::from_be_bytes(n), bytes, "the sink got every byte");
    (
        bytes as f64 / secs / 1e6,
        cpu * (1u64 << 30) as f64 / bytes as f64,
    )
}

fn setup_rate(via: &Via, hello: &[u8], conns: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..conns {
        let mut s = open(via);
        s.write_all(hello).unwrap();
        s.write_all(b"S").unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
    }
    conns as f64 / t.elapsed().as_secs_f64()
}

/// `openssl s_server -WWW` for `localhost` on 127.0.0.1, serving `big` (a sparse file) from
/// a directory of its own.
struct TlsServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsServer {
    fn start(bytes: u64, port: u16) -> TlsServer {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ok = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args([
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=DNS:localhost",
            ])
            .arg("-keyout")
            .arg(d.join("key.pem"))
            .arg("-out")
            .arg(d.join("cert.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "openssl req");
        std::fs::File::create(d.join("big"))
            .unwrap()
            .set_len(bytes)
            .unwrap();
        let port = TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("bind the tls server on 127.0.0.1:{port}: {e}"))
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-WWW", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["-cert", "cert.pem", "-key", "key.pem"])
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "s_server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        TlsServer { child, port, dir }
    }

    fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }
}

/// How curl reaches the TLS server.
#[derive(Clone, Copy, Debug)]
enum TlsVia {
    Direct,
    /// Through the HTTP proxy at this address (`--proxy`).
    Proxy(SocketAddr),
    /// Through a TCP relay listening here, forwarding to the server (`--connect-to`).
    Relay(SocketAddr),
}

/// One TLS download of `bytes` by curl (`via`): (MB/s, CPU s/GiB of this process, curl, the
/// server and `others`, that CPU split: curl, the server, the efr proxy's workers, `others`).
fn tls_transfer(srv: &TlsServer, via: TlsVia, bytes: u64, others: &[u32]) -> (f64, f64, [f64; 4]) {
    let mut all = others.to_vec();
    all.push(srv.child.id());
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download}",
        "--cacert",
    ])
    .arg(srv.cert());
    match via {
        TlsVia::Direct => {}
        TlsVia::Proxy(p) => {
            cmd.arg("--proxy").arg(format!("http://{p}"));
        }
        TlsVia::Relay(r) => {
            cmd.arg("--connect-to")
                .arg(format!("localhost:{}:{}:{}", srv.port, r.ip(), r.port()));
        }
    }
    cmd.arg(format!("https://localhost:{}/big", srv.port));
    let srv_pid = srv.child.id().to_string();
    let parts = || {
        [
            cpu_of_children(),
            cpu_of(&srv_pid),
            cpu_of_workers(),
            others.iter().map(|p| cpu_of(&p.to_string())).sum::<f64>(),
        ]
    };
    let cpu = cpu_secs(&all);
    let before = parts();
    let t = Instant::now();
    let out = cmd.output().unwrap();
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_secs(&all) - cpu;
    let after = parts();
    let gib = (1u64 << 30) as f64 / bytes as f64;
    let split: [f64; 4] = std::array::from_fn(|i| (after[i] - before[i]) * gib);
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && got.trim() == bytes.to_string(),
        "curl via {via:?}: got {got} bytes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (bytes as f64 / secs / 1e6, cpu * gib, split)
}

/// Whether `tool arg` runs and succeeds.
fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Per mode and round `(MB/s, conns/s or 0, CPU s/GiB)`; prints the table (medians of the
/// per-round ratios against the first mode, their range).
fn table(title: &str, names: &[&str], results: &[Vec<(f64, f64, f64)>], setups: bool) {
    println!("{title}");
    println!(
        "{:<16} {:>8} {:>9} {:>13} {:>8} {:>9} {:>13} {:>9}",
        "mode",
        "MB/s",
        "vs direct",
        "(min..max)",
        "conns/s",
        "vs direct",
        "(min..max)",
        "CPU s/GiB"
    );
    let rounds = results[0].len();
    for (m, name) in names.iter().enumerate() {
        let col = |f: &dyn Fn(&(f64, f64, f64)) -> f64| -> (f64, Vec<f64>) {
            let abs = median(results[m].iter().map(f).collect());
            let ratios = (0..rounds)
                .map(|r| f(&results[m][r]) / f(&results[0][r]))
                .collect::<Vec<_>>();
            (abs, ratios)
        };
        let range = |v: &[f64]| {
            let lo = v.iter().cloned().fold(f64::MAX, f64::min);
            let hi = v.iter().cloned().fold(0.0, f64::max);
            format!("({lo:.2}..{hi:.2})")
        };
        let (mbps, tr) = col(&|x| x.0);
        let (cpu, _) = col(&|x| x.2);
        let setup = if setups {
            let (cps, sr) = col(&|x| x.1);
            format!("{cps:>8.0} {:>9.3} {:>13}", median(sr.clone()), range(&sr))
        } else {
            format!("{:>8} {:>9} {:>13}", "-", "-", "-")
        };
        println!(
            "{name:<16} {mbps:>8.0} {:>9.3} {:>13} {setup} {cpu:>9.3}",
            median(tr.clone()),
            range(&tr),
        );
    }
}

/// The efr modes (names starting `efr` or `tls efr`) against the relay's mode `relay`: per
/// figure the ratio of the medians and the median of the per-round paired ratios (each efr
/// run over the relay's run of the same round), with their range. Throughput and setups: above
/// 1 is faster than the relay; CPU s/GiB: above 1 costs more than the relay.
fn vs_relay(
    title: &str,
    names: &[&str],
    results: &[Vec<(f64, f64, f64)>],
    relay: usize,
    setups: bool,
) {
    println!("{title}: ratio of medians, median of paired per-round ratios (min..max)");
    println!(
        "{:<16} {:>28} {:>28} {:>28}",
        "mode", "throughput efr/haproxy", "setups efr/haproxy", "CPU s/GiB efr/haproxy"
    );
    let rounds = results[relay].len();
    let cell = |m: usize, f: &dyn Fn(&(f64, f64, f64)) -> f64| -> String {
        let of_medians = median(results[m].iter().map(f).collect())
            / median(results[relay].iter().map(f).collect());
        let paired: Vec<f64> = (0..rounds)
            .map(|r| f(&results[m][r]) / f(&results[relay][r]))
            .collect();
        let lo = paired.iter().cloned().fold(f64::MAX, f64::min);
        let hi = paired.iter().cloned().fold(0.0, f64::max);
        format!(
            "{of_medians:.3} {:.3} ({lo:.2}..{hi:.2})",
            median(paired.clone())
        )
    };
    for (m, name) in names.iter().enumerate() {
        if !(name.starts_with("efr") || name.starts_with("tls efr")) {
            continue;
        }
        let setup = if setups {
            cell(m, &|x| x.1)
        } else {
            "-".to_string()
        };
        println!(
            "{name:<16} {:>28} {setup:>28} {:>28}",
            cell(m, &|x| x.0),
            cell(m, &|x| x.2)
        );
    }
}

fn main() {
    let mut bytes: u64 = 1 << 30;
    let mut tls_bytes: Option<u64> = None;
    let mut tls = false;
    let mut conns: u32 = 2000;
    let mut rounds: usize = 5;
    let mut only: Option<String> = None;
    let mut tls_only = false;
    let mut other: Option<SocketAddr> = None;
    let mut other_pid: Option<u32> = None;
    let mut sink_port: u16 = 0;
    let mut tls_port: u16 = 0;
    let mut relay: Option<SocketAddr> = None;
    let mut relay_tls: Option<SocketAddr> = None;
    let mut relay_pid: Option<u32> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bytes" => bytes = args.next().unwrap().parse().unwrap(),
            "--tls-bytes" => tls_bytes = Some(args.next().unwrap().parse().unwrap()),
            "--tls" => tls = true,
            "--tls-only" => (tls, tls_only) = (true, true),
            "--conns" => conns = args.next().unwrap().parse().unwrap(),
            "--only" => only = args.next(),
            "--rounds" => rounds = args.next().unwrap().parse().unwrap(),
            "--http-proxy-pid" => other_pid = Some(args.next().unwrap().parse().unwrap()),
            "--http-proxy" => other = Some(args.next().unwrap().parse().unwrap()),
            "--sink-port" => sink_port = args.next().unwrap().parse().unwrap(),
            "--tls-port" => tls_port = args.next().unwrap().parse().unwrap(),
            "--relay" => relay = Some(args.next().unwrap().parse().unwrap()),
            "--relay-tls" => relay_tls = Some(args.next().unwrap().parse().unwrap()),
            "--relay-pid" => relay_pid = Some(args.next().unwrap().parse().unwrap()),
            _ => panic!(
                "usage: proxy-bench [--bytes N] [--conns N] [--rounds N] [--sink-port P] [--http-proxy ADDR [--http-proxy-pid PID]] [--relay ADDR [--relay-pid PID] [--relay-tls ADDR]] [--tls [--tls-bytes N] [--tls-port P]] [--tls-only] [--only MODE]"
            ),
        }
    }
    let tls_bytes = tls_bytes.unwrap_or(bytes);
    if tls && !(have("openssl", "version") && have("curl", "--version")) {
        eprintln!("openssl or curl missing: no TLS transfer");
        tls = false;
    }
    let hello = build_client_hello(Some("sink.test"));
    let port = sink(hello.len(), sink_port);
    let server = tls.then(|| TlsServer::start(tls_bytes, tls_port));

    // The efr proxy, in process, on TCP and on a Unix socket (+ a handed listener).
    let mut policy = ProxyPolicy::default();
    policy
        .grants
        .push(HostRule::new("sink.test", Some(port), false).unwrap());
    policy.map("sink.test", vec!["127.0.0.1".parse().unwrap()]);
    if let Some(srv) = &server {
        policy
            .grants
            .push(HostRule::new("localhost", Some(srv.port), false).unwrap());
        policy.map("localhost", vec!["127.0.0.1".parse().unwrap()]);
    }
    policy.limits.max_conns = 4096;
    policy.limits.max_bytes = u64::MAX;
    policy.limits.idle_timeout = Duration::from_secs(60);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::env::var("EFR_BENCH_WORKERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
        )
        .enable_all()
        .build()
        .unwrap();
    let proxy = Proxy::new(policy);
    let l = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let efr = l.local_addr().unwrap();
    let p = proxy.clone();
    rt.spawn(async move { p.serve_tcp(l).await });
    let dir = tempfile::tempdir().unwrap();
    let sock: PathBuf = dir.path().join("proxy.sock");
    {
        let _g = rt.enter();
        let ul = Proxy::bind_unix(&sock).unwrap();
        let p = proxy.clone();
        rt.spawn(async move { p.serve_unix(ul).await });
    }
    let (handed, synthetic) = hand_over_sockets(&sock, port);

    let mut modes = vec![
        (
            "direct",
            Via::Direct(SocketAddr::from(([127, 0, 0, 1], port))),
        ),
        ("efr-proxy", Via::Proxy(efr, format!("sink.test:{port}"))),
        (
            "efr-handed",
            Via::Relay(handed, format!("sink.test:{port}")),
        ),
        ("efr-synthetic", Via::Direct(synthetic)),
    ];
    if let Some(o) = other {
        modes.push(("http-proxy", Via::Proxy(o, format!("127.0.0.1:{port}"))));
    }
    if let Some(r) = relay {
        modes.push(("haproxy", Via::Direct(r)));
    }
    // TLS: curl direct, through the handed listener, through the other proxy, the relay.
    let mut tls_modes: Vec<(&str, TlsVia)> = vec![
        ("tls direct", TlsVia::Direct),
        ("tls efr-handed", TlsVia::Proxy(handed)),
    ];
    if let Some(o) = other {
        tls_modes.push(("tls http-proxy", TlsVia::Proxy(o)));
    }
    if let Some(r) = relay_tls {
        tls_modes.push(("tls haproxy", TlsVia::Relay(r)));
    }
    let pids = |name: &str| -> Vec<u32> {
        let pid = if name.ends_with("http-proxy") {
            other_pid
        } else if name.ends_with("haproxy") {
            relay_pid
        } else {
            None
        };
        pid.into_iter().collect()
    };
    if let Some(o) = &only {
        // Profiling: one mode, no table.
        if let Some((_, p)) = tls_modes.iter().find(|(n, _)| n == o) {
            let srv = server.as_ref().expect("--only tls ...: needs --tls");
            for _ in 0..rounds {
                let (mbps, cpu, s) = tls_transfer(srv, *p, tls_bytes, &pids(o));
                println!(
                    "{o}: {mbps:.0} MB/s, {cpu:.3} CPU s/GiB (curl {:.3}, server {:.3}, efr proxy {:.3}, relay {:.3})",
                    s[0], s[1], s[2], s[3]
                );
            }
            return;
        }
        let (_, via) = modes
            .iter()
            .find(|(n, _)| n == o)
            .expect("--only: no such mode");
        for _ in 0..rounds {
            let (mbps, cpu) = throughput(via, &hello, bytes, &[]);
            println!("{o}: {mbps:.0} MB/s, {cpu:.3} CPU s/GiB");
            println!("{o}: {:.0} conns/s", setup_rate(via, &hello, conns));
        }
        return;
    }
    if tls_only {
        modes.clear();
    }
    for (_, via) in &modes {
        throughput(via, &hello, bytes.min(16 << 20), &[]); // warm up
    }
    if let Some(srv) = &server {
        for (_, p) in &tls_modes {
            tls_transfer(srv, *p, tls_bytes, &[]); // warm up (the whole file)
        }
    }
    // results[mode][round] = (MB/s, conns/s, CPU s/GiB)
    let mut results = vec![Vec::new(); modes.len()];
    let mut tls_results = vec![Vec::new(); tls_modes.len()];
    let mut tls_split = vec![Vec::new(); tls_modes.len()];
    // The order of each round (see `round_order`): efr-handed and HAProxy run back to back.
    let pair_of = |names: Vec<&str>, a: &str, b: &str| {
        let a = names.iter().position(|n| *n == a)?;
        let b = names.iter().position(|n| *n == b)?;
        Some((a, b))
    };
    let raw_pair = pair_of(modes.iter().map(|m| m.0).collect(), "efr-handed", "haproxy");
    let tls_pair = pair_of(
        tls_modes.iter().map(|m| m.0).collect(),
        "tls efr-handed",
        "tls haproxy",
    );
    for r in 0..rounds {
        for m in round_order(modes.len(), r, raw_pair) {
            let (name, via) = &modes[m];
            let (mbps, cpu) = throughput(via, &hello, bytes, &pids(name));
            let cps = setup_rate(via, &hello, conns);
            results[m].push((mbps, cps, cpu));
        }
        if let Some(srv) = &server {
            for (i, m) in round_order(tls_modes.len(), r, tls_pair)
                .into_iter()
                .enumerate()
            {
                let (name, p) = tls_modes[m];
                let (mbps, cpu, split) = tls_transfer(srv, p, tls_bytes, &pids(name));
                tls_results[m].push((mbps, 0.0, cpu));
                tls_split[m].push(split);
                if std::env::var_os("EFR_BENCH_TRACE").is_some() {
                    eprintln!("round {r} #{i} {name}: {mbps:.0} MB/s {cpu:.3} CPU s/GiB");
                }
            }
        }
        eprint!("round {}/{rounds}\r", r + 1);
    }
    eprintln!();
    let names: Vec<&str> = modes.iter().map(|m| m.0).collect();
    if !modes.is_empty() {
        table(
            &format!("raw: {bytes} bytes, {conns} setups, {rounds} rounds"),
            &names,
            &results,
            true,
        );
    }
    if server.is_some() {
        let names: Vec<&str> = tls_modes.iter().map(|m| m.0).collect();
        println!();
        table(
            &format!("tls (openssl s_server -WWW -> curl): {tls_bytes} bytes, {rounds} rounds"),
            &names,
            &tls_results,
            false,
        );
        println!("CPU s/GiB of the TLS download by process (medians)");
        println!(
            "{:<16} {:>8} {:>8} {:>10} {:>8}",
            "mode", "curl", "server", "efr proxy", "relay"
        );
        for (m, name) in names.iter().enumerate() {
            let part = |i: usize| median(tls_split[m].iter().map(|s| s[i]).collect());
            println!(
                "{name:<16} {:>8.3} {:>8.3} {:>10.3} {:>8.3}",
                part(0),
                part(1),
                part(2),
                part(3)
            );
        }
    }
    if relay.is_some() && !modes.is_empty() {
        println!();
        vs_relay(
            "efr against haproxy (raw)",
            &names,
            &results,
            names.iter().position(|n| *n == "haproxy").unwrap(),
            true,
        );
    }
    if server.is_some() && relay_tls.is_some() {
        let names: Vec<&str> = tls_modes.iter().map(|m| m.0).collect();
        println!();
        vs_relay(
            "efr against haproxy (tls)",
            &names,
            &tls_results,
            names.iter().position(|n| *n == "tls haproxy").unwrap(),
            false,
        );
    }
    let st = proxy.stats();
    eprintln!(
        "efr proxy: tunnels {} refused {} bytes {}",
        st.tunnels, st.refused, st.bytes
    );
}

/// What the launcher's init hands the proxy at `sock`, bound here: a relay listener, the DNS
/// socket and a listener on the synthetic address of `sink.test` (127.77.0.1, the first name
/// looked up) on the sink's `port`; then `sink.test` is looked up. The relay's address and
/// the synthetic one.
fn hand_over_sockets(sock: &Path, port: u16) -> (SocketAddr, SocketAddr) {
    let synth = SocketAddr::from(([127, 77, 0, 1], port));
    let rl = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = rl.local_addr().unwrap();
    let dns = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dns_addr = dns.local_addr().unwrap();
    let socks = efr_proxy::inside::Sockets {
        relay: Some(rl),
        dns: Some(dns),
        synthetic: vec![TcpListener::bind(synth).unwrap()],
        tcp: Vec::new(),
    };
    efr_proxy::inside::hand_over(sock, socks, Duration::from_secs(10)).unwrap();
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.send_to(&efr_proxy::dns::build_query(1, "sink.test", 1), dns_addr)
        .unwrap();
    let mut buf = [0u8; 512];
    let n = c.recv(&mut buf).unwrap();
    let answer = efr_proxy::dns::parse_response(&buf[..n]);
    assert_eq!(answer, Some((0, vec![[127, 77, 0, 1].into()])), "sink.test");
    (relay, synth)
}

/// The order of the `n` modes in round `r`: each mode once, rotated by one per round (the
/// time of the round's start, right after the raw phase for TLS, passes from mode to mode);
/// the two modes of `pair` (an efr mode and the relay it is paired with) as one unit, back
/// to back, their order swapped from round to round (so that every rotation meets both
/// orders within `2 * units` rounds), so each paired ratio compares two runs close in time
/// and neither always follows the same mode.
fn round_order(n: usize, r: usize, pair: Option<(usize, usize)>) -> Vec<usize> {
    let k = if pair.is_some() { n - 1 } else { n };
    if k == 0 {
        return Vec::new();
    }
    let swap = if k % 2 == 1 {
        r % 2 == 1
    } else {
        (r / k) % 2 == 1
    };
    let mut units: Vec<Vec<usize>> = Vec::new();
    for m in 0..n {
        match pair {
            Some((a, b)) if m == a => units.push(if swap { vec![b, a] } else { vec![a, b] }),
            Some((_, b)) if m == b => {}
            _ => units.push(vec![m]),
        }
    }
    (0..k).flat_map(|i| units[(i + r) % k].clone()).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
