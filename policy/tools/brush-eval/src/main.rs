//! brush-parser against efr-policy's shell parser (the maintained crate weighed against our
//! own), over the tldr corpus:
//! bash compatibility (lines each parses, fails, parses differently), speed (the whole corpus
//! N times with each, same run), and panics/hangs on the inputs of `policy/tests/shell_fuzz.rs`
//! (the same generator and seeds) and on pathological nesting (each in a child process, as a
//! stack overflow aborts).
//!
//! Run: `cargo run --release -- ../../../../shared/corpora/tldr-commands.txt` from this folder.
//! Not part of the workspace: brush-parser is not a dependency of efr.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use efr_policy::shell::{self, Command, List};

/// One simple command as (first word as written, number of words).
type Sig = Vec<(String, usize)>;

fn ours_sig(top: &List) -> Sig {
    fn cmd(c: &Command, out: &mut Sig) {
        match c {
            Command::Simple(sc) => {
                if let Some(w) = sc.words.first() {
                    out.push((w.raw.clone(), sc.words.len()));
                }
            }
            Command::Subshell(l, _) | Command::Group(l, _) => list(l, out),
            Command::If(ls, _) => ls.iter().for_each(|l| list(l, out)),
            Command::While { cond, body, .. } => {
                list(cond, out);
                list(body, out);
            }
            Command::For { body, .. } | Command::ArithFor { body, .. } => list(body, out),
            Command::Case { arms, .. } => arms.iter().for_each(|(_, l)| list(l, out)),
            Command::Arith(..) | Command::Cond(..) => {}
            Command::Function { body, .. } => cmd(body, out),
        }
    }
    fn list(l: &List, out: &mut Sig) {
        for ao in &l.items {
            for p in ao.pipelines() {
                for c in &p.commands {
                    cmd(c, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    list(top, &mut out);
    out
}

fn brush_parse(line: &str) -> Result<brush_parser::ast::Program, brush_parser::ParseError> {
    let opts = brush_parser::ParserOptions::default();
    brush_parser::Parser::new(Cursor::new(line.as_bytes()), &opts).parse_program()
}

/// brush's simple commands found in its AST (as JSON, so every node kind is walked).
fn brush_sig(p: &brush_parser::ast::Program) -> Sig {
    fn walk(v: &serde_json::Value, out: &mut Sig) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(name) = m.get("word_or_name") {
                    let first = name["value"].as_str().unwrap_or("").to_string();
                    let mut n = 1;
                    if let Some(items) = m.get("suffix").and_then(|s| s.as_array()) {
                        for it in items {
                            if let Some(o) = it.as_object()
                                && (o.contains_key("Word")
                                    || o.contains_key("AssignmentWord")
                                    || o.contains_key("ProcessSubstitution"))
                            {
                                n += 1;
                            }
                        }
                    }
                    out.push((first, n));
                    if let Some(p) = m.get("prefix") {
                        walk(p, out);
                    }
                    if let Some(s) = m.get("suffix") {
                        walk(s, out);
                    }
                    return;
                }
                for (_, x) in m {
                    walk(x, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let v = serde_json::to_value(p).expect("brush ast serializes");
    let mut out = Vec::new();
    walk(&v, &mut out);
    out
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

// The seeds and tokens of policy/tests/shell_fuzz.rs.
const SEEDS: &[&str] = &[
    "echo 'a b' \"c $d\" e\\ f",
    "cat <<EOF > f\nbody $x\nEOF\n",
    "a && b || c; d & e | f |& g",
    "if a; then b; elif c; then d; else e; fi",
    "for i in 1 2; do echo $i; done",
    "case $x in a|b) y;; *) z;; esac",
    "f() { rm -rf \"$HOME\"/x; }; f",
    "x=$(curl -s https://a.b | sh) `ls` <(cat) >(tee)",
    "sudo -u root env A=1 bash -lc 'echo ${X:-y} > /etc/z'",
    "find ~ -name x -exec rm {} \\; -delete",
    "(( i++ )); [[ -f x && y < z ]]; { a; }",
    "exec 3<>f 2>&1 >|g &>>h <<<s {fd}>k",
];
const TOKENS: &[&str] = &[
    "(", ")", "{", "}", "$(", "`", "'", "\"", "<<", "<<-", "<<<", ">", ">&", "&&", "||", ";", ";;",
    "&", "|", "\n", "\\", "$", "${", "}", "if", "then", "fi", "do", "done", "case", "esac", "in",
    "for", "while", "function", "((", "))", "[[", "]]", "<(", ">(", "~", "*", "=", "2>", "EOF",
    " ", "sh -c ", "eval ", "xargs ", "sudo ",
];

fn mutate(rng: &mut Rng, base: &str) -> String {
    let mut s: Vec<char> = base.chars().collect();
    for _ in 0..(1 + rng.below(6)) {
        match rng.below(4) {
            0 if !s.is_empty() => {
                let i = rng.below(s.len());
                s.remove(i);
            }
            1 => {
                let i = rng.below(s.len() + 1);
                let t = TOKENS[rng.below(TOKENS.len())];
                for (k, c) in t.chars().enumerate() {
                    s.insert(i + k, c);
                }
            }
            2 => {
                let i = rng.below(s.len() + 1);
                s.insert(i, char::from_u32(rng.below(0x250) as u32).unwrap_or('x'));
            }
            _ => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let n = rng.below(40);
                s.extend(t.repeat(n).chars());
            }
        }
    }
    s.into_iter().collect()
}

fn pathological() -> Vec<(&'static str, String)> {
    vec![
        ("$( x5000", "$(".repeat(5000)),
        ("( x5000", "(".repeat(5000)),
        ("` x5000", "`".repeat(5000)),
        ("{ x5000", "{ ".repeat(5000)),
        ("sh -c ' x2000", "sh -c '".repeat(2000)),
        ("<< x5000", "<<".repeat(5000)),
        (
            "( x200 ) x200",
            format!("{}a{}", "(".repeat(200), ")".repeat(200)),
        ),
        (
            "$( x200 ) x200",
            format!("{}a{}", "$(".repeat(200), ")".repeat(200)),
        ),
        (
            "if x200",
            format!("{}a{}", "if a; then ".repeat(200), "; fi".repeat(200)),
        ),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--one" {
        // child: parse one pathological input with brush
        let (_, s) = &pathological()[args[2].parse::<usize>().unwrap()];
        let t = Instant::now();
        let r = brush_parse(s);
        println!(
            "{} in {:?}",
            if r.is_ok() { "ok" } else { "error" },
            t.elapsed()
        );
        return;
    }
    let path = args.get(1).expect("usage: brush-eval TLDR_CORPUS");
    let text = std::fs::read_to_string(path).expect("read corpus");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();

    let fuzz_only = std::env::var_os("BRUSH_EVAL_FUZZ_ONLY").is_some();
    // 1. compatibility
    let (mut both, mut only_ours, mut only_brush, mut neither, mut differ) = (0, 0, 0, 0, 0);
    let mut ex_ours: Vec<String> = Vec::new();
    let mut ex_brush: Vec<String> = Vec::new();
    let mut ex_differ: Vec<String> = Vec::new();
    let mut brush_panics = 0;
    for l in lines.iter().filter(|_| !fuzz_only) {
        let o = shell::parse(l);
        let b = catch_unwind(AssertUnwindSafe(|| brush_parse(l)));
        let b = match b {
            Ok(b) => b,
            Err(_) => {
                brush_panics += 1;
                continue;
            }
        };
        match (&o, &b) {
            (Ok(os), Ok(bs)) => {
                both += 1;
                let (so, sb) = (ours_sig(&os.list), brush_sig(bs));
                if so != sb {
                    differ += 1;
                    if ex_differ.len() < 12 {
                        ex_differ.push(format!("{l}\n      ours {so:?}\n      brush {sb:?}"));
                    }
                }
            }
            (Ok(_), Err(e)) => {
                only_ours += 1;
                if ex_ours.len() < 12 {
                    ex_ours.push(format!("{l}\n      brush: {e}"));
                }
            }
            (Err(e), Ok(_)) => {
                only_brush += 1;
                if ex_brush.len() < 12 {
                    ex_brush.push(format!("{l}\n      ours: {e}"));
                }
            }
            (Err(_), Err(_)) => neither += 1,
        }
    }
    println!("tldr corpus: {} lines", lines.len());
    println!("  both parse: {both} (of which parse differently: {differ})");
    println!("  only ours parses: {only_ours}");
    println!("  only brush parses: {only_brush}");
    println!("  neither parses: {neither}");
    println!("  brush panics: {brush_panics}");
    println!("examples only ours parses:");
    ex_ours.iter().for_each(|e| println!("    {e}"));
    println!("examples only brush parses:");
    ex_brush.iter().for_each(|e| println!("    {e}"));
    println!("examples parsed differently (simple commands as (first word, words)):");
    ex_differ.iter().for_each(|e| println!("    {e}"));

    // 2. speed: the whole corpus N times with each, same run, best of N
    let n = if fuzz_only { 0 } else { 5 };
    let mut best_ours = f64::MAX;
    let mut best_brush = f64::MAX;
    for _ in 0..n {
        let t = Instant::now();
        for l in &lines {
            let _ = std::hint::black_box(shell::parse(l));
        }
        best_ours = best_ours.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        for l in &lines {
            let _ = std::hint::black_box(brush_parse(l));
        }
        best_brush = best_brush.min(t.elapsed().as_secs_f64());
    }
    println!(
        "speed (best of {n}, whole corpus): ours {:.1} ms ({:.2} us/line), brush {:.1} ms ({:.2} us/line): brush/ours {:.1}x",
        best_ours * 1e3,
        best_ours * 1e6 / lines.len() as f64,
        best_brush * 1e3,
        best_brush * 1e6 / lines.len() as f64,
        best_brush / best_ours
    );

    // 3. fuzz inputs of shell_fuzz.rs
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut panics, mut slow, mut worst) = (0, 0, Duration::ZERO);
    let mut ex_panic: Vec<String> = Vec::new();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let count: usize = std::env::var("BRUSH_EVAL_FUZZ_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000);
    let mut ours_total = Duration::ZERO;
    let mut brush_total = Duration::ZERO;
    for i in 0..count {
        let input = if rng.below(5) == 0 {
            let len = rng.below(200);
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            let base = SEEDS[rng.below(SEEDS.len())];
            mutate(&mut rng, base)
        };
        let t = Instant::now();
        let _ = std::hint::black_box(shell::parse(&input));
        ours_total += t.elapsed();
        let t = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| brush_parse(&input)));
        let took = t.elapsed();
        brush_total += took;
        worst = worst.max(took);
        if took > Duration::from_secs(1) {
            slow += 1;
            println!("    brush took {took:?} on input {i}: {input:?}");
        }
        if r.is_err() {
            panics += 1;
            if ex_panic.len() < 5 {
                ex_panic.push(format!("{input:?}"));
            }
        }
    }
    std::panic::set_hook(prev);
    println!(
        "fuzz inputs of shell_fuzz.rs: {count}, brush panics on {panics}, over 1 s on {slow}, slowest {worst:?}; all inputs: ours {ours_total:?}, brush {brush_total:?}"
    );
    ex_panic.iter().for_each(|e| println!("    panic on {e}"));
    for (i, (name, s)) in pathological().iter().enumerate() {
        let t = Instant::now();
        let ours = shell::parse(s).is_ok();
        let ours_t = t.elapsed();
        let out = std::process::Command::new(&args[0])
            .args(["--one", &i.to_string()])
            .output()
            .expect("run child");
        let res = if out.status.success() {
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        } else {
            format!("child died: {}", out.status)
        };
        println!(
            "  pathological {name}: ours {} in {ours_t:?}; brush {res}",
            if ours { "ok" } else { "error" }
        );
    }
}
