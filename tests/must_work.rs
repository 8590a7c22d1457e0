//! The must-work suite: real work a contained call must be able to do, on each backend.

use std::io::Write;

use efr_launcher::api::BackendChoice;
use efr_sandbox_tests::common::{Fixture, backends, python, run, run_plan};

fn ok(fx: &Fixture, line: &str, b: BackendChoice) -> String {
    let r = run(fx, line, b);
    assert!(
        r.outcome.setup_error.is_none(),
        "[{b:?}] {line}: setup error {:?}",
        r.outcome.setup_error
    );
    assert!(
        r.status.success(),
        "[{b:?}] {line}: {:?}\nstdout: {}\nstderr: {}",
        r.status,
        r.stdout,
        r.stderr
    );
    r.stdout
}

fn has(prog: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn compilers_git_python_make() {
    for b in backends() {
        let fx = Fixture::new();
        let p = &fx.proj;
        if has("cc") {
            let out = ok(
                &fx,
                "printf '#include <stdio.h>\\nint main(){puts(\"hi-cc\");return 0;}\\n' > h.c && cc -o h h.c && ./h",
                b,
            );
            assert!(out.contains("hi-cc"), "{out}");
        } else {
            efr_sandbox_tests::common::skip("cc is not installed for this user");
        }
        let out = ok(
            &fx,
            &format!(
                "{} -c 'open(\"{p}/py.txt\",\"w\").write(\"py\")' && cat {p}/py.txt",
                python()
            ),
            b,
        );
        assert!(out.contains("py"));
        let out = ok(
            &fx,
            "git add README && git commit -qm init && git log --oneline | wc -l && git status --short && git worktree add -q wt && ls wt/README",
            b,
        );
        assert!(out.contains("wt/README"), "{out}");
        let out = ok(
            &fx,
            "printf 'all:\\n\\techo made-it\\n' > Makefile && make",
            b,
        );
        assert!(out.contains("made-it"), "{out}");
        if has("cargo") {
            let out = ok(&fx, "cargo --version", b);
            assert!(out.contains("cargo"), "{out}");
        } else {
            efr_sandbox_tests::common::skip("cargo is not installed for this user");
        }
        if has("node") {
            let out = ok(
                &fx,
                "node -e 'require(\"fs\").writeFileSync(\"n.txt\",\"node-ok\")' && cat n.txt",
                b,
            );
            assert!(out.contains("node-ok"), "{out}");
        } else {
            efr_sandbox_tests::common::skip("node is not installed for this user");
        }
        let out = ok(
            &fx,
            &format!(
                "{} -m venv --without-pip venv && ./venv/bin/python -c 'print(\"venv-ok\")'",
                python()
            ),
            b,
        );
        assert!(out.contains("venv-ok"), "{out}");
    }
}

#[test]
fn output_exit_codes_signals() {
    for b in backends() {
        let fx = Fixture::new();
        let r = run(&fx, "head -c 52428800 /dev/zero", b);
        assert_eq!(r.stdout_len, 52428800, "[{b:?}] 50 MiB output");
        assert!(r.status.success());
        let r = run(&fx, "exit 7", b);
        assert_eq!(r.status.code(), Some(7));
        assert_eq!(r.outcome.code, Some(7));
        let r = run(&fx, "kill -TERM $$", b);
        assert_eq!(r.status.code(), Some(128 + 15), "[{b:?}] {r:?}");
        assert_eq!(r.outcome.signal, Some(15));
    }
}

#[test]
fn prompt_on_a_pty() {
    for b in backends() {
        let fx = Fixture::new();
        let (mut m, s) = efr_sandbox_tests::common::sys::openpty().unwrap();
        m.write_all(b"answer42\n").unwrap();
        let plan = fx.plan("test -t 0 && read x && echo got:$x", b, vec![]);
        let r = run_plan(&plan, Some(efr_launcher::api::Io::from(s)));
        assert!(r.stdout.contains("got:answer42"), "[{b:?}] {r:?}");
    }
}

#[test]
fn tmp_home_sockets_fifos() {
    for b in backends() {
        let fx = Fixture::new();
        ok(&fx, "echo kept > /tmp/keep", b);
        let out = ok(&fx, "cat /tmp/keep", b);
        assert!(out.contains("kept"));
        let out = ok(&fx, "ls ~ && cat ~/.gitconfig", b);
        assert!(out.contains("proj") && out.contains("Efr Test"), "{out}");
        let code = "import socket,os\np=\"/tmp/own.sock\"\ns=socket.socket(socket.AF_UNIX);s.bind(p);s.listen(1)\nc=socket.socket(socket.AF_UNIX);c.connect(p);a,_=s.accept();c.send(b\"sock-ok\");print(a.recv(10).decode())";
        let out = ok(&fx, &format!("{} -c '{code}'", python()), b);
        assert!(out.contains("sock-ok"), "{out}");
        let out = ok(
            &fx,
            "mkfifo /tmp/ff && (echo fifo-ok > /tmp/ff &) && cat /tmp/ff",
            b,
        );
        assert!(out.contains("fifo-ok"), "{out}");
        let out = ok(
            &fx,
            "echo s > $SCRATCH/s && cat $SCRATCH/s && echo p > proj-file && cat proj-file",
            b,
        );
        assert!(out.contains("s\np"), "{out}");
    }
}

/// Git in a call sees nothing of the protection: no placeholder of a missing protected
/// path exists, so `git status` is clean, `git add -A` takes none, and the repository's
/// `info/exclude` is the user's own.
#[test]
fn protection_is_invisible_to_git() {
    for b in backends() {
        let fx = Fixture::new();
        let exclude = format!("{}/.git/info/exclude", fx.proj);
        std::fs::write(&exclude, "target/\n").unwrap();
        let r = run(
            &fx,
            "git add -A -- . :!vendor && git -c user.email=t@t -c user.name=t commit -qm c && \
             git status --porcelain -- . :!vendor && echo status-done && git ls-files && \
             cat .git/info/exclude && ls -A",
            b,
        );
        assert!(r.status.success(), "[{b:?}] {r:?}");
        let (status, files) = r.stdout.split_once("status-done\n").unwrap();
        assert_eq!(status, "", "[{b:?}] untracked in the call: {status}");
        for ph in [".envrc", ".vscode", ".idea", ".efr", ".gitmodules"] {
            assert!(
                !files.lines().any(|l| l == ph),
                "[{b:?}] {ph} committed or seen: {files}"
            );
        }
        assert!(files.contains("README"), "[{b:?}] {files}");
        assert!(
            files.contains("target/"),
            "[{b:?}] the user's exclude: {files}"
        );
        assert!(!files.contains("efr sandbox"), "[{b:?}] {files}");
        assert_eq!(std::fs::read_to_string(&exclude).unwrap(), "target/\n");
        // The host's git, after the call, sees the commit and nothing else.
        let st = std::process::Command::new("git")
            .args(["status", "--porcelain", "--", ".", ":!vendor"])
            .current_dir(&fx.proj)
            .env("HOME", &fx.home)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&st.stdout),
            "",
            "[{b:?}] host git status"
        );
    }
}

