//! What is known of a call's end when the launcher did not report it, and the finish of a
//! call that never ran: a leaf the call, its log and the service share.

use std::process::ExitStatus;

use efr_launcher::status::Outcome;
use efr_sandbox_wire::{Finish, SandboxSummary};

/// How the launcher's end is known, for [`fallback`].
#[derive(Debug)]
pub enum LauncherEnd {
    /// It was waited for.
    Waited(std::io::Result<ExitStatus>),
    /// Its end never came (its waiting thread gave nothing).
    Unknown,
    /// Only its status lines are known (efrd ran it: the plan + finish pair).
    StatusLines,
}

/// How the message of a call whose launcher ended after the line started begins (the
/// sandbox did start: `run` says so rather than "could not start").
pub const LAUNCHER_LOST: &str = "the line started, but its launcher ended during the call";

/// The one fallback: an outcome that says nothing of the line's end (no setup error, no
/// code, no signal) gets a setup error saying what is known of the launcher's end; after a
/// `started` line, one that begins with [`LAUNCHER_LOST`] (the line's tree ends with its
/// launcher).
pub fn fallback(o: &mut Outcome, end: &LauncherEnd) {
    if o.setup_error.is_some() || o.code.is_some() || o.signal.is_some() {
        return;
    }
    if o.started.is_some() {
        let how = match end {
            LauncherEnd::Waited(Ok(st)) => format!(" ({st})"),
            _ => String::new(),
        };
        o.setup_error = Some(format!(
            "{LAUNCHER_LOST}{how} without reporting the line's end; the line and what it \
             started ended with it"
        ));
        return;
    }
    o.setup_error = Some(match end {
        LauncherEnd::Waited(Ok(st)) => {
            format!("efr-launch ended without reporting the line's end ({st})")
        }
        LauncherEnd::Waited(Err(e)) => format!("efr-launch could not be waited for: {e}"),
        LauncherEnd::Unknown => "efr-launch ended without reporting the line's end".into(),
        LauncherEnd::StatusLines => "the call's status lines say nothing of its end".into(),
    });
}

/// The finish of a call that never ran.
pub fn setup_error_finish(msg: String) -> Finish {
    Finish {
        sandbox_summary: SandboxSummary {
            setup_error: Some(msg),
            ..Default::default()
        },
        exit_status: 125,
        duration_ms: 0,
        ..Default::default()
    }
}
