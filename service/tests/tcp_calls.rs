//! A call reaches one host loopback port over plain TCP (a dev database or server), end to end
//! through the service on both backends: an echo server on the host's `127.0.0.1` (and
//! `::1` where the host has it); a call with a `tcp` host grant of its port gets the host's
//! echo and the summary counts the relayed connection; one without is refused (its loopback
//! is its own) with a `host` exit record that needs exactly that grant; a grant of another
//! port does not reach it; a granted port where nothing listens on the host is the refusal
//! `host_refused`. And `efr-sandbox run` prints the `--grant` to retry with, which works.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{backends, collect, command, have, skip, temp_env};
use serde_json::{Value, json};

/// An echo server on the host at `addr` (port 0: a free one): each line `L` is answered
/// `host-echo L`; `accepted` counts its connections.
struct Echo {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl Echo {
    fn start(addr: &str) -> Option<Echo> {
        let l = TcpListener::bind(addr).ok()?;
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let n = accepted.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                n.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    for line in BufReader::new(s).lines().map_while(Result::ok) {
                        if w.write_all(format!("host-echo {line}\n").as_bytes())
                            .is_err()
                        {
                            break;
                        }
                    }
                });
            }
        });
        Some(Echo { addr, accepted })
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// A port nothing listens on now, on the host's `127.0.0.1`.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The call's client: each argument `c,HOST,PORT` connects (blocking) and sends a line,
/// printing what came back (`EOF` for nothing) or the connect's error; `n,HOST,PORT` connects without blocking and prints
/// the connect's errno and the socket's error after; `o` connects to a listener of the call's
/// own on its loopback.
const CLIENT: &str = r#"import errno, select, socket, sys
def name(e):
    return errno.errorcode.get(e, str(e))
def one(host, port):
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(20)
    try:
        s.connect((host, port))
    except OSError as e:
        print('%s %d refused %s' % (host, port, name(e.errno)))
        return
    data = b''
    try:
        s.sendall(b'hello\n')
        while not data.endswith(b'\n'):
            d = s.recv(4096)
            if not d:
                break
            data += d
    except OSError:
        pass
    # An end without an answer (EOF or a reset) is `EOF`.
    print('%s %d got %s' % (host, port, data.decode().strip() or 'EOF'))
def nonblocking(host, port):
    s = socket.socket()
    s.setblocking(False)
    r = s.connect_ex((host, port))
    select.select([], [s], [], 20)
    print('nonblocking %d %s then %s' % (port, name(r), name(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))))
def own():
    l = socket.socket()
    l.bind(('127.0.0.1', 0))
    l.listen()
    c = socket.create_connection(l.getsockname(), timeout=20)
    a, _ = l.accept()
    a.sendall(b'own\n')
    print('own', c.recv(10).decode().strip())
for arg in sys.argv[1:]:
    if arg == 'o':
        own()
        continue
    kind, host, port = arg.rsplit(',', 2)
    (one if kind == 'c' else nonblocking)(host, int(port))
"#;

fn tcp_grant(host: &str, port: u16) -> Value {
    json!({"kind": "host", "host": host, "port": port, "tcp": true})
}

/// Runs `client.py ARGS` in `proj` through the service on `backend` with `grants`: the
/// line's stdout and the end's finish.
fn launch(
    c: &mut common::Client,
    id: u64,
    proj: &Path,
    backend: &str,
    grants: Vec<Value>,
    args: &[String],
) -> (String, Value) {
    let p = proj.to_str().unwrap();
    let line = format!("python3 client.py {}", args.join(" "));
    c.request(
        id,
        "sandbox.launch",
        json!({"line": line, "cwd": p, "projects": [p], "backend": backend, "grants": grants}),
    );
    let (items, end) = collect(c, id);
    let out: String = items
        .iter()
        .filter(|i| i["kind"] == "output" && i["stream"] == "stdout")
        .filter_map(|i| i["data"].as_str())
        .collect();
    let fin = end["end"].clone();
    assert!(fin.is_object(), "{backend}: no end: {end}");
    (out, fin)
}

