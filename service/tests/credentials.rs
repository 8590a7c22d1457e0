//! The credential broker with real clients: contained calls holding a `credential=NAME`
//! grant run `git clone`/`git push`, `curl`, `npm publish` and `gh api` against an HTTPS
//! server on loopback (`fixtures/broker_server.py`, its certificate from a CA made here with
//! rcgen and given to the service as `[proxy] extra_roots`; `[network] resolve` maps the
//! test hosts to 127.0.0.1). In each: the server receives the real secret, the call sees
//! only the placeholder (its environment, `/proc/*/environ`, its files, its git config), a
//! placeholder sent to a host it is not bound to is refused with a `credential` exit record,
//! and a secret the server echoes comes back masked. Both backends, HTTP/1.1 and HTTP/2.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{KillOnDrop, backends, command, have, skip};
use serde_json::Value;

/// The secrets of the test's credentials: of each token's real shape, so that the
/// placeholder keeps its prefix and length.
const GIT_SECRET: &str = "ghp_GitSecretGitSecretGitSecretGitSe0001";
const FORGE_SECRET: &str = "glpat-ForgeSecretForgeSecr01";
const NPM_SECRET: &str = "npm_NpmSecretNpmSecretNpmSecretNpmSe0001";
const GH_SECRET: &str = "ghp_GhSecretGhSecretGhSecretGhSecretGh01";
/// npm's token key in two pieces: the surface's secret scan of a clone of this repository
/// must find no token-shaped line in it.
const NPM_KEY: &str = concat!("_auth", "Token");
const ALL_SECRETS: [&str; 4] = [GIT_SECRET, FORGE_SECRET, NPM_SECRET, GH_SECRET];

/// The test hosts (the leaf's names).
const HOSTS: [&str; 5] = ["git.test", "api.test", "npm.test", "ghe.test", "other.test"];

/// A world: a temp home and config, the test CA, the HTTPS server, a bare repository.
struct World {
    d: tempfile::TempDir,
    port: u16,
    _server: KillOnDrop,
}

