//! Helpers of the service's tests: a real `efr-sandbox serve` in a temp dir, and a blocking
//! client that speaks the frame protocol.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use efr_sandbox_wire::frame::{self, MAX_FRAME};
use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_efr-sandbox");

/// A running service; killed on drop.
pub struct Server {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub home: PathBuf,
    stderr: Arc<Mutex<String>>,
}

/// A temp dir with `home/` and `config/` made, for a service or a CLI run.
pub fn temp_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("home")).unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    dir
}

/// A command of the binary with HOME and XDG_CONFIG_HOME in `dir`; `run` runs its call
/// itself (`EFR_SANDBOX_NO_SERVICE`: no service is started or used; the tests of the
/// hand-over to the service, `cli_handoff.rs`, remove it).
pub fn command(dir: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env("HOME", dir.join("home"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("EFR_SANDBOX_SOCKET")
        .env("EFR_SANDBOX_NO_SERVICE", "1")
        .stdin(Stdio::null());
    c
}

impl Server {
    /// Starts `serve --socket <tmp>/run/sandbox.sock --test-methods` plus `extra`.
    pub fn start(extra: &[&str]) -> Server {
        let dir = temp_env();
        Self::start_in(dir, extra)
    }

    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Server {
        let socket = dir.path().join("run").join("sandbox.sock");
        let mut cmd = command(dir.path());
        cmd.arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--test-methods")
            .args(extra);
        Self::spawn(cmd, dir, socket)
    }

    /// Starts the command and waits until it listens.
    pub fn spawn(mut cmd: Command, dir: tempfile::TempDir, socket: PathBuf) -> Server {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let home = dir.path().join("home");
        let mut server = Server {
            child,
            dir,
            socket,
            home,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !server.stderr().contains("listening on") {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("the service exited with {status}: {}", server.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "the service did not start: {}",
                server.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the service's stderr holds `what`.
    pub fn wait_log(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.stderr().contains(what) {
            assert!(
                Instant::now() < deadline,
                "no {what:?} in the log: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.socket)
    }

    /// Sends `sig` to the service and waits for its end.
    pub fn signal_and_wait(&mut self, sig: nix::sys::signal::Signal) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, sig).unwrap();
        self.child.wait().unwrap()
    }

    /// The service's dir, kept for a next service (this one gets an empty one to drop).
    pub fn take_dir(&mut self) -> tempfile::TempDir {
        std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap())
    }

    /// A client that has done its hello.
    pub fn client(&self) -> Client {
        let mut c = self.connect();
        let r = c.call(0, "hello", json!({"protocol": 1, "client": "test"}));
        assert!(r.get("end").is_some(), "hello failed: {r}");
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking client.
pub struct Client {
    pub stream: UnixStream,
}

impl Client {
    pub fn connect(socket: &Path) -> Client {
        let stream = UnixStream::connect(socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client { stream }
    }

    pub fn send(&mut self, v: &Value) {
        self.stream.write_all(&frame::encode(v).unwrap()).unwrap();
    }

    /// Sends a frame whose body is these bytes.
    pub fn send_body(&mut self, body: &[u8]) {
        let mut b = (body.len() as u32).to_be_bytes().to_vec();
        b.extend_from_slice(body);
        self.stream.write_all(&b).unwrap();
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next frame; panics at the end of the stream.
    pub fn recv(&mut self) -> Value {
        match self.try_recv() {
            Some(v) => v,
            None => panic!("the service closed the connection"),
        }
    }

    /// The next frame, or None at a clean end of the stream.
    pub fn try_recv(&mut self) -> Option<Value> {
        frame::read_frame(&mut self.stream)
            .unwrap()
            .map(Value::Object)
    }

    pub fn request(&mut self, id: u64, method: &str, params: Value) {
        self.send(&json!({"id": id, "method": method, "params": params}));
    }

    /// Sends a request and reads the next frame.
    pub fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.request(id, method, params);
        let r = self.recv();
        assert_eq!(r["id"], json!(id), "answer to another request: {r}");
        r
    }

    /// True when the service ends the connection without sending anything more.
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }
}

/// The error code of an error frame.
pub fn code(v: &Value) -> &str {
    v["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error frame: {v}"))
}

pub fn message(v: &Value) -> &str {
    v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error frame: {v}"))
}

/// The frame limit, for the tests of the codec over the socket.
pub const LIMIT: usize = MAX_FRAME;

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The items of request `id`, then its last frame (an `end` or an `error`).
#[allow(dead_code)]
pub fn collect(c: &mut Client, id: u64) -> (Vec<Value>, Value) {
    let mut items = Vec::new();
    loop {
        let f = c.recv();
        assert_eq!(f["id"], serde_json::json!(id), "{f}");
        if let Some(i) = f.get("item") {
            items.push(i.clone());
        } else {
            return (items, f);
        }
    }
}

/// The backends a test runs on: native, and bwrap where it is installed (required under
/// `EFR_SANDBOX_MUST_WORK`).
pub fn backends() -> Vec<&'static str> {
    let mut v = vec!["native"];
    if Path::new(efr_launcher::backend::bwrap::BWRAP).exists() {
        v.push("bwrap");
    } else {
        assert!(
            std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
            "EFR_SANDBOX_MUST_WORK is set and bwrap is missing"
        );
    }
    v
}

/// Whether `tool` is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Says why a test cannot run and returns true, or fails it under `EFR_SANDBOX_MUST_WORK`.
pub fn skip(why: &str) -> bool {
    if std::env::var_os("EFR_SANDBOX_MUST_WORK").is_some() {
        panic!("EFR_SANDBOX_MUST_WORK is set and this cannot run: {why}");
    }
    eprintln!("SKIP: {why}");
    true
}

/// A child process killed and reaped on drop (a test's server).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A self-signed certificate for `host` (one day): `dir/key.pem` and `dir/cert.pem`.
pub fn self_signed(dir: &Path, host: &str) {
    let ok = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", &format!("/CN={host}")])
        .args(["-addext", &format!("subjectAltName=DNS:{host}")])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "openssl made no certificate for {host}");
}

/// The host grants `efr-sandbox classify` proposes for `line` in project `proj` (the
/// `launch` of its result), as `--grant` values (`host=NAME[:PORT][:http]`).
pub fn proposed(dir: &Path, proj: &Path, line: &str) -> Vec<String> {
    let o = command(dir)
        .current_dir(proj)
        .args(["classify", "--json", "--project"])
        .arg(proj)
        .args(["--", line])
        .output()
        .unwrap();
    assert!(o.status.success(), "classify: {o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["launch"]["kind"], "contained", "{v}");
    v["launch"]["grants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["kind"] == "host")
        .map(|g| {
            let mut s = format!("host={}", g["host"].as_str().unwrap_or_default());
            if let Some(p) = g["port"].as_u64() {
                s.push_str(&format!(":{p}"));
            }
            if g["plain_http"] == true {
                s.push_str(":http");
            }
            s
        })
        .collect()
}

/// The first file or directory named `name` below `dir` (links not followed).
pub fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if p.is_dir() && !p.is_symlink() {
            if let Some(f) = find(&p, name) {
                return Some(f);
            }
        }
    }
    None
}

/// An npm project at `dir` named `name` (a `package.json` with no dependencies).
pub fn npm_project(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("package.json"),
        format!("{{\"name\":\"{name}\",\"version\":\"1.0.0\"}}\n"),
    )
    .unwrap();
}

/// The system python3 that has pip, the one contained calls find on a Debian machine.
pub const PIP_PYTHON: &str = "/usr/bin/python3";

/// Whether [`PIP_PYTHON`] has pip (`apt-get install python3-pip`).
pub fn have_pip() -> bool {
    Command::new(PIP_PYTHON)
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `c` with `input` on its stdin, stdout and stderr captured. A program that ends
/// without reading its whole input (a hook refusing an unknown agent) is no failure here.
pub fn output_with_stdin(c: &mut Command, input: &[u8]) -> std::process::Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    match child.stdin.take().unwrap().write_all(input) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.unwrap(),
    }
    child.wait_with_output().unwrap()
}
