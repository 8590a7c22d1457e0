//! Unknown values of every closed set: read as `unknown` where the protocol page says so,
//! refused with a clear error everywhere else.

use efr_sandbox_wire::rpc::ErrorCode;
use efr_sandbox_wire::*;
use serde::de::DeserializeOwned;
use serde_json::json;

fn refuses<T: DeserializeOwned + std::fmt::Debug>(value: serde_json::Value) -> String {
    match serde_json::from_value::<T>(value.clone()) {
        Ok(v) => panic!("{value} was read as {v:?}; it must be refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn sets_with_unknown_read_it() {
    assert_eq!(
        serde_json::from_value::<BlockReason>(json!("quota")).ok(),
        Some(BlockReason::Unknown)
    );
    assert_eq!(
        serde_json::from_value::<IndexFlag>(json!("intent_to_add")).ok(),
        Some(IndexFlag::Unknown)
    );
    assert_eq!(
        serde_json::from_value::<BusProxyOff>(json!("sandboxed")).ok(),
        Some(BusProxyOff::Unknown)
    );
    assert_eq!(
        serde_json::from_value::<NotSavedReason>(json!("disk_full")).ok(),
        Some(NotSavedReason::Unknown)
    );
    assert_eq!(
        serde_json::from_value::<ErrorCode>(json!("teapot")).ok(),
        Some(ErrorCode::Unknown)
    );
    assert_eq!(
        serde_json::from_value::<Grant>(json!({"kind": "teleport", "to": "mars"})).ok(),
        Some(Grant::Unknown)
    );
    assert_eq!(
        serde_json::from_value::<Grant>(json!({"kind": "teleport"})).ok(),
        Some(Grant::Unknown)
    );
    assert_eq!(
        serde_json::from_value::<AlwaysOutcome>(json!({"kind": "deferred", "until": 3})).ok(),
        Some(AlwaysOutcome::Unknown)
    );
    // A known outcome with an unknown reason keeps its kind.
    assert_eq!(
        serde_json::from_value::<AlwaysOutcome>(json!({"kind": "not_saved", "reason": "quota"}))
            .ok(),
        Some(AlwaysOutcome::NotSaved {
            reason: NotSavedReason::Unknown
        })
    );
    // A launch holding an unknown grant reads; the launcher refuses it later.
    let l: Launch = serde_json::from_value(json!({"kind": "contained", "grants": [{"kind": "x"}]}))
        .expect("reads");
    assert_eq!(
        l,
        Launch::Contained {
            grants: vec![Grant::Unknown]
        }
    );
}

#[test]
fn strict_sets_refuse_an_unknown_value() {
    let e = refuses::<Mode>(json!("yolo"));
    assert!(e.contains("yolo") && e.contains("manual"), "{e}");
    refuses::<ExitKind>(json!("teleport"));
    refuses::<ExitSource>(json!("telepathy"));
    refuses::<TargetClass>(json!("attic"));
    refuses::<TargetOp>(json!("chmod"));
    refuses::<Verdict>(json!("maybe"));
    refuses::<JudgedBy>(json!("oracle"));
    refuses::<Access>(json!("execute"));
    refuses::<FileKind>(json!("door"));
    refuses::<Backend>(json!("gvisor"));
    // A plan never holds `auto`: the choice is resolved before the plan is written.
    refuses::<Backend>(json!("auto"));
    refuses::<BackendChoice>(json!("gvisor"));
    refuses::<RunBackend>(json!("auto"));
    refuses::<Enforcement>(json!("enforced"));
    refuses::<CheckOutcome>(json!("flaky"));
    refuses::<SurfaceChangeKind>(json!("moved"));
    refuses::<Bus>(json!("accessibility"));
    refuses::<Desktop>(json!("gnome"));
    refuses::<Launch>(json!({"kind": "remote"}));
    refuses::<Needs>(json!({"kind": "root"}));
}

#[test]
fn known_kinds_with_bad_members_are_refused() {
    refuses::<Grant>(json!({"kind": "write"}));
    refuses::<Grant>(json!({"kind": "host", "host": "x", "port": 70000}));
    refuses::<Grant>(json!({"kind": "bus", "bus": "accessibility"}));
}

#[test]
fn unknown_members_are_ignored() {
    // Additive changes add members without a version bump, so readers skip what they
    // do not know. (The launcher's plan is stricter: it refuses unknown fields.)
    let l: Launch = serde_json::from_value(json!({"kind": "direct", "since": 2})).expect("reads");
    assert_eq!(l, Launch::Direct);
    let p: ExplainParams = serde_json::from_value(json!({"path": "/", "newer": 1})).expect("reads");
    assert_eq!(p.path, "/");
}

#[test]
fn question_ids_have_one_form() {
    for ok in ["q1", "q9", "q10", "q4294967295"] {
        assert!(QuestionId::new(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "q",
        "q0",
        "q01",
        "1",
        "Q1",
        "q1a",
        "q-1",
        "q12345678901",
        " q1",
    ] {
        assert!(QuestionId::new(bad).is_err(), "{bad:?}");
        refuses::<QuestionId>(json!(bad));
    }
}

#[test]
fn optional_members_are_absent_when_empty() {
    assert_eq!(
        serde_json::to_string(&SandboxSummary::default())
            .ok()
            .as_deref(),
        Some("{}")
    );
    let b = Blocked {
        host: "a".into(),
        port: 443,
        reason: BlockReason::NotTls,
        count: 1,
    };
    assert_eq!(
        serde_json::to_value(&b).ok(),
        Some(json!({"host": "a", "port": 443, "reason": "not_tls"}))
    );
    let read: Blocked =
        serde_json::from_value(json!({"host": "a", "port": 443, "reason": "not_tls"}))
            .expect("reads");
    assert_eq!(read.count, 1);
    assert_eq!(
        serde_json::to_value(Launch::Contained { grants: vec![] }).ok(),
        Some(json!({"kind": "contained"}))
    );
    assert_eq!(
        serde_json::to_value(Grant::Host {
            host: "h".into(),
            port: None,
            plain_http: false,
            tcp: false
        })
        .ok(),
        Some(json!({"kind": "host", "host": "h"}))
    );
    assert_eq!(
        serde_json::to_value(Grant::Credential {
            name: "github".into()
        })
        .ok(),
        Some(json!({"kind": "credential", "name": "github"}))
    );
}

#[test]
fn closed_set_lists_match_their_wire_names() {
    for k in ExitKind::ALL {
        assert_eq!(serde_json::to_value(k).ok(), Some(json!(k.as_str())));
    }
    assert_eq!(ExitKind::ALL.len(), 18);
    for m in Mode::ALL {
        assert_eq!(serde_json::to_value(m).ok(), Some(json!(m.as_str())));
    }
    for r in BlockReason::ALL {
        assert_eq!(serde_json::to_value(r).ok(), Some(json!(r.as_str())));
    }
    for c in BackendChoice::ALL {
        assert_eq!(serde_json::to_value(c).ok(), Some(json!(c.as_str())));
        assert_eq!(BackendChoice::from_name(c.as_str()), Some(c));
    }
    for b in RunBackend::ALL {
        assert_eq!(serde_json::to_value(b).ok(), Some(json!(b.as_str())));
    }
    for e in Enforcement::ALL {
        assert_eq!(serde_json::to_value(e).ok(), Some(json!(e.as_str())));
    }
    for c in TargetClass::ALL {
        assert_eq!(serde_json::to_value(c).ok(), Some(json!(c.as_str())));
    }
}