#[test]
fn denials_reported_and_setup_errors() {
    for b in backends() {
        let fx = Fixture::new();
        let r = run(
            &fx,
            "touch /etc/efr-denied; echo x > .git/hooks/pre-push",
            b,
        );
        assert!(!r.status.success());
        assert!(
            r.outcome.denials.iter().any(|d| d == "/etc/efr-denied"),
            "[{b:?}] {:?} {}",
            r.outcome.denials,
            r.stderr
        );
        assert!(
            r.outcome
                .denials
                .iter()
                .any(|d| d.ends_with(".git/hooks/pre-push")),
            "[{b:?}] {:?}",
            r.outcome.denials
        );
        // A missing protected directory may be made (empty, it runs nothing); a file in it
        // is a refused write the approval flow hears of.
        let r = run(
            &fx,
            "mkdir -p .vscode; echo '{}' > .vscode/tasks.json; echo x > .idea",
            b,
        );
        assert!(!r.status.success());
        for want in ["/.vscode/tasks.json", "/.idea"] {
            assert!(
                r.outcome
                    .denials
                    .iter()
                    .any(|d| d == &format!("{}{want}", fx.proj)),
                "[{b:?}] {want}: {:?} {}",
                r.outcome.denials,
                r.stderr
            );
        }
        for gone in [".vscode/tasks.json", ".idea", ".envrc"] {
            assert!(
                !std::path::Path::new(&format!("{}/{gone}", fx.proj)).exists(),
                "[{b:?}] {gone} made"
            );
        }
        // Missing project root.
        let mut plan = fx.plan("echo ran", b, vec![]);
        plan.projects.push(format!("{}/missing", fx.proj));
        let r = run_plan(&plan, None);
        assert!(
            r.outcome.setup_error.is_some() && !r.stdout.contains("ran"),
            "{r:?}"
        );
        assert_eq!(r.status.code(), Some(125));
        // Bad grant path.
        let plan = fx.plan(
            "echo ran",
            b,
            vec![efr_sandbox_wire::Grant::Write {
                path: "/nonexistent/efr".into(),
            }],
        );
        let r = run_plan(&plan, None);
        assert!(
            r.outcome.setup_error.is_some() && !r.stdout.contains("ran"),
            "{r:?}"
        );
        // Write grant works.
        let plan = fx.plan(
            &format!("echo granted > {}/g && cat {}/g", fx.other, fx.other),
            b,
            vec![efr_sandbox_wire::Grant::Write {
                path: fx.other.clone(),
            }],
        );
        let r = run_plan(&plan, None);
        assert!(r.stdout.contains("granted"), "{r:?}");
        // Unmask grant lifts one mask.
        let plan = fx.plan(
            &format!("cat {}/.aws/credentials", fx.home),
            b,
            vec![efr_sandbox_wire::Grant::Unmask {
                path: format!("{}/.aws", fx.home),
            }],
        );
        let r = run_plan(&plan, None);
        assert!(r.stdout.contains("TOPSECRET"), "{r:?}");
        // net_view: AF_INET refused, AF_UNIX fine.
        let code = "import socket\ntry:\n  socket.socket(socket.AF_INET);print(\"inet-open\")\nexcept OSError as e: print(\"inet-%d\"%e.errno)\nsocket.socket(socket.AF_UNIX);print(\"unix-ok\")";
        let plan = fx.plan(
            &format!("{} -c '{code}'", python()),
            b,
            vec![efr_sandbox_wire::Grant::NetView],
        );
        let r = run_plan(&plan, None);
        assert!(
            r.stdout.contains("inet-1") && r.stdout.contains("unix-ok"),
            "[{b:?}] {r:?}"
        );
    }
}

