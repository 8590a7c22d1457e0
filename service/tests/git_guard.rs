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

/// Runs `line` in a call with the init's supervisor off (a test knob): the guard is the
/// layer behind the supervisor, which would refuse these writes.
fn run(dir: &Path, proj: &Path, line: &str) -> Value {
    run_with(dir, proj, line, "no_supervise")
}

/// Runs `line` in a call weakened by `weaken` (`""`: as users get it).
fn run_with(dir: &Path, proj: &Path, line: &str, weaken: &str) -> Value {
    let summary = dir.join("summary.json");
    let p = proj.to_str().unwrap();
    let out = command(dir)
        .env(efr_launcher::plan::TEST_WEAKEN_ENV, weaken)
        .env(efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV, "1")
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

/// A repository at `dir` with one commit, made by the user before the call.
fn user_repo(dir: &Path, home: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    assert!(
        git(dir, home, &["init", "-q", "-b", "main"])
            .status
            .success()
    );
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    assert!(git(dir, home, &["add", "a.txt"]).status.success());
    let c = git(
        dir,
        home,
        &[
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@x",
            "commit",
            "-qm",
            "a",
        ],
    );
    assert!(c.status.success(), "{c:?}");
}

/// A git command the user runs after the call, with a committer.
fn user_git(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "-c",
        "user.name=u",
        "-c",
        "user.email=u@x",
        "-c",
        "protocol.file.allow=always",
    ];
    all.extend_from_slice(args);
    git(dir, home, &all)
}

/// The shell text of a payload that writes `marker`.
fn payload(marker: &Path) -> String {
    format!("#!/bin/sh\\ntouch {}\\n", marker.display())
}

/// The call makes a git dir `common` (a shell word, relative to the project) holding a
/// config with `core.fsmonitor` and a `pre-commit` hook, then writes `commondir` (with
/// `printf` text `spelled`) in the project's main repository; after the call the user's
/// `git status` and `git commit` run neither.
fn commondir_case(setup: &str, common: &str, spelled: &str) {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    user_repo(&proj, &home);
    let marker = home.join("PWNED");
    let line = format!(
        "{setup} mkdir -p {c}/hooks {c}/objects {c}/refs/heads && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {m}.fsmonitor\\n' > {c}/config && \
         printf '{p}' > {c}/hooks/pre-commit && chmod +x {c}/hooks/pre-commit && \
         cp -r .git/objects/. {c}/objects/ && cp .git/refs/heads/main {c}/refs/heads/main && \
         printf '{spelled}' > .git/commondir && echo ok",
        c = common,
        m = marker.display(),
        p = payload(&marker),
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert!(
        q.iter()
            .any(|l| l.contains("commondir") && l.contains("moved to")),
        "{v}"
    );
    assert!(std::fs::symlink_metadata(proj.join(".git/commondir")).is_err());
    let st = user_git(&proj, &home, &["status"]);
    assert!(st.status.success(), "{st:?}");
    std::fs::write(proj.join("b.txt"), "b").unwrap();
    assert!(user_git(&proj, &home, &["add", "b.txt"]).status.success());
    let c = user_git(&proj, &home, &["commit", "-qm", "b"]);
    assert!(c.status.success(), "{c:?}");
    let left: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("PWNED"))
        .collect();
    assert!(left.is_empty(), "git ran the call's code: {left:?}");
}

#[test]
fn a_commondir_with_leading_blanks_in_a_main_repository_is_taken_out() {
    // Git keeps the blanks: `.git/  ../c` is a directory of its own.
    commondir_case("mkdir -p '.git/  ..' &&", "'.git/  ../c'", "  ../c\\n");
}

#[test]
fn a_commondir_whose_dots_go_through_a_link_is_taken_out() {
    // `.git/lnk/../../../x/c`: git goes up from where the link points (p/a/b/c, so p/x/c);
    // read as text it is outside the project.
    commondir_case(
        "mkdir -p a/b/c && ln -s ../a/b/c .git/lnk &&",
        "x/c",
        "lnk/../../../x/c\\n",
    );
}

#[test]
fn a_commondir_naming_a_dir_that_is_not_utf8_is_taken_out() {
    commondir_case("", "\"$(printf 'c\\377')\"", "../c\\377\\n");
}

