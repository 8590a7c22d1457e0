//! A real package manager through the call's proxy with only the grants the classifier
//! proposed: a user logged in to a company npm registry (a token in
//! `~/.npmrc`, which is masked) runs `npm view`. The classifier proposes the registry's
//! host from `~/.npmrc` (not `denied`: the call cannot read the token), the call sees the
//! scrubbed copy of `~/.npmrc` (its `registry` and `cafile` apply inside, the token does
//! not), and npm reaches the registry (a TLS server on loopback that `[network.resolve]`
//! maps the name to) through the proxy, without the token. Real traffic on loopback only.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{KillOnDrop, command, have, self_signed, skip};
use serde_json::Value;

const TOKEN: &str = "npm_TOPSECRETtokenTOPSECRETtoken0123";

/// A registry for `registry.test` over TLS on a free loopback port: every request's
/// `Authorization` header is appended to `dir/auth.log`; `/left-pad` is a package document.
fn registry(dir: &Path) -> (KillOnDrop, u16) {
    self_signed(dir, "registry.test");
    let script = r#"
import http.server, json, ssl, sys
d = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(d + '/auth.log', 'a') as f:
            f.write('%s %s\n' % (self.path, self.headers.get('authorization')))
        port = self.server.server_address[1]
        doc = {'name': 'left-pad', 'dist-tags': {'latest': '1.3.0'},
               'versions': {'1.3.0': {'name': 'left-pad', 'version': '1.3.0',
                   'dist': {'tarball': 'https://registry.test:%d/left-pad/-/left-pad-1.3.0.tgz' % port}}}}
        b = json.dumps(doc).encode() if self.path.lstrip('/').startswith('left-pad') else b'{}'
        self.send_response(200 if b != b'{}' else 404)
        self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.load_cert_chain(d + '/cert.pem', d + '/key.pem')
s.socket = c.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("port {line:?}"));
    (KillOnDrop(child), port)
}

#[test]
fn npm_with_a_masked_token_reaches_its_registry_with_the_proposed_grants() {
    if !have("npm") || !have("openssl") || !have("python3") {
        skip("npm, openssl and python3 are needed");
        return;
    }
    // Not under /tmp: a contained call has its own /tmp, where the home would not be.
    let d = tempfile::Builder::new()
        .prefix("efr-registry-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let home = d.path().join("home");
    let proj = home.join("proj");
    let srv = d.path().join("srv");
    for p in [&proj, &srv, &d.path().join("config/efr")] {
        std::fs::create_dir_all(p).unwrap();
    }
    let (_server, port) = registry(&srv);
    let ca = srv.join("cert.pem");
    std::fs::write(
        home.join(".npmrc"),
        format!(
            "registry=https://registry.test:{port}/\ncafile={}\n//registry.test:{port}/:_authToken={TOKEN}\n",
            ca.display()
        ),
    )
    .unwrap();
    std::fs::write(
        d.path().join("config/efr/config.toml"),
        "[network]\nresolve = { \"registry.test\" = \"127.0.0.1\" }\n",
    )
    .unwrap();
    let p = proj.to_str().unwrap();
    let npm = "npm_config_cache=/tmp/npm-cache npm view left-pad version";
    // What the classifier proposes, granted as is.
    let o = command(d.path())
        .args(["classify", "--json", "--cwd", p, "--project", p, "--", npm])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let grants = v["launch"]["grants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        v["launch"]["kind"], "contained",
        "the token denied the host: {v}"
    );
    let mut args = Vec::new();
    for g in &grants {
        assert_eq!(g["kind"], "host", "{v}");
        let mut s = g["host"].as_str().unwrap().to_string();
        if let Some(port) = g["port"].as_u64() {
            s = format!("{s}:{port}");
        }
        args.extend(["--grant".to_string(), format!("host={s}")]);
    }
    assert_eq!(
        args,
        ["--grant".to_string(), format!("host=registry.test:{port}")],
        "{v}"
    );
    for backend in ["native", "bwrap"] {
        if backend == "bwrap" && !Path::new("/usr/bin/bwrap").exists() {
            skip("bubblewrap is not installed");
            continue;
        }
        let _ = std::fs::remove_file(srv.join("auth.log"));
        let o = command(d.path())
            .arg("run")
            .args(["--backend", backend, "--project", p, "--cwd", p])
            .args(&args)
            .args(["--", &format!("{npm}; cat ~/.npmrc")])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{backend}: {out}\n{err}");
        assert!(
            out.contains("1.3.0"),
            "{backend}: npm did not get the package: {out}\n{err}"
        );
        assert!(
            out.contains(&format!("registry=https://registry.test:{port}/")),
            "{backend}: {out}"
        );
        assert!(
            !out.contains(TOKEN),
            "{backend}: the token reached the call: {out}"
        );
        let log = std::fs::read_to_string(srv.join("auth.log")).unwrap_or_default();
        assert!(log.contains("left-pad"), "{backend}: {log}");
        assert!(
            !log.contains(TOKEN),
            "{backend}: the token reached the registry: {log}"
        );
    }
}
