//! The scan's cost on a home of N files (default 200,000): a synthetic home made once in a
//! directory given (or a temp dir), shaped like a developer's: a few projects with
//! `node_modules` and `target/` (skipped), dotfile dirs, sources, and a handful of secrets.
//! Prints the median wall time of R scans (default 5) after one warm-up scan (cache warm),
//! the entries looked at, the files read and the findings.
//! Usage: cargo run --release -p efr-surface --example bench_home [N] [R] [DIR]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use efr_surface::{Budget, Patterns, scan};

fn make(home: &Path, n: usize) {
    let made = std::cell::Cell::new(0usize);
    let file = |p: PathBuf, text: &[u8]| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        made.set(made.get() + 1);
    };
    // Four secrets the detector takes for real ones (a key with its body, tokens that look
    // generated), made here rather than written whole in this file.
    let body: String = (0..400u32)
        .map(|i| char::from(b"AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/"[(i * 7 % 37) as usize]))
        .collect();
    let key =
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n");
    let npmrc = format!(
        "//registry.npmjs.org/:_authToken={}\n",
        "Tq4vN8mZx2Lp7RkW9sHk3L"
    );
    let env = format!("K=v\nAPI_KEY={}\n", "Zq8vT2mLw9rK4x");
    for (p, t) in [
        (".aws/credentials", &b"[default]\n"[..]),
        (".ssh/id_ed25519", key.as_bytes()),
        (".npmrc", npmrc.as_bytes()),
        ("work/app0/.env", env.as_bytes()),
    ] {
        file(home.join(p), t);
    }
    // A tenth in places that are scanned and read (sources, configs), the rest in skipped
    // trees (node_modules, target/ with its CACHEDIR.TAG) and dot dirs.
    let mut i = 0usize;
    while made.get() < n {
        let proj = home.join(format!("work/app{}", i % 20));
        match i % 10 {
            0 => file(
                proj.join(format!("src/m{}/f{i}.rs", i % 50)),
                b"pub fn f() -> u32 { 42 }\n",
            ),
            1 => file(
                home.join(format!(".config/tool{}/c{i}.toml", i % 30)),
                b"a = 1\n",
            ),
            2..=6 => file(
                proj.join(format!("node_modules/p{}/lib/f{i}.js", i % 400)),
                b"module.exports = 1\n",
            ),
            _ => {
                let t = proj.join("target");
                if !t.join("CACHEDIR.TAG").exists() {
                    file(
                        t.join("CACHEDIR.TAG"),
                        b"Signature: 8a477f597d28d172789f06886806bc55\n",
                    );
                }
                file(t.join(format!("debug/deps/o{i}.o")), b"")
            }
        }
        i += 1;
    }
}

fn main() {
    let mut a = std::env::args().skip(1);
    let n: usize = a.next().map(|s| s.parse().unwrap()).unwrap_or(200_000);
    let r: usize = a.next().map(|s| s.parse().unwrap()).unwrap_or(5);
    let tmp;
    let home = match a.next() {
        Some(d) => PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir_in("/var/tmp").unwrap();
            tmp.path().to_path_buf()
        }
    };
    if !home.join(".made").exists() {
        let t = Instant::now();
        make(&home, n);
        std::fs::write(home.join(".made"), n.to_string()).unwrap();
        eprintln!("made {n} files in {:?}", t.elapsed());
    }
    let p = Patterns::shipped().unwrap();
    let all = |_: &Path| true;
    let budget = Budget {
        time: Duration::from_secs(60),
        ..Budget::default()
    };
    let roots = [home.clone()];
    let _ = scan(&roots, &all, &p, &budget);
    // The peer, in the same rounds: GNU grep over the same tree with the same skips, for
    // two of the token patterns (it reads each file whole; files here are small).
    let grep = || {
        std::process::Command::new("grep")
            .args([
                "-rIlE",
                "--exclude-dir=node_modules",
                "--exclude-dir=target",
                "--exclude-dir=.git",
            ])
            .arg("gh[pousr]_[A-Za-z0-9]{36,}|_authToken\\s*=|-----BEGIN [A-Z ]*PRIVATE KEY")
            .arg(&home)
            .output()
            .unwrap()
    };
    let _ = grep();
    let mut times = Vec::new();
    let mut gtimes = Vec::new();
    let mut ratios = Vec::new();
    let mut last = None;
    for _ in 0..r {
        let t = Instant::now();
        let s = scan(&roots, &all, &p, &budget);
        let a = t.elapsed();
        let t = Instant::now();
        let _ = grep();
        let g = t.elapsed();
        times.push(a);
        gtimes.push(g);
        ratios.push(a.as_secs_f64() / g.as_secs_f64());
        last = Some(s);
    }
    times.sort();
    gtimes.sort();
    ratios.sort_by(f64::total_cmp);
    println!(
        "grep -rIlE (same skips): median {:?}; scan/grep: ratio of medians {:.2}, median per-round ratio {:.2}",
        gtimes[r / 2],
        times[r / 2].as_secs_f64() / gtimes[r / 2].as_secs_f64(),
        ratios[r / 2]
    );
    let s = last.unwrap();
    println!(
        "home of {n} files: median {:?} over {r} scans (min {:?}, max {:?}); entries {}, read {}, findings {}, partial {:?}",
        times[r / 2],
        times[0],
        times[r - 1],
        s.entries,
        s.read,
        s.findings.len(),
        s.partial
    );
    let d = Budget::default();
    let s = scan(&roots, &all, &p, &d);
    println!(
        "with the default budget ({:?}): entries {}, findings {}, partial {:?}",
        d.time,
        s.entries,
        s.findings.len(),
        s.partial.map(|p| p.why)
    );
}
