//! From a call (line, cwd, projects, grants) to a launcher plan built from efr-policy's
//! config, and from the launcher's status lines back to a `sandbox_summary` and the exit
//! records of its denials. Shared by `sandbox.launch`, `sandbox.plan`/`sandbox.finish` and
//! `efr-sandbox run`.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use efr_launcher::api::{BackendChoice, Launcher};
use efr_launcher::backend::resolve as resolve_backend;
use efr_launcher::plan::{Plan, PlanCheck, PlanMode};
use efr_launcher::status::{Outcome, StatusLine};
use efr_policy::config::{self, Config, Env};
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use efr_sandbox_wire::{ExitRecord, Grant, JudgedBy, Judgement, Needs, PathReach, Verdict};
use efr_sandbox_wire::{LaunchItem, OutputData, Started};

/// The hidden subcommand under which `efr-sandbox` runs the launcher itself, when no
/// `efr-launch` is installed beside it (the same code: `efr_launcher::cli::main`).
pub const LAUNCH_SUBCOMMAND: &str = "__launch";

/// The params of `sandbox.launch` and `sandbox.plan` (a wire type).
pub use efr_sandbox_wire::CallParams;

fn invalid(m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(ErrorCode::Invalid, m)
}

/// Runs blocking `f` without holding up the runtime's other tasks: in place on a
/// multi-threaded runtime (`block_in_place`: its other tasks move to another worker, and no
/// thread hand-off is waited for, two wake-ups less on a call's path), on the blocking pool
/// otherwise.
pub async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => Ok(tokio::task::block_in_place(f)),
        _ => tokio::task::spawn_blocking(f).await,
    }
}

/// The launcher: `$EFR_LAUNCH`, else `efr-launch` beside this executable or on PATH, else
/// this executable's own `__launch` subcommand.
pub fn launcher() -> Launcher {
    if let Some(p) = std::env::var_os("EFR_LAUNCH").filter(|p| !p.is_empty()) {
        return Launcher::new(PathBuf::from(p));
    }
    if let Some(l) = Launcher::locate() {
        return l;
    }
    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("efr-sandbox"));
    Launcher {
        exe: me,
        pre_args: vec![LAUNCH_SUBCOMMAND.into()],
    }
}

/// The backend a call asks for (`auto`, `native`, `bwrap`), else the config's.
pub fn backend_choice(p: Option<&str>, config: &Config) -> Result<BackendChoice, ErrorBody> {
    Ok(match p {
        None => match config.sandbox.backend.value {
            config::BackendChoice::Auto => BackendChoice::Auto,
            config::BackendChoice::Native => BackendChoice::Native,
            config::BackendChoice::Bwrap => BackendChoice::Bwrap,
        },
        Some("auto") => BackendChoice::Auto,
        Some("native") => BackendChoice::Native,
        Some("bwrap") => BackendChoice::Bwrap,
        Some(o) => {
            return Err(invalid(format!(
                "backend {o:?}: expected auto, native or bwrap"
            )));
        }
    })
}

/// A conversation id is a file name: 1-128 of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn check_conversation(id: &str) -> Result<(), ErrorBody> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "conversation {id:?}: 1 to 128 of A-Z a-z 0-9 . _ -"
        )))
    }
}

pub use crate::dirs::private_dir;

/// A grant's path with `~` and `~/...` expanded (the one home expansion).
fn expand_home(p: &str, env: &Env) -> String {
    efr_policy::path::expand_home(p, &env.home)
        .to_string_lossy()
        .into_owned()
}

/// The sandbox's control plane a call never reaches: [`efr_policy::control`]'s paths, and
/// the temp dir's `efr-sandbox-<uid>` (the proxies' and bus filters' sockets when there is
/// no runtime dir).
pub fn control_plane(env: &Env) -> Vec<efr_policy::control::ControlPath> {
    let mut plane = efr_policy::control::control_plane(env);
    plane.push(efr_policy::control::ControlPath {
        path: std::env::temp_dir().join(format!("efr-sandbox-{}", crate::sys::euid())),
        what: "the sandbox's call sockets",
    });
    plane
}

