//! Host Unix sockets by mediation: a contained call reaches a path socket only in its own
//! places (project, /tmp, /dev) or where a grant names it, whoever bound it (another
//! network namespace), however it is named (relative, a space, through a link) and when it
//! is re-created during the call; its own sockets, socketpairs with passed fds and
//! credentials, abstract sockets and loopback TCP keep working. Also the calls the supervisor makes on a caller's
//! fds (a dirfd, fchmod) on both backends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use efr_sandbox_tests::common::{self, Fixture};
use efr_sandbox_wire::Grant;

/// A host server on `path` (stream) and `path.dg` (datagram), in a network namespace of
/// its own when `own_netns` (`unshare -rn`: as root and as a user); it answers every
/// connection with HOST-SECRET and logs every datagram to `path.log`.
fn server(path: &str, own_netns: bool) -> Child {
    let code = r#"
import socket, os, sys, select
p = sys.argv[1]
for q in (p, p + ".dg"):
    try: os.unlink(q)
    except FileNotFoundError: pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(p); s.listen(64)
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind(p + ".dg")
os.chmod(p, 0o777); os.chmod(p + ".dg", 0o777)
print("ready", flush=True)
log = open(p + ".log", "ab", buffering=0)
while True:
    r, _, _ = select.select([s, d], [], [])
    for x in r:
        if x is s:
            c, _ = s.accept(); c.sendall(b"HOST-SECRET\n"); c.close(); log.write(b"conn\n")
        else:
            log.write(d.recv(200) + b"\n")
"#;
    let mut cmd = if own_netns {
        let mut c = Command::new("unshare");
        c.args(["-rn", common::python(), "-c", code, path]);
        c
    } else {
        let mut c = Command::new(common::python());
        c.args(["-c", code, path]);
        c
    };
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("server");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "server did not start");
    child
}

const CLIENT: &str = r#"
import socket, sys, os, time
def c(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p); print("REACHED", p, s.recv(100))
    except OSError as e: print("refused", e.errno)
def d(p):
    x = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try: x.sendto(b"LEAK-sendto", p); print("REACHED-dg", p)
    except OSError as e: print("refused-dg", e.errno)
    try: x.sendmsg([b"LEAK-sendmsg"], [], 0, p); print("REACHED-dg2", p)
    except OSError as e: print("refused-dg2", e.errno)
for p in sys.argv[1:]:
    c(p); d(p + ".dg")
    # Through a link in the project, and relative to a cwd next to it.
    if os.path.lexists("lnk"): os.unlink("lnk")
    os.symlink(p, "lnk"); c("lnk")
    os.chdir(os.path.dirname(p)); c(os.path.basename(p)); os.chdir(os.environ["PROJ"])
print("done")
"#;

