//! The call's own terminal, driven as tmux would: the test opens a pty pair, runs the
//! launcher in a new session with the slave as its controlling terminal (and as its stdio,
//! or not), and reads and writes the master as the user's terminal. Both backends.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use efr_launcher::api::BackendChoice;
use efr_launcher::plan::Plan;
use efr_sandbox_tests::common::sys::{
    kill, on_controlling_terminal, pty_pair, set_winsize, termios,
};
use efr_sandbox_tests::common::{Fixture, backends, launcher, python};

/// How long any step may take (debug builds on a loaded machine).
const LONG: Duration = Duration::from_secs(30);

/// The user's terminal: the test's pty, whose master output is collected.
struct UserTerminal {
    master: File,
    slave: File,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl UserTerminal {
    fn new() -> UserTerminal {
        let (master, slave) = pty_pair(24, 80).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut r = master.try_clone().unwrap();
        let sink = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once no process holds the slave any more.
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        UserTerminal {
            master,
            slave,
            seen,
        }
    }

    /// Types `b`.
    fn send(&self, b: &[u8]) {
        (&self.master).write_all(b).unwrap();
    }

    fn seen_bytes(&self) -> Vec<u8> {
        self.seen.lock().unwrap().clone()
    }

    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen_bytes()).into_owned()
    }

    /// Waits until the terminal showed `needle` after the last `mark` it showed (the
    /// shell's prompt back after a line's output: keys typed before it go to the call).
    fn wait_for_after(&self, mark: &str, needle: &str) -> bool {
        let end = Instant::now() + LONG;
        while Instant::now() < end {
            let seen = self.seen();
            if seen
                .rfind(mark)
                .is_some_and(|i| seen[i + mark.len()..].contains(needle))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Waits until the terminal showed `needle`.
    fn wait_for(&self, needle: &str) -> bool {
        let end = Instant::now() + LONG;
        while Instant::now() < end {
            if self.seen().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn settings(&self) -> (u32, u32, u32, u32, Vec<u8>) {
        termios(self.slave.as_raw_fd()).unwrap()
    }
}

/// The plan of `line` in the fixture's project, with a terminal type for editors.
fn plan(fx: &Fixture, line: &str, b: BackendChoice) -> Plan {
    let mut r = fx.request(line, b);
    if let Some(env) = r.env.as_mut() {
        env.push(efr_sandbox_tests::common::var("TERM", "xterm"));
    }
    r
}

/// The launcher's command for `plan` (written to the fixture's directory).
fn launch_command(fx: &Fixture, plan: &Plan) -> Command {
    let file = fx.dir.path().join(format!(
        "plan-{}.json",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::write(&file, serde_json::to_vec(plan).unwrap()).unwrap();
    let l = launcher();
    let mut c = Command::new(&l.exe);
    c.args(&l.pre_args).arg("--plan").arg(&file);
    c
}

/// Runs the launcher in a new session on the user's terminal: with the terminal as its
/// stdio (`on_stdio`), or with stdin `/dev/null` and stdout and stderr pipes.
fn launch(fx: &Fixture, term: &UserTerminal, plan: &Plan, on_stdio: bool) -> Child {
    let mut c = launch_command(fx, plan);
    if on_stdio {
        c.stdin(term.slave.try_clone().unwrap())
            .stdout(term.slave.try_clone().unwrap())
            .stderr(term.slave.try_clone().unwrap());
    } else {
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    on_controlling_terminal(&mut c, term.slave.as_raw_fd());
    c.spawn().unwrap()
}

fn wait(child: &mut Child, what: &str) -> ExitStatus {
    let end = Instant::now() + LONG;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: the launcher did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `text` has a line that ends in a `/dev/pts/N` name (what `tty` prints).
fn has_pts_name(text: &str) -> bool {
    text.lines().any(|l| {
        l.trim_end()
            .rsplit_once("/dev/pts/")
            .is_some_and(|(_, n)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    })
}

#[test]
fn tty_names_the_calls_own_pty() {
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        let line = format!(
            "tty; test -t 0 && test -t 1 && test -t 2 && echo all-three-ttys; \
             {py} -c 'import os; print(\"ttyname:\" + os.ttyname(0))'; stty size; \
             echo via-devtty > /dev/tty; echo end",
            py = python()
        );
        let mut c = launch(&fx, &term, &plan(&fx, &line, b), true);
        let st = wait(&mut c, "tty");
        assert!(term.wait_for("end"), "[{b:?}] {}", term.seen());
        let seen = term.seen();
        assert!(st.success(), "[{b:?}] {st:?} {seen}");
        assert!(has_pts_name(&seen), "[{b:?}] tty: {seen}");
        assert!(seen.contains("all-three-ttys"), "[{b:?}] {seen}");
        assert!(seen.contains("ttyname:/dev/pts/"), "[{b:?}] {seen}");
        assert!(seen.contains("24 80"), "[{b:?}] size: {seen}");
        // /dev/tty inside is the call's pty (opened by the init's supervisor for writing).
        assert!(seen.contains("via-devtty"), "[{b:?}] {seen}");
    }
}

#[test]
fn no_terminal_on_stdio_means_no_dev_tty() {
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        let line = format!(
            "tty; echo written-to-devtty > /dev/tty; \
             if timeout 3 cat /dev/tty; then echo READ-DEVTTY; fi; \
             {py} -c 'import os; os.open(\"/dev/tty\", os.O_RDONLY); print(\"OPENED-DEVTTY\")'; \
             echo end",
            py = python()
        );
        let mut c = launch(&fx, &term, &plan(&fx, &line, b), false);
        // The user types meanwhile.
        let end = Instant::now() + Duration::from_secs(4);
        while Instant::now() < end && c.try_wait().unwrap().is_none() {
            term.send(b"typed-by-user\n");
            std::thread::sleep(Duration::from_millis(200));
        }
        let st = wait(&mut c, "no tty");
        let mut out = String::new();
        c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let mut err = String::new();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(st.success(), "[{b:?}] {st:?} {out} {err}");
        assert!(out.contains("not a tty"), "[{b:?}] {out}");
        assert!(out.contains("end"), "[{b:?}] {out}");
        for leak in ["typed-by-user", "READ-DEVTTY", "OPENED-DEVTTY"] {
            assert!(!out.contains(leak), "[{b:?}] {leak}: {out}");
        }
        assert!(
            !term.seen().contains("written-to-devtty"),
            "[{b:?}] the line wrote to the user's terminal: {}",
            term.seen()
        );
    }
}

#[test]
fn escapes_acting_outside_the_screen_are_filtered() {
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        // OSC 52 (clipboard: set and query), the same as a UTF-8 C1 OSC, OSC 50 (font
        // query), title report (CSI 21 t), DECRQSS, kitty graphics (APC); then a title
        // and bold, which pass.
        let line = "printf '\\033]52;c;%s\\007' c2VjcmV0LWNsaXA=; \
                    printf '\\033]52;c;?\\033\\\\'; \
                    printf '\\302\\23552;p;%s\\007' cHJpbWFyeS1jbGlw; \
                    printf '\\033]50;?\\007\\033[21t\\033P$q\"p\\033\\\\'; \
                    printf '\\033_Ga=T,t=f;L2V0Yy9zaGFkb3c=\\033\\\\'; \
                    printf '\\033]0;TITLE-OK\\007\\033[1mBOLD\\033[0m\\n'; echo END";
        let mut c = launch(&fx, &term, &plan(&fx, line, b), true);
        let st = wait(&mut c, "osc");
        assert!(term.wait_for("END"), "[{b:?}] {}", term.seen());
        assert!(st.success(), "[{b:?}] {st:?}");
        let seen = term.seen_bytes();
        let has = |n: &[u8]| seen.windows(n.len()).any(|w| w == n);
        for bad in [
            &b"]52;"[..],
            b"c2VjcmV0LWNsaXA=",
            b"cHJpbWFyeS1jbGlw",
            b"\xc2\x9d",
            b"]50;",
            b"[21t",
            b"$q",
            b"\x1b_G",
            b"L2V0Yy9zaGFkb3c=",
        ] {
            assert!(
                !has(bad),
                "[{b:?}] {:?} reached the terminal: {:?}",
                String::from_utf8_lossy(bad),
                String::from_utf8_lossy(&seen)
            );
        }
        assert!(has(b"\x1b]0;TITLE-OK\x07"), "[{b:?}] {seen:?}");
        assert!(has(b"\x1b[1mBOLD"), "[{b:?}] {seen:?}");
    }
}

#[test]
fn stty_inside_does_not_outlive_the_call() {
    for b in backends() {
        let fx = Fixture::new();
        // The line changes its terminal and ends; dies by a signal; or the launcher gets
        // TERM while the line runs.
        for (case, line) in [
            (
                "ends",
                "stty raw -echo -icanon -isig; echo ready; echo changed",
            ),
            ("killed", "stty raw -echo; echo ready; kill -9 $$"),
            ("term", "stty raw -echo -icanon; echo ready; sleep 60"),
        ] {
            let term = UserTerminal::new();
            let before = term.settings();
            let mut c = launch(&fx, &term, &plan(&fx, line, b), true);
            assert!(term.wait_for("ready"), "[{b:?}] {case}: {}", term.seen());
            if case == "term" {
                std::thread::sleep(Duration::from_millis(200));
                kill(c.id() as i32, libc::SIGTERM).unwrap();
            }
            let st = wait(&mut c, case);
            let after = term.settings();
            assert_eq!(
                before, after,
                "[{b:?}] {case} ({st:?}): the user's terminal settings changed"
            );
        }
    }
}

/// The parent of process `pid` (`/proc/PID/stat`).
fn parent_of(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether a process with the command line `argv` (NUL-terminated words) runs under
/// process `ancestor`.
fn runs_under(ancestor: u32, argv: &[u8]) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            return false;
        };
        if std::fs::read(e.path().join("cmdline")).ok().as_deref() != Some(argv) {
            return false;
        }
        let mut p = pid;
        for _ in 0..16 {
            match parent_of(p) {
                Some(pp) if pp == ancestor => return true,
                Some(pp) if pp > 1 => p = pp,
                _ => return false,
            }
        }
        false
    })
}

#[test]
fn ctrl_c_gives_130() {
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        let mut c = launch(&fx, &term, &plan(&fx, "tty; echo ready; sleep 60", b), true);
        assert!(term.wait_for("ready"), "[{b:?}] {}", term.seen());
        // Once sleep runs: dash (`sh -c`) catches SIGINT, and one that comes while it starts
        // a command (from before its vfork until the child's exec) is held until that
        // command ends, here after 60 s. The same on a plain pty without a sandbox; a ^C
        // typed before the line runs is `ctrl_c_right_after_start_gives_130`.
        let end = Instant::now() + LONG;
        while !runs_under(c.id(), b"sleep\x0060\x00") && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            runs_under(c.id(), b"sleep\x0060\x00"),
            "[{b:?}] sleep never ran"
        );
        term.send(b"\x03");
        let st = wait(&mut c, "ctrl-c");
        assert_eq!(st.code(), Some(130), "[{b:?}] {st:?} {}", term.seen());
        assert!(has_pts_name(&term.seen()), "[{b:?}] {}", term.seen());
    }
}

