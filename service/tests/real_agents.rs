//! The real agents (Claude Code, Codex CLI, Gemini CLI, opencode, at the versions
//! `scripts/install-test-agents.sh` pins), each run headless against the scripted model of
//! `model/` in a fresh home with a git project, through one conversation of shell calls,
//! twice: alone (the baseline) and with its shell calls sent through the sandbox by the
//! setup `efr-sandbox hook install AGENT` writes (on each backend). The
//! baseline shows what each line does without us (it reads the planted secrets, writes
//! outside the project, reaches the host's loopback), so that the sandboxed run's
//! containment proves something; the lines that should work are compared with the
//! baseline's results, as the model saw them.
//!
//! The agents are found in `$EFR_TEST_AGENTS` (a `node_modules/.bin`), else in
//! `/opt/efr-test-agents/node_modules/.bin`; a missing agent is a skip, or a failure under
//! `EFR_SANDBOX_MUST_WORK`.

mod common;
mod model;
mod registry;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{backends, skip};
use model::Model;

const EFR_SANDBOX: &str = env!("CARGO_BIN_EXE_efr-sandbox");

/// Where the pinned agents are when `$EFR_TEST_AGENTS` does not say.
const DEFAULT_AGENTS: &str = "/opt/efr-test-agents/node_modules/.bin";

/// How long one agent's conversation may take before it is killed (a hung agent fails).
const AGENT_DEADLINE: Duration = Duration::from_secs(300);

/// How long an agent may go without asking the model anything before it counts as hung:
/// each of its steps takes a few seconds.
const AGENT_STALL: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agent {
    Claude,
    Codex,
    Gemini,
    Opencode,
}

impl Agent {
    fn exe(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Opencode => "opencode",
        }
    }

    /// The variable that holds the agent's own API key.
    fn key_var(self) -> &'static str {
        match self {
            Agent::Claude => "ANTHROPIC_API_KEY",
            Agent::Codex => "EFR_MOCK_OPENAI_KEY",
            Agent::Gemini => "GEMINI_API_KEY",
            Agent::Opencode => "EFR_MOCK_OPENCODE_KEY",
        }
    }
}

/// How the agent's shell calls run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// The agent alone.
    Baseline,
    /// Through the sandbox on this backend.
    Sandbox(&'static str),
}

/// The directory of the agents' executables, or why there is none.
fn agents_bin() -> Result<PathBuf, String> {
    let dir = std::env::var_os("EFR_TEST_AGENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_AGENTS));
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!(
            "no agents in {} (scripts/install-test-agents.sh installs them; EFR_TEST_AGENTS names another directory)",
            dir.display()
        ))
    }
}

/// A loopback server of the test that counts the connections it gets.
struct Loopback {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Loopback {
    fn start() -> Loopback {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                h.fetch_add(1, Ordering::SeqCst);
                drop(c);
            }
        });
        Loopback { port, hits }
    }
}

/// One conversation's world: a fresh home with planted secrets and a git identity, a git
/// project with one commit, the agent's config pointing at the model.
struct World {
    dir: tempfile::TempDir,
    token: String,
    loopback: Loopback,
    /// A host of the test (`registry.test` to the calls) the user approves.
    approve: registry::Server,
}

/// The names of the script's lines, in order (the script itself is [`World::script`]).
const LINES: &[&str] = &[
    "status",
    "secrets",
    "env",
    "writes",
    "hidden writes",
    "loopback",
    "hidden loopback",
    "background",
    "cd",
    "pwd after cd",
    "tmp write",
    "tmp read",
    "export",
    "echo exported",
    "bash syntax",
    "git amend",
    "refused host",
    "host retried",
    "approved host",
];

