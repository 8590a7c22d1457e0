//! The built-in reader of `.git` files and `commondir` (`efr_policy::git`, what
//! the guard and the launch view use when git cannot be run) against git itself
//! (`git_dirs::ask_git`), over thousands of generated repository layouts: a main
//! repository, a submodule-like `.git` file, a linked worktree with a `commondir`, a
//! `.git` link to a dir or to a `.git` file; paths absolute and relative, with blanks,
//! tabs, CR and LF around them, a NUL, `..` after a link, bytes that are not UTF-8,
//! decoys where a lexical, trimmed or lossy reading would land; empty files, missing
//! targets, a `commondir` that is a dir or names a dir that is not a git dir.
//!
//! Where the reader names git dirs they must be git's; it may say "unknown" (callers then
//! treat the repository conservatively), and "no repository" only where git finds none.

#[allow(dead_code)]
#[path = "../../call/src/git_dirs.rs"]
mod git_dirs;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use efr_policy::git::{GitLookup, lookup_git_dir};

/// How many layouts, and the time they may take at most.
/// At least `MIN_CASES` layouts, more up to `MAX_CASES` while within `BUDGET`.
const MIN_CASES: usize = 2000;
const MAX_CASES: usize = 4000;
const BUDGET: Duration = Duration::from_secs(25);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    /// True with probability `n` in 100.
    fn pct(&mut self, n: usize) -> bool {
        self.below(100) < n
    }
}

/// Names of target dirs: blanks, tabs, CR, bytes that are not UTF-8 (and the replacement
/// character a lossy reading would make of them).
const NAMES: &[&[u8]] = &[
    b"t",
    b"t",
    b" t",
    b"t ",
    b"\tt",
    b"t\t",
    b"t\r",
    b"t\xff",
    b"t\xef\xbf\xbd",
    b"\xc3(",
    b"t.git",
];

const PREFIX: &[&[u8]] = &[b"", b"", b"", b"", b" ", b"\t", b"  "];

const SUFFIX: &[&[u8]] = &[
    b"",
    b"\n",
    b"\n",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"\r\n\r\n",
    b"\r",
    b" ",
    b"\t",
    b" \n",
    b"\t\r\n",
    b"\n ",
    b"\0junk\n",
    b"\nsecond line\n",
];

const HEADER: &[&[u8]] = &[
    b"gitdir: ",
    b"gitdir: ",
    b"gitdir: ",
    b"gitdir: ",
    b"gitdir: ",
    b"gitdir:",
    b"GITDIR: ",
    b"gitdir:\t",
    b"gitdir = ",
];

fn p(b: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(b))
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn mkdirs(d: &Path) {
    std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
}

