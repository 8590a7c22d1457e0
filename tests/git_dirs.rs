//! Git dirs wherever a call writes (`efr_launcher::supervise::gitdir`): a directory that git
//! would take as a repository (a `HEAD`, or `objects/` and `refs/`) never holds code git
//! runs, whatever order the call writes it in, through which fd, link or rename, in the
//! project, below it or in the conversation's `/tmp`; and git itself keeps working. Each
//! plant's payload writes a marker file when it runs: the tests run the user's next git
//! commands on the host, as the user would meet them, and look for the markers.

use std::path::{Path, PathBuf};
use std::process::Command;

use efr_sandbox_tests::common::{self, Fixture, Ran};

/// The user's git on the host, in `dir`, with the fixture's home and no system config.
fn user_git(fx: &Fixture, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", &fx.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .output()
        .unwrap()
}

/// Where a payload leaves its marker when it runs: beside the home, outside the project.
fn marker(fx: &Fixture, name: &str) -> PathBuf {
    Path::new(&fx.home)
        .parent()
        .unwrap()
        .join(format!("ran-{name}"))
}

fn ran(r: &Ran) {
    assert!(
        r.outcome.setup_error.is_none() && r.outcome.started.is_some(),
        "the call did not run: {:?}\n{}",
        r.outcome,
        r.all_output()
    );
}

/// The user meets each directory the way a shell prompt and a habit would: `git status`
/// in it, `git log`, `git diff`, a commit.
fn meet(fx: &Fixture, dir: &Path) {
    for args in [
        &["status", "--porcelain"][..],
        &["log", "--oneline", "-1"],
        &["diff", "--stat"],
        &[
            "-c",
            "user.name=U",
            "-c",
            "user.email=u@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "m",
        ],
    ] {
        let _ = user_git(fx, dir, args);
    }
}

