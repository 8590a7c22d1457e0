//! Property test of the shell parser: random and mutated byte strings never panic and never
//! hang (each input is bounded in time). std only: a small xorshift generator.

use std::time::{Duration, Instant};

use efr_policy::classify::{ClassifyRequest, classify};
use efr_policy::context::Context;
use efr_policy::shell::parse;
use efr_sandbox_wire::Mode;

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

#[test]
fn parser_never_panics_or_hangs() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let ctx = Context::defaults("/home/u");
    let budget = Instant::now();
    let mut worst = Duration::ZERO;
    let mut n = 0;
    while budget.elapsed() < Duration::from_secs(8) && n < 60_000 {
        let input = if rng.below(5) == 0 {
            let len = rng.below(200);
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            let base = SEEDS[rng.below(SEEDS.len())];
            mutate(&mut rng, base)
        };
        let t = Instant::now();
        let _ = parse(&input);
        let req = ClassifyRequest::new(input.clone(), Some("/home/u/p".into()), Mode::Auto);
        let _ = classify(&req, &ctx);
        let took = t.elapsed();
        worst = worst.max(took);
        assert!(
            took < Duration::from_secs(1),
            "input took {took:?}: {input:?}"
        );
        n += 1;
    }
    // pathological nesting stays bounded
    for s in [
        "$(".repeat(5000),
        "(".repeat(5000),
        "`".repeat(5000),
        "{ ".repeat(5000),
        "sh -c '".repeat(2000),
        "eval ".repeat(5000),
        "<<".repeat(5000),
    ] {
        let t = Instant::now();
        let _ = parse(&s);
        let _ = classify(&ClassifyRequest::new(s.clone(), None, Mode::Auto), &ctx);
        assert!(t.elapsed() < Duration::from_secs(1));
    }
    // every prefix (by words) of every corpus line: options cut off before their value
    let corpus = include_str!("corpus/lines.txt");
    let mut prefixes = 0;
    for line in corpus
        .lines()
        .filter_map(|l| l.split_once(" :: ").map(|x| x.1))
    {
        let line = line.replace("\\n", "\n");
        for (i, _) in line.match_indices(' ') {
            let mut req = ClassifyRequest::new(&line[..i], Some("/home/u/p".into()), Mode::Auto);
            req.project_roots = vec!["/home/u/p".into()];
            let _ = classify(&req, &ctx);
            prefixes += 1;
        }
    }
    println!("{n} inputs, slowest {worst:?}; {prefixes} corpus prefixes");
}
