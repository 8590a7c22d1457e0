//! `efr-sandbox approvals [--json]`, `efr-sandbox approve ID [--always]`, `efr-sandbox deny
//! ID`: the refused calls of the CLI routes (`run`, `shell`/`efr-bash`) waiting for the
//! user in the service (see `crate::approvals`), and the user's answer. Approving gives the
//! call's grants to its conversation: its later calls (the retry) get them. Only the user
//! the service runs as can do either: the service's socket is out of every call's reach,
//! and these commands refuse to run inside one.

use clap::Args;
use efr_sandbox_wire::rpc::method;
use efr_sandbox_wire::{
    Approval, ApprovalDecideResult, ApprovalDecision, ApprovalsResult, Grant, Needs,
};
use serde_json::json;

use crate::cli::term::{self, Stream};
use crate::handoff::{Session, SessionError};

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Print them as JSON (the service's `approval`s).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The approval's id (`efr-sandbox approvals` lists them).
    pub id: String,
    /// Also save the grants as always rules in your config (`[[always]]`; host and write
    /// grants only).
    #[arg(long)]
    pub always: bool,
}

#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The approval's id (`efr-sandbox approvals` lists them).
    pub id: String,
}

fn fail(cmd: &str, e: impl std::fmt::Display) -> i32 {
    eprintln!("efr-sandbox {cmd}: {e}");
    1
}

/// A session with the service, unless this runs inside a contained call.
fn session(cmd: &str) -> Result<Session, i32> {
    if super::contained::inside_call() {
        return Err(fail(
            cmd,
            "approvals are the user's: this runs inside a contained call, which cannot \
             approve anything (ask the user to run it in their own shell)",
        ));
    }
    let Some(socket) = crate::handoff::socket() else {
        return Err(fail(
            cmd,
            "no service socket: set XDG_RUNTIME_DIR (or EFR_SANDBOX_SOCKET)",
        ));
    };
    Session::open(&socket).map_err(|e| fail(cmd, format!("cannot reach the service: {e}")))
}

fn call(cmd: &str, name: &str, params: serde_json::Value) -> Result<serde_json::Value, i32> {
    let mut s = session(cmd)?;
    s.call(name, params).map_err(|e| match e {
        SessionError::Refused(e) => fail(cmd, e.message),
        e => fail(cmd, e),
    })
}

/// A grant as `run --grant` takes it.
fn grant_words(grants: &[Grant]) -> String {
    grants
        .iter()
        .map(|g| super::grant_arg(g).unwrap_or_else(|| format!("{g:?}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `efr-sandbox approvals`.
pub fn list(a: ApprovalsArgs) -> i32 {
    let r = match call("approvals", method::APPROVALS, json!({})) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let r: ApprovalsResult = match serde_json::from_value(r) {
        Ok(r) => r,
        Err(e) => {
            return fail(
                "approvals",
                format!("the service's answer does not read: {e}"),
            );
        }
    };
    if a.json {
        let text = serde_json::to_string_pretty(&r.approvals).unwrap_or_default();
        outln!("{}", term::json(Stream::Stdout, &text));
        return 0;
    }
    if r.approvals.is_empty() {
        outln!("no pending approvals");
        return 0;
    }
    let now = efr_jobs::now_ms();
    for x in &r.approvals {
        for l in describe(x, now) {
            outln!("{}", term::inline(Stream::Stdout, &l));
        }
    }
    0
}

/// The lines of one approval: id, age, conversation, line; then each exit with what it
/// needs and why.
fn describe(x: &Approval, now: u64) -> Vec<String> {
    let age = now.saturating_sub(x.at) / 1000;
    let age = match age {
        0..=119 => format!("{age}s"),
        120..=7199 => format!("{}m", age / 60),
        _ => format!("{}h", age / 3600),
    };
    let conv = x.conversation.as_deref().unwrap_or("(none)");
    let mut out = vec![format!(
        "{}  {age} ago  conversation {conv}  line: {}",
        x.id, x.line
    )];
    for r in &x.exits {
        let needs = match &r.needs {
            Needs::Contained { grants } => grant_words(grants),
            _ => String::new(),
        };
        let why = r
            .judgement
            .reasons
            .first()
            .map(String::as_str)
            .unwrap_or("");
        out.push(format!("    {}: needs {needs}; {why}", r.summary));
    }
    out
}

/// `efr-sandbox approve`.
pub fn approve(a: ApproveArgs) -> i32 {
    let decision = if a.always {
        ApprovalDecision::Always
    } else {
        ApprovalDecision::Approve
    };
    decide("approve", &a.id, decision)
}

/// `efr-sandbox deny`.
pub fn deny(a: DenyArgs) -> i32 {
    decide("deny", &a.id, ApprovalDecision::Deny)
}

fn decide(cmd: &str, id: &str, decision: ApprovalDecision) -> i32 {
    if !efr_sandbox_wire::approval::valid_approval_id(id) {
        return fail(
            cmd,
            format!("{id:?} is not an approval id (`efr-sandbox approvals` lists them)"),
        );
    }
    let r = match call(
        cmd,
        method::APPROVAL_DECIDE,
        json!({"id": id, "decision": decision}),
    ) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let r: ApprovalDecideResult = match serde_json::from_value(r) {
        Ok(r) => r,
        Err(e) => return fail(cmd, format!("the service's answer does not read: {e}")),
    };
    let grants = grant_words(&r.approval.grants);
    let conv = r.approval.conversation.as_deref();
    let said = match (decision, conv) {
        (ApprovalDecision::Deny, _) => format!("denied {id}: {}", r.approval.line),
        (_, Some(c)) => format!("granted {grants} to the calls of conversation {c}"),
        (_, None) => format!("saved {grants} as always rules"),
    };
    outln!("{}", term::inline(Stream::Stdout, &said));
    for rule in &r.rules {
        outln!("saved the always rule: {rule}");
    }
    0
}