/// The plants of a call that wants its code run by the user's git, each in a directory of
/// its own, every one in a different order or by a different route. `evil DIR NAME` prints
/// a config that git reads as a repository with a work tree (`bare = false`, `worktree =
/// ..`: the user's `git status` there runs its `core.fsmonitor`); hooks are `pre-commit`
/// (the user's `git commit` runs it).
fn plants(fx: &Fixture) -> String {
    let base = Path::new(&fx.home).parent().unwrap().display().to_string();
    format!(
        r#"
cd {proj}
evil() {{ printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = touch {base}/ran-%s\n' "$1"; }}
hook() {{ printf '#!/bin/sh\ntouch {base}/ran-%s\n' "$1"; }}
# The config first, the git dir's other parts after it.
mkdir docs; evil docs > docs/config
mkdir docs/objects docs/refs; echo 'ref: refs/heads/main' > docs/HEAD
# A bare repository the call makes, then keys that run code, by git and by hand.
git init -q --bare b1
git -C b1 config core.bare false; git -C b1 config core.worktree ..
git -C b1 config core.fsmonitor 'touch {base}/ran-b1'
evil b1 >> b1/config
evil b1 > /tmp/evil-config; ln -sf /tmp/evil-config b1/config.worktree
evil b1 > b1/config.new && mv b1/config.new b1/config
# Hooks, written directly, by renaming a sample, as a hard link and as a linked dir.
git init -q --bare b2
hook b2 > b2/hooks/pre-commit; chmod +x b2/hooks/pre-commit
hook b2 > b2/hooks/x.sample; chmod +x b2/hooks/x.sample; mv b2/hooks/x.sample b2/hooks/pre-commit
ln b2/hooks/pre-push.sample b2/hooks/pre-push
rm -rf b2/hooks; mkdir /tmp/h; hook b2 > /tmp/h/pre-commit; chmod +x /tmp/h/pre-commit; ln -s /tmp/h b2/hooks
# A config kept open before the directory becomes a git dir, written after.
mkdir -p b3/objects; printf '[core]\n\tbare = true\n' > b3/config
exec 7>>b3/config; mkdir b3/refs; echo 'ref: refs/heads/main' > b3/HEAD
evil b3 >&7; exec 7>&-
# A hooks dir made under another name and renamed into place before the git dir exists,
# written through its old path (the call's cwd) after.
mkdir -p b4/hk; cd b4/hk; mv ../hk ../hooks; echo 'ref: refs/heads/x' > ../HEAD; mkdir ../objects ../refs
hook b4 > pre-commit; chmod +x pre-commit; cd {proj}
# An include, which is not on the safe list either.
git init -q --bare b5; evil b5 > /tmp/inc; git -C b5 config include.path /tmp/inc
# A git dir in the conversation's /tmp that a `.git` file of the project names.
mkdir -p /tmp/g/objects /tmp/g/refs; evil w6 > /tmp/g/config
echo 'ref: refs/heads/main' > /tmp/g/HEAD
mkdir w6; printf 'gitdir: {tmp}/g\n' > w6/.git
echo planted
"#,
        proj = fx.proj,
        tmp = fx.tmp,
    )
}

#[test]
fn what_a_call_plants_in_a_git_dir_never_runs_at_the_users_git() {
    let backends = common::backends();
    for b in backends {
        let fx = Fixture::new();
        let r = common::run(&fx, &plants(&fx), b);
        ran(&r);
        assert!(r.stdout.contains("planted"), "{b:?}: {}", r.all_output());
        // The refusals are git's own: each names why, and no write grant is offered.
        let git = &r.outcome.git_denials;
        for p in ["docs/HEAD", "b1/config", "b2/hooks/pre-commit", "b5/config"] {
            let full = format!("{}/{p}", fx.proj);
            assert!(
                git.iter().any(|g| g.path == full),
                "{b:?}: {p} not refused as git code: {git:?}\n{}",
                r.all_output()
            );
        }
        assert!(
            git.iter()
                .any(|g| g.reason.contains("core.fsmonitor") || g.reason.contains("include.path")),
            "{b:?}: {git:?}"
        );
        for d in ["docs", "b1", "b2", "b3", "b4", "b5", "w6"] {
            meet(&fx, &Path::new(&fx.proj).join(d));
        }
        meet(&fx, Path::new(&fx.tmp).join("g").as_path());
        for n in ["docs", "b1", "b2", "b3", "b4", "w6"] {
            assert!(
                !marker(&fx, n).exists(),
                "{b:?}: the user's git ran what the call planted in {n}\n{}",
                r.all_output()
            );
        }
        // What git reads there holds only keys on the safe list.
        for d in ["b1", "b3", "b5"] {
            let o = user_git(
                &fx,
                &Path::new(&fx.proj).join(d),
                &["config", "--list", "--local"],
            );
            let list = String::from_utf8_lossy(&o.stdout);
            assert!(
                !list.contains("fsmonitor") && !list.contains("include") && !list.contains("pager"),
                "{b:?}: {d}: {list}"
            );
        }
        let hooks: Vec<String> = std::fs::read_dir(Path::new(&fx.proj).join("b2/hooks"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.ends_with(".sample"))
                    .collect()
            })
            .unwrap_or_default();
        assert!(hooks.is_empty(), "{b:?}: hooks left: {hooks:?}");
    }
}

#[test]
fn git_keeps_working_in_repositories_the_call_makes() {
    for b in common::backends() {
        let fx = Fixture::new();
        let line = format!(
            r#"set -e; cd {proj}
git init -q app; cd app; git config user.name A; git config user.email a@b
echo one > f; git add f; git commit -qm one; git branch dev
git remote add origin https://example.com/app.git; git config branch.dev.remote origin
git worktree add -q ../wt dev
cd ..; git clone -q --bare app app.git; git clone -q app.git copy
git -C app.git config core.bare true; git -C copy log --oneline | wc -l
git init -q --bare empty.git && git -C empty.git symbolic-ref HEAD refs/heads/trunk
echo done"#,
            proj = fx.proj
        );
        let r = common::run(&fx, &line, b);
        ran(&r);
        assert_eq!(r.outcome.code, Some(0), "{b:?}: {}", r.all_output());
        assert!(r.stdout.contains("done"), "{b:?}: {}", r.all_output());
        assert!(
            r.outcome.git_denials.is_empty(),
            "{b:?}: {:?}",
            r.outcome.git_denials
        );
        // The user's git reads what the call wrote, and it runs nothing.
        let app = Path::new(&fx.proj).join("app");
        let o = user_git(&fx, &app, &["config", "--get", "remote.origin.url"]);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "https://example.com/app.git"
        );
        for d in ["app", "wt", "copy"] {
            let o = user_git(
                &fx,
                &Path::new(&fx.proj).join(d),
                &["status", "--porcelain"],
            );
            assert!(o.status.success(), "{b:?}: {d}: {o:?}");
        }
        let o = user_git(
            &fx,
            &Path::new(&fx.proj).join("empty.git"),
            &["symbolic-ref", "HEAD"],
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "refs/heads/trunk"
        );
        // git init's sample hooks are all there, and nothing else.
        let samples = std::fs::read_dir(app.join(".git/hooks")).unwrap().count();
        assert!(samples > 5, "{b:?}: {samples} hook samples");
    }
}