#[test]
fn a_hook_planted_in_a_core_hooks_path_inside_the_work_tree_is_quarantined() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("w");
    // Deeper than the launch view's walk: only the check after the call keeps it.
    let repo = proj.join("a/b/c/r");
    user_repo(&repo, &home);
    assert!(
        git(&repo, &home, &["config", "core.hooksPath", ".husky/_"])
            .status
            .success()
    );
    std::fs::create_dir_all(repo.join(".husky/_")).unwrap();
    std::fs::write(repo.join(".husky/_/h"), "#!/bin/sh\n").unwrap();
    let marker = home.join("PWNED");
    let line = format!(
        "printf '{}' > a/b/c/r/.husky/_/pre-commit && chmod +x a/b/c/r/.husky/_/pre-commit && echo ok",
        payload(&marker)
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert_eq!(q.len(), 1, "{v}");
    assert!(q[0].contains(".husky/_/pre-commit"), "{q:?}");
    assert!(
        repo.join(".husky/_/h").exists(),
        "the user's own file stays"
    );
    std::fs::write(repo.join("b.txt"), "b").unwrap();
    assert!(user_git(&repo, &home, &["add", "b.txt"]).status.success());
    let c = user_git(&repo, &home, &["commit", "-qm", "b"]);
    assert!(c.status.success(), "{c:?}");
    assert!(!marker.exists(), "the planted hook ran");
}