/// A plan with an unknown grant kind never runs.
#[test]
fn unknown_grant_is_setup_error() {
    let dir = tempfile::tempdir().unwrap();
    let plan = format!(
        r#"{{"version":1,"mode":"contained","line":"touch {0}/ran","cwd":"/","grants":[{{"kind":"teleport"}}]}}"#,
        dir.path().display()
    );
    let pf = dir.path().join("plan.json");
    std::fs::write(&pf, plan).unwrap();
    let st = dir.path().join("status");
    let exe = efr_sandbox_tests::common::launcher().exe;
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "{} --plan {} --status-fd 3 3>{}",
                exe.display(),
                pf.display(),
                st.display()
            ),
        ])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(125));
    let s = std::fs::read_to_string(&st).unwrap();
    assert!(s.contains("setup_error") && s.contains("unknown"), "{s}");
    assert!(!dir.path().join("ran").exists());
}

/// Unsandboxed: the tree is owned, a daemon is ended and the cgroup kind reported.
#[test]
fn unsandboxed_tree_is_ended() {
    let fx = Fixture::new();
    let tag = format!("9999.{}", std::process::id());
    let mut plan = fx.plan(
        &format!("(setsid nohup sleep {tag} >/dev/null 2>&1 &); echo un; exit 4"),
        BackendChoice::Native,
        vec![],
    );
    plan.mode = efr_launcher::plan::PlanMode::Unsandboxed;
    let r = run_plan(&plan, None);
    assert_eq!(r.status.code(), Some(4));
    assert!(r.stdout.contains("un"));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        efr_sandbox_tests::common::procs_with(&format!("sleep {tag}")).is_empty(),
        "daemon survived"
    );
    match &r.outcome.started {
        Some(efr_launcher::status::StatusLine::Started { cgroup, .. }) => assert!(cgroup.is_some()),
        other => panic!("{other:?}"),
    }
}

/// A write the view or Landlock refuses is a denial even when the line says nothing about
/// it (stderr to /dev/null, a program that swallows the error): the supervisor made the call
/// and saw it fail. A refusal inside the project by the file's own mode is not one.
#[test]
fn silent_refusals_are_denials() {
    for b in backends() {
        let fx = Fixture::new();
        std::fs::write(format!("{}/ro.txt", fx.proj), "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            format!("{}/ro.txt", fx.proj),
            std::fs::Permissions::from_mode(0o444),
        )
        .unwrap();
        let r = run(
            &fx,
            r#"python3 -c '
import os
for f in (lambda: open("/etc/efr-silent", "w"), lambda: os.mkdir("/usr/efr-silent-dir"),
          lambda: os.rename("/etc/hostname", "/etc/efr-moved"), lambda: open("ro.txt", "w")):
    try: f()
    except OSError: pass
' 2>/dev/null; true"#,
            b,
        );
        for want in ["/etc/efr-silent", "/usr/efr-silent-dir", "/etc/efr-moved"] {
            assert!(
                r.outcome.denials.iter().any(|d| d == want),
                "[{b:?}] {want}: {:?}",
                r.outcome.denials
            );
        }
        // Root writes a 0444 file anyway (CAP_DAC_OVERRIDE in its user namespace is not
        // the init's: the init has none), so only check that it is no denial.
        assert!(
            !r.outcome.denials.iter().any(|d| d.ends_with("/ro.txt")),
            "[{b:?}] {:?}",
            r.outcome.denials
        );
    }
}
