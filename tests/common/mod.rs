//! A fixture for launcher tests: a fake home with secrets and floor files, a git project in
//! it, another project, the conversation's tmp and scratch dirs; and a runner that launches
//! one line through `efr-launch` (in a child process) and collects what it did.

#![allow(dead_code)]

pub mod sys;

use efr_launcher::api::Io;
use std::path::{Path, PathBuf};

use efr_launcher::api::{BackendChoice, Launcher};
use efr_launcher::backend::resolve as resolve_backend;
use efr_launcher::plan::Plan;
use efr_launcher::status::Outcome;
use efr_sandbox_wire::Grant;

/// The secret planted in masked files and in the launcher's environment.
pub const SECRET: &str = "TOPSECRET-efr-escape";

/// Whether a missing kernel feature may be skipped (only when EFR_SANDBOX_MUST_WORK is unset).
pub fn may_skip() -> bool {
    std::env::var_os("EFR_SANDBOX_MUST_WORK").is_none()
}

/// Skips (returns true) or panics, per [`may_skip`].
pub fn skip(why: &str) -> bool {
    if may_skip() {
        eprintln!("SKIP: {why}");
        true
    } else {
        panic!("EFR_SANDBOX_MUST_WORK is set and this cannot run: {why}");
    }
}

/// The backends to test (`EFR_TEST_BACKENDS=native,bwrap` to narrow).
pub fn backends() -> Vec<BackendChoice> {
    let want = std::env::var("EFR_TEST_BACKENDS").unwrap_or_else(|_| "native,bwrap".into());
    let mut v = Vec::new();
    for b in want.split(',') {
        match b.trim() {
            "native" => v.push(BackendChoice::Native),
            "bwrap" if Path::new(efr_launcher::backend::bwrap::BWRAP).exists() => {
                v.push(BackendChoice::Bwrap)
            }
            "bwrap" => {
                skip("bubblewrap is not installed");
            }
            _ => {}
        }
    }
    v
}

/// The launcher under test.
pub fn launcher() -> Launcher {
    // Cargo builds this package's bin for its integration tests: target/<profile>/, one up
    // from the test binary in deps/.
    let exe = std::env::var_os("EFR_LAUNCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let me = std::env::current_exe().unwrap();
            me.ancestors().nth(2).unwrap().join("efr-launch-test")
        });
    assert!(
        exe.is_file(),
        "launcher under test missing: {}",
        exe.display()
    );
    Launcher::new(exe)
}

/// The fixture.
#[derive(Debug)]
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub home: String,
    pub proj: String,
    pub other: String,
    pub tmp: String,
    pub scratch: String,
}

