//! `efr-sandbox jobs`: the background jobs of your service. `jobs [--json]` lists them
//! (newest first), `jobs stop ID` ends one and its whole tree, `jobs logs ID [--follow]`
//! prints its output (what its bound kept) and, with `--follow`, what it writes until it
//! ends. Each talks to your running service (started when none runs, as for `run`; see
//! `crate::handoff`). A job belongs to a conversation, or to none (`run --background`'s):
//! `--conversation ID` names which.

use clap::{Args, Subcommand};
use efr_sandbox_wire::OutputStream;
use efr_sandbox_wire::job::{
    ForwardOutcome, JobInfo, JobOutputItem, JobState, JobStopBy, JobStopResult, JobsResult,
};
use efr_sandbox_wire::rpc::method;
use serde_json::json;

use crate::cli::term::{self, Stream};
use crate::handoff::{Session, SessionError};

#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub command: Option<JobsCommand>,
    /// Print the jobs as JSON (the service's `job_info`s).
    #[arg(long)]
    pub json: bool,
    /// Only this conversation's jobs (all of them when absent).
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Stop a job: its whole tree ends (SIGTERM, then SIGKILL two seconds later).
    Stop {
        /// The job (`j1`, `j2`, ...).
        id: String,
        /// The job's conversation (none: a job of `run --background`).
        #[arg(long, value_name = "ID")]
        conversation: Option<String>,
    },
    /// Print a job's output (the last of it the service keeps, `jobs.output_max`).
    Logs {
        /// The job (`j1`, `j2`, ...).
        id: String,
        /// Go on printing what it writes until it ends.
        #[arg(long, short)]
        follow: bool,
        /// The job's conversation (none: a job of `run --background`).
        #[arg(long, value_name = "ID")]
        conversation: Option<String>,
    },
}

fn fail(e: impl std::fmt::Display) -> i32 {
    eprintln!("efr-sandbox jobs: {e}");
    1
}

fn session() -> Result<Session, String> {
    let socket = crate::handoff::socket().ok_or_else(|| {
        "no service socket: set XDG_RUNTIME_DIR (or EFR_SANDBOX_SOCKET)".to_string()
    })?;
    Session::open(&socket).map_err(|e| format!("cannot reach the service: {e}"))
}

/// Runs `efr-sandbox jobs`; the exit status (1 when the service refused or could not be
/// had, with why on stderr).
pub fn run(a: JobsArgs) -> anyhow::Result<i32> {
    let mut s = match session() {
        Ok(s) => s,
        Err(e) => return Ok(fail(e)),
    };
    Ok(match a.command {
        None => list(&mut s, a.conversation.as_deref(), a.json),
        Some(JobsCommand::Stop { id, conversation }) => stop(&mut s, conversation, &id, a.json),
        Some(JobsCommand::Logs {
            id,
            follow,
            conversation,
        }) => logs(&mut s, conversation, &id, follow),
    })
}

fn list(s: &mut Session, conversation: Option<&str>, as_json: bool) -> i32 {
    let params = match conversation {
        Some(c) => json!({"conversation": c}),
        None => json!({}),
    };
    let r = match s.call(method::JOBS, params) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let jobs: JobsResult = match serde_json::from_value(r) {
        Ok(j) => j,
        Err(e) => return fail(format!("the service's answer does not read: {e}")),
    };
    if as_json {
        let text = serde_json::to_string_pretty(&jobs.jobs).unwrap_or_default();
        outln!("{}", term::json(Stream::Stdout, &text));
        return 0;
    }
    if jobs.jobs.is_empty() {
        outln!("no jobs");
        return 0;
    }
    let now = efr_jobs::now_ms();
    outln!(
        "{:<14} {:<4} {:<26} {:>9} {:>10} {:<14} COMMAND",
        "CONVERSATION",
        "ID",
        "STATE",
        "FOR",
        "OUTPUT",
        "PORTS"
    );
    for j in &jobs.jobs {
        outln!("{}", row(j, now));
    }
    0
}

