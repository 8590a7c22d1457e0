//! The surface end to end: `sandbox.surface` on a home built here,
//! `sandbox.surface_respond`, the answers in the state directory taking effect in the next
//! real contained call on both backends, a token file feeding the proxy's denied hosts,
//! `sandbox.floor_write` with its backup, and the `surface` command.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Server, code, collect, command, have, message, skip};
use serde_json::{Value, json};

/// A Hugging Face token of the vendor's shape that looks generated (a fixture such as
/// `hf_abcdef...` is taken for a mention, not a secret), made at run time: a literal token in
/// this file would be one the surface asks about in a clone of the repository.
fn hf() -> String {
    format!("hf_{}", "Vq8Zc2mPx7LkT4rWn9bYd3sGh6JfQa1EuR")
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A home with secrets visible (a project's `.env`, a dotenv of the home, a history, a
/// file of credentials) and masked by the defaults (`~/.ssh`, `~/.aws`).
fn build_home(home: &Path) -> PathBuf {
    let proj = home.join("proj");
    write(&proj.join(".env"), "SECRET=visible-before\n");
    write(&proj.join("src/main.rs"), "fn main() {}\n");
    write(&home.join(".duckdb_history"), "mysql -psecret\n");
    // Masked by the defaults: never reported.
    write(&home.join(".bash_history"), "mysql -psecret\n");
    write(
        &home.join("notes/creds/credentials"),
        "user=a\npassword=b\n",
    );
    write(
        &home.join(".ssh/id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    );
    write(&home.join(".aws/credentials"), "[default]\n");
    proj
}

fn files(r: &Value) -> Vec<(String, Option<String>, bool)> {
    r["files"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["question_id"].as_str().map(str::to_string),
                f["kept"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

fn qid(r: &Value, path: &Path) -> String {
    let p = path.to_str().unwrap();
    files(r)
        .into_iter()
        .find(|(f, _, _)| f == p)
        .and_then(|(_, q, _)| q)
        .unwrap_or_else(|| panic!("no question for {p}: {r}"))
}

/// Runs `line` contained on `backend` through `sandbox.launch`; its stdout and end.
fn launch(
    c: &mut common::Client,
    id: u64,
    line: &str,
    proj: &Path,
    backend: &str,
) -> (String, Value) {
    c.request(
        id,
        "sandbox.launch",
        json!({"line": line, "projects": [proj], "cwd": proj, "backend": backend,
               "conversation": "c1"}),
    );
    let (items, end) = collect(c, id);
    let out: String = items
        .iter()
        .filter(|i| i["kind"] == "output" && i["stream"] == "stdout")
        .map(|i| i["data"].as_str().unwrap_or_default())
        .collect();
    (out, end)
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn questions_answers_and_their_effect_in_the_next_real_call() {
    let s = Server::start(&[]);
    let home = canon(&s.home);
    let proj = build_home(&home);
    let mut c = s.client();
    let r = c.call(
        1,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "c1"}),
    );
    let r = &r["end"];
    let got: Vec<String> = files(r).into_iter().map(|(p, _, _)| p).collect();
    let want: Vec<String> = [
        home.join(".duckdb_history"),
        home.join("notes/creds/credentials"),
        proj.join(".env"),
    ]
    .iter()
    .map(|p| p.display().to_string())
    .collect();
    // The masked ones (~/.ssh, ~/.aws) are not reported: a call cannot read them.
    assert_eq!(got, want, "{r}");
    assert!(
        r.get("changes").is_none(),
        "the first scan has no changes: {r}"
    );
    let env_q = qid(r, &proj.join(".env"));
    let hist_q = qid(r, &home.join(".duckdb_history"));
    // The same ids at the next scan.
    let r2 = c.call(
        2,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "c1"}),
    );
    assert_eq!(qid(&r2["end"], &proj.join(".env")), env_q);
    assert_eq!(files(&r2["end"]), files(r));

    for (i, backend) in common::backends().into_iter().enumerate() {
        let id = 10 + 10 * i as u64;
        write(&proj.join(".env"), "SECRET=visible-before\n");
        if i > 0 {
            // Answered masks persist: start this backend over with no answers.
            std::fs::remove_file(home.join(".local/state/efr/surface.json")).unwrap();
        }
        let env_q = qid(
            &c.call(
                id + 1,
                "sandbox.surface",
                json!({"projects": [proj], "conversation": "c1"}),
            )["end"],
            &proj.join(".env"),
        );
        let (out, end) = launch(&mut c, id + 2, "cat .env; echo END", &proj, backend);
        assert_eq!(out, "SECRET=visible-before\nEND\n", "{backend}: {end}");
        let a = c.call(
            id + 3,
            "sandbox.surface_respond",
            json!({"conversation": "c1", "question_id": env_q, "keep": false}),
        );
        assert_eq!(a["end"]["masked"], json!(true), "{a}");
        assert_eq!(a["end"]["path"], json!(proj.join(".env")), "{a}");
        // The next real call sees it empty; the file outside is whole.
        let (out, end) = launch(&mut c, id + 4, "cat .env; echo END", &proj, backend);
        assert_eq!(out, "END\n", "{backend}: {end}");
        assert_eq!(
            std::fs::read_to_string(proj.join(".env")).unwrap(),
            "SECRET=visible-before\n"
        );
        // The next scan does not list it, and says it is masked now.
        let r = c.call(
            id + 5,
            "sandbox.surface",
            json!({"projects": [proj], "conversation": "c1"}),
        );
        let r = &r["end"];
        assert!(
            !files(r).iter().any(|(p, _, _)| p.ends_with("proj/.env")),
            "{backend}: {r}"
        );
        let ch = &r["changes"][0];
        assert_eq!(
            (&ch["change"], &ch["masked"]),
            (&json!("disappeared"), &json!(true)),
            "{r}"
        );
    }
    let _ = env_q;

    // keep: no more question, until what it holds changes.
    let a = c.call(
        50,
        "sandbox.surface_respond",
        json!({"conversation": "c1", "question_id": hist_q, "keep": true}),
    );
    assert_eq!(a["end"]["keep"], json!(true), "{a}");
    let r = c.call(
        51,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "c1"}),
    );
    let h = files(&r["end"])
        .into_iter()
        .find(|(p, _, _)| p.ends_with(".duckdb_history"))
        .unwrap();
    assert_eq!((h.1, h.2), (None, true), "{r}");
    write(
        &home.join(".duckdb_history"),
        &format!("mysql -psecret\nexport HF_TOKEN={}\n", hf()),
    );
    let r = c.call(
        52,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "c1"}),
    );
    assert_eq!(qid(&r["end"], &home.join(".duckdb_history")), hist_q, "{r}");
    let ch: Vec<&Value> = r["end"]["changes"].as_array().unwrap().iter().collect();
    assert_eq!(ch.len(), 1, "{r}");
    assert_eq!(ch[0]["change"], json!("changed"));
    assert_eq!(ch[0]["why"], json!("now holds a token for huggingface.co"));

    // Unknown and stale ids are not_found; a bad id or conversation is invalid.
    for (id, q, conv) in [(60, "q99", "c1"), (61, "q1", "other")] {
        let e = c.call(
            id,
            "sandbox.surface_respond",
            json!({"conversation": conv, "question_id": q, "keep": true}),
        );
        assert_eq!(code(&e), "not_found", "{e}");
        assert!(message(&e).contains(q), "{e}");
    }
    for (id, p) in [
        (
            62,
            json!({"conversation": "c1", "question_id": "x1", "keep": true}),
        ),
        (
            63,
            json!({"conversation": "../x", "question_id": "q1", "keep": true}),
        ),
        (64, json!({"conversation": "c1"})),
    ] {
        let e = c.call(id, "sandbox.surface_respond", p);
        assert_eq!(code(&e), "invalid", "{e}");
    }
    let e = c.call(
        65,
        "sandbox.surface",
        json!({"projects": ["rel"], "conversation": "c1"}),
    );
    assert_eq!(code(&e), "invalid", "{e}");

    // The state file: 0600, and `efr-sandbox config` lists the answered masks.
    let state = home.join(".local/state/efr/surface.json");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let out = command(s.dir.path()).arg("config").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{}", proj.join(".env").display())) && text.contains("surface"),
        "{text}"
    );
    let out = command(s.dir.path())
        .args(["config", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["surface_masks"], json!([proj.join(".env")]), "{v}");
}

