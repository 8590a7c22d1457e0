//! `sandbox.launch` (a stream), `sandbox.plan` and `sandbox.finish`. See docs/protocol.md
//! for the frames.

use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use efr_launcher::api::Running;
use efr_launcher::status::{Outcome, StatusLine};
use efr_sandbox_wire::SandboxSummary;
use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::dispatch::{Call, HandlerFuture, boxed, params};
use crate::server::Service;
use efr_call::launch::{
    CallParams, Chunker, EndOnDrop, OUTPUT_CHUNK, PidFd, finished, launcher, prepare, private_dir,
    started_item,
};

/// A call handed out by `sandbox.plan`, until `sandbox.finish`.
#[derive(Debug)]
pub struct PlannedCall {
    plan_file: PathBuf,
    line: String,
    projects: Vec<String>,
    /// The read-only paths of its launch view (for the check after the call).
    view: Vec<String>,
    /// The call's proxy, until `sandbox.finish`.
    proxy: Option<efr_call::egress::CallProxy>,
    /// Its cache layers, merged at `sandbox.finish`.
    caches: efr_call::caches::CallCaches,
    /// The call's bus filters, until `sandbox.finish`.
    bus: Option<efr_call::bus::CallBus>,
}

/// The calls handed out by `sandbox.plan`, by token.
#[derive(Debug, Default)]
pub struct Planned(Mutex<HashMap<String, PlannedCall>>);