/// A ^C typed as soon as the launcher relays the keys (the user's terminal raw), before
/// the line has started (or taken the foreground of the call's pty): the line gets it. The
/// line execs sleep: dash holds a SIGINT that comes while it starts a command until that
/// command ends (see `ctrl_c_gives_130`).
#[test]
fn ctrl_c_right_after_start_gives_130() {
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        let mut c = launch(&fx, &term, &plan(&fx, "exec sleep 60", b), true);
        let end = Instant::now() + LONG;
        while term.settings().3 & libc::ICANON != 0 && Instant::now() < end {
            std::hint::spin_loop();
        }
        term.send(b"\x03");
        let st = wait(&mut c, "early ctrl-c");
        assert_eq!(st.code(), Some(130), "[{b:?}] {st:?} {}", term.seen());
    }
}

#[test]
fn read_s_and_getpass_work() {
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        let line = format!(
            "tty; bash -c 'read -s -p \"pw: \" x; echo; echo got:$x'; \
             {py} -c 'import getpass; print(\"gp:\" + getpass.getpass(\"Secret: \"))'",
            py = python()
        );
        let mut c = launch(&fx, &term, &plan(&fx, &line, b), true);
        assert!(term.wait_for("pw: "), "[{b:?}] {}", term.seen());
        term.send(b"hunter2\n");
        assert!(term.wait_for("got:hunter2"), "[{b:?}] {}", term.seen());
        assert!(term.wait_for("Secret: "), "[{b:?}] {}", term.seen());
        term.send(b"swordfish\n");
        let st = wait(&mut c, "getpass");
        assert!(term.wait_for("gp:swordfish"), "[{b:?}] {}", term.seen());
        let seen = term.seen();
        assert!(st.success(), "[{b:?}] {st:?} {seen}");
        // Not echoed: each appears once, in the line's own output.
        assert_eq!(seen.matches("hunter2").count(), 1, "[{b:?}] {seen}");
        assert_eq!(seen.matches("swordfish").count(), 1, "[{b:?}] {seen}");
        assert!(has_pts_name(&seen), "[{b:?}] {seen}");
    }
}

