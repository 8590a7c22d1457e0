//! `efr-sandbox run` through the user's running service (`sandbox.run`): the call goes to
//! the service with this process's stdin, stdout and stderr (as fds) and environment, and
//! runs in the launcher the service keeps in standby, its namespaces made ahead. This
//! process waits for the finish, hands on the signals it gets to the call's launcher (as
//! it does to its own launcher), and prints what `run` prints.
//!
//! The service is the one at `$EFR_SANDBOX_SOCKET`, else `$XDG_RUNTIME_DIR/efr/sandbox.sock`.
//! When none answers there, one is started (`efr-sandbox serve --idle-exit`, in a session
//! of its own, its log in `serve.log` beside the socket); it ends once no client has been
//! connected for [`IDLE_EXIT`] (`$EFR_SANDBOX_IDLE_EXIT` seconds when set). The call is
//! not handed over (and runs in this process, as before) when no socket can be named, when
//! the service cannot be had, or when it is another build or runs for another home,
//! runtime dir or config home (`conflict`).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use efr_policy::config::Env;
use efr_sandbox_wire::rpc::{ErrorCode, HelloParams, ServerFrame, method};
use efr_sandbox_wire::{CallParams, Finish, LaunchItem, PROTOCOL_VERSION, RunParams};
use serde_json::{Value, json};

/// How long a service started here stays up with no client (`$EFR_SANDBOX_IDLE_EXIT`
/// seconds when set).
pub const IDLE_EXIT: Duration = Duration::from_secs(600);

fn idle_exit() -> String {
    std::env::var("EFR_SANDBOX_IDLE_EXIT")
        .ok()
        .filter(|v| v.parse::<f64>().is_ok_and(|s| s.is_finite() && s > 0.0))
        .unwrap_or_else(|| IDLE_EXIT.as_secs().to_string())
}

/// The size past which `serve.log` is emptied when a service is started.
const LOG_MAX: u64 = 1 << 20;

/// How long a service started here may take to answer.
const START_WAIT: Duration = Duration::from_secs(5);

/// Why the call was not handed over (nothing of it ran): it runs in this process.
#[derive(Debug)]
pub enum NotTaken {
    /// The service is another build, or runs for another home, runtime dir or config home
    /// (`conflict`): as designed, not said.
    Elsewhere,
    /// The service could not be had (started, reached, or it refused for another reason).
    Failed(String),
}

/// How a handed-over call ended.
#[derive(Debug)]
pub enum Ran {
    /// Its finish.
    Finished(Box<Finish>),
    /// The service refused the params (`invalid`): a usage error.
    Invalid(String),
    /// It was handed over and its end is not known (the service failed or went away).
    Lost(String),
}

/// The socket of the user's service, when one can be named.
pub fn socket() -> Option<PathBuf> {
    if let Some(s) = std::env::var_os("EFR_SANDBOX_SOCKET").filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(s));
    }
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("efr").join("sandbox.sock"))
}

