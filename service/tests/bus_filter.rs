//! Contained calls with a `bus_filter` grant, end to end: a private
//! `dbus-daemon` started here (session config, its socket in the test's home, where the
//! call can see the path), a small python3-dbus service owning `org.example.Allowed`,
//! `org.example.Refused` and a stand-in `org.freedesktop.systemd1`, and `efr-sandbox run
//! --grant bus_filter=session` on both backends. Run as root and as the CI user.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{backends, command, have, skip, temp_env};
use serde_json::Value;

const PYTHON: &str = "/usr/bin/python3";

/// `efr-sandbox run` on `backend` in project `p` with the `grant` (a `bus_filter`), the
/// real bus at `real` named by `var` in the service's environment; the caller adds the rest.
fn bus_run(dir: &Path, var: &str, real: &Path, backend: &str, p: &str, grant: &str) -> Command {
    let mut c = command(dir);
    // The filters' sockets go below the temp dir when there is no runtime dir: one of the
    // test's own, so that another user's `efr-sandbox-<uid>` in the shared /tmp does not
    // make the call refuse to start (it would, rightly: not a directory of ours).
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    c.env("TMPDIR", &tmp)
        .env(var, format!("unix:path={}", real.display()))
        .arg("run")
        .args(["--backend", backend, "--project", p, "--cwd", p])
        .args(["--grant", grant]);
    c
}

/// What the tests need, or why they cannot run.
fn missing() -> Option<String> {
    for t in [
        "xdg-dbus-proxy",
        "dbus-daemon",
        "dbus-send",
        "busctl",
        "gdbus",
    ] {
        if !have(t) {
            return Some(format!("{t} is not installed"));
        }
    }
    let dbus = Command::new(PYTHON)
        .args([
            "-c",
            "import dbus, dbus.mainloop.glib; from gi.repository import GLib",
        ])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    (!dbus).then(|| format!("{PYTHON} with python3-dbus and python3-gi is needed"))
}

/// xdg-dbus-proxy's version, `(0, 1, 4)`.
fn proxy_version() -> (u32, u32, u32) {
    let o = Command::new("xdg-dbus-proxy")
        .arg("--version")
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    let v: Vec<u32> = s
        .split_whitespace()
        .last()
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    (v[0], *v.get(1).unwrap_or(&0), *v.get(2).unwrap_or(&0))
}