fn write(f: &Path, text: &[u8]) {
    if let Some(d) = f.parent() {
        mkdirs(d);
    }
    std::fs::write(f, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", f.display()));
}

fn symlink(target: &[u8], link: &Path) {
    std::os::unix::fs::symlink(p(target), link)
        .unwrap_or_else(|e| panic!("cannot link {}: {e}", link.display()));
}

/// A git dir git accepts (HEAD, objects, refs, a config).
fn full_repo(d: &Path) {
    mkdirs(&d.join("objects"));
    mkdirs(&d.join("refs/heads"));
    write(&d.join("HEAD"), b"ref: refs/heads/main\n");
    write(
        &d.join("config"),
        b"[core]\n\trepositoryformatversion = 0\n",
    );
}

/// The git dir of a linked worktree: a HEAD, the rest in its common dir.
fn worktree_dir(d: &Path) {
    write(&d.join("HEAD"), b"ref: refs/heads/wt\n");
}

/// A path text naming a dir in area `area` (`d`, `c`, `g`) of `base`, read from `from`
/// (a dir below `base`): (text, where git finds it, where a lexical reading lands).
fn spell(rng: &mut Rng, base: &Path, from: &Path, area: &str, name: &[u8]) -> Spelled {
    let b = base.as_os_str().as_bytes();
    let depth = from
        .strip_prefix(base)
        .map(|r| r.components().count())
        .unwrap_or(0);
    let ups = b"../".repeat(depth);
    let a = area.as_bytes();
    let abs = rng.pct(40);
    let lead: Vec<u8> = if abs { cat(&[b, b"/"]) } else { ups };
    match rng.below(5) {
        // A dir in `from` itself whose name starts or ends with a blank (a trimmed
        // reading lands beside it).
        4 => {
            let local = *rng.pick(&[&b" in"[..], b"\tin", b"in ", b"  in\t"]);
            Spelled {
                text: local.to_vec(),
                git: from.join(p(local)),
                lexical: Some(from.join("in")),
            }
        }
        // `l<area>` is a link to `<area>/x/y`: `..` after it is `<area>/x`.
        0 | 1 => Spelled {
            text: cat(&[&lead, b"l", a, b"/../", name]),
            git: base.join(area).join("x").join(p(name)),
            lexical: Some(base.join(p(name))),
        },
        2 => Spelled {
            text: cat(&[&lead, a, b"/", name]),
            git: base.join(area).join(p(name)),
            lexical: None,
        },
        _ => Spelled {
            text: cat(&[&lead, b"./", a, b"//x/y/../", name]),
            git: base.join(area).join("x").join(p(name)),
            lexical: None,
        },
    }
}

struct Spelled {
    text: Vec<u8>,
    git: PathBuf,
    lexical: Option<PathBuf>,
}

/// Decoys where a wrong reading of `s` would land: lexical `..`, a trimmed or lossy name.
fn decoys(rng: &mut Rng, s: &Spelled, name: &[u8], make: fn(&Path)) {
    let mut at = Vec::new();
    if let Some(l) = &s.lexical {
        at.push(l.clone());
    }
    let parent = s.git.parent().map(Path::to_path_buf).unwrap_or_default();
    at.push(parent.join(p(name.trim_ascii())));
    at.push(parent.join(String::from_utf8_lossy(name).as_ref()));
    for d in at {
        if d != s.git && rng.pct(70) && !d.exists() {
            make(&d);
        }
    }
}

/// Noise around a path text: blanks before, blanks, CR, LF, NUL after.
fn noisy(rng: &mut Rng, text: &[u8]) -> Vec<u8> {
    let pre = *rng.pick(PREFIX);
    let suf = *rng.pick(SUFFIX);
    cat(&[pre, text, suf])
}

/// A `commondir` in git dir `gd`: pointing at a full repo in area `c`, or one of the
/// special cases.
fn commondir(rng: &mut Rng, base: &Path, gd: &Path) {
    let f = gd.join("commondir");
    mkdirs(gd);
    match rng.below(14) {
        0 => write(&f, b""),
        1 => write(&f, b"\n"),
        2 => mkdirs(&f),
        3 => symlink(b"nowhere", &f),
        4 => {
            // A dir that is not a git dir.
            let s = spell(rng, base, gd, "c", b"plain");
            mkdirs(&s.git);
            write(&f, &noisy(rng, &s.text));
        }
        5 => {
            // Through a link to a file holding the text.
            let name = *rng.pick(NAMES);
            let s = spell(rng, base, gd, "c", name);
            full_repo(&s.git);
            let t = base.join("cd-text");
            write(&t, &noisy(rng, &s.text));
            symlink(t.as_os_str().as_bytes(), &f);
        }
        _ => {
            let name = *rng.pick(NAMES);
            let s = spell(rng, base, gd, "c", name);
            if rng.pct(90) {
                full_repo(&s.git);
            }
            decoys(rng, &s, name, full_repo);
            write(&f, &noisy(rng, &s.text));
        }
    }
}

/// A `.git` file's text naming a git dir in area `d` (made by `make`), read from `from`.
fn gitfile_text(
    rng: &mut Rng,
    base: &Path,
    from: &Path,
    make: fn(&Path),
) -> (Vec<u8>, Option<PathBuf>) {
    match rng.below(20) {
        0 => return (Vec::new(), None),
        1 => return (b"gitdir: \n".to_vec(), None),
        2 => return (b"gitdir: \r\n\n".to_vec(), None),
        _ => {}
    }
    let name = *rng.pick(NAMES);
    let s = spell(rng, base, from, "d", name);
    if rng.pct(92) {
        make(&s.git);
    }
    decoys(rng, &s, name, make);
    let head = *rng.pick(HEADER);
    let text = cat(&[head, &noisy(rng, &s.text)]);
    (text, Some(s.git))
}

/// One layout in `base`; the work tree is `base/w`.
fn layout(rng: &mut Rng, base: &Path) -> &'static str {
    let w = base.join("w");
    mkdirs(&w);
    for area in ["d", "c", "g"] {
        mkdirs(&base.join(area).join("x/y"));
        symlink(
            format!("{area}/x/y").as_bytes(),
            &base.join(format!("l{area}")),
        );
    }
    match rng.below(6) {
        0 => {
            let gd = w.join(".git");
            full_repo(&gd);
            if rng.pct(50) {
                commondir(rng, base, &gd);
            }
            "main repository"
        }
        1 => {
            // A submodule-like `.git` file naming a full git dir.
            let (text, target) = gitfile_text(rng, base, &w, full_repo);
            write(&w.join(".git"), &text);
            if let Some(t) = target {
                if rng.pct(25) && t.is_dir() {
                    commondir(rng, base, &t);
                }
            }
            ".git file"
        }
        2 | 3 => {
            // A linked worktree: its git dir has a HEAD and a commondir.
            let (text, target) = gitfile_text(rng, base, &w, worktree_dir);
            write(&w.join(".git"), &text);
            if let Some(t) = target {
                if t.is_dir() {
                    commondir(rng, base, &t);
                }
            }
            "linked worktree"
        }
        4 => {
            // `.git` a link to a git dir.
            let name = *rng.pick(NAMES);
            let s = spell(rng, base, &w, "d", name);
            if rng.pct(90) {
                full_repo(&s.git);
            }
            if rng.pct(30) {
                commondir(rng, base, &s.git);
            }
            symlink(&s.text, &w.join(".git"));
            ".git link to a dir"
        }
        _ => {
            // `.git` a link to a `.git` file elsewhere: its relative path is still taken
            // from the work tree.
            let (text, _) = gitfile_text(rng, base, &w, full_repo);
            let f = base.join("g/x/gitfile");
            write(&f, &text);
            symlink(f.as_os_str().as_bytes(), &w.join(".git"));
            ".git link to a .git file"
        }
    }
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The `.git` files and links, `commondir` files and their texts in `base`.
fn show(base: &Path) -> String {
    let mut out = String::new();
    let mut todo = vec![base.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let f = e.path();
            let name = e.file_name();
            let Ok(m) = std::fs::symlink_metadata(&f) else {
                continue;
            };
            if m.is_dir() {
                todo.push(f);
                continue;
            }
            if !matches!(
                name.as_bytes(),
                b".git" | b"commondir" | b"gitfile" | b"cd-text"
            ) {
                continue;
            }
            if let Ok(t) = std::fs::read_link(&f) {
                out += &format!("  {:?} -> {:?}\n", f, t);
            } else if let Ok(t) = std::fs::read(&f) {
                out += &format!("  {:?}: {:?}\n", f, String::from_utf8_lossy(&t));
            }
        }
    }
    out
}

