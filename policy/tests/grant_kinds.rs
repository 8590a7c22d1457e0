//! The checklist of a grant kind: every kind of wire's table (`GRANT_KINDS`) has a frozen
//! wire fixture, words of its own in the classifier's explanation, a case in the launcher's
//! view snapshots, and a classifier case (a line whose proposal is that kind, or the reason
//! no line proposes it). A new kind fails here until it has all four.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use efr_policy::classify::{ClassifyRequest, classify, grant_text};
use efr_policy::context::Context;
use efr_sandbox_wire::grant_text::GRANT_KINDS;
use efr_sandbox_wire::{Grant, Launch, Mode, Needs};

/// A classifier case: the line that proposes the kind, or why none does.
enum Case {
    Line(&'static str),
    NoLine(&'static str),
}

/// The classifier case of each kind, by name (a kind missing here fails the checklist).
fn classifier_case(kind: &str) -> Option<Case> {
    Some(match kind {
        "write" => Case::Line("touch /home/u/other/file"),
        "unmask" => Case::Line("cat ~/.aws/credentials"),
        "device" => Case::Line("cat /dev/video0"),
        "socket" => Case::Line("docker ps"),
        "bus" => Case::Line("gdbus call --session --dest a --object-path /a --method a.b"),
        "bus_filter" => Case::Line("notify-send hi"),
        "desktop" => Case::Line("wl-copy hi"),
        "host" => Case::Line("curl https://example.com/"),
        "net_view" => Case::NoLine(
            "what a line reads of the host's interfaces (`ip addr`) does not show in its \
             words as an exit: the user grants it by name",
        ),
        "open_network" => Case::Line("torsocks curl https://example.com/"),
        "credential" => Case::Line("gh pr create --fill"),
        _ => return None,
    })
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// The kinds the classifier proposes for `line`.
fn proposed(line: &str) -> Vec<Grant> {
    let home = Path::new("/home/u");
    let ctx = Context::defaults(home);
    let p = home.join("p");
    let mut req = ClassifyRequest::new(line, Some(p.clone()), Mode::Auto);
    req.project_roots = vec![p];
    let r = classify(&req, &ctx);
    let mut out = Vec::new();
    if let Launch::Contained { grants } = &r.launch {
        out.extend(grants.iter().cloned());
    }
    for e in &r.exits {
        if let Needs::Contained { grants } = &e.needs {
            out.extend(grants.iter().cloned());
        }
    }
    out
}

#[test]
fn every_kind_has_its_checklist() {
    let fixture: Vec<Grant> = serde_json::from_str(
        &std::fs::read_to_string(repo("wire/fixtures/v1/grants.json")).expect("grants.json"),
    )
    .expect("grants.json reads");
    let views: BTreeSet<String> = std::fs::read_dir(repo("launcher/tests/view-snapshots"))
        .expect("view snapshots")
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    let mut texts = BTreeSet::new();
    let mut missing = Vec::new();
    for kind in GRANT_KINDS {
        let name = kind.name;
        let Some(sample) = fixture.iter().find(|g| g.kind_str() == name) else {
            missing.push(format!(
                "{name}: no grant of it in wire/fixtures/v1/grants.json"
            ));
            continue;
        };
        let text = grant_text(sample);
        if text == grant_text(&Grant::Unknown) || !texts.insert(text.clone()) {
            missing.push(format!(
                "{name}: no words of its own in the explanation ({text})"
            ));
        }
        let view = name.replace('_', "-");
        if !views
            .iter()
            .any(|v| v == &format!("{view}.txt") || v.starts_with(&format!("{view}-")))
        {
            missing.push(format!("{name}: no view snapshot {view}*.txt"));
        }
        match classifier_case(name) {
            None => missing.push(format!("{name}: no classifier case")),
            Some(Case::NoLine(why)) => assert!(!why.is_empty(), "{name}"),
            Some(Case::Line(line)) => {
                let got = proposed(line);
                if !got.iter().any(|g| g.kind_str() == name) {
                    missing.push(format!("{name}: {line:?} proposes {got:?}"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