fn write(p: &str, s: &str) {
    if let Some(d) = Path::new(p).parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, s).unwrap();
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::Builder::new()
            .prefix("efr-fixture-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let base = dir
            .path()
            .canonicalize()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let home = format!("{base}/home");
        let proj = format!("{home}/proj");
        let other = format!("{base}/other");
        let tmp = format!("{base}/conv-tmp");
        let scratch = format!("{base}/scratch");
        for d in [&home, &proj, &other, &tmp, &scratch] {
            std::fs::create_dir_all(d).unwrap();
        }
        write(&format!("{home}/.ssh/id_rsa"), SECRET);
        write(&format!("{home}/.ssh/config"), "Host x\n");
        write(&format!("{home}/.aws/credentials"), SECRET);
        write(&format!("{home}/.netrc"), SECRET);
        write(&format!("{home}/.bashrc"), "# rc\n");
        write(
            &format!("{home}/.gitconfig"),
            "[user]\n\tname = Efr Test\n\temail = efr@example.com\n",
        );
        write(&format!("{other}/file"), "other\n");
        write(&format!("{proj}/README"), "hello\n");
        let git = std::process::Command::new("git")
            .args(["init", "-q", &proj])
            .env("HOME", &home)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(git, "git init of the fixture project");
        // A repository below the project root, as in a root that holds several.
        let nested = std::process::Command::new("git")
            .args(["init", "-q", &format!("{proj}/vendor/lib")])
            .env("HOME", &home)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(nested, "git init of the nested repository");
        Fixture {
            dir,
            home,
            proj,
            other,
            tmp,
            scratch,
        }
    }

    /// Fills the plan's masks, read-only paths, protected names and environment policy
    /// with the view the service would ask for its project roots (`Config::launch_view` of
    /// the defaults). Call it again after changing `projects`.
    pub fn set_view(&self, r: &mut Plan) {
        let mut env = efr_policy::config::Env::new(&self.home);
        env.scratch = Some(PathBuf::from(&self.scratch));
        let roots: Vec<PathBuf> = r.projects.iter().map(PathBuf::from).collect();
        let view = efr_policy::config::Config::defaults().launch_view(&env, &roots);
        r.read_only_inside = view.read_only_inside;
        r.protect_names = view.protect_names;
        r.masks = view.masks;
        r.env_policy = Some(efr_policy::config::Config::defaults().env_policy());
    }

    /// The contained plan of `line` in the project, with the fixture's home, tmp, scratch,
    /// view and environment (secrets planted in it).
    pub fn request(&self, line: &str, backend: BackendChoice) -> Plan {
        let mut r = Plan::contained(line, &self.proj);
        r.projects = vec![self.proj.clone()];
        r.home = Some(self.home.clone());
        r.tmp = Some(self.tmp.clone());
        r.scratch = Some(self.scratch.clone());
        r.backend = resolve_backend(backend);
        self.set_view(&mut r);
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        let env: Vec<(String, String)> = vec![
            ("PATH".into(), path),
            ("HOME".into(), self.home.clone()),
            ("LANG".into(), "C.UTF-8".into()),
            ("GITHUB_TOKEN".into(), SECRET.into()),
            ("OPENAI_API_KEY".into(), SECRET.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET.into()),
            ("SSH_AUTH_SOCK".into(), format!("/run/{SECRET}")),
            (
                "PYENV_ROOT".into(),
                std::env::var("PYENV_ROOT").unwrap_or_default(),
            ),
            (
                "CARGO_HOME".into(),
                std::env::var("CARGO_HOME").unwrap_or_default(),
            ),
            (
                "RUSTUP_HOME".into(),
                std::env::var("RUSTUP_HOME").unwrap_or_default(),
            ),
        ];
        r.env = Some(env.into_iter().map(Into::into).collect());
        r
    }

    pub fn plan(&self, line: &str, backend: BackendChoice, grants: Vec<Grant>) -> Plan {
        let mut p = self.request(line, backend);
        p.grants = grants;
        // The config's safe git keys, as the service sends them.
        p.git_safe_keys = Some(efr_policy::config::Config::defaults().git_safe_keys());
        p
    }
}

/// One variable of a plan's environment.
pub fn var(name: &str, value: impl Into<String>) -> efr_launcher::plan::EnvVar {
    efr_launcher::plan::EnvVar {
        name: name.into(),
        value: value.into(),
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture::new()
    }
}

/// What one run did.
#[derive(Debug)]
pub struct Ran {
    pub outcome: Outcome,
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub stdout_len: u64,
}