/// The first call of the line the user approves. A plain-HTTP host takes two approvals:
/// the proxy first refuses the host (`host=H:P`), and once that is granted, the plain
/// HTTP request (`host=H:P:http`); the model retries after each.
const REFUSED: usize = 16;

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let loopback = Loopback::start();
        std::fs::create_dir_all(dir.path().join("srv")).unwrap();
        std::fs::write(dir.path().join("srv/f"), "hello-approved\n").unwrap();
        let approve = registry::Server::start(&dir.path().join("srv"));
        let token = format!(
            "{}{}",
            std::process::id(),
            dir.path().file_name().unwrap().to_string_lossy()
        )
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
        let w = World {
            dir,
            token,
            loopback,
            approve,
        };
        for d in ["home/.ssh", "home/.config/efr", "run", "proj/src"] {
            std::fs::create_dir_all(w.root().join(d)).unwrap();
        }
        std::fs::set_permissions(
            w.root().join("run"),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        std::fs::write(w.home().join(".ssh/id_ed25519"), w.ssh_key()).unwrap();
        std::fs::write(w.home().join(".bashrc"), "# the user's bashrc\n").unwrap();
        std::fs::write(
            w.home().join(".gitconfig"),
            "[user]\n\tname = Test User\n\temail = test@example.com\n",
        )
        .unwrap();
        std::fs::write(w.proj().join("src/main.txt"), "hello\n").unwrap();
        w.git(&["init", "-q", "-b", "main"]);
        w.git(&["add", "-A"]);
        w.git(&["commit", "-qm", "initial"]);
        w
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn home(&self) -> PathBuf {
        self.root().join("home")
    }

    fn proj(&self) -> PathBuf {
        self.root().join("proj")
    }

    fn ssh_key(&self) -> String {
        format!("EFR-TEST-SSH-KEY-{}\n", self.token)
    }

    fn github_token(&self) -> String {
        format!("ghp_EFRTEST{}", self.token)
    }

    fn api_key(&self) -> String {
        format!("sk-EFRTEST-agent-key-{}", self.token)
    }

    /// The planted secrets, by name.
    fn secrets(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ssh key", self.ssh_key().trim().to_string()),
            ("GITHUB_TOKEN", self.github_token()),
            ("the agent's API key", self.api_key()),
        ]
    }

    fn tmp_file(&self) -> String {
        format!("/tmp/efr-agent-test-{}", self.token)
    }

    /// A `sleep` nobody else runs: its argument.
    fn sleep_arg(&self) -> String {
        format!("7{}", self.loopback.port)
    }

    fn git(&self, args: &[&str]) {
        let o = Command::new("git")
            .args(args)
            .current_dir(self.proj())
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_DIR")
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {o:?}");
    }

    /// The conversation: one line a step, named by [`LINES`].
    fn script(&self) -> Vec<String> {
        vec![
            "echo out; echo err >&2; exit 3".into(),
            "cat ~/.ssh/id_ed25519; env | sort".into(),
            // A line no route classifies as needing anything: it runs, and what it shows is
            // what a contained call has.
            "env | sort".into(),
            concat!(
                "echo '# pwned' >> ~/.bashrc; touch ~/made-by-call; ",
                r#"echo '{"shell": "/bin/bash"}' > opencode.json; "#,
                r#"mkdir -p .claude && echo '{"env": {}}' > .claude/settings.json; "#,
                "mkdir -p .opencode/plugins && echo 'export default {}' > .opencode/plugins/p.js; echo wrote"
            )
            .into(),
            // The same writes from a program, which no route sees before it runs: the
            // running call's sandbox must hold them.
            concat!(
                "python3 -c '\nimport os\n",
                r##"for p, t in [("~/.bashrc", "# pwned\n"), ("~/made-by-call", ""), ("opencode.json", "{\"shell\": \"/bin/bash\"}"), (".claude/settings.json", "{}"), (".opencode/plugins/p.js", "export default {}")]:"##,
                "\n    p = os.path.expanduser(p)\n    try:\n",
                "        os.makedirs(os.path.dirname(p) or \".\", exist_ok=True)\n",
                "        open(p, \"a\").write(t)\n        print(\"wrote\", p)\n",
                "    except OSError as e:\n        print(\"not written:\", p, e.strerror)\n'"
            )
            .into(),
            format!(
                "(exec 3<>/dev/tcp/127.0.0.1/{}) 2>/dev/null && echo reached || echo unreachable",
                self.loopback.port
            ),
            format!(
                "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {}), 5); print(\"reached\")' 2>&1 | tail -n 1",
                self.loopback.port
            ),
            format!("env sleep {} >/dev/null 2>&1 & echo started", self.sleep_arg()),
            "mkdir -p sub && cd sub && pwd".into(),
            "pwd".into(),
            format!("echo kept > {} && echo written", self.tmp_file()),
            format!("cat {} 2>&1; true", self.tmp_file()),
            "export EFR_X=1; echo set".into(),
            r#"echo "x=${EFR_X:-unset}""#.into(),
            r#"[[ a == a ]] && echo {a,b}; echo Y=2 > env.sh && source ./env.sh && echo "y=$Y""#
                .into(),
            // The editor's failure message is the environment's (git's own, or the sandbox's
            // editor that fails at once); its status and the commit are the line's.
            "git commit -q --allow-empty -m one 2>/dev/null; echo \"commit=$?\"; git commit -q --amend --allow-empty >/dev/null 2>&1; echo \"amend=$?\"; git log -1 --format=%s".into(),
            self.approved_line(),
            self.approved_line(),
            self.approved_line(),
        ]
    }

    /// A fetch from the test's host, refused until the user approves it. The host name is
    /// built at run time, as a program the model started would: no route classifies it
    /// before the call (a hook would ask or deny first), so the refusal comes from the
    /// running call and waits for the user's approval.
    fn approved_line(&self) -> String {
        let port = self.approve.port;
        format!(
            "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://\" + \"registry\" + \".test:{port}/f\", timeout=20).read().decode().strip())' 2>&1 | tail -n 1"
        )
    }

    /// The user's environment, as their own terminal has it: where the service and the
    /// approvals are.
    fn user_env(&self) -> Vec<(String, PathBuf)> {
        vec![
            ("HOME".into(), self.home()),
            ("XDG_CONFIG_HOME".into(), self.home().join(".config")),
            ("XDG_RUNTIME_DIR".into(), self.root().join("run")),
        ]
    }

    /// The processes still running the script's `sleep`.
    fn leftovers(&self) -> Vec<i32> {
        let want = format!("sleep\0{}\0", self.sleep_arg());
        processes(|cmd| cmd == want.as_bytes())
    }

    /// The service the world's calls started (its socket is in the world's runtime dir).
    fn services(&self) -> Vec<i32> {
        let sock = self.root().join("run/efr/sandbox.sock");
        let want = format!("serve\0--socket\0{}\0", sock.display());
        processes(|cmd| cmd.windows(want.len()).any(|w| w == want.as_bytes()))
    }

    /// The host-side facts a call may have changed.
    fn host_state(&self) -> HostState {
        HostState {
            bashrc: std::fs::read_to_string(self.home().join(".bashrc")).unwrap_or_default(),
            made_in_home: self.home().join("made-by-call").exists(),
            opencode_json: self.proj().join("opencode.json").exists(),
            claude_settings: self.proj().join(".claude/settings.json").exists(),
            opencode_plugin: self.proj().join(".opencode/plugins/p.js").exists(),
            loopback_hits: self.loopback.hits.load(Ordering::SeqCst),
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.tmp_file());
        use nix::sys::signal::{Signal, kill};
        let pid = nix::unistd::Pid::from_raw;
        for p in self.services() {
            let _ = kill(pid(p), Signal::SIGTERM);
        }
        for p in self.leftovers() {
            let _ = kill(pid(p), Signal::SIGKILL);
        }
    }
}

