//! The frozen fixtures and the schema: compared byte for byte with what the types render.
//! Re-bless on purpose with `cargo run -p efr-sandbox-wire --bin efr-wire-bless`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use efr_sandbox_wire::fixtures::{self, render};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/v1")
}

const BLESS: &str = "re-bless on purpose with `cargo run -p efr-sandbox-wire --bin efr-wire-bless` and add a changelog line to docs/protocol.md";

#[test]
fn every_fixture_matches_byte_for_byte() {
    let mut failures = Vec::new();
    for f in fixtures::all() {
        let path = fixture_dir().join(f.name);
        let on_disk = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}: cannot read: {e}", f.name));
                continue;
            }
        };
        if on_disk != render(&f.value) {
            failures.push(format!("{}: differs from what the types render", f.name));
        }
    }
    assert!(failures.is_empty(), "{}\n{BLESS}", failures.join("\n"));
}

#[test]
fn every_fixture_reads_back_through_its_type() {
    for f in fixtures::all() {
        let text = render(&f.value);
        let again =
            (f.reread)(&text).unwrap_or_else(|e| panic!("{} does not read back: {e}", f.name));
        if f.name.starts_with("unknown_") {
            // A newer writer's values read as `unknown`, so the text changes on purpose.
            assert!(again.contains("unknown"), "{}: {again}", f.name);
        } else {
            assert_eq!(
                again, text,
                "{} changes when read back through its type",
                f.name
            );
        }
    }
}

#[test]
fn no_fixture_file_is_left_over() {
    let known: BTreeSet<&str> = fixtures::all().iter().map(|f| f.name).collect();
    let mut stray = Vec::new();
    for entry in std::fs::read_dir(fixture_dir()).expect("fixture dir is readable") {
        let name = entry
            .expect("dir entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !known.contains(name.as_str()) {
            stray.push(name);
        }
    }
    assert!(stray.is_empty(), "fixture files no type renders: {stray:?}");
}

#[test]
fn fixture_names_are_unique() {
    let all = fixtures::all();
    let names: BTreeSet<&str> = all.iter().map(|f| f.name).collect();
    assert_eq!(names.len(), all.len());
}

#[test]
fn schema_file_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/sandbox.schema.json");
    let on_disk = std::fs::read_to_string(&path).expect("docs/sandbox.schema.json exists");
    assert!(
        on_disk == efr_sandbox_wire::schema::render(),
        "docs/sandbox.schema.json is stale; {BLESS}"
    );
}

#[test]
fn schema_is_draft_2020_12_with_every_type() {
    let doc = efr_sandbox_wire::schema::document();
    assert_eq!(
        doc["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let defs = doc["$defs"].as_object().expect("$defs is an object");
    for name in [
        "Mode",
        "Launch",
        "Grant",
        "ExitKind",
        "ExitSource",
        "Needs",
        "ExitInfo",
        "ExitRecord",
        "Facts",
        "Judgement",
        "ModeFallback",
        "SandboxStatus",
        "SandboxCheck",
        "SandboxPaths",
        "SandboxSummary",
        "Blocked",
        "BlockReason",
        "BusRefused",
        "SurfaceChange",
        "ReportedFile",
        "QuestionId",
        "SurfaceResult",
        "SurfaceRespondParams",
        "FloorWriteResult",
        "HomeFileChanged",
        "AlwaysOutcome",
        "NotSavedReason",
        "ExplainParams",
        "ExplainResult",
        "ClientFrame",
        "ServerFrame",
    ] {
        assert!(defs.contains_key(name), "schema lacks {name}");
    }
    // Every $ref points at a definition that exists.
    let text = doc.to_string();
    for part in text.split("\"$ref\":\"#/$defs/").skip(1) {
        let name = part.split('"').next().unwrap_or_default();
        assert!(defs.contains_key(name), "dangling $ref to {name}");
    }
}