fn socket_dir(fx: &Fixture) -> String {
    // Outside the project, with a space in its name.
    let d = format!("{}/run dir", fx.home);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn host_sockets_are_refused_whoever_bound_them() {
    for b in common::backends() {
        let fx = Fixture::new();
        let dir = socket_dir(&fx);
        let here = format!("{dir}/a s.sock");
        let other_ns = format!("{dir}/other-ns.sock");
        let mut s1 = server(&here, false);
        let mut s2 = server(&other_ns, true);
        let line = format!(
            "PROJ=$(pwd) python3 -c '{}' \"{here}\" \"{other_ns}\"",
            CLIENT.replace('\'', "'\\''")
        );
        let r = common::run(&fx, &line, b);
        let _ = (s1.kill(), s2.kill(), s1.wait(), s2.wait());
        assert!(r.stdout.contains("done"), "{b:?}: {}", r.all_output());
        assert!(!r.stdout.contains("REACHED"), "{b:?}: {}", r.all_output());
        assert!(
            !r.stdout.contains("HOST-SECRET"),
            "{b:?}: {}",
            r.all_output()
        );
        for p in [&here, &other_ns] {
            let log = std::fs::read_to_string(format!("{p}.log")).unwrap_or_default();
            assert!(log.is_empty(), "{b:?}: {p} got {log:?}");
        }
        for p in [&here, &other_ns] {
            assert!(
                r.outcome.socket_denials.iter().any(|d| d == p),
                "{b:?}: {p} not reported: {:?}",
                r.outcome.socket_denials
            );
        }
    }
}

/// The first line before the supervisor: a host socket that takes connections (a stream
/// listener, a bound datagram socket) is covered in the view by an empty file, with
/// thousands of other sockets on the host (a logged-in desktop's connections, which the
/// launcher no longer reads one by one); a host socket in another network namespace is not
/// listed, and the supervisor alone refuses it (`host_sockets_are_refused_whoever_bound_them`).
#[test]
fn a_host_socket_that_takes_connections_is_covered_in_the_view() {
    // 1,000 connected pairs on the host while the calls run (the open-files limit raised
    // to its hard limit for them: a user's soft limit is often 1,024).
    let mut crowd = Command::new(common::python())
        .args([
            "-c",
            "import resource, socket, sys\n\
             soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n\
             resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n\
             keep = [socket.socketpair() for _ in range(1000)]\n\
             print('ready', flush=True)\nsys.stdin.read()",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the crowd of sockets");
    let mut line = String::new();
    BufReader::new(crowd.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the crowd of sockets did not start");
    for b in common::backends() {
        let fx = Fixture::new();
        let dir = socket_dir(&fx);
        let p = format!("{dir}/listening.sock");
        let mut s = server(&p, false);
        let r = common::run(&fx, &format!("stat -c '%F %s' \"{p}\" \"{p}.dg\""), b);
        let _ = (s.kill(), s.wait());
        assert_eq!(
            r.stdout.lines().collect::<Vec<_>>(),
            ["regular empty file 0", "regular empty file 0"],
            "{b:?}: {}",
            r.all_output()
        );
    }
    drop(crowd.stdin.take());
    let _ = crowd.wait();
}

#[test]
fn a_socket_recreated_during_the_call_is_refused() {
    for b in common::backends() {
        let fx = Fixture::new();
        let dir = socket_dir(&fx);
        let p = format!("{dir}/daemon.sock");
        let line = format!(
            r#"python3 -c '
import socket, time, sys
end = time.time() + 2; n = 0
while time.time() < end:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sys.argv[1]); print("REACHED", s.recv(50)); break
    except OSError: n += 1
    time.sleep(0.01)
print("tries", n)' "{p}""#
        );
        let p2 = p.clone();
        let host = std::thread::spawn(move || {
            // The daemon restarts twice while the call loops.
            for _ in 0..3 {
                let mut s = server(&p2, false);
                std::thread::sleep(std::time::Duration::from_millis(500));
                let _ = (s.kill(), s.wait());
            }
        });
        let r = common::run(&fx, &line, b);
        host.join().unwrap();
        assert!(r.stdout.contains("tries"), "{b:?}: {}", r.all_output());
        assert!(!r.stdout.contains("REACHED"), "{b:?}: {}", r.all_output());
    }
}

#[test]
fn own_sockets_pairs_and_passed_fds_work() {
    let line = r#"python3 -c '
import socket, os, array
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind("own.sock"); s.listen(1)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.connect("own.sock"); a, _ = s.accept()
c.sendall(b"x"); assert a.recv(1) == b"x"
t = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); t.bind("/tmp/t.sock"); t.listen(1)
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.connect("/tmp/t.sock")
d1 = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d1.bind("/tmp/d.sock")
d2 = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d2.sendto(b"dg", "/tmp/d.sock")
assert d1.recv(10) == b"dg"
d2.sendmsg([b"d", b"g2"], [], 0, "/tmp/d.sock"); assert d1.recv(10) == b"dg2"
x, y = socket.socketpair()
r, w = os.pipe()
x.sendmsg([b"fd"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
msg, anc, _, _ = y.recvmsg(10, socket.CMSG_LEN(4))
os.write(array.array("i", anc[0][2])[0], b"passed"); assert os.read(r, 10) == b"passed"
import struct
x2, y2 = socket.socketpair(); y2.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
x2.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("3i", os.getpid(), os.getuid(), os.getgid()))])
msg, anc, _, _ = y2.recvmsg(10, socket.CMSG_LEN(12))
pid, uid, gid = struct.unpack("3i", anc[0][2]); assert msg == b"c" and pid > 0 and uid == os.getuid(), (pid, uid)
try:
    x2.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("3i", os.getpid() + 1, os.getuid(), os.getgid()))])
    raise SystemExit("a pid not its own was let through")
except PermissionError: pass
ab = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); ab.bind("\0efr-own"); ab.listen(1)
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect("\0efr-own")
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
socket.socket().connect(l.getsockname())
big = b"z" * (3 << 20)
p, q = socket.socketpair(); p.setblocking(False)
sent = 0
try:
    while sent < len(big): sent += p.send(big[sent:])
