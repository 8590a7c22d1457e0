//! `efr-sandbox run` on a terminal: the user's terminal settings come back even when the
//! launcher is killed (the launcher restores them itself otherwise; tests/terminal.rs of
//! the tests crate covers that and the rest of the call's own terminal).

mod common;

use std::io::Read;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{BIN, temp_env};
use nix::sys::termios::tcgetattr;

fn settings(fd: std::os::fd::BorrowedFd<'_>) -> String {
    format!("{:?}", tcgetattr(fd).unwrap())
}

#[test]
fn terminal_settings_come_back_when_the_launcher_is_killed() {
    for backend in ["native", "bwrap"] {
        if backend == "bwrap" && !std::path::Path::new(efr_launcher::backend::bwrap::BWRAP).exists()
        {
            assert!(
                std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none(),
                "bubblewrap is not installed"
            );
            continue;
        }
        let dir = temp_env();
        let proj = dir.path().join("home/proj");
        std::fs::create_dir_all(&proj).unwrap();
        let pty = nix::pty::openpty(None, None).unwrap();
        let before = settings(pty.slave.as_fd());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let master = std::fs::File::from(pty.master);
        let sink = seen.clone();
        let mut r = master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let slave = std::fs::File::from(pty.slave);
        // A new session on the pty, as a terminal starts a shell (`setsid -c`: the pty,
        // stdin, becomes its controlling terminal).
        let mut cli = Command::new("setsid")
            .arg("-c")
            .arg(BIN)
            .args(["run", "--backend", backend, "--project"])
            .arg(&proj)
            .arg("--cwd")
            .arg(&proj)
            .args(["--", "stty raw -echo; echo ready; sleep 60"])
            .env("HOME", dir.path().join("home"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave.try_clone().unwrap())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(30);
        while !String::from_utf8_lossy(&seen.lock().unwrap()).contains("ready") {
            assert!(
                Instant::now() < end,
                "[{backend}] {}",
                String::from_utf8_lossy(&seen.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // `setsid` exec'd the CLI (the test's child is no group leader); its child is the
        // launcher, which has the terminal in raw mode now.
        let pid = cli.id();
        let launcher: i32 = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap()
            .split_whitespace()
            .next()
            .expect("the launcher")
            .parse()
            .unwrap();
        assert_ne!(
            settings(slave.as_fd()),
            before,
            "[{backend}] not in raw mode"
        );
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(launcher),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let end = Instant::now() + Duration::from_secs(30);
        let st = loop {
            if let Some(st) = cli.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < end, "[{backend}] the CLI did not end");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(!st.success(), "[{backend}] {st:?}");
        assert_eq!(
            settings(slave.as_fd()),
            before,
            "[{backend}] the terminal stayed as the launcher left it"
        );
        drop(master);
    }
}