/// What one layout gave.
#[derive(Default)]
struct Outcome {
    git_found: bool,
    agree: bool,
    unknown: bool,
    wrong: Option<String>,
}

/// Layout `i` (its own seed) in `top/i`, read by git and by the built-in reader.
fn case(top: &Path, i: usize) -> Outcome {
    let mut rng = Rng(0x5eed_0f9d_1ff5 ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let base = top.join(format!("{i}"));
    mkdirs(&base);
    let kind = layout(&mut rng, &base);
    let w = base.join("w");
    let git = git_dirs::ask_git(&w);
    let ours = lookup_git_dir(&w);
    let mut out = Outcome {
        git_found: git.is_some(),
        ..Outcome::default()
    };
    let bad = match (&git, &ours) {
        (Some(g), GitLookup::Found(d)) => {
            if canon(&d.git_dir) == canon(&g.git_dir) && canon(&d.common) == canon(&g.common) {
                out.agree = true;
                None
            } else {
                Some(format!(
                    "git: {:?} / {:?}; reader: {:?} / {:?}",
                    g.git_dir, g.common, d.git_dir, d.common
                ))
            }
        }
        (None, GitLookup::Found(d)) => Some(format!(
            "git refuses it; reader: {:?} / {:?}",
            d.git_dir, d.common
        )),
        (Some(g), GitLookup::NotFound) => Some(format!(
            "git: {:?} / {:?}; reader: no repository",
            g.git_dir, g.common
        )),
        (Some(_), GitLookup::Unknown { .. }) => {
            out.unknown = true;
            None
        }
        (None, _) => None,
    };
    out.wrong = bad.map(|b| format!("case {i} ({kind}): {b}\n{}", show(&base)));
    let _ = std::fs::remove_dir_all(&base);
    out
}

#[test]
fn built_in_reader_follows_git() {
    if !git_dirs::available() {
        eprintln!("git is not on PATH: nothing to compare with");
        return;
    }
    let top = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot make a temp dir: {e}"));
    let top = canon(top.path());
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= MAX_CASES || (i >= MIN_CASES && start.elapsed() > BUDGET) {
                        break;
                    }
                    let o = case(&top, i);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, o));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let ran = results.len();
    let git_found = results.iter().filter(|(_, o)| o.git_found).count();
    let agree = results.iter().filter(|(_, o)| o.agree).count();
    let unknown = results.iter().filter(|(_, o)| o.unknown).count();
    let wrong: Vec<&String> = results
        .iter()
        .filter_map(|(_, o)| o.wrong.as_ref())
        .collect();
    eprintln!(
        "{ran} layouts in {:?}: git found dirs for {git_found}, the reader named the same \
         for {agree}, said unknown for {unknown}, differed on {}",
        start.elapsed(),
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "{} of {ran} layouts where the built-in reader differs from git (first 30):\n{}",
        wrong.len(),
        wrong
            .iter()
            .take(30)
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(ran >= MIN_CASES, "only {ran} layouts");
    // The comparison means something: git took many of the layouts, and the reader named
    // the same dirs for nearly all of those.
    assert!(git_found >= ran / 5, "git took only {git_found} of {ran}");
    assert!(
        agree * 10 >= git_found * 9,
        "the reader agreed on only {agree} of the {git_found} git took"
    );
}
