//! Every line of the tldr corpus (`../shared/corpora/tldr-commands.txt`, 28,825 real lines)
//! classifies without a panic; prints how many were opaque or did not parse. Skips with a
//! message when the file is absent (it is not part of the repository).

use std::path::PathBuf;

use efr_policy::classify::{ClassifyRequest, classify};
use efr_policy::context::Context;
use efr_sandbox_wire::Mode;

fn corpus_path() -> Option<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        manifest.join("../../shared/corpora/tldr-commands.txt"),
        manifest.join("../shared/corpora/tldr-commands.txt"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

#[test]
fn tldr_corpus_classifies() {
    let Some(path) = corpus_path() else {
        println!("tldr corpus not found (../shared/corpora/tldr-commands.txt): skipped");
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let ctx = Context::defaults("/home/u");
    let (mut n, mut opaque, mut parse_errors, mut with_exits) = (0u32, 0u32, 0u32, 0u32);
    let start = std::time::Instant::now();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        n += 1;
        let mut req = ClassifyRequest::new(line, Some("/home/u/p".into()), Mode::Auto);
        req.project_roots = vec!["/home/u/p".into()];
        let r = classify(&req, &ctx);
        if !r.opaque.is_empty() {
            opaque += 1;
        }
        if r.opaque.iter().any(|o| o.starts_with("efr cannot parse")) {
            parse_errors += 1;
        }
        if !r.exits.is_empty() {
            with_exits += 1;
        }
    }
    println!(
        "tldr: {n} lines, {opaque} opaque ({parse_errors} did not parse), {with_exits} with exits, in {:?}",
        start.elapsed()
    );
    assert!(n > 1000);
}

/// The commands whose lines may propose a `credential` grant: git over HTTPS, gh, the
/// registries' publishes (npm's registry: npm, yarn, pnpm, bun; the python index: twine,
/// poetry, uv, pdm, hatch, flit; crates.io: cargo), curl/wget with a credential's variable
/// in a header.
const CREDENTIAL_COMMANDS: [&str; 15] = [
    "git", "gh", "npm", "yarn", "pnpm", "bun", "cargo", "twine", "poetry", "uv", "pdm", "hatch",
    "flit", "curl", "wget",
];

/// No line of the corpus proposes a credential but those of [`CREDENTIAL_COMMANDS`]; prints
/// how many do, by command.
#[test]
fn tldr_credential_proposals_are_only_the_expected_commands() {
    let Some(path) = corpus_path() else {
        println!("tldr corpus not found (../shared/corpora/tldr-commands.txt): skipped");
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let ctx = Context::defaults("/home/u");
    let mut by_command: std::collections::BTreeMap<String, u32> = Default::default();
    let mut unexpected = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut req = ClassifyRequest::new(line, Some("/home/u/p".into()), Mode::Auto);
        req.project_roots = vec!["/home/u/p".into()];
        let r = classify(&req, &ctx);
        for e in &r.exits {
            let efr_sandbox_wire::Needs::Contained { grants } = &e.needs else {
                continue;
            };
            if !grants.iter().any(|g| g.kind_str() == "credential") {
                continue;
            }
            let first = e
                .action
                .commands
                .first()
                .and_then(|c| c.split_whitespace().next())
                .unwrap_or("")
                .to_string();
            if !CREDENTIAL_COMMANDS.contains(&first.as_str()) {
                unexpected.push(format!("{line} ({first})"));
            }
            *by_command.entry(first).or_default() += 1;
        }
    }
    println!("tldr: credential proposals by command: {by_command:?}");
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
}