/// The processes to kill on drop, and the socket's directory (removed after them).
struct Kill(Vec<Child>, #[allow(dead_code)] Option<tempfile::TempDir>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

const SERVICE: &str = r#"
import dbus, dbus.service, dbus.mainloop.glib, os, signal, sys
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
# Names before `--later` are owned at once; those after it on SIGUSR1 (then `taken` is
# written to the path of $TAKEN).
now = sys.argv[1:sys.argv.index('--later')] if '--later' in sys.argv else sys.argv[1:]
later = sys.argv[sys.argv.index('--later') + 1:] if '--later' in sys.argv else []
names = [dbus.service.BusName(n, bus) for n in now]
def take():
    names.extend(dbus.service.BusName(n, bus) for n in later)
    open(os.environ['TAKEN'], 'w').write('taken')
    return False
signal.signal(signal.SIGUSR1, lambda *a: GLib.idle_add(take))
class Shell(dbus.service.Object):
    @dbus.service.method('org.gnome.Shell', in_signature='s', out_signature='bs')
    def Eval(self, code):
        return (True, 'EVAL-RAN-OUTSIDE')
class Notifications(dbus.service.Object):
    @dbus.service.method('org.freedesktop.Notifications', in_signature='susssasa{sv}i', out_signature='u')
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        return 42
    @dbus.service.method('org.freedesktop.Notifications', out_signature='ssss')
    def GetServerInformation(self):
        return ('test', 'efr', '1', '1.2')
Shell(bus, '/org/gnome/Shell')
Notifications(bus, '/org/freedesktop/Notifications')
class Obj(dbus.service.Object):
    @dbus.service.method('org.example.Iface', out_signature='s')
    def Ping(self):
        return 'pong'
    @dbus.service.method('org.example.Iface', in_signature='h', out_signature='s')
    def Read(self, fd):
        import os
        f = os.fdopen(fd.take())
        return f.read().strip()
    @dbus.service.method('org.freedesktop.systemd1.Manager', in_signature='', out_signature='s')
    def StartTransientUnit(self):
        return 'STARTED-OUTSIDE'
Obj(bus, '/org/example/Obj')
Obj(bus, '/org/freedesktop/systemd1')
print('ready', flush=True)
GLib.MainLoop().run()
"#;

/// A private session bus and the service on it; the bus's socket path. The socket is in
/// `/var/tmp`, a place the call sees (read-only): the sandbox itself must keep it out of
/// reach, not the call's private `/tmp`.
fn private_bus(dir: &Path) -> (Kill, PathBuf) {
    let sockdir = tempfile::Builder::new()
        .prefix("real-bus")
        .tempdir_in("/var/tmp")
        .unwrap();
    let sock = sockdir.path().join("bus");
    let conf = dir.join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" \
             \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
             <busconfig><type>session</type><listen>unix:path={}</listen>\
             <auth>EXTERNAL</auth><policy context=\"default\">\
             <allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/>\
             <allow own=\"*\"/></policy></busconfig>\n",
            sock.display()
        ),
    )
    .unwrap();
    let mut daemon = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--print-address=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(daemon.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("unix:"), "dbus-daemon said {line:?}");
    let mut kill = Kill(vec![daemon], Some(sockdir));
    std::fs::write(dir.join("service.py"), SERVICE).unwrap();
    // The allowed and refused names on one connection, the stand-in systemd1 on another
    // (a connection that owns a never name would take its other names' rules with it).
    for names in [
        &["org.example.Allowed", "org.example.Refused"][..],
        &["org.freedesktop.systemd1"],
    ] {
        kill.0.push(bus_service(dir, &sock, names));
    }
    (kill, sock)
}

/// One connection of the python service on the bus at `sock`, owning `names` (those after
/// a `--later` on SIGUSR1); started and listening.
fn bus_service(dir: &Path, sock: &Path, names: &[&str]) -> Child {
    bus_service_taken(dir, sock, names, &dir.join("taken"))
}

/// [`bus_service`], writing `taken` once it owns its `--later` names.
fn bus_service_taken(dir: &Path, sock: &Path, names: &[&str], taken: &Path) -> Child {
    if !dir.join("service.py").exists() {
        std::fs::write(dir.join("service.py"), SERVICE).unwrap();
    }
    let mut svc = Command::new(PYTHON)
        .arg(dir.join("service.py"))
        .args(names)
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", sock.display()),
        )
        .env("TAKEN", taken)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(svc.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n", "the bus service did not start");
    svc
}

/// A raw client: its whole handshake (NUL, AUTH, BEGIN) and a Hello in one write.
const RAW: &str = r#"
import os, socket, struct
addr = os.environ['DBUS_SESSION_BUS_ADDRESS']
path = addr.split('unix:path=', 1)[1].split(',')[0]
def field(code, sig, s):
    b = s.encode()
    f = struct.pack('<BB', code, 1) + sig.encode() + b'\0'
    f += b'\0' * (-len(f) % 4)
    f += struct.pack('<I', len(b)) + b + b'\0'
    return f
fields = b''
for code, sig, s in [(1, 'o', '/org/freedesktop/DBus'), (2, 's', 'org.freedesktop.DBus'),
                     (3, 's', 'Hello'), (6, 's', 'org.freedesktop.DBus')]:
    fields += b'\0' * (-len(fields) % 8) + field(code, sig, s)
