//! A launcher started ahead of its call: `efr-launch --warm --control-fd N --status-fd N
//! --caller-pid PID`, started by the service ([`crate::api::Launcher::spawn_warm`]) so that
//! a call finds the launcher loaded and its init waiting in fresh namespaces
//! ([`crate::backend::warm`]), and does not wait for either.
//!
//! It serves one call. On the control socket (a socket pair the service made), the service
//! may first send the byte [`ANNOUNCE`] as the call's request comes, while it makes the
//! plan (the waiting init copies the host's mount namespace and builds the part of the view
//! no plan changes meanwhile), then sends the byte [`CALL`] with four fds attached: the plan
//! (a file read from its start) and the call's stdin, stdout and stderr. From there the
//! launch is the one `efr-launch --plan` runs ([`crate::run::run_prepared`]), its status
//! lines on the status fd. EOF on the
//! control socket, or the caller's end, ends the launcher and its waiting init without a
//! call; anything else on it is a usage error (exit status 2).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use crate::api::{ANNOUNCE, CALL, CALL_FDS};
use crate::backend::warm::Waiting;
use crate::caller::Caller;
use crate::plan::{Plan, PlanCheck};
use crate::run::StatusOut;
use crate::sys;

/// What came on the control socket.
enum Control {
    /// The call: its plan and stdio.
    Call(Vec<OwnedFd>),
    /// The service closed it, or the caller ended: no call.
    Gone,
    /// Not the protocol.
    Bad(String),
}

/// Waits on `control` (or the caller's end) for the call; an announce goes on to `init`.
fn wait(control: &OwnedFd, caller: &Caller, init: Option<&Waiting>) -> Control {
    loop {
        match caller.wait_readable(control.as_raw_fd()) {
            Ok(true) => {}
            Ok(false) => return Control::Gone,
            Err(e) => return Control::Bad(format!("poll of the control socket: {e}")),
        }
        match efr_fdpass::recv_byte(control.as_fd()) {
            Ok(Some((CALL, fds))) if fds.len() == CALL_FDS => return Control::Call(fds),
            Ok(Some((ANNOUNCE, fds))) if fds.is_empty() => {
                if let Some(i) = init {
                    i.announce();
                }
                crate::view::host_sockets::read_ahead();
            }
            Ok(Some((b, fds))) => {
                return Control::Bad(format!(
                    "the control socket sent byte {b} with {} fds, not a call",
                    fds.len()
                ));
            }
            Ok(None) => return Control::Gone,
            Err(e) if e.is_retry() => {}
            Err(e) => return Control::Bad(format!("the control socket: {e}")),
        }
    }
}

/// Runs the launch's own code once on a plan of no call before the call comes: reading and
/// checking a plan, the line's environment, the supervisor's spec, the view (which only
/// looks at paths). The call then does not pay for this process's first run of that code
/// (its pages faulted in, its heap grown, its caches warm).
fn warm_up() {
    let nowhere = "/nonexistent-efr-warm-up";
    let plan = Plan {
        projects: vec![nowhere.into()],
        home: std::env::var("HOME").ok(),
        read_only_inside: vec![format!("{nowhere}/.envrc")],
        protect_names: vec![".envrc".into(), ".git/hooks".into()],
        masks: vec![format!("{nowhere}/.ssh")],
        env: Some(vec![
            ("PATH".to_string(), "/usr/bin:/bin".to_string()).into(),
        ]),
        ..Plan::contained("true", nowhere)
    };
    let Ok(json) = serde_json::to_vec(&plan) else {
        return;
    };
    if let Ok(plan) = Plan::from_json(&json) {
        let _ = crate::env::scrub(&plan, &crate::env::source(&plan));
        let _ = crate::view::supervise_spec(&plan);
        let _ = crate::view::build(&plan);
    }
}

/// Runs the launcher in standby on `control`; returns its exit status.
pub fn main(control: OwnedFd, out: &StatusOut, caller: &Caller) -> i32 {
    // The init is cloned with the dispositions a launch gives it (see `signals::IGNORED_SIGNALS`).
    for &(sig, _) in crate::signals::IGNORED_SIGNALS {
        sys::ignore_signals(&[sig]);
    }
    // Made ahead only when it can be: a failure here is met again, and reported, by the
    // cold clone the launch falls back to.
    let prepared = crate::backend::warm::Prepared::new(control.as_raw_fd()).ok();
    warm_up();
    let fds = match wait(&control, caller, prepared.as_ref().map(|p| &p.init)) {
        Control::Call(fds) => fds,
        Control::Gone => return 0,
        Control::Bad(m) => {
            eprintln!("efr-launch: {m}");
            return crate::exit_code::USAGE;
        }
    };
    drop(control);
    let mut fds = fds.into_iter();
    let (Some(plan_fd), Some(stdin), Some(stdout), Some(stderr)) =
        (fds.next(), fds.next(), fds.next(), fds.next())
    else {
        return crate::exit_code::USAGE;
    };
    for (fd, target) in [(stdin, 0), (stdout, 1), (stderr, 2)] {
        if let Err(e) = sys::dup2(fd.as_raw_fd(), target) {
            return out.setup_error(format!("the call's fd {target}: {e}"));
        }
    }
    let from = format!("fd {}", plan_fd.as_raw_fd());
    let src = crate::plan::read_bounded(from, std::fs::File::from(plan_fd));
    let plan = match crate::plan::parse_plan(src) {
        Ok(p) => p,
        Err(m) => return out.setup_error(m),
    };
    crate::run::run_prepared(&plan, out, caller, prepared)
}