/// The loops that race the git rule, over `r1`..`r4` of the project, for 3 s: the first
/// makes the directories git dirs over and over; the second writes configs directly,
/// through a fd kept open across the making and by renames; the third renames hooks dirs
/// in and out and writes hooks through them.
fn race_loops(fx: &Fixture) -> [String; 3] {
    let base = Path::new(&fx.home).parent().unwrap().display().to_string();
    let head = format!(
        r#"cd {proj}; end=$(($(date +%s)+3)); for i in 1 2 3 4; do mkdir -p r$i; done
while [ $(date +%s) -lt $end ]; do for i in 1 2 3 4; do
  rm -f r$i/HEAD; rm -rf r$i/objects r$i/refs; echo 'ref: refs/heads/m' > r$i/HEAD 2>/dev/null
  mkdir r$i/objects r$i/refs 2>/dev/null; done; done"#,
        proj = fx.proj
    );
    let config = format!(
        r#"cd {proj}; end=$(($(date +%s)+3)); for i in 1 2 3 4; do mkdir -p r$i; done
evil="[core]
	repositoryformatversion = 0
	bare = false
	worktree = ..
	fsmonitor = touch {base}/ran-race"
while [ $(date +%s) -lt $end ]; do for i in 1 2 3 4; do
  printf '[core]\n\tbare = true\n' > r$i/config 2>/dev/null
  exec 8>>r$i/config 2>/dev/null && {{ sleep 0.02; printf '%s\n' "$evil" >&8; exec 8>&-; }}
  printf '%s\n' "$evil" > r$i/config 2>/dev/null
  printf '%s\n' "$evil" > r$i/c.tmp 2>/dev/null && mv r$i/c.tmp r$i/config 2>/dev/null
  done; done"#,
        proj = fx.proj
    );
    let hooks = format!(
        r#"cd {proj}; end=$(($(date +%s)+3)); for i in 1 2 3 4; do mkdir -p r$i; done
while [ $(date +%s) -lt $end ]; do for i in 1 2 3 4; do
  mkdir -p r$i/hk 2>/dev/null; mv r$i/hk r$i/hooks 2>/dev/null
  printf '#!/bin/sh\ntouch {base}/ran-race\n' > r$i/hooks/pre-commit 2>/dev/null
  chmod +x r$i/hooks/pre-commit 2>/dev/null
  mv r$i/hooks r$i/hk2 2>/dev/null; rm -rf r$i/hk2
  done; done"#,
        proj = fx.proj
    );
    [head, config, hooks]
}

/// After a race: no directory of the project that git would take as a git dir holds a
/// config key off the safe list or a hook, and the user's git in each runs nothing.
fn nothing_raced_through(fx: &Fixture, b: &str) {
    let safe = efr_policy::config::Config::defaults().git_safe_keys();
    for i in 1..=4 {
        let d = Path::new(&fx.proj).join(format!("r{i}"));
        let has = |n: &str| std::fs::symlink_metadata(d.join(n)).is_ok();
        if !(has("HEAD") || (has("objects") && has("refs"))) {
            continue;
        }
        if let Ok(text) = std::fs::read(d.join("config")) {
            let bad = efr_sandbox_wire::gitconfig::unsafe_keys(&text, &safe);
            assert!(
                bad.as_ref().is_ok_and(|k| k.is_empty()),
                "{b}: r{i}/config: {bad:?}: {}",
                String::from_utf8_lossy(&text)
            );
        }
        if let Ok(rd) = std::fs::read_dir(d.join("hooks")) {
            let left: Vec<_> = rd
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| !n.to_string_lossy().ends_with(".sample"))
                .collect();
            assert!(left.is_empty(), "{b}: r{i}/hooks: {left:?}");
        }
        meet(fx, &d);
    }
    assert!(!marker(fx, "race").exists(), "{b}: the race planted code");
}