/// A grant that would show or reach the sandbox's control plane: a `socket`, `write` or
/// `device` grant at or below one of its paths, an `unmask` at, below or above one.
fn control_refusal(g: &Grant, env: &Env) -> Option<ErrorBody> {
    let (path, reach) = g.host_path()?;
    let (kind, above) = (g.kind_str(), reach == PathReach::AtBelowOrAbove);
    let plane = control_plane(env);
    let p = Path::new(path);
    let hit = if above {
        efr_policy::control::reached(&plane, p)
    } else {
        efr_policy::control::holding(&plane, p)
    }?;
    Some(ErrorBody::new(
        ErrorCode::Forbidden,
        format!(
            "grant {kind}={path}: it reaches {} ({}), the sandbox's own control plane, which \
             no call may reach: a call there could launch anything unsandboxed or read every \
             conversation's files",
            hit.path.display(),
            hit.what
        ),
    ))
}

/// A refusal whose grant would reach the sandbox's control plane (a connect to the
/// service's socket, a write in its runtime dir): needs nothing, refused, with why. The
/// grant is never proposed (`run`'s retry line says that no grant opens it).
pub fn refuse_control(e: &mut ExitRecord, env: &Env) {
    let Needs::Contained { grants } = &e.needs else {
        return;
    };
    let Some(why) = grants
        .iter()
        .find_map(|g| control_refusal(g, env))
        .map(|b| b.message)
    else {
        return;
    };
    e.needs = Needs::Nothing;
    e.judgement = Judgement {
        verdict: Verdict::Refuse,
        by: JudgedBy::Policy,
        reasons: vec![why],
    };
}

/// Checks the grants a caller sends: a `bus_filter` grant names the session or system bus
/// (its filter is started with the call: [`crate::bus`]), a `host` grant must name a host
/// the proxy can match, a `host` grant with `tcp` the host's loopback (`localhost`,
/// `127.0.0.1`, `::1`) and a port, without `plain_http`; `~/` paths are expanded; no grant
/// may reach the sandbox's control plane ([`control_plane`]: `forbidden`).
pub fn check_grants(grants: &[Grant], env: &Env) -> Result<Vec<Grant>, ErrorBody> {
    let mut out = Vec::new();
    for g in grants {
        out.push(match g {
            Grant::Host { tcp: true, .. } => {
                g.tcp_relay().map_err(|e| invalid(e.to_string()))?;
                g.clone()
            }
            Grant::Host { host, .. } if efr_proxy::HostRule::from_grant(g).is_none() => {
                return Err(invalid(format!(
                    "grant host={host}: not a host name or *.suffix (an IP address needs \
                     open_network)"
                )));
            }
            Grant::Write { path } => Grant::Write {
                path: expand_home(path, env),
            },
            Grant::Unmask { path } => Grant::Unmask {
                path: expand_home(path, env),
            },
            Grant::Device { path } => Grant::Device {
                path: expand_home(path, env),
            },
            Grant::Socket { path } => Grant::Socket {
                path: expand_home(path, env),
            },
            // No path to expand; the launcher's plan check refuses an unknown kind.
            Grant::Host { tcp: false, .. }
            | Grant::Credential { .. }
            | Grant::OpenNetwork
            | Grant::Bus { .. }
            | Grant::BusFilter { .. }
            | Grant::Desktop { .. }
            | Grant::NetView
            | Grant::Unknown => g.clone(),
        });
        if let Some(refused) = out.last().and_then(|g| control_refusal(g, env)) {
            return Err(refused);
        }
    }
    Ok(out)
}

