//! Launches while the host changes under them: a host socket that vanishes between the
//! moment the launcher computes the view (which hides every host socket by covering it) and
//! the moment bubblewrap mounts it must not make the call fail. (bubblewrap cannot cover a
//! path that is gone on its read-only root; the launcher tries again with a fresh view.)
//!
//! The race is made certain, not hoped for: bubblewrap is run through a wrapper (the
//! launcher's `bwrap=PATH` test knob) that removes the socket's path right before it
//! execs the real bubblewrap.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;

use common::Fixture;
use efr_launcher::api::BackendChoice;

#[test]
fn a_socket_that_vanishes_before_bwrap_mounts_does_not_fail_the_launch() {
    if !std::path::Path::new("/usr/bin/bwrap").exists()
        && common::skip("bubblewrap is not installed")
    {
        return;
    }
    let fx = Fixture::new();
    let base = fx.dir.path().canonicalize().unwrap();
    // Outside every writable root and mask, so the launcher hides it.
    let sock = base.join("vanishing.sock");
    let _listener = UnixListener::bind(&sock).unwrap();
    let wrapper = base.join("bwrap-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nrm -f '{}'\nexec /usr/bin/bwrap \"$@\"\n",
            sock.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut plan = fx.plan("echo launched", BackendChoice::Bwrap, Vec::new());
    plan.test_weaken = vec![format!("bwrap={}", wrapper.display())];
    let out = common::run_weakened(&plan, &base, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("launched"),
        "status {:?}\nstdout {stdout}\nstderr {stderr}",
        out.status
    );
    // The first try did meet the vanished path.
    assert!(stderr.contains("vanishing.sock"), "{stderr}");
}
