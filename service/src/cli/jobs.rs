//! `efr-sandbox jobs`: the background jobs of your service. `jobs [--json]` lists them
//! (newest first), `jobs stop ID` ends one and its whole tree, `jobs logs ID [--follow]`
//! prints its output (what its bound kept) and, with `--follow`, what it writes until it
//! ends. Each talks to your running service (started when none runs, as for `run`; see
//! `crate::handoff`). A job belongs to a conversation, or to none (`run --background`'s):
//! `--conversation ID` names which.

use clap::{Args, Subcommand};
use efr_sandbox_wire::OutputStream;
use efr_sandbox_wire::job::{JobInfo, JobOutputItem, JobStopResult, JobsResult};
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
    let now = crate::jobs::now_ms();
    outln!(
        "{:<14} {:<4} {:<10} {:>9} {:>10} {:<14} COMMAND",
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

/// One line of the list.
fn row(j: &JobInfo, now: u64) -> String {
    let state = serde_json::to_value(j.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let ran = j.ended_at.unwrap_or(now).saturating_sub(j.started_at) / 1000;
    let ports = j
        .forwards
        .iter()
        .map(|f| f.port.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut line: String = j.command.chars().take(60).collect();
    if j.command.chars().count() > 60 {
        line.push_str("...");
    }
    format!(
        "{:<14} {:<4} {:<10} {:>8}s {:>10} {:<14} {}",
        j.conversation_id.as_deref().unwrap_or("-"),
        j.id,
        state,
        ran,
        j.output_bytes,
        if ports.is_empty() { "-".into() } else { ports },
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
            outln!("{}", row(&r.job, crate::jobs::now_ms()));
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