impl Planned {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PlannedCall>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Planned {
    fn drop(&mut self) {
        for (_, c) in self.lock().drain() {
            let _ = std::fs::remove_file(&c.plan_file);
        }
    }
}

fn internal(m: impl Into<String>) -> ErrorBody {
    ErrorBody::new(ErrorCode::Internal, m)
}

fn to_value<T: Serialize>(v: &T) -> Result<Value, ErrorBody> {
    serde_json::to_value(v).map_err(|e| internal(format!("result does not serialize: {e}")))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorBody> {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(internal(format!("did not finish: {e}"))),
    }
}

/// The end of a call that never ran.
fn setup_error_end(msg: String) -> Value {
    json!({
        "sandbox_summary": SandboxSummary { setup_error: Some(msg), ..Default::default() },
        "exit_status": 125,
        "duration_ms": 0,
    })
}

enum Ev {
    Out(&'static str, Vec<u8>),
    Status(String),
    Exit(std::io::Result<std::process::ExitStatus>),
}

fn pump(mut r: impl Read + Send + 'static, name: &'static str, tx: tokio::sync::mpsc::Sender<Ev>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; OUTPUT_CHUNK];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.blocking_send(Ev::Out(name, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
}

/// Output held back until `started` is sent, at most.
const HELD_OUTPUT_MAX: usize = 4 << 20;

/// `sandbox.launch`: runs one line through the launcher; items `started`, `output`, `exit`
/// (denials), then the end (summary, code or signal, duration). Cancel ends the tree.
pub fn launch(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: CallParams = params(call.params)?;
        let config = svc.policy.config();
        let env = svc.policy.env().clone();
        let runtime = svc.paths.runtime_dir.clone();
        let (p2, c2, e2) = (p.clone(), config.clone(), env.clone());
        // The plan and, for a call that gets a proxy, its policy (which reads token files):
        // one trip to the blocking pool, not two.
        let prepared = blocking(move || {
            prepare(&p2, &c2, &e2, Some(&runtime), None).map(|r| {
                r.map(|plan| {
                    let pol = efr_call::egress::wanted(&plan).then(|| {
                        let ce = efr_call::egress::call_env(&plan);
                        efr_call::egress::policy(&plan.grants, &c2, &e2, &p2.projects, &ce)
                    });
                    (plan, pol)
                })
            })
        })
        .await??;
        let (mut plan, pol) = match prepared {
            Ok(x) => x,
            Err(msg) => return Ok(setup_error_end(msg)),
        };
        // The launcher starts from this process's environment: what of it is not passed
        // because it looks like a secret goes in the summary.
        let env_dropped: Vec<String> = efr_call::launch::env_drops(&plan, &config)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let mut proxy = None;
        if let Some(pol) = pol {
            let runtime = svc.paths.runtime_dir.clone();
            match efr_call::egress::CallProxy::attach(
                &mut plan,
                pol,
                Some(&runtime),
                &tokio::runtime::Handle::current(),
            ) {
                Ok(cp) => proxy = Some(cp),
                Err(e) => return Ok(setup_error_end(format!("the call's proxy: {e}"))),
            }
        }
        let bus = match efr_call::bus::attach_for(&mut plan, &config, &svc.paths.runtime_dir) {
            Ok(b) => b,
            Err(e) => return Ok(setup_error_end(e)),
        };
        let mut refusals = proxy.as_ref().and_then(|c| c.take_events());
        let running = match launcher().spawn(&plan, Stdio::null(), Stdio::piped(), Stdio::piped()) {
            Ok(r) => r,
            Err(e) => return Ok(setup_error_end(format!("cannot start efr-launch: {e}"))),
        };
        let Running {
            mut child,
            mut status,
        } = running;
        let mut guard = PidFd::open(child.id()).ok().map(EndOnDrop::new);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Ev>(64);
        if let Some(o) = child.stdout.take() {
            pump(o, "stdout", tx.clone());
        }
        if let Some(e) = child.stderr.take() {
            pump(e, "stderr", tx.clone());
        }
        let stx = tx.clone();
        std::thread::spawn(move || {
            let mut l = String::new();
            loop {
                l.clear();
                match status.read_line(&mut l) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if stx.blocking_send(Ev::Status(l.clone())).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        std::thread::spawn(move || {
            let st = child.wait();
            let _ = tx.blocking_send(Ev::Exit(st));
        });
        let mut text = String::new();
        let mut chunkers: HashMap<&'static str, Chunker> = HashMap::new();
        let mut exit = None;
        let mut host_exits = Vec::new();
        // The launcher writes `started` before the line runs, but the status lines and the
        // output come through different threads here: output read before `started` is held
        // (up to a bound) so that `started` is always the first item.
        let mut started_sent = false;
        let mut held: Vec<(&'static str, Vec<u8>)> = Vec::new();
        let mut held_bytes = 0usize;
        loop {
            let ev = tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => ev,
                    None => break,
                },
                r = async {
                    match refusals.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => {
                    match (r, proxy.as_ref()) {
                        (Some(r), Some(cp)) => {
                            if let Some(rec) = cp.record_new(&r, &p.line) {
                                call.items.send(json!({"kind": "exit", "record": rec})).await?;
                                host_exits.push(rec);
                            }
                        }
                        _ => refusals = None,
                    }
                    continue;
                }
            };
            match ev {
                Ev::Out(stream, bytes) => {
                    if !started_sent && held_bytes < HELD_OUTPUT_MAX {
                        held_bytes += bytes.len();
                        held.push((stream, bytes));
                        continue;
                    }
                    if let Some((k, d)) = chunkers.entry(stream).or_default().push(&bytes) {
                        call.items
                            .send(json!({"kind": "output", "stream": stream, k: d}))
                            .await?;
                    }
                }
                Ev::Status(l) => {
                    if let Ok(s @ StatusLine::Started { .. }) = StatusLine::parse(&l) {
                        call.items.send(started_item(&s)).await?;
                        started_sent = true;
                        for (stream, bytes) in held.drain(..) {
                            if let Some((k, d)) = chunkers.entry(stream).or_default().push(&bytes) {
                                call.items
                                    .send(json!({"kind": "output", "stream": stream, k: d}))
                                    .await?;
                            }
                        }
                    }
                    text.push_str(&l);
                }
                Ev::Exit(st) => exit = Some(st),
            }
        }
        // A launch that never started (a setup error) still hands on what it printed.
        for (stream, bytes) in held.drain(..) {
            if let Some((k, d)) = chunkers.entry(stream).or_default().push(&bytes) {
                call.items
                    .send(json!({"kind": "output", "stream": stream, k: d}))
                    .await?;
            }
        }
        for (stream, c) in chunkers.iter_mut() {
            if let Some((k, d)) = c.flush() {
                call.items
                    .send(json!({"kind": "output", "stream": stream, k: d}))
                    .await?;
            }
        }
        if let Some(g) = guard.as_mut() {
            g.disarm();
        }
        let mut o = Outcome::from_lines(&text);
        if o.setup_error.is_none() && o.code.is_none() && o.signal.is_none() {
            o.setup_error = Some(match exit {
                Some(Ok(st)) => format!("efr-launch ended without reporting the line's end ({st})"),
                Some(Err(e)) => format!("efr-launch could not be waited for: {e}"),
                None => "efr-launch ended without reporting the line's end".into(),
            });
        }
        let line = p.line.clone();
        let projects = p.projects.clone();
        let view = plan.read_only_inside.clone();
        let caches = efr_call::caches::CallCaches::of(&plan, &env);
        let mut fin =
            blocking(move || finished(&o, &line, &projects, &view, &caches, &config, &env)).await?;
        fin.sandbox_summary.env_dropped = env_dropped;
        for r in &fin.exits {
            call.items
                .send(json!({"kind": "exit", "record": r}))
                .await?;
        }
        if let Some(mut cp) = proxy {
            if let Some(rx) = refusals.as_mut() {
                while let Ok(r) = rx.try_recv() {
                    if let Some(rec) = cp.record_new(&r, &p.line) {
                        call.items
                            .send(json!({"kind": "exit", "record": &rec}))
                            .await?;
                        host_exits.push(rec);
                    }
                }
            }
            let rest = cp.finish(&mut fin.sandbox_summary, &p.line);
            for r in &rest {
                call.items
                    .send(json!({"kind": "exit", "record": r}))
                    .await?;
            }
            host_exits.extend(rest);
            fin.exits.extend(host_exits);
        }
        if let Some(mut b) = bus {
            for r in efr_call::bus::finish_into(&mut b, &mut fin, &p.line) {
                call.items
                    .send(json!({"kind": "exit", "record": r}))
                    .await?;
            }
        }
        to_value(&fin)
    })
}

#[derive(Debug, Deserialize)]
struct PlanParams {
    #[serde(flatten)]
    call: CallParams,
    /// The fd efrd gives the launcher for its status lines (default 3).
    #[serde(default)]
    status_fd: Option<i32>,
}

/// `sandbox.plan`: the launcher command line and a plan file it reads (0600 in a 0700 dir
/// of the runtime dir), the conversation's dirs made; `sandbox.finish` releases them.
pub fn plan(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: PlanParams = params(call.params)?;
        let status_fd = p.status_fd.unwrap_or(3);
        if !(3..=1024).contains(&status_fd) {
            return Err(ErrorBody::new(
                ErrorCode::Invalid,
                format!("status_fd {status_fd}: expected 3 to 1024"),
            ));
        }
        let config = svc.policy.config();
        let env = svc.policy.env().clone();
        let svc2 = svc.clone();
        let handle = tokio::runtime::Handle::current();
        blocking(move || {
            let runtime = svc2.paths.runtime_dir.clone();
            let mut plan = match prepare(&p.call, &config, &env, Some(&runtime), None)? {
                Ok(plan) => plan,
                Err(msg) => return Ok(setup_error_end(msg)),
            };
            let mut proxy = None;
            if efr_call::egress::wanted(&plan) {
                let ce = efr_call::egress::call_env(&plan);
                let pol =
                    efr_call::egress::policy(&plan.grants, &config, &env, &p.call.projects, &ce);
                match efr_call::egress::CallProxy::attach(&mut plan, pol, Some(&runtime), &handle) {
                    Ok(cp) => proxy = Some(cp),
                    Err(e) => return Ok(setup_error_end(format!("the call's proxy: {e}"))),
                }
            }
            let bus = match efr_call::bus::attach_for(&mut plan, &config, &runtime) {
                Ok(b) => b,
                Err(e) => return Ok(setup_error_end(e)),
            };
            let dir = runtime.join("plans");
            private_dir(&dir).map_err(|e| internal(format!("{}: {e}", dir.display())))?;
            let token = efr_call::sys::random_hex(16)
                .map_err(|e| internal(format!("no random token: {e}")))?;
            let file = dir.join(format!("{token}.json"));
            let json = serde_json::to_vec(&plan).map_err(|e| internal(e.to_string()))?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&file)
                .map_err(|e| internal(format!("{}: {e}", file.display())))?;
            std::io::Write::write_all(&mut f, &json)
                .map_err(|e| internal(format!("{}: {e}", file.display())))?;
            let argv = launcher().command(&file, status_fd);
            svc2.planned.lock().insert(
                token.clone(),
                PlannedCall {
                    plan_file: file.clone(),
                    line: p.call.line.clone(),
                    projects: p.call.projects.clone(),
                    view: plan.read_only_inside.clone(),
                    proxy,
                    caches: efr_call::caches::CallCaches::of(&plan, &env),
                    bus,
                },
            );
            Ok(json!({
                "token": token,
                "argv": argv,
                "plan_file": file,
                "status_fd": status_fd,
            }))
        })
        .await?
    })
}

#[derive(Debug, Deserialize)]
struct FinishParams {
    token: String,
    /// The status lines the launcher wrote, as written (JSON lines).
    #[serde(default)]
    status: String,
}

/// `sandbox.finish`: folds the call's status lines, deletes its plan file, returns the
/// summary and the denial exit records.
pub fn finish(svc: Arc<Service>, call: Call) -> HandlerFuture {
    boxed(async move {
        let p: FinishParams = params(call.params)?;
        let Some(c) = svc.planned.lock().remove(&p.token) else {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!(
                    "no planned call with token {:?} (finished already?)",
                    p.token
                ),
            ));
        };
        let config = svc.policy.config();
        let env = svc.policy.env().clone();
        let fin = blocking(move || {
            let mut c = c;
            let _ = std::fs::remove_file(&c.plan_file);
            let mut o = Outcome::from_lines(&p.status);
            if o.setup_error.is_none() && o.code.is_none() && o.signal.is_none() {
                o.setup_error = Some("the call's status lines say nothing of its end".into());
            }
            let mut fin = finished(&o, &c.line, &c.projects, &c.view, &c.caches, &config, &env);
            if let Some(cp) = c.proxy.as_mut() {
                let recs = cp.finish(&mut fin.sandbox_summary, &c.line);
                fin.exits.extend(recs);
            }
            if let Some(b) = c.bus.as_mut() {
                efr_call::bus::finish_into(b, &mut fin, &c.line);
            }
            fin
        })
        .await?;
        to_value(&fin)
    })
}
