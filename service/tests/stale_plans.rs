//! A service that starts removes the plan files an earlier one never saw finished, and
//! nothing else.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Server, command, temp_env};

#[test]
fn plan_files_of_an_earlier_service_are_removed_at_start() {
    let dir = temp_env();
    let rt = dir.path().join("rt");
    std::fs::create_dir_all(rt.join("efr/plans")).unwrap();
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(rt.join("efr"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let plans = rt.join("efr/plans");
    std::fs::write(plans.join("0123abcd.json"), "{}").unwrap();
    std::fs::write(plans.join("notes.txt"), "mine").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", plans.join("link.json")).unwrap();
    let mut cmd = command(dir.path());
    cmd.env("XDG_RUNTIME_DIR", &rt).arg("serve");
    let s = Server::spawn(cmd, dir, rt.join("efr/sandbox.sock"));
    let _c = s.client();
    assert!(!plans.join("0123abcd.json").exists());
    assert!(plans.join("notes.txt").exists());
    assert!(std::fs::symlink_metadata(plans.join("link.json")).is_ok());
    assert!(std::path::Path::new("/etc/passwd").exists());
    assert!(s.stderr().contains("removed 1 plan file"), "{}", s.stderr());
}
