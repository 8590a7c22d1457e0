//! Classifier throughput on the corpus, single thread: `cargo bench -p efr-policy --bench
//! classify`. Prints lines per second and microseconds per line (std::time only). With the
//! tldr corpus present (`../shared/corpora/tldr-commands.txt`) it measures that too. The
//! parser alone is timed in the same run, and the result is given against the budget of
//! 50 microseconds a line.

use std::hint::black_box;
use std::time::Instant;

use efr_policy::classify::{ClassifyRequest, classify};
use efr_policy::context::Context;
use efr_sandbox_wire::Mode;

fn run(name: &str, lines: &[String], ctx: &Context) {
    let reqs: Vec<ClassifyRequest> = lines
        .iter()
        .map(|l| {
            let mut r = ClassifyRequest::new(l.clone(), Some("/home/u/p".into()), Mode::Auto);
            r.project_roots = vec!["/home/u/p".into()];
            r
        })
        .collect();
    // warm up
    for r in &reqs {
        black_box(classify(r, ctx));
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for r in &reqs {
            black_box(classify(r, ctx));
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let per = best / reqs.len() as f64;
    // The parser alone over the same lines, in the same run: the share of the time that
    // goes to reading the line rather than to the file system and the rules.
    let mut parse_best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for l in lines {
            let _ = black_box(efr_policy::shell::parse(l));
        }
        parse_best = parse_best.min(start.elapsed().as_secs_f64());
    }
    let parse_per = parse_best / lines.len() as f64;
    println!(
        "{name}: {} lines, classify {:.0} lines/s, {:.1} us/line; parse alone {:.1} us/line \
         ({:.0}% of classify); budget 50 us/line: {:.2}x under (best of 5)",
        reqs.len(),
        1.0 / per,
        per * 1e6,
        parse_per * 1e6,
        100.0 * parse_per / per,
        50e-6 / per
    );
}

fn main() {
    let ctx = Context::defaults("/home/u");
    let corpus: Vec<String> = include_str!("../tests/corpus/lines.txt")
        .lines()
        .filter_map(|l| l.split_once(" :: ").map(|x| x.1.replace("\\n", "\n")))
        .collect();
    run("corpus", &corpus, &ctx);
    let tldr = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/corpora/tldr-commands.txt");
    if let Ok(text) = std::fs::read_to_string(&tldr) {
        let lines: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        run("tldr", &lines, &ctx);
    } else {
        println!("tldr corpus not found: skipped");
    }
}