#[test]
fn window_size_changes_reach_the_line() {
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        let line = "tty; bash -c 'trap \"echo got-winch\" WINCH; stty size; echo ready; \
                    while read x; do stty size; done'";
        let mut c = launch(&fx, &term, &plan(&fx, line, b), true);
        assert!(term.wait_for("ready"), "[{b:?}] {}", term.seen());
        assert!(term.seen().contains("24 80"), "[{b:?}] {}", term.seen());
        set_winsize(term.master.as_raw_fd(), 50, 132).unwrap();
        let end = Instant::now() + LONG;
        while !term.seen().contains("50 132") && Instant::now() < end {
            term.send(b"\n");
            std::thread::sleep(Duration::from_millis(100));
        }
        term.send(b"\x04");
        let st = wait(&mut c, "winch");
        let seen = term.seen();
        assert!(seen.contains("50 132"), "[{b:?}] {seen}");
        assert!(seen.contains("got-winch"), "[{b:?}] {seen}");
        assert!(has_pts_name(&seen), "[{b:?}] {seen}");
        assert!(st.success(), "[{b:?}] {st:?} {seen}");
    }
}

/// The editor git starts: vim, else vi.
fn editor() -> Option<&'static str> {
    ["/usr/bin/vim", "/usr/bin/vi"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

#[test]
fn vim_through_git_commit() {
    let Some(ed) = editor() else {
        efr_sandbox_tests::common::skip("no vim or vi installed");
        return;
    };
    for b in backends() {
        let fx = Fixture::new();
        let term = UserTerminal::new();
        let line = format!(
            "tty; echo x > f && git add f && GIT_EDITOR={ed} git -c user.name=t \
             -c user.email=t@t commit -q && git log -1 --format=SUBJ:%s"
        );
        let mut c = launch(&fx, &term, &plan(&fx, &line, b), true);
        assert!(
            term.wait_for("Please enter the commit message"),
            "[{b:?}] {}",
            term.seen()
        );
        std::thread::sleep(Duration::from_millis(300));
        term.send(b"ihello from the editor\x1b");
        std::thread::sleep(Duration::from_millis(300));
        term.send(b":wq\r");
        let st = wait(&mut c, "vim");
        assert!(
            term.wait_for("SUBJ:hello from the editor"),
            "[{b:?}] {}",
            term.seen()
        );
        assert!(st.success(), "[{b:?}] {st:?}");
        assert!(has_pts_name(&term.seen()), "[{b:?}] {}", term.seen());
    }
}

#[test]
fn ctrl_z_stops_the_job_and_fg_continues_it() {
    for b in backends() {
        let fx = Fixture::new();
        // Under a job-control shell: ^Z stops the line and the shell's job, `fg` continues
        // both, the line then ends as it would have.
        let term = UserTerminal::new();
        let p = plan(&fx, "tty; echo ready; sleep 3.0917; echo after-sleep", b);
        let cmd = launch_command(&fx, &p);
        let argv: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| format!("'{}'", a.to_string_lossy()))
            .collect();
        let mut sh = Command::new("bash");
        sh.args(["--norc", "--noprofile", "-i"])
            .env("PS1", "$ ")
            .stdin(term.slave.try_clone().unwrap())
            .stdout(term.slave.try_clone().unwrap())
            .stderr(term.slave.try_clone().unwrap());
        on_controlling_terminal(&mut sh, term.slave.as_raw_fd());
        let mut shell = sh.spawn().unwrap();
        term.send(format!("{}\n", argv.join(" ")).as_bytes());
        assert!(term.wait_for("ready"), "[{b:?}] {}", term.seen());
        // Once sleep runs (^Z while dash is between vfork and exec stops the child only,
        // and its parent waits for the exec: no job stops, with or without a sandbox): its
        // own command line, not the shell's that names it.
        let sleeping = || {
            std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x003.0917\x00")
            })
        };
        let start = std::time::Instant::now();
        while !sleeping() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(sleeping(), "[{b:?}] sleep never ran: {}", term.seen());
        std::thread::sleep(Duration::from_millis(100));
        term.send(b"\x1a");
        assert!(term.wait_for("Stopped"), "[{b:?}] {}", term.seen());
        // Stopped, the line does not go on.
        std::thread::sleep(Duration::from_secs(3));
        assert!(
            !term.seen().contains("after-sleep"),
            "[{b:?}] {}",
            term.seen()
        );
        term.send(b"fg\n");
        assert!(term.wait_for("after-sleep"), "[{b:?}] {}", term.seen());
        // The shell's prompt, once the call has ended: typed before, the keys are the
        // call's (its relay passes them on until the line ends).
        assert!(
            term.wait_for_after("after-sleep", "$ "),
            "[{b:?}] {}",
            term.seen()
        );
        term.send(b"echo status:$?\n");
        assert!(term.wait_for("status:0"), "[{b:?}] {}", term.seen());
        term.send(b"exit\n");
        wait(&mut shell, "shell");
        assert!(has_pts_name(&term.seen()), "[{b:?}] {}", term.seen());

        // Without a job-control shell (an orphaned process group: nobody could continue
        // the job), ^Z does not stop the call.
        let term = UserTerminal::new();
        let mut c = launch(
            &fx,
            &term,
            &plan(&fx, "tty; echo ready; sleep 2; echo after", b),
            true,
        );
        assert!(term.wait_for("ready"), "[{b:?}] {}", term.seen());
        std::thread::sleep(Duration::from_millis(500));
        term.send(b"\x1a");
        let st = wait(&mut c, "orphaned ^Z");
        assert!(term.wait_for("after"), "[{b:?}] {}", term.seen());
        assert!(st.success(), "[{b:?}] {st:?}");
    }
}

