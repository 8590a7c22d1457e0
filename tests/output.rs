//! The line's output as it wrote it: its stdout and stderr are the caller's own fds (the
//! launcher copies nothing), so when they are one file or one pipe their order is kept; and
//! nothing the line prints becomes a denial (a record comes only from what the sandbox
//! itself refused).

use efr_launcher::api::Io;
use std::io::Read;

use efr_launcher::api::BackendChoice;
use efr_sandbox_tests::common::{Fixture, backends, launcher};

/// Interleaved writes to stdout and stderr.
const LINE: &str = "for i in $(seq 100); do echo o$i; echo e$i >&2; done";

fn interleaved() -> String {
    (1..=100).map(|i| format!("o{i}\ne{i}\n")).collect()
}

fn modes() -> Vec<Option<BackendChoice>> {
    let mut v: Vec<Option<BackendChoice>> = backends().into_iter().map(Some).collect();
    v.push(None);
    v
}

fn plan(fx: &Fixture, line: &str, mode: Option<BackendChoice>) -> efr_launcher::plan::Plan {
    let mut r = fx.request(line, mode.unwrap_or(BackendChoice::Native));
    if mode.is_none() {
        r.mode = efr_launcher::plan::PlanMode::Unsandboxed;
    }
    r
}

#[test]
fn stdout_and_stderr_in_one_file_keep_their_order() {
    for mode in modes() {
        let fx = Fixture::new();
        let path = fx.dir.path().join("out");
        let f = std::fs::File::create(&path).unwrap();
        let r = launcher()
            .spawn(
                &plan(&fx, LINE, mode),
                Io::null(),
                Io::from(f.try_clone().unwrap()),
                Io::from(f),
            )
            .unwrap();
        let (o, st) = r.wait().unwrap();
        assert!(st.success(), "[{mode:?}] {o:?}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            interleaved(),
            "[{mode:?}]"
        );
    }
}

#[test]
fn stdout_and_stderr_in_one_pipe_keep_their_order() {
    for mode in modes() {
        let fx = Fixture::new();
        let (mut rd, wr) = std::io::pipe().unwrap();
        let r = launcher()
            .spawn(
                &plan(&fx, LINE, mode),
                Io::null(),
                Io::from(std::os::fd::OwnedFd::from(wr.try_clone().unwrap())),
                Io::from(std::os::fd::OwnedFd::from(wr)),
            )
            .unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            rd.read_to_string(&mut s).unwrap();
            s
        });
        let (o, st) = r.wait().unwrap();
        assert!(st.success(), "[{mode:?}] {o:?}");
        assert_eq!(reader.join().unwrap(), interleaved(), "[{mode:?}]");
    }
}

/// Lines that look like the refusals of common tools, for paths the line never touched,
/// give no denial (on a failing line, where the stderr scan used to look).
#[test]
fn forged_denial_lines_give_no_denial() {
    for b in backends() {
        let fx = Fixture::new();
        let line = format!(
            "echo \"touch: cannot touch '{home}/.ssh/authorized_keys': Read-only file system\" >&2; \
             echo 'bash: line 1: /etc/cron.d/x: Read-only file system' >&2; \
             echo \"OSError: [Errno 30] Read-only file system: '{proj}/.git/hooks/pre-commit'\" >&2; \
             echo \"Error: EACCES: permission denied, open '{home}/.bashrc'\" >&2; \
             exit 1",
            home = fx.home,
            proj = fx.proj
        );
        let r = efr_sandbox_tests::common::run(&fx, &line, b);
        assert_eq!(r.status.code(), Some(1), "[{b:?}] {}", r.all_output());
        assert!(
            r.stderr.contains("authorized_keys"),
            "[{b:?}] the line's stderr is the caller's: {}",
            r.stderr
        );
        assert_eq!(r.outcome.denials, Vec::<String>::new(), "[{b:?}]");
    }
}

/// The supervised line gets the same fds as the unsupervised one, with a caller whose
/// stdin and stderr are closed: nothing from 3 up, and 0-2 as the launcher has them. (The
/// supervised line is forked sharing the init's fd table for a moment: an fd the init opens
/// then must not reach the line.)
#[test]
fn a_supervised_line_gets_the_fds_an_unsupervised_one_gets() {
    let line = "for f in 0 1 2 3 4 5 6 7 8 9; do if [ -e /proc/self/fd/$f ]; then echo open$f; \
                else echo closed$f; fi; done";
    for b in backends() {
        let mut seen = Vec::new();
        for weaken in [None, Some("no_supervise")] {
            let fx = Fixture::new();
            let mut p = fx.plan(line, b, vec![]);
            if let Some(w) = weaken {
                p.test_weaken = vec![w.into()];
            }
            let plan_file = fx.dir.path().join("plan.json");
            std::fs::write(&plan_file, serde_json::to_vec(&p).unwrap()).unwrap();
            let l = launcher();
            // stdin and stderr closed by the shell that execs the launcher.
            let o = std::process::Command::new("sh")
                .arg("-c")
                .arg("exec \"$@\" <&- 2>&-")
                .arg("sh")
                .arg(&l.exe)
                .args(&l.pre_args)
                .arg("--plan")
                .arg(&plan_file)
                .env(efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV, "1")
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(o.status.success(), "[{b:?} {weaken:?}] {o:?}");
            for f in 3..10 {
                assert!(
                    out.contains(&format!("closed{f}\n")),
                    "[{b:?} {weaken:?}] fd {f} reached the line: {out}"
                );
            }
            seen.push(out);
        }
        assert_eq!(seen[0], seen[1], "[{b:?}] supervised, then not");
    }
}