impl Ran {
    pub fn all_output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Whether the suites run each line through a launcher in standby (`EFR_TEST_WARM=1`, as
/// `.ci/run`'s unprivileged pass does): the service's way of starting a call, with the
/// call's init made ahead (`efr_launcher::backend::warm`), instead of a launcher started
/// for it.
pub fn warm() -> bool {
    std::env::var_os("EFR_TEST_WARM").is_some_and(|v| v == "1")
}

/// Runs a plan; stdin from `stdin` (null when None); through a launcher in standby when
/// [`warm`].
pub fn run_plan(plan: &Plan, stdin: Option<Io>) -> Ran {
    run_plan_as(plan, stdin, warm())
}

/// [`run_plan`], through a launcher in standby when `standby`.
pub fn run_plan_as(plan: &Plan, stdin: Option<Io>, standby: bool) -> Ran {
    let out = tempfile::NamedTempFile::new().unwrap();
    let err = tempfile::NamedTempFile::new().unwrap();
    let stdio = [
        stdin.unwrap_or(Io::null()),
        Io::from(out.reopen().unwrap()),
        Io::from(err.reopen().unwrap()),
    ];
    let running = if standby {
        let [i, o, e] = stdio;
        launcher().spawn_warm().unwrap().go(plan, i, o, e).unwrap()
    } else {
        let [i, o, e] = stdio;
        launcher().spawn(plan, i, o, e).unwrap()
    };
    let (outcome, status) = running.wait().unwrap();
    let stdout_len = std::fs::metadata(out.path()).unwrap().len();
    let read_cap = |p: &Path| {
        let data = std::fs::read(p).unwrap_or_default();
        let n = data.len().min(1 << 20);
        String::from_utf8_lossy(&data[..n]).into_owned()
    };
    Ran {
        outcome,
        status,
        stdout: read_cap(out.path()),
        stderr: read_cap(err.path()),
        stdout_len,
    }
}

/// Runs `line` contained in the fixture's project.
pub fn run(fx: &Fixture, line: &str, backend: BackendChoice) -> Ran {
    run_plan(&fx.plan(line, backend, Vec::new()), None)
}

/// Processes whose command line holds `needle`.
pub fn procs_with(needle: &str) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&c)
            .replace('\0', " ")
            .contains(needle)
        {
            v.push(pid);
        }
    }
    v
}

/// Every descendant of `root` (host pids), found through the ppid links of /proc: the
/// processes of a call, its namespaces' included.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut parent = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if let Some(pp) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            parent.insert(pid, pp);
        }
    }
    let mut out = Vec::new();
    for &pid in parent.keys() {
        let mut cur = pid;
        for _ in 0..64 {
            match parent.get(&cur) {
                Some(&pp) if pp == root => {
                    out.push(pid);
                    break;
                }
                Some(&pp) if pp > 1 => cur = pp,
                _ => break,
            }
        }
    }
    out.sort();
    out
}

/// Whether `pid` is a live process (not gone, not a zombie waiting to be reaped).
pub fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    state != "Z" && state != "X"
}

/// The bubblewrap stage dirs on the host (every launcher's: `/tmp` is shared with the
/// other tests, and a pid is reused, so a dir named for a pid may be an older launcher's).
pub fn stage_dirs() -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".efr-launch-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The stage dirs of launcher `pid` that were not there in `before`.
pub fn new_stage_dirs(before: &[String], pid: i32) -> Vec<String> {
    let prefix = format!(".efr-launch-{pid}-");
    stage_dirs()
        .into_iter()
        .filter(|n| n.starts_with(&prefix) && !before.contains(n))
        .collect()
}

/// Every path under `dir` (relative, sorted), `.git` included.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(base, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Waits up to `secs` for `path` to exist.
pub fn wait_for_file(path: &Path, secs: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !path.exists() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// The python interpreter to use inside (`/usr/bin/python3` when present).
pub fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Runs `efr-launch --plan FILE` (plus `extra`) on `plan` written to `dir`, with the test
/// knob (`test_weaken`) allowed; its output. For tests that weaken one layer on purpose.
#[allow(dead_code)]
pub fn run_weakened(plan: &Plan, dir: &Path, extra: &[&str]) -> std::process::Output {
    let plan_file = dir.join("plan.json");
    std::fs::write(&plan_file, serde_json::to_vec(plan).unwrap()).unwrap();
    let l = launcher();
    std::process::Command::new(&l.exe)
        .args(&l.pre_args)
        .arg("--plan")
        .arg(&plan_file)
        .args(extra)
        .env(efr_launcher::plan::ALLOW_TEST_WEAKEN_ENV, "1")
        .output()
        .unwrap()
}
