//! The classifier corpus: real command lines with the exit kinds and key facts expected,
//! run as one test that prints a per-kind table of what matched.
//!
//! `policy/tests/corpus/lines.txt`: `EXPECTATIONS :: LINE`. EXPECTATIONS are exit kinds
//! (`-` for none) and facts: `host=H`, `class=C` (a target class), `verdict=V` (some exit
//! has it), `opaque` (the line has an opaque part), `port=N`, `mode=M` (default auto),
//! `remote` (a host is a project remote), `launch=K`, `target=P` (some exit's target path, as
//! shown: `~/x`), `device=D`, `note=TEXT` (a note of the result holds TEXT), `no_note`. The line runs in the project
//! `/home/u/p` (cwd and project root), home `/home/u`.

use std::collections::{BTreeMap, BTreeSet};

use efr_policy::classify::{ClassifyRequest, classify, render_text};
use efr_policy::context::Context;
use efr_sandbox_wire::{ExitKind, Launch, Mode};

fn kind_of(s: &str) -> Option<ExitKind> {
    ExitKind::ALL.into_iter().find(|k| k.as_str() == s)
}

#[test]
fn corpus() {
    let text = include_str!("corpus/lines.txt");
    let ctx = Context::defaults("/home/u");
    let mut per_kind: BTreeMap<&'static str, (u32, u32)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut lines = 0;
    for (n, raw) in text.lines().enumerate() {
        let raw = raw.trim_end();
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        let Some((exp, line)) = raw.split_once(" :: ") else {
            failures.push(format!("{}: no ' :: ' in {raw}", n + 1));
            continue;
        };
        lines += 1;
        let line = line.replace("\\n", "\n");
        let mut kinds = BTreeSet::new();
        let mut mode = Mode::Auto;
        let mut checks = Vec::new();
        for tok in exp.split_whitespace() {
            if tok == "-" {
                continue;
            }
            if let Some(k) = kind_of(tok) {
                kinds.insert(k);
            } else if let Some(m) = tok.strip_prefix("mode=") {
                mode = Mode::ALL
                    .into_iter()
                    .find(|x| x.as_str() == m)
                    .unwrap_or(Mode::Auto);
            } else {
                checks.push(tok.to_string());
            }
        }
        let mut req = ClassifyRequest::new(line.clone(), Some("/home/u/p".into()), mode);
        req.project_roots = vec!["/home/u/p".into()];
        let r = classify(&req, &ctx);
        let got: BTreeSet<ExitKind> = r.exits.iter().map(|e| e.kind).collect();
        let mut problems = Vec::new();
        for k in ExitKind::ALL {
            let e = per_kind.entry(k.as_str()).or_default();
            if kinds.contains(&k) {
                e.0 += 1;
                if got.contains(&k) {
                    e.1 += 1;
                }
            }
        }
        if got != kinds {
            problems.push(format!(
                "kinds: want {:?} got {:?}",
                kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
                got.iter().map(|k| k.as_str()).collect::<Vec<_>>()
            ));
        }
        for c in &checks {
            let ok = if let Some(h) = c.strip_prefix("host=") {
                r.exits
                    .iter()
                    .any(|e| e.facts.hosts.iter().any(|x| x.host == h))
            } else if let Some(cl) = c.strip_prefix("class=") {
                r.exits
                    .iter()
                    .any(|e| e.facts.targets.iter().any(|t| t.class.as_str() == cl))
            } else if let Some(v) = c.strip_prefix("verdict=") {
                r.exits.iter().any(|e| {
                    serde_json::to_value(e.judgement.verdict)
                        .ok()
                        .and_then(|x| x.as_str().map(str::to_string))
                        .as_deref()
                        == Some(v)
                })
            } else if let Some(p) = c.strip_prefix("port=") {
                r.exits
                    .iter()
                    .any(|e| e.facts.ports.iter().any(|x| x.to_string() == p))
            } else if let Some(l) = c.strip_prefix("launch=") {
                matches!(
                    (&r.launch, l),
                    (Launch::Direct, "direct")
                        | (Launch::Unsandboxed, "unsandboxed")
                        | (Launch::Contained { .. }, "contained")
                )
            } else if let Some(t) = c.strip_prefix("target=") {
                r.exits
                    .iter()
                    .any(|e| e.facts.targets.iter().any(|x| x.path == t))
            } else if let Some(d) = c.strip_prefix("device=") {
                r.exits
                    .iter()
                    .any(|e| e.facts.devices.iter().any(|x| x == d))
            } else if let Some(n) = c.strip_prefix("note=") {
                r.notes.iter().any(|x| x.contains(n))
            } else if c == "no_note" {
                r.notes.is_empty()
            } else if c == "opaque" {
                !r.opaque.is_empty()
            } else if c == "remote" {
                r.exits
                    .iter()
                    .any(|e| e.facts.hosts.iter().any(|x| x.project_remote))
            } else {
                false
            };
            if !ok {
                problems.push(format!("fact {c} not found"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "line {}: {line}\n  {}\n{}",
                n + 1,
                problems.join("; "),
                render_text(&r)
            ));
        }
    }
    println!("corpus: {lines} lines");
    println!("{:<14} {:>8} {:>8}", "kind", "expected", "matched");
    for (k, (e, m)) in &per_kind {
        println!("{k:<14} {e:>8} {m:>8}");
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    assert!(lines >= 300, "the corpus has {lines} lines, fewer than 300");
    assert!(
        failures.is_empty(),
        "{} corpus lines failed",
        failures.len()
    );
}
