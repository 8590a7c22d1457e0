//! The call log: one JSON line per finished call, per user, in the service's state dir
//! (`$XDG_STATE_HOME/efr-sandbox/calls.jsonl`, the one before it `calls.jsonl.1`). Written
//! where every call ends ([`crate::Call::close`]: `sandbox.launch`, `sandbox.run`, a
//! background job, efrd's `sandbox.plan` + `sandbox.finish`, `efr-sandbox run` in its own
//! process) and for a call whose sandbox could not be set up ([`append_unprepared`]); read
//! by `efr-sandbox log`.
//!
//! A record holds what the call was and how it ended (line, working directory, projects,
//! grants, conversation, duration, status, what was refused, the names of the variables not
//! passed), never its output, and no secret: the line and every text of a record go through
//! [`redact`] (the secret detector's shapes, the config's secret values, and the values of
//! `NAME=VALUE` words whose name the environment's drop rules refuse).
//!
//! Writers never interleave: each record is one `write` to the file opened `O_APPEND`, under
//! an exclusive `flock` of the file that also orders the rotation (two calls of the service
//! finishing at once, the service and `efr-sandbox run` at once). A reader takes no lock: it
//! sees whole lines, and a line cut short (a writer killed in its write, a full disk) is
//! reported as unreadable and skipped.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use efr_policy::config::{Config, Env};
use efr_sandbox_wire::envfilter::{ValuePattern, glob_matches};
use efr_sandbox_wire::{CallParams, Finish, Grant};
use serde::{Deserialize, Serialize};

/// The bounds of the log, each with why (the one reviewed place for them).
pub mod bounds {
    /// The current file is rotated once a record would take it past this: about 10,000
    /// calls of a few hundred bytes, days of an agent's work, while the whole log (this
    /// file and the one before it) stays under 8 MiB of the user's state dir.
    pub const FILE_BYTES: u64 = 4 << 20;
    /// The most of a line a record keeps (its start, then how long it was): a heredoc of
    /// a whole file would otherwise fill the log with one call.
    pub const LINE_BYTES: usize = 4096;
    /// The refusals a record lists (the rest counted): a call refused at every file of a
    /// tree names the first ones, which say what it was.
    pub const REFUSED: usize = 32;
    /// The most of any other text (a refusal's summary, a setup error, a path).
    pub const TEXT_BYTES: usize = 1024;
    /// The longest line a reader takes as a record (a longer one is unreadable): no record
    /// the writer makes is near it.
    pub const READ_LINE_BYTES: usize = 256 << 10;
}

/// The log's file name in the state dir.
pub const FILE: &str = "calls.jsonl";
/// The file before it, after a rotation.
pub const OLD_FILE: &str = "calls.jsonl.1";

/// What replaces a secret in a record.
pub const REDACTED: &str = "[redacted]";

/// One finished call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The record's id (`efr-sandbox log ID`): 12 hex digits.
    pub id: String,
    /// When the call ended, in seconds since the epoch.
    pub time: u64,
    /// The service's id of the call (`sandbox.launch`'s `call_id`), when it named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The line, redacted and shortened ([`bounds::LINE_BYTES`]).
    pub line: String,
    /// Where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Its project roots.
    #[serde(default)]
    pub projects: Vec<String>,
    /// Its grants, as the wire gives them.
    #[serde(default)]
    pub grants: Vec<Grant>,
    /// Its conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// It ran outside the sandbox.
    #[serde(default)]
    pub unsandboxed: bool,
    /// It was a background job.
    #[serde(default)]
    pub background: bool,
    /// It was stopped before its end (a cancel, its caller gone, `jobs stop`).
    #[serde(default)]
    pub stopped: bool,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// The shell-style status (the code, 128+N for a signal, 125 for a setup error).
    pub exit_status: i32,
    /// The signal that ended the line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why the sandbox did not start (or its launcher ended mid-call), redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_error: Option<String>,
    /// What was refused: one summary per exit record, redacted ([`bounds::REFUSED`]).
    #[serde(default)]
    pub refused: Vec<String>,
    /// Refusals past [`bounds::REFUSED`], counted.
    #[serde(default)]
    pub refused_more: usize,
    /// The variables of the environment not passed to the call, by name.
    #[serde(default)]
    pub env_dropped: Vec<String>,
    /// The credentials the call's proxy sent for it (`credentials_used` of its summary:
    /// name, host, method, path, count; never the secret).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials_used: Vec<efr_sandbox_wire::summary::CredentialUse>,
}