msg = struct.pack('<cBBBII', b'l', 1, 0, 1, 0, 1) + struct.pack('<I', len(fields)) + fields
msg += b'\0' * (-len(msg) % 8)
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(path)
s.sendall(b'\0AUTH EXTERNAL ' + str(os.geteuid()).encode().hex().encode() + b'\r\nBEGIN\r\n' + msg)
got = b''
while b'\r\n' not in got or len(got.split(b'\r\n', 1)[1]) < 16:
    c = s.recv(4096)
    if not c: break
    got += c
rest = got.split(b'\r\n', 1)[1] if b'\r\n' in got else b''
print('raw', got.split(b'\r\n')[0][:2].decode(), 'reply' if rest[:1] == b'l' and rest[1] == 2 else 'none')
"#;

/// A libdbus client that sends an fd (D-Bus fd passing) to the allowed name.
const FD: &str = r#"
import dbus
bus = dbus.SessionBus()
obj = bus.get_object('org.example.Allowed', '/org/example/Obj')
print('read', obj.Read(dbus.types.UnixFd(open('fd.txt')), dbus_interface='org.example.Iface'))
"#;

const REAL: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print('REAL BUS REACHED')
except OSError as e:
    print('real bus unreachable', e.errno)
"#;

fn config(d: &Path, extra: &str) {
    std::fs::create_dir_all(d.join("config/efr")).unwrap();
    std::fs::write(
        d.join("config/efr/config.toml"),
        format!("[bus]\ntalk = [\"org.example.Allowed\", \"org.freedesktop.systemd1\"]\n{extra}"),
    )
    .unwrap();
}

