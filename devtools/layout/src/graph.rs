//! The import graph at each level of the module tree, and its circles.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::Module;

/// Children of one module that import each other in a circle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    /// The module whose children they are (empty: the crate root).
    pub parent: String,
    /// The children in the circle, sorted.
    pub members: Vec<String>,
    /// The imports that make it: `(from module, imported module)`, each from inside one
    /// member to inside another.
    pub imports: Vec<(String, String)>,
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parent = if self.parent.is_empty() {
            "the crate root"
        } else {
            &self.parent
        };
        write!(
            f,
            "under {parent}, {} import each other:",
            self.members.join(", ")
        )?;
        for (from, to) in &self.imports {
            write!(f, " {from} -> {to};")?;
        }
        Ok(())
    }
}

fn segs(m: &str) -> Vec<&str> {
    if m.is_empty() {
        Vec::new()
    } else {
        m.split("::").collect()
    }
}

/// The module a path (`crate::a::B`, `super::c`, `self::d`) of module `at` names: the
/// longest prefix of it that is a module of the crate.
fn resolve(modules: &BTreeSet<&str>, at: &str, path: &[String]) -> Option<String> {
    let mut abs: Vec<&str> = segs(at);
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            abs.clear();
            rest = &rest[1..];
        }
        Some("self" | "super") => {}
        _ => return None,
    }
    // `self::super::super::x`: each `super` one level up.
    while let Some(first) = rest.first() {
        match first.as_str() {
            "self" => {}
            "super" => {
                abs.pop()?;
            }
            _ => break,
        }
        rest = &rest[1..];
    }
    abs.extend(rest.iter().map(String::as_str));
    (0..=abs.len())
        .rev()
        .map(|n| abs[..n].join("::"))
        .find(|m| modules.contains(m.as_str()))
}

/// The edge an import from `from` to `to` makes: `(parent, child on from's side, child on
/// to's side)` under their deepest common ancestor, or none when one holds the other.
fn level_edge(from: &str, to: &str) -> Option<(String, String, String)> {
    let (a, b) = (segs(from), segs(to));
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == a.len() || common == b.len() {
        return None;
    }
    let child = |s: &[&str]| s[..=common].join("::");
    Some((a[..common].join("::"), child(&a), child(&b)))
}

type Level = BTreeMap<String, BTreeMap<String, Vec<(String, String)>>>;

/// Every circle of the crate's modules (from [`crate::read_crate`]), at every level.
pub fn circles(modules: &[Module]) -> Vec<Circle> {
    let names: BTreeSet<&str> = modules.iter().map(|m| m.name.as_str()).collect();
    // parent -> child -> sibling it imports -> the imports that make the edge.
    let mut levels: BTreeMap<String, Level> = BTreeMap::new();
    for m in modules {
        for p in &m.paths {
            let Some(to) = resolve(&names, &m.name, p) else {
                continue;
            };
            if let Some((parent, a, b)) = level_edge(&m.name, &to) {
                let why = levels
                    .entry(parent)
                    .or_default()
                    .entry(a)
                    .or_default()
                    .entry(b)
                    .or_default();
                if !why.contains(&(m.name.clone(), to.clone())) {
                    why.push((m.name.clone(), to));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (parent, level) in &levels {
        for members in strongly_connected(level) {
            let set: BTreeSet<&String> = members.iter().collect();
            let mut imports = Vec::new();
            for a in &members {
                for (b, why) in level.get(a).into_iter().flatten() {
                    if set.contains(b) {
                        imports.extend(why.iter().cloned());
                    }
                }
            }
            out.push(Circle {
                parent: parent.clone(),
                members,
                imports,
            });
        }
    }
    out
}

/// The groups of two or more nodes that reach each other (Tarjan's algorithm), each sorted.
fn strongly_connected<V>(graph: &BTreeMap<String, BTreeMap<String, V>>) -> Vec<Vec<String>> {
    struct State<'g> {
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g, V>(g: &'g BTreeMap<String, BTreeMap<String, V>>, v: &'g str, s: &mut State<'g>) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in g.get(v).into_iter().flat_map(BTreeMap::keys) {
            if !s.index.contains_key(w.as_str()) {
                visit(g, w, s);
                let lw = s.low[w.as_str()];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w.as_str()) {
                let iw = s.index[w.as_str()];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.out.push(group);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(graph, v, &mut s);
        }
    }
    s.out
}
