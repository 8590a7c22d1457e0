//! Protected paths while the world moves: calls in parallel on one project, the host
//! replacing, removing and re-creating protected paths while a call writes them in a loop,
//! git's own rules (commondir, hooks of submodules not yet there, nested repositories), hard
//! links and links, and what the host sees afterwards (the user's next `git status`).
//!
//! Each attempt's payload is a marker: the tests look for it where the user's next command
//! would read it, and for its effect when that command runs.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use efr_launcher::api::BackendChoice;
use efr_sandbox_tests::common::{self, Fixture, Ran};

const PAYLOAD: &str = "EFR-PAYLOAD";

fn git(dir: &str, home: &str, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

fn status(fx: &Fixture) -> String {
    let o = git(&fx.proj, &fx.home, &["status", "--porcelain", "--ignored"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn contains(p: &str, needle: &str) -> bool {
    std::fs::read(p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
}

/// Every file below `dir` (links not followed) that holds the payload.
fn payload_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() && contains(&p.to_string_lossy(), PAYLOAD) {
                out.push(p.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn ran_ok(r: &Ran) {
    assert!(
        r.outcome.setup_error.is_none() && r.outcome.started.is_some(),
        "the call did not run: {:?}\n{}",
        r.outcome,
        r.all_output()
    );
}

/// The protected files a call tries to plant, with where the user's tools would read them.
const PLANTS: &str = r##"
w() { printf '%s\n' "$2" > "$1" 2>/dev/null; printf '%s\n' "$2" >> "$1" 2>/dev/null; }
w .envrc "echo EFR-PAYLOAD > /tmp/x"
mkdir -p .vscode 2>/dev/null; w .vscode/tasks.json '{"EFR-PAYLOAD":1}'
w .git/hooks/pre-commit "#!/bin/sh
echo EFR-PAYLOAD"
chmod +x .git/hooks/pre-commit 2>/dev/null
w .git/config "[core]
	fsmonitor = echo EFR-PAYLOAD"
w vendor/lib/.envrc "EFR-PAYLOAD"
w vendor/lib/.git/hooks/post-checkout "EFR-PAYLOAD"
"##;

#[test]
fn twelve_calls_at_once_on_one_project() {
    let fx = Arc::new(Fixture::new());
    let before = status(&fx);
    let backends = common::backends();
    if backends.is_empty() {
        return;
    }
    let line = format!(
        "end=$(($(date +%s)+2)); while [ $(date +%s) -lt $end ]; do {PLANTS} done; echo finished"
    );
    let mut threads = Vec::new();
    for i in 0..12 {
        let fx = fx.clone();
        let b = backends[i % backends.len()];
        let line = line.clone();
        threads.push(std::thread::spawn(move || {
            // Staggered: calls end while others still run.
            std::thread::sleep(Duration::from_millis(150 * i as u64));
            common::run(&fx, &line, b)
        }));
    }
    for t in threads {
        let r = t.join().unwrap();
        ran_ok(&r);
        assert!(r.stdout.contains("finished"), "{}", r.all_output());
        assert_eq!(r.outcome.code, Some(0), "{}", r.all_output());
    }
    let planted = payload_files(Path::new(&fx.proj));
    assert!(planted.is_empty(), "planted: {planted:?}");
    for p in [".envrc", "vendor/lib/.envrc", ".vscode/tasks.json"] {
        assert!(
            std::fs::symlink_metadata(format!("{}/{p}", fx.proj)).is_err(),
            "{p} left behind"
        );
    }
    // The calls' own `mkdir .vscode` may stay (empty: git does not list it).
    assert_eq!(status(&fx), before, "git status changed");
}

#[test]
fn the_host_replacing_protected_paths_opens_nothing() {
    for b in common::backends() {
        let fx = Fixture::new();
        let proj = fx.proj.clone();
        let home = fx.home.clone();
        std::fs::write(format!("{proj}/.envrc"), "export X=1\n").unwrap();
        std::fs::create_dir_all(format!("{proj}/.vscode")).unwrap();
        let marker = format!("{proj}/started");
        let line = format!(
            "touch started; end=$(($(date +%s)+3)); while [ $(date +%s) -lt $end ]; do {PLANTS} done; echo finished"
        );
        let fx2 = Arc::new(fx);
        let runner = {
            let fx = fx2.clone();
            std::thread::spawn(move || common::run(&fx, &line, b))
        };
        let t0 = Instant::now();
        while !Path::new(&marker).exists() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(Path::new(&marker).exists(), "the call never started");
        // What a user does meanwhile: git rewrites its config by lock file and rename, an
        // editor replaces .envrc, `git clean` and a checkout remove and re-create paths.
        let mut i = 0;
        while t0.elapsed() < Duration::from_millis(2500) {
            i += 1;
            let o = git(&proj, &home, &["config", "user.name", &format!("n{i}")]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let tmp = format!("{proj}/.envrc.new");
            std::fs::write(&tmp, format!("export X={i}\n")).unwrap();
            std::fs::rename(&tmp, format!("{proj}/.envrc")).unwrap();
            let _ = std::fs::remove_dir_all(format!("{proj}/.vscode"));
            let _ = std::fs::create_dir(format!("{proj}/.vscode"));
            let _ = std::fs::remove_file(format!("{proj}/.git/hooks/pre-commit"));
        }
        let r = runner.join().unwrap();
        ran_ok(&r);
        assert!(r.stdout.contains("finished"), "{}", r.all_output());
        let planted = payload_files(Path::new(&proj));
        assert!(planted.is_empty(), "{b:?}: planted {planted:?}");
        // The user's next commands: a prompt's git status, a commit.
        let st = git(&proj, &home, &["status"]);
        assert!(!String::from_utf8_lossy(&st.stdout).contains(PAYLOAD));
        assert!(!String::from_utf8_lossy(&st.stderr).contains(PAYLOAD));
        assert!(
            r.outcome
                .denials
                .iter()
                .any(|d| d.ends_with("/.git/config") || d.ends_with("/.git/config.lock")),
            "{b:?}: refusals reported {:?}",
            r.outcome.denials
        );
    }
}

/// Runs `line` on each backend in a fresh fixture (after `setup` on the host); then
/// `after` checks the host.
fn each(setup: impl Fn(&Fixture), line: &str, after: impl Fn(&Fixture, &Ran, BackendChoice)) {
    for b in common::backends() {
        let fx = Fixture::new();
        setup(&fx);
        let r = common::run(&fx, line, b);
        ran_ok(&r);
        after(&fx, &r, b);
    }
}

#[test]
fn links_renames_and_fds_reach_no_protected_path() {
    let line = format!(
        r#"
        ln -s .envrc l1; echo {PAYLOAD} > l1
        ln -s .git/hooks hk; echo {PAYLOAD} > hk/post-merge
        ln -s x .envrc; echo {PAYLOAD} > x
        mkdir d; echo {PAYLOAD} > d/tasks.json; mv d .vscode
        echo {PAYLOAD} > f; mv f .git/hooks/pre-push; ln f2 .git/hooks/pre-rebase
        mv .git .git-moved; mkdir -p .git-new/hooks; mv .git-new .git
        exec 3< .git/config; echo '[alias] x = !echo {PAYLOAD}' >> /proc/self/fd/3
        echo '[alias] y = !echo {PAYLOAD}' >> /dev/fd/3
        truncate -s 0 .git/config; true > .git/config.lock
        ln .git/config cfg; echo {PAYLOAD} >> cfg
        chmod +x .git/hooks/post-checkout
        python3 -c "import os; os.fchmod(os.open('.git/hooks/post-checkout', os.O_RDONLY), 0o755)"
        printf 'gitdir: /elsewhere\n' > sub.git; mv sub.git .git
        printf '%s\n' ' ../../x' > .git/commondir
        mkdir -p .git/modules/newsub/hooks; echo {PAYLOAD} > .git/modules/newsub/hooks/post-checkout
        python3 -c "import os; os.rename('f', '.envrc')" 2>/dev/null
        echo done
    "#
    );
    each(
        |fx| {
            // A hook that is there but not executable: git skips it until it is.
            std::fs::write(
                format!("{}/.git/hooks/post-checkout", fx.proj),
                "#!/bin/sh\n",
            )
            .unwrap();
        },
        &line,
        |fx, r, b| {
            assert!(r.stdout.contains("done"), "{b:?}: {}", r.all_output());
            let planted = payload_files(Path::new(&fx.proj));
            // The call's own files, where the refused moves left them: fine there.
            let own = ["/f", "/x", "/cfg", "/d/tasks.json"];
            let planted: Vec<_> = planted
                .into_iter()
                .filter(|p| !own.iter().any(|o| p.ends_with(o)))
                .collect();
            assert!(planted.is_empty(), "{b:?}: planted {planted:?}");
            let p = &fx.proj;
            assert!(
                Path::new(&format!("{p}/.git/HEAD")).is_file(),
                "{b:?}: .git moved"
            );
            assert!(!Path::new(&format!("{p}/.git-moved")).exists());
            assert!(!Path::new(&format!("{p}/.git/commondir")).exists());
            assert!(
                !Path::new(&format!("{p}/.envrc")).exists(),
                "{b:?}: .envrc made"
            );
            assert!(std::fs::symlink_metadata(format!("{p}/.vscode")).is_err());
            assert!(!Path::new(&format!("{p}/.git/modules/newsub/hooks/post-checkout")).exists());
            let cfg = std::fs::read_to_string(format!("{p}/.git/config")).unwrap();
            assert!(cfg.contains("[core]"), "{b:?}: config truncated: {cfg:?}");
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(format!("{p}/.git/hooks/post-checkout"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(
                mode & 0o111,
                0,
                "{b:?}: the hook made executable ({mode:o})"
            );
            let st = git(p, &fx.home, &["status", "--porcelain"]);
            assert!(
                st.status.success(),
                "{}",
                String::from_utf8_lossy(&st.stderr)
            );
        },
    );
}

#[test]
fn a_hard_link_made_before_is_not_written_through() {
    each(
        |fx| {
            std::fs::hard_link(
                format!("{}/.git/config", fx.proj),
                format!("{}/config-link", fx.proj),
            )
            .unwrap();
            // A file below a protected directory, and a protected name at the root.
            std::fs::create_dir_all(format!("{}/.git/hooks", fx.proj)).unwrap();
            std::fs::write(format!("{}/.git/hooks/post-merge", fx.proj), "#!/bin/sh\n").unwrap();
            std::fs::hard_link(
                format!("{}/.git/hooks/post-merge", fx.proj),
                format!("{}/hook-link", fx.proj),
            )
            .unwrap();
            std::fs::write(format!("{}/.envrc", fx.proj), "").unwrap();
            std::fs::hard_link(
                format!("{}/.envrc", fx.proj),
                format!("{}/envrc-link", fx.proj),
            )
            .unwrap();
        },
        &format!(
            "echo '[core] fsmonitor = echo {PAYLOAD}' >> config-link; echo rc=$?; \
             echo {PAYLOAD} >> hook-link; echo {PAYLOAD} >> envrc-link"
        ),
        |fx, r, b| {
            assert!(
                !contains(&format!("{}/.git/config", fx.proj), PAYLOAD),
                "{b:?}"
            );
            assert!(
                r.stdout.contains("rc=1") || r.stdout.contains("rc=2"),
                "{}",
                r.all_output()
            );
            assert!(
                r.outcome.denials.iter().any(|d| d.ends_with("config-link")),
                "{b:?}: {:?}",
                r.outcome.denials
            );
            for f in [".git/hooks/post-merge", ".envrc"] {
                assert!(
                    !contains(&format!("{}/{f}", fx.proj), PAYLOAD),
                    "{b:?}: {f}"
                );
            }
            // Reported at launch, whether or not the call wrote them, and in the summary.
            let mut want: Vec<String> = [".git/config", ".git/hooks/post-merge", ".envrc"]
                .iter()
                .map(|f| format!("{}/{f}", fx.proj))
                .collect();
            want.sort();
            let mut got = r.outcome.linked_protected.clone();
            got.sort();
            assert_eq!(got, want, "{b:?}");
            assert_eq!(r.outcome.summary().linked_protected.len(), 3, "{b:?}");
        },
    );
}

#[test]
fn nested_repositories_deep_and_under_build_output() {
    let deep = "a/b/c/d/e/f/g/h";
    each(
        |fx| {
            for d in [deep, "dist/pkg"] {
                let p = format!("{}/{d}", fx.proj);
                std::fs::create_dir_all(&p).unwrap();
                assert!(git(&p, &fx.home, &["init", "-q"]).status.success());
            }
        },
        &format!(
            "for d in {deep} dist/pkg; do echo {PAYLOAD} > $d/.envrc; mkdir -p $d/.vscode; \
             echo {PAYLOAD} > $d/.vscode/tasks.json; echo {PAYLOAD} > $d/.git/hooks/pre-commit; \
             echo '[core] pager = echo {PAYLOAD}' >> $d/.git/config; done; \
             git init -q fresh && echo {PAYLOAD} > fresh/.git/hooks/post-commit; echo done"
        ),
        |fx, r, b| {
            assert!(r.stdout.contains("done"), "{}", r.all_output());
            let planted = payload_files(Path::new(&fx.proj));
            assert!(planted.is_empty(), "{b:?}: planted {planted:?}");
            // The repository the call made itself works for git (its config was written).
            let o = git(&format!("{}/fresh", fx.proj), &fx.home, &["status"]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        },
    );
}

#[test]
fn a_new_repository_in_a_plain_project_leaves_git_status_clean() {
    for b in common::backends() {
        let fx = Fixture::new();
        let plain = format!("{}/plain", fx.other);
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(format!("{plain}/main.c"), "int main(){return 0;}\n").unwrap();
        let mut req = fx.request(
            "git init -q && git add -A && git -c user.name=a -c user.email=a@b commit -qm first && ls -A",
            b,
        );
        req.projects = vec![plain.clone()];
        req.cwd = plain.clone();
        let plan = req.clone();
        let r = common::run_plan(&plan, None);
        ran_ok(&r);
        assert_eq!(r.outcome.code, Some(0), "{b:?}: {}", r.all_output());
        for name in [".envrc", ".vscode", ".idea", ".efr", ".gitmodules"] {
            assert!(
                !r.stdout.contains(name),
                "{b:?}: {name} seen inside: {}",
                r.stdout
            );
            assert!(std::fs::symlink_metadata(format!("{plain}/{name}")).is_err());
        }
        let st = git(&plain, &fx.home, &["status", "--porcelain"]);
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&st.stdout), "", "{b:?}: git status");
        let files = git(&plain, &fx.home, &["ls-files"]);
        assert_eq!(String::from_utf8_lossy(&files.stdout), "main.c\n");
    }
}

#[test]
fn mkdir_of_a_protected_directory_is_honest() {
    each(
        |_| {},
        "mkdir .vscode && echo made; echo '{}' > .vscode/settings.json; echo rc=$?",
        |fx, r, b| {
            assert!(r.stdout.contains("made"), "{b:?}: {}", r.all_output());
            assert!(
                r.stdout.contains("rc=2") || r.stdout.contains("rc=1"),
                "{}",
                r.all_output()
            );
            assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
            assert!(!Path::new(&format!("{}/.vscode/settings.json", fx.proj)).exists());
        },
    );
}

#[test]
fn the_init_writes_nothing_the_line_could_not() {
    let line = format!(
        r#"
        echo {PAYLOAD} >> ro-file 2>/dev/null && echo ESCAPED-dac
        echo 1000 > /proc/1/oom_score_adj 2>/dev/null && echo ESCAPED-oom
        python3 -c "open('/proc/1/mem', 'r+b')" 2>/dev/null && echo ESCAPED-mem
        cd /proc/1 && {{ echo x > comm; }} 2>/dev/null && echo ESCAPED-comm; cd - >/dev/null
        mkfifo ff; (echo x > ff &); sleep 0.3
        for t in $(ls /proc/1/task 2>/dev/null); do for n in 0 1 2 3 4 5 6 7 8 9 10 11 12; do
            {{ echo "exit code 0" > /proc/$t/fd/$n; }} 2>/dev/null && echo "ESCAPED-fd $t $n"
        done; done
        cat ff >/dev/null
        echo {}
    "#,
        "RAN-TO-END"
    );
    each(
        |fx| {
            use std::os::unix::fs::PermissionsExt;
            let p = format!("{}/ro-file", fx.proj);
            std::fs::write(&p, "user's\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        },
        &line,
        |fx, r, b| {
            assert!(r.stdout.contains("RAN-TO-END"), "{b:?}: {}", r.all_output());
            assert!(!r.stdout.contains("ESCAPED"), "{b:?}: {}", r.all_output());
            assert_eq!(
                std::fs::read_to_string(format!("{}/ro-file", fx.proj)).unwrap(),
                "user's\n"
            );
            assert_eq!(r.outcome.code, Some(0), "{b:?}: {}", r.all_output());
        },
    );
}

/// The attempts of [`links_renames_and_fds_reach_no_protected_path`] spelt as absolute
/// paths, with `.`, `..` and doubled slashes, and from a subdirectory: the supervisor's
/// short path (no link, no `..`) and its long one must judge them alike.
#[test]
fn every_spelling_of_a_protected_path_is_refused() {
    let line = format!(
        r#"
        P=$(pwd); mkdir -p sub/deeper
        echo {PAYLOAD} > "$P/.envrc"
        echo {PAYLOAD} > "$P//.git//hooks/pre-commit"
        echo {PAYLOAD} > "$P/./.git/./hooks/./post-merge"
        echo {PAYLOAD} > "$P/sub/../.git/hooks/pre-push"
        echo {PAYLOAD} > "$P/sub/deeper/../../.vscode/tasks.json" 2>/dev/null
        (cd sub/deeper && echo {PAYLOAD} > ../../.envrc; echo {PAYLOAD} > ../../.git/hooks/update)
        (cd .git && echo {PAYLOAD} > hooks/pre-rebase; echo {PAYLOAD} >> ./config)
        (cd .git/hooks && echo {PAYLOAD} > post-rewrite; echo {PAYLOAD} > ./post-commit)
        ln -s "$P/.git" sub/lnk; echo {PAYLOAD} > "$P/sub/lnk/hooks/pre-applypatch"
        mkdir -p "$P/sub/.git/hooks" 2>/dev/null; echo {PAYLOAD} > "$P/sub/.git/hooks/x" 2>/dev/null
        echo fine > "$P/sub/deeper/ok.txt"; echo fine > "$P//sub/./ok2.txt"
        echo done
    "#
    );
    each(
        |_| {},
        &line,
        |fx, r, b| {
            assert!(r.stdout.contains("done"), "{b:?}: {}", r.all_output());
            let planted = payload_files(Path::new(&fx.proj));
            assert!(planted.is_empty(), "{b:?}: planted {planted:?}");
            for ok in ["sub/deeper/ok.txt", "sub/ok2.txt"] {
                assert_eq!(
                    std::fs::read_to_string(format!("{}/{ok}", fx.proj)).unwrap(),
                    "fine\n",
                    "{b:?}: {ok}"
                );
            }
            let hooks: Vec<_> = std::fs::read_dir(format!("{}/.git/hooks", fx.proj))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.ends_with(".sample"))
                .collect();
            assert!(hooks.is_empty(), "{b:?}: hooks made: {hooks:?}");
        },
    );
}

/// Files and directories the supervisor makes get the modes the caller's umask gives,
/// also after the umask changes, in a subshell, and in another thread of the process.
#[test]
fn made_files_follow_the_callers_umask() {
    let line = r#"
        touch a; mkdir da
        umask 077; touch b; mkdir db
        (umask 002; touch c; mkdir dc)
        touch d
        umask 022
        python3 -c '
import os, threading
os.umask(0o027)
def t():
    open("e", "w").close()
    os.mkdir("de")
th = threading.Thread(target=t); th.start(); th.join()
old = os.umask(0)
open("f", "w").close()
os.umask(old)
open("g", "w").close()
'
        touch h
        stat -c '%n %a' a da b db c dc d e de f g h
    "#;
    each(
        |_| {},
        line,
        |_fx, r, b| {
            let want = [
                "a 644", "da 755", "b 600", "db 700", "c 664", "dc 775", "d 600", "e 640",
                "de 750", "f 666", "g 640", "h 644",
            ];
            for w in want {
                assert!(
                    r.stdout.lines().any(|l| l == w),
                    "{b:?}: want {w}: {}",
                    r.all_output()
                );
            }
        },
    );
}

/// The init starts the supervisor with the line's first supervised call; a line that makes
/// none still has the protected files with several links reported (at its end).
#[test]
fn a_line_that_writes_nothing_reports_linked_protected_files() {
    each(
        |fx| {
            std::fs::write(format!("{}/.envrc", fx.proj), "").unwrap();
            std::fs::hard_link(
                format!("{}/.envrc", fx.proj),
                format!("{}/envrc-link", fx.proj),
            )
            .unwrap();
        },
        "cat envrc-link",
        |fx, r, b| {
            assert_eq!(
                r.outcome.linked_protected,
                vec![format!("{}/.envrc", fx.proj)],
                "{b:?}"
            );
        },
    );
}