except BlockingIOError: pass
assert sent > 0
print("all-ok")
'
python3 -c 'import os; f = os.open("m", os.O_WRONLY | os.O_CREAT); os.fchmod(f, 0o600); d = os.open(".", os.O_RDONLY); os.close(os.open("n", os.O_WRONLY | os.O_CREAT, dir_fd=d)); print("fd-ok")'
mkdir -p tree/a/b && touch tree/a/b/c && rm -rf tree && echo rm-ok
"#;
    for b in common::backends() {
        let fx = Fixture::new();
        let r = common::run(&fx, line, b);
        for want in ["all-ok", "fd-ok", "rm-ok"] {
            assert!(r.stdout.contains(want), "{b:?} {want}: {}", r.all_output());
        }
        assert!(
            r.outcome.socket_denials.is_empty(),
            "{b:?}: {:?}",
            r.outcome.socket_denials
        );
    }
}

#[test]
fn a_granted_socket_is_reached() {
    for b in common::backends() {
        let fx = Fixture::new();
        let dir = socket_dir(&fx);
        let p = format!("{dir}/granted.sock");
        let mut s = server(&p, false);
        let line = format!(
            r#"python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); print("got", s.recv(50))' "{p}""#
        );
        let plan = fx.plan(&line, b, vec![Grant::Socket { path: p.clone() }]);
        let r = common::run_plan(&plan, None);
        let _ = (s.kill(), s.wait());
        assert!(
            r.stdout.contains("HOST-SECRET"),
            "{b:?}: {}",
            r.all_output()
        );
    }
}

/// A connect that blocks (a server whose backlog is full and that never accepts) holds
/// the supervisor's thread that makes it: the call's other supervised calls go on, on
/// another thread, and the line ends.
#[test]
fn a_blocked_connect_does_not_hold_the_calls_writes() {
    let line = r#"python3 -c '
import socket, os, threading, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind("/tmp/full.sock"); s.listen(0)
def fill():
    held = []
    for i in range(64):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.connect("/tmp/full.sock"); held.append(c)
threading.Thread(target=fill, daemon=True).start()
time.sleep(1)
for i in range(20):
    open("w%d" % i, "w").close()
print("writes-ok", flush=True)
os._exit(0)
'"#;
    for b in common::backends() {
        let fx = Fixture::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let plan = fx.plan(line, b, Vec::new());
        std::thread::spawn(move || {
            let _ = tx.send(common::run_plan(&plan, None));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{b:?}: the call hung behind a blocked connect"));
        assert!(r.stdout.contains("writes-ok"), "{b:?}: {}", r.all_output());
    }
}

/// Root's view lists every listening socket of the host, also those in another user's
/// private directory, which root's call (whose namespace maps no other user) cannot reach:
/// the call runs, and the socket stays out of its reach. Root only: a user's view already
/// names no socket it cannot look at.
#[test]
fn a_socket_in_another_users_private_directory_does_not_stop_roots_call() {
    if !is_root() {
        return;
    }
    for b in common::backends() {
        let fx = Fixture::new();
        let dir = format!("{}/private of nobody", fx.home);
        std::fs::create_dir_all(&dir).unwrap();
        let p = format!("{dir}/nobody.sock");
        let status = Command::new("chown")
            .args(["65534:65534", &dir])
            .status()
            .unwrap();
        assert!(status.success());
        let mut s = {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
            c.args([common::python(), "-c"]);
            c.arg(
                "import socket, sys, os\n\
                 s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)\n\
                 os.chmod(sys.argv[1], 0o777); os.chmod(os.path.dirname(sys.argv[1]), 0o700)\n\
                 print('ready', flush=True)\n\
                 while True: s.accept()[0].close()",
            );
            c.arg(&p);
            c.stdout(Stdio::piped()).spawn().expect("nobody's server")
        };
        let mut line = String::new();
        BufReader::new(s.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "nobody's server did not start");
        let r = common::run(
            &fx,
            &format!(
                "python3 -c 'import socket, sys\ntry:\n    socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print(\"REACHED\")\nexcept OSError as e: print(\"refused\", e.errno)' \"{p}\""
            ),
            b,
        );
        let _ = (s.kill(), s.wait());
        assert!(
            r.status.success(),
            "{b:?}: {}{:?}",
            r.all_output(),
            r.outcome
        );
        assert!(r.stdout.starts_with("refused"), "{b:?}: {}", r.all_output());
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}