#[test]
fn hooks_pre_seeded_for_a_submodule_not_yet_initialised_are_quarantined() {
    let d = temp_env();
    let home = d.path().join("home");
    let lib = home.join("lib");
    user_repo(&lib, &home);
    let sup = home.join("sup");
    user_repo(&sup, &home);
    let url = format!("file://{}", lib.display());
    let add = user_git(&sup, &home, &["submodule", "add", "-q", &url, "x"]);
    assert!(add.status.success(), "{add:?}");
    assert!(
        user_git(&sup, &home, &["commit", "-qm", "sub"])
            .status
            .success()
    );
    // The user's clone, its submodule not initialised: no .git/modules yet.
    let proj = home.join("p");
    let cl = user_git(&home, &home, &["clone", "-q", sup.to_str().unwrap(), "p"]);
    assert!(cl.status.success(), "{cl:?}");
    assert!(!proj.join(".git/modules").exists());
    let marker = home.join("PWNED");
    let line = format!(
        "git init -q --bare .git/modules/x && git --git-dir=.git/modules/x config core.bare false && \
         git --git-dir=.git/modules/x config remote.origin.url {url} && \
         printf '{}' > .git/modules/x/hooks/post-checkout && chmod +x .git/modules/x/hooks/post-checkout && echo ok",
        payload(&marker)
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert!(
        q.iter()
            .any(|l| l.contains("modules/x/hooks/post-checkout") && l.contains("moved to")),
        "{v}"
    );
    let up = user_git(&proj, &home, &["submodule", "update", "--init"]);
    assert!(up.status.success(), "{up:?}");
    assert!(
        proj.join("x/a.txt").exists(),
        "the submodule still checks out"
    );
    assert!(!marker.exists(), "the pre-seeded hook ran");
}

#[test]
fn a_repository_eight_levels_down_and_one_under_dist_are_checked() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("w");
    std::fs::create_dir_all(&proj).unwrap();
    let marker = home.join("PWNED");
    let line = format!(
        "for r in a/b/c/d/e/f/g/r dist; do git init -q $r && printf '{}' > $r/.git/hooks/pre-commit && \
         chmod +x $r/.git/hooks/pre-commit || exit 1; done; echo ok",
        payload(&marker)
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert_eq!(q.len(), 2, "{v}");
    for r in ["a/b/c/d/e/f/g/r", "dist"] {
        let repo = proj.join(r);
        assert!(
            q.iter()
                .any(|l| l.contains(&format!("{r}/.git/hooks/pre-commit"))),
            "{q:?}"
        );
        std::fs::write(repo.join("b.txt"), "b").unwrap();
        assert!(user_git(&repo, &home, &["add", "b.txt"]).status.success());
        let c = user_git(&repo, &home, &["commit", "-qm", "b"]);
        assert!(c.status.success(), "{c:?}");
        assert!(!marker.exists(), "the hook in {r} ran");
    }
}

/// Below build output only a repository the call made counts: one it makes three levels
/// down, in directories that were there before, is found, also when the call sets its
/// directory's times back (a guard that went by mtimes would miss it); a repository made
/// there before the call is left alone.
#[test]
fn a_repository_made_deep_in_build_output_is_found_whatever_the_times_say() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("w");
    let old = proj.join("node_modules/old/x");
    std::fs::create_dir_all(proj.join("node_modules/pkg/sub/deep")).unwrap();
    std::fs::create_dir_all(&old).unwrap();
    assert!(git(&old, &home, &["init", "-q"]).status.success());
    std::fs::write(old.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    // Older than the call by more than the guard's slack.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let marker = home.join("PWNED");
    let line = format!(
        "r=node_modules/pkg/sub/deep && git init -q $r && printf '{}' > $r/.git/hooks/pre-commit && \
         chmod +x $r/.git/hooks/pre-commit && touch -d 2001-01-01 $r node_modules/pkg/sub && echo ok",
        payload(&marker)
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert_eq!(q.len(), 1, "{v}");
    assert!(
        q[0].contains("node_modules/pkg/sub/deep/.git/hooks/pre-commit"),
        "{q:?}"
    );
    assert!(
        !proj
            .join("node_modules/pkg/sub/deep/.git/hooks/pre-commit")
            .exists()
    );
    assert!(old.join(".git/hooks/pre-commit").exists());
}

#[test]
fn keys_not_on_the_safe_list_go_from_a_config_the_call_changed_and_user_name_stays() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("w");
    let repo = proj.join("a/b/c/r");
    user_repo(&repo, &home);
    assert!(
        git(&repo, &home, &["config", "user.name", "Kept Name"])
            .status
            .success()
    );
    std::fs::write(repo.join(".gitattributes"), "*.txt diff=x\n").unwrap();
    let marker = home.join("PWNED");
    let m = marker.display();
    let line = format!(
        "cd a/b/c/r && git config trailer.x.command 'touch {m}.trailer' && \
         git config diff.x.textconv 'touch {m}.textconv; cat' && \
         git config core.alternateRefsCommand 'touch {m}.alt' && echo ok"
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert_eq!(q.len(), 1, "{v}");
    for k in [
        "trailer.x.command",
        "diff.x.textconv",
        "core.alternaterefscommand",
    ] {
        assert!(q[0].contains(k), "{k}: {q:?}");
    }
    assert!(!q[0].contains("user.name"), "{q:?}");
    let name = git(&repo, &home, &["config", "user.name"]);
    assert_eq!(String::from_utf8_lossy(&name.stdout).trim(), "Kept Name");
    std::fs::write(repo.join("a.txt"), "changed\n").unwrap();
    assert!(
        user_git(&repo, &home, &["commit", "-qam", "b"])
            .status
            .success()
    );
    let log = user_git(&repo, &home, &["log", "-p"]);
    assert!(log.status.success(), "{log:?}");
    let tr = user_git(
        &repo,
        &home,
        &["interpret-trailers", "--trailer", "x=1", ".gitattributes"],
    );
    assert!(tr.status.success(), "{tr:?}");
    let left: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("PWNED"))
        .collect();
    assert!(left.is_empty(), "git ran the call's code: {left:?}");
    let orig = std::fs::read_to_string(quarantine_file(&repo.join(".git"), "config")).unwrap();
    assert!(orig.contains("alternateRefsCommand"), "{orig}");
}

#[test]
fn a_rebase_todo_with_an_exec_line_is_quarantined() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    user_repo(&proj, &home);
    std::fs::write(proj.join("b.txt"), "b\n").unwrap();
    assert!(user_git(&proj, &home, &["add", "b.txt"]).status.success());
    assert!(
        user_git(&proj, &home, &["commit", "-qm", "b"])
            .status
            .success()
    );
    let marker = home.join("PWNED");
    // A sequence editor that stops the rebase at once and leaves an exec line (indented:
    // git trims it) for the user's `git rebase --continue`.
    std::fs::write(
        proj.join("ed.sh"),
        format!(
            "#!/bin/sh\n{{ echo break; echo '   exec touch {}'; cat \"$1\"; }} > \"$1.new\" && mv \"$1.new\" \"$1\"\n",
            marker.display()
        ),
    )
    .unwrap();
    let line = "chmod +x ed.sh && GIT_SEQUENCE_EDITOR=$PWD/ed.sh git -c user.name=u -c user.email=u@x \
                rebase -q -i HEAD~1; echo ok";
    let v = run(d.path(), &proj, line);
    let q = quarantined(&v);
    assert!(
        q.iter()
            .any(|l| l.contains("rebase-merge/git-rebase-todo") && l.contains("exec")),
        "{v}"
    );
    let _ = user_git(&proj, &home, &["rebase", "--continue"]);
    assert!(!marker.exists(), "the exec line ran");
}