impl Record {
    /// The status in one word: `ok`, `exit N`, `signal N`, `not started`, `lost` (its
    /// launcher ended mid-call), `stopped`.
    pub fn status(&self) -> String {
        match (&self.setup_error, self.signal) {
            (Some(e), _) if e.starts_with(crate::end::LAUNCHER_LOST) => "lost".into(),
            (Some(_), _) => "not started".into(),
            _ if self.stopped => "stopped".into(),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) if self.exit_status == 0 => "ok".into(),
            (None, None) => format!("exit {}", self.exit_status),
        }
    }
}

/// Why the log could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The state dir could not be made.
    #[error("cannot create {}: {source}", dir.display())]
    Dir {
        /// The state dir.
        dir: PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// The log could not be opened, locked, rotated or written.
    #[error("cannot write the call log {}: {source}", file.display())]
    Write {
        /// The log's file.
        file: PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
}

/// A line of the log that is no record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The file.
    pub file: PathBuf,
    /// Its line number (from 1).
    pub line: usize,
    /// What is wrong with it.
    pub why: String,
}

/// What the log holds: its records, oldest first, and the lines that are none.
#[derive(Debug, Default)]
pub struct Read {
    /// The records, oldest first.
    pub records: Vec<Record>,
    /// The lines that are no record, in file order.
    pub unreadable: Vec<Unreadable>,
}

/// The log's file in `state` (the service's state dir, [`crate::caches::state_dir`]).
pub fn file(state: &Path) -> PathBuf {
    state.join(FILE)
}

/// Reads one line of the log as a record.
pub fn parse_line(line: &str) -> Result<Record, LineError> {
    if line.len() > bounds::READ_LINE_BYTES {
        return Err(LineError::TooLong(bounds::READ_LINE_BYTES));
    }
    Ok(serde_json::from_str(line)?)
}

/// Why a line of the log is no record.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// Longer than the log's bound (the bound).
    #[error("longer than {0} bytes")]
    TooLong(usize),
    /// Not a record's JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Reads the log of `state`: the old file, then the current one. A file that is not there
/// is no error (no call yet, or never rotated).
pub fn read(state: &Path) -> std::io::Result<Read> {
    let mut out = Read::default();
    for name in [OLD_FILE, FILE] {
        let path = state.join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        read_into(&path, &bytes, &mut out);
    }
    Ok(out)
}

/// The records and unreadable lines of the bytes of one file of the log (`path` names it in
/// what is unreadable).
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Read {
    let mut out = Read::default();
    read_into(path, bytes, &mut out);
    out
}

/// The records and unreadable lines of one file's bytes, added to `out`.
fn read_into(path: &Path, bytes: &[u8], out: &mut Read) {
    let ends_whole = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = lines.len().saturating_sub(1);
    for (i, l) in lines.iter().enumerate() {
        if l.is_empty() {
            continue;
        }
        let bad = |why: String| Unreadable {
            file: path.to_path_buf(),
            line: i + 1,
            why,
        };
        let parsed = std::str::from_utf8(l)
            .map_err(|e| format!("not UTF-8: {e}"))
            .and_then(|l| parse_line(l).map_err(|e| e.to_string()));
        match parsed {
            Ok(r) => out.records.push(r),
            Err(why) if i == last && !ends_whole => {
                out.unreadable.push(bad(format!("cut short ({why})")));
            }
            Err(why) => out.unreadable.push(bad(why)),
        }
    }
}

