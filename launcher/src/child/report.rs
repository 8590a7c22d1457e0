//! The one codec of the report the call's processes send the launcher on the report fd (the
//! init, the line's process before its exec, the backend's first child, the init's write
//! supervisor): one [`Report`] per line, `KIND[ PAYLOAD]`, written with [`send`] (or, for the
//! supervisor's preformatted lines, [`write_line`]) and read back with [`Report::decode`],
//! which refuses anything else with a [`DecodeError`] (never a panic).
//!
//! | line | [`Report`] |
//! |---|---|
//! | `ready {"landlock":…,"seccomp":…,"supervised":…}` | [`Report::Ready`] ([`Ready`], JSON) |
//! | `setup_error MESSAGE` | [`Report::SetupError`] |
//! | `exit code N` / `exit signal N` | [`Report::ExitCode`] / [`Report::ExitSignal`] |
//! | `denied PATH\tOP\tWHY` | [`Report::Denied`] |
//! | `denied_git PATH\tOP\tWHY` | [`Report::DeniedGit`] |
//! | `denied_socket PATH\tOP` | [`Report::DeniedSocket`] |
//! | `host_refused PATH\tOP\tWHY` | [`Report::HostRefused`] |
//! | `linked PATH\tLINKS` | [`Report::Linked`] |
//! | `stopped SIG` | [`Report::Stopped`] |
//! | `full PATH` | [`Report::Full`] |
//! | `cgroup_failed[ MESSAGE]` | [`Report::CgroupFailed`] |
//! | `loopback_refused PORT` | [`Report::LoopbackRefused`] |
//!
//! A line is at most [`MAX_LINE`] bytes and holds no newline (one in a message becomes a
//! space). The format is the crate's own (the launcher and its init are one binary); the
//! wire to efrd is the status lines ([`crate::status::StatusLine`]).

use std::fmt;
use std::os::fd::RawFd;

use serde::{Deserialize, Serialize};

use crate::status::LandlockReport;

/// The longest report line read (longer ones are refused).
pub const MAX_LINE: usize = 64 * 1024;

/// What the line's process reports just before its exec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ready {
    /// The Landlock domain the line runs in (`None`: no Landlock).
    pub landlock: Option<LandlockReport>,
    /// A seccomp filter is loaded.
    pub seccomp: bool,
    /// The line's writes are supervised.
    pub supervised: bool,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The line is about to exec.
    Ready(Ready),
    /// The line did not run: why.
    SetupError(String),
    /// The line's main process exited with this code.
    ExitCode(i32),
    /// The line's main process was killed by this signal.
    ExitSignal(i32),
    /// The supervisor refused a write: the path, then what was refused and why
    /// (tab-separated, as the supervisor writes them).
    Denied {
        /// The path the write was refused on.
        path: String,
        /// What was refused and why (`OP\tWHY`; empty when the line had no tab).
        detail: String,
    },
    /// The supervisor refused a write that would leave code git runs where git reads it
    /// (`crate::supervise::gitdir`): the path, then what was refused and why.
    DeniedGit {
        /// The path the write was refused on.
        path: String,
        /// What was refused and why (`OP\tWHY`).
        detail: String,
    },
    /// The supervisor refused a path socket: the path, then the operation.
    DeniedSocket {
        /// The socket's path.
        path: String,
        /// The operation refused (`connect` or `send`; empty when the line had no tab).
        detail: String,
    },
    /// A write the sandbox let through that the host's own file system refused (its
    /// read-only mount, a full disk, the file's own mode): the path, then the operation and
    /// what the host said. A note: no grant changes it.
    HostRefused {
        /// The path the write failed on.
        path: String,
        /// The operation and the host's error (`OP\tWHY`).
        detail: String,
    },
    /// A protected file with more than one link: the path, then the count.
    Linked {
        /// The protected file's path.
        path: String,
        /// Its link count, as the supervisor wrote it.
        detail: String,
    },
    /// The line's main process stopped with this signal (`^Z`).
    Stopped(i32),
    /// The call's tmpfs at this path filled up.
    Full(String),
    /// The unsandboxed line could not join its cgroup (why, when known).
    CgroupFailed(String),
    /// The supervisor made a connect of the line to the call's own loopback (`127.0.0.1`
    /// or `::1`) on this port, and it was refused: nothing of the call listens there.
    LoopbackRefused(u16),
}

/// Why a report line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The line is empty, or blanks only.
    #[error("decoding a report line: empty")]
    Empty,
    /// The line is longer than [`MAX_LINE`]: its length in bytes.
    #[error("decoding a report line: {0} bytes, at most {MAX_LINE}")]
    TooLong(usize),
    /// The line holds a newline before its end (two lines given as one).
    #[error("decoding a report line: a newline inside it")]
    Newline,
    /// The line's first word is no kind of [`Report`]: that word (its first 64 characters).
    #[error("decoding a report line: unknown kind {0:?}")]
    UnknownKind(String),
    /// A kind that takes a payload came without one (or `exit` without `code N` or
    /// `signal N`).
    #[error("decoding a report line: {kind} needs a payload")]
    Missing {
        /// The line's kind (`setup_error`, `exit`, `denied`, ...).
        kind: &'static str,
    },
    /// An exit code, exit signal or stop signal that is not an `i32`, or a port that is
    /// not a `u16`.
    #[error("decoding a report line: {kind}: {text:?} is not a number")]
    BadNumber {
        /// Where the number was wanted (`exit code`, `exit signal`, `stopped`,
        /// `loopback_refused`).
        kind: &'static str,
        /// The text found instead.
        text: String,
    },
    /// A `ready` payload that is not the JSON of a [`Ready`]: what serde said.
    #[error("decoding a report line: ready: {0}")]
    BadReady(String),
}