/// The pids whose command line (NUL-separated words) `matches`.
fn processes(matches: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if matches(&std::fs::read(e.path().join("cmdline")).unwrap_or_default()) {
            pids.push(pid);
        }
    }
    pids
}

#[derive(Debug)]
struct HostState {
    bashrc: String,
    made_in_home: bool,
    opencode_json: bool,
    claude_settings: bool,
    opencode_plugin: bool,
    loopback_hits: usize,
}

/// What one run of a conversation left: the tool results the model saw (normalized, by
/// line name), the host's state, the processes left, the agent's status and output.
struct Outcome {
    results: BTreeMap<&'static str, String>,
    raw: Vec<String>,
    host: HostState,
    leftovers: Vec<i32>,
    /// What the user's `efr-sandbox approve` said, by result index.
    approvals: String,
    status: Option<i32>,
    output: String,
    took: Duration,
}

impl Outcome {
    /// The agent ran every line and exited 0.
    fn finished(&self) -> bool {
        self.status == Some(0) && self.raw.len() == LINES.len()
    }
}

/// Writes the agent's config (model, telemetry off, and for a sandboxed route the shell
/// route) and returns its command.
fn setup(agent: Agent, route: Route, w: &World, m: &Model, bin: &Path) -> Command {
    let home = w.home();
    if let Route::Sandbox(backend) = route {
        std::fs::write(
            home.join(".config/efr/config.toml"),
            format!(
                "{}[sandbox]\nbackend = \"{backend}\"\n",
                registry::Server::config()
            ),
        )
        .unwrap();
    }
    let prompt = "run the scripted steps";
    let mut c = Command::new(bin.join(agent.exe()));
    c.env_clear();
    match agent {
        Agent::Claude => {
            write(&home.join(".claude/settings.json"), "{}");
            // The baseline's lines that write outside the project need the mode that asks
            // nothing (as root it also wants IS_SANDBOX).
            c.args(["-p", prompt, "--permission-mode", "bypassPermissions"])
                .env("IS_SANDBOX", "1")
                .env("ANTHROPIC_BASE_URL", m.url())
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_ERROR_REPORTING", "1");
        }
        Agent::Codex => {
            write(
                &home.join(".codex/config.toml"),
                &format!(
                    "model = \"mock-model\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\
                     [analytics]\nenabled = false\n\
                     [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
                     env_key = \"{}\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
                    m.url(),
                    agent.key_var()
                ),
            );
            c.args([
                "exec",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                prompt,
            ]);
        }
        Agent::Gemini => {
            let settings = serde_json::json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false},
                "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                "telemetry": {"enabled": false}});
            write(&home.join(".gemini/settings.json"), &settings.to_string());
            c.args([
                "-p",
                prompt,
                "-m",
                "gemini-2.5-flash",
                "--approval-mode",
                "yolo",
            ])
            .env("GOOGLE_GEMINI_BASE_URL", m.url())
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
        }
        Agent::Opencode => {
            let cfg = serde_json::json!({
                "$schema": "https://opencode.ai/config.json",
                "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "mock",
                    "options": {"baseURL": format!("{}/v1", m.url()),
                                "apiKey": format!("{{env:{}}}", agent.key_var())},
                    "models": {"m": {"name": "m", "tool_call": true}}}},
                "model": "mock/m", "small_model": "mock/m", "autoupdate": false,
                "share": "disabled",
                "permission": {"bash": "allow", "external_directory": "allow"}});
            write(
                &home.join(".config/opencode/opencode.json"),
                &cfg.to_string(),
            );
            c.args(["run", prompt])
                .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
                .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
                .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
                // Its config loader asks npm for its plugin package: the model's port
                // answers 404, so nothing outside is reached.
                .env("npm_config_registry", format!("{}/npm/", m.url()));
        }
    }
    c.current_dir(w.proj())
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
        )
        .env("HOME", &home)
        .env("USER", whoami())
        .env("LOGNAME", whoami())
        .env("LANG", "C.UTF-8")
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_RUNTIME_DIR", w.root().join("run"))
        .env("GITHUB_TOKEN", w.github_token())
        .env(agent.key_var(), w.api_key())
        .stdin(Stdio::null());
    if let Route::Sandbox(_) = route {
        // The route as a user sets it up, over the model settings written above.
        if let Err(e) = hook_install(agent, w, bin) {
            panic!("{agent:?}: the route's setup failed: {e}");
        }
        // The user's service, started by the first call as it is for a user, ends a few
        // seconds after the last (and with the world).
        c.env("EFR_SANDBOX_IDLE_EXIT", "10");
    }
    c
}

