//! A test registry on loopback: a tiny HTTP/1.1 server over a directory (GET and HEAD of
//! files, 404 otherwise, one thread a connection), and the files of a cargo sparse
//! registry and an npm registry for one small package each, built here with the real tools
//! (`cargo package`, `npm pack`). Contained calls reach it as `registry.test:PORT` through
//! their proxy (the config's `[network.resolve]` maps the name to 127.0.0.1, a
//! `host=registry.test:PORT:http` grant opens it).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::Digest;

/// The registry's host name inside a call.
pub const HOST: &str = "registry.test";

/// A running server; stopped on drop.
pub struct Server {
    pub port: u16,
    pub root: PathBuf,
    stop: Arc<AtomicBool>,
    /// The paths asked for, in order.
    pub log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl Server {
    /// Serves `root` on a free port of 127.0.0.1.
    pub fn start(root: &Path) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (r, s, lg) = (root.to_path_buf(), stop.clone(), log.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(c) = c else { continue };
                let (r, lg) = (r.clone(), lg.clone());
                std::thread::spawn(move || serve(c, &r, &lg));
            }
        });
        Server {
            port,
            root: root.to_path_buf(),
            stop,
            log,
        }
    }

    /// `http://registry.test:PORT`.
    pub fn url(&self) -> String {
        format!("http://{HOST}:{}", self.port)
    }

    /// The `--grant` that opens it.
    pub fn grant(&self) -> String {
        format!("host={HOST}:{}:http", self.port)
    }

    /// The config that names it (`[network] resolve`).
    pub fn config() -> String {
        format!("[network]\nresolve = {{ \"{HOST}\" = \"127.0.0.1\" }}\n")
    }

    pub fn asked(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

fn serve(c: std::net::TcpStream, root: &Path, log: &std::sync::Mutex<Vec<String>>) {
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut w = c;
    loop {
        let mut first = String::new();
        if r.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        let mut close = false;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h.to_ascii_lowercase().starts_with("connection: close") {
                close = true;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
        }
        let mut parts = first.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
        // A proxy may send the absolute form.
        let path = match target.find("://") {
            Some(i) => {
                let rest = &target[i + 3..];
                rest.find('/').map(|j| &rest[j..]).unwrap_or("/")
            }
            None => target,
        };
        let path = path.split('?').next().unwrap_or("/").to_string();
        log.lock().unwrap().push(path.clone());
        let rel = path
            .trim_start_matches('/')
            .replace("%2f", "/")
            .replace("%2F", "/");
        let file = root.join(&rel);
        let body = if rel.split('/').any(|c| c == "..") {
            None
        } else if file.is_dir() {
            std::fs::read(file.join("index.json"))
                .or_else(|_| std::fs::read(file.join("index.html")))
                .ok()
        } else {
            std::fs::read(&file).ok()
        };
        let ok = match body {
            Some(b) => {
                let ct = if rel.ends_with(".tgz")
                    || rel.ends_with(".crate")
                    || rel.ends_with(".whl")
                    || rel.ends_with("download")
                {
                    "application/octet-stream"
                } else if rel.starts_with("simple/") {
                    "text/html"
                } else {
                    "application/json"
                };
                // pip keeps in its HTTP cache only what the index says it may keep.
                let cache = if rel.starts_with("simple/") || rel.ends_with(".whl") {
                    "Cache-Control: max-age=86400\r\n"
                } else {
                    ""
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\n{cache}Content-Length: {}\r\n\r\n",
                    b.len()
                );
                w.write_all(head.as_bytes()).is_ok()
                    && (method == "HEAD" || w.write_all(&b).is_ok())
            }
            None => w
                .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                .is_ok(),
        };
        if !ok || close {
            return;
        }
    }
}

pub fn sha256_hex(b: &[u8]) -> String {
    sha2::Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

pub fn base64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A cargo: its program, the arguments it needs first, the variables it needs.
pub type Cargo = (String, Vec<String>, Vec<(String, String)>);

/// A cargo that speaks sparse registries: `(program, extra args, extra env)`. The
/// toolchain's own cargo when `rustc` is a rustup proxy whose toolchain the user can run
/// (rustup itself reads the home, which the tests move), else the system's; a cargo before
/// 1.68 gets `-Z sparse-registry` (RUSTC_BOOTSTRAP=1).
pub fn cargo() -> Option<Cargo> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let cargo = format!("{sysroot}/bin/cargo");
    let rustc = format!("{sysroot}/bin/rustc");
    let v = Command::new(&cargo).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&v.stdout).to_string();
    let minor: u32 = v
        .split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()?;
    let mut env = vec![("RUSTC".to_string(), rustc)];
    let mut args = Vec::new();
    if minor < 68 {
        env.push(("RUSTC_BOOTSTRAP".into(), "1".into()));
        args.push("-Zsparse-registry".into());
    }
    Some((cargo, args, env))
}

