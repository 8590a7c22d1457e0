//! The git code a contained call leaves where the view could not protect it is taken out
//! of git's way after the call, and reported; nothing else is touched.

mod common;

use std::path::Path;
use std::process::Command;

use common::{command, temp_env};
use serde_json::Value;

fn git(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

fn run(dir: &Path, proj: &Path, line: &str) -> Value {
    let summary = dir.join("summary.json");
    let p = proj.to_str().unwrap();
    let out = command(dir)
        .args(["run", "--project", p, "--cwd", p, "--summary"])
        .arg(&summary)
        .args(["--", line])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap()
}

/// The files in the quarantine directories (`efr-quarantine-*`) of a git dir.
fn in_quarantine(git_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(git_dir).unwrap().flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with("efr-quarantine-")
            && e.file_type().unwrap().is_dir()
        {
            for f in std::fs::read_dir(e.path()).unwrap().flatten() {
                out.push(f.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn quarantine_file(git_dir: &Path, name: &str) -> std::path::PathBuf {
    std::fs::read_dir(git_dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("efr-quarantine-")
        })
        .map(|e| e.path().join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{name} is in no quarantine of {}", git_dir.display()))
}

/// A directory outside the project that looks like a git dir (an application's own dir
/// with a file named config), and a thread that rewrites its config (and, with `hook`,
/// a hook) for about 300 ms, as an application would while a call runs, so their ctimes
/// are new.
fn outside_git_like_dir(
    home: &Path,
    config: &'static str,
    hook: bool,
) -> (std::path::PathBuf, std::thread::JoinHandle<()>) {
    let app = home.join("app");
    for d in ["hooks", "objects", "refs"] {
        std::fs::create_dir_all(app.join(d)).unwrap();
    }
    std::fs::write(app.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(app.join("config"), config).unwrap();
    let app2 = app.clone();
    let toucher = std::thread::spawn(move || {
        for _ in 0..30 {
            let _ = std::fs::write(app2.join("config"), config);
            if hook {
                let _ = std::fs::write(app2.join("hooks/post-commit"), "#!/bin/sh\n");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    });
    (app, toucher)
}

fn quarantined(v: &Value) -> Vec<String> {
    serde_json::from_value(v["quarantined"].clone()).unwrap_or_default()
}

#[test]
fn a_repository_made_by_the_call_loses_its_hook_and_code_keys() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("fresh");
    std::fs::create_dir_all(&proj).unwrap();
    // No .git at launch: nothing to protect then, and git init must work.
    let line = "git init -q . && \
        printf '#!/bin/sh\\necho PWNED >&2\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && \
        touch -d 2001-01-01 .git/hooks/pre-commit && \
        git config core.fsmonitor 'echo PWNED >&2' && git config alias.st '!echo PWNED' && \
        git config user.name 'Kept Name' && echo made";
    let v = run(d.path(), &proj, line);
    let q = quarantined(&v);
    assert_eq!(q.len(), 2, "{v}");
    assert!(
        q.iter()
            .any(|l| l.contains("hooks/pre-commit") && l.contains("moved to")),
        "{q:?}"
    );
    assert!(
        q.iter()
            .any(|l| l.contains("core.fsmonitor") && l.contains("alias.st")),
        "{q:?}"
    );
    // The hook is kept, out of git's way; the config keeps everything else.
    assert!(!proj.join(".git/hooks/pre-commit").exists());
    assert_eq!(in_quarantine(&proj.join(".git")), ["config", "pre-commit"]);
    let cfg = std::fs::read_to_string(proj.join(".git/config")).unwrap();
    assert!(!cfg.contains("PWNED") && cfg.contains("Kept Name"), "{cfg}");
    let orig = std::fs::read_to_string(quarantine_file(&proj.join(".git"), "config")).unwrap();
    assert!(orig.contains("fsmonitor"), "{orig}");
    // git outside runs nothing of it, and the repository still works.
    let st = git(&proj, &home, &["status"]);
    assert!(st.status.success(), "{st:?}");
    assert!(
        !String::from_utf8_lossy(&st.stderr).contains("PWNED"),
        "{st:?}"
    );
    std::fs::write(proj.join("a.txt"), "a").unwrap();
    assert!(git(&proj, &home, &["add", "a.txt"]).status.success());
    let c = git(
        &proj,
        &home,
        &["-c", "user.email=x@y", "commit", "-qm", "x"],
    );
    assert!(c.status.success(), "{c:?}");
    assert!(
        !String::from_utf8_lossy(&c.stderr).contains("PWNED"),
        "{c:?}"
    );
}

#[test]
fn a_repository_deeper_than_the_launch_walk_is_checked_after_the_call() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("work");
    let deep = proj.join("a/b/c/d/repo");
    std::fs::create_dir_all(&deep).unwrap();
    assert!(git(&deep, &home, &["init", "-q"]).status.success());
    // The user's own hook from before the call stays.
    std::fs::write(deep.join(".git/hooks/post-merge"), "#!/bin/sh\n").unwrap();
    let v = run(
        d.path(),
        &proj,
        "printf '#!/bin/sh\\necho PWNED\\n' > a/b/c/d/repo/.git/hooks/pre-push && echo ok",
    );
    let q = quarantined(&v);
    assert_eq!(q.len(), 1, "{v}");
    assert!(q[0].contains("pre-push"), "{q:?}");
    assert!(!deep.join(".git/hooks/pre-push").exists());
    assert!(
        deep.join(".git/hooks/post-merge").exists(),
        "the user's own hook stays"
    );
}

#[test]
fn a_call_that_leaves_no_git_code_reports_nothing() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("plain");
    std::fs::create_dir_all(&proj).unwrap();
    let v = run(
        d.path(),
        &proj,
        "git init -q . && git config user.name x && echo a > a && git add a && echo ok",
    );
    assert!(v.get("quarantined").is_none(), "{v}");
    assert!(in_quarantine(&proj.join(".git")).is_empty());
}

#[test]
fn a_git_file_that_names_a_dir_outside_the_project_is_moved_aside_and_nothing_there_is_touched() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    std::fs::create_dir_all(&proj).unwrap();
    let app_config = "[core]\n\teditor = vim\n\tpager = less\n";
    let (app, toucher) = outside_git_like_dir(&home, app_config, false);
    let line = format!(
        "printf 'gitdir: {}\\n' > .git && sleep 0.3 && echo ok",
        app.display()
    );
    let v = run(d.path(), &proj, &line);
    toucher.join().unwrap();
    let q = quarantined(&v);
    assert_eq!(q.len(), 1, "{v}");
    assert!(q[0].contains("outside the project"), "{q:?}");
    assert!(!proj.join(".git").exists());
    assert!(proj.join(".git.efr-quarantine").exists());
    assert_eq!(
        std::fs::read_to_string(app.join("config")).unwrap(),
        app_config
    );
    assert!(in_quarantine(&app).is_empty());
}

#[test]
fn a_git_link_to_a_dir_outside_the_project_is_moved_aside_and_nothing_there_is_touched() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    std::fs::create_dir_all(&proj).unwrap();
    let app_config = "[core]\n\teditor = vim\n";
    let (app, toucher) = outside_git_like_dir(&home, app_config, true);
    let line = format!("ln -s {} .git && sleep 0.3 && echo ok", app.display());
    let v = run(d.path(), &proj, &line);
    toucher.join().unwrap();
    let q = quarantined(&v);
    assert_eq!(q.len(), 1, "{v}");
    assert!(q[0].contains("outside the project"), "{q:?}");
    assert!(std::fs::symlink_metadata(proj.join(".git")).is_err());
    assert_eq!(
        std::fs::read_to_string(app.join("config")).unwrap(),
        app_config
    );
    assert!(app.join("hooks/post-commit").exists());
    assert!(in_quarantine(&app).is_empty());
}

#[test]
fn links_the_call_plants_where_the_check_writes_steer_nothing() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    let outside = home.join("outside");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("precious"), "keep me\n").unwrap();
    // Links where an older check would have written: its quarantine dir, its temp file.
    let line = format!(
        "git init -q . && ln -s {o} .git/efr-quarantine && ln -s {o}/precious .git/config.efr-tmp && \
         ln -s {o} .git/efr-quarantine-000000000000 && \
         printf '#!/bin/sh\\n' > .git/hooks/pre-commit && git config core.fsmonitor evil && echo ok",
        o = outside.display()
    );
    let v = run(d.path(), &proj, &line);
    assert_eq!(quarantined(&v).len(), 2, "{v}");
    let listing: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listing, ["precious"], "something was written outside");
    assert_eq!(
        std::fs::read_to_string(outside.join("precious")).unwrap(),
        "keep me\n"
    );
    assert_eq!(in_quarantine(&proj.join(".git")), ["config", "pre-commit"]);
}
