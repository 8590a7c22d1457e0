//! A started call driven to its end on the call's runtime, in steps: the launcher's pipes
//! and its end read ([`Pipes`]), its output handed on as items with `started` first
//! ([`Relay`]), a stop asked or a caller gone ([`Stopping`]: SIGTERM, then SIGKILL), then
//! the finish folded off the runtime and handed on ([`finish`]).
//!
//! The launcher's pipes and its end are read here, on the runtime: no thread per pipe (each
//! was a wake-up on another CPU between the launcher's write and this task, at the call's
//! start and end). The loop ends once the output pipes are at their end and the launcher's
//! end is known: its exit (and the status pipe's end), or a status line that says how the
//! call ended, the last it writes (the launcher and the init close their copies of the
//! call's stdio before they exit: their teardown is not the call's).

use std::collections::HashMap;
use std::io::BufReader;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;

use efr_launcher::api::{Launched, Running};
use efr_launcher::status::{Outcome, StatusLine};
use efr_proxy::Refusal;
use efr_sandbox_wire::{Finish, LaunchItem, OutputStream};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, watch};

use super::{Call, Event, LauncherEnd, STOP_GRACE};
use crate::launch::{Chunker, EndOnDrop, OUTPUT_CHUNK, PidFd};

/// Drives a started call to its end. When the stream is dropped the call is stopped (as a
/// [`super::Stopper`] stops it) and driven on to the same end, its output read and dropped,
/// its finish written to the log.
pub(super) async fn drive(
    mut call: Call,
    running: Running,
    mut refusals: Option<mpsc::Receiver<Refusal>>,
    tx: mpsc::Sender<Event>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tx = Out { tx, gone: false };
    let Running { child, status } = running;
    let mut stopping = Stopping::new(PidFd::open(child.id()).ok().map(EndOnDrop::new));
    // The launcher starts from this process's environment: what of it is not passed
    // because it looks like a secret goes in the summary (noted while the launch runs, off
    // its path), unless the caller noted it before the start.
    if !call.env_noted {
        call.note_env_dropped(Vec::new());
    }
    let mut pipes = Pipes::open(child, status);
    let mut relay = Relay::default();
    loop {
        if tx.gone {
            stopping.begin();
            pipes.drop_output_after_exit();
        }
        if pipes.done() {
            break;
        }
        if pipes.wait_without_pidfd() {
            continue;
        }
        match next_event(&mut pipes, &stopping, &mut refusals, &mut stop, &tx).await {
            Ev::Read(stream, r) => {
                if let Some(bytes) = pipes.read(stream, r) {
                    relay.output(stream, bytes, &mut tx).await;
                }
            }
            Ev::Status(Ok(0) | Err(_)) => pipes.st = None,
            Ev::Status(Ok(_)) => {
                if let Some(s) = pipes.status_line() {
                    relay.started(&s, &call.call_id, &mut tx).await;
                }
            }
            Ev::Exit(r) => pipes.reap(r),
            Ev::Refusal(Some(r)) => {
                if let Some(record) = call.record_refusal(&r) {
                    tx.send(LaunchItem::Exit {
                        record: Box::new(record),
                    })
                    .await;
                }
            }
            Ev::Refusal(None) => refusals = None,
            Ev::Stop(asked) => stopping.asked(asked),
            Ev::Kill => stopping.kill(),
            Ev::Gone => tx.gone = true,
        }
    }
    // A launch that never started (a setup error) still hands on what it printed.
    relay.flush(&mut tx).await;
    stopping.disarm();
    let (o, end) = pipes.end();
    // The after-call effects block: off the runtime's other tasks.
    let Some((call, fin)) = fold_off_runtime(call, o, end).await else {
        // The runtime is shutting down (the service stops): nothing runs the finish.
        return;
    };
    let stopped = stopping.stopping;
    finish(call, fin, refusals, tx, stopped).await;
}

/// What the loop of [`drive`] got.
enum Ev {
    /// A read of one of the output pipes (0 bytes: its end).
    Read(OutputStream, std::io::Result<usize>),
    /// A read of a status line (0 bytes: the status pipe's end).
    Status(std::io::Result<usize>),
    /// The launcher's pidfd is readable: it has ended.
    Exit(std::io::Result<()>),
    /// A refusal of the call's proxy (`None`: its events have ended).
    Refusal(Option<Refusal>),
    /// The stop flag changed: whether a stop is asked (`None`: its sender is gone).
    Stop(Option<bool>),
    /// The grace after SIGTERM is over: SIGKILL.
    Kill,
    /// The stream's reader is gone.
    Gone,
}