/// `text` with every secret replaced by [`REDACTED`]: what the secret detector's shapes
/// match (by shape alone, unchecked: a log keeps no token, even a test's), what the config's
/// `environment.secret_values` match, and the value of each `NAME=VALUE` word whose name
/// the config's `environment.drop` refuses (`GITHUB_TOKEN=... gh`).
pub fn redact(text: &str, config: &Config) -> String {
    let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
    for shape in efr_policy::secrets::Shapes::shipped().all() {
        ranges.extend(shape.compiled.matches(text));
    }
    for e in &config.environment.secret_values {
        if let Ok(p) = ValuePattern::parse(&e.value) {
            ranges.extend(p.matches(text));
        }
    }
    ranges.extend(assigned_secrets(text, config));
    ranges.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in ranges {
        if r.end <= at {
            continue;
        }
        let start = r.start.max(at);
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = r.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The values of `NAME=VALUE` in `text` (a word's start, up to a blank, `;`, `&`, `|` or a
/// closing quote) whose NAME a drop rule of the environment refuses.
fn assigned_secrets(text: &str, config: &Config) -> Vec<std::ops::Range<usize>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(eq) = text[i..].find('=').map(|p| p + i) {
        let mut s = eq;
        while s > 0 && (b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_') {
            s -= 1;
        }
        let name = &text[s..eq];
        let dropped = !name.is_empty()
            && config
                .environment
                .drop
                .iter()
                .any(|g| glob_matches(&g.value, name, true));
        let mut e = eq + 1;
        if dropped {
            let quote = b.get(e).copied().filter(|c| *c == b'"' || *c == b'\'');
            if quote.is_some() {
                e += 1;
            }
            let start = e;
            while e < b.len() {
                let c = b[e];
                let stop = match quote {
                    Some(q) => c == q,
                    None => c.is_ascii_whitespace() || b";&|)".contains(&c),
                };
                if stop {
                    break;
                }
                e += 1;
            }
            if e > start {
                out.push(start..e);
            }
        }
        i = e.max(eq + 1);
    }
    out
}

/// `text` cut to `max` bytes at a character boundary, with how long it was.
fn shorten(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes)", &text[..cut], text.len())
}

/// The record of a call of `p` that ended with `fin`.
pub fn record(
    p: &CallParams,
    fin: &Finish,
    stopped: bool,
    call_id: Option<&str>,
    config: &Config,
) -> Record {
    let text = |t: &str| shorten(redact(t, config), bounds::TEXT_BYTES);
    let refused: Vec<String> = fin.exits.iter().map(|r| text(&r.summary)).collect();
    let refused_more = refused.len().saturating_sub(bounds::REFUSED);
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Record {
        id: crate::sys::random_hex(6).unwrap_or_else(|_| format!("{time:012x}")),
        time,
        call_id: call_id.map(str::to_string),
        line: shorten(redact(&p.line, config), bounds::LINE_BYTES),
        cwd: p.cwd.as_deref().map(text),
        projects: p.projects.iter().map(|x| text(x)).collect(),
        grants: p.grants.clone(),
        conversation: p.conversation.clone(),
        unsandboxed: p.unsandboxed,
        background: p.background.is_some(),
        stopped,
        duration_ms: fin.duration_ms,
        exit_status: fin.exit_status,
        signal: fin.signal,
        setup_error: fin.sandbox_summary.setup_error.as_deref().map(text),
        refused: refused.into_iter().take(bounds::REFUSED).collect(),
        refused_more,
        env_dropped: fin.sandbox_summary.env_dropped.clone(),
        credentials_used: fin
            .sandbox_summary
            .credentials_used
            .iter()
            .map(|u| efr_sandbox_wire::summary::CredentialUse {
                path: text(&u.path),
                ..u.clone()
            })
            .collect(),
    }
}

/// Appends `r` to the log in `state`: one write under the file's lock, after a rotation
/// when it would take the file past [`bounds::FILE_BYTES`].
pub fn append(state: &Path, r: &Record) -> Result<(), AppendError> {
    let mut line = serde_json::to_string(r).unwrap_or_default();
    line.push('\n');
    append_line(state, line.as_bytes(), bounds::FILE_BYTES)
}

/// [`append`] of the bytes of one line with the bound `max` (the tests' small one).
pub fn append_line(state: &Path, line: &[u8], max: u64) -> Result<(), AppendError> {
    crate::dirs::private_dir(state).map_err(|source| AppendError::Dir {
        dir: state.to_path_buf(),
        source,
    })?;
    let path = file(state);
    let err = |source| AppendError::Write {
        file: path.clone(),
        source,
    };
    loop {
        let f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(err)?;
        let mut f = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| err(e.into()))?;
        // Another writer rotated the file between its open and this lock: write to the
        // file now at the path.
        let held = f.metadata().map_err(err)?;
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.ino() == held.ino() && m.dev() == held.dev() => {}
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(err(e)),
        }
        if held.len() > 0 && held.len() + line.len() as u64 > max {
            std::fs::rename(&path, state.join(OLD_FILE)).map_err(err)?;
            continue;
        }
        return write_once(&mut f, line).map_err(err);
    }
}

/// Writes `line` in one `write` (O_APPEND: at the end, whole); a short write (a full disk)
/// is an error, leaving a line cut short that readers skip.
fn write_once(f: &mut File, line: &[u8]) -> std::io::Result<()> {
    let n = f.write(line)?;
    if n != line.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("wrote {n} of {} bytes", line.len()),
        ));
    }
    Ok(())
}

/// Records a call that ended with `fin` in the user's log, saying on stderr why when it
/// cannot (the call's end is never held up by its log).
pub fn log_call(
    p: &CallParams,
    fin: &Finish,
    stopped: bool,
    call_id: Option<&str>,
    config: &Config,
    env: &Env,
) {
    let r = record(p, fin, stopped, call_id, config);
    if let Err(e) = append(&crate::caches::state_dir(env), &r) {
        eprintln!("efr-sandbox: {e}");
    }
}