#[test]
fn token_files_feed_the_proxy_and_a_new_token_is_a_change() {
    if !have("curl") {
        skip("curl is needed");
        return;
    }
    let s = Server::start(&[]);
    let home = canon(&s.home);
    let proj = home.join("proj");
    write(
        &proj.join(".npmrc"),
        &format!("//npm.example.com/:_authToken={}\n", "Tq4vN8mZx2Lp7RkW9s"),
    );
    write(&proj.join("deploy/.env"), "A=1\n");
    let mut c = s.client();
    let r = c.call(
        1,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "t"}),
    );
    let npmrc = r["end"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(".npmrc"))
        .cloned()
        .unwrap();
    assert_eq!(npmrc["hosts"], json!(["npm.example.com"]), "{r}");
    let blocked = |end: &Value| end["end"]["sandbox_summary"]["blocked"].clone();
    for (i, backend) in common::backends().into_iter().enumerate() {
        let id = 10 + 10 * i as u64;
        write(&proj.join("deploy/.env"), "A=1\n");
        let _ = c.call(
            id,
            "sandbox.surface",
            json!({"projects": [proj], "conversation": "t"}),
        );
        let (_, end) = launch(
            &mut c,
            id + 1,
            "curl -sS https://huggingface.co/; true",
            &proj,
            backend,
        );
        assert_eq!(
            blocked(&end),
            json!([{"host": "huggingface.co", "port": 443, "reason": "not_allowed"}]),
            "{backend}: {end}"
        );
        // A token written into a watched file mid-conversation: the next call's proxy
        // denies its host, with no scan between.
        write(
            &proj.join("deploy/.env"),
            &format!("A=1\nHF_TOKEN={}\n", hf()),
        );
        let (_, end) = launch(
            &mut c,
            id + 2,
            "curl -sS https://huggingface.co/; true",
            &proj,
            backend,
        );
        assert_eq!(
            blocked(&end),
            json!([{"host": "huggingface.co", "port": 443, "reason": "denied"}]),
            "{backend}: {end}"
        );
    }
    // A token added to .npmrc between two scans: changed, with why.
    write(
        &proj.join(".npmrc"),
        &format!(
            "//npm.example.com/:_authToken={}\n//registry.npmjs.org/:_authToken={}\n",
            "Tq4vN8mZx2Lp7RkW9s", "Hk3Lp9Qw2Ez7Rt5Yu1"
        ),
    );
    let r = c.call(
        40,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "t"}),
    );
    let ch: Vec<&Value> = r["end"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["path"].as_str().unwrap().ends_with(".npmrc"))
        .collect();
    assert_eq!(ch.len(), 1, "{r}");
    assert_eq!(ch[0]["change"], json!("changed"));
    assert_eq!(
        ch[0]["why"],
        json!("now holds a token for registry.npmjs.org")
    );
    let (_, end) = launch(
        &mut c,
        41,
        "curl -sS https://registry.npmjs.org/; true",
        &proj,
        "native",
    );
    assert_eq!(
        blocked(&end),
        json!([{"host": "registry.npmjs.org", "port": 443, "reason": "denied"}]),
        "{end}"
    );
}