/// Sets the agent's route up as a user does: `efr-sandbox hook install AGENT --yes` (it
/// keeps the model settings written before), then `hook check AGENT` in the project must
/// say that its shell calls run contained.
fn hook_install(agent: Agent, w: &World, bin: &Path) -> Result<(), String> {
    let name = match agent {
        Agent::Claude => "claude",
        Agent::Codex => "codex",
        Agent::Gemini => "gemini",
        Agent::Opencode => "opencode",
    };
    for args in [
        vec!["hook", "install", name, "--yes"],
        vec!["hook", "check", name],
    ] {
        let mut c = Command::new(EFR_SANDBOX);
        c.env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .args(&args)
            .current_dir(w.proj())
            .stdin(Stdio::null());
        for (k, v) in w.user_env() {
            c.env(k, v);
        }
        let o = c.output().map_err(|e| format!("{args:?}: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "{args:?}: {:?}\n{}{}",
                o.status.code(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    Ok(())
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn whoami() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| "root".into())
}

/// Runs the conversation once in a fresh world.
fn converse(agent: Agent, route: Route, bin: &Path) -> (World, Outcome) {
    let w = World::new();
    let script = w.script();
    let lines: Vec<&str> = script.iter().map(String::as_str).collect();
    let approved = Arc::new(std::sync::Mutex::new(String::new()));
    let on_result: Option<model::OnResult> = match route {
        Route::Baseline => None,
        Route::Sandbox(_) => {
            let (user, log) = (w.user_env(), approved.clone());
            Some(Box::new(move |i, text| {
                if i >= REFUSED && text.contains("efr-sandbox approve ") {
                    let done = approve(&user, text);
                    log.lock().unwrap().push_str(&format!("[{i}] {done}; "));
                }
            }))
        }
    };
    let m = Model::start_with(&lines, on_result);
    let mut c = setup(agent, route, &w, &m, bin);
    let log = w.root().join("agent.log");
    let f = std::fs::File::create(&log).unwrap();
    c.stdout(f.try_clone().unwrap()).stderr(f).process_group(0);
    let start = Instant::now();
    let mut child = c.spawn().unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if start.elapsed() > AGENT_DEADLINE || m.quiet_for(start) > AGENT_STALL {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = start.elapsed();
    // What the agent started and left behind gets a moment to be seen.
    std::thread::sleep(Duration::from_millis(500));
    let leftovers = w.leftovers();
    let mut output = String::new();
    let _ = std::fs::File::open(&log).and_then(|mut f| f.read_to_string(&mut output));
    output.push_str(&format!(
        "\n[model requests: {:?}; unread: {:?}; the user's approval: {}]",
        m.requests(),
        m.errors(),
        approved.lock().unwrap()
    ));
    let raw = m.results();
    let results = LINES
        .iter()
        .zip(raw.iter())
        .map(|(n, r)| (*n, normalize(r, &w)))
        .collect();
    let host = w.host_state();
    (
        w,
        Outcome {
            results,
            raw,
            host,
            leftovers,
            approvals: approved.lock().unwrap().clone(),
            status,
            output,
            took,
        },
    )
}

/// The user approves the refusal the model saw, as the refusal tells them to: the id in
/// its `efr-sandbox approve ID`, given to `efr-sandbox approve` in the user's environment.
/// Returns what happened, for the failure message.
fn approve(user: &[(String, PathBuf)], refusal: &str) -> String {
    let Some((_, rest)) = refusal.split_once("efr-sandbox approve ") else {
        return format!("no approval named in the refusal: {refusal:?}");
    };
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    let mut c = Command::new(EFR_SANDBOX);
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["approve", &id])
        .stdin(Stdio::null());
    for (k, v) in user {
        c.env(k, v);
    }
    match c.output() {
        Ok(o) => format!(
            "approve {id}: {} {}{}",
            if o.status.success() { "ok" } else { "FAILED" },
            String::from_utf8_lossy(&o.stdout).trim(),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("approve {id}: FAILED to run: {e}"),
    }
}

/// A result as the model saw it, with what differs between two runs of the same line
/// replaced: the world's paths and token, process ids, timings.
fn normalize(r: &str, w: &World) -> String {
    const VOLATILE: &[&str] = &[
        "Chunk ID:",
        "Wall time:",
        "Original token count:",
        "Process Group PGID:",
        "Background PIDs:",
        // Gemini CLI's note to the model when a hook rewrote the call (the sandboxed route).
        "[System] Tool input parameters were modified by a hook",
    ];
    let s = r
        .replace(&w.proj().display().to_string(), "<proj>")
        .replace(&w.home().display().to_string(), "<home>")
        .replace(&w.token, "<token>");
    s.lines()
        .filter(|l| !VOLATILE.iter().any(|v| l.trim_start().starts_with(v)))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// The lines whose result must be the baseline's.
const SAME_AS_BASELINE: &[&str] = &[
    "status",
    "cd",
    "pwd after cd",
    "tmp write",
    "tmp read",
    "export",
    "echo exported",
    "bash syntax",
    "git amend",
];

/// The baseline shows that each containment line means something without us.
fn check_baseline(b: &Outcome, w: &World, fails: &mut Vec<String>) {
    let all = b.raw.join("\n");
    for (name, s) in w.secrets() {
        if !all.contains(&s) {
            fails.push(format!(
                "baseline: the model never saw {name}, so its absence proves nothing"
            ));
        }
    }
    let h = &b.host;
    if !h.bashrc.contains("pwned") || !h.made_in_home || !h.opencode_json || !h.opencode_plugin {
        fails.push(format!(
            "baseline: the writes outside the project and to the agent configs did not happen: {:?}",
            b.host
        ));
    }
    if b.host.loopback_hits == 0 {
        fails.push("baseline: the loopback server was not reached".into());
    }
}

/// The sandboxed run: contained, and the same as the baseline where it should be.
fn check_sandboxed(label: &str, s: &Outcome, w: &World, b: &Outcome, fails: &mut Vec<String>) {
    let all = s.raw.join("\n");
    for (name, v) in w.secrets() {
        if all.contains(&v) {
            fails.push(format!("{label}: the model saw {name}"));
        }
    }
    let h = &s.host;
    if h.bashrc != "# the user's bashrc\n" {
        fails.push(format!("{label}: ~/.bashrc written: {:?}", h.bashrc));
    }
    if h.made_in_home {
        fails.push(format!("{label}: a file was made in the home"));
    }
    if h.opencode_json || h.claude_settings || h.opencode_plugin {
        fails.push(format!(
            "{label}: an agent config was written in the project: {h:?}"
        ));
    }
    if h.loopback_hits != 0 {
        fails.push(format!(
            "{label}: the host's loopback was reached {} times",
            h.loopback_hits
        ));
    }
    if !s.leftovers.is_empty() {
        fails.push(format!(
            "{label}: the call's background sleep outlived the agent: {:?}",
            s.leftovers
        ));
    }
    // What follows compares the lines' results: a conversation cut short has failed already.
    if !s.finished() {
        return;
    }
    let (refused, retried) = (
        s.results.get("refused host").cloned().unwrap_or_default(),
        s.results.get("approved host").cloned().unwrap_or_default(),
    );
    if !s.approvals.contains(&format!("[{REFUSED}] approve ")) || s.approvals.contains("FAILED") {
        fails.push(format!("{label}: the user's approvals: {}", s.approvals));
    }
    if refused.contains("hello-approved") || !refused.contains("efr-sandbox approve ") {
        fails.push(format!(
            "{label}: the test's host was not refused with an approval to give: {refused:?}"
        ));
    }
    if !retried.contains("hello-approved") {
        fails.push(format!(
            "{label}: the approved host did not work on the retry: {retried:?}"
        ));
    }
    for line in SAME_AS_BASELINE {
        let (mut got, mut want) = (s.results.get(line).cloned(), b.results.get(line).cloned());
        // Stdout and stderr are two pipes: an agent that reads both has no order between them.
        if *line == "status" {
            let sorted = |r: Option<String>| {
                r.map(|r| {
                    let mut l: Vec<&str> = r.lines().collect();
                    l.sort_unstable();
                    l.join("\n")
                })
            };
            (got, want) = (sorted(got), sorted(want));
        }
        if got != want {
            fails.push(format!(
                "{label}: line {line:?}: sandboxed {got:?}, baseline {want:?}"
            ));
        }
    }
}

/// Runs one conversation, noting how it went.
fn run(
    agent: Agent,
    route: Route,
    bin: &Path,
    report: &mut String,
    fails: &mut Vec<String>,
) -> (World, Outcome) {
    let (w, o) = converse(agent, route, bin);
    eprintln!(
        "{agent:?} {route:?}: status {:?}, {} of {} results, {:.1?}; approvals: {}",
        o.status,
        o.raw.len(),
        LINES.len(),
        o.took,
        o.approvals
    );
    report.push_str(&format!(
        "--- {agent:?} {route:?}: status {:?} in {:.1?}, {} results, host {:?}, left running {:?}\n{:#?}\n",
        o.status,
        o.took,
        o.raw.len(),
        o.host,
        o.leftovers,
        o.results
    ));
    if !o.finished() {
        let how = match o.status {
            None => format!(
                "killed after {:.0?}: the agent hung (no model request for {AGENT_STALL:?}, or past {AGENT_DEADLINE:?})",
                o.took
            ),
            Some(c) => format!("status {c}"),
        };
        fails.push(format!(
            "{agent:?} {route:?}: the conversation did not finish ({how}; {} of {} results); the agent's output:\n{}",
            o.raw.len(),
            LINES.len(),
            o.output
        ));
    }
    (w, o)
}

/// One agent's conversation: the baseline, then through the sandbox on each backend.
fn agent_conversation(agent: Agent) {
    let bin = match agents_bin() {
        Ok(b) => b,
        Err(e) => {
            skip(&e);
            return;
        }
    };
    if !bin.join(agent.exe()).exists() {
        skip(&format!("{} is not in {}", agent.exe(), bin.display()));
        return;
    }
    let mut fails = Vec::new();
    let mut report = String::new();
    let (bw, b) = run(agent, Route::Baseline, &bin, &mut report, &mut fails);
    check_baseline(&b, &bw, &mut fails);
    for backend in backends() {
        let (w, s) = run(
            agent,
            Route::Sandbox(backend),
            &bin,
            &mut report,
            &mut fails,
        );
        check_sandboxed(&format!("{agent:?} {backend}"), &s, &w, &b, &mut fails);
    }
    // Every result the model saw, on a failure or when asked (EFR_TEST_AGENTS_REPORT=1).
    if !fails.is_empty() || std::env::var_os("EFR_TEST_AGENTS_REPORT").is_some() {
        eprintln!("{report}");
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
fn claude_code_through_the_sandbox() {
    agent_conversation(Agent::Claude);
}

#[test]
fn codex_through_the_sandbox() {
    agent_conversation(Agent::Codex);
}

#[test]
fn gemini_cli_through_the_sandbox() {
    agent_conversation(Agent::Gemini);
}

#[test]
fn opencode_through_the_sandbox() {
    agent_conversation(Agent::Opencode);
}