#[test]
fn filtered_calls_reach_allowed_names_only() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_bus, real) = private_bus(&home);
    config(d.path(), "");
    std::fs::write(proj.join("raw.py"), RAW).unwrap();
    std::fs::write(proj.join("real.py"), REAL).unwrap();
    std::fs::write(proj.join("fd.py"), FD).unwrap();
    // `config` says that the systemd1 rule is left out.
    let o = command(d.path()).arg("config").output().unwrap();
    let all = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        all.contains("bus rule talk org.freedesktop.systemd1 is left out of the bus filter"),
        "{all}"
    );
    let send = |dest: &str, path: &str, method: &str| {
        format!("dbus-send --session --print-reply --dest={dest} {path} {method}")
    };
    let line = [
        format!("{} && echo DBUS_SEND_OK", send("org.example.Allowed", "/org/example/Obj", "org.example.Iface.Ping")),
        "busctl --user call org.example.Allowed /org/example/Obj org.example.Iface Ping && echo BUSCTL_OK".into(),
        format!("echo 'through the fd' > fd.txt; {PYTHON} fd.py"),
        format!("{} || echo REFUSED_1", send("org.example.Refused", "/org/example/Obj", "org.example.Iface.Ping")),
        format!("{} || echo REFUSED_2", send("org.example.Refused", "/org/example/Obj", "org.example.Iface.Ping")),
        format!("{} || echo SYSTEMD_REFUSED", send("org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager.StartTransientUnit")),
        format!("{} array:string: uint32:0 || echo MONITOR_REFUSED", send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Monitoring.BecomeMonitor")),
        format!("{} \"string:eavesdrop=true,type='method_call'\" || echo EAVESDROP_REFUSED", send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.AddMatch")),
        format!("{PYTHON} raw.py"),
        format!("{PYTHON} real.py {}", real.display()),
        "echo \"addr=$DBUS_SESSION_BUS_ADDRESS\"".into(),
        "true".into(),
    ]
    .join("; ");
    for backend in backends() {
        let summary = d.path().join(format!("summary-{backend}.json"));
        let json = d.path().join(format!("finish-{backend}.json"));
        let p = proj.to_str().unwrap();
        let o = bus_run(
            d.path(),
            "DBUS_SESSION_BUS_ADDRESS",
            &real,
            backend,
            p,
            "bus_filter=session",
        )
        .arg("--summary")
        .arg(&summary)
        .arg(format!("--json={}", json.display()))
        .args(["--", &line])
        .output()
        .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        let ctx = format!("{backend}:\n{out}\n{err}");
        assert_eq!(o.status.code(), Some(0), "{ctx}");
        // A client that sends its whole handshake at once (sd-bus: busctl; zbus; the raw
        // one here): served by every version (before xdg-dbus-proxy 0.1.6 through the
        // service's auth relay; the version is in the message).
        assert!(
            out.contains("BUSCTL_OK") && out.contains("raw OK reply"),
            "xdg-dbus-proxy {:?}: {ctx}",
            proxy_version()
        );
        assert_eq!(out.matches("pong").count(), 2, "{ctx}");
        // D-Bus fd passing through the filter (and the relay): the service reads the fd
        // the client sends.
        assert!(out.contains("read through the fd"), "{ctx}");
        for want in [
            "DBUS_SEND_OK",
            "REFUSED_1",
            "REFUSED_2",
            "SYSTEMD_REFUSED",
            "MONITOR_REFUSED",
            "EAVESDROP_REFUSED",
        ] {
            assert!(out.contains(want), "no {want} in {ctx}");
        }
        assert!(!out.contains("STARTED-OUTSIDE"), "{ctx}");
        assert!(out.contains("real bus unreachable 13"), "{ctx}");
        assert!(
            err.contains(&format!(
                "connect to the socket {} (refused by the sandbox)",
                real.display()
            )),
            "{ctx}"
        );
        assert!(
            !out.contains(real.to_str().unwrap())
                || !out.contains(&format!("addr=unix:path={}", real.display())),
            "{ctx}"
        );
        let addr = out
            .lines()
            .find_map(|l| l.strip_prefix("addr="))
            .unwrap_or("");
        assert!(
            addr.starts_with("unix:path=") && !addr.contains("real-bus"),
            "{ctx}"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        let refused = v["bus_refused"].as_array().cloned().unwrap_or_default();
        let find = |name: &str, member: &str| {
            refused
                .iter()
                .find(|r| r["name"] == name && r["member"] == member)
                .cloned()
                .unwrap_or_else(|| panic!("no {name} {member} in {v}\n{ctx}"))
        };
        let r = find("org.example.Refused", "org.example.Iface.Ping");
        assert_eq!(r["count"], 2, "{r}");
        assert_eq!(r["bus"], "session", "{r}");
        assert_eq!(r["path"], "/org/example/Obj", "{r}");
        assert!(r.get("count").is_some());
        let r = find(
            "org.freedesktop.systemd1",
            "org.freedesktop.systemd1.Manager.StartTransientUnit",
        );
        assert!(r.get("count").is_none(), "{r}");
        find(
            "org.freedesktop.DBus",
            "org.freedesktop.DBus.Monitoring.BecomeMonitor",
        );
        find("org.freedesktop.DBus", "org.freedesktop.DBus.AddMatch");
        assert!(
            !refused.iter().any(|r| r["name"] == "org.example.Allowed"),
            "{v}"
        );
        // One denial exit per refused destination, printed by `run` and in the finish.
        let fin: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let exits = fin["exits"].as_array().cloned().unwrap_or_default();
        let bus_exits: Vec<&Value> = exits
            .iter()
            .filter(|e| e["kind"] == "bus" && e["source"] == "denial")
            .collect();
        assert_eq!(bus_exits.len(), 3, "{fin}");
        assert!(
            bus_exits
                .iter()
                .any(|e| e["summary"].as_str().unwrap().contains(
                    "org.example.Refused on the session bus (refused by the bus filter, 2 times)"
                )),
            "{fin}"
        );
        assert!(
            err.contains("talk to org.freedesktop.systemd1 on the session bus"),
            "{ctx}"
        );
    }
}

#[test]
fn allow_never_opens_a_never_name_with_a_warning() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_bus, real) = private_bus(&home);
    config(d.path(), "allow_never = [\"org.freedesktop.systemd1\"]\n");
    let o = command(d.path()).arg("config").output().unwrap();
    let all = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(all.contains("through bus.allow_never"), "{all}");
    let p = proj.to_str().unwrap();
    let o = bus_run(d.path(), "DBUS_SESSION_BUS_ADDRESS", &real, "native", p, "bus_filter=session")
        .args(["--", "dbus-send --session --print-reply --dest=org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager.StartTransientUnit"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("STARTED-OUTSIDE"),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_filter_dying_mid_call_cuts_the_bus_with_a_message() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_bus, real) = private_bus(&home);
    config(d.path(), "");
    let ping = "dbus-send --session --print-reply --reply-timeout=5000 --dest=org.example.Allowed /org/example/Obj org.example.Iface.Ping";
    let line = format!(
        "{ping} >/dev/null && echo FIRST_OK; touch started; \
         i=0; while [ ! -e killed ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
         {ping} || echo SECOND_FAILED"
    );
    for backend in backends() {
        let _ = std::fs::remove_file(proj.join("started"));
        let _ = std::fs::remove_file(proj.join("killed"));
        let p = proj.to_str().unwrap();
        let child = bus_run(
            d.path(),
            "DBUS_SESSION_BUS_ADDRESS",
            &real,
            backend,
            p,
            "bus_filter=session",
        )
        .args(["--", &line])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let t0 = Instant::now();
        while !proj.join("started").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the call did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The filter of this call: the xdg-dbus-proxy whose upstream is this test's bus.
        let upstream = format!("unix:path={}", real.display());
        let pid = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                    args.first().is_some_and(|a| a.ends_with(b"xdg-dbus-proxy"))
                        && args.contains(&upstream.as_bytes())
                })
            })
            .expect("the call's xdg-dbus-proxy");
        let st = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::write(proj.join("killed"), "").unwrap();
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        let ctx = format!("{backend}:\n{out}\n{err}");
        assert!(
            out.contains("FIRST_OK") && out.contains("SECOND_FAILED"),
            "{ctx}"
        );
        assert!(
            err.contains("the bus filter of the session bus ended during the call"),
            "{ctx}"
        );
        assert!(t0.elapsed() < Duration::from_secs(20), "{ctx}");
    }
}

