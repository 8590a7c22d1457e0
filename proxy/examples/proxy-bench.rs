//! Throughput and connection setup through the efr proxy, against a direct loopback
//! connection and (optionally) another HTTP CONNECT proxy such as tinyproxy.
//!
//! `proxy-bench [--bytes N] [--conns N] [--rounds N] [--http-proxy ADDR]`; `proxy/bench.sh`
//! builds it in release mode, starts tinyproxy and prints the ratios.
//!
//! Every mode uses the same client code. The modes run interleaved: each round runs every
//! mode once (the order rotated per round), and a mode's ratio in a round is against the
//! direct run of that same round; the table gives the median of the per-round ratios (and
//! the median absolute figures), so load from other work on the machine hits all modes alike.
//! `CPU s/GiB`: CPU time (user + system) of the whole transfer per GiB, client, sink and
//! proxy together (this process, plus the other proxy's process given by
//! `--http-proxy-pid`): what the proxy hop costs, less sensitive to load than MB/s.
//! `EFR_BENCH_WORKERS`: tokio workers of the in-process proxy (default 2, as the service).
//!
//! The upstream is a sink on loopback. Each connection starts with a ClientHello for
//! `sink.test` (so the efr proxy's TLS check passes) and a mode byte: `S` (setup: the sink
//! answers one byte and closes) or `T` (throughput: 8 bytes of length follow; the sink reads
//! that many and answers the count as 8 bytes; no half-close, which some proxies do not pass).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use efr_proxy::tls::build_client_hello;
use efr_proxy::{HostRule, Proxy, ProxyPolicy};

const CHUNK: usize = 256 << 10;

fn sink(hello_len: usize) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
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

/// CPU seconds (user + system) used so far by this process and, when given, another one
/// (the other proxy: `/proc/PID/stat`, its threads and reaped children).
fn cpu_secs(other: Option<u32>) -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage writes it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let mut secs = tv(ru.ru_utime) + tv(ru.ru_stime);
    if let Some(pid) = other
        && let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        && let Some(rest) = stat.rsplit_once(") ").map(|x| x.1)
    {
        // Fields 14..17 of stat (utime stime cutime cstime) are 12..15 after "(comm) ".
        let f: Vec<&str> = rest.split(' ').collect();
        // SAFETY: sysconf has no memory effects.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let ticks: f64 = (11..15).filter_map(|i| f.get(i)?.parse::<f64>().ok()).sum();
        secs += ticks / tck;
    }
    secs
}

