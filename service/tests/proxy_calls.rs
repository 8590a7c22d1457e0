//! Contained calls through their egress proxy, end to end: `efr-sandbox run` with
//! host grants and a config whose `[network.resolve]` maps `registry.test` to a local TLS
//! server (openssl s_server, a certificate made here). Real traffic on loopback only.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{KillOnDrop, command, have, self_signed, skip, temp_env};
use serde_json::{Value, json};

/// A TLS server for `registry.test` on a free loopback port; the certificate at `dir/cert.pem`.
fn tls_server(dir: &Path) -> (KillOnDrop, u16) {
    self_signed(dir, "registry.test");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(dir.join("cert.pem"))
        .arg("-key")
        .arg(dir.join("key.pem"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "s_server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (KillOnDrop(child), port)
}

fn blocked(v: &Value) -> Vec<(String, u64, String, u64)> {
    let mut out: Vec<_> = v["blocked"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|b| {
            (
                b["host"].as_str().unwrap().to_string(),
                b["port"].as_u64().unwrap(),
                b["reason"].as_str().unwrap().to_string(),
                b["count"].as_u64().unwrap_or(1),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn contained_calls_through_the_proxy() {
    if !have("curl") || !have("openssl") || !have("python3") {
        skip("curl, openssl and python3 are needed");
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_tls, port) = tls_server(&proj);
    std::fs::create_dir_all(d.path().join("config/efr")).unwrap();
    std::fs::write(
        d.path().join("config/efr/config.toml"),
        "[network]\ndeny = [\"bad.test\"]\n\
         resolve = { \"registry.test\" = \"127.0.0.1\", \"bad.test\" = \"127.0.0.1\" }\n",
    )
    .unwrap();
    // Sends CONNECT registry.test:PORT then a ClientHello for another name (bad_request).
    std::fs::write(
        proj.join("sni.py"),
        "import socket, ssl, sys\n\
         s = socket.create_connection(('127.0.0.1', 3128))\n\
         s.sendall(b'CONNECT registry.test:%s HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' % sys.argv[1].encode())\n\
         assert s.recv(4096).startswith(b'HTTP/1.1 200')\n\
         c = ssl.create_default_context(cafile='cert.pem')\n\
         try:\n    c.wrap_socket(s, server_hostname='other.test')\nexcept Exception as e:\n    print('sni refused')\n",
    )
    .unwrap();
    // Ignores the proxy variables: DNS + synthetic relay.
    std::fs::write(
        proj.join("direct.py"),
        "import socket, ssl, sys\n\
         ip = socket.gethostbyname('registry.test')\n\
         s = socket.create_connection(('registry.test', int(sys.argv[1])))\n\
         c = ssl.create_default_context(cafile='cert.pem')\n\
         t = c.wrap_socket(s, server_hostname='registry.test')\n\
         t.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n\
         print('direct', ip, t.recv(12))\n\
         try:\n    socket.gethostbyname('bad.test'); print('bad.test resolved')\n\
         except socket.gaierror:\n    print('bad.test nxdomain')\n",
    )
    .unwrap();
    // The line holds none of the handed sockets (its shell has fds 0-2 only), and a
    // hand-over of its own (a listener it bound) is refused: the proxy took the init's,
    // before the line existed, and takes no other.
    std::fs::write(
        proj.join("handover.py"),
        "import os, socket\n\
         d = '/proc/%d/fd' % os.getppid()\n\
         print('line fds', sorted(int(f) for f in os.listdir(d)))\n\
         l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n\
         try:\n\
         \x20   u = socket.socket(socket.AF_UNIX); u.settimeout(20); u.connect('/dev/efr/proxy.sock')\n\
         \x20   socket.send_fds(u, [bytes([1, 1]) + b'r'], [l.fileno()])\n\
         \x20   print('handover', 'TAKEN' if u.recv(1) else 'refused (no answer)')\n\
         except OSError as e:\n\
         \x20   print('handover refused (%s)' % e)\n",
    )
    .unwrap();
    // A lookup of a name not granted, through the call's DNS server (refused, reported).
    std::fs::write(
        proj.join("lookup.py"),
        "import socket\n\
         try:\n    socket.getaddrinfo('not-granted.test', 443); print('not-granted.test resolved')\n\
         except socket.gaierror:\n    print('not-granted.test refused')\n",
    )
    .unwrap();
    let line = format!(
        "python3 handover.py; \
         curl -sS -o /dev/null -w 'ok=%{{http_code}}\\n' --cacert cert.pem https://registry.test:{port}/; \
         curl -sS https://nope.test/; \
         curl -sS https://bad.test/; \
         curl -sS --noproxy '' -k https://127.0.0.1:{port}/; \
         curl -sS -p --proxytunnel http://registry.test:{port}/; \
         python3 sni.py {port}; \
         curl -sS --noproxy '' -k https://localhost:{port}/; \
         env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy -u ALL_PROXY -u all_proxy \
           python3 direct.py {port}; \
         python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((\"127.0.0.1\", 53))' 2>&1 | tail -1; \
         python3 lookup.py; \
         true"
    );
    for backend in ["native", "bwrap"] {
        if backend == "bwrap" && !Path::new("/usr/bin/bwrap").exists() {
            skip("bubblewrap is not installed");
            continue;
        }
        let summary = d.path().join(format!("summary-{backend}.json"));
        let p = proj.to_str().unwrap();
        let o = command(d.path())
            .arg("run")
            .args(["--backend", backend, "--project", p, "--cwd", p])
            .args(["--grant", &format!("host=registry.test:{port}")])
            .args(["--grant", &format!("host=localhost:{port}")])
            .arg("--summary")
            .arg(&summary)
            .args(["--", &line])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{backend}: {out}\n{err}");
        assert!(
            out.contains("line fds [0, 1, 2]\n"),
            "{backend}: {out}\n{err}"
        );
        assert!(out.contains("handover refused"), "{backend}: {out}\n{err}");
        // ... and the proxy keeps serving the call (the checks below).
        assert!(out.contains("ok=200"), "{backend}: {out}\n{err}");
        assert!(out.contains("sni refused"), "{backend}: {out}\n{err}");
        assert!(
            out.contains("direct 127.77.0.") && out.contains("HTTP/1.0 200"),
            "{backend}: {out}\n{err}"
        );
        assert!(out.contains("bad.test nxdomain"), "{backend}: {out}\n{err}");
        assert!(
            out.contains("not-granted.test refused"),
            "{backend}: {out}\n{err}"
        );
        // The line cannot take the DNS server's port (UDP 127.0.0.1:53 is the init's).
        assert!(out.contains("Error"), "{backend}: {out}\n{err}");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_eq!(v["proxied"], json!(true), "{v}");
        let ps = port as u64;
        // A lookup has no port: a refused one counts on 443 (bad.test: curl's CONNECT and
        // direct.py's lookup, one entry). getaddrinfo asks A and AAAA: 2 lookups, but a
        // resolver may ask once.
        let mut got = blocked(&v);
        let lookups = got
            .iter()
            .position(|b| b.0 == "not-granted.test")
            .map(|i| got.remove(i));
        assert!(
            matches!(&lookups, Some((_, 443, r, 1..=2)) if r == "not_allowed"),
            "{backend}: {lookups:?} in {v}"
        );
        let want = {
            let mut w = vec![
                ("127.0.0.1".to_string(), ps, "ip_literal".to_string(), 1),
                ("bad.test".into(), 443, "denied".into(), 2),
                ("localhost".into(), ps, "denied".into(), 1),
                ("nope.test".into(), 443, "not_allowed".into(), 1),
                ("registry.test".into(), ps, "bad_request".into(), 1),
                ("registry.test".into(), ps, "not_tls".into(), 1),
            ];
            w.sort();
            w
        };
        assert_eq!(got, want, "{backend}: {v}\n{err}");
        assert!(v.get("blocked_more").is_none(), "{v}");
        // Each refusal is a denial exit record (printed by `run`), the lookup's too.
        for (h, p, r, _) in want.iter().chain(&lookups) {
            let l = format!("reach {h}:{p} (refused by the proxy: {r})");
            assert!(err.contains(&l), "{backend}: no {l:?} in {err}");
        }
    }
}

#[test]
fn launch_stream_carries_host_exits() {
    if !have("curl") {
        skip("curl is needed");
        return;
    }
    let s = common::Server::start(&[]);
    let mut c = s.client();
    c.request(
        1,
        "sandbox.launch",
        json!({"line": "curl -sS https://nope.test/; curl -sS https://allowed.test:1/; \
                         python3 -c \"import socket; socket.getaddrinfo('not-granted.test', 443)\"; true", "cwd": "/",
               "grants": [{"kind": "host", "host": "allowed.test", "port": 1}]}),
    );
    let mut items = Vec::new();
    let end = loop {
        let f = c.recv();
        if let Some(i) = f.get("item") {
            items.push(i.clone());
        } else {
            break f;
        }
    };
    // The proxy's refusal of nope.test, and the DNS server's of not-granted.test (a lookup
    // is reported on port 443): one exit record each, as they happen.
    let exits: Vec<&Value> = items.iter().filter(|i| i["kind"] == "exit").collect();
    assert_eq!(exits.len(), 2, "{items:?}\n{end}");
    for (r, host) in exits
        .iter()
        .map(|e| &e["record"])
        .zip(["nope.test", "not-granted.test"])
    {
        assert_eq!(r["kind"], "host", "{r}");
        assert_eq!(r["source"], "denial", "{r}");
        assert_eq!(
            r["needs"]["grants"],
            json!([{"kind": "host", "host": host}]),
            "{r}"
        );
        assert_eq!(
            r["summary"],
            json!(format!(
                "reach {host}:443 (refused by the proxy: not_allowed)"
            )),
            "{r}"
        );
    }
    let sum = &end["end"]["sandbox_summary"];
    assert_eq!(sum["proxied"], json!(true), "{end}");
    let blocked = sum["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 2, "{end}");
    assert_eq!(
        blocked[0],
        json!({"host": "nope.test", "port": 443, "reason": "not_allowed"}),
        "{end}"
    );
    // getaddrinfo asks A and AAAA (a resolver may ask once): each refused query counts.
    let b = &blocked[1];
    assert_eq!(
        (&b["host"], &b["port"], &b["reason"]),
        (
            &json!("not-granted.test"),
            &json!(443),
            &json!("not_allowed")
        ),
        "{end}"
    );
    assert!(matches!(b["count"].as_u64().unwrap_or(1), 1..=2), "{end}");
    assert_eq!(
        end["end"]["exits"].as_array().map(|a| a.len()),
        Some(2),
        "{end}"
    );
}

/// The `--grant` words of every `retry with` line `run` printed.
fn retry_grants(err: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in err.lines() {
        if let Some((_, rest)) = l.split_once("; retry with ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            for w in words.chunks(2) {
                assert_eq!(w[0], "--grant", "{l}");
                out.push(w[1].to_string());
            }
        }
    }
    out
}

/// A call with no grant still gets the proxy's DNS path and refusal path;
/// each refusal is a `host` exit naming the grant that opens it, and `run` prints the exact
/// `--grant` to retry with. Granted as printed, the retry reaches the local registry (mapped
/// by `[network.resolve]`); a name that resolves into loopback is refused with the address,
/// its range and `[network.resolve]` named; mapped as said, it works too.
#[test]
fn refusals_name_the_grant_and_the_retry_works() {
    if !have("curl") || !have("openssl") || !have("python3") {
        skip("curl, openssl and python3 are needed");
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_tls, port) = tls_server(&proj);
    std::fs::create_dir_all(d.path().join("config/efr")).unwrap();
    let config = d.path().join("config/efr/config.toml");
    // Through the proxy variables (curl), and a lookup that ignores them (python).
    let line = format!(
        "curl -sS -o /dev/null -w 'registry=%{{http_code}}\\n' --cacert cert.pem \
           https://registry.test:{port}/; \
         curl -sS -o /dev/null -w 'localhost=%{{http_code}}\\n' --noproxy '' -k \
           https://localhost:{port}/; \
         python3 -c \"import socket; socket.getaddrinfo('pkg.test', 443)\" 2>/dev/null \
           || echo pkg.test refused; \
         true"
    );
    for backend in common::backends() {
        let p = proj.to_str().unwrap();
        let run = |grants: &[String]| {
            let json = d.path().join(format!("finish-{backend}.json"));
            let mut c = command(d.path());
            c.arg("run")
                .args(["--backend", backend, "--project", p, "--cwd", p]);
            for g in grants {
                c.args(["--grant", g]);
            }
            let o = c
                .arg("--json")
                .arg(&json)
                .args(["--", &line])
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert_eq!(o.status.code(), Some(0), "{backend}: {out}\n{err}");
            let fin: Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            (out, err, fin)
        };
        std::fs::write(
            &config,
            "[network.resolve]\n\"registry.test\" = \"127.0.0.1\"\n",
        )
        .unwrap();

        // 1. No grant: three refusals, each a host exit naming exactly its grant.
        let (out, err, fin) = run(&[]);
        assert!(out.contains("pkg.test refused"), "{backend}: {out}\n{err}");
        assert_eq!(fin["sandbox_summary"]["proxied"], json!(true), "{fin}");
        let mut exits: Vec<(String, Value)> = fin["exits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                assert_eq!(r["kind"], "host", "{r}");
                assert_eq!(r["source"], "denial", "{r}");
                assert_eq!(r["judgement"]["verdict"], "review", "{r}");
                (
                    r["facts"]["hosts"][0]["host"].as_str().unwrap().to_string(),
                    r["needs"].clone(),
                )
            })
            .collect();
        exits.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            exits,
            vec![
                (
                    "localhost".into(),
                    json!({"kind": "contained", "grants": [{"kind": "host", "host": "localhost", "port": port}]})
                ),
                (
                    "pkg.test".into(),
                    json!({"kind": "contained", "grants": [{"kind": "host", "host": "pkg.test"}]})
                ),
                (
                    "registry.test".into(),
                    json!({"kind": "contained", "grants": [{"kind": "host", "host": "registry.test", "port": port}]})
                ),
            ],
            "{backend}: {fin}"
        );
        for want in [
            format!(
                "efr-sandbox: refused: reach registry.test:{port} (refused by the proxy: \
                 not_allowed); retry with --grant host=registry.test:{port}\n"
            ),
            format!(
                "efr-sandbox: refused: reach localhost:{port} (refused by the proxy: \
                 not_allowed); retry with --grant host=localhost:{port}\n"
            ),
            "efr-sandbox: refused: reach pkg.test:443 (refused by the proxy: not_allowed); \
             retry with --grant host=pkg.test\n"
                .to_string(),
        ] {
            assert!(err.contains(&want), "{backend}: no {want:?} in\n{err}");
        }
        let grants = retry_grants(&err);
        assert_eq!(grants.len(), 3, "{backend}: {err}");

        // 2. Granted as printed: the registry answers; localhost resolves into loopback and
        // is refused with the address, its range and `[network.resolve]` named.
        let (out, err, fin) = run(&grants);
        assert!(out.contains("registry=200"), "{backend}: {out}\n{err}");
        assert!(out.contains("localhost=000"), "{backend}: {out}\n{err}");
        let exits = fin["exits"].as_array().unwrap();
        assert_eq!(exits.len(), 1, "{backend}: {fin}");
        let r = &exits[0];
        assert_eq!(
            (&r["kind"], &r["needs"]),
            (&json!("host"), &json!({"kind": "nothing"})),
            "{r}"
        );
        let hint = "localhost resolves to 127.0.0.1, in the loopback range, which the proxy \
                    never dials for a name it resolved itself; to reach that address on \
                    purpose, map the name to it in the [network.resolve] table of the config";
        let why = r["judgement"]["reasons"][0].as_str().unwrap();
        assert!(why.contains(hint), "{backend}: {why}");
        // The reason's lines after its first are the entry to paste.
        assert!(
            why.ends_with(":\n[network.resolve]\nlocalhost = \"127.0.0.1\""),
            "{backend}: {why:?}"
        );
        assert!(
            err.contains(&format!(
                "efr-sandbox: refused: reach localhost:{port} (refused by the proxy: denied): \
                 the proxy refused localhost:{port}: {hint}"
            )),
            "{backend}: {err}"
        );
        assert!(retry_grants(&err).is_empty(), "{backend}: {err}");
        // After the refusals, the lines to paste into the config file, which it names.
        let (_, block) = err
            .split_once(&format!(
                "efr-sandbox: to allow on purpose what the refusals above name, add these \
                 lines to {} (a table it already has takes the entries under its own \
                 header):\n",
                config.display()
            ))
            .unwrap_or_else(|| panic!("{backend}: no config hint in\n{err}"));
        assert_eq!(
            block, "[network.resolve]\nlocalhost = \"127.0.0.1\"\n",
            "{backend}: {err}"
        );

        // 3. Mapped as the hint says (the file has the table already: the entry lines go
        // under its header, here the end of the file): every name of the line works,
        // nothing is refused.
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.extend(block.lines().skip(1).map(|l| format!("{l}\n")));
        std::fs::write(&config, text).unwrap();
        let (out, err, fin) = run(&grants);
        assert!(
            out.contains("registry=200") && out.contains("localhost=200"),
            "{backend}: {out}\n{err}"
        );
        assert!(fin.get("exits").is_none(), "{backend}: {fin}");
        assert!(!err.contains("refused:"), "{backend}: {err}");
    }
}

/// `sandbox.launch` with no grant at all: the call still has the proxy, and a refused name
/// is an `exit` item naming the grant (a call without a proxy had no record of it, only
/// "could not resolve host").
#[test]
fn launch_with_no_grant_carries_host_exits() {
    if !have("curl") {
        skip("curl is needed");
        return;
    }
    let s = common::Server::start(&[]);
    let mut c = s.client();
    for (id, backend) in common::backends().into_iter().enumerate() {
        let id = id as u64 + 1;
        c.request(
            id,
            "sandbox.launch",
            json!({"line": "curl -sS https://nope.test/; true", "cwd": "/", "backend": backend}),
        );
        let (items, end) = common::collect(&mut c, id);
        let exits: Vec<&Value> = items.iter().filter(|i| i["kind"] == "exit").collect();
        assert_eq!(exits.len(), 1, "{backend}: {items:?}\n{end}");
        let r = &exits[0]["record"];
        assert_eq!(
            (&r["kind"], &r["source"]),
            (&json!("host"), &json!("denial")),
            "{r}"
        );
        assert_eq!(
            r["needs"],
            json!({"kind": "contained", "grants": [{"kind": "host", "host": "nope.test"}]}),
            "{r}"
        );
        let sum = &end["end"]["sandbox_summary"];
        assert_eq!(sum["proxied"], json!(true), "{end}");
        assert_eq!(
            sum["blocked"],
            json!([{"host": "nope.test", "port": 443, "reason": "not_allowed"}]),
            "{end}"
        );
    }
}

/// The benchmark's knob (`scripts/bench-proxy-launch.sh`, WEAKEN=no_proxy): a call with its
/// own network and no proxy, the same build otherwise; the launcher refuses such a plan
/// unless its own variable allows test knobs.
#[test]
fn the_no_proxy_knob_drops_the_proxy_only_where_test_knobs_are_allowed() {
    let dir = temp_env();
    let proj = dir.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let summary = dir.path().join("summary.json");
    let run = |allow: bool| {
        let mut c = command(dir.path());
        c.env(efr_launcher::plan::TEST_WEAKEN_ENV, "no_proxy");
        if allow {
            c.env(efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV, "1");
        } else {
            c.env_remove(efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV);
        }
        // In the project: the test's own cwd may be under /tmp, which a call has its own of.
        c.current_dir(&proj)
            .arg("run")
            .arg("--project")
            .arg(&proj)
            .arg("--summary")
            .arg(&summary)
            .args(["--", "true"])
            .output()
            .unwrap()
    };
    let o = run(true);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_ne!(v["proxied"], json!(true), "{v}");
    let o = run(false);
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no_proxy"),
        "{o:?}"
    );
}