/// GLib's client (gdbus) sends its credentials with `SCM_CREDENTIALS`; the write
/// supervisor sends a contained call's `sendmsg` itself, with the init's pid in them
/// (`launcher/src/supervise/net.rs`: the kernel refused the caller's from the init).
#[test]
fn gdbus_reaches_an_allowed_name() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_bus, real) = private_bus(&home);
    config(d.path(), "");
    for backend in backends() {
        let p = proj.to_str().unwrap();
        let o = bus_run(d.path(), "DBUS_SESSION_BUS_ADDRESS", &real, backend, p, "bus_filter=session")
            .args(["--", "gdbus call --session --dest org.example.Allowed --object-path /org/example/Obj --method org.example.Iface.Ping"])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("pong"),
            "{backend}: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// `sandbox.launch` with a `bus_filter` grant: the service's own filter, its refusals in
/// the end's summary and as exit items.
#[test]
fn sandbox_launch_serves_a_bus_filter_grant() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_bus, real) = private_bus(&home);
    config(d.path(), "");
    // The service's socket where a call could see it (not the call's own /tmp): its
    // directory is masked as the control plane, and the filter's socket below it is still
    // the call's.
    let rt = tempfile::Builder::new()
        .prefix("efr-bus-rt-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(
        rt.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let socket = rt.path().join("sandbox.sock");
    let mut cmd = command(d.path());
    std::fs::create_dir_all(d.path().join("tmp")).unwrap();
    cmd.env("TMPDIR", d.path().join("tmp"))
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", real.display()),
        )
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--test-methods");
    let s = common::Server::spawn(cmd, d, socket);
    let ping = |dest: &str| {
        format!(
            "dbus-send --session --print-reply --dest={dest} /org/example/Obj org.example.Iface.Ping"
        )
    };
    for (id, backend) in backends().into_iter().enumerate() {
        let id = id as u64 + 1;
        let mut c = s.client();
        c.request(
            id,
            "sandbox.launch",
            serde_json::json!({
                "line": format!("{}; {} || echo REFUSED", ping("org.example.Allowed"), ping("org.example.Refused")),
                "projects": [proj],
                "backend": backend,
                "grants": [{"kind": "bus_filter", "bus": "session"}],
            }),
        );
        let (items, end) = common::collect(&mut c, id);
        let out: String = items
            .iter()
            .filter(|i| i["kind"] == "output" && i["stream"] == "stdout")
            .map(|i| i["data"].as_str().unwrap_or_default())
            .collect();
        assert!(
            out.contains("pong") && out.contains("REFUSED"),
            "{backend}: {items:?}"
        );
        let summary = &end["end"]["sandbox_summary"];
        assert_eq!(
            summary["bus_refused"][0]["name"], "org.example.Refused",
            "{end}"
        );
        assert_eq!(summary["bus_refused"].as_array().unwrap().len(), 1, "{end}");
        let exit = items
            .iter()
            .find(|i| i["kind"] == "exit" && i["record"]["kind"] == "bus")
            .unwrap_or_else(|| panic!("{backend}: no bus exit in {items:?}"));
        assert_eq!(exit["record"]["source"], "denial");
        assert_eq!(exit["record"]["needs"]["grants"][0]["kind"], "bus");
    }
}