impl World {
    fn new() -> Option<World> {
        for tool in ["git", "curl", "python3"] {
            if !have(tool) {
                skip(&format!("{tool} is needed"));
                return None;
            }
        }
        // Not below /tmp: a call has its own /tmp, and the home's files (the `.npmrc`
        // the broker copies) must be the host's.
        let d = tempfile::Builder::new()
            .prefix("efr-broker-")
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::create_dir(d.path().join("home")).unwrap();
        std::fs::create_dir(d.path().join("config")).unwrap();
        let pki = d.path().join("pki");
        std::fs::create_dir_all(&pki).unwrap();
        make_pki(&pki);
        let git_root = d.path().join("gitroot");
        make_repository(&git_root);
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broker_server.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(pki.join("leaf.pem"))
            .arg(pki.join("leaf.key"))
            .arg(d.path().join("server.jsonl"))
            .arg(&git_root)
            .env("GIT_SECRET", GIT_SECRET)
            .env("GH_SECRET", GH_SECRET)
            .env("NPM_SECRET", NPM_SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = KillOnDrop(child);
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the test server did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let w = World {
            d,
            port,
            _server: server,
        };
        w.write_config();
        std::fs::create_dir_all(w.proj()).unwrap();
        Some(w)
    }

    fn dir(&self) -> &Path {
        self.d.path()
    }

    fn home(&self) -> PathBuf {
        self.dir().join("home")
    }

    fn proj(&self) -> PathBuf {
        self.home().join("proj")
    }

    fn state(&self) -> PathBuf {
        self.dir().join("state")
    }

    /// The config: the hosts mapped to loopback, the test CA as an extra root, and the
    /// credentials of the clients.
    fn write_config(&self) {
        let p = self.port;
        let resolve: Vec<String> = HOSTS
            .iter()
            .map(|h| format!("\"{h}\" = \"127.0.0.1\""))
            .collect();
        let ca = self.dir().join("pki/ca.pem");
        let text = format!(
            "[network]\nresolve = {{ {} }}\n\n\
             [proxy]\nextra_roots = [\"{}\"]\n\n\
             [[credential]]\nname = \"gitcred\"\nhosts = [\"git.test:{p}\"]\n\
             env = \"GIT_TEST_TOKEN\"\nsend = \"basic\"\nuser = \"x-access-token\"\ngit = true\n\n\
             [[credential]]\nname = \"forge\"\nhosts = [\"api.test:{p}\"]\n\
             env = \"FORGE_TOKEN\"\nsend = \"bearer\"\nplaceholder_env = \"FORGE_TOKEN\"\n\n\
             [[credential]]\nname = \"npmreg\"\nhosts = [\"npm.test:{p}\"]\n\
             file = \"~/.npmrc\"\npattern = \"//npm.test:{p}/npm/:{NPM_KEY}=(\\\\S+)\"\n\
             send = \"bearer\"\n\n\
             [[credential]]\nname = \"ghe\"\nhosts = [\"ghe.test:{p}\"]\n\
             env = \"GH_ENTERPRISE_TOKEN\"\nsend = \"token\"\n\
             placeholder_env = \"GH_ENTERPRISE_TOKEN\"\n\n\
             [[credential]]\nname = \"missing\"\nhosts = [\"api.test:{p}\"]\n\
             env = \"EFR_TEST_NO_SUCH_TOKEN\"\nsend = \"bearer\"\n",
            resolve.join(", "),
            ca.display()
        );
        let dir = self.dir().join("config/efr");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), text).unwrap();
        std::fs::write(
            self.home().join(".npmrc"),
            format!("//npm.test:{p}/npm/:{NPM_KEY}={NPM_SECRET}\n//other.test/:{NPM_KEY}=npm_OtherOtherOtherOtherOtherOtherOt0001\n"),
        )
        .unwrap();
    }

    /// A command of the binary in the world, the credentials' variables in its
    /// environment (the service's, where their `env` sources are read).
    fn command(&self) -> Command {
        let mut c = command(self.dir());
        c.env("XDG_STATE_HOME", self.state())
            .env("GIT_TEST_TOKEN", GIT_SECRET)
            .env("FORGE_TOKEN", FORGE_SECRET)
            .env("GH_ENTERPRISE_TOKEN", GH_SECRET)
            .env_remove("EFR_TEST_NO_SUCH_TOKEN");
        // The host's own trust variables (a CI image sets some): a call without the grant
        // shows what the host gives it, and the test checks it gives none.
        for v in [
            "SSL_CERT_FILE",
            "NODE_EXTRA_CA_CERTS",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "CARGO_HTTP_CAINFO",
            "PIP_CERT",
            "AWS_CA_BUNDLE",
            "NIX_SSL_CERT_FILE",
            "HTTPLIB2_CA_CERTS",
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
            "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
        ] {
            c.env_remove(v);
        }
        c
    }

    /// The world's service (`serve`), with the credentials' variables.
    fn serve(&self) -> common::Server {
        let sock_dir = tempfile::tempdir().unwrap();
        let socket = sock_dir.path().join("sandbox.sock");
        let mut cmd = self.command();
        cmd.arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--test-methods");
        common::Server::spawn(cmd, sock_dir, socket)
    }

    /// `efr-sandbox run` of `line` on `backend` with `grants`: its output and finish.
    fn run(&self, backend: &str, grants: &[String], line: &str) -> (Output, Value) {
        let p = self.proj();
        let p = p.to_str().unwrap();
        let fin = self.dir().join(format!("finish-{backend}.json"));
        let _ = std::fs::remove_file(&fin);
        let mut c = self.command();
        c.arg("run")
            .args(["--backend", backend, "--project", p, "--cwd", p]);
        for g in grants {
            c.args(["--grant", g]);
        }
        let o = c
            .arg("--json")
            .arg(&fin)
            .args(["--", line])
            .output()
            .unwrap();
        let fin = std::fs::read_to_string(&fin)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        (o, fin)
    }

    /// The requests the server got.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir().join("server.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The test CA and a leaf for every test host, signed by it.
fn make_pki(dir: &Path) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "efr broker test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_params =
        rcgen::CertificateParams::new(HOSTS.iter().map(|h| h.to_string()).collect::<Vec<_>>())
            .unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_der(ca.der(), &ca_key).unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("leaf.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("leaf.key"), leaf_key.serialize_pem()).unwrap();
}

