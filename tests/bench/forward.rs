//! `bench-forward`: the cost of a job's port forward (`efr_jobs::forward`) against a
//! direct loopback connection to the same server, in one run.
//!
//! A contained call (native backend) runs a small python server on its `127.0.0.1:PORT`:
//! a connection sends a number N and a newline, the server answers N zero bytes and
//! closes. The same client code then talks to it two ways: through the forward (the
//! host's `127.0.0.1:PORT`, relayed by splice in this process) and directly (a socket made
//! in the call's network namespace by the socket maker, `efr-launch --ns-sockets`,
//! connected to the same address there: what a process of the job gets). It measures
//! throughput (1 GiB through, read in 1 MiB chunks) and connections a second (2,000
//! connections one after another, each a request of 0 bytes and its close), each way in
//! turn, and prints the figures and the ratios.
//!
//! Run: `cargo build --release -p efr-sandbox-tests --bins &&
//! target/release/bench-forward` (it takes `efr-launch-test` beside itself).

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use efr_jobs::forward::{ForwardConfig, ForwardOutcome, Ports, start_with};
use efr_launcher::api::{BackendChoice, Io, Launcher};
use efr_launcher::ns_sockets::{INET, OK};
use efr_sandbox_tests::common::{Fixture, python};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Bytes through, each way.
const BYTES: u64 = 1 << 30;
/// Connections, each way.
const CONNS: usize = 2000;
/// Sockets asked of the socket maker at once for the direct connections (its hand-over is
/// not timed: a process of the job makes its own socket).
const BATCH: usize = 100;

fn server_line(port: u16) -> String {
    let script = format!(
        "import socket\n\
         srv = socket.socket()\n\
         srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         srv.bind(('127.0.0.1', {port}))\n\
         srv.listen(256)\n\
         buf = bytes(1 << 20)\n\
         while True:\n\
         \x20   c, _ = srv.accept()\n\
         \x20   req = b''\n\
         \x20   while not req.endswith(b'\\n'):\n\
         \x20       r = c.recv(64)\n\
         \x20       if not r:\n\
         \x20           break\n\
         \x20       req += r\n\
         \x20   n = int(req or b'0')\n\
         \x20   while n > 0:\n\
         \x20       k = c.send(buf[:min(n, len(buf))])\n\
         \x20       n -= k\n\
         \x20   c.close()\n"
    );
    format!("exec {} -c \"{}\"", python(), script.replace('"', "\\\""))
}

/// One exchange on `s`: asks for `n` bytes, reads them to the end; the bytes read.
async fn exchange(mut s: TcpStream, n: u64, buf: &mut [u8]) -> u64 {
    s.write_all(format!("{n}\n").as_bytes()).await.unwrap();
    let mut got = 0u64;
    loop {
        let k = s.read(buf).await.unwrap();
        if k == 0 {
            return got;
        }
        got += k as u64;
    }
}

/// A socket of the job's namespace from its socket maker on `control` (blocking; not
/// timed), connected to `addr` there.
fn direct_socket(control: &OwnedFd) -> TcpSocket {
    efr_fdpass::send_fds(control.as_fd(), &[INET], &[]).unwrap();
    let mut b = [0u8; 256];
    loop {
        match efr_fdpass::recv_msg(control.as_fd(), &mut b) {
            Ok(Some((n, fds))) => {
                assert_eq!(b.get(..n), Some(&[OK][..]));
                let s = std::net::TcpStream::from(fds.into_iter().next().expect("a socket"));
                s.set_nonblocking(true).unwrap();
                return TcpSocket::from_std_stream(s);
            }
            Err(e) if e.is_retry() => std::thread::sleep(Duration::from_micros(20)),
            other => panic!("the socket maker: {other:?}"),
        }
    }
}

fn main() {
    let me = std::env::current_exe().unwrap();
    let launcher = Launcher::new(me.parent().unwrap().join("efr-launch-test"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fx = Fixture::new();
    let plan = fx.plan(&server_line(port), BackendChoice::Native, Vec::new());
    let mut job = launcher
        .spawn(&plan, Io::null(), Io::null(), Io::inherit())
        .unwrap();
    // The forwards' runtime, as the service's: two workers.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let forwards = rt.block_on(async {
        let t0 = Instant::now();
        let f = loop {
            match start_with(
                &launcher,
                job.child.id(),
                "bench",
                "job-1",
                ForwardConfig::default(),
                Arc::new(Ports::new()),
                tx.clone(),
            )
            .await
            {
                Ok(f) => break f,
                Err(_) if t0.elapsed() < Duration::from_secs(20) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("{e}"),
            }
        };
        loop {
            let e = rx.recv().await.expect("an event");
            if e.port == port && e.outcome == ForwardOutcome::Forwarded {
                break f;
            }
        }
    });
    let ns_pid = efr_jobs::forward::job_ns_pid(job.child.id()).unwrap();
    let mut helper = launcher.spawn_ns_sockets(ns_pid).unwrap();
    // The socket maker's first message: it is in the namespace.
    let mut b = [0u8; 256];
    loop {
        match efr_fdpass::recv_msg(helper.control.as_fd(), &mut b) {
            Ok(Some((1, _))) if b[0] == OK => break,
            Err(e) if e.is_retry() => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("the socket maker: {other:?}"),
        }
    }
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // The client: one thread of its own, the same code both ways.
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let control = &helper.control;
    let (fwd_tp, dir_tp, fwd_cps, dir_cps) = client.block_on(async {
        let mut buf = vec![0u8; 1 << 20];
        let t = Instant::now();
        let s = TcpStream::connect(addr).await.unwrap();
        assert_eq!(exchange(s, BYTES, &mut buf).await, BYTES);
        let fwd_tp = BYTES as f64 / t.elapsed().as_secs_f64();
        let sock = direct_socket(control);
        let t = Instant::now();
        let s = sock.connect(addr).await.unwrap();
        assert_eq!(exchange(s, BYTES, &mut buf).await, BYTES);
        let dir_tp = BYTES as f64 / t.elapsed().as_secs_f64();

        let t = Instant::now();
        for _ in 0..CONNS {
            let s = TcpStream::connect(addr).await.unwrap();
            exchange(s, 0, &mut buf).await;
        }
        let fwd_cps = CONNS as f64 / t.elapsed().as_secs_f64();
        let mut timed = Duration::ZERO;
        for _ in 0..CONNS / BATCH {
            let socks: Vec<TcpSocket> = (0..BATCH).map(|_| direct_socket(control)).collect();
            let t = Instant::now();
            for sock in socks {
                let s = sock.connect(addr).await.unwrap();
                exchange(s, 0, &mut buf).await;
            }
            timed += t.elapsed();
        }
        let dir_cps = CONNS as f64 / timed.as_secs_f64();
        (fwd_tp, dir_tp, fwd_cps, dir_cps)
    });
    let mib = |x: f64| x / f64::from(1 << 20);
    println!(
        "throughput, 1 GiB: forward {:.0} MiB/s, direct {:.0} MiB/s, forward/direct {:.2}",
        mib(fwd_tp),
        mib(dir_tp),
        fwd_tp / dir_tp
    );
    println!(
        "connections, {CONNS} one after another: forward {fwd_cps:.0}/s, direct {dir_cps:.0}/s, forward/direct {:.2}",
        fwd_cps / dir_cps
    );
    let _ = helper.child.kill();
    let _ = helper.child.wait();
    rt.block_on(forwards.stop());
    job.cancel();
    let _ = job.wait();
}
