//! The grants the escape and must-work suites do not cover: `device`, `socket`, `bus`,
//! `desktop`, `open_network` — each refused without the grant and working with it, on both
//! backends — and the setup failures of bad grant paths.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Fixture, backends, python, run_plan, skip};
use efr_launcher::api::BackendChoice;
use efr_sandbox_wire::{Bus, Desktop, Grant};

/// The tests of this file run one at a time: each plants host sockets, which every other
/// launch lists (to hide them) and may find gone by the time it mounts.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A python line that connects to a Unix socket path and prints `connected` or the error.
fn connect_unix(path: &str) -> String {
    format!(
        "{} -c 'import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect(sys.argv[1]); print(\"connected\", s.recv(16).decode())\nexcept Exception as e: print(\"refused\", e)' {path}",
        python()
    )
}

/// Accepts connections on `l` and greets each with `hi`, in a thread.
fn greet(l: UnixListener) {
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let _ = c.write_all(b"hi");
        }
    });
}

#[test]
fn device_grant_binds_one_node() {
    let _serial = serial();
    let Some(dev) = ["/dev/net/tun", "/dev/fuse", "/dev/kvm", "/dev/loop-control"]
        .into_iter()
        .find(|d| Path::new(d).exists())
    else {
        skip("no device to grant here (/dev/net/tun, /dev/fuse, /dev/kvm, /dev/loop-control)");
        return;
    };
    let fx = Fixture::new();
    let line = format!("test -c {dev} && echo present || echo absent");
    for b in backends() {
        let r = run_plan(&fx.plan(&line, b, vec![]), None);
        assert_eq!(r.stdout.trim(), "absent", "{b:?} {r:?}");
        let g = vec![Grant::Device { path: dev.into() }];
        let r = run_plan(&fx.plan(&line, b, g.clone()), None);
        assert_eq!(r.stdout.trim(), "present", "{b:?} {r:?}");
        // Openable when the host lets this user open it (root here; 0600 root nodes are
        // not the unprivileged user's either way).
        let host_ok = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dev)
            .is_ok();
        if host_ok {
            let open = format!(
                "{} -c 'import os; os.close(os.open(\"{dev}\", os.O_RDWR)); print(\"opened\")'",
                python()
            );
            let r = run_plan(&fx.plan(&open, b, g), None);
            assert_eq!(r.stdout.trim(), "opened", "{b:?} {r:?}");
        }
    }
}

#[test]
fn socket_grant_reaches_one_host_socket() {
    let _serial = serial();
    let fx = Fixture::new();
    let dir = format!("{}/.local/share/app", fx.home);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = format!("{dir}/app.sock");
    greet(UnixListener::bind(&sock).unwrap());
    let line = connect_unix(&sock);
    for b in backends() {
        let r = run_plan(&fx.plan(&line, b, vec![]), None);
        assert!(r.stdout.starts_with("refused"), "{b:?} {r:?}");
        let g = vec![Grant::Socket { path: sock.clone() }];
        let r = run_plan(&fx.plan(&line, b, g), None);
        assert_eq!(r.stdout.trim(), "connected hi", "{b:?} {r:?}");
    }
}

/// A private session bus; killed on drop.
struct DBus {
    child: Child,
    address: String,
}