/// Waits for the next thing the loop of [`drive`] acts on.
async fn next_event(
    p: &mut Pipes,
    s: &Stopping,
    refusals: &mut Option<mpsc::Receiver<Refusal>>,
    stop: &mut watch::Receiver<bool>,
    tx: &Out,
) -> Ev {
    let Pipes {
        out,
        err,
        st,
        exited,
        obuf,
        ebuf,
        line,
        exit,
        ..
    } = p;
    let exit_known = exit.is_some();
    tokio::select! {
        r = async {
            match out.as_mut() {
                Some(o) => o.read(obuf).await,
                None => std::future::pending().await,
            }
        } => Ev::Read(OutputStream::Stdout, r),
        r = async {
            match err.as_mut() {
                Some(e) => e.read(ebuf).await,
                None => std::future::pending().await,
            }
        } => Ev::Read(OutputStream::Stderr, r),
        r = async {
            line.clear();
            match st.as_mut() {
                Some(s) => s.read_line(line).await,
                None => std::future::pending().await,
            }
        } => Ev::Status(r),
        r = async {
            match exited.as_ref() {
                Some(fd) if !exit_known => fd.readable().await.map(|mut g| g.clear_ready()),
                _ => std::future::pending().await,
            }
        } => Ev::Exit(r),
        r = async {
            match refusals.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        } => Ev::Refusal(r),
        r = stop.changed(), if s.stop_open && !s.stopping => {
            Ev::Stop(r.ok().map(|()| *stop.borrow()))
        }
        () = async {
            match s.kill_at {
                Some(t) if !exit_known => tokio::time::sleep_until(t).await,
                _ => std::future::pending().await,
            }
        } => Ev::Kill,
        () = tx.tx.closed(), if !tx.gone => Ev::Gone,
    }
}

/// The launcher's pipes (output, status) and its end.
struct Pipes {
    child: Launched,
    out: Option<pipe::Receiver>,
    err: Option<pipe::Receiver>,
    st: Option<tokio::io::BufReader<pipe::Receiver>>,
    /// Its pidfd, readable once it has ended (`None`: waited for once the pipes are done).
    exited: Option<AsyncFd<OwnedFd>>,
    obuf: Vec<u8>,
    ebuf: Vec<u8>,
    /// The status line being read.
    line: String,
    /// The status lines read so far.
    text: String,
    /// Its end, once known.
    exit: Option<std::io::Result<ExitStatus>>,
    /// The launcher's tree watched for a call that keeps a processor busy
    /// ([`crate::cpu_share`]); dropped before the launcher is reaped (its pid is then free).
    cpu: Option<crate::cpu_share::Watch>,
    /// A status line said how the call ended (the last it writes).
    ended: bool,
}

impl Pipes {
    fn open(mut child: Launched, status: BufReader<std::fs::File>) -> Pipes {
        let out = child
            .stdout
            .take()
            .and_then(|f| pipe::Receiver::from_file(f).ok());
        let err = child
            .stderr
            .take()
            .and_then(|f| pipe::Receiver::from_file(f).ok());
        let st = pipe::Receiver::from_file(status.into_inner())
            .ok()
            .map(tokio::io::BufReader::new);
        let exited = crate::sys::async_pidfd(child.id()).ok();
        let cpu = Some(crate::cpu_share::watch(child.id()));
        Pipes {
            child,
            cpu,
            out,
            err,
            st,
            exited,
            obuf: vec![0u8; OUTPUT_CHUNK],
            ebuf: vec![0u8; OUTPUT_CHUNK],
            line: String::new(),
            text: String::new(),
            exit: None,
            ended: false,
        }
    }

    /// The output pipes are at their end and the launcher's end is known.
    fn done(&self) -> bool {
        self.out.is_none()
            && self.err.is_none()
            && (self.ended || (self.exit.is_some() && self.st.is_none()))
    }

    /// No one reads the output: what of the line outlives its launcher (and holds the
    /// pipes) does not hold the call's end.
    fn drop_output_after_exit(&mut self) {
        if self.exit.is_some() {
            self.out = None;
            self.err = None;
        }
    }

    /// Without a pidfd, the launcher's end is waited for once the pipes are done: whether
    /// it was, now.
    fn wait_without_pidfd(&mut self) -> bool {
        let waits = self.exit.is_none()
            && self.exited.is_none()
            && self.out.is_none()
            && self.err.is_none()
            && self.st.is_none();
        if waits {
            self.cpu = None;
            self.exit = Some(self.child.wait());
        }
        waits
    }

