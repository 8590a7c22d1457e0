//! What the CLI prints that a call controls (a job's output, its command line, the paths
//! and summaries of a call's refusals, paths a surface scan or a cache found), made safe for
//! the user's terminal: through the pty relay's reviewed filter
//! ([`efr_launcher::pty::filter`]) for a stream of a program's output, with every control
//! shown as a visible escape for text inside a line of the CLI's own, and JSON with its C1
//! controls escaped. Only when the stream is a terminal: a pipe or a file gets the bytes as
//! they are, and so does `--raw` (the user's choice, for a terminal that should see them).

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use efr_launcher::pty::filter::{Filter, escape_controls, escape_json_controls};

/// `--raw`: the bytes as they are, also on a terminal.
static RAW: AtomicBool = AtomicBool::new(false);

/// Sets `--raw` for the rest of the process.
pub fn set_raw(raw: bool) {
    RAW.store(raw, Ordering::Relaxed);
}

/// One of the CLI's two output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// Whether what goes to it is filtered: it is a terminal and `--raw` is not set.
    pub fn filtered(self) -> bool {
        if RAW.load(Ordering::Relaxed) {
            return false;
        }
        match self {
            Stream::Stdout => std::io::stdout().is_terminal(),
            Stream::Stderr => std::io::stderr().is_terminal(),
        }
    }
}

/// `text` (a line of the CLI's own holding text of a call's) as it may reach `to`.
pub fn inline(to: Stream, text: &str) -> Cow<'_, str> {
    if to.filtered() {
        escape_controls(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// JSON text as it may reach `to`.
pub fn json(to: Stream, text: &str) -> Cow<'_, str> {
    if to.filtered() {
        escape_json_controls(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// The exit status of a command whose stdout was closed before it had printed everything:
/// 128 + SIGPIPE, what the shell reports for any Unix tool ended by the closed pipe (`set -o
/// pipefail` sees the same as for `cat`). Not 0: what it printed was not all read (a hook's
/// answer nobody read must not pass as one).
pub const CLOSED_STDOUT_EXIT: i32 = 128 + libc::SIGPIPE;

/// Writes `args` to stdout (what `out!`/`outln!` expand to). The root of "no command panics
/// on a closed pipe": SIGPIPE stays ignored (Rust's default, which the service, the
/// launcher and every socket write rely on: a write to a closed socket is an error, not the
/// end of the process), and the one place that prints a command's output turns the
/// error into a quiet exit.
pub fn out(args: std::fmt::Arguments<'_>) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args) {
        stdout_failed(&e);
    }
}

/// Ends the process after a failed write to stdout: quietly at a closed pipe
/// ([`CLOSED_STDOUT_EXIT`]), with the error on stderr otherwise (a full disk).
pub fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(CLOSED_STDOUT_EXIT);
    }
    eprintln!("efr-sandbox: error: writing to stdout: {e}");
    std::process::exit(1);
}

/// `efr-sandbox: LINE` on stderr, the line made safe ([`inline`]).
pub fn say(line: &str) {
    eprintln!("efr-sandbox: {}", inline(Stream::Stderr, line));
}

/// Lines of text (the CLI's own, holding a call's) printed on stdout, each made safe.
pub fn print_lines(text: &str) {
    let to = Stream::Stdout;
    let mut out = std::io::stdout().lock();
    for l in text.split_inclusive('\n') {
        let (body, nl) = match l.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (l, ""),
        };
        if let Err(e) = write!(out, "{}{nl}", inline(to, body)) {
            stdout_failed(&e);
        }
    }
    if let Err(e) = out.flush() {
        stdout_failed(&e);
    }
}

/// A program's output (a job's) written to one stream: through the pty relay's filter when
/// that stream is filtered, as it is otherwise.
#[derive(Debug)]
pub struct Relay {
    to: Stream,
    filter: Option<Filter>,
    buf: Vec<u8>,
}

impl Relay {
    pub fn new(to: Stream) -> Relay {
        Relay {
            to,
            filter: to.filtered().then(Filter::new),
            buf: Vec::new(),
        }
    }

    /// Writes `bytes` (filtered); an error when the stream is closed (`| head`).
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let out: &[u8] = match &mut self.filter {
            Some(f) => {
                self.buf.clear();
                f.feed(bytes, &mut self.buf);
                &self.buf
            }
            None => bytes,
        };
        self.put(out)
    }

    /// The end of the output: a sequence held is dropped, a string let through is closed.
    pub fn finish(&mut self) -> std::io::Result<()> {
        let Some(f) = &mut self.filter else {
            return Ok(());
        };
        self.buf.clear();
        f.finish(&mut self.buf);
        let tail = std::mem::take(&mut self.buf);
        self.put(&tail)
    }

    fn put(&self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        match self.to {
            Stream::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(bytes)?;
                o.flush()
            }
            Stream::Stderr => {
                let mut o = std::io::stderr().lock();
                o.write_all(bytes)?;
                o.flush()
            }
        }
    }
}