/// A wire enum's name (`stopped`, `daemon_stop`, ...).
fn name_of<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Its state, and for a job that ended, how: `exited 0`, `stopped (service stopped)`,
/// `failed: REASON`.
fn state_text(j: &JobInfo) -> String {
    let state = name_of(j.state);
    match j.state {
        JobState::Exited => match (j.exit_code, j.signal) {
            (Some(c), _) => format!("{state} {c}"),
            (None, Some(s)) => format!("{state} (signal {s})"),
            (None, None) => state,
        },
        JobState::Stopped => match j.stopped_by {
            // Ended with its service: stopped, or killed and seen ended by the next one.
            Some(JobStopBy::DaemonStop | JobStopBy::DaemonRestart) => {
                format!("{state} (service stopped)")
            }
            Some(by) => format!("{state} ({})", name_of(by).replace('_', " ")),
            None => state,
        },
        JobState::Failed => match &j.reason {
            Some(r) => format!("{state}: {r}"),
            None => state,
        },
        _ => state,
    }
}

/// Its ports: each forwarded one by its number, each other with why it is not
/// (`8000 in use by j1`, `8001 in use (a host process listens on 127.0.0.1:8001)`, `22
/// refused`, `9000 past the limit`; `--json` has each reason).
fn ports_text(j: &JobInfo) -> String {
    let mut out: Vec<String> = j.forwards.iter().map(|f| f.port.to_string()).collect();
    for u in &j.unforwarded {
        out.push(match (u.outcome, &u.by_job) {
            (ForwardOutcome::InUse, Some(by)) => format!("{} in use by {by}", u.port),
            (ForwardOutcome::InUse, None) => match &u.reason {
                Some(why) => format!("{} in use ({why})", u.port),
                None => format!("{} in use", u.port),
            },
            (ForwardOutcome::Limit, _) => format!("{} past the limit", u.port),
            (o, _) => format!("{} {}", u.port, name_of(o).replace('_', " ")),
        });
    }
    out.join(", ")
}

/// One line of the list.
fn row(j: &JobInfo, now: u64) -> String {
    let state = state_text(j);
    let ran = j.ended_at.unwrap_or(now).saturating_sub(j.started_at) / 1000;
    let ports = ports_text(j);
    let mut line: String = j.command.chars().take(60).collect();
    if j.command.chars().count() > 60 {
        line.push_str("...");
    }
    format!(
        "{:<14} {:<4} {:<26} {:>8}s {:>10} {:<14} {}",
        j.conversation_id.as_deref().unwrap_or("-"),
        j.id,
        term::inline(Stream::Stdout, &state),
        ran,
        j.output_bytes,
        if ports.is_empty() {
            "-".into()
        } else {
            term::inline(Stream::Stdout, &ports).into_owned()
        },
        term::inline(Stream::Stdout, &line)
    )
}

fn stop(s: &mut Session, conversation: Option<String>, id: &str, as_json: bool) -> i32 {
    let r = s.call(
        method::JOB_STOP,
        json!({"conversation": conversation, "job_id": id}),
    );
    let r = match r {
        Ok(r) => r,
        Err(SessionError::Refused(e)) => return fail(e.message),
        Err(e) => return fail(e),
    };
    match serde_json::from_value::<JobStopResult>(r) {
        Ok(r) if as_json => {
            let text = serde_json::to_string_pretty(&r.job).unwrap_or_default();
            outln!("{}", term::json(Stream::Stdout, &text));
            0
        }
        Ok(r) => {
            outln!("{}", row(&r.job, efr_jobs::now_ms()));
            0
        }
        Err(e) => fail(format!("the service's answer does not read: {e}")),
    }
}

