//! No import circle between the modules of `efr-policy` (issue 13): every `crate::` and
//! `super::` path in a module's code (comments and the `#[cfg(test)] mod tests` left out) is
//! an edge to the deepest module it names; a module holds its children (who uses it uses
//! them), and a child's use of its own ancestor is not counted (that is how a Rust module
//! reaches its parent's types). The test fails naming every circle it finds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts == ["lib"] {
        parts.clear();
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without comment lines and without its test module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every `crate::...`/`super::...` path of the code, a `{a, b}` group as one path each.
fn paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = code.as_bytes();
    for start in ["crate::", "super::"] {
        for (i, _) in code.match_indices(start) {
            if i > 0 && (is_ident(b[i - 1] as char) || b[i - 1] == b':') {
                continue;
            }
            let mut j = i;
            while j < code.len() && (is_ident(b[j] as char) || b[j] == b':') {
                j += 1;
            }
            let base = code[i..j].trim_end_matches(':').to_string();
            if code[j..].starts_with('{') {
                let end = code[j..].find('}').map_or(code.len(), |k| j + k);
                for item in code[j + 1..end].split(',') {
                    let first = item.trim().split([':', ' ']).next().unwrap_or("");
                    if first == "self" || first.is_empty() {
                        out.insert(base.clone());
                    } else {
                        out.insert(format!("{base}::{first}"));
                    }
                }
            } else {
                out.insert(base);
            }
        }
    }
    out
}

fn resolve(modules: &BTreeSet<String>, cur: &str, path: &str) -> Option<String> {
    let mut segs: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if cur.is_empty() {
        Vec::new()
    } else {
        cur.split("::").collect()
    };
    if segs.first() == Some(&"crate") {
        base.clear();
        segs.remove(0);
    } else {
        while segs.first() == Some(&"super") {
            base.pop();
            segs.remove(0);
        }
    }
    let mut best = None;
    for i in 0..=segs.len() {
        let m = base
            .iter()
            .chain(segs[..i].iter())
            .copied()
            .collect::<Vec<_>>()
            .join("::");
        if modules.contains(&m) {
            best = Some(m);
        }
    }
    best
}

fn is_ancestor(a: &str, of: &str) -> bool {
    a.is_empty() || of.starts_with(&format!("{a}::"))
}

#[test]
fn no_module_of_the_crate_imports_itself_in_a_circle() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut list = Vec::new();
    files(&src, &mut list);
    let texts: BTreeMap<String, String> = list
        .iter()
        .map(|f| {
            (
                module_of(&src, f),
                std::fs::read_to_string(f).expect("read"),
            )
        })
        .collect();
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in &texts {
        for p in paths(&code(text)) {
            if let Some(t) = resolve(&modules, m, &p)
                && t != *m
                && !is_ancestor(&t, m)
                && !is_ancestor(m, &t)
            {
                edges.entry(m.clone()).or_default().insert(t);
            }
        }
        if let Some((parent, _)) = m.rsplit_once("::") {
            edges
                .entry(parent.to_string())
                .or_default()
                .insert(m.clone());
        }
    }
    // A circle: a module that reaches itself again through the edges.
    let mut circles = Vec::new();
    for m in &modules {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(String, Vec<String>)> = vec![(m.clone(), vec![m.clone()])];
        while let Some((at, trail)) = stack.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if next == m {
                    circles.push(trail.join(" -> ") + " -> " + m);
                } else if seen.insert(next.clone()) {
                    let mut t = trail.clone();
                    t.push(next.clone());
                    stack.push((next.clone(), t));
                }
            }
        }
    }
    assert!(
        modules.len() > 10 && edges.values().map(BTreeSet::len).sum::<usize>() > 20,
        "the module graph was not read: {modules:?}"
    );
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}
