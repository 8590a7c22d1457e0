//! The escape suite: every attempt with what must happen, run contained on each backend
//! (as root and, in CI, as an unprivileged user). Every attempt also must never print
//! `ESCAPED` or the planted secret.

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use efr_launcher::api::BackendChoice;
use efr_sandbox_tests::common::{Fixture, SECRET, backends, procs_with, python, run, run_plan};
use efr_sandbox_wire::Grant;

/// What must happen.
enum Expect {
    /// The attempt fails (the line prints ESCAPED only on success).
    Denied,
    /// The system call fails with this errno (the line prints `ERRNO=n`).
    Errno(i32),
    /// The line's output holds this (it ran to the end).
    Output(&'static str),
    /// A check on the host after the line.
    Host(fn(&Fixture) -> bool),
}

struct Attempt {
    name: &'static str,
    line: String,
    expect: Expect,
}

fn a(name: &'static str, line: impl Into<String>, expect: Expect) -> Attempt {
    Attempt {
        name,
        line: line.into(),
        expect,
    }
}

/// `ATTEMPT && echo ESCAPED`.
fn try_(cmd: &str) -> String {
    format!("if {cmd}; then echo ESCAPED; fi")
}

fn sys(nr: libc::c_long, args: &str) -> String {
    format!(
        "{} -c 'import ctypes;l=ctypes.CDLL(None,use_errno=True);r=l.syscall({nr}{args});print(\"ESCAPED\" if r>=0 else \"ERRNO=%d\"%ctypes.get_errno())'",
        python()
    )
}

fn py(code: &str) -> String {
    format!("{} -c '{code}'", python())
}

/// Python's `socket.socket(...)` call `ctor`, printing its errno when it fails.
fn socket_errno(ctor: &str) -> String {
    py(&format!(
        "import socket\ntry:\n  {ctor};print(\"ESCAPED\")\nexcept OSError as e: print(\"ERRNO=%d\"%e.errno)"
    ))
}

fn connect_unix(path: &str) -> String {
    py(&format!(
        "import socket\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(2)\ntry:\n  s.connect(\"{path}\");print(\"ESCAPED\")\nexcept OSError as e: print(\"ERRNO=%d\"%e.errno)"
    ))
}

struct HostServices {
    port: u16,
    _tcp: std::net::TcpListener,
    usock_home: String,
    usock_var: String,
    _ul: Vec<UnixListener>,
    abstract_name: String,
    _abs: std::os::fd::OwnedFd,
    host_pid: u32,
    host_child: std::process::Child,
}

fn abstract_listener(name: &str) -> std::os::fd::OwnedFd {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    l.into()
}

fn host_services(fx: &Fixture) -> HostServices {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let usock_home = format!("{}/.docker.sock", fx.home);
    let usock_var = format!("{}/var-db.sock", fx.dir.path().display());
    let ul = vec![
        UnixListener::bind(&usock_home).unwrap(),
        UnixListener::bind(&usock_var).unwrap(),
    ];
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let abstract_name = format!("efr-escape-{}-{n}", std::process::id());
    let abs = abstract_listener(&abstract_name);
    let host_child = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    HostServices {
        port,
        _tcp: tcp,
        usock_home,
        usock_var,
        _ul: ul,
        abstract_name,
        _abs: abs,
        host_pid: host_child.id(),
        host_child,
    }
}

fn attempts(fx: &Fixture, hs: &HostServices) -> Vec<Attempt> {
    let (h, p, o) = (&fx.home, &fx.proj, &fx.other);
    vec![
        // Writes outside.
        a(
            "write home",
            try_(&format!("touch {h}/evil")),
            Expect::Host(|f| !std::path::Path::new(&format!("{}/evil", f.home)).exists()),
        ),
        a(
            "write /etc",
            try_("echo x > /etc/efr-evil"),
            Expect::Host(|_| !std::path::Path::new("/etc/efr-evil").exists()),
        ),
        a("write /usr", try_("touch /usr/efr-evil"), Expect::Denied),
        a(
            "write other project",
            try_(&format!("echo x > {o}/file")),
            Expect::Host(|f| {
                std::fs::read_to_string(format!("{}/file", f.other)).unwrap() == "other\n"
            }),
        ),
        a(
            "write through planted symlink",
            format!(
                "ln -s {h}/.bashrc {p}/l1; {}",
                try_(&format!("echo x >> {p}/l1"))
            ),
            Expect::Host(|f| {
                std::fs::read_to_string(format!("{}/.bashrc", f.home)).unwrap() == "# rc\n"
            }),
        ),
        a(
            "hard link to a home file",
            try_(&format!("ln {h}/.bashrc {p}/hl && echo x >> {p}/hl")),
            Expect::Host(|f| {
                std::fs::read_to_string(format!("{}/.bashrc", f.home)).unwrap() == "# rc\n"
            }),
        ),
        a(
            "write via /proc/self/root",
            try_(&format!("touch /proc/self/root{h}/evil2")),
            Expect::Denied,
        ),
        a(
            "write via /proc/1/cwd",
            try_("touch /proc/1/cwd/evil3"),
            Expect::Denied,
        ),
        a(
            "write via /proc/1/root",
            try_(&format!("touch /proc/1/root{h}/evil4")),
            Expect::Denied,
        ),
        a(
            "/dev/shm is private",
            "echo x > /dev/shm/efr-escape-probe; true",
            Expect::Host(|_| !std::path::Path::new("/dev/shm/efr-escape-probe").exists()),
        ),
        a(
            "write /sys",
            try_("echo 1 > /sys/kernel/profiling"),
            Expect::Denied,
        ),
        a(
            "mknod a device",
            try_("mknod /tmp/null2 c 1 3"),
            Expect::Denied,
        ),
        // Code that runs outside.
        a(
            "git hook",
            try_(&format!("echo evil > {p}/.git/hooks/pre-commit")),
            Expect::Host(|f| {
                !std::path::Path::new(&format!("{}/.git/hooks/pre-commit", f.proj)).exists()
            }),
        ),
        a(
            "git config",
            try_(&format!("echo '[core] hooksPath=/x' >> {p}/.git/config")),
            Expect::Host(|f| {
                !std::fs::read_to_string(format!("{}/.git/config", f.proj))
                    .unwrap()
                    .contains("hooksPath")
            }),
        ),
        a(
            "git config via git",
            try_(&format!("git -C {p} config core.fsmonitor evil")),
            Expect::Host(|f| {
                !std::fs::read_to_string(format!("{}/.git/config", f.proj))
                    .unwrap()
                    .contains("fsmonitor")
            }),
        ),
        a(
            "rename .git aside and recreate",
            try_(&format!(
                "mv {p}/.git {p}/.git-aside && mkdir -p {p}/.git/hooks && echo evil > {p}/.git/hooks/pre-commit"
            )),
            Expect::Host(|f| !std::path::Path::new(&format!("{}/.git-aside", f.proj)).exists()),
        ),
        a(
            "rename hooks aside",
            try_(&format!(
                "mv {p}/.git/hooks {p}/.git/hooks-old && mkdir {p}/.git/hooks"
            )),
            Expect::Denied,
        ),
        a(
            "remove hooks",
            try_(&format!("rm -rf {p}/.git/hooks && [ ! -e {p}/.git/hooks ]")),
            Expect::Denied,
        ),
        a(
            "create missing .envrc",
            try_(&format!(
                "echo evil > {p}/.envrc && grep -q evil {p}/.envrc"
            )),
            Expect::Host(|f| !std::path::Path::new(&format!("{}/.envrc", f.proj)).exists()),
        ),
        a(
            "create .vscode tasks",
            try_(&format!(
                "mkdir -p {p}/.vscode && echo x > {p}/.vscode/tasks.json"
            )),
            // The empty directory may be made (it runs nothing); nothing goes in it.
            Expect::Host(|f| {
                !std::path::Path::new(&format!("{}/.vscode/tasks.json", f.proj)).exists()
            }),
        ),
        a(
            "remove a missing .envrc and create it",
            try_(&format!(
                "rm -f {p}/.envrc; mv {p}/.envrc {p}/.envrc-old; echo evil > {p}/.envrc && grep -q evil {p}/.envrc"
            )),
            Expect::Host(|f| {
                !std::path::Path::new(&format!("{}/.envrc", f.proj)).exists()
                    && !std::path::Path::new(&format!("{}/.envrc-old", f.proj)).exists()
            }),
        ),
        a(
            // A writer left behind that keeps trying must be dead when the call ends, or it
            // would plant the file on the host once nothing supervises it.
            "a daemon writing protected paths until the call ends",
            format!(
                "setsid sh -c 'while :; do echo evil > {p}/.envrc 2>/dev/null; mkdir {p}/.idea 2>/dev/null; done' </dev/null >/dev/null 2>&1 & sleep 0.2"
            ),
            Expect::Host(|f| {
                std::thread::sleep(std::time::Duration::from_millis(300));
                !std::path::Path::new(&format!("{}/.envrc", f.proj)).exists()
                    && std::fs::read_dir(format!("{}/.idea", f.proj))
                        .map(|d| d.count() == 0)
                        .unwrap_or(true)
            }),
        ),
        a(
            "gitmodules",
            try_(&format!("echo x > {p}/.gitmodules")),
            Expect::Host(|f| !std::path::Path::new(&format!("{}/.gitmodules", f.proj)).exists()),
        ),
        // Masked credentials.
        a(
            "read ssh key",
            format!("cat {h}/.ssh/id_rsa"),
            Expect::Denied,
        ),
        a(
            "read aws credentials",
            format!("cat {h}/.aws/credentials"),
            Expect::Denied,
        ),
        a(
            "read netrc via ..",
            format!("cat {p}/../.netrc"),
            Expect::Denied,
        ),
        a(
            "read key via symlink",
            format!("ln -s {h}/.ssh/id_rsa /tmp/k; cat /tmp/k"),
            Expect::Denied,
        ),
        a(
            "read key via /proc/self/root",
            format!("cat /proc/self/root{h}/.aws/credentials"),
            Expect::Denied,
        ),
        a(
            "write into masked dir",
            try_(&format!("echo x > {h}/.aws/new")),
            Expect::Denied,
        ),
        // Network and sockets of the host.
        a(
            "host loopback TCP",
            py(&format!(
                "import socket\ntry:\n  socket.create_connection((\"127.0.0.1\",{}),2);print(\"ESCAPED\")\nexcept OSError as e: print(\"ERRNO=%d\"%e.errno)",
                hs.port
            )),
            Expect::Denied,
        ),
        a(
            "host unix socket under home",
            connect_unix(&hs.usock_home),
            Expect::Denied,
        ),
        a(
            "host unix socket under /var",
            connect_unix(&hs.usock_var),
            Expect::Denied,
        ),
        a(
            "host abstract socket",
            connect_unix(&format!("\\0{}", hs.abstract_name)),
            Expect::Denied,
        ),
        // Socket families by allow-list: every family but AF_UNIX, AF_INET, AF_INET6 and
        // AF_NETLINK (NETLINK_ROUTE, NETLINK_SOCK_DIAG) is EAFNOSUPPORT, socket and
        // socketpair alike.
        a(
            "AF_PACKET socket",
            socket_errno("socket.socket(17,3,0)"),
            Expect::Errno(libc::EAFNOSUPPORT),
        ),
        a(
            "AF_VSOCK socket",
            socket_errno("socket.socket(40,1,0)"),
            Expect::Errno(libc::EAFNOSUPPORT),
        ),
        a(
            "AF_BLUETOOTH socket",
            socket_errno("socket.socket(31,3,0)"),
            Expect::Errno(libc::EAFNOSUPPORT),
        ),
        a(
            "AF_ALG socket",
            socket_errno("socket.socket(38,5,0)"),
            Expect::Errno(libc::EAFNOSUPPORT),
        ),
        a(
            "AF_PACKET socket, high bits of the family",
            sys(libc::SYS_socket, ",0x700000011,3,0"),
            Expect::Errno(libc::EAFNOSUPPORT),
        ),
        a(
            "AF_PACKET socketpair",
            sys(libc::SYS_socketpair, ",17,3,0,0"),
            Expect::Errno(libc::EAFNOSUPPORT),
        ),
        a(
            "NETLINK_GENERIC socket",
            socket_errno("socket.socket(16,3,16)"),
            Expect::Errno(libc::EPROTONOSUPPORT),
        ),
        a(
            "NETLINK_NETFILTER socket",
            socket_errno("socket.socket(16,3,12)"),
            Expect::Errno(libc::EPROTONOSUPPORT),
        ),
        a(
            "the allowed families work",
            py(
                "import socket\nsocket.socket(socket.AF_UNIX);socket.socketpair()\nsocket.socket(socket.AF_INET).bind((\"127.0.0.1\",0))\nsocket.socket(socket.AF_INET6)\nn=socket.socket(16,3,0);n.bind((0,0))\nsocket.socket(16,3,4)\nprint(\"families-ok\")",
            ),
            Expect::Output("families-ok"),
        ),
        // Host processes.
        a(
            "signal a host process",
            try_(&format!("kill -TERM {}", hs.host_pid)),
            Expect::Denied,
        ),
        a(
            "read host process environ",
            format!("cat /proc/{}/environ", hs.host_pid),
            Expect::Denied,
        ),
        a(
            "ptrace a host process",
            sys(libc::SYS_ptrace, &format!(",16,{},0,0", hs.host_pid)),
            Expect::Denied,
        ),
        // Privilege and kernel surface.
        a("su", try_("su -c true root </dev/null"), Expect::Denied),
        a("sudo", try_("sudo -n true"), Expect::Denied),
        a("unshare -U", try_("unshare -U true"), Expect::Denied),
        a("unshare -r", try_("unshare -r true"), Expect::Denied),
        a(
            "unshare syscall",
            sys(libc::SYS_unshare, &format!(",{}", libc::CLONE_NEWUSER)),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "clone NEWUSER",
            sys(
                libc::SYS_clone,
                &format!(",{},0,0,0,0", libc::CLONE_NEWUSER | libc::SIGCHLD),
            ),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "clone3 is ENOSYS",
            sys(libc::SYS_clone3, ",0,0"),
            Expect::Errno(libc::ENOSYS),
        ),
        a("mount", try_("mount -t tmpfs none /tmp"), Expect::Denied),
        a(
            "mount syscall",
            sys(libc::SYS_mount, ",0,0,0,0,0"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            // Flags the kernel refuses (EINVAL) before its capability check (EPERM): EPERM
            // is the filter's answer.
            "open_tree_attr",
            sys(
                efr_launcher::restrict::seccomp::newer::SYS_open_tree_attr,
                ",-1,b\"\",0xffffffff,0,0",
            ),
            Expect::Errno(libc::EPERM),
        ),
        a("chroot", try_("chroot / true"), Expect::Denied),
        a(
            "bpf",
            sys(libc::SYS_bpf, ",0,0,0"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "io_uring_setup",
            sys(libc::SYS_io_uring_setup, ",1,0"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "keyctl",
            sys(libc::SYS_keyctl, ",0,0,0,0,0"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "perf_event_open",
            sys(libc::SYS_perf_event_open, ",0,0,-1,-1,0"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "userfaultfd",
            sys(libc::SYS_userfaultfd, ",0"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "open_by_handle_at",
            sys(libc::SYS_open_by_handle_at, ",0,0,0"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "TIOCSTI",
            py(
                "import fcntl,termios,pty\nm,s=pty.openpty()\ntry:\n  fcntl.ioctl(s,termios.TIOCSTI,b\"x\");print(\"ESCAPED\")\nexcept OSError as e: print(\"ERRNO=%d\"%e.errno)",
            ),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "TIOCSTI high bits",
            py(
                "import fcntl,termios,pty\nm,s=pty.openpty()\ntry:\n  fcntl.ioctl(s,termios.TIOCSTI|(1<<32),b\"x\");print(\"ESCAPED\")\nexcept (OSError,OverflowError) as e: print(\"ERRNO=1\")",
            ),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "no capabilities",
            "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status | grep -v 0000000000000000 && echo ESCAPED; true",
            Expect::Denied,
        ),
        a(
            "no_new_privs",
            "grep -q 'NoNewPrivs:\t1' /proc/self/status || echo ESCAPED",
            Expect::Denied,
        ),
        // Inherited fds and secrets in the environment.
        a(
            "inherited fds",
            "for f in 3 4 5 6 7 8 9 10 20; do [ -e /proc/$$/fd/$f ] && echo ESCAPED-fd$f; done; true",
            Expect::Denied,
        ),
        a("secrets in env", "env", Expect::Denied),
        // The sandbox's init.
        a("init environ", "cat /proc/1/environ", Expect::Denied),
        a(
            "init mem",
            try_("head -c 16 /proc/1/mem >/dev/null"),
            Expect::Denied,
        ),
        a(
            "ptrace init",
            sys(libc::SYS_ptrace, ",16,1,0,0"),
            Expect::Denied,
        ),
        a(
            "pidfd_getfd of init",
            py(
                "import ctypes\nl=ctypes.CDLL(None,use_errno=True)\np=l.syscall(434,1,0)\nr=l.syscall(438,p,0,0) if p>=0 else -1\nprint(\"ESCAPED\" if r>=0 else \"ERRNO=%d\"%ctypes.get_errno())",
            ),
            Expect::Denied,
        ),
        a(
            "signal init",
            "kill -KILL 1; kill -TERM 1; sleep 0.2; echo init-unharmed",
            Expect::Output("init-unharmed"),
        ),
        a(
            "hook planted in a repository below the project root",
            try_(&format!(
                "printf '#!/bin/sh\\necho PWNED\\n' > {p}/vendor/lib/.git/hooks/pre-commit"
            )),
            Expect::Host(|f| {
                !std::path::Path::new(&format!("{}/vendor/lib/.git/hooks/pre-commit", f.proj))
                    .exists()
            }),
        ),
        a(
            "core.fsmonitor in the config of a repository below the project root",
            try_(&format!(
                "git -C {p}/vendor/lib config core.fsmonitor 'echo PWNED'"
            )),
            Expect::Host(|f| {
                !std::fs::read_to_string(format!("{}/vendor/lib/.git/config", f.proj))
                    .unwrap_or_default()
                    .contains("PWNED")
            }),
        ),
        a(
            "the nested repository's git dir renamed aside and recreated",
            try_(&format!(
                "mv {p}/vendor/lib/.git {p}/vendor/lib/.git-old && mkdir -p {p}/vendor/lib/.git/hooks"
            )),
            Expect::Host(|f| {
                std::path::Path::new(&format!("{}/vendor/lib/.git/HEAD", f.proj)).exists()
            }),
        ),
        #[cfg(target_arch = "x86_64")]
        a(
            "unshare through the x32 syscall ABI",
            sys(0x4000_0000 | libc::SYS_unshare, ",0x10000000"),
            Expect::Errno(libc::EPERM),
        ),
        a(
            "ptrace a sibling's memory via process_vm_writev",
            sys(libc::SYS_process_vm_writev, ",1,0,0,0,0,0"),
            Expect::Errno(libc::EPERM),
        ),
    ]
}

/// Printed after every attempt.
const RAN: &str = "EFR-ATTEMPT-RAN";

fn check(fx: &Fixture, at: &Attempt, r: &efr_sandbox_tests::common::Ran) -> Result<(), String> {
    let out = r.all_output();
    if let Some(e) = &r.outcome.setup_error {
        return Err(format!("setup error: {e}"));
    }
    if out.contains("ESCAPED") {
        return Err(format!("ESCAPED: {out}"));
    }
    if out.contains(SECRET) {
        return Err(format!("secret leaked: {out}"));
    }
    if !out.contains(RAN) {
        return Err(format!("the line did not run to its end: {out}"));
    }
    match &at.expect {
        Expect::Denied => Ok(()),
        Expect::Errno(n) => {
            if out.contains(&format!("ERRNO={n}")) {
                Ok(())
            } else {
                Err(format!("wanted ERRNO={n}: {out}"))
            }
        }
        Expect::Output(w) => {
            if out.contains(w) {
                Ok(())
            } else {
                Err(format!("wanted {w:?}: {out}"))
            }
        }
        Expect::Host(f) => {
            if f(fx) {
                Ok(())
            } else {
                Err(format!("host check failed: {out}"))
            }
        }
    }
}

fn suite(backend: BackendChoice) {
    let fx = Fixture::new();
    let mut hs = host_services(&fx);
    let mut failures = Vec::new();
    let list = attempts(&fx, &hs);
    assert!(list.len() >= 40, "{} attempts", list.len());
    for at in &list {
        // The marker proves the shell got through the attempt: a line that died early for
        // another reason (a missing tool, a crash) must not pass as "denied".
        let r = run(&fx, &format!("{}\necho {RAN}", at.line), backend);
        if let Err(e) = check(&fx, at, &r) {
            failures.push(format!("[{:?}] {}: {e}", backend, at.name));
        }
    }
    // The host process is alive (no signal reached it).
    assert!(
        hs.host_child.try_wait().unwrap().is_none(),
        "host process was killed"
    );
    let _ = hs.host_child.kill();
    let _ = hs.host_child.wait();
    assert!(
        failures.is_empty(),
        "{} of {} attempts failed:\n{}",
        failures.len(),
        list.len(),
        failures.join("\n")
    );
}

#[test]
fn escapes_native() {
    if backends().contains(&BackendChoice::Native) {
        suite(BackendChoice::Native);
    }
}

#[test]
fn escapes_bwrap() {
    if backends().contains(&BackendChoice::Bwrap) {
        suite(BackendChoice::Bwrap);
    }
}

/// The same protections hold when the project root is the home itself.
#[test]
fn home_as_project_root() {
    for b in backends() {
        let fx = Fixture::new();
        let mut req = fx.request("", b);
        req.projects = vec![fx.home.clone()];
        req.cwd = fx.home.clone();
        fx.set_view(&mut req);
        let cases = [
            (try_(&format!("echo x >> {}/.bashrc", fx.home)), false),
            (try_(&format!("echo x >> {}/.gitconfig", fx.home)), false),
            (try_(&format!("echo x >> {}/.ssh/config", fx.home)), false),
            (try_(&format!("echo x > {}/.zshrc", fx.home)), false),
            (
                try_(&format!("mv {}/.ssh {}/.ssh2", fx.home, fx.home)),
                false,
            ),
            (
                format!("cat {}/.aws/credentials {}/.ssh/id_rsa", fx.home, fx.home),
                false,
            ),
            (try_(&format!("echo ok > {}/newfile", fx.home)), true),
        ];
        for (line, should_work) in cases {
            req.line = line.clone();
            let plan = req.clone();
            let r = run_plan(&plan, None);
            let out = r.all_output();
            assert!(!out.contains(SECRET), "[{b:?}] {line}: {out}");
            assert_eq!(
                out.contains("ESCAPED"),
                should_work,
                "[{b:?}] {line}: {out}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(format!("{}/.bashrc", fx.home)).unwrap(),
            "# rc\n"
        );
        assert!(!std::path::Path::new(&format!("{}/.zshrc", fx.home)).exists());
    }
}

/// A daemonised process does not outlive the call.
#[test]
fn daemon_does_not_survive() {
    for b in backends() {
        let fx = Fixture::new();
        let tag = format!("7777.{}{}", std::process::id(), b as u8);
        let r = run(
            &fx,
            &format!("setsid nohup sleep {tag} >/dev/null 2>&1 & sleep 0.2; echo done"),
            b,
        );
        assert!(r.stdout.contains("done"), "{r:?}");
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            procs_with(&format!("sleep {tag}")).is_empty(),
            "[{b:?}] daemon survived"
        );
    }
}

/// A killed launcher takes its tree with it.
#[test]
fn killed_launcher_tree_dies() {
    for b in backends() {
        let fx = Fixture::new();
        let tag = format!("8888.{}{}", std::process::id(), b as u8);
        let plan = fx.plan(&format!("sleep {tag}"), b, vec![]);
        let stages = efr_sandbox_tests::common::stage_dirs();
        let out = tempfile::NamedTempFile::new().unwrap();
        let mut running = efr_sandbox_tests::common::launcher()
            .spawn(
                &plan,
                efr_launcher::api::Io::null(),
                efr_launcher::api::Io::from(out.reopen().unwrap()),
                efr_launcher::api::Io::null(),
            )
            .unwrap();
        assert!(matches!(
            running.next_status(),
            Some(efr_launcher::status::StatusLine::Started { .. })
        ));
        let t = Instant::now();
        while procs_with(&format!("sleep {tag}")).is_empty() && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !procs_with(&format!("sleep {tag}")).is_empty(),
            "line did not start"
        );
        let launcher_pid = running.child.id() as i32;
        running.child.kill().unwrap();
        running.child.wait().unwrap();
        // Nor does it leave bubblewrap's stage in /tmp.
        assert_eq!(
            efr_sandbox_tests::common::new_stage_dirs(&stages, launcher_pid),
            Vec::<String>::new(),
            "[{b:?}] the killed launcher's stage"
        );
        let t = Instant::now();
        while !procs_with(&format!("sleep {tag}")).is_empty()
            && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            procs_with(&format!("sleep {tag}")).is_empty(),
            "[{b:?}] tree survived the launcher"
        );
        let mut s = String::new();
        let _ = running.status.read_to_string(&mut s);
    }
}

/// The default masks below the home, as paths of the fixture's home.
fn home_masks(fx: &Fixture) -> Vec<String> {
    efr_policy::config::Config::defaults()
        .sandbox
        .masks
        .iter()
        .filter_map(|e| {
            e.value
                .strip_prefix("~/")
                .map(|r| format!("{}/{r}", fx.home))
        })
        .collect()
}

/// `cat` of every path and of every file below it, then the marker.
fn read_all(paths: &[String]) -> String {
    let list: Vec<String> = paths.iter().map(|p| format!("'{p}'")).collect();
    format!(
        "for p in {}; do cat \"$p\"; find \"$p\" -type f -exec cat {{}} + ; done 2>&1\necho {RAN}",
        list.join(" ")
    )
}

/// Every default mask below the home hides a store planted there, a file or a directory,
/// with the home read-only and with the home as the project.
#[test]
fn every_default_mask_hides_its_store() {
    for b in backends() {
        for as_dir in [false, true] {
            for home_project in [false, true] {
                let fx = Fixture::new();
                let masks = home_masks(&fx);
                let mut planted = Vec::new();
                for m in &masks {
                    if std::path::Path::new(m).exists() {
                        continue;
                    }
                    let target = if as_dir {
                        format!("{m}/secret")
                    } else {
                        m.clone()
                    };
                    let parent = std::path::Path::new(&target).parent().unwrap();
                    if std::fs::create_dir_all(parent).is_ok()
                        && std::fs::write(&target, SECRET).is_ok()
                    {
                        planted.push(m.clone());
                    }
                }
                assert!(planted.len() > 40, "{} planted", planted.len());
                let mut req = fx.request(&read_all(&planted), b);
                if home_project {
                    req.projects = vec![fx.home.clone()];
                    req.cwd = fx.home.clone();
                    fx.set_view(&mut req);
                }
                let r = run_plan(&req.clone(), None);
                let out = r.all_output();
                let what = format!("[{b:?}] dirs {as_dir}, home as project {home_project}");
                assert!(r.outcome.setup_error.is_none(), "{what}: {out}");
                assert!(out.contains(RAN), "{what}: {out}");
                assert!(!out.contains(SECRET), "{what}: a store leaked: {out}");
            }
        }
    }
}

/// A store that does not exist at launch and that the host makes during the call (the
/// user's `aws configure`), and one the host replaces under its mask, stay unreadable: the
/// names may be seen, not what is in them.
#[test]
fn stores_made_on_the_host_during_the_call_stay_unreadable() {
    for b in backends() {
        let fx = Fixture::new();
        let h = &fx.home;
        std::fs::remove_dir_all(format!("{h}/.aws")).unwrap();
        // ~/.config is a link to a directory outside the home (dotfile managers do this).
        let real_config = format!("{}/real-config", fx.dir.path().display());
        std::fs::create_dir_all(format!("{real_config}/other")).unwrap();
        std::os::unix::fs::symlink(&real_config, format!("{h}/.config")).unwrap();
        // Missing at launch: a directory store, a file in the home, one in an existing
        // directory (behind a link), one whose parent is missing too.
        let made = [
            format!("{h}/.aws/credentials"),
            format!("{h}/.pgpass"),
            format!("{h}/.config/gcloud/credentials.db"),
            format!("{h}/.cache/huggingface/token"),
        ];
        // Replaced by the host under the view's masks (the mounts on them are detached).
        let replaced = [format!("{h}/.netrc"), format!("{h}/.ssh/id_rsa")];
        let p = &fx.proj;
        let all: Vec<String> = made.iter().chain(&replaced).cloned().collect();
        let line = format!(
            "touch {p}/ready; while [ ! -e {p}/go ]; do sleep 0.02; done\n{}",
            read_all(&all)
        );
        let plan = fx.plan(&line, b, vec![]);
        let out = tempfile::NamedTempFile::new().unwrap();
        let mut running = efr_sandbox_tests::common::launcher()
            .spawn(
                &plan,
                efr_launcher::api::Io::null(),
                efr_launcher::api::Io::from(out.reopen().unwrap()),
                efr_launcher::api::Io::from(out.reopen().unwrap()),
            )
            .unwrap();
        let t = Instant::now();
        while !std::path::Path::new(&format!("{p}/ready")).exists()
            && t.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        for f in &made {
            std::fs::create_dir_all(std::path::Path::new(f).parent().unwrap()).unwrap();
            std::fs::write(f, SECRET).unwrap();
        }
        std::fs::write(format!("{h}/.netrc.new"), SECRET).unwrap();
        std::fs::rename(format!("{h}/.netrc.new"), format!("{h}/.netrc")).unwrap();
        std::fs::rename(format!("{h}/.ssh"), format!("{h}/.ssh-old")).unwrap();
        std::fs::create_dir(format!("{h}/.ssh")).unwrap();
        std::fs::write(format!("{h}/.ssh/id_rsa"), SECRET).unwrap();
        std::fs::write(format!("{p}/go"), "").unwrap();
        let mut status = String::new();
        while let Some(s) = running.next_status() {
            status.push_str(&s.to_line());
        }
        running.child.wait().unwrap();
        let text = std::fs::read_to_string(out.path()).unwrap();
        assert!(text.contains(RAN), "[{b:?}] {status} {text}");
        assert!(!text.contains(SECRET), "[{b:?}] a store leaked: {text}");
        // Each was there to be read, and refused.
        for f in &all {
            assert!(
                text.contains(&format!("{f}: Permission denied")),
                "[{b:?}] {f} not refused: {text}"
            );
        }
    }
}

/// The Landlock layer of the masks holds alone: with the mask mounts weakened away, an
/// existing store is still unreadable.
#[test]
fn masks_hold_in_landlock_without_their_mounts() {
    for b in backends() {
        let fx = Fixture::new();
        let h = &fx.home;
        let mut plan = fx.plan(
            &read_all(&[format!("{h}/.aws/credentials"), format!("{h}/.netrc")]),
            b,
            vec![],
        );
        plan.test_weaken = vec!["no_masks".into()];
        let o = efr_sandbox_tests::common::run_weakened(&plan, fx.dir.path(), &[]);
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains(RAN), "[{b:?}] {out}");
        assert!(
            !out.contains(SECRET),
            "[{b:?}] leaked without the mounts: {out}"
        );
    }
}

/// `unmask` of a path below a mask shows that path (read-only, nothing else of the mask);
/// one of a path that does not exist there is refused, naming the mask to lift.
#[test]
fn unmask_below_a_mask() {
    for b in backends() {
        let fx = Fixture::new();
        let h = &fx.home;
        let key = format!("{h}/.ssh/id_rsa");
        let grant = vec![Grant::Unmask { path: key.clone() }];
        let plan = fx.plan(
            &format!("cat {key}; echo; ls -A {h}/.ssh; echo x >> {key}; echo {RAN}"),
            b,
            grant,
        );
        let r = run_plan(&plan, None);
        let out = r.all_output();
        assert!(r.outcome.setup_error.is_none(), "[{b:?}] {out}");
        assert!(
            r.stdout.contains(SECRET),
            "[{b:?}] the key is not shown: {out}"
        );
        assert!(r.stdout.contains("id_rsa"), "[{b:?}] {out}");
        assert!(
            !r.stdout.contains("config"),
            "[{b:?}] the rest of ~/.ssh shows: {out}"
        );
        assert_eq!(std::fs::read_to_string(&key).unwrap(), SECRET, "[{b:?}]");
        // A key that is not there: refused, with the mask it would have to lift.
        let missing = format!("{h}/.ssh/id_ed25519");
        let plan = fx.plan(
            "true",
            b,
            vec![Grant::Unmask {
                path: missing.clone(),
            }],
        );
        let r = run_plan(&plan, None);
        let e = r.outcome.setup_error.clone().unwrap_or_default();
        assert!(
            e.contains(&missing) && e.contains(&format!("the mask {h}/.ssh")),
            "[{b:?}] {e:?} {r:?}"
        );
        assert_eq!(r.status.code(), Some(125), "[{b:?}]");
    }
}

/// With the home as the project, every floor is read-only whether or not it or its parent
/// exists, and so is a missing mask (a planted `~/.aws/config` runs `credential_process`).
#[test]
fn floors_and_masks_under_the_home_as_project() {
    for b in backends() {
        let fx = Fixture::new();
        let h = fx.home.clone();
        // No ~/.ssh (so not ~/.ssh/authorized_keys's parent), no ~/.config, no ~/.aws.
        std::fs::remove_dir_all(format!("{h}/.ssh")).unwrap();
        std::fs::remove_dir_all(format!("{h}/.aws")).unwrap();
        let mut targets: Vec<String> = efr_policy::config::Config::defaults()
            .floors
            .paths
            .iter()
            .filter_map(|e| e.value.strip_prefix("~/"))
            .map(|r| {
                format!(
                    "{h}/{}",
                    r.replace("python3*", "python3.11")
                        .replace("*.pth", "evil.pth")
                )
            })
            .collect();
        targets.extend([
            format!("{h}/.config/systemd/user/x.service"),
            format!("{h}/.config/autostart/x.desktop"),
            format!("{h}/.aws/config"),
            format!("{h}/.kube/config"),
            format!("{h}/.docker/config.json"),
        ]);
        // A file at the path, or one inside it when it is (or is made) a directory.
        let attempts: Vec<String> = targets
            .iter()
            .map(|t| {
                format!(
                    "mkdir -p \"$(dirname '{t}')\"; echo evil >> '{t}'; mkdir -p '{t}' && echo evil > '{t}/x'"
                )
            })
            .collect();
        let mut req = fx.request(&format!("{}\necho {RAN}", attempts.join("\n")), b);
        req.projects = vec![h.clone()];
        req.cwd = h.clone();
        fx.set_view(&mut req);
        let r = run_plan(&req.clone(), None);
        let out = r.all_output();
        assert!(r.outcome.setup_error.is_none(), "[{b:?}] {out}");
        assert!(out.contains(RAN), "[{b:?}] {out}");
        let mut written = Vec::new();
        for t in &targets {
            let file = std::fs::read_to_string(t).unwrap_or_default();
            if file.contains("evil") || std::path::Path::new(&format!("{t}/x")).exists() {
                written.push(t.clone());
            }
        }
        assert!(
            written.is_empty(),
            "[{b:?}] floors written: {written:?}\n{out}"
        );
        assert_eq!(
            std::fs::read_to_string(format!("{h}/.bashrc")).unwrap(),
            "# rc\n"
        );
        // The home itself stays writable.
        req.line = format!("echo ok > {h}/newfile && cat {h}/newfile");
        let r = run_plan(&req.clone(), None);
        assert!(r.stdout.contains("ok"), "[{b:?}] {r:?}");
    }
}

/// The call's own /tmp and /dev/shm are bounded: a fill stops at the size the plan names
/// (ENOSPC), and the summary says which was full; a call that fills nothing reports none.
#[test]
fn tmp_and_shm_fills_stop_at_their_bound_and_are_reported() {
    for b in backends() {
        let fx = Fixture::new();
        let mut req = fx.request("", b);
        req.tmp = None;
        req.tmp_size = Some("8M".into());
        req.shm_size = Some("4M".into());
        req.line = format!(
            "df -k /tmp /dev/shm; dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; \
             dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>&1; \
             du -k /tmp/fill /dev/shm/fill; echo {RAN}"
        );
        let r = run_plan(&req.clone(), None);
        let out = r.all_output();
        assert!(out.contains(RAN), "[{b:?}] {out}");
        assert!(
            out.matches("No space left on device").count() >= 2,
            "[{b:?}] a fill did not stop: {out}"
        );
        let kib = |p: &str| -> u64 {
            out.lines()
                .find(|l| l.ends_with(p) && !l.contains('%'))
                .and_then(|l| l.split_whitespace().next()?.parse().ok())
                .unwrap_or(u64::MAX)
        };
        assert!(kib("/tmp/fill") <= 8 * 1024, "[{b:?}] {out}");
        assert!(kib("/dev/shm/fill") <= 4 * 1024, "[{b:?}] {out}");
        let mut full = r.outcome.full_tmpfs.clone();
        full.sort();
        assert_eq!(full, ["/dev/shm", "/tmp"], "[{b:?}] {out}");
        assert_eq!(
            r.outcome.summary().full_tmpfs,
            r.outcome.full_tmpfs,
            "[{b:?}]"
        );
        // Without a bound in the plan, the defaults bound them (a share of the memory).
        req.tmp_size = None;
        req.shm_size = None;
        req.line = format!("df -k /tmp /dev/shm; echo {RAN}");
        let r = run_plan(&req.clone(), None);
        assert!(r.outcome.full_tmpfs.is_empty(), "[{b:?}] {r:?}");
        let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        for (p, share) in [("/tmp", 4), ("/dev/shm", 10)] {
            let size: u64 = r
                .stdout
                .lines()
                .find(|l| l.ends_with(&format!(" {p}")))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                .unwrap_or(u64::MAX);
            assert!(
                size <= mem_kib / share + 4,
                "[{b:?}] {p}: {size} KiB of {mem_kib}"
            );
        }
    }
}

/// The host's tree is gone from the call's mount table, not only shadowed: no mount point
/// of the staging roots (`/oldroot`, `/newroot`) is left, the root is mounted once (a
/// base left stacked under the view's root would be a second `/`), and `/oldroot` does not
/// exist. The native backend leaves the base and the old root below it in one lazy
/// detach; this is what that detach must leave.
#[test]
fn no_host_root_is_left_in_the_mount_table() {
    for b in backends() {
        let fx = Fixture::new();
        let line = format!(
            "cut -d' ' -f5 /proc/self/mountinfo | sed 's/^/MP:/'; \
             ls -d /oldroot /newroot 2>/dev/null | sed 's/^/LEFT:/'; echo {RAN}"
        );
        let r = run(&fx, &line, b);
        let out = r.all_output();
        assert!(r.stdout.contains(RAN), "[{b:?}] {out}");
        let points: Vec<&str> = r
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("MP:"))
            .collect();
        assert!(points.len() > 3, "[{b:?}] no mount table read: {out}");
        let staged: Vec<&&str> = points
            .iter()
            .filter(|p| p.starts_with("/oldroot") || p.starts_with("/newroot"))
            .collect();
        assert!(staged.is_empty(), "[{b:?}] staging mounts left: {staged:?}");
        let roots = points.iter().filter(|p| **p == "/").count();
        assert_eq!(roots, 1, "[{b:?}] the root is mounted {roots} times: {out}");
        assert!(!r.stdout.contains("LEFT:"), "[{b:?}] {out}");
    }
}