/// Records a call whose sandbox could not be set up (no [`crate::Call`] was made).
pub fn append_unprepared(p: &CallParams, fin: &Finish, config: &Config, env: &Env) {
    log_call(p, fin, false, None, config, env);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::defaults()
    }

    #[test]
    fn secrets_are_redacted_by_shape_by_value_pattern_and_by_assigned_name() {
        let c = config();
        let ghp = format!("ghp_{}", "a1B2c3D4e5".repeat(4).get(..36).unwrap());
        let line = format!(
            "curl -H 'Authorization: token {ghp}' x; GITHUB_TOKEN=plain1 gh pr list; \
             export API_KEY=\"two words\"; MY_PASSWORD='q r' cmd; PATH=/bin ls"
        );
        let r = redact(&line, &c);
        for secret in [ghp.as_str(), "plain1", "two words", "q r"] {
            assert!(!r.contains(secret), "{secret} in {r}");
        }
        assert!(r.contains("PATH=/bin ls"), "{r}");
        assert!(r.contains("GITHUB_TOKEN=[redacted] gh pr list"), "{r}");
        assert_eq!(redact("echo hello", &c), "echo hello");
        // Overlapping matches and one at the very end.
        let r = redact(&format!("TOKEN={ghp}"), &c);
        assert_eq!(r, "TOKEN=[redacted]");
    }

    #[test]
    fn a_record_keeps_no_secret_and_reads_back() {
        let c = config();
        let p = CallParams {
            line: format!("echo {}", "x".repeat(bounds::LINE_BYTES * 2)),
            cwd: Some("/p".into()),
            projects: vec!["/p".into()],
            conversation: Some("conv".into()),
            ..Default::default()
        };
        let mut fin = Finish {
            exit_status: 3,
            code: Some(3),
            ..Default::default()
        };
        fin.sandbox_summary.env_dropped = vec!["GH_TOKEN".into()];
        let r = record(&p, &fin, false, Some("c-1"), &c);
        assert!(r.line.len() < bounds::LINE_BYTES + 64, "{}", r.line.len());
        assert!(
            r.line.ends_with(&format!("({} bytes)", p.line.len())),
            "{}",
            r.line
        );
        assert_eq!(r.status(), "exit 3");
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(parse_line(&text).unwrap(), r);
        assert!(parse_line("{\"id\":1}").is_err());
        assert!(parse_line("not json").is_err());
    }

    #[test]
    fn a_line_cut_short_and_a_bad_line_are_unreadable_the_rest_read() {
        let c = config();
        let p = CallParams {
            line: "true".into(),
            ..Default::default()
        };
        let good = serde_json::to_string(&record(&p, &Finish::default(), false, None, &c)).unwrap();
        let text = format!("{good}\ngarbage\n\n{good}\n{}", &good[..good.len() / 2]);
        let r = read_bytes(Path::new("/log"), text.as_bytes());
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.unreadable.len(), 2, "{:?}", r.unreadable);
        assert_eq!(r.unreadable[0].line, 2);
        assert_eq!(r.unreadable[1].line, 5);
        assert!(
            r.unreadable[1].why.starts_with("cut short"),
            "{:?}",
            r.unreadable
        );
        let r = read_bytes(Path::new("/log"), &[0xff, 0xfe, b'\n']);
        assert_eq!(r.unreadable.len(), 1);
    }

    #[test]
    fn writers_in_parallel_never_interleave_and_rotation_keeps_two_bounded_files() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let max = 4000u64;
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let state = state.clone();
                std::thread::spawn(move || {
                    for i in 0..300 {
                        // Lines of different lengths, each whole or not at all.
                        let line = format!("{t}:{i}:{}\n", "x".repeat(10 + (i * 7 + t) % 90));
                        append_line(&state, line.as_bytes(), max).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [FILE, OLD_FILE]);
        for name in [FILE, OLD_FILE] {
            let text = std::fs::read_to_string(state.join(name)).unwrap();
            assert!(text.len() as u64 <= max, "{name}: {}", text.len());
            assert!(text.ends_with('\n'));
            for l in text.lines() {
                let mut f = l.split(':');
                let (t, i, xs) = (f.next(), f.next(), f.next().unwrap_or(""));
                let t: usize = t.unwrap().parse().unwrap();
                let i: usize = i.unwrap().parse().unwrap();
                assert_eq!(xs, "x".repeat(10 + (i * 7 + t) % 90), "{l}");
                assert!(f.next().is_none(), "{l}");
            }
        }
        let mode = std::fs::metadata(state.join(FILE)).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
