//! `efr-launch`'s command line: bad input is refused with a clear error.

use std::process::Command;

fn launch(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_efr-launch"))
        .args(args)
        .output()
        .expect("efr-launch runs")
}

/// A status fd that is not open is refused before anything runs: it could not be made
/// close-on-exec (the call would have inherited it), and no status line could reach it.
#[test]
fn a_status_fd_that_is_not_open_is_refused() {
    let o = launch(&["--plan", "/nonexistent/plan.json", "--status-fd", "77"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(efr_launcher::exit_code::SETUP_ERROR),
        "{err}"
    );
    assert!(
        err.contains("efr-launch: the status fd 77: Bad file descriptor"),
        "{err}"
    );
}

#[test]
fn an_unknown_argument_is_a_usage_error() {
    let o = launch(&["--frobnicate"]);
    assert_eq!(o.status.code(), Some(efr_launcher::exit_code::USAGE));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown argument \"--frobnicate\""));
}