/// Why a call does not run: bad params, or a sandbox that cannot start (every variant but
/// [`PrepareError::Params`]: the command does not run, a finish with its message as the
/// `setup_error`).
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// Bad params: an RPC `invalid` error, the CLI's usage error.
    #[error("{}", .0.message)]
    Params(ErrorBody),
    /// The shell the call or the config names is not there.
    #[error(transparent)]
    Shell(#[from] config::ShellError),
    /// The conversation's `/tmp` or `$SCRATCH` dir could not be made.
    #[error("cannot create {}: {source}", path.display())]
    Conversation {
        /// The dir.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// The surface's answers (the files the user answered `mask` to) could not be read.
    #[error("the surface's answers: {0}")]
    Surface(#[source] efr_surface::state::StateError),
    /// The call's cache layers could not be made.
    #[error(transparent)]
    Caches(#[from] crate::caches::LayerError),
    /// The launcher's plan builder refused the request.
    #[error("plan: {0}")]
    Plan(#[source] efr_launcher::plan::PlanError),
    /// The call's egress proxy could not be started.
    #[error("the call's proxy: {0}")]
    Proxy(#[source] crate::egress::AttachError),
    /// A bus filter of the call could not be started.
    #[error(transparent)]
    Bus(#[from] crate::bus::AttachError),
    /// A credential the call is granted could not be made ready.
    #[error(transparent)]
    Credential(#[from] crate::broker::CredentialError),
}

impl From<ErrorBody> for PrepareError {
    fn from(e: ErrorBody) -> Self {
        PrepareError::Params(e)
    }
}

/// Builds the plan of a call from the config. `runtime` holds the conversations' dirs;
/// `process_env` is the environment the line starts from (the caller's when `None`).
pub fn prepare(
    p: &CallParams,
    config: &Config,
    env: &Env,
    runtime: Option<&Path>,
    process_env: Option<Vec<(String, String)>>,
) -> Result<Plan, PrepareError> {
    Ok(prepare_with_repos(p, config, env, runtime, process_env)?.0)
}

/// [`prepare`], with the repositories the call's view found (their index is kept before
/// the launch: [`crate::index_flags`]).
pub fn prepare_with_repos(
    p: &CallParams,
    config: &Config,
    env: &Env,
    runtime: Option<&Path>,
    process_env: Option<Vec<(String, String)>>,
) -> Result<(Plan, Vec<crate::index_flags::Repo>), PrepareError> {
    if p.line.trim().is_empty() {
        return Err(invalid("the line is empty").into());
    }
    let backend = backend_choice(p.backend.as_deref(), config)?;
    let shell = match &p.shell {
        Some(s) => config::ShellChoice::parse(s).map_err(|e| invalid(e.to_string()))?,
        None => config.sandbox.shell.value.clone(),
    };
    // A shell that is not there is the sandbox's setup error: the line never ran.
    let shell = shell.resolve()?;
    let mut grants = check_grants(&p.grants, env)?;
    let cwd = call_cwd(p, env)?;
    let (tmp, scratch) = match &p.conversation {
        Some(id) => {
            let (t, s) = conversation_dirs(id, runtime)?;
            (Some(t), Some(s))
        }
        None => (None, None),
    };
    let (view, repos) = launch_view(p, config, env);
    let mut masks = call_masks(view.masks, p, env, runtime)?;
    // Settings files that also hold a token are shown scrubbed over their mask.
    let scrubbed = efr_policy::tokens::scrubbed_copies(&env.home, &mut masks);
    for w in &view.writable {
        if Path::new(w).exists() {
            grants.push(Grant::Write { path: w.clone() });
        }
    }
    let home = env.home.to_string_lossy().into_owned();
    let plan = Plan {
        mode: if p.unsandboxed {
            PlanMode::Unsandboxed
        } else {
            PlanMode::Contained
        },
        backend: resolve_backend(backend),
        shell: Some(shell),
        shell_args: p.shell_args.clone(),
        read_only_inside: read_only_inside(view.read_only_inside, &p.projects),
        protect_names: view.protect_names,
        masks: absolute_masks(&masks, &env.home),
        home: Some(home),
        projects: p.projects.clone(),
        grants,
        scratch,
        tmp,
        tmp_size: Some(config.sandbox.tmp_size.value.to_string()),
        shm_size: Some(config.sandbox.shm_size.value.to_string()),
        scrubbed: scrubbed.into_iter().map(Into::into).collect(),
        env: process_env.map(|v| v.into_iter().map(Into::into).collect()),
        env_policy: Some(config.env_policy()),
        git_safe_keys: Some(config.git_safe_keys()),
        // The proxy is filled by `egress::CallProxy::attach` once the call's proxy
        // listens, the cache layers by `caches::attach` below.
        ..Plan::contained(p.line.clone(), cwd)
    };
    let plan = plan_with_caches(plan, p.conversation.as_deref(), config, env)?;
    Ok((plan, repos))
}

/// The call's working dir (its first project, else the home, when the params name none),
/// the params' dirs checked absolute.
fn call_cwd(p: &CallParams, env: &Env) -> Result<String, PrepareError> {
    let cwd = match &p.cwd {
        Some(c) if c.starts_with('/') => c.clone(),
        Some(c) => return Err(invalid(format!("cwd {c:?} is not absolute")).into()),
        None => p
            .projects
            .first()
            .cloned()
            .unwrap_or_else(|| env.home.to_string_lossy().into_owned()),
    };
    for pr in &p.projects {
        if !pr.starts_with('/') {
            return Err(invalid(format!("project {pr:?} is not absolute")).into());
        }
    }
    Ok(cwd)
}

/// The conversation `id`'s `/tmp` and `$SCRATCH` below the service's runtime dir, made
/// (0700).
fn conversation_dirs(id: &str, runtime: Option<&Path>) -> Result<(String, String), PrepareError> {
    check_conversation(id)?;
    let Some(rt) = runtime else {
        return Err(
            invalid("a conversation needs the service's runtime dir, and there is none").into(),
        );
    };
    let t = rt.join("tmp").join(id);
    let s = rt.join("scratch").join(id);
    for d in [&t, &s] {
        private_dir(d).map_err(|source| PrepareError::Conversation {
            path: d.clone(),
            source,
        })?;
    }
    Ok((
        t.to_string_lossy().into_owned(),
        s.to_string_lossy().into_owned(),
    ))
}

/// The call's launch view from the config, and the repositories in it whose index is kept
/// before the launch. Git says where each repository's git dirs and hooks are
/// ([`crate::git_dirs`]); where git cannot (missing, or a repository it refuses), the
/// policy's own reader decides. A plain repository (most are) needs no asking: the
/// built-in reader answers as git. Git also lists the keys of each one's config with their
/// files (includes followed as git follows them), whose include targets and programs the
/// view protects.
fn launch_view(
    p: &CallParams,
    config: &Config,
    env: &Env,
) -> (
    efr_policy::config::LaunchView,
    Vec<crate::index_flags::Repo>,
) {
    let projects: Vec<PathBuf> = p.projects.iter().map(PathBuf::from).collect();
    let view = config.launch_view_with(env, &projects, &|r| {
        if crate::git_dirs::plain(r) {
            return None;
        }
        let (l, list) = crate::git_dirs::ask_git_with_config(r)?;
        Some(efr_policy::config::RepoGitDirs {
            git_dir: l.git_dir,
            common: l.common,
            hooks: l.hooks,
            config: list.map(|list| {
                list.into_iter()
                    .map(|c| efr_policy::config::GitConfigItem {
                        file: c.file,
                        key: c.key,
                        value: c.value,
                    })
                    .collect()
            }),
        })
    });
    let repos = view
        .repositories
        .iter()
        .filter_map(|r| {
            Some(crate::index_flags::Repo {
                top: r.top.clone(),
                git_dir: r.git_dir.clone()?,
            })
        })
        .collect();
    (view, repos)
}

/// The call's masks: the view's, the files the user answered "mask" to in the surface's
/// questions, and the sandbox's own control plane (efr_policy::control: the services'
/// runtime dirs and sockets wherever they live, the state dirs) with the runtime dir of
/// the conversations of this call's service, masked whether or not a default mask covers
/// them (also when one does not exist yet: the cache layers made after may make the state
/// dir).
fn call_masks(
    mut masks: Vec<String>,
    p: &CallParams,
    env: &Env,
    runtime: Option<&Path>,
) -> Result<Vec<String>, PrepareError> {
    let answers =
        efr_surface::state::read_for_calls(&efr_surface::state::Store::for_home(&env.home))
            .map_err(PrepareError::Surface)?;
    masks.extend(answers.masks());
    let mut plane: Vec<PathBuf> = control_plane(env).into_iter().map(|c| c.path).collect();
    plane.extend(runtime.map(Path::to_path_buf));
    for dir in plane {
        // Under the host's /tmp, a path is out of the view already (the call has a /tmp of
        // its own), unless a project root brings it in.
        let in_tmp = dir.starts_with(&env.tmp);
        let in_project = p.projects.iter().any(|r| dir.starts_with(r));
        if (in_tmp && !in_project) || masks.iter().any(|m| dir.starts_with(m)) {
            continue;
        }
        masks.push(dir.to_string_lossy().into_owned());
    }
    Ok(masks)
}

/// The view's read-only paths: absolute ones as they are, a relative name inside each
/// project root.
fn read_only_inside(names: Vec<String>, projects: &[String]) -> Vec<String> {
    let mut ro = Vec::new();
    for n in names {
        if n.starts_with('/') {
            ro.push(n);
        } else {
            for root in projects {
                ro.push(format!("{}/{n}", root.trim_end_matches('/')));
            }
        }
    }
    ro
}

/// The masks as the launcher takes them: absolute, `~/` expanded by the workspace's one
/// home expansion ([`efr_policy::path::expand_home`]); a relative entry names nothing and
/// is left out.
fn absolute_masks(masks: &[String], home: &Path) -> Vec<String> {
    masks
        .iter()
        .filter_map(|m| {
            if m.starts_with("~/") {
                Some(
                    efr_policy::path::expand_home(m, home)
                        .to_string_lossy()
                        .into_owned(),
                )
            } else if m.starts_with('/') {
                Some(m.clone())
            } else {
                None
            }
        })
        .collect()
}

/// `plan` checked, with the call's cache layers (and `conversation`'s); in tests only,
/// the weakening its variable names (the launcher refuses a weakened plan unless its own
/// variable allows it).
fn plan_with_caches(
    mut plan: Plan,
    conversation: Option<&str>,
    config: &Config,
    env: &Env,
) -> Result<Plan, PrepareError> {
    plan.validate().map_err(PrepareError::Plan)?;
    crate::caches::attach(&mut plan, config, env, conversation)?;
    if let Ok(w) = std::env::var(efr_launcher::plan::TEST_WEAKEN_ENV) {
        plan.test_weaken = w
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
    }
    Ok(plan)
}

/// Why `efr-sandbox run --env` cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum EnvArgError {
    /// The config's `[environment]` does not compile (the wire's message).
    #[error("the config's [environment]: {0}")]
    Policy(String),
    /// An argument that is not `NAME` or `NAME=VALUE` (the argument).
    #[error("{0}: not NAME or NAME=VALUE (a name of letters, digits and _)")]
    Name(String),
    /// A value with a NUL in it (the name).
    #[error("{0}: the value holds a NUL")]
    Nul(String),
}

/// Applies `efr-sandbox run --env NAME[=VALUE]` to a plan: `NAME` keeps the caller's
/// value (through the scrubber, so the config's `drop` names and secret values still
/// apply), `NAME=VALUE` sets it unless a `drop` name or a secret value refuses it. Returns
/// the variables refused, with why; a bad `NAME` is an error.
pub fn apply_env_args(
    plan: &mut Plan,
    args: &[String],
    config: &Config,
) -> Result<Vec<(String, String)>, EnvArgError> {
    let policy = config.env_policy().compile().map_err(EnvArgError::Policy)?;
    let mut refused = Vec::new();
    for a in args {
        let (name, value) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (a.as_str(), None),
        };
        if name.is_empty()
            || name.starts_with(|c: char| c.is_ascii_digit())
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(EnvArgError::Name(a.clone()));
        }
        if value.is_some_and(|v| v.contains('\0')) {
            return Err(EnvArgError::Nul(name.to_string()));
        }
        // The GIT_CONFIG_* set's names are no secret names: the set is judged as one
        // when the line starts (efr_sandbox_wire::gitenv), its values by the secret
        // detector below.
        if let Some(g) = policy
            .dropped_name(name)
            .filter(|_| !efr_sandbox_wire::gitenv::is_member(name))
        {
            refused.push((
                name.to_string(),
                format!("its name matches {g} of environment.drop"),
            ));
            continue;
        }
        match value {
            None => {
                if !plan.env_keep.iter().any(|k| k == name) {
                    plan.env_keep.push(name.to_string());
                }
            }
            Some(v) => {
                if let Some(why) = policy.secret_value(v) {
                    refused.push((
                        name.to_string(),
                        format!(
                            "its value looks like a secret ({})",
                            drop_reason(&why, config)
                        ),
                    ));
                    continue;
                }
                plan.env_set.retain(|e| e.name != name);
                plan.env_set.push(efr_launcher::plan::EnvVar {
                    name: name.to_string(),
                    value: v.to_string(),
                });
            }
        }
    }
    Ok(refused)
}

/// The variables a plan's line would have kept but does not get because their name or value
/// looks like a secret (with the reason of the config's rule), or because the `GIT_CONFIG_*`
/// set rule drops them (with the rule's reason), in the order of the environment the line
/// starts from.
pub fn env_drops(plan: &Plan, config: &Config) -> Vec<(String, String)> {
    let (_, dropped) = efr_launcher::env::scrub_report(plan, &efr_launcher::env::source(plan));
    dropped
        .into_iter()
        .map(|d| {
            let why = match &d.why {
                efr_sandbox_wire::envfilter::DropReason::GitConfigSet(_)
                | efr_sandbox_wire::envfilter::DropReason::Name(_) => drop_reason(&d.why, config),
                _ => format!(
                    "its value looks like a secret ({})",
                    drop_reason(&d.why, config)
                ),
            };
            (d.name, why)
        })
        .collect()
}

/// Why a value was taken for a secret, in words.
pub fn drop_reason(why: &efr_sandbox_wire::envfilter::DropReason, config: &Config) -> String {
    use efr_sandbox_wire::envfilter::{DropReason, MAX_CHECKED_VALUE};
    match why {
        DropReason::Pattern(i) => config
            .environment
            .secret_values
            .get(*i)
            .map(|e| e.reason_or_source())
            .unwrap_or_else(|| "a secret pattern".into()),
        DropReason::TooLong => format!("longer than {MAX_CHECKED_VALUE} bytes, too long to check"),
        DropReason::Name(glob) => {
            let why = config
                .environment
                .drop
                .iter()
                .find(|e| e.value == *glob)
                .map(|e| format!(": {}", e.reason_or_source()))
                .unwrap_or_default();
            format!("its name matches the environment's drop rule {glob}{why}")
        }
        DropReason::GitConfigSet(set) => match &**set {
            efr_sandbox_wire::gitenv::SetDrop::Secret { why, .. } => {
                format!("{set} ({})", drop_reason(why, config))
            }
            other => other.to_string(),
        },
    }
}

/// What a call ended with: the wire's finish.
pub type Finished = efr_sandbox_wire::Finish;

/// Folds an outcome into [`Finished`]: its summary, and its denials as exit records. The
/// effects on the host after the call (the git guard, the cache merge, the floor watch)
/// are [`crate::after`]'s, which the call's finish runs on what this gives.
pub fn finished(
    o: &Outcome,
    line: &str,
    projects: &[String],
    config: &Config,
    env: &Env,
) -> Finished {
    let sandbox_summary = o.summary();
    let quiet: Vec<PathBuf> = config
        .sandbox
        .quiet_refusals
        .iter()
        .filter_map(|e| crate::caches::expand(&e.value, env))
        .collect();
    // The refusals are judged with the masks the call had, the surface's answers among
    // them (a write to one needs `unmask=`, not `write=`).
    let answered = if o.denials.is_empty() {
        None
    } else {
        with_surface_answers(config, env).ok()
    };
    let judged = answered.as_ref().unwrap_or(config);
    let mut exits: Vec<ExitRecord> = o
        .denials
        .iter()
        .filter(|d| !quiet.iter().any(|q| Path::new(d.as_str()) == q))
        .enumerate()
        .map(|(i, d)| match o.git_denials.iter().find(|g| g.path == *d) {
            Some(g) => git_denial_record(i, g, line, projects, judged, env),
            None => denial_record(i, d, line, projects, judged, env),
        })
        .collect();
    let n = exits.len();
    exits.extend(
        o.socket_denials
            .iter()
            .enumerate()
            .map(|(i, p)| socket_denial_record(n + i, p, line)),
    );
    let n = exits.len();
    exits.extend(
        o.loopback_refused
            .iter()
            .enumerate()
            .map(|(i, port)| loopback_record(n + i, *port, line)),
    );
    for e in &mut exits {
        refuse_control(e, env);
    }
    Finished {
        sandbox_summary,
        exits,
        code: o.code,
        signal: o.signal,
        exit_status: if o.setup_error.is_some() {
            125
        } else {
            o.exit_status()
        },
        duration_ms: o.duration_ms,
        approvals: Vec::new(),
    }
}

/// The surface's answers (the files the user answered `mask` to) could not be read.
#[derive(Debug, thiserror::Error)]
#[error("the surface's answers: {0}")]
pub struct SurfaceAnswersError(#[source] pub efr_surface::state::StateError);

/// `config` with the files the user answered `mask` to in the surface's questions as masks
/// (as every contained call gets them): what `explain`, `classify` and the judgement of a
/// refusal must see.
pub fn with_surface_answers(config: &Config, env: &Env) -> Result<Config, SurfaceAnswersError> {
    let store = efr_surface::state::Store::for_home(&env.home);
    let st = efr_surface::state::read_for_calls(&store).map_err(SurfaceAnswersError)?;
    Ok(config
        .clone()
        .with_answered_masks(&st.masks(), &store.file()))
}

pub use crate::denials::{denial_record, git_denial_record, loopback_record, socket_denial_record};

/// The `started` item of `sandbox.launch`, from the launcher's `started` status line
/// (`None` for another line).
pub fn started_item(s: &StatusLine) -> Option<LaunchItem> {
    match s {
        StatusLine::Started {
            launcher_pid,
            pid,
            backend,
            landlock,
            seccomp,
            cgroup,
            ..
        } => Some(LaunchItem::Started(Started {
            launcher_pid: *launcher_pid,
            pid: *pid,
            backend: *backend,
            landlock: landlock.as_ref().and_then(|l| serde_json::to_value(l).ok()),
            seccomp: *seccomp,
            cgroup: cgroup.as_ref().and_then(|c| serde_json::to_value(c).ok()),
            call_id: None,
        })),
        _ => None,
    }
}

/// Sends signals to a process through a pidfd: never to a recycled pid.
#[derive(Debug)]
pub struct PidFd(OwnedFd);

impl PidFd {
    /// A pidfd of the process `pid` (an error when it is gone).
    pub fn open(pid: u32) -> std::io::Result<PidFd> {
        crate::sys::pidfd_open(pid).map(PidFd)
    }

    /// Sends `sig` (an error when the process is gone).
    pub fn signal(&self, sig: i32) -> std::io::Result<()> {
        crate::sys::pidfd_send_signal(&self.0, sig)
    }
}

/// Ends the launcher (and so the call's whole tree) when dropped before [`Self::disarm`]:
/// SIGTERM, which it forwards to the line, then SIGKILL two seconds later (the contained
/// tree dies with the launcher; an unsandboxed one is ended by the launcher on SIGTERM).
#[derive(Debug)]
pub struct EndOnDrop(Option<PidFd>);

impl EndOnDrop {
    /// Armed: dropping it ends the process of `p`.
    pub fn new(p: PidFd) -> EndOnDrop {
        EndOnDrop(Some(p))
    }

    /// Disarmed: dropping it signals nothing (the launcher ran to its end).
    pub fn disarm(&mut self) {
        self.0 = None;
    }

    /// Sends `sig` to the process now, while armed (a process gone already is no error:
    /// its end is on its way).
    pub fn signal(&self, sig: i32) {
        if let Some(p) = &self.0 {
            let _ = p.signal(sig);
        }
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            if p.signal(libc::SIGTERM).is_ok() {
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_secs(2));
                    let _ = p.signal(libc::SIGKILL);
                });
            }
        }
    }
}

/// Largest `output` chunk of `sandbox.launch`, in bytes of the line's output.
pub const OUTPUT_CHUNK: usize = 32 * 1024;

/// Turns a byte stream into `output` items: `data` (UTF-8 text) when the bytes are valid
/// UTF-8 (a character split between two reads is carried to the next chunk), else
/// `data_b64` (standard base64 of the raw bytes). Nothing is lost or replaced.
#[derive(Debug, Default)]
pub struct Chunker {
    carry: Vec<u8>,
}

impl Chunker {
    /// The item payload (`data` text or `data_b64`) of the next bytes.
    pub fn push(&mut self, bytes: &[u8]) -> Option<OutputData> {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(bytes);
        match std::str::from_utf8(&buf) {
            Ok(s) => (!s.is_empty()).then(|| OutputData::Data(s.to_string())),
            Err(e) if e.error_len().is_none() && buf.len() - e.valid_up_to() < 4 => {
                self.carry = buf.split_off(e.valid_up_to());
                let s = String::from_utf8(buf).unwrap_or_default();
                (!s.is_empty()).then_some(OutputData::Data(s))
            }
            Err(_) => Some(OutputData::DataB64(base64(&buf))),
        }
    }

    /// What is left at the end of the stream.
    pub fn flush(&mut self) -> Option<OutputData> {
        let c = std::mem::take(&mut self.carry);
        (!c.is_empty()).then(|| OutputData::DataB64(base64(&c)))
    }
}

/// Standard base64 with padding.
pub fn base64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use efr_sandbox_wire::{ExitKind, ExitSource};

    /// A `tcp` host grant is taken only with the host's loopback and a port, without
    /// `plain_http`; the error is the caller's (`invalid`) and says why.
    #[test]
    fn a_tcp_grant_is_checked() {
        let env = Env::new("/home/u");
        let g = |host: &str, port: Option<u16>, plain_http: bool| Grant::Host {
            host: host.into(),
            port,
            plain_http,
            tcp: true,
        };
        for ok in [
            g("localhost", Some(5432), false),
            g("127.0.0.1", Some(1), false),
            g("::1", Some(65535), false),
        ] {
            assert_eq!(
                check_grants(std::slice::from_ref(&ok), &env),
                Ok(vec![ok.clone()])
            );
        }
        for (bad, says) in [
            (g("db.test", Some(5432), false), "the host's loopback"),
            (g("10.0.0.1", Some(5432), false), "the host's loopback"),
            (g("localhost", None, false), "names its port"),
            (g("localhost", Some(0), false), "names its port"),
            (
                g("localhost", Some(80), true),
                "tcp and plain_http together",
            ),
        ] {
            let e = check_grants(std::slice::from_ref(&bad), &env).unwrap_err();
            assert_eq!(e.code, ErrorCode::Invalid, "{bad:?}");
            assert!(e.message.contains(says), "{bad:?}: {}", e.message);
        }
    }

    /// The record of a refused connect to the call's own loopback needs exactly the tcp
    /// grant of that port, and says why.
    #[test]
    fn a_refused_loopback_connect_needs_the_tcp_grant_of_its_port() {
        let r = loopback_record(2, 5432, "psql -h localhost");
        assert_eq!(r.id, "denial-3");
        assert_eq!((r.source, r.kind), (ExitSource::Denial, ExitKind::Host));
        assert_eq!(
            r.needs,
            Needs::Contained {
                grants: vec![Grant::Host {
                    host: "localhost".into(),
                    port: Some(5432),
                    plain_http: false,
                    tcp: true
                }]
            }
        );
        assert_eq!(r.judgement.verdict, Verdict::Review);
        let why = &r.judgement.reasons[0];
        assert!(
            why.contains("the call's loopback is its own")
                && why.contains("host=localhost:5432:tcp"),
            "{why}"
        );
        assert_eq!(r.facts.hosts[0].port, Some(5432));
    }

    /// Every former copy of home expansion (there were several, and they disagreed) gives what
    /// efr_policy::path::expand_home gives: a grant's path, a cache path of the config, a
    /// cache root, a config rule (Env::expand, RulePath::expand), the classifier's data paths.
    #[test]
    fn every_home_expansion_agrees() {
        let env = Env::new("/home/u");
        for text in [
            "~",
            "~/",
            "~/a",
            "~/a//b",
            "~//etc/x",
            "~///etc",
            "~/.cache/pip",
        ] {
            let want = efr_policy::path::expand_home(text, &env.home);
            assert!(want.starts_with("/home/u"), "{text}: {}", want.display());
            let grants = check_grants(
                &[Grant::Write {
                    path: text.to_string(),
                }],
                &env,
            )
            .unwrap_or_default();
            assert_eq!(
                grants,
                [Grant::Write {
                    path: want.to_string_lossy().into_owned()
                }],
                "{text}"
            );
            assert_eq!(env.expand(text).as_deref(), Some(want.as_path()), "{text}");
            assert_eq!(
                efr_policy::config::RulePath::expand(text, &env),
                efr_policy::config::RulePath::Abs(want.clone()),
                "{text}"
            );
            if text.starts_with("~/") {
                assert_eq!(
                    crate::caches::expand(text, &env).as_deref(),
                    Some(want.as_path())
                );
            }
        }
    }

    #[test]
    fn base64_and_chunks() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        let mut c = Chunker::default();
        let e = "é".as_bytes();
        assert_eq!(c.push(&[b'a', e[0]]), Some(OutputData::Data("a".into())));
        assert_eq!(c.push(&[e[1], b'b']), Some(OutputData::Data("éb".into())));
        assert_eq!(
            c.push(&[0xff, b'x']),
            Some(OutputData::DataB64(base64(&[0xff, b'x'])))
        );
        assert_eq!(c.push(&[e[0]]), None);
        assert_eq!(c.flush(), Some(OutputData::DataB64(base64(&[e[0]]))));
    }

    #[test]
    fn conversation_ids() {
        assert!(check_conversation("c-1.a_b").is_ok());
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert!(check_conversation(bad).is_err(), "{bad}");
        }
    }

    /// The plan's view lists are the policy's, made absolute: a relative read-only name
    /// inside each project, `~/` masks in the home, a relative mask left out.
    #[test]
    fn the_view_lists_reach_the_plan_absolute() {
        let ro = read_only_inside(
            vec![".envrc".into(), "/etc/x".into()],
            &["/p/".into(), "/q".into()],
        );
        assert_eq!(ro, ["/p/.envrc", "/q/.envrc", "/etc/x"]);
        let masks = absolute_masks(
            &[
                "~/.ssh".into(),
                "relative-is-dropped".into(),
                "/etc/y".into(),
            ],
            Path::new("/home/u"),
        );
        assert_eq!(masks, ["/home/u/.ssh", "/etc/y"]);
    }
}