#[test]
fn the_core_hooks_path_of_a_project_root_is_read_only_in_the_call() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    user_repo(&proj, &home);
    assert!(
        git(&proj, &home, &["config", "core.hooksPath", ".husky/_"])
            .status
            .success()
    );
    std::fs::create_dir_all(proj.join(".husky/_")).unwrap();
    let v = run_with(
        d.path(),
        &proj,
        "if printf '#!/bin/sh\\n' > .husky/_/pre-commit; then echo written; else echo refused; fi; \
         echo x > other.txt",
        "",
    );
    assert!(!proj.join(".husky/_/pre-commit").exists(), "{v}");
    assert!(
        proj.join("other.txt").exists(),
        "the rest of the root stays writable"
    );
    assert!(quarantined(&v).is_empty(), "{v}");
}

#[test]
fn an_include_file_the_call_changed_and_hooks_with_odd_names_are_checked() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("w");
    let repo = proj.join("a/b/c/r");
    user_repo(&repo, &home);
    // The user's own include, from before the call.
    std::fs::write(repo.join(".git/inc"), "[user]\n\tname = Inc Name\n").unwrap();
    assert!(
        git(&repo, &home, &["config", "include.path", "inc"])
            .status
            .success()
    );
    let marker = home.join("PWNED");
    let line = format!(
        "cd a/b/c/r && printf '[core]\\n\\tfsmonitor = touch {m}\\n' >> .git/inc && \
         mkdir -p .git/hooks/deep && printf '#!/bin/sh\\n' > \"$(printf '.git/hooks/x\\377')\" && \
         printf '#!/bin/sh\\n' > .git/hooks/deep/pre-commit && echo ok",
        m = marker.display()
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert!(
        q.iter()
            .any(|l| l.contains(".git/inc") && l.contains("core.fsmonitor")),
        "{v}"
    );
    assert!(
        q.iter().any(|l| l.contains("hooks/deep/pre-commit")),
        "{q:?}"
    );
    assert!(q.iter().any(|l| l.contains("hooks/x")), "{q:?}");
    let hooks: Vec<_> = std::fs::read_dir(repo.join(".git/hooks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| !n.to_string_lossy().ends_with(".sample") && n != "deep")
        .collect();
    assert!(hooks.is_empty(), "{hooks:?}");
    let inc = std::fs::read_to_string(repo.join(".git/inc")).unwrap();
    assert!(
        inc.contains("Inc Name") && !inc.contains("fsmonitor"),
        "{inc}"
    );
    assert!(user_git(&repo, &home, &["status"]).status.success());
    assert!(!marker.exists(), "the included fsmonitor ran");
}

/// A directory that git takes as a repository by what it holds (a bare repository under
/// any name, not a `.git`), made by the call with a config that runs code and a hook: the
/// guard finds it as git would and takes both out of git's way (the supervisor, off here,
/// refuses them at the write).
#[test]
fn a_bare_repository_under_any_name_is_checked_after_the_call() {
    let d = temp_env();
    let home = d.path().join("home");
    let proj = home.join("p");
    user_repo(&proj, &home);
    let marker = d.path().join("ran");
    let line = format!(
        "mkdir docs docs/objects docs/refs docs/hooks && echo 'ref: refs/heads/main' > docs/HEAD && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = touch {m}\\n' > docs/config && \
         printf '{hook}' > docs/hooks/pre-commit && chmod +x docs/hooks/pre-commit && echo made",
        m = marker.display(),
        hook = payload(&marker),
    );
    let v = run(d.path(), &proj, &line);
    let q = quarantined(&v);
    assert!(
        q.iter()
            .any(|l| l.contains("docs/config") && l.contains("core.fsmonitor")),
        "{q:?}"
    );
    assert!(
        q.iter().any(|l| l.contains("docs/hooks/pre-commit")),
        "{q:?}"
    );
    // The user's git in it runs neither.
    let docs = proj.join("docs");
    let _ = git(&docs, &home, &["status"]);
    let _ = user_git(&docs, &home, &["commit", "--allow-empty", "-qm", "x"]);
    assert!(!marker.exists(), "the user's git ran what the call planted");
    let cfg = std::fs::read_to_string(docs.join("config")).unwrap();
    assert!(
        !cfg.contains("fsmonitor") && !cfg.contains("worktree"),
        "{cfg}"
    );
}