/// Connects to the service at `socket`, starting one when none answers (and `start`). The
/// peer must run as this user: the call's stdio and environment go to it.
fn connect(socket: &Path, start: bool) -> Result<UnixStream, NotTaken> {
    let ours = |s: UnixStream| -> Result<UnixStream, NotTaken> {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let uid = nix::unistd::geteuid().as_raw();
        match getsockopt(&s, PeerCredentials) {
            Ok(c) if c.uid() == uid => Ok(s),
            Ok(c) => Err(NotTaken::Failed(format!(
                "the service at {} runs as uid {}, not as this user ({uid})",
                socket.display(),
                c.uid()
            ))),
            Err(e) => Err(NotTaken::Failed(format!(
                "cannot tell who serves {}: {e}",
                socket.display()
            ))),
        }
    };
    match UnixStream::connect(socket) {
        Ok(s) => return ours(s),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) && start => {}
        Err(e) if !start => {
            return Err(NotTaken::Failed(format!(
                "no service answers at {}: {e}",
                socket.display()
            )));
        }
        Err(e) => {
            return Err(NotTaken::Failed(format!(
                "cannot connect to {}: {e}",
                socket.display()
            )));
        }
    }
    let dir = socket.parent().unwrap_or(Path::new("/"));
    efr_call::launch::private_dir(dir)
        .map_err(|e| NotTaken::Failed(format!("cannot create {}: {e}", dir.display())))?;
    let log_path = dir.join("serve.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&log_path)
        .map_err(|e| NotTaken::Failed(format!("cannot open {}: {e}", log_path.display())))?;
    // Kept short: each service started here appends to it (a second one started at the
    // same moment says there why it stopped).
    if log.metadata().is_ok_and(|m| m.len() > LOG_MAX) {
        let _ = log.set_len(0);
    }
    let exe = std::env::current_exe()
        .map_err(|e| NotTaken::Failed(format!("cannot find this program: {e}")))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("serve")
        .arg("--socket")
        .arg(socket)
        .arg("--idle-exit")
        .arg(idle_exit())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    crate::sys::new_session(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| NotTaken::Failed(format!("cannot start the service: {e}")))?;
    let t = Instant::now();
    let mut ended: Option<(std::process::ExitStatus, Instant)> = None;
    loop {
        if let Ok(s) = UnixStream::connect(socket) {
            // Reaped by whoever inherits it: it outlives this process.
            drop(child);
            return ours(s);
        }
        // Another `run` may have started the one that answers (this one then exits, the
        // lock being the other's): a moment more for that one to listen.
        if ended.is_none()
            && let Ok(Some(st)) = child.try_wait()
        {
            ended = Some((st, Instant::now()));
        }
        if let Some((st, at)) = ended
            && at.elapsed() > Duration::from_millis(500)
        {
            return Err(NotTaken::Failed(format!(
                "the service did not start ({st}; see {})",
                log_path.display()
            )));
        }
        if t.elapsed() > START_WAIT {
            return Err(NotTaken::Failed(format!(
                "the service did not answer within {}s (see {})",
                START_WAIT.as_secs(),
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Says on stderr that the call does not get the variable `name`, and why: the same line
/// whether the call runs here or through the service.
pub fn say_env_dropped(name: &str, why: &str) {
    eprintln!("efr-sandbox: {name} is not passed to the call: {why}");
}

/// Reads the next frame of the service; `None` when it hung up or sent something unreadable.
fn next(s: &mut UnixStream) -> Option<ServerFrame> {
    let map = efr_sandbox_wire::frame::read_frame(s).ok()??;
    serde_json::from_value(Value::Object(map)).ok()
}

/// This process's stdin, stdout and stderr, as the call's.
fn stdio() -> std::io::Result<[OwnedFd; 3]> {
    Ok([
        std::io::stdin().as_fd().try_clone_to_owned()?,
        std::io::stdout().as_fd().try_clone_to_owned()?,
        std::io::stderr().as_fd().try_clone_to_owned()?,
    ])
}

/// Connects to the service at `socket` (started when none answers) and sends `bytes` (the
/// hello and the request, in one write: no round trip between them) with `fds`; the
/// connection once the hello is answered. `Ok(Err(why))` when the service hung up before
/// it answered: it ran nothing (a service stopping as it was reached, idle), and a second
/// try may reach a new one.
fn send(
    socket: &Path,
    bytes: &[u8],
    fds: &[OwnedFd],
    start: bool,
) -> Result<Result<UnixStream, String>, NotTaken> {
    let mut s = connect(socket, start)?;
    let hung_up = |what: &str| format!("the service at {} {what}", socket.display());
    if efr_call::sys::send_with_fds(&s, bytes, fds).is_err() {
        return Ok(Err(hung_up("hung up")));
    }
    // A service that takes connections but never answers is not waited for.
    let _ = s.set_read_timeout(Some(START_WAIT));
    let answer = next(&mut s);
    let _ = s.set_read_timeout(None);
    match answer {
        Some(ServerFrame::End { id: 1, .. }) => Ok(Ok(s)),
        // The request is then refused (`unauthorized`) and nothing runs.
        Some(ServerFrame::Error { error, .. }) => Err(NotTaken::Failed(hung_up(&format!(
            "refused hello: {}",
            error.message
        )))),
        Some(_) => Err(NotTaken::Failed(hung_up(
            "answered hello with another frame",
        ))),
        None => Ok(Err(hung_up("did not answer hello"))),
    }
}

/// Runs `call` through the service at `socket`. `Err` when it was not handed over (nothing
/// of it ran): the caller runs it itself. With `quiet`, the variables not passed to the call
/// are not said on stderr (its summary lists them).
pub fn run(
    socket: &Path,
    call: CallParams,
    env_args: &[String],
    env: &Env,
    quiet: bool,
) -> Result<Ran, NotTaken> {
    let dirs = crate::identity::Dirs::of(env);
    let hello = json!({"id": 1, "method": method::HELLO, "params": HelloParams {
        protocol: PROTOCOL_VERSION,
        client: Some(format!("efr-sandbox run {}", env!("CARGO_PKG_VERSION"))),
    }});
    let params = RunParams {
        call,
        env: std::env::vars_os()
            .filter_map(|(k, v)| {
                Some(efr_sandbox_wire::plan::EnvVar {
                    name: k.into_string().ok()?,
                    value: v.into_string().ok()?,
                })
            })
            .collect(),
        env_args: env_args.to_vec(),
        home: dirs.home,
        runtime_dir: dirs.runtime_dir,
        config_home: dirs.config_home,
        build: crate::identity::build().to_string(),
    };
    let req = json!({"id": 2, "method": method::RUN, "params": params});
    let mut bytes = efr_sandbox_wire::frame::encode(&hello)
        .map_err(|e| NotTaken::Failed(format!("hello: {e}")))?;
    bytes.extend(
        efr_sandbox_wire::frame::encode(&req)
            .map_err(|e| NotTaken::Failed(format!("sandbox.run: {e}")))?,
    );
    let fds = stdio().map_err(|e| NotTaken::Failed(format!("cannot pass stdio: {e}")))?;
    // A service that stops as this connects (it was idle) hangs up before it answers
    // hello, and has run nothing: then once more, with a service started anew.
    let mut s = match send(socket, &bytes, &fds, true)? {
        Ok(s) => s,
        Err(_) => send(socket, &bytes, &fds, true)?.map_err(NotTaken::Failed)?,
    };
    drop(fds);
    // From here the call may run: its end is reported, never run again here.
    let mut launcher: Option<OwnedFd> = None;
    let mut started = false;
    loop {
        let Some(f) = next(&mut s) else {
            // The hello was answered, so the request may have been taken (and its
            // `started` not sent before the service went): the call ended with the service.
            return Ok(Ran::Lost(format!(
                "the service at {} went away during the call, which ends with it",
                socket.display()
            )));
        };
        match f {
            ServerFrame::Item { item, .. } => match serde_json::from_value::<LaunchItem>(item) {
                Ok(LaunchItem::EnvDropped { name, why }) => {
                    if !quiet {
                        say_env_dropped(&name, &why);
                    }
                }
                Ok(LaunchItem::Started(st)) => {
                    started = true;
                    // The signals this process gets go to the call's launcher from now on
                    // (held until here), as to a launcher of its own.
                    if let Ok(fd) = efr_call::sys::pidfd_open(st.launcher_pid) {
                        efr_call::sys::forward_to(&fd);
                        launcher = Some(fd);
                    }
                }
                // The exit records come again in the finish.
                _ => {}
            },
            ServerFrame::End { end, .. } => {
                drop(launcher);
                return match serde_json::from_value::<Finish>(end) {
                    Ok(fin) => Ok(Ran::Finished(Box::new(fin))),
                    Err(e) => Ok(Ran::Lost(format!(
                        "the service's finish is unreadable: {e}"
                    ))),
                };
            }
            ServerFrame::Error { error, .. } => {
                return match error.code {
                    ErrorCode::Conflict if !started => Err(NotTaken::Elsewhere),
                    ErrorCode::Busy | ErrorCode::Unauthorized if !started => {
                        Err(NotTaken::Failed(error.message))
                    }
                    ErrorCode::Invalid if !started => Ok(Ran::Invalid(error.message)),
                    _ => Ok(Ran::Lost(format!("the service failed: {}", error.message))),
                };
            }
        }
    }
}

/// A connection to the user's service for the commands that only talk to it (`run
/// --background`, `jobs`): one started when none answers, as for `run`. It must be this
/// build, for this home, runtime dir and config home: a job is the service's, and the
/// commands must reach the service that holds it.
#[derive(Debug)]
pub struct Session {
    s: UnixStream,
    next: u64,
    socket: PathBuf,
}

/// Why a [`Session`] request failed.
#[derive(Debug)]
pub enum SessionError {
    /// The service could not be had.
    NotTaken(NotTaken),
    /// The service answered with an error.
    Refused(efr_sandbox_wire::rpc::ErrorBody),
    /// The service went away, or sent what does not read.
    Lost(String),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::NotTaken(NotTaken::Elsewhere) => {
                f.write_str("the service at this socket runs for another user setup or build")
            }
            SessionError::NotTaken(NotTaken::Failed(m)) | SessionError::Lost(m) => f.write_str(m),
            SessionError::Refused(e) => write!(f, "{} ({:?})", e.message, e.code),
        }
    }
}

impl Session {
    /// Connects to the service at `socket` (started when none answers) and says hello.
    pub fn open(socket: &Path) -> Result<Session, SessionError> {
        Self::open_with(socket, true)
    }

    /// Connects to the service at `socket` when one runs there (none is started) and says
    /// hello.
    pub fn open_running(socket: &Path) -> Result<Session, SessionError> {
        Self::open_with(socket, false)
    }

    fn open_with(socket: &Path, start: bool) -> Result<Session, SessionError> {
        let hello = json!({"id": 1, "method": method::HELLO, "params": HelloParams {
            protocol: PROTOCOL_VERSION,
            client: Some(format!("efr-sandbox {}", env!("CARGO_PKG_VERSION"))),
        }});
        let bytes = efr_sandbox_wire::frame::encode(&hello)
            .map_err(|e| SessionError::Lost(format!("hello: {e}")))?;
        let s = match send(socket, &bytes, &[], start).map_err(SessionError::NotTaken)? {
            Ok(s) => s,
            Err(_) => send(socket, &bytes, &[], start)
                .map_err(SessionError::NotTaken)?
                .map_err(SessionError::Lost)?,
        };
        Ok(Session {
            s,
            next: 2,
            socket: socket.to_path_buf(),
        })
    }

    /// Sends a request; its id.
    pub fn request(&mut self, name: &str, params: Value) -> Result<u64, SessionError> {
        let id = self.next;
        self.next += 1;
        let bytes =
            efr_sandbox_wire::frame::encode(&json!({"id": id, "method": name, "params": params}))
                .map_err(|e| SessionError::Lost(format!("{name}: {e}")))?;
        std::io::Write::write_all(&mut self.s, &bytes).map_err(|e| {
            SessionError::Lost(format!(
                "the service at {} hung up: {e}",
                self.socket.display()
            ))
        })?;
        Ok(id)
    }

    /// The next frame: `Ok(Some(item))`, `Ok(None)` at the end (its value in `end`), or
    /// the error that ended the request.
    pub fn next(&mut self, end: &mut Option<Value>) -> Result<Option<Value>, SessionError> {
        match next(&mut self.s) {
            Some(ServerFrame::Item { item, .. }) => Ok(Some(item)),
            Some(ServerFrame::End { end: e, .. }) => {
                *end = Some(e);
                Ok(None)
            }
            Some(ServerFrame::Error { error, .. }) => Err(SessionError::Refused(error)),
            None => Err(SessionError::Lost(format!(
                "the service at {} went away",
                self.socket.display()
            ))),
        }
    }

    /// A unary request's result.
    pub fn call(&mut self, name: &str, params: Value) -> Result<Value, SessionError> {
        self.request(name, params)?;
        let mut end = None;
        while self.next(&mut end)?.is_some() {}
        Ok(end.unwrap_or(Value::Null))
    }
}