/// `bus_filter=system`: the filter leads to `DBUS_SYSTEM_BUS_ADDRESS` (here the private
/// bus), the call's `DBUS_SYSTEM_BUS_ADDRESS` names the filter, refusals say `system`.
#[test]
fn a_system_bus_filter() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_bus, real) = private_bus(&home);
    config(d.path(), "");
    let ping = |dest: &str| {
        format!(
            "dbus-send --system --print-reply --dest={dest} /org/example/Obj org.example.Iface.Ping"
        )
    };
    let line = format!(
        "{}; {} || echo REFUSED; echo \"addr=$DBUS_SYSTEM_BUS_ADDRESS\"",
        ping("org.example.Allowed"),
        ping("org.example.Refused")
    );
    for backend in backends() {
        let summary = d.path().join(format!("system-{backend}.json"));
        let p = proj.to_str().unwrap();
        let o = bus_run(
            d.path(),
            "DBUS_SYSTEM_BUS_ADDRESS",
            &real,
            backend,
            p,
            "bus_filter=system",
        )
        .arg("--summary")
        .arg(&summary)
        .args(["--", &line])
        .output()
        .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let ctx = format!("{backend}: {out}\n{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.contains("pong") && out.contains("REFUSED"), "{ctx}");
        assert!(
            out.contains("system.sock") && !out.contains("real-bus"),
            "{ctx}"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_eq!(v["bus_refused"][0]["bus"], "system", "{v}");
        assert_eq!(v["bus_refused"][0]["name"], "org.example.Refused", "{v}");
    }
}

/// The unique name of `name`'s owner as a shell line inside the call sets `$U`.
const OWNER_OF_NOTIFICATIONS: &str = "U=$(dbus-send --session --print-reply \
    --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.GetNameOwner \
    string:org.freedesktop.Notifications | sed -n 's/.*string \"\\(.*\\)\"/\\1/p'); echo \"owner=$U\"";

fn eval_through(dest: &str, marker: &str) -> String {
    format!(
        "dbus-send --session --print-reply --dest={dest} /org/gnome/Shell org.gnome.Shell.Eval \
         string:1 || echo {marker}"
    )
}

const NOTIFY: &str = "gdbus call --session --dest org.freedesktop.Notifications \
    --object-path /org/freedesktop/Notifications --method org.freedesktop.Notifications.Notify \
    app 0 '' summary body '[]' '{}' 5000";

/// The desktop's case: one connection (gnome-shell, plasmashell) owns the notification
/// server's name and `org.gnome.Shell`. The default rules (a notification is `Notify` on
/// `/org/freedesktop/Notifications`, not a talk to its owner) send a notification and
/// reach nothing else of that connection, by its unique name or by the never name.
#[test]
fn a_never_names_connection_is_reached_by_none_of_its_names() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (mut bus, real) = private_bus(&home);
    bus.0.push(bus_service(
        &home,
        &real,
        &["org.freedesktop.Notifications", "org.gnome.Shell"],
    ));
    let line = [
        NOTIFY.to_string(),
        OWNER_OF_NOTIFICATIONS.to_string(),
        eval_through("$U", "UNIQUE_REFUSED"),
        eval_through("org.gnome.Shell", "SHELL_REFUSED"),
        "true".into(),
    ]
    .join("; ");
    for backend in backends() {
        let summary = d.path().join(format!("summary-{backend}.json"));
        let json = d.path().join(format!("finish-{backend}.json"));
        let o = bus_run(
            d.path(),
            "DBUS_SESSION_BUS_ADDRESS",
            &real,
            backend,
            proj.to_str().unwrap(),
            "bus_filter=session",
        )
        .arg("--summary")
        .arg(&summary)
        .arg(format!("--json={}", json.display()))
        .args(["--", &line])
        .output()
        .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let ctx = format!("{backend}:\n{out}\n{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.contains("(uint32 42,)"), "the notification: {ctx}");
        assert!(out.contains("owner=:"), "{ctx}");
        assert!(
            out.contains("UNIQUE_REFUSED") && out.contains("SHELL_REFUSED"),
            "{ctx}"
        );
        assert!(!out.contains("EVAL-RAN-OUTSIDE"), "{ctx}");
        let fin: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let unique = fin["exits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| {
                e["kind"] == "bus"
                    && e["summary"].as_str().unwrap_or("").contains(
                        "(the connection of org.freedesktop.Notifications, org.gnome.Shell)",
                    )
            })
            .unwrap_or_else(|| panic!("no record of the unique name: {fin}\n{ctx}"));
        assert_eq!(unique["judgement"]["verdict"], "user_only", "{unique}");
    }
}