impl Drop for DBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dbus(dir: &str) -> Option<DBus> {
    if !Path::new("/usr/bin/dbus-daemon").exists() || !Path::new("/usr/bin/dbus-send").exists() {
        return None;
    }
    let path = format!("{dir}/bus");
    let address = format!("unix:path={path}");
    let mut child = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--nopidfile", "--print-address"])
        .arg(format!("--address={address}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // The address line means it listens.
    let mut out = child.stdout.take()?;
    let mut b = [0u8; 1];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !Path::new(&path).exists() || out.read(&mut b).ok()? == 0 {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(DBus { child, address })
}

#[test]
fn bus_grant_gives_the_real_session_bus() {
    let _serial = serial();
    let fx = Fixture::new();
    let run = format!("{}/run", fx.dir.path().display());
    std::fs::create_dir_all(&run).unwrap();
    let Some(bus) = dbus(&run) else {
        skip("dbus-daemon or dbus-send is not installed");
        return;
    };
    let line = "dbus-send --session --print-reply --dest=org.freedesktop.DBus / \
                org.freedesktop.DBus.ListNames >/dev/null 2>&1 && echo bus-ok || echo bus-refused";
    for b in backends() {
        let plan = |grants: Vec<Grant>| {
            let mut r = fx.request(line, b);
            r.grants = grants;
            if let Some(env) = r.env.as_mut() {
                env.push(common::var("DBUS_SESSION_BUS_ADDRESS", bus.address.clone()));
                env.push(common::var("XDG_RUNTIME_DIR", run.clone()));
            }
            r
        };
        let r = run_plan(&plan(vec![]), None);
        assert_eq!(r.stdout.trim(), "bus-refused", "{b:?} {r:?}");
        let r = run_plan(&plan(vec![Grant::Bus { bus: Bus::Session }]), None);
        assert_eq!(r.stdout.trim(), "bus-ok", "{b:?} {r:?}");
    }
}

#[test]
fn desktop_grant_binds_the_wayland_socket_and_keeps_its_variable() {
    let _serial = serial();
    let fx = Fixture::new();
    let run = format!("{}/run", fx.dir.path().display());
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let sock = format!("{run}/wayland-test");
    greet(UnixListener::bind(&sock).unwrap());
    let line = format!(
        "echo \"display=${{WAYLAND_DISPLAY:-unset}}\"; {}",
        connect_unix("$XDG_RUNTIME_DIR/wayland-test")
    );
    for b in backends() {
        let plan = |grants: Vec<Grant>| {
            let mut r = fx.request(&line, b);
            r.grants = grants;
            if let Some(env) = r.env.as_mut() {
                env.push(common::var("WAYLAND_DISPLAY", "wayland-test"));
                env.push(common::var("XDG_RUNTIME_DIR", run.clone()));
            }
            r
        };
        let r = run_plan(&plan(vec![]), None);
        assert!(
            r.stdout.starts_with("display=unset\nrefused"),
            "{b:?} {r:?}"
        );
        let g = vec![Grant::Desktop {
            desktop: Desktop::Wayland,
        }];
        let r = run_plan(&plan(g), None);
        assert_eq!(
            r.stdout.trim(),
            "display=wayland-test\nconnected hi",
            "{b:?} {r:?}"
        );
    }
}

#[test]
fn open_network_reaches_a_host_loopback_listener() {
    let _serial = serial();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let _ = c.write_all(b"hi");
        }
    });
    let fx = Fixture::new();
    let line = format!(
        "{} -c 'import socket\ntry:\n s=socket.create_connection((\"127.0.0.1\", {port}), 3); print(\"connected\", s.recv(16).decode())\nexcept Exception as e: print(\"refused\", e)'",
        python()
    );
    for b in backends() {
        let r = run_plan(&fx.plan(&line, b, vec![]), None);
        assert!(r.stdout.starts_with("refused"), "{b:?} {r:?}");
        let r = run_plan(&fx.plan(&line, b, vec![Grant::NetView]), None);
        assert!(r.stdout.starts_with("refused"), "net_view: {b:?} {r:?}");
        let r = run_plan(&fx.plan(&line, b, vec![Grant::OpenNetwork]), None);
        assert_eq!(r.stdout.trim(), "connected hi", "{b:?} {r:?}");
    }
}

#[test]
fn bad_grant_paths_are_setup_errors() {
    let _serial = serial();
    let fx = Fixture::new();
    for b in [BackendChoice::Native, BackendChoice::Bwrap] {
        if b == BackendChoice::Bwrap && !efr_launcher::backend::bwrap::available() {
            continue;
        }
        for g in [
            Grant::Write {
                path: "/nonexistent-efr/x".into(),
            },
            Grant::Device {
                path: "/dev/nonexistent-efr".into(),
            },
            Grant::Socket {
                path: format!("{}/no.sock", fx.home),
            },
        ] {
            let r = run_plan(&fx.plan("echo ran", b, vec![g.clone()]), None);
            assert!(r.stdout.is_empty(), "{g:?} {r:?}");
            let e = r.outcome.setup_error.unwrap_or_default();
            assert!(e.contains("grant"), "{g:?}: {e}");
            assert_eq!(r.status.code(), Some(125), "{g:?}");
        }
    }
}
