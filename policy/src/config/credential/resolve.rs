//! A credential's secret read from its source: a variable of the service's environment, a
//! file (and the span of the secret in it, where the call side writes the placeholder in
//! a copy), or a command the service runs on the host, its answer kept a while in a
//! [`SecretCache`]. No error and no `Debug` of this module holds a secret.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{CredentialSpec, Source};
use crate::config::Env;

/// A secret. `Debug` and `Display` print `<secret>`; only [`Secret::expose`] gives the
/// value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that sends it (the proxy's swap).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// A secret read, and for a file source where in the file it sat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The secret.
    pub secret: Secret,
    /// The file (`~` expanded) and the byte range of the secret in it, for a copy with the
    /// placeholder there; `None` for any other source.
    pub file_span: Option<(PathBuf, Range<usize>)>,
}

/// Why a credential's secret could not be read. Never holds the secret, nor a command's
/// output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The variable is not set (or is empty) in the service's environment.
    #[error("credential {name}: the variable {var} is not set in the service's environment")]
    EnvUnset {
        /// The credential.
        name: String,
        /// The variable.
        var: String,
    },
    /// The file cannot be read.
    #[error("credential {name}: cannot read {}: {message}", path.display())]
    File {
        /// The credential.
        name: String,
        /// The file.
        path: PathBuf,
        /// What reading it gave.
        message: String,
    },
    /// The file has no match of the pattern, or holds only blanks.
    #[error("credential {name}: {} holds no secret{}", path.display(), pattern.as_ref().map(|p| format!(" matching {p:?}")).unwrap_or_default())]
    NoMatch {
        /// The credential.
        name: String,
        /// The file.
        path: PathBuf,
        /// The pattern, when there is one.
        pattern: Option<String>,
    },
    /// The command could not start, failed, timed out or answered nothing.
    #[error("credential {name}: the command {command} {message}")]
    Command {
        /// The credential.
        name: String,
        /// The command's words, joined.
        command: String,
        /// What went wrong (never its output).
        message: String,
    },
}

/// How long a source command may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// The most a source file or a command's output is read.
const MAX_READ: u64 = 1 << 20;

/// The answers of source commands, each kept its `keep_seconds`: one per service, shared by
/// its calls (thread-safe).
#[derive(Default)]
pub struct SecretCache {
    answers: Mutex<HashMap<Vec<String>, (Instant, Secret)>>,
}

impl fmt::Debug for SecretCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.answers.lock().map(|a| a.len()).unwrap_or(0);
        write!(f, "SecretCache({n} answers)")
    }
}

impl SecretCache {
    /// An empty cache.
    pub fn new() -> SecretCache {
        SecretCache::default()
    }

    /// The kept answer of `argv`, when younger than `keep`.
    fn get(&self, argv: &[String], keep: Duration) -> Option<Secret> {
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers
            .get(argv)
            .filter(|(at, _)| at.elapsed() < keep)
            .map(|(_, s)| s.clone())
    }

    fn put(&self, argv: &[String], secret: Secret) {
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers.insert(argv.to_vec(), (Instant::now(), secret));
    }

    /// Forgets every answer (a config reload that changed a command).
    pub fn clear(&self) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// The secret of `spec` from its source: `env`'s variables, a file (`~` against `env`'s
/// home), or a command (kept in `cache`).
pub fn resolve(
    spec: &CredentialSpec,
    env: &Env,
    cache: &SecretCache,
) -> Result<Resolved, ResolveError> {
    let name = spec.name.clone();
    match &spec.source {
        Source::Env(var) => match env.vars.get(var).map(str::trim) {
            Some(v) if !v.is_empty() => Ok(Resolved {
                secret: Secret::new(v),
                file_span: None,
            }),
            _ => Err(ResolveError::EnvUnset {
                name,
                var: var.clone(),
            }),
        },
        Source::File { path, pattern } => {
            let path = crate::path::expand_home_path(path, &env.home);
            let text = read_file(&path).map_err(|message| ResolveError::File {
                name: name.clone(),
                path: path.clone(),
                message,
            })?;
            let span = match pattern {
                Some(re) => re
                    .captures(&text)
                    .and_then(|c| c.get(1).or_else(|| c.get(0))),
                None => None,
            }
            .map(|m| m.range())
            .or_else(|| pattern.is_none().then(|| trimmed(&text)))
            .filter(|r| !text[r.clone()].trim().is_empty())
            .ok_or_else(|| ResolveError::NoMatch {
                name,
                path: path.clone(),
                pattern: pattern.as_ref().map(|p| p.as_str().to_string()),
            })?;
            Ok(Resolved {
                secret: Secret::new(&text[span.clone()]),
                file_span: Some((path, span)),
            })
        }
        Source::Command { argv, keep } => {
            if let Some(s) = cache.get(argv, *keep) {
                return Ok(Resolved {
                    secret: s,
                    file_span: None,
                });
            }
            let secret = run(argv).map_err(|message| ResolveError::Command {
                name,
                command: argv.join(" "),
                message,
            })?;
            cache.put(argv, secret.clone());
            Ok(Resolved {
                secret,
                file_span: None,
            })
        }
    }
}

/// The range of `text` without its leading and trailing white space.
fn trimmed(text: &str) -> Range<usize> {
    let start = text.len() - text.trim_start().len();
    let end = text.trim_end().len();
    start..end.max(start)
}

fn read_file(path: &std::path::Path) -> Result<String, String> {
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    f.take(MAX_READ + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_READ {
        return Err(format!("it is larger than {MAX_READ} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "it is not utf-8".to_string())
}

/// Runs `argv` on the host (stdin empty, stderr dropped), at most [`COMMAND_TIMEOUT`]: the
/// first line of its output, trimmed.
fn run(argv: &[String]) -> Result<Secret, String> {
    let (prog, args) = argv.split_first().ok_or("has no program")?;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    let mut out = child.stdout.take().ok_or("has no output pipe")?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = (&mut out).take(MAX_READ).read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "did not answer within {} s",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("could not be waited for: {e}")),
        }
    };
    // The reader ends when every holder of the pipe's write end has gone; a child that left
    // a process behind holding it is not waited for past the deadline.
    let bytes = join_until(reader, deadline)?;
    if !status.success() {
        return Err(format!("failed ({status})"));
    }
    let text = String::from_utf8(bytes).map_err(|_| "answered with bytes that are not utf-8")?;
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return Err("answered nothing".into());
    }
    Ok(Secret::new(line))
}

fn join_until(
    reader: std::thread::JoinHandle<Vec<u8>>,
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    while !reader.is_finished() {
        if Instant::now() >= deadline {
            return Err("left its output open past the time limit".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    reader
        .join()
        .map_err(|_| "its output could not be read".to_string())
}