impl Report {
    /// The line's text, without its newline (newlines in messages become spaces).
    pub fn encode(&self) -> String {
        let one = |s: &str| s.replace('\n', " ");
        match self {
            Report::Ready(r) => format!(
                "ready {}",
                serde_json::to_string(r).expect("a Ready always serializes")
            ),
            Report::SetupError(m) => format!("setup_error {}", one(m)),
            Report::ExitCode(c) => format!("exit code {c}"),
            Report::ExitSignal(s) => format!("exit signal {s}"),
            Report::Denied { path, detail } => with_detail("denied", path, detail),
            Report::DeniedSocket { path, detail } => with_detail("denied_socket", path, detail),
            Report::DeniedGit { path, detail } => with_detail("denied_git", path, detail),
            Report::HostRefused { path, detail } => with_detail("host_refused", path, detail),
            Report::Linked { path, detail } => with_detail("linked", path, detail),
            Report::Stopped(s) => format!("stopped {s}"),
            Report::Full(p) => format!("full {}", one(p)),
            Report::CgroupFailed(m) if m.is_empty() => "cgroup_failed".into(),
            Report::CgroupFailed(m) => format!("cgroup_failed {}", one(m)),
            Report::LoopbackRefused(port) => format!("loopback_refused {port}"),
        }
    }

    /// The report of one line (its trailing newline, if any, and trailing blanks ignored).
    pub fn decode(line: &str) -> Result<Report, DecodeError> {
        if line.len() > MAX_LINE {
            return Err(DecodeError::TooLong(line.len()));
        }
        let line = line.trim_end();
        if line.is_empty() {
            return Err(DecodeError::Empty);
        }
        if line.contains('\n') {
            return Err(DecodeError::Newline);
        }
        let (kind, rest) = match line.split_once(' ') {
            Some((k, r)) => (k, Some(r)),
            None => (line, None),
        };
        let need = |kind: &'static str| rest.ok_or(DecodeError::Missing { kind });
        let num = |kind: &'static str, text: &str| {
            text.parse::<i32>().map_err(|_| DecodeError::BadNumber {
                kind,
                text: text.to_string(),
            })
        };
        let split = |kind: &'static str| {
            need(kind).map(|r| match r.split_once('\t') {
                Some((p, d)) => (p.to_string(), d.to_string()),
                None => (r.to_string(), String::new()),
            })
        };
        Ok(match kind {
            "ready" => Report::Ready(
                serde_json::from_str(need("ready")?)
                    .map_err(|e| DecodeError::BadReady(e.to_string()))?,
            ),
            "setup_error" => Report::SetupError(need("setup_error")?.to_string()),
            "exit" => match need("exit")?.split_once(' ') {
                Some(("code", c)) => Report::ExitCode(num("exit code", c)?),
                Some(("signal", s)) => Report::ExitSignal(num("exit signal", s)?),
                _ => return Err(DecodeError::Missing { kind: "exit" }),
            },
            "denied" => {
                let (path, detail) = split("denied")?;
                Report::Denied { path, detail }
            }
            "denied_git" => {
                let (path, detail) = split("denied_git")?;
                Report::DeniedGit { path, detail }
            }
            "denied_socket" => {
                let (path, detail) = split("denied_socket")?;
                Report::DeniedSocket { path, detail }
            }
            "host_refused" => {
                let (path, detail) = split("host_refused")?;
                Report::HostRefused { path, detail }
            }
            "linked" => {
                let (path, detail) = split("linked")?;
                Report::Linked { path, detail }
            }
            "stopped" => Report::Stopped(num("stopped", need("stopped")?)?),
            "full" => Report::Full(need("full")?.to_string()),
            "cgroup_failed" => Report::CgroupFailed(rest.unwrap_or("").to_string()),
            "loopback_refused" => {
                let text = need("loopback_refused")?;
                Report::LoopbackRefused(text.parse::<u16>().map_err(|_| {
                    DecodeError::BadNumber {
                        kind: "loopback_refused",
                        text: text.to_string(),
                    }
                })?)
            }
            other => return Err(DecodeError::UnknownKind(other.chars().take(64).collect())),
        })
    }
}