    /// The bytes a read of `stream` gave; at its end (or an error), the pipe is closed.
    fn read(&mut self, stream: OutputStream, r: std::io::Result<usize>) -> Option<&[u8]> {
        let n = match r {
            Ok(0) | Err(_) => {
                match stream {
                    OutputStream::Stdout => self.out = None,
                    _ => self.err = None,
                }
                return None;
            }
            Ok(n) => n,
        };
        let buf = if stream == OutputStream::Stdout {
            &self.obuf
        } else {
            &self.ebuf
        };
        Some(&buf[..n])
    }

    /// Takes the status line read: kept for the outcome, and given when it is `started`.
    fn status_line(&mut self) -> Option<StatusLine> {
        let l = std::mem::take(&mut self.line);
        let parsed = StatusLine::parse(&l);
        self.ended |= matches!(
            parsed,
            Ok(StatusLine::Exited { .. } | StatusLine::SetupError { .. })
        );
        self.text.push_str(&l);
        match parsed {
            Ok(s @ StatusLine::Started { .. }) => Some(s),
            _ => None,
        }
    }

    /// Readable: the launcher has ended, and this reaps it at once.
    fn reap(&mut self, r: std::io::Result<()>) {
        self.cpu = None;
        self.exit = match r.and_then(|()| self.child.try_wait()) {
            Ok(Some(st)) => Some(Ok(st)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        };
    }

    /// The outcome the status lines say, and what is known of the launcher's end. A
    /// launcher not reaped yet is ending (its last status line and its pipes' ends are
    /// in): it is reaped off the call's path.
    fn end(self) -> (Outcome, LauncherEnd) {
        let Pipes {
            mut child,
            text,
            exit,
            cpu,
            ..
        } = self;
        drop(cpu);
        if exit.is_none() {
            tokio::task::spawn_blocking(move || {
                let _ = child.wait();
            });
        }
        let end = match exit {
            Some(st) => LauncherEnd::Waited(st),
            None => LauncherEnd::Unknown,
        };
        (Outcome::from_lines(&text), end)
    }
}

/// Output held back until `started` is sent, at most.
const HELD_OUTPUT_MAX: usize = 4 << 20;

/// The call's output as items. The launcher writes `started` before the line runs, but
/// the status lines and the output come on different pipes: output read before `started`
/// is held (up to a bound) so that `started` is always the first item.
#[derive(Default)]
struct Relay {
    chunkers: HashMap<OutputStream, Chunker>,
    started_sent: bool,
    held: Vec<(OutputStream, Vec<u8>)>,
    held_bytes: usize,
}

impl Relay {
    /// Hands on (or holds, before `started`) what a read of `stream` gave.
    async fn output(&mut self, stream: OutputStream, bytes: &[u8], tx: &mut Out) {
        if tx.gone {
            return;
        }
        if !self.started_sent && self.held_bytes < HELD_OUTPUT_MAX {
            self.held_bytes += bytes.len();
            self.held.push((stream, bytes.to_vec()));
            return;
        }
        if let Some(i) = output(stream, self.chunkers.entry(stream).or_default(), bytes) {
            tx.send(i).await;
        }
    }

    /// Sends the `started` item (with the call's id), then the output held before it.
    async fn started(&mut self, s: &StatusLine, call_id: &Option<String>, tx: &mut Out) {
        if let Some(mut i) = crate::launch::started_item(s) {
            if let LaunchItem::Started(st) = &mut i {
                st.call_id.clone_from(call_id);
            }
            tx.send(i).await;
        }
        self.started_sent = true;
        self.release_held(tx).await;
    }

    async fn release_held(&mut self, tx: &mut Out) {
        for (stream, bytes) in self.held.drain(..) {
            let c = self.chunkers.entry(stream).or_default();
            if let Some(i) = output(stream, c, &bytes) {
                tx.send(i).await;
            }
        }
    }

    /// Hands on what is held and what the chunkers still hold.
    async fn flush(&mut self, tx: &mut Out) {
        self.release_held(tx).await;
        for (stream, c) in self.chunkers.iter_mut() {
            if let Some(data) = c.flush() {
                tx.send(LaunchItem::Output {
                    stream: *stream,
                    data,
                })
                .await;
            }
        }
    }
}

fn output(stream: OutputStream, c: &mut Chunker, bytes: &[u8]) -> Option<LaunchItem> {
    c.push(bytes)
        .map(|data| LaunchItem::Output { stream, data })
}

/// A stop asked ([`super::Stopper`]) or a caller gone: SIGTERM now, SIGKILL at a deadline.
struct Stopping {
    /// Ends the launcher's tree if the drive is dropped before its end.
    guard: Option<EndOnDrop>,
    kill_at: Option<tokio::time::Instant>,
    stopping: bool,
    /// The stop flag's sender is still there.
    stop_open: bool,
}

impl Stopping {
    fn new(guard: Option<EndOnDrop>) -> Stopping {
        Stopping {
            guard,
            kill_at: None,
            stopping: false,
            stop_open: true,
        }
    }