#[test]
fn closing_the_users_terminal_hangs_up_the_call() {
    for b in backends() {
        let fx = Fixture::new();
        let (mut master, slave) = pty_pair(24, 80).unwrap();
        let mut c = launch_command(&fx, &plan(&fx, "tty; echo ready; sleep 60", b));
        c.stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave.try_clone().unwrap());
        on_controlling_terminal(&mut c, slave.as_raw_fd());
        let mut child = c.spawn().unwrap();
        drop(slave);
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("ready") {
            let n = master.read(&mut buf).unwrap();
            assert!(n > 0, "[{b:?}] {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
        assert!(
            has_pts_name(&String::from_utf8_lossy(&seen)),
            "[{b:?}] {}",
            String::from_utf8_lossy(&seen)
        );
        // The terminal window closes: the line gets SIGHUP, as it would outside.
        drop(master);
        let st = wait(&mut child, "hang-up");
        assert_eq!(st.code(), Some(128 + libc::SIGHUP), "[{b:?}] {st:?}");
    }
}

/// With the call's stdout a pipe (`efr-sandbox run ... | tee log`), whatever else writes to
/// the terminal meanwhile (tee) keeps its newlines: the terminal's input is raw, its output
/// processing stays. With stdout the terminal, both are raw (the call's pty does it).
#[test]
fn output_processing_stays_when_stdout_is_not_the_terminal() {
    for b in backends() {
        let fx = Fixture::new();
        for stdout_is_tty in [false, true] {
            let term = UserTerminal::new();
            let before = term.settings();
            assert_ne!(before.1 & libc::OPOST, 0);
            let mut c = launch_command(&fx, &plan(&fx, "echo ready >&2; sleep 2", b));
            c.stdin(term.slave.try_clone().unwrap())
                .stderr(term.slave.try_clone().unwrap());
            if stdout_is_tty {
                c.stdout(term.slave.try_clone().unwrap());
            } else {
                c.stdout(Stdio::piped());
            }
            on_controlling_terminal(&mut c, term.slave.as_raw_fd());
            let mut child = c.spawn().unwrap();
            assert!(term.wait_for("ready"), "[{b:?}] {}", term.seen());
            let during = term.settings();
            assert_eq!(during.3 & libc::ICANON, 0, "[{b:?}] input not raw");
            assert_eq!(
                during.1 & libc::OPOST != 0,
                !stdout_is_tty,
                "[{b:?}] stdout a terminal: {stdout_is_tty}, oflag {:#o}",
                during.1
            );
            let st = wait(&mut child, "oflag");
            assert!(st.success(), "[{b:?}] {st:?}");
            assert_eq!(term.settings(), before, "[{b:?}]");
        }
    }
}
