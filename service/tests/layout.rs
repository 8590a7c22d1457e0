//! The service's layout, read from its sources: handlers (`rpc/<handler>.rs`) and commands
//! (`cli/<command>.rs`) never import each other (nor a handler another handler, nor a
//! command another command), and no module imports one that imports it back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The module path of a source file (`src/rpc/launch.rs` -> `rpc::launch`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "main") {
        parts.pop();
    }
    parts.join("::")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The modules of the crate each file names (`crate::a::b` and `use crate::{a::b, c}`),
/// resolved to the longest known module.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mods: BTreeSet<String> = all.iter().map(|f| module_of(&src, f)).collect();
    let mut g = BTreeMap::new();
    for f in &all {
        let me = module_of(&src, f);
        let text = std::fs::read_to_string(f).unwrap();
        // Only the code before the unit tests.
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let mut deps = BTreeSet::new();
        let mut rest = text;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':' || *c == '{')
                .collect();
            let mut heads = vec![path.trim_end_matches(['{', ':']).to_string()];
            if let Some(b) = path.find('{') {
                // `crate::rpc::{a, b::c}`: each member.
                let base = path[..b].trim_end_matches(':');
                let inner: String = rest[b + 1..].chars().take_while(|c| *c != '}').collect();
                heads = inner
                    .split(',')
                    .map(|m| format!("{base}::{}", m.trim()))
                    .collect();
            }
            for h in heads {
                let segs: Vec<&str> = h.split("::").filter(|s| !s.is_empty()).collect();
                let m = (1..=segs.len())
                    .rev()
                    .map(|n| segs[..n].join("::"))
                    .find(|m| mods.contains(m));
                if let Some(m) = m {
                    if m != me && !me.starts_with(&format!("{m}::")) {
                        deps.insert(m);
                    }
                }
            }
        }
        g.insert(me, deps);
    }
    g
}

/// A handler: a file of `rpc/` but the server, the connection, the table and the handler
/// kit; a command: a file of `cli/` but its shared `dirs`, `term` (what every command
/// prints of a call's, made safe for a terminal) and `grants` (a grant's text form).
fn role(m: &str) -> Option<&'static str> {
    match m.split_once("::") {
        Some(("rpc", h)) if !["server", "conn", "dispatch", "handler"].contains(&h) => {
            Some("handler")
        }
        Some(("cli", c)) if !["dirs", "term", "grants"].contains(&c) => Some("command"),
        _ => None,
    }
}

#[test]
fn handlers_and_commands_do_not_import_each_other() {
    let g = graph();
    assert!(
        g.contains_key("rpc::launch") && g.contains_key("cli::run"),
        "{g:?}"
    );
    let mut bad = Vec::new();
    // A command's own submodules (`cli::run::shell`) are that command.
    let command = |m: &str| m.split("::").take(2).collect::<Vec<_>>().join("::");
    for (m, deps) in &g {
        for d in deps {
            if role(m).is_some() && role(d).is_some() && command(m) != command(d) {
                bad.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports between handlers and commands: {bad:?}"
    );
}

#[test]
fn no_import_circle() {
    // At every level of the module tree, for the binary and each `bin/` tool.
    efr_layout::assert_no_import_circle(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
}