#[test]
fn a_floor_write_backs_up_first_also_through_a_link() {
    let s = Server::start(&[]);
    let home = canon(&s.home);
    let mut c = s.client();
    let rc = home.join(".bashrc");
    write(&rc, "alias ll='ls -l'\n");
    let r = c.call(
        1,
        "sandbox.floor_write",
        json!({"path": "~/.bashrc", "line": "export A=1"}),
    );
    let hc = &r["end"]["home_file_changed"];
    assert_eq!(hc["path"], json!(rc), "{r}");
    assert_eq!(hc["floor"], json!(true), "{r}");
    assert!(hc.get("real").is_none(), "{r}");
    let b = PathBuf::from(hc["backup"].as_str().unwrap());
    assert!(b.starts_with(home.join(".local/state/efr/backups")), "{r}");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "alias ll='ls -l'\n");
    assert_eq!(
        std::fs::metadata(&b).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::read_to_string(&rc).unwrap(),
        "alias ll='ls -l'\nexport A=1\n"
    );
    // Through a link to a file in the home: the real file is backed up and written.
    let real = home.join("dotfiles/zshrc");
    write(&real, "old\n");
    std::os::unix::fs::symlink(&real, home.join(".zshrc")).unwrap();
    let r = c.call(
        2,
        "sandbox.floor_write",
        json!({"path": home.join(".zshrc"), "edit": "new\n"}),
    );
    let hc = &r["end"]["home_file_changed"];
    assert_eq!(hc["real"], json!(real), "{r}");
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "new\n");
    assert_eq!(
        std::fs::read_to_string(hc["backup"].as_str().unwrap()).unwrap(),
        "old\n"
    );
    // Refused: a link out of the home, a file that is no floor, both or neither payload,
    // an edit over 8 KiB.
    let outside = s.dir.path().join("outside");
    write(&outside, "keep\n");
    std::os::unix::fs::symlink(&outside, home.join(".profile")).unwrap();
    for (id, p, want) in [
        (
            3,
            json!({"path": "~/.profile", "edit": "x"}),
            "outside the home",
        ),
        (
            4,
            json!({"path": "~/notes.txt", "edit": "x"}),
            "not a floor file",
        ),
        (
            5,
            json!({"path": "~/.bashrc"}),
            "exactly one of edit and line",
        ),
        (
            6,
            json!({"path": "~/.bashrc", "edit": "x".repeat(8193)}),
            "over the 8192",
        ),
        (7, json!({"path": "rel", "edit": "x"}), "not absolute"),
    ] {
        let e = c.call(id, "sandbox.floor_write", p);
        assert_eq!(code(&e), "invalid", "{e}");
        assert!(message(&e).contains(want), "{want}: {e}");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
}