/// A `talk` rule (the old default) to a name whose connection also owns a never name is
/// cut before the filter starts: said on stderr, counted in `bus_refused` with why; the
/// method-level rule still sends the notification.
#[test]
fn a_talk_rule_whose_connection_owns_a_never_name_is_cut() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (mut bus, real) = private_bus(&home);
    bus.0.push(bus_service(
        &home,
        &real,
        &["org.freedesktop.Notifications", "org.gnome.Shell"],
    ));
    std::fs::create_dir_all(d.path().join("config/efr")).unwrap();
    std::fs::write(
        d.path().join("config/efr/config.toml"),
        "[bus]\ntalk = [\"org.freedesktop.Notifications\"]\n",
    )
    .unwrap();
    let line = [
        NOTIFY.to_string(),
        OWNER_OF_NOTIFICATIONS.to_string(),
        eval_through("$U", "UNIQUE_REFUSED"),
        "true".into(),
    ]
    .join("; ");
    for backend in backends() {
        let summary = d.path().join(format!("summary-cut-{backend}.json"));
        let o = bus_run(
            d.path(),
            "DBUS_SESSION_BUS_ADDRESS",
            &real,
            backend,
            proj.to_str().unwrap(),
            "bus_filter=session",
        )
        .arg("--summary")
        .arg(&summary)
        .args(["--", &line])
        .output()
        .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        let ctx = format!("{backend}:\n{out}\n{err}");
        assert!(
            out.contains("(uint32 42,)") && out.contains("UNIQUE_REFUSED"),
            "{ctx}"
        );
        assert!(!out.contains("EVAL-RAN-OUTSIDE"), "{ctx}");
        assert!(
            err.contains(
                "bus rule talk org.freedesktop.Notifications was left out of the bus filter"
            ) && err.contains("also owns org.gnome.Shell"),
            "{ctx}"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        let cut = v["bus_refused"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["cut"].is_string())
            .unwrap_or_else(|| panic!("no cut entry: {v}"));
        assert_eq!(cut["name"], "org.freedesktop.Notifications", "{cut}");
        assert!(
            cut["cut"].as_str().unwrap().contains("org.gnome.Shell"),
            "{cut}"
        );
    }
}