fn with_detail(kind: &str, path: &str, detail: &str) -> String {
    let path = path.replace(['\n', '\t'], " ");
    if detail.is_empty() {
        format!("{kind} {path}")
    } else {
        format!("{kind} {path}\t{}", detail.replace('\n', " "))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

/// Writes `r` as one line on the report fd (a failed write is the launcher's loss: it
/// reports the call as ended without a report).
pub fn send(fd: RawFd, r: &Report) {
    write_line(fd, &r.encode());
}

/// Writes a `setup_error` line.
pub fn setup_error(fd: RawFd, msg: impl fmt::Display) {
    send(fd, &Report::SetupError(msg.to_string()));
}

/// Writes one preformatted line (the text of a [`Report`]; newlines become spaces).
pub fn write_line(fd: RawFd, msg: &str) {
    let mut m = msg.replace('\n', " ");
    m.push('\n');
    let _ = crate::sys::write_all(fd, m.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Report> {
        vec![
            Report::Ready(Ready {
                landlock: Some(LandlockReport {
                    abi: 6,
                    status: efr_sandbox_wire::Enforcement::FullyEnforced,
                    net: true,
                    scopes: true,
                    unix_sockets: false,
                }),
                seccomp: true,
                supervised: true,
            }),
            Report::Ready(Ready::default()),
            Report::SetupError("cwd /x: No such file or directory".into()),
            Report::ExitCode(0),
            Report::ExitCode(-1),
            Report::ExitSignal(9),
            Report::Denied {
                path: "/p/.git/config".into(),
                detail: "open\tprotected by .git/config".into(),
            },
            Report::DeniedSocket {
                path: "/run/x.sock".into(),
                detail: "connect".into(),
            },
            Report::DeniedGit {
                path: "/p/docs/config".into(),
                detail: "rename\ta git config with keys off git.safe_config_keys: core.fsmonitor"
                    .into(),
            },
            Report::Linked {
                path: "/p/.envrc".into(),
                detail: "2".into(),
            },
            Report::HostRefused {
                path: "/ro/p/x".into(),
                detail: "open\tread-only file system (the host's mount)".into(),
            },
            Report::Stopped(20),
            Report::Full("/tmp".into()),
            Report::CgroupFailed(String::new()),
            Report::CgroupFailed("no cgroup v2".into()),
            Report::LoopbackRefused(5432),
        ]
    }

    #[test]
    fn every_report_round_trips() {
        for r in all() {
            let l = r.encode();
            assert!(!l.contains('\n'), "{l}");
            assert_eq!(Report::decode(&l), Ok(r.clone()), "{l}");
            assert_eq!(Report::decode(&format!("{l}\n")), Ok(r), "{l}");
        }
    }

    /// The lines the init and the supervisor have always written decode as they were read.
    #[test]
    fn the_lines_written_today_decode() {
        let r = Report::decode(r#"ready {"landlock":null,"seccomp":true,"supervised":false}"#);
        assert_eq!(
            r,
            Ok(Report::Ready(Ready {
                landlock: None,
                seccomp: true,
                supervised: false
            }))
        );
        assert_eq!(
            Report::decode("denied /a b\topen\tnot writable in this call"),
            Ok(Report::Denied {
                path: "/a b".into(),
                detail: "open\tnot writable in this call".into()
            })
        );
        assert_eq!(
            Report::decode("setup_error exec /bin/sh: x"),
            Ok(Report::SetupError("exec /bin/sh: x".into()))
        );
        // A message's newline is a space: one report stays one line.
        assert_eq!(
            Report::SetupError("a\nb".into()).encode(),
            "setup_error a b".to_string()
        );
    }

    #[test]
    fn garbage_is_an_error() {
        for (l, e) in [
            ("", DecodeError::Empty),
            ("   \n", DecodeError::Empty),
            ("hello world", DecodeError::UnknownKind("hello".into())),
            ("exit", DecodeError::Missing { kind: "exit" }),
            ("exit status 3", DecodeError::Missing { kind: "exit" }),
            (
                "exit code x",
                DecodeError::BadNumber {
                    kind: "exit code",
                    text: "x".into(),
                },
            ),
            (
                "exit signal 99999999999",
                DecodeError::BadNumber {
                    kind: "exit signal",
                    text: "99999999999".into(),
                },
            ),
            ("stopped", DecodeError::Missing { kind: "stopped" }),
            ("denied", DecodeError::Missing { kind: "denied" }),
            (
                "setup_error",
                DecodeError::Missing {
                    kind: "setup_error",
                },
            ),
            ("full /a\nexit code 0", DecodeError::Newline),
            (
                "loopback_refused",
                DecodeError::Missing {
                    kind: "loopback_refused",
                },
            ),
            (
                "loopback_refused 65536",
                DecodeError::BadNumber {
                    kind: "loopback_refused",
                    text: "65536".into(),
                },
            ),
        ] {
            assert_eq!(Report::decode(l), Err(e), "{l:?}");
        }
        assert!(matches!(
            Report::decode("ready {"),
            Err(DecodeError::BadReady(_))
        ));
        assert!(matches!(
            Report::decode(r#"ready {"seccomp":true,"supervised":true,"extra":1,"landlock":null}"#),
            Err(DecodeError::BadReady(_))
        ));
        let long = format!("full /{}", "a".repeat(MAX_LINE));
        assert_eq!(Report::decode(&long), Err(DecodeError::TooLong(long.len())));
    }
}
