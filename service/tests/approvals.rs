//! Approvals the user gives to the CLI routes' refused calls: a call of `efr-bash` (an
//! agent's shell) or `efr-sandbox run` refused a host waits in the service the CLI starts;
//! `efr-sandbox approvals` lists it, `approve ID` gives its grants to its conversation (the
//! same line then works there, and only there), `deny` drops it, `--always` writes the
//! rule, a restarted service keeps both, and nothing inside a contained call can approve.
//! The host is a loopback test server, `registry.test` to the calls (`[network.resolve]`).

mod common;
mod registry;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{BIN, backends, command};
use serde_json::Value;

const EFR_BASH: &str = env!("CARGO_BIN_EXE_efr-bash");

struct Env {
    dir: tempfile::TempDir,
    rt: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        // Not under /tmp: a contained call has its own /tmp.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        for d in ["home", "config/efr", "proj", "srv"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(
            dir.path().join("config/efr/config.toml"),
            registry::Server::config(),
        )
        .unwrap();
        std::fs::write(dir.path().join("srv/f"), "hello-approved\n").unwrap();
        let rt = tempfile::tempdir_in("/dev/shm").unwrap();
        Env { dir, rt }
    }

    fn proj(&self) -> PathBuf {
        self.dir.path().join("proj")
    }

    /// A command of `prog` for this user, free to use (and start) the service; one it
    /// starts ends after 1.5 s without a client.
    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("HOME", self.dir.path().join("home"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_RUNTIME_DIR", self.rt.path())
            .env("EFR_SANDBOX_IDLE_EXIT", "1.5")
            .env_remove("XDG_STATE_HOME")
            .env_remove("EFR_SANDBOX_SOCKET")
            .env_remove("EFR_SANDBOX_NO_SERVICE")
            .env_remove("EFR_SANDBOX_CONVERSATION")
            .env_remove("EFR_SANDBOX_GRANTS")
            .current_dir(self.proj())
            .stdin(std::process::Stdio::null());
        c
    }

    /// The agent's shell running `line` in conversation `conv`.
    fn shell(&self, backend: &str, conv: &str, line: &str) -> Output {
        let mut c = self.cmd(EFR_BASH);
        c.env("EFR_SANDBOX_CONVERSATION", conv)
            .env("EFR_SANDBOX_PROJECT", self.proj())
            .args(["-c", line]);
        with_backend(c, backend, self).output().unwrap()
    }

    /// `efr-sandbox ARGS`.
    fn cli(&self, args: &[&str]) -> Output {
        self.cmd(BIN).args(args).output().unwrap()
    }

    fn pending(&self) -> Vec<Value> {
        let o = self.cli(&["approvals", "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        serde_json::from_slice::<Vec<Value>>(&o.stdout).unwrap()
    }

    fn config(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("config/efr/config.toml")).unwrap()
    }

    /// Waits for the service started by the CLI to end (idle), so the next command starts
    /// a new one.
    fn service_stops(&self) {
        let sock = self.rt.path().join("efr/sandbox.sock");
        let t = Instant::now();
        while sock.exists() {
            assert!(t.elapsed() < Duration::from_secs(20), "the service stays");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The backend for a shell call (the config's `sandbox.backend`: efr-bash takes no
/// options of ours).
fn with_backend(c: Command, backend: &str, e: &Env) -> Command {
    let cfg = e.dir.path().join("config/efr/config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("[sandbox]") && !l.starts_with("backend ="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(
        &cfg,
        format!("{without}[sandbox]\nbackend = \"{backend}\"\n"),
    )
    .unwrap();
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The id in a refusal's "ask the user to run 'efr-sandbox approve ID'".
fn approval_id(err: &str) -> String {
    let (_, rest) = err
        .split_once("'efr-sandbox approve ")
        .unwrap_or_else(|| panic!("no approval in {err}"));
    rest.split('\'').next().unwrap().to_string()
}

fn curl(port: u16) -> String {
    format!("curl -fsS http://{}:{port}/f", registry::HOST)
}

#[test]
fn a_refused_host_approved_by_the_user_works_in_its_conversation_only() {
    for backend in backends() {
        let e = Env::new();
        let srv = registry::Server::start(&e.dir.path().join("srv"));
        let line = curl(srv.port);
        let want = format!("host={}:{}", registry::HOST, srv.port);

        // Refused: the model reads what it needs and that the user can approve it.
        let o = e.shell(backend, "c1", &line);
        let err = text(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{backend}: {err}");
        assert!(
            err.contains(&format!(
                ": needs {want}; ask the user to run 'efr-sandbox approve "
            )) && err.contains("(then retry the same command)"),
            "{backend}: {err}"
        );
        assert!(
            !err.contains("--grant"),
            "the model is not told to grant: {err}"
        );
        let refusals: Vec<&str> = err.lines().filter(|l| l.contains("refused:")).collect();
        assert_eq!(refusals.len(), 1, "one line: {err}");
        let id = approval_id(&err);
        // The same refusal again keeps its id.
        let again = e.shell(backend, "c1", &line);
        assert_eq!(approval_id(&text(&again.stderr)), id);

        let pending = e.pending();
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0]["id"], id.as_str());
        assert_eq!(pending[0]["line"], line.as_str());
        assert_eq!(pending[0]["conversation"], "c1");
        let o = e.cli(&["approvals"]);
        let listed = text(&o.stdout);
        assert!(
            listed.contains(&id) && listed.contains("conversation c1") && listed.contains(&want),
            "{listed}"
        );

        // Nothing inside a contained call can approve: not the CLI, not a raw connect to
        // the socket (masked in every call).
        let sock = e.rt.path().join("efr/sandbox.sock");
        let inside = format!(
            "{BIN} approve {id}; echo \"cli=$?\"; python3 -c 'import socket,sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print(\"connected\")
except OSError as x:
    print(\"refused\", x.errno)' {}",
            sock.display()
        );
        let o = e.shell(backend, "c1", &inside);
        let out = text(&o.stdout);
        assert!(
            out.contains("cli=1") && out.contains("refused ") && !out.contains("connected"),
            "{backend}: {out}\n{}",
            text(&o.stderr)
        );
        assert!(
            text(&o.stderr).contains("inside a contained call"),
            "{}",
            text(&o.stderr)
        );
        assert_eq!(e.pending().len(), 1, "still pending");

        // Approved by the user: the same line in the same conversation works.
        let o = e.cli(&["approve", &id]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert_eq!(
            text(&o.stdout),
            format!("granted {want} to the calls of conversation c1\n")
        );
        assert!(e.pending().is_empty());
        // The proxy learns only on the retry that the requests are plain HTTP: that needs
        // the host's plain-HTTP grant, a second approval.
        let o = e.shell(backend, "c1", &line);
        let err = text(&o.stderr);
        assert!(err.contains(&format!(": needs {want}:http; ")), "{err}");
        let o = e.cli(&["approve", &approval_id(&err)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let o = e.shell(backend, "c1", &line);
        assert_eq!(
            (o.status.code(), text(&o.stdout).as_str()),
            (Some(0), "hello-approved\n"),
            "{backend}: {}",
            text(&o.stderr)
        );
        // Another conversation is still refused.
        let o = e.shell(backend, "c2", &line);
        assert_ne!(o.status.code(), Some(0));
        let id2 = approval_id(&text(&o.stderr));
        assert_ne!(id2, id);

        // A restarted service keeps the pending approval and the approved grants.
        e.service_stops();
        let pending = e.pending();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0]["id"], id2.as_str());
        let o = e.shell(backend, "c1", &line);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));

        // `--always` writes the rule, and the conversation gets the grant.
        let o = e.cli(&["approve", "--always", &id2]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(
            text(&o.stdout).contains("saved the always rule: allow host exits to registry.test"),
            "{}",
            text(&o.stdout)
        );
        let cfg = e.config();
        assert!(
            cfg.contains("[[always]]") && cfg.contains("host = \"registry.test\""),
            "{cfg}"
        );
        // The conversation got the host grant with it: what it needs now is plain HTTP.
        let o = e.shell(backend, "c2", &line);
        let err = text(&o.stderr);
        assert!(err.contains(&format!(": needs {want}:http; ")), "{err}");
        let o = e.cli(&["approve", &approval_id(&err)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let o = e.shell(backend, "c2", &line);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
}

#[test]
fn run_names_the_grant_and_the_approval_and_deny_drops_it() {
    let e = Env::new();
    let srv = registry::Server::start(&e.dir.path().join("srv"));
    let line = curl(srv.port);
    let want = format!("host={}:{}", registry::HOST, srv.port);
    let proj = e.proj();
    let o = e
        .cmd(BIN)
        .args(["run", "--conversation", "r1", "--project"])
        .arg(&proj)
        .args(["--", &line])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "; retry with --grant {want}; or ask the user to run 'efr-sandbox approve "
        )),
        "{err}"
    );
    let id = approval_id(&err);
    let o = e.cli(&["deny", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with(&format!("denied {id}: ")));
    assert!(e.pending().is_empty());
    // Gone: approving it now is a clear error.
    let o = e.cli(&["approve", &id]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains(&format!("no pending approval \"{id}\"")),
        "{}",
        text(&o.stderr)
    );
    // Bad ids.
    for bad in ["zzzz", "../x", "", "ABCD"] {
        let o = e.cli(&["approve", bad]);
        assert_eq!(o.status.code(), Some(1), "{bad}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("approval"),
            "{bad}: {}",
            text(&o.stderr)
        );
    }
    // Without the service the user's run keeps its --grant line.
    let o = command(e.dir.path())
        .current_dir(&proj)
        .args(["run", "--project"])
        .arg(&proj)
        .args(["--", &line])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("; retry with --grant {want}\n")),
        "{err}"
    );
    // Run here (EFR_SANDBOX_NO_SERVICE) while the service runs: the refusal still waits as
    // an approval, and the approved grants reach the calls run here.
    let here = |conv: &str, rt: &std::path::Path| {
        if rt == e.rt.path() {
            // Asking the service starts it when it went idle.
            e.pending();
        }
        e.cmd(EFR_BASH)
            .env("EFR_SANDBOX_NO_SERVICE", "1")
            .env("XDG_RUNTIME_DIR", rt)
            .env("EFR_SANDBOX_PROJECT", &proj)
            .env("EFR_SANDBOX_CONVERSATION", conv)
            .args(["-c", &line])
            .output()
            .unwrap()
    };
    let o = here("h1", e.rt.path());
    let id = approval_id(&text(&o.stderr));
    assert_eq!(e.pending()[0]["line"], line.as_str());
    assert_eq!(e.cli(&["approve", &id]).status.code(), Some(0));
    let o = here("h1", e.rt.path());
    let id = approval_id(&text(&o.stderr));
    assert_eq!(e.cli(&["approve", &id]).status.code(), Some(0));
    let o = here("h1", e.rt.path());
    assert_eq!(
        (o.status.code(), text(&o.stdout).as_str()),
        (Some(0), "hello-approved\n"),
        "{}",
        text(&o.stderr)
    );
    // No service there: no approval, and the model is told why.
    let none = tempfile::tempdir_in("/dev/shm").unwrap();
    let o = here("h1", none.path());
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            ": needs {want}; the user can approve it only through their service, and none was reached"
        )) && !err.contains("--grant"),
        "{err}"
    );
    assert!(
        !none.path().join("efr/sandbox.sock").exists(),
        "no service was started"
    );
}

/// A corrupt store file: kept aside, said in the log, and the calls go on.
#[test]
fn a_corrupt_store_is_set_aside() {
    let e = Env::new();
    let state = e.dir.path().join("home/.local/state/efr-sandbox");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("approvals.json"),
        "{\"version\": 1, \"pending\": [",
    )
    .unwrap();
    assert!(e.pending().is_empty());
    assert!(state.join("approvals.json.bad").exists());
    let log = std::fs::read_to_string(e.rt.path().join("efr/serve.log")).unwrap();
    assert!(log.contains("does not read"), "{log}");
}

/// A peer of another uid the service lets in (`serve --allow-uid`) may not list, approve or
/// deny: approvals are the service's own user's. Needs root (a real process of uid 65534).
#[test]
fn another_allowed_uid_cannot_list_or_decide() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !common::is_root() || !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("needs root and /usr/bin/python3: a process of another uid is the peer");
        return;
    }
    let me = nix::unistd::geteuid().as_raw().to_string();
    let s = common::Server::start(&["--allow-uid", &me, "--allow-uid", "65534"]);
    for (p, mode) in [
        (s.dir.path().to_path_buf(), 0o755),
        (s.socket.parent().unwrap().to_path_buf(), 0o755),
        (s.socket.clone(), 0o666),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let client = r#"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
def send(v):
    b = json.dumps(v).encode()
    s.sendall(struct.pack(">I", len(b)) + b)
def recv():
    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(s.recv(n, socket.MSG_WAITALL))
send({"id": 1, "method": "hello", "params": {"protocol": 1}})
recv()
send({"id": 2, "method": "sandbox.approvals", "params": {}})
print(json.dumps(recv()))
send({"id": 3, "method": "sandbox.approval_decide", "params": {"id": "abcd", "decision": "approve"}})
print(json.dumps(recv()))
send({"id": 4, "method": "sandbox.approval_record", "params": {"line": "x", "exits": []}})
print(json.dumps(recv()))
send({"id": 5, "method": "sandbox.standing_grants", "params": {"conversation": "c1"}})
print(json.dumps(recv()))
"#;
    let o = Command::new("/usr/bin/python3")
        .args(["-c", client])
        .arg(&s.socket)
        .current_dir("/")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    let answers: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 4, "{out}\n{}", text(&o.stderr));
    for a in &answers {
        assert_eq!(a["error"]["code"], "forbidden", "{a}");
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not uid 65534"),
            "{a}"
        );
    }
    // The service's own uid is answered.
    let mut c = s.client();
    let r = c.call(1, "sandbox.approvals", Value::Null);
    assert_eq!(r["end"]["approvals"], serde_json::json!([]), "{r}");
}