/// Threads of one call race the check.
#[test]
fn racing_writers_cannot_slip_git_code_past_the_check() {
    for b in common::backends() {
        let fx = Fixture::new();
        let [head, config, hooks] = race_loops(&fx);
        let line = format!("( {head} ) & ( {config} ) & ( {hooks} ) & wait; echo raced");
        let r = common::run(&fx, &line, b);
        ran(&r);
        assert!(r.stdout.contains("raced"), "{b:?}: {}", r.all_output());
        nothing_raced_through(&fx, &format!("{b:?}"));
    }
}

/// Two calls on one project race each other: one makes the directories git dirs, the
/// other writes configs and hooks (each call's supervisor orders only its own calls'
/// acts: the other's are undone or replaced after the act).
#[test]
fn two_calls_racing_on_one_project_slip_nothing_through() {
    for b in common::backends() {
        let fx = std::sync::Arc::new(Fixture::new());
        let [head, config, hooks] = race_loops(&fx);
        let writers = format!("( {config} ) & ( {hooks} ) & wait; echo raced");
        let t = {
            let fx = fx.clone();
            std::thread::spawn(move || common::run(&fx, &format!("{head}; echo raced"), b))
        };
        let w = common::run(&fx, &writers, b);
        let h = t.join().unwrap();
        for r in [&w, &h] {
            ran(r);
            assert!(r.stdout.contains("raced"), "{b:?}: {}", r.all_output());
        }
        nothing_raced_through(&fx, &format!("{b:?}"));
    }
}