fn cli(dir: &Path, args: &[&str]) -> std::process::Output {
    command(dir).args(args).output().unwrap()
}

#[test]
fn the_surface_command_lists_and_answers() {
    let dir = common::temp_env();
    let home = canon(&dir.path().join("home"));
    let proj = build_home(&home);
    let out = cli(
        dir.path(),
        &["surface", "--project", proj.to_str().unwrap()],
    );
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&proj.join(".env").display().to_string()),
        "{text}"
    );
    assert!(
        text.contains("efr-sandbox surface respond q") && text.contains("--mask"),
        "{text}"
    );
    let out = cli(
        dir.path(),
        &["surface", "--project", proj.to_str().unwrap(), "--json"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let q = qid(&v, &proj.join(".env"));
    let out = cli(dir.path(), &["surface", "respond", &q, "--mask"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("masked"),
        "{out:?}"
    );
    let st: Value =
        serde_json::from_slice(&std::fs::read(home.join(".local/state/efr/surface.json")).unwrap())
            .unwrap();
    assert_eq!(
        st["answers"][proj.join(".env").to_str().unwrap()]["keep"],
        json!(false),
        "{st}"
    );
    // An unknown id: a clear error and exit status 1.
    let out = cli(dir.path(), &["surface", "respond", "q99", "--keep"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no open question q99"),
        "{out:?}"
    );
    let out = cli(dir.path(), &["surface", "respond", "nope", "--keep"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn concurrent_responds_from_processes_and_a_killed_writer_lose_nothing() {
    let dir = common::temp_env();
    let home = canon(&dir.path().join("home"));
    for i in 0..12 {
        write(
            &home.join(format!("p{i}/.env")),
            &format!("A=1\nAPI_KEY=Tq4vN8mZx2Lp7R{i}\n"),
        );
    }
    let out = cli(dir.path(), &["surface", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<String> = (0..12)
        .map(|i| qid(&v, &home.join(format!("p{i}/.env"))))
        .collect();
    // Twelve processes answer at once: every answer is kept.
    let children: Vec<_> = ids
        .iter()
        .map(|q| {
            command(dir.path())
                .args(["surface", "respond", q, "--mask"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut ch in children {
        assert!(ch.wait().unwrap().success());
    }
    let state = home.join(".local/state/efr/surface.json");
    let read = || -> Value { serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap() };
    assert_eq!(read()["answers"].as_object().unwrap().len(), 12);
    // A writer killed halfway through its write (the test hook makes it pause there): the
    // old file stays whole, and the next writer takes the lock and writes.
    let before = std::fs::read(&state).unwrap();
    let mut ch: Command = command(dir.path());
    ch.args(["surface", "--json"])
        .env("EFR_SURFACE_TEST_SLOW_WRITE_MS", "3000")
        .stdout(Stdio::null());
    let mut child = ch.spawn().unwrap();
    let tmp = home.join(".local/state/efr/.surface.json.tmp");
    let t = std::time::Instant::now();
    while !tmp.exists() || std::fs::metadata(&tmp).unwrap().len() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the writer never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(std::fs::read(&state).unwrap(), before);
    assert_eq!(read()["answers"].as_object().unwrap().len(), 12);
    let out = cli(dir.path(), &["surface", "respond", &ids[0], "--keep"]);
    assert!(out.status.success(), "{out:?}");
    let after = read();
    assert_eq!(after["answers"].as_object().unwrap().len(), 12);
    assert_eq!(
        after["answers"][home.join("p0/.env").to_str().unwrap()]["keep"],
        json!(true)
    );
}

#[test]
fn a_state_file_that_cannot_be_read_stops_the_call_not_its_masks() {
    let s = Server::start(&[]);
    let home = canon(&s.home);
    let proj = build_home(&home);
    write(&home.join(".local/state/efr/surface.json"), "{broken");
    let mut c = s.client();
    let (out, end) = launch(&mut c, 1, "cat .env", &proj, "native");
    assert_eq!(out, "", "{end}");
    let e = end["end"]["sandbox_summary"]["setup_error"]
        .as_str()
        .unwrap_or_else(|| panic!("no setup_error: {end}"));
    assert!(
        e.contains("the surface's answers") && e.contains("surface.json"),
        "{e}"
    );
    let r = c.call(2, "sandbox.surface", json!({"conversation": "c1"}));
    assert_eq!(code(&r), "internal", "{r}");
    assert!(message(&r).contains("cannot parse"), "{r}");
}

/// Scans (conversation `c1`) and answers "mask" for the project's `.env` (ids 1 and 2).
fn mask_env_file(c: &mut common::Client, proj: &Path) {
    let r = c.call(
        1,
        "sandbox.surface",
        json!({"projects": [proj], "conversation": "c1"}),
    );
    let q = qid(&r["end"], &proj.join(".env"));
    let r = c.call(
        2,
        "sandbox.surface_respond",
        json!({"conversation": "c1", "question_id": q, "keep": false}),
    );
    assert!(r.get("error").is_none(), "{r}");
}

#[test]
fn a_call_whose_project_is_the_home_cannot_touch_the_answers() {
    // The home as the project root: everything in it writable but the masks and floors.
    // The surface's state (answers, backups) is masked: the call neither reads nor changes
    // it, so it cannot undo a "mask" answer for its next call.
    let s = Server::start(&[]);
    let home = canon(&s.home);
    let proj = build_home(&home);
    let mut c = s.client();
    mask_env_file(&mut c, &proj);
    let state = home.join(".local/state/efr/surface.json");
    let before = std::fs::read(&state).unwrap();
    let mut id = 3;
    for backend in common::backends() {
        let line = format!(
            "cat {st}; echo '{{}}' > {st}; rm -f {st}; mv {st} {st}.x; \
             ls -a {dir}; cat {env}; echo done",
            st = state.display(),
            dir = state.parent().unwrap().display(),
            env = proj.join(".env").display()
        );
        let (out, end) = launch(&mut c, id, &line, &home, backend);
        id += 1;
        assert!(out.contains("done"), "{backend}: {out} {end}");
        assert!(
            !out.contains("question") && !out.contains("visible-before"),
            "{backend}: {out}"
        );
        assert_eq!(std::fs::read(&state).unwrap(), before, "{backend}: {end}");
        // The answer still holds in the next call.
        let (out, _) = launch(&mut c, id, "cat .env; echo end", &proj, backend);
        id += 1;
        assert_eq!(out, "end\n", "{backend}");
    }
}

#[test]
fn an_approved_line_that_writes_floor_files_reports_them_with_backups() {
    // An unsandboxed call (an approved exit) may write every floor file: the service reads
    // them before, and after the call reports what changed with the content from before as
    // a backup (a new name each time, 0600), through links too. A contained call without a
    // write grant reaches no floor: nothing to report, nothing read.
    let s = Server::start(&[]);
    let home = canon(&s.home);
    let proj = build_home(&home);
    write(&home.join("dotfiles/bashrc"), "export A=1\n");
    std::os::unix::fs::symlink(home.join("dotfiles/bashrc"), home.join(".bashrc")).unwrap();
    write(&home.join(".local/bin/tool"), "#!/bin/sh\necho old\n");
    write(&home.join(".profile"), "PATH=$PATH\n");
    let mut c = s.client();
    let line = "echo 'alias ll=ls' >> ~/.bashrc; echo 'echo new' > ~/.local/bin/tool; \
                echo made > ~/.local/bin/other; rm ~/.profile";
    c.request(
        1,
        "sandbox.launch",
        json!({"line": line, "projects": [proj], "cwd": proj, "unsandboxed": true}),
    );
    let (_, end) = collect(&mut c, 1);
    let changed = end["end"]["sandbox_summary"]["home_file_changed"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no home_file_changed: {end}"));
    let find = |p: &Path| {
        changed
            .iter()
            .find(|e| e["path"] == p.to_str().unwrap())
            .cloned()
            .unwrap_or_else(|| panic!("no {} in {end}", p.display()))
    };
    let backup_of = |e: &Value| {
        let b = PathBuf::from(
            e["backup"]
                .as_str()
                .unwrap_or_else(|| panic!("no backup: {e}")),
        );
        assert_eq!(
            std::fs::metadata(&b).unwrap().permissions().mode() & 0o777,
            0o600,
            "{e}"
        );
        std::fs::read_to_string(b).unwrap()
    };
    let rc = find(&home.join(".bashrc"));
    assert_eq!(rc["floor"], true, "{rc}");
    assert_eq!(
        rc["real"],
        home.join("dotfiles/bashrc").to_str().unwrap(),
        "{rc}"
    );
    assert_eq!(backup_of(&rc), "export A=1\n");
    assert_eq!(
        std::fs::read_to_string(home.join("dotfiles/bashrc")).unwrap(),
        "export A=1\nalias ll=ls\n"
    );
    assert_eq!(
        backup_of(&find(&home.join(".local/bin/tool"))),
        "#!/bin/sh\necho old\n"
    );
    assert_eq!(backup_of(&find(&home.join(".profile"))), "PATH=$PATH\n");
    let made = find(&home.join(".local/bin/other"));
    assert!(made.get("backup").is_none(), "{made}");
    assert_eq!(changed.len(), 4, "{end}");
    // The same line again: a second backup, the first one kept.
    c.request(
        2,
        "sandbox.launch",
        json!({"line": "echo 'alias la=ls' >> ~/.bashrc", "projects": [proj], "cwd": proj,
               "unsandboxed": true}),
    );
    let (_, end2) = collect(&mut c, 2);
    let rc2 = end2["end"]["sandbox_summary"]["home_file_changed"][0].clone();
    assert_ne!(rc2["backup"], rc["backup"], "{end2}");
    assert_eq!(backup_of(&rc), "export A=1\n");
    assert_eq!(backup_of(&rc2), "export A=1\nalias ll=ls\n");
    // A contained call: floors are read-only, nothing is reported.
    for (i, backend) in common::backends().into_iter().enumerate() {
        let (_, end) = launch(
            &mut c,
            10 + i as u64,
            "echo x >> ~/.bashrc; true",
            &proj,
            backend,
        );
        assert!(
            end["end"]["sandbox_summary"]
                .get("home_file_changed")
                .is_none(),
            "{backend}: {end}"
        );
    }
}

#[test]
fn the_state_is_masked_where_xdg_state_home_puts_it() {
    // With $XDG_STATE_HOME outside ~/.local/state, the defaults' mask of ~/.local/state/efr
    // does not cover the answers: the call's masks add the real state dir.
    let dir = common::temp_env();
    let home = canon(&dir.path().join("home"));
    let proj = build_home(&home);
    let state_home = home.join("xdg-state");
    std::fs::create_dir_all(&state_home).unwrap();
    let socket = dir.path().join("run").join("sandbox.sock");
    let mut cmd = command(dir.path());
    cmd.env("XDG_STATE_HOME", &state_home)
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--test-methods");
    let s = Server::spawn(cmd, dir, socket);
    let mut c = s.client();
    mask_env_file(&mut c, &proj);
    let state = state_home.join("efr/surface.json");
    let before = std::fs::read(&state).unwrap();
    for (i, backend) in common::backends().into_iter().enumerate() {
        let line = format!(
            "cat {st}; echo '{{}}' > {st}; rm -f {st}; echo done",
            st = state.display()
        );
        let (out, end) = launch(&mut c, 10 + i as u64, &line, &home, backend);
        assert!(
            out.contains("done") && !out.contains("question"),
            "{backend}: {out} {end}"
        );
        assert_eq!(std::fs::read(&state).unwrap(), before, "{backend}: {end}");
    }
}