/// (MB/s, CPU seconds per GiB of every process involved).
fn throughput(via: &Via, hello: &[u8], bytes: u64, other: Option<u32>) -> (f64, f64) {
    let mut s = open(via);
    let cpu = cpu_secs(other);
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
    let cpu = cpu_secs(other) - cpu;
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

fn main() {
    let mut bytes: u64 = 1 << 30;
    let mut conns: u32 = 2000;
    let mut rounds: usize = 5;
    let mut only: Option<String> = None;
    let mut other: Option<SocketAddr> = None;
    let mut other_pid: Option<u32> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bytes" => bytes = args.next().unwrap().parse().unwrap(),
            "--conns" => conns = args.next().unwrap().parse().unwrap(),
            "--only" => only = args.next(),
            "--rounds" => rounds = args.next().unwrap().parse().unwrap(),
            "--http-proxy-pid" => other_pid = Some(args.next().unwrap().parse().unwrap()),
            "--http-proxy" => other = Some(args.next().unwrap().parse().unwrap()),
            _ => panic!(
                "usage: proxy-bench [--bytes N] [--conns N] [--rounds N] [--http-proxy ADDR [--http-proxy-pid PID]] [--only MODE]"
            ),
        }
    }
    let hello = build_client_hello(Some("sink.test"));
    let port = sink(hello.len());

    // The efr proxy, in process, on TCP and on a Unix socket (+ the in-namespace relay).
    let mut policy = ProxyPolicy::default();
    policy
        .grants
        .push(HostRule::new("sink.test", Some(port), false).unwrap());
    policy.map("sink.test", vec!["127.0.0.1".parse().unwrap()]);
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
    let dir = std::env::temp_dir().join(format!("efr-proxy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock: PathBuf = dir.join("proxy.sock");
    {
        let _g = rt.enter();
        let ul = Proxy::bind_unix(&sock).unwrap();
        let p = proxy.clone();
        rt.spawn(async move { p.serve_unix(ul).await });
    }
    // The contained call's path: a listener bound elsewhere (the call's namespace) and handed
    // to the proxy over its Unix socket, as the launcher's init does.
    let rl = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = rl.local_addr().unwrap();
    let socks = efr_proxy::inside::Sockets {
        relay: Some(rl),
        ..Default::default()
    };
    efr_proxy::inside::hand_over(&sock, socks, Duration::from_secs(10)).unwrap();

    let mut modes = vec![
        (
            "direct",
            Via::Direct(SocketAddr::from(([127, 0, 0, 1], port))),
        ),
        ("efr-proxy", Via::Proxy(efr, format!("sink.test:{port}"))),
        (
            "efr-relay+proxy",
            Via::Relay(relay, format!("sink.test:{port}")),
        ),
    ];
    if let Some(o) = other {
        modes.push(("http-proxy", Via::Proxy(o, format!("127.0.0.1:{port}"))));
    }
    if let Some(o) = &only {
        // Profiling: one mode, no table.
        let (_, via) = modes
            .iter()
            .find(|(n, _)| n == o)
            .expect("--only: no such mode");
        for _ in 0..rounds {
            let (mbps, cpu) = throughput(via, &hello, bytes, None);
            println!("{o}: {mbps:.0} MB/s, {cpu:.3} CPU s/GiB");
            println!("{o}: {:.0} conns/s", setup_rate(via, &hello, conns));
        }
        return;
    }
    for (_, via) in &modes {
        throughput(via, &hello, bytes.min(16 << 20), None); // warm up
    }
    // results[mode][round] = (MB/s, conns/s, CPU s/GiB)
    let mut results = vec![Vec::new(); modes.len()];
    for r in 0..rounds {
        for i in 0..modes.len() {
            let m = (i + r) % modes.len();
            let (name, via) = &modes[m];
            let pid = if *name == "http-proxy" {
                other_pid
            } else {
                None
            };
            let (mbps, cpu) = throughput(via, &hello, bytes, pid);
            let cps = setup_rate(via, &hello, conns);
            results[m].push((mbps, cps, cpu));
        }
        eprint!("round {}/{rounds}\r", r + 1);
    }
    eprintln!();
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
    for (m, (name, _)) in modes.iter().enumerate() {
        let col = |f: &dyn Fn(&(f64, f64, f64)) -> f64| -> (f64, Vec<f64>) {
            let abs = median(results[m].iter().map(f).collect());
            let ratios = (0..rounds)
                .map(|r| f(&results[m][r]) / f(&results[0][r]))
                .collect::<Vec<_>>();
            (abs, ratios)
        };
        let (mbps, tr) = col(&|x| x.0);
        let (cps, sr) = col(&|x| x.1);
        let (cpu, _) = col(&|x| x.2);
        let range = |v: &[f64]| {
            let lo = v.iter().cloned().fold(f64::MAX, f64::min);
            let hi = v.iter().cloned().fold(0.0, f64::max);
            format!("({lo:.2}..{hi:.2})")
        };
        println!(
            "{name:<16} {mbps:>8.0} {:>9.3} {:>13} {cps:>8.0} {:>9.3} {:>13} {cpu:>9.3}",
            median(tr.clone()),
            range(&tr),
            median(sr.clone()),
            range(&sr)
        );
    }
    let st = proxy.stats();
    eprintln!(
        "efr proxy: tunnels {} refused {} bytes {}",
        st.tunnels, st.refused, st.bytes
    );
    let _ = std::fs::remove_dir_all(&dir);
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