/// The moving world: a connection the filter talks to takes a never name during the call.
/// The watch of `NameOwnerChanged` cuts the filter: the never name is reached by no name of
/// that connection, and the call and its summary say so.
#[test]
fn a_rule_is_cut_when_its_connection_takes_a_never_name() {
    if let Some(why) = missing() {
        skip(&why);
        return;
    }
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    let (_bus, real) = private_bus(&home);
    std::fs::create_dir_all(d.path().join("config/efr")).unwrap();
    std::fs::write(
        d.path().join("config/efr/config.toml"),
        "[bus]\ntalk = [\"org.example.Talk\"]\n",
    )
    .unwrap();
    let ping = "dbus-send --session --print-reply --dest=org.example.Talk /org/example/Obj org.example.Iface.Ping";
    let owner = "U=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus.GetNameOwner string:org.example.Talk \
        | sed -n 's/.*string \"\\(.*\\)\"/\\1/p')";
    for backend in backends() {
        let taken = proj.join("taken");
        let _ = std::fs::remove_file(&taken);
        let _ = std::fs::remove_file(proj.join("started"));
        let mut svc = Kill(
            vec![bus_service_taken(
                &home,
                &real,
                &["org.example.Talk", "--later", "org.gnome.Shell"],
                &taken,
            )],
            None,
        );
        let line = format!(
            "{ping} && echo FIRST_PONG; {owner}; touch started; \
             i=0; while [ ! -e taken ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
             sleep 1; {}; {ping} || echo SECOND_PING_FAILED",
            eval_through("$U", "EVAL_REFUSED")
        );
        let summary = d.path().join(format!("summary-moving-{backend}.json"));
        let child = bus_run(
            d.path(),
            "DBUS_SESSION_BUS_ADDRESS",
            &real,
            backend,
            proj.to_str().unwrap(),
            "bus_filter=session",
        )
        .arg("--summary")
        .arg(&summary)
        .args(["--", &line])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let t0 = Instant::now();
        while !proj.join("started").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the call did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = nix::unistd::Pid::from_raw(svc.0[0].id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR1).unwrap();
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        let ctx = format!("{backend}:\n{out}\n{err}");
        assert!(
            taken.exists(),
            "the service did not take the never name: {ctx}"
        );
        assert!(out.contains("FIRST_PONG"), "{ctx}");
        assert!(
            out.contains("EVAL_REFUSED") && out.contains("SECOND_PING_FAILED"),
            "{ctx}"
        );
        assert!(!out.contains("EVAL-RAN-OUTSIDE"), "{ctx}");
        assert!(
            err.contains(
                "the bus filter of the session bus was cut during the call: talk org.example.Talk"
            ),
            "{ctx}"
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert!(
            v["bus_refused"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["cut"].as_str().is_some_and(
                    |c| c.contains("ended during the call") && c.contains("org.gnome.Shell")
                )),
            "{v}"
        );
        for c in &mut svc.0 {
            let _ = c.kill();
        }
    }
}

/// A bus that never answers (a listening socket nobody serves): the filter cannot read who
/// owns the names, and the call does not start, with why, in bounded time.
#[test]
fn a_bus_that_never_answers_is_a_setup_error_not_a_hang() {
    let d = temp_env();
    let proj = d.path().join("home/proj");
    std::fs::create_dir_all(&proj).unwrap();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let sock = dir.path().join("mute-bus");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let t0 = Instant::now();
    let o = bus_run(
        d.path(),
        "DBUS_SESSION_BUS_ADDRESS",
        &sock,
        "native",
        proj.to_str().unwrap(),
        "bus_filter=session",
    )
    .args(["--", "echo RAN"])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("did not list its names within"), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("RAN"));
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
}