/// A rebase the user left stopped (an `edit`): the call may not add an `exec` line to its
/// todo list, by hand, through git's own editor or by a rename, so the user's `git rebase
/// --continue` runs nothing of the call's; a rebase the call starts with `--exec` is refused
/// the same way (its list would be left for the user to continue).
#[test]
fn a_call_adds_no_exec_line_to_a_rebase_the_user_continues() {
    for b in common::backends() {
        let fx = Fixture::new();
        let proj = Path::new(&fx.proj);
        let g = |args: &[&str]| {
            let o = user_git(&fx, proj, args);
            assert!(o.status.success(), "{args:?}: {o:?}");
        };
        for i in 1..=3 {
            std::fs::write(proj.join(format!("f{i}")), format!("{i}\n")).unwrap();
            g(&["add", &format!("f{i}")]);
            g(&["commit", "-qm", &format!("c{i}")]);
        }
        let o = Command::new("git")
            .args(["rebase", "-i", "HEAD~2"])
            .current_dir(proj)
            .env("HOME", &fx.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_SEQUENCE_EDITOR", "sed -i 1s/^pick/edit/")
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let todo = proj.join(".git/rebase-merge/git-rebase-todo");
        let before = std::fs::read(&todo).unwrap();
        let m = marker(&fx, "todo").display().to_string();
        let line = format!(
            r#"cd {proj}; t=.git/rebase-merge/git-rebase-todo
echo 'exec touch {m}' >> $t
cp $t /tmp/t && echo 'exec touch {m}' >> /tmp/t && cp /tmp/t $t.new && mv $t.new $t
GIT_EDITOR="sh -c 'echo exec touch {m} >> \$0'" git rebase --edit-todo
echo tried"#,
            proj = fx.proj
        );
        let r = common::run(&fx, &line, b);
        ran(&r);
        assert!(r.stdout.contains("tried"), "{b:?}: {}", r.all_output());
        let todo_path = todo.display().to_string();
        assert!(
            r.outcome.git_denials.iter().any(|d| d.path == todo_path),
            "{b:?}: {:?}\n{}",
            r.outcome.git_denials,
            r.all_output()
        );
        let after = std::fs::read_to_string(&todo).unwrap();
        assert!(
            !after.lines().any(|l| {
                let w = l.split_whitespace().next().unwrap_or("");
                w == "exec" || w == "x"
            }),
            "{b:?}: an exec line got into the todo list:\n{after}\nbefore:\n{}",
            String::from_utf8_lossy(&before)
        );
        let o = Command::new("git")
            .args(["rebase", "--continue"])
            .current_dir(proj)
            .env("HOME", &fx.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_EDITOR", "true")
            .output()
            .unwrap();
        assert!(o.status.success(), "{b:?}: {o:?}");
        assert!(!marker(&fx, "todo").exists(), "{b:?}: the exec line ran");
        // A rebase the call starts with --exec.
        let r = common::run(
            &fx,
            &format!(
                "cd {}; git rebase -x 'touch {m}' HEAD~1; git rebase --abort; echo tried",
                fx.proj
            ),
            b,
        );
        ran(&r);
        assert!(
            r.outcome
                .git_denials
                .iter()
                .any(|d| d.reason.contains("exec line")),
            "{b:?}: {}",
            r.all_output()
        );
        assert!(!marker(&fx, "todo").exists(), "{b:?}");
    }
}

/// A call keeps a config open in a directory that is no git dir, another call makes the
/// directory a git dir, then the first writes through its fd: what git reads stays what
/// was checked (the making call's supervisor puts a fresh config in place after its act).
#[test]
fn a_config_kept_open_across_another_calls_git_init_writes_nothing_git_reads() {
    for b in common::backends() {
        let fx = std::sync::Arc::new(Fixture::new());
        let base = Path::new(&fx.home).parent().unwrap().display().to_string();
        let keeper = format!(
            r#"cd {proj}; mkdir d; printf '[core]\n\tbare = true\n' > d/config
exec 8>>d/config; touch a-ready
i=0; while [ ! -e b-done ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\tfsmonitor = touch {base}/ran-kept\n' >&8
echo wrote"#,
            proj = fx.proj
        );
        let maker = format!(
            r#"cd {proj}; i=0; while [ ! -e a-ready ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
mkdir d/objects d/refs && echo 'ref: refs/heads/main' > d/HEAD && touch b-done; echo made"#,
            proj = fx.proj
        );
        let t = {
            let fx = fx.clone();
            std::thread::spawn(move || common::run(&fx, &keeper, b))
        };
        let m = common::run(&fx, &maker, b);
        let k = t.join().unwrap();
        ran(&m);
        ran(&k);
        assert!(m.stdout.contains("made"), "{b:?}: {}", m.all_output());
        assert!(k.stdout.contains("wrote"), "{b:?}: {}", k.all_output());
        let d = Path::new(&fx.proj).join("d");
        let cfg = std::fs::read_to_string(d.join("config")).unwrap();
        assert!(!cfg.contains("fsmonitor"), "{b:?}: {cfg}");
        meet(&fx, &d);
        assert!(!marker(&fx, "kept").exists(), "{b:?}");
    }
}

/// cargo's git dependencies: libgit2 makes a bare repository (`objects/` and `refs/`
/// first, then an empty `config` by open, then its keys by lock file, link attempt and
/// rename, then a chmod) and a checkout, in the call's cargo home: it builds, with no
/// write refused.
#[test]
fn cargo_builds_a_git_dependency_with_nothing_refused() {
    let cargo_ok = Command::new("cargo")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !cargo_ok && common::skip("cargo is needed") {
        return;
    }
    for b in common::backends() {
        let fx = Fixture::new();
        let dep = Path::new(&fx.other).join("dep");
        std::fs::create_dir_all(dep.join("src")).unwrap();
        std::fs::write(
            dep.join("Cargo.toml"),
            "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        std::fs::write(dep.join("src/lib.rs"), "pub fn two() -> u32 { 2 }\n").unwrap();
        for args in [
            &["init", "-q"][..],
            &["add", "."],
            &["commit", "-qm", "dep"],
        ] {
            let o = user_git(&fx, &dep, args);
            assert!(o.status.success(), "{o:?}");
        }
        let app = Path::new(&fx.proj).join("app");
        std::fs::create_dir_all(app.join("src")).unwrap();
        std::fs::write(
            app.join("Cargo.toml"),
            format!(
                "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\ndep = {{ git = \"file://{}\" }}\n",
                dep.display()
            ),
        )
        .unwrap();
        std::fs::write(
            app.join("src/main.rs"),
            "fn main() { println!(\"{}\", dep::two()); }\n",
        )
        .unwrap();
        let line = format!(
            "cd {} && CARGO_HOME=$PWD/.cargo-home CARGO_TARGET_DIR=$PWD/target cargo build -q && ./target/debug/app",
            app.display()
        );
        let r = common::run(&fx, &line, b);
        ran(&r);
        assert_eq!(r.outcome.code, Some(0), "{b:?}: {}", r.all_output());
        assert_eq!(r.stdout.trim(), "2", "{b:?}: {}", r.all_output());
        assert!(
            r.outcome.denials.is_empty(),
            "{b:?}: refused: {:?}\n{}",
            r.outcome.denials,
            r.all_output()
        );
    }
}