fn exits(fin: &Value) -> Vec<Value> {
    fin["exits"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_tcp_grant_reaches_the_hosts_loopback_port_and_none_is_refused_with_a_record() {
    if !have("python3") {
        skip("python3 is needed");
        return;
    }
    let echo = Echo::start("127.0.0.1:0").unwrap();
    // `::1` where the host has it (IPv6 on): its own server on another port (nothing on
    // the host's ::1 at the v4 server's port).
    let echo6 = loop {
        match Echo::start("[::1]:0") {
            Some(e) if e.port() == echo.port() => continue,
            e => break e,
        }
    };
    if echo6.is_none() {
        eprintln!("the host has no ::1: the IPv6 relay is not tried");
    }
    let d = temp_env();
    let proj = d.path().join("home/proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("client.py"), CLIENT).unwrap();
    let s = common::Server::start_in(d, &[]);
    let mut c = s.client();
    let port = echo.port();
    let mut id = 0;
    for backend in backends() {
        // Granted: the host's echo, through the relay; the summary counts it.
        let mut grants = vec![tcp_grant("localhost", port)];
        let mut args = vec![format!("c,127.0.0.1,{port}"), format!("c,::1,{port}")];
        if let Some(e6) = &echo6 {
            grants.push(tcp_grant("::1", e6.port()));
            args.push(format!("c,::1,{}", e6.port()));
            // `::1` opens only ::1: the same port on 127.0.0.1 stays the call's own.
            args.push(format!("c,127.0.0.1,{}", e6.port()));
        }
        let before = echo.accepted();
        id += 1;
        let (out, fin) = launch(&mut c, id, &proj, backend, grants, &args);
        assert!(
            out.contains(&format!("127.0.0.1 {port} got host-echo hello\n")),
            "{backend}: {out}\n{fin}"
        );
        let mut relayed = 1;
        // `localhost` opens ::1 too: the call's [::1]:PORT goes to the host's ::1, where
        // the v4 echo does not listen (refused there: `host_refused`), unless the host has
        // no ::1 (then the call has none either).
        if let Some(e6) = &echo6 {
            assert!(
                out.contains(&format!("::1 {} got host-echo hello\n", e6.port())),
                "{backend}: {out}\n{fin}"
            );
            assert!(
                out.contains(&format!("::1 {port} got EOF\n")),
                "{backend}: {out}\n{fin}"
            );
            assert!(
                out.contains(&format!("127.0.0.1 {} refused ECONNREFUSED\n", e6.port())),
                "{backend}: {out}\n{fin}"
            );
            relayed += 1;
        }
        assert_eq!(echo.accepted(), before + 1, "{backend}: {out}\n{fin}");
        let sum = &fin["sandbox_summary"];
        assert_eq!(sum["proxied"], json!(true), "{backend}: {fin}");
        assert_eq!(sum["tcp_relayed"], json!(relayed), "{backend}: {fin}");
        if let Some(e6) = &echo6 {
            // The host's ::1:PORT refused what `localhost` relayed there; the call's
            // 127.0.0.1 of the ::1 grant's port was refused inside: a record each.
            assert_eq!(
                sum["blocked"],
                json!([{"host": "::1", "port": port, "reason": "host_refused"}]),
                "{backend}: {fin}"
            );
            let ex = exits(&fin);
            assert_eq!(ex.len(), 2, "{backend}: {fin}");
            let refused = ex
                .iter()
                .find(|r| r["summary"].as_str().unwrap().contains("host_refused"))
                .unwrap_or_else(|| panic!("{backend}: no host_refused record: {fin}"));
            assert_eq!(refused["needs"], json!({"kind": "nothing"}), "{refused}");
            assert!(
                ex.iter()
                    .any(|r| r["needs"]["grants"] == json!([tcp_grant("localhost", e6.port())])),
                "{backend}: {fin}"
            );
        } else {
            assert!(sum.get("blocked").is_none(), "{backend}: {fin}");
            assert!(exits(&fin).is_empty(), "{backend}: {fin}");
        }

        // No grant: the call's loopback is its own. A blocking and a non-blocking connect
        // refused (once per port, however often), and a connect to the call's own listener,
        // which works and is no record.
        let other = free_port();
        let args = vec![
            format!("c,127.0.0.1,{port}"),
            format!("c,127.0.0.1,{port}"),
            format!("c,localhost,{port}"),
            format!("n,127.0.0.1,{other}"),
            "o".to_string(),
        ];
        let before = echo.accepted();
        id += 1;
        let (out, fin) = launch(&mut c, id, &proj, backend, Vec::new(), &args);
        assert_eq!(
            out.matches(&format!("127.0.0.1 {port} refused ECONNREFUSED\n"))
                .count(),
            2,
            "{backend}: {out}\n{fin}"
        );
        assert!(
            out.contains(&format!("localhost {port} refused ECONNREFUSED\n")),
            "{backend}: {out}\n{fin}"
        );
        // The caller's semantics are the kernel's: in progress, then refused.
        assert!(
            out.contains(&format!(
                "nonblocking {other} EINPROGRESS then ECONNREFUSED\n"
            )),
            "{backend}: {out}\n{fin}"
        );
        assert!(out.contains("own own\n"), "{backend}: {out}\n{fin}");
        assert_eq!(echo.accepted(), before, "{backend}: the host was reached");
        let ex = exits(&fin);
        let mut ports: Vec<u64> = ex
            .iter()
            .map(|r| r["facts"]["hosts"][0]["port"].as_u64().unwrap())
            .collect();
        ports.sort_unstable();
        let mut want = vec![u64::from(port), u64::from(other)];
        want.sort_unstable();
        assert_eq!(ports, want, "{backend}: one record per port: {fin}");
        for r in &ex {
            let p = r["facts"]["hosts"][0]["port"].as_u64().unwrap();
            assert_eq!(r["kind"], "host", "{r}");
            assert_eq!(r["source"], "denial", "{r}");
            assert_eq!(
                r["needs"],
                json!({"kind": "contained", "grants": [
                    {"kind": "host", "host": "localhost", "port": p, "tcp": true}
                ]}),
                "{r}"
            );
            let why = r["judgement"]["reasons"][0].as_str().unwrap();
            assert!(
                why.contains("the call's loopback is its own")
                    && why.contains(&format!("host=localhost:{p}:tcp")),
                "{why}"
            );
        }

        // On the host's network (`open_network`) the loopback is the host's: the server is
        // reached as it is, and a refused port there is no record (no grant would change
        // it).
        let before = echo.accepted();
        let closed = free_port();
        id += 1;
        let (out, fin) = launch(
            &mut c,
            id,
            &proj,
            backend,
            vec![json!({"kind": "open_network"})],
            &[
                format!("c,127.0.0.1,{port}"),
                format!("c,127.0.0.1,{closed}"),
            ],
        );
        assert!(
            out.contains(&format!("127.0.0.1 {port} got host-echo hello\n"))
                && out.contains(&format!("127.0.0.1 {closed} refused ECONNREFUSED\n")),
            "{backend}: {out}\n{fin}"
        );
        assert_eq!(echo.accepted(), before + 1, "{backend}: {out}");
        assert!(exits(&fin).is_empty(), "{backend}: {fin}");
        let before = echo.accepted();

        // A grant of another port: this one stays unreachable (and is recorded).
        id += 1;
        let (out, fin) = launch(
            &mut c,
            id,
            &proj,
            backend,
            vec![tcp_grant("localhost", free_port())],
            &[format!("c,127.0.0.1,{port}")],
        );
        assert!(
            out.contains(&format!("127.0.0.1 {port} refused ECONNREFUSED\n")),
            "{backend}: {out}\n{fin}"
        );
        assert_eq!(echo.accepted(), before, "{backend}: the host was reached");
        assert!(
            exits(&fin)
                .iter()
                .any(|r| r["needs"]["grants"] == json!([tcp_grant("localhost", port)])),
            "{backend}: {fin}"
        );
        assert!(
            fin["sandbox_summary"].get("tcp_relayed").is_none(),
            "{backend}: {fin}"
        );

        // A granted port where nothing listens on the host: the call's connect is taken
        // (its listener), the host's port refuses the relay, the connection ends, and the
        // refusal is `host_refused` of the host's address, needing no grant.
        let dead = free_port();
        id += 1;
        let (out, fin) = launch(
            &mut c,
            id,
            &proj,
            backend,
            vec![tcp_grant("127.0.0.1", dead)],
            &[format!("c,127.0.0.1,{dead}")],
        );
        assert!(
            out.contains(&format!("127.0.0.1 {dead} got EOF\n")),
            "{backend}: {out}\n{fin}"
        );
        assert_eq!(
            fin["sandbox_summary"]["blocked"],
            json!([{"host": "127.0.0.1", "port": dead, "reason": "host_refused"}]),
            "{backend}: {fin}"
        );
        let ex = exits(&fin);
        assert_eq!(ex.len(), 1, "{backend}: {fin}");
        assert_eq!(
            ex[0]["summary"],
            json!(format!(
                "reach the host's 127.0.0.1:{dead} (refused by the host: host_refused)"
            )),
            "{fin}"
        );
        assert_eq!(ex[0]["needs"], json!({"kind": "nothing"}), "{fin}");
    }
}

/// `efr-sandbox run` prints the exact `--grant` of a refused loopback port, and the retry
/// with it reaches the host's server.
#[test]
fn run_prints_the_tcp_grant_and_the_retry_reaches_the_host() {
    if !have("python3") {
        skip("python3 is needed");
        return;
    }
    let echo = Echo::start("127.0.0.1:0").unwrap();
    let port = echo.port();
    let d = temp_env();
    let proj = d.path().join("home/proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("client.py"), CLIENT).unwrap();
    let p = proj.to_str().unwrap();
    let run = |grants: &[String]| {
        let mut cmd = command(d.path());
        cmd.arg("run").args(["--project", p, "--cwd", p]);
        for g in grants {
            cmd.args(["--grant", g]);
        }
        let o = cmd
            .args(["--", &format!("python3 client.py c,127.0.0.1,{port}")])
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (out, err) = run(&[]);
    assert!(
        out.contains(&format!("127.0.0.1 {port} refused ECONNREFUSED")),
        "{out}\n{err}"
    );
    let want = format!("retry with --grant host=localhost:{port}:tcp");
    let line = err
        .lines()
        .find(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("no {want:?} in {err}"));
    let grant = line.rsplit_once("--grant ").unwrap().1.to_string();
    let (out, err) = run(&[grant]);
    assert!(
        out.contains(&format!("127.0.0.1 {port} got host-echo hello")),
        "{out}\n{err}"
    );
    assert!(!err.contains("refused:"), "{err}");
    assert_eq!(echo.accepted(), 1);
}
