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