/// A bare repository `repo.git` with one commit on `main`, served by the test server.
fn make_repository(root: &Path) {
    let bare = root.join("repo.git");
    let work = root.join("work");
    let git = |dir: &Path, args: &[&str]| {
        let o = Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    std::fs::create_dir_all(&work).unwrap();
    git(root, &["init", "-q", "--bare", "repo.git"]);
    git(&bare, &["config", "http.receivepack", "true"]);
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("README"), "hello\n").unwrap();
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-q", "-m", "first"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "HEAD:main"]);
}

fn text(o: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The part of a line that shows what the call can read of its secrets: every process's
/// environment, its own, its git config, its `.npmrc`, and the names of the files of the
/// home, /tmp and /etc that hold the secret's tail (its last 12 characters: the line holds
/// them, but no file does).
fn dump(tail: &str) -> String {
    format!(
        "echo ==dump; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done; \
         env; git config -l 2>/dev/null; cat ~/.npmrc 2>/dev/null; \
         grep -rlF -- '{tail}' ~ /tmp /etc /dev/efr 2>/dev/null | sed 's/^/HOLDS /'; echo ==end"
    )
}

/// No real secret in what the call could read (the dump of [`dump`]), nor a file holding
/// one's tail.
fn assert_no_secret(out: &str, ctx: &str) {
    let dumped = out
        .split("==dump")
        .nth(1)
        .unwrap_or_else(|| panic!("{ctx}: no dump in\n{out}"));
    for s in ALL_SECRETS {
        assert!(
            !dumped.contains(s),
            "{ctx}: the call can read {s}:\n{dumped}"
        );
    }
    assert!(
        !dumped.contains("\nHOLDS "),
        "{ctx}: a file holds a secret:\n{dumped}"
    );
}

fn uses(fin: &Value) -> Vec<(String, String, String, String, u64)> {
    let mut v: Vec<_> = fin["sandbox_summary"]["credentials_used"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|u| {
            (
                u["name"].as_str().unwrap_or("").to_string(),
                u["host"].as_str().unwrap_or("").to_string(),
                u["method"].as_str().unwrap_or("").to_string(),
                u["path"].as_str().unwrap_or("").to_string(),
                u["count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    v.sort();
    v
}

/// The service's calls (`sandbox.launch`) hold a credential as `run`'s do: the bound host
/// gets the secret, another host's refusal is a `credential` exit, the finish lists the use.
#[test]
fn the_services_calls_hold_a_credential_too() {
    let Some(w) = World::new() else { return };
    let s = w.serve();
    let p = w.proj();
    let port = w.port;
    for (id, b) in (10..).zip(backends()) {
        let mut c = s.client();
        let line = format!(
            "curl -sS -H \"Authorization: Bearer $FORGE_TOKEN\" https://api.test:{port}/echo/rpc-{b}; \
             curl -sS -H \"Authorization: Bearer $FORGE_TOKEN\" https://other.test:{port}/leak"
        );
        let params = serde_json::json!({
            "line": line, "projects": [p], "cwd": p, "backend": b,
            "grants": [
                {"kind": "credential", "name": "forge"},
                {"kind": "host", "host": "other.test", "port": port},
            ],
        });
        c.request(id, "sandbox.launch", params);
        let (_, end) = common::collect(&mut c, id);
        let fin = &end["end"];
        assert!(
            uses(fin)
                .iter()
                .any(|u| u.0 == "forge" && u.3 == format!("/echo/rpc-{b}")),
            "{b}: {end}"
        );
        let exits = fin["exits"].as_array().cloned().unwrap_or_default();
        assert!(
            exits.iter().any(
                |e| e["kind"] == "credential" && e["facts"]["hosts"][0]["host"] == "other.test"
            ),
            "{b}: {end}"
        );
        let reqs = w.requests();
        let got: Vec<&Value> = reqs
            .iter()
            .filter(|r| r["path"] == format!("/echo/rpc-{b}"))
            .collect();
        assert_eq!(got.len(), 1, "{b}: {reqs:?}");
        assert_eq!(got[0]["authorization"], format!("Bearer {FORGE_SECRET}"));
        assert!(!reqs.iter().any(|r| r["path"] == "/leak"), "{b}: {reqs:?}");
        assert!(!end.to_string().contains(FORGE_SECRET), "{b}: {end}");
    }
}

/// curl with `Authorization: Bearer $FORGE_TOKEN` over HTTP/1.1 and HTTP/2: the bound host
/// gets the secret and its echo comes back as the placeholder; another granted host gets
/// nothing (refused, a `credential` exit record); the summary lists the uses.
#[test]
fn curl_bearer_is_swapped_for_its_host_only() {
    let Some(w) = World::new() else { return };
    let p = w.port;
    let mut seen: Vec<String> = Vec::new();
    for backend in backends() {
        let line = format!(
            "test -n \"$FORGE_TOKEN\" && echo placeholder=$FORGE_TOKEN; \
             curl -sS --http1.1 -H \"Authorization: Bearer $FORGE_TOKEN\" https://api.test:{p}/echo/h1; \
             curl -sS --http2 -H \"Authorization: Bearer $FORGE_TOKEN\" https://api.test:{p}/echo/h2?q=1; \
             curl -sS -w ' other=%{{http_code}}\\n' -H \"Authorization: Bearer $FORGE_TOKEN\" https://other.test:{p}/echo/leak; \
             curl -sS -w ' plain=%{{http_code}}\\n' https://other.test:{p}/echo/fine; \
             {}",
            dump(&FORGE_SECRET[FORGE_SECRET.len() - 12..])
        );
        let grants = vec![
            "credential=forge".to_string(),
            format!("host=other.test:{p}"),
        ];
        let (o, fin) = w.run(backend, &grants, &line);
        let out = text(&o);
        let ctx = format!("{backend}: {out}\n{fin}");
        let ph = out
            .lines()
            .find_map(|l| l.strip_prefix("placeholder="))
            .unwrap_or_else(|| panic!("{ctx}"))
            .to_string();
        assert_ne!(ph, FORGE_SECRET, "{ctx}");
        assert_eq!(ph.len(), FORGE_SECRET.len(), "{ctx}");
        assert!(ph.starts_with("glpat-"), "{ctx}");
        // Unique per call.
        assert!(!seen.contains(&ph), "{ctx}: {ph} again");
        seen.push(ph.clone());
        // The echo of the real secret comes back masked, on both protocols.
        assert_eq!(
            out.matches(&format!("auth=Bearer {ph}\n")).count(),
            2,
            "{ctx}"
        );
        assert!(out.contains("plain=200"), "{ctx}");
        assert!(!out.contains("other=200"), "{ctx}");
        assert_no_secret(&out, &ctx);
        // The server: the real secret on api.test, never the placeholder; nothing with
        // either on other.test.
        let reqs = w.requests();
        let api: Vec<&Value> = reqs
            .iter()
            .filter(|r| r["path"].as_str().unwrap_or("").starts_with("/echo/h"))
            .collect();
        assert_eq!(api.len(), 2, "{ctx}\n{reqs:?}");
        for r in &api {
            assert_eq!(r["authorization"], format!("Bearer {FORGE_SECRET}"), "{r}");
        }
        assert!(
            !reqs.iter().any(|r| r["path"] == "/echo/leak"),
            "{ctx}\n{reqs:?}"
        );
        // The refusal: a `credential` exit record naming other.test, no grant proposed.
        let exits = fin["exits"].as_array().cloned().unwrap_or_default();
        let cred: Vec<&Value> = exits.iter().filter(|e| e["kind"] == "credential").collect();
        assert_eq!(cred.len(), 1, "{ctx}");
        let e = cred[0];
        assert_eq!(e["facts"]["hosts"][0]["host"], "other.test", "{e}");
        assert_eq!(e["facts"]["credential"], "forge", "{e}");
        assert!(e.to_string().contains("forge"), "{e}");
        assert_ne!(e["needs"]["kind"], "contained", "{e}");
        let blocked = fin["sandbox_summary"]["blocked"].to_string();
        assert!(blocked.contains("credential"), "{ctx}");
        let u = uses(&fin);
        assert!(
            u.iter()
                .any(|x| x.0 == "forge" && x.1 == "api.test" && x.2 == "GET" && x.3 == "/echo/h2"),
            "{ctx}\n{u:?}"
        );
        assert!(!fin.to_string().contains(FORGE_SECRET), "{ctx}");
        std::fs::remove_file(w.dir().join("server.jsonl")).ok();
    }
    // The call log lists the uses, never the secret.
    let o = command(w.dir())
        .env("XDG_STATE_HOME", w.state())
        .args(["log", "--json", "-n", "0"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stdout);
    assert!(log.contains("api.test"), "{log}");
    assert!(!log.contains(FORGE_SECRET), "{log}");
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    let id = last["id"].as_str().unwrap();
    let o = command(w.dir())
        .env("XDG_STATE_HOME", w.state())
        .args(["log", id])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains("credential") && shown.contains("forge sent to api.test GET /echo/h2"),
        "{shown}"
    );
    assert!(!shown.contains(FORGE_SECRET), "{shown}");
}

/// git clone and git push over HTTPS with Basic auth: git's credential helper answers the
/// placeholder, the server's http-backend gets the real password, the push lands.
#[test]
fn git_clone_and_push_over_https() {
    let Some(w) = World::new() else { return };
    let p = w.port;
    for backend in backends() {
        let _ = std::fs::remove_dir_all(w.proj().join("clone"));
        let line = format!(
            "git clone -q https://git.test:{p}/git/repo.git clone && cd clone && \
             git -c user.name=t -c user.email=t@t commit -q --allow-empty -m from-{backend} && \
             git push -q origin HEAD:main && echo pushed; \
             printf 'protocol=https\\nhost=git.test:{p}\\n\\n' | git credential fill; \
             {}",
            dump(&GIT_SECRET[GIT_SECRET.len() - 12..])
        );
        let (o, fin) = w.run(backend, &["credential=gitcred".to_string()], &line);
        let out = text(&o);
        let ctx = format!("{backend}: {out}\n{fin}");
        assert!(out.contains("pushed"), "{ctx}");
        assert!(out.contains("username=x-access-token"), "{ctx}");
        let ph = out
            .lines()
            .find_map(|l| l.strip_prefix("password="))
            .unwrap_or_else(|| panic!("{ctx}"));
        assert!(
            ph.starts_with("ghp_") && ph.len() == GIT_SECRET.len() && ph != GIT_SECRET,
            "{ctx}"
        );
        assert_no_secret(&out, &ctx);
        let log = Command::new("git")
            .args(["--git-dir"])
            .arg(w.dir().join("gitroot/repo.git"))
            .args(["log", "--format=%s", "main"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&log.stdout).contains(&format!("from-{backend}")),
            "{ctx}"
        );
        let reqs = w.requests();
        assert!(
            reqs.iter().any(|r| r["path"]
                .as_str()
                .unwrap_or("")
                .ends_with("git-receive-pack")),
            "{ctx}\n{reqs:?}"
        );
        for r in reqs.iter().filter(|r| r["authorization"] != "") {
            let a = r["authorization"].as_str().unwrap();
            let decoded = String::from_utf8(
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &a[6..])
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(decoded, format!("x-access-token:{GIT_SECRET}"), "{r}");
        }
        assert!(
            uses(&fin)
                .iter()
                .any(|u| u.0 == "gitcred" && u.1 == "git.test"),
            "{ctx}"
        );
        std::fs::remove_file(w.dir().join("server.jsonl")).ok();
    }
}

/// npm publish with the token of `~/.npmrc` (a file source): the call's `.npmrc` holds
/// the placeholder (and no other registry's token), the registry gets the real one.
#[test]
fn npm_publish_with_the_npmrc_token() {
    if !have("npm") {
        skip("npm is needed");
        return;
    }
    let Some(w) = World::new() else { return };
    let p = w.port;
    common::npm_project(&w.proj(), "broker-pkg");
    for backend in backends() {
        let line = format!(
            "npm publish --registry https://npm.test:{p}/npm/ 2>&1 | tail -3; echo npm=$?; \
             grep -c npm_Other ~/.npmrc; {}",
            dump(&NPM_SECRET[NPM_SECRET.len() - 12..])
        );
        let (o, fin) = w.run(backend, &["credential=npmreg".to_string()], &line);
        let out = text(&o);
        let ctx = format!("{backend}: {out}\n{fin}");
        assert_no_secret(&out, &ctx);
        assert!(!out.contains("npm_Other"), "{ctx}");
        let reqs = w.requests();
        let put: Vec<&Value> = reqs.iter().filter(|r| r["method"] == "PUT").collect();
        assert_eq!(put.len(), 1, "{ctx}\n{reqs:?}");
        assert_eq!(
            put[0]["authorization"],
            format!("Bearer {NPM_SECRET}"),
            "{ctx}"
        );
        assert!(
            put[0]["path"].as_str().unwrap().contains("broker-pkg"),
            "{ctx}"
        );
        assert!(
            uses(&fin).iter().any(|u| u.0 == "npmreg" && u.2 == "PUT"),
            "{ctx}"
        );
        std::fs::remove_file(w.dir().join("server.jsonl")).ok();
    }
}

/// gh api against a GitHub Enterprise host (`GH_HOST`) with `GH_ENTERPRISE_TOKEN` a
/// placeholder: the API gets `token SECRET`, gh prints the user.
#[test]
fn gh_api_against_an_enterprise_host() {
    if !have("gh") {
        skip("gh is needed (apt-get install gh)");
        return;
    }
    let Some(w) = World::new() else { return };
    let p = w.port;
    for backend in backends() {
        let line = format!(
            "GH_HOST=ghe.test:{p} GH_CONFIG_DIR=/tmp/gh gh api user --jq .login; {}",
            dump(&GH_SECRET[GH_SECRET.len() - 12..])
        );
        let (o, fin) = w.run(backend, &["credential=ghe".to_string()], &line);
        let out = text(&o);
        let ctx = format!("{backend}: {out}\n{fin}");
        assert!(out.contains("broker-tester"), "{ctx}");
        assert_no_secret(&out, &ctx);
        let reqs = w.requests();
        assert!(
            reqs.iter().any(|r| r["path"] == "/api/v3/user"
                && r["authorization"] == format!("token {GH_SECRET}")),
            "{ctx}\n{reqs:?}"
        );
        std::fs::remove_file(w.dir().join("server.jsonl")).ok();
    }
}

/// A credential whose secret cannot be had (its variable unset): the call does not start,
/// its setup error names the credential and the source, and the call log has its record.
#[test]
fn a_credential_without_its_secret_fails_the_start_clearly() {
    let Some(w) = World::new() else { return };
    for backend in backends() {
        let (o, fin) = w.run(backend, &["credential=missing".to_string()], "echo ran");
        let out = text(&o);
        assert!(
            !out.contains("\nran\n") && !out.starts_with("ran"),
            "{backend}: {out}"
        );
        let all = format!("{out}\n{fin}");
        assert!(all.contains("credential missing"), "{backend}: {all}");
        assert!(all.contains("EFR_TEST_NO_SUCH_TOKEN"), "{backend}: {all}");
    }
    let o = command(w.dir())
        .env("XDG_STATE_HOME", w.state())
        .args(["log", "--json", "-n", "0"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stdout);
    assert!(log.contains("credential missing"), "{log}");
}

/// The broker's CA in the call's trust with the grant only: with it, the system bundle
/// inside is the host's plus the CA (the host's `$XDG_STATE_HOME/efr-sandbox/ca.pem`), the CA
/// alone at `/dev/efr/ca.pem`, the variables name them, and curl trusts the proxy's leaf
/// with no option; without it, the bundle is the host's and no variable is set.
#[test]
fn the_ca_is_in_the_calls_trust_with_the_grant_only() {
    let Some(w) = World::new() else { return };
    let sys = "/etc/ssl/certs/ca-certificates.crt";
    let host_certs = std::fs::read_to_string(sys)
        .unwrap_or_default()
        .matches("BEGIN CERTIFICATE")
        .count();
    let line = format!(
        "echo ssl=${{SSL_CERT_FILE:-none}} node=${{NODE_EXTRA_CA_CERTS:-none}} git=${{GIT_SSL_CAINFO:-none}}; \
         echo certs=$(grep -c 'BEGIN CERTIFICATE' {sys}); \
         cat /dev/efr/ca.pem 2>/dev/null | sha256sum | sed 's/ .*//;s/^/ca=/'; \
         curl -sS -o /dev/null -w 'curl=%{{http_code}}\\n' https://api.test:{}/echo/trust",
        w.port
    );
    for backend in backends() {
        let (o, _) = w.run(backend, &[], &line);
        let out = text(&o);
        assert!(
            out.contains("ssl=none node=none git=none"),
            "{backend}: {out}"
        );
        assert!(
            out.contains(&format!("certs={host_certs}\n")),
            "{backend}: {out}"
        );
        let (o, fin) = w.run(backend, &["credential=forge".to_string()], &line);
        let out = text(&o);
        let ctx = format!("{backend}: {out}\n{fin}");
        assert!(
            out.contains(
                "ssl=/dev/efr/ca-bundle.pem node=/dev/efr/ca.pem git=/dev/efr/ca-bundle.pem"
            ),
            "{ctx}"
        );
        assert!(
            out.contains(&format!("certs={}\n", host_certs + 1)),
            "{ctx}"
        );
        let ca = std::fs::read(w.state().join("efr-sandbox/ca.pem")).unwrap();
        let sum = Command::new("sha256sum")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(&ca)?;
                c.wait_with_output()
            })
            .unwrap();
        let sum = String::from_utf8_lossy(&sum.stdout);
        let sum = sum.split_whitespace().next().unwrap();
        assert!(out.contains(&format!("ca={sum}")), "{ctx}");
        assert!(out.contains("curl=200"), "{ctx}");
    }
}

/// A `tcp` grant's relay in a call holding a credential: what the call sends through it is
/// scanned; bytes without a placeholder reach the host's port, a placeholder ends the relay
/// before it gets there, with a `credential` exit record naming the address.
#[test]
fn a_placeholder_through_a_tcp_relay_is_refused() {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let Some(w) = World::new() else { return };
    for backend in backends() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got: Arc<Mutex<Vec<u8>>> = Arc::default();
        let g = got.clone();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                let mut c = c;
                let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
                let mut b = Vec::new();
                let _ = c.read_to_end(&mut b);
                g.lock().unwrap().extend_from_slice(&b);
            }
        });
        // One connection with clean bytes, one with the placeholder after clean bytes.
        let line = format!(
            "python3 -c 'import os, socket, time\n\
             s = socket.create_connection((\"127.0.0.1\", {port})); s.sendall(b\"clean-bytes\\n\"); s.close()\n\
             s = socket.create_connection((\"127.0.0.1\", {port}))\n\
             s.sendall(b\"before \"); time.sleep(0.3)\n\
             try:\n  s.sendall(b\"token=\" + os.environ[\"FORGE_TOKEN\"].encode() + b\"\\n\"); time.sleep(0.5); s.sendall(b\"after\\n\")\n\
             except OSError as e:\n  print(\"send failed\", e)\n\
             s.close()'"
        );
        let grants = vec![
            "credential=forge".to_string(),
            format!("host=127.0.0.1:{port}:tcp"),
        ];
        let (o, fin) = w.run(backend, &grants, &line);
        let out = text(&o);
        let ctx = format!("{backend}: {out}\n{fin}");
        // The host's port: the clean bytes and what came before the placeholder, never it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&got.lock().unwrap()).contains("before")
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        let seen = String::from_utf8_lossy(&got.lock().unwrap()).into_owned();
        assert!(
            seen.contains("clean-bytes"),
            "{ctx}\nthe port got: {seen:?}"
        );
        assert!(seen.contains("before"), "{ctx}\nthe port got: {seen:?}");
        assert!(!seen.contains("token="), "{ctx}\nthe port got: {seen:?}");
        assert!(!seen.contains("after"), "{ctx}\nthe port got: {seen:?}");
        let exits = fin["exits"].as_array().cloned().unwrap_or_default();
        let cred: Vec<&Value> = exits.iter().filter(|e| e["kind"] == "credential").collect();
        assert_eq!(cred.len(), 1, "{ctx}");
        assert_eq!(cred[0]["facts"]["host"], "127.0.0.1", "{ctx}");
        assert_eq!(cred[0]["facts"]["credential"], "forge", "{ctx}");
        assert!(!fin.to_string().contains(FORGE_SECRET), "{ctx}");
    }
}