/// A line Codex's hook denies (Codex has no approval prompt for a rewritten call) waits as
/// an approval named in the reason the model reads; approved by the user, the same hook
/// input is allowed with its grant, and the rewritten line, run as Codex runs it
/// (`bash -lc`), reaches the host. Another session of the agent still gets the denial.
#[test]
fn a_line_the_hook_denies_waits_for_the_user_and_then_runs() {
    let e = Env::new();
    let srv = registry::Server::start(&e.dir.path().join("srv"));
    let line = curl(srv.port);
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hook/codex-bash.json"),
    )
    .unwrap()
    .replace("@CWD@", &e.proj().to_string_lossy())
    .replace("@LINE@", &Value::String(line.clone()).to_string());
    let hook = |input: &str| -> Value {
        let mut c = e.cmd(BIN);
        c.args(["hook", "codex"]);
        let o = common::output_with_stdin(&mut c, input.as_bytes());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let decision = |v: &Value| {
        (
            v["hookSpecificOutput"]["permissionDecision"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            v["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    };
    let (d, why) = decision(&hook(&fixture));
    assert_eq!(d, "deny", "{why}");
    assert!(
        why.contains("Ask the user to run `efr-sandbox approve ")
            && why.contains(&format!("host={}:{}", registry::HOST, srv.port)),
        "{why}"
    );
    assert!(
        !why.contains("--grant"),
        "the model is not told to grant: {why}"
    );
    let id = why
        .split("efr-sandbox approve ")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .unwrap()
        .to_string();
    let pending = e.pending();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["line"], line.as_str());
    assert_eq!(
        pending[0]["conversation"],
        "codex-0199a213-81c0-7800-8aa1-bbab2a035a53"
    );

    let o = e.cli(&["approve", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v = hook(&fixture);
    let (d, why) = decision(&v);
    assert_eq!(d, "allow", "{why}");
    let cmd = v["hookSpecificOutput"]["updatedInput"]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let o = e.cmd("bash").args(["-lc", &cmd]).output().unwrap();
    assert_eq!(
        (o.status.code(), text(&o.stdout).as_str()),
        (Some(0), "hello-approved\n"),
        "{}",
        text(&o.stderr)
    );

    // Another session of the agent: another conversation, still denied.
    let other = fixture.replace(
        "0199a213-81c0-7800-8aa1-bbab2a035a53",
        "0199a213-0000-7800-8aa1-000000000000",
    );
    assert_eq!(decision(&hook(&other)).0, "deny");
}