fn logs(s: &mut Session, conversation: Option<String>, id: &str, follow: bool) -> i32 {
    let asked = json!({"conversation": conversation, "job_id": id, "follow": follow});
    if let Err(e) = s.request(method::JOB_OUTPUT, asked) {
        return fail(e);
    }
    let mut end = None;
    // The job's output is the call's: on a terminal, through the pty relay's filter.
    let (mut out, mut err) = (
        term::Relay::new(Stream::Stdout),
        term::Relay::new(Stream::Stderr),
    );
    let code = loop {
        match s.next(&mut end) {
            Ok(Some(item)) => match serde_json::from_value::<JobOutputItem>(item) {
                Ok(JobOutputItem::Output { stream, data, .. }) => {
                    let bytes = match data {
                        efr_sandbox_wire::OutputData::Data(t) => t.into_bytes(),
                        efr_sandbox_wire::OutputData::DataB64(b) => {
                            use base64::Engine as _;
                            base64::engine::general_purpose::STANDARD
                                .decode(b)
                                .unwrap_or_default()
                        }
                    };
                    let w = match stream {
                        OutputStream::Stdout => &mut out,
                        OutputStream::Stderr => &mut err,
                    };
                    // A closed stdout (`| head`) ends the reading, not an error.
                    if w.write(&bytes).is_err() {
                        return 0;
                    }
                }
                Ok(JobOutputItem::Skipped { from, to }) => {
                    let _ = err.finish();
                    eprintln!(
                        "efr-sandbox jobs: {} bytes of output before this are no longer kept \
                         (jobs.output_max)",
                        to - from
                    );
                    err = term::Relay::new(Stream::Stderr);
                }
                Err(_) => {}
            },
            Ok(None) => break 0,
            Err(SessionError::Refused(e)) => break fail(e.message),
            Err(e) => break fail(e),
        }
    };
    let _ = out.finish();
    let _ = err.finish();
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use efr_sandbox_wire::job::JobPortOutcome;

    fn job() -> JobInfo {
        efr_sandbox_wire::fixtures::example_job()
    }

    #[test]
    fn a_rows_state_says_how_the_job_ended() {
        let mut j = job();
        assert!(state_text(&j).starts_with("failed: the job reached its memory limit"));
        j.state = JobState::Exited;
        (j.exit_code, j.signal) = (Some(3), None);
        assert_eq!(state_text(&j), "exited 3");
        (j.exit_code, j.signal) = (None, Some(15));
        assert_eq!(state_text(&j), "exited (signal 15)");
        j.state = JobState::Stopped;
        for (by, want) in [
            (JobStopBy::DaemonStop, "stopped (service stopped)"),
            (JobStopBy::DaemonRestart, "stopped (service stopped)"),
            (JobStopBy::User, "stopped (user)"),
            (JobStopBy::TimeLimit, "stopped (time limit)"),
        ] {
            j.stopped_by = Some(by);
            assert_eq!(state_text(&j), want);
        }
        j.state = JobState::Running;
        assert_eq!(state_text(&j), "running");
    }

    #[test]
    fn a_rows_ports_say_why_each_is_not_forwarded() {
        let mut j = job();
        let u = |port, outcome, by_job: Option<&str>| JobPortOutcome {
            listen: "127.0.0.1".into(),
            port,
            outcome,
            by_job: by_job.map(str::to_owned),
            reason: Some("why".into()),
        };
        j.unforwarded = vec![
            u(8000, ForwardOutcome::InUse, Some("j1")),
            u(8001, ForwardOutcome::InUse, None),
            u(22, ForwardOutcome::Refused, None),
            u(9000, ForwardOutcome::Limit, None),
        ];
        assert_eq!(
            ports_text(&j),
            "5173, 8000 in use by j1, 8001 in use (why), 22 refused, 9000 past the limit"
        );
        let row = row(&j, 0);
        assert!(row.contains("5173, 8000 in use by j1"), "{row}");
    }
}
