//! The launcher's status lines as they go over the status fd: one compact JSON object per
//! line, the same bytes as before they moved to the wire crate.

use efr_sandbox_wire::{CgroupKind, LandlockReport, StatusLine};

#[test]
fn status_lines_keep_their_bytes() {
    let started = StatusLine::Started {
        launcher_pid: 1,
        start_time_ms: 2,
        pid: 3,
        backend: efr_sandbox_wire::RunBackend::Bwrap,
        landlock: Some(LandlockReport {
            abi: 4,
            status: efr_sandbox_wire::Enforcement::PartiallyEnforced,
            net: false,
            scopes: false,
            unix_sockets: false,
        }),
        seccomp: true,
        supervised: false,
        cgroup: None,
    };
    assert_eq!(
        started.to_line(),
        r#"{"event":"started","launcher_pid":1,"start_time_ms":2,"pid":3,"backend":"bwrap","landlock":{"abi":4,"status":"partially_enforced","net":false,"scopes":false,"unix_sockets":false},"seccomp":true}"#
    );
    let exited = StatusLine::Exited {
        code: None,
        signal: Some(9),
        duration_ms: 5,
        denials: Vec::new(),
        full_tmpfs: Vec::new(),
        survivors: Vec::new(),
        socket_denials: Vec::new(),
        linked_protected: Vec::new(),
        loopback_refused: Vec::new(),
        git_denials: Vec::new(),
        host_refused: Vec::new(),
    };
    assert_eq!(
        exited.to_line(),
        r#"{"event":"exited","signal":9,"duration_ms":5}"#
    );
    for l in [started, exited] {
        assert_eq!(StatusLine::parse(&format!("{}\n", l.to_line())).unwrap(), l);
    }
    let u = r#"{"event":"started","launcher_pid":1,"start_time_ms":2,"pid":3,"backend":"unsandboxed","cgroup":"v1_freezer"}"#;
    assert!(matches!(
        StatusLine::parse(u).unwrap(),
        StatusLine::Started {
            cgroup: Some(CgroupKind::V1Freezer),
            ..
        }
    ));
}

#[test]
fn garbage_status_lines_are_errors() {
    for l in [
        "",
        "exited",
        "{}",
        r#"{"event":"teleported"}"#,
        r#"{"event":"exited","duration_ms":1,"extra":true}"#,
        r#"{"event":"setup_error"}"#,
    ] {
        assert!(StatusLine::parse(l).is_err(), "{l:?}");
    }
}