/// Puts the crate `efrhello 0.1.0` into a sparse registry at `root` (served at `url`):
/// `config.json`, the index file, the `.crate` (from `cargo package`).
pub fn cargo_registry(root: &Path, url: &str, work: &Path) {
    let (cargo, _, env) = cargo().expect("cargo");
    let src = work.join("efrhello");
    std::fs::create_dir_all(src.join("src")).unwrap();
    std::fs::write(
        src.join("Cargo.toml"),
        "[package]\nname = \"efrhello\"\nversion = \"0.1.0\"\nedition = \"2018\"\n\
         license = \"MIT\"\ndescription = \"test\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        src.join("src/lib.rs"),
        "pub fn hello() -> &'static str { \"hello from the registry\" }\n",
    )
    .unwrap();
    let o = Command::new(&cargo)
        .args(["package", "--no-verify", "--allow-dirty", "--offline"])
        .envs(env)
        .env("CARGO_HOME", work.join("cargo-home"))
        .env("CARGO_TARGET_DIR", src.join("target"))
        .current_dir(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "cargo package: {o:?}");
    let krate = std::fs::read(src.join("target/package/efrhello-0.1.0.crate")).unwrap();
    std::fs::create_dir_all(root.join("ef/rh")).unwrap();
    std::fs::write(
        root.join("config.json"),
        format!("{{\"dl\": \"{url}/dl/{{crate}}/{{version}}/download\"}}"),
    )
    .unwrap();
    std::fs::write(
        root.join("ef/rh/efrhello"),
        format!(
            "{{\"name\":\"efrhello\",\"vers\":\"0.1.0\",\"deps\":[],\"cksum\":\"{}\",\
             \"features\":{{}},\"yanked\":false}}\n",
            sha256_hex(&krate)
        ),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("dl/efrhello/0.1.0")).unwrap();
    std::fs::write(root.join("dl/efrhello/0.1.0/download"), krate).unwrap();
}

/// A project that depends on `efrhello` of the registry `test`, at `dir`.
pub fn cargo_project(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2018\"\n\n\
         [dependencies]\nefrhello = { version = \"0.1\", registry = \"test\" }\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() { println!(\"{}\", efrhello::hello()); }\n",
    )
    .unwrap();
}

/// Puts the npm package `efrhello 1.0.0` into a static npm registry at `root` (served at
/// `url`): the packument `efrhello/index.json` and the tarball (from `npm pack`).
pub fn npm_registry(root: &Path, url: &str, work: &Path) {
    let src = work.join("npm-efrhello");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("package.json"),
        "{\"name\":\"efrhello\",\"version\":\"1.0.0\",\"main\":\"index.js\",\"license\":\"MIT\"}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("index.js"),
        "module.exports = () => 'hello from the npm registry';\n",
    )
    .unwrap();
    let o = Command::new("npm")
        .args(["pack", "--silent"])
        .env("HOME", work)
        .env("npm_config_cache", work.join("npm-cache"))
        .current_dir(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "npm pack: {o:?}");
    let tgz = std::fs::read(src.join("efrhello-1.0.0.tgz")).unwrap();
    let integrity = format!("sha512-{}", base64(&sha2::Sha512::digest(&tgz)));
    std::fs::create_dir_all(root.join("efrhello/-")).unwrap();
    std::fs::write(root.join("efrhello/-/efrhello-1.0.0.tgz"), &tgz).unwrap();
    std::fs::write(
        root.join("efrhello/index.json"),
        format!(
            "{{\"name\":\"efrhello\",\"dist-tags\":{{\"latest\":\"1.0.0\"}},\"versions\":{{\"1.0.0\":\
             {{\"name\":\"efrhello\",\"version\":\"1.0.0\",\"main\":\"index.js\",\"dist\":\
             {{\"tarball\":\"{url}/efrhello/-/efrhello-1.0.0.tgz\",\"integrity\":\"{integrity}\"}}}}}}}}"
        ),
    )
    .unwrap();
}

/// Puts the wheel `efrhello 0.1.0` (pure Python, made here with python3's zipfile) and a
/// PEP 503 simple index page for it into `root` (`simple/efrhello/`, `files/`).
pub fn pip_registry(root: &Path, python: &str) {
    let files = root.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let whl = files.join("efrhello-0.1.0-py3-none-any.whl");
    let script = r#"
import sys, zipfile, hashlib, base64
out = sys.argv[1]
members = {
    "efrhello/__init__.py": "def hello():\n    return 'hello from the pip index'\n",
    "efrhello-0.1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: efrhello\nVersion: 0.1.0\n",
    "efrhello-0.1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: efr-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(out, "w") as z:
    for name, text in members.items():
        data = text.encode()
        z.writestr(name, data)
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={h},{len(data)}")
    record.append("efrhello-0.1.0.dist-info/RECORD,,")
    z.writestr("efrhello-0.1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    let o = Command::new(python)
        .args(["-c", script])
        .arg(&whl)
        .output()
        .unwrap();
    assert!(o.status.success(), "making the wheel: {o:?}");
    let sum = sha256_hex(&std::fs::read(&whl).unwrap());
    let page = root.join("simple/efrhello");
    std::fs::create_dir_all(&page).unwrap();
    std::fs::write(
        page.join("index.html"),
        format!(
            "<!DOCTYPE html><html><body>\n<a href=\"/files/efrhello-0.1.0-py3-none-any.whl#sha256={sum}\">efrhello-0.1.0-py3-none-any.whl</a>\n</body></html>\n"
        ),
    )
    .unwrap();
}