    /// Starts the stop (once): SIGTERM now, SIGKILL after [`STOP_GRACE`].
    fn begin(&mut self) {
        if !self.stopping {
            self.stopping = true;
            self.kill_at = Some(stop_now(self.guard.as_ref()));
        }
    }

    /// The stop flag changed (`None`: its sender is gone).
    fn asked(&mut self, asked: Option<bool>) {
        match asked {
            Some(true) => self.begin(),
            Some(false) => {}
            None => self.stop_open = false,
        }
    }

    fn kill(&mut self) {
        if let Some(g) = self.guard.as_ref() {
            g.signal(libc::SIGKILL);
        }
        self.kill_at = None;
    }

    /// The launcher's end is in: nothing to end on drop.
    fn disarm(&mut self) {
        if let Some(g) = self.guard.as_mut() {
            g.disarm();
        }
    }
}

/// Asks the launcher to end (SIGTERM, which it hands to the line); when to kill it.
fn stop_now(guard: Option<&EndOnDrop>) -> tokio::time::Instant {
    if let Some(g) = guard {
        g.signal(libc::SIGTERM);
    }
    tokio::time::Instant::now() + STOP_GRACE
}

/// [`Call::fold`] on a blocking thread (the git guard walk and the cache merge block); `None`
/// when the runtime is shutting down.
async fn fold_off_runtime(call: Call, o: Outcome, end: LauncherEnd) -> Option<(Call, Finish)> {
    match crate::launch::off_runtime(move || {
        let fin = call.fold(o, &end);
        (call, fin)
    })
    .await
    {
        Ok(x) => Some(x),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

/// Hands on the finish's exit records, the proxy's refusals not sent yet, then closes the
/// call ([`Call::close`]: its proxy, its filters, its record in the call log) and hands on
/// the finish (or logs it when no one reads it).
async fn finish(
    mut call: Call,
    mut fin: Finish,
    mut refusals: Option<mpsc::Receiver<Refusal>>,
    mut tx: Out,
    stopping: bool,
) {
    for record in fin.exits.clone() {
        tx.send(LaunchItem::Exit {
            record: Box::new(record),
        })
        .await;
    }
    if let Some(rx) = refusals.as_mut() {
        while let Ok(r) = rx.try_recv() {
            if let Some(record) = call.record_refusal(&r) {
                tx.send(LaunchItem::Exit {
                    record: Box::new(record),
                })
                .await;
            }
        }
    }
    let call_id = call.call_id.clone();
    call.stopped = stopping || tx.gone;
    for record in call.close(&mut fin) {
        tx.send(LaunchItem::Exit {
            record: Box::new(record),
        })
        .await;
    }
    tx.end(fin, call_id.as_deref()).await;
}

/// Where a running call's events go: to the stream's reader until it is gone (the caller
/// cancelled, hung up or stopped reading and was dropped), then nowhere: the call is
/// stopped and still runs to its end.
struct Out {
    tx: mpsc::Sender<Event>,
    gone: bool,
}

impl Out {
    async fn send(&mut self, item: LaunchItem) {
        if !self.gone && self.tx.send(Event::Item(item)).await.is_err() {
            self.gone = true;
        }
    }

    /// Hands on the finish, or writes it to the log when no one reads it.
    async fn end(&mut self, fin: Finish, call_id: Option<&str>) {
        let fin = Box::new(fin);
        let unread = if self.gone {
            fin
        } else {
            match self.tx.send(Event::End(fin)).await {
                Ok(()) => return,
                Err(mpsc::error::SendError(Event::End(fin))) => fin,
                Err(_) => return,
            }
        };
        log_unread_finish(&unread, call_id);
    }
}

/// The service's record of a call whose caller left before its end: one line of its log
/// with the finish.
fn log_unread_finish(fin: &Finish, call_id: Option<&str>) {
    let json = serde_json::to_string(fin).unwrap_or_else(|e| format!("(not serialized: {e})"));
    eprintln!(
        "efr-sandbox: call {} ended after its caller left; its finish: {json}",
        call_id.unwrap_or("(no id)")
    );
}
