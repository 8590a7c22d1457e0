//! The parts of a source file the layout needs: its code without comments, literals and
//! test modules; its `mod NAME;` declarations; its `crate::`/`self::`/`super::` paths.

/// The text with comments, string literals and character literals blanked (each replaced
/// by spaces, lines kept), then every `#[cfg(test)]` module (`mod x { ... }`) blanked.
pub(crate) fn code(text: &str) -> String {
    without_test_modules(&without_comments_and_literals(text))
}

fn without_comments_and_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[char]| {
        for ch in s {
            out.push(if *ch == '\n' { '\n' } else { ' ' });
        }
    };
    while i < c.len() {
        let end = literal_or_comment_end(&c, i);
        if end > i {
            blank(&mut out, &c[i..end]);
            i = end;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// Where the comment or literal starting at `i` ends, or `i` when none starts there.
fn literal_or_comment_end(c: &[char], i: usize) -> usize {
    let at = |k: usize| c.get(k).copied();
    let prev_ident = i > 0 && is_ident(c[i - 1]);
    match c[i] {
        '/' if at(i + 1) == Some('/') => (i..c.len()).find(|&k| c[k] == '\n').unwrap_or(c.len()),
        '/' if at(i + 1) == Some('*') => block_comment_end(c, i),
        '"' => string_end(c, i + 1),
        'r' | 'b' if !prev_ident => raw_or_byte_string_end(c, i),
        '\'' => char_end(c, i),
        _ => i,
    }
}

fn block_comment_end(c: &[char], i: usize) -> usize {
    let mut depth = 0;
    let mut k = i;
    while k + 1 < c.len() {
        if c[k] == '/' && c[k + 1] == '*' {
            depth += 1;
            k += 2;
        } else if c[k] == '*' && c[k + 1] == '/' {
            depth -= 1;
            k += 2;
            if depth == 0 {
                return k;
            }
        } else {
            k += 1;
        }
    }
    c.len()
}

/// The end of a `"..."` whose content starts at `k`.
fn string_end(c: &[char], mut k: usize) -> usize {
    while k < c.len() {
        match c[k] {
            '\\' => k += 2,
            '"' => return k + 1,
            _ => k += 1,
        }
    }
    c.len()
}

/// `r"..."`, `r#"..."#`, `b"..."`, `br#"..."#`, `b'x'` (or `i` when none starts at `i`).
fn raw_or_byte_string_end(c: &[char], i: usize) -> usize {
    let mut k = i;
    if c[k] == 'b' {
        k += 1;
        match c.get(k) {
            Some('"') => return string_end(c, k + 1),
            Some('\'') => return char_end(c, k).max(i),
            Some('r') => {}
            _ => return i,
        }
    }
    // c[k] == 'r'
    k += 1;
    let mut hashes = 0;
    while c.get(k) == Some(&'#') {
        hashes += 1;
        k += 1;
    }
    if c.get(k) != Some(&'"') {
        return i;
    }
    k += 1;
    while k < c.len() {
        if c[k] == '"' && (1..=hashes).all(|h| c.get(k + h) == Some(&'#')) {
            return k + 1 + hashes;
        }
        k += 1;
    }
    c.len()
}

/// A character literal (`'x'`, `'\n'`, `'\u{1F600}'`); a lifetime (`'a`) is none.
fn char_end(c: &[char], i: usize) -> usize {
    match c.get(i + 1) {
        Some('\\') => (i + 2..c.len())
            .find(|&k| c[k] == '\'')
            .map_or(c.len(), |k| k + 1),
        Some(_) if c.get(i + 2) == Some(&'\'') => i + 3,
        _ => i,
    }
}

/// Every `#[cfg(test)]` module with a body blanked, braces matched.
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(k) = out[from..].find("#[cfg(test)]") {
        let start = from + k;
        let after = start + "#[cfg(test)]".len();
        let rest = out[after..].trim_start();
        let item = out.len() - rest.len();
        from = after;
        if !starts_with_word(rest, "mod") {
            continue;
        }
        let Some(open) = out[item..].find(['{', ';']).map(|o| item + o) else {
            continue;
        };
        let end = if out.as_bytes()[open] == b';' {
            open + 1
        } else {
            matching_brace(&out, open)
        };
        let blanked: String = out[start..end]
            .chars()
            .map(|ch| if ch == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blanked);
        from = end;
    }
    out
}

fn starts_with_word(s: &str, word: &str) -> bool {
    s.starts_with(word) && !s[word.len()..].starts_with(is_ident)
}

/// The end (one past) of the brace block opening at `open`.
fn matching_brace(s: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (k, b) in s.bytes().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// A `mod NAME;` declaration of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModDecl {
    pub(crate) name: String,
    /// A `#[path = ...]` attribute stands right before it.
    pub(crate) path_attribute: bool,
}

/// The `mod NAME;` declarations (not inline `mod NAME { ... }`) of code from [`code`].
pub(crate) fn mod_decls(code: &str) -> Vec<ModDecl> {
    let mut out = Vec::new();
    for (k, _) in code.match_indices("mod") {
        if k > 0 && is_ident(code[..k].chars().next_back().unwrap_or(' ')) {
            continue;
        }
        let rest = &code[k + 3..];
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = rest.trim_start();
        let name: String = rest.chars().take_while(|ch| is_ident(*ch)).collect();
        if name.is_empty() || !rest[name.len()..].trim_start().starts_with(';') {
            continue;
        }
        let before = code[..k].trim_end();
        let before = before
            .strip_suffix("pub(crate)")
            .or_else(|| before.strip_suffix("pub(super)"))
            .or_else(|| before.strip_suffix("pub"))
            .unwrap_or(before)
            .trim_end();
        let path_attribute = before.ends_with(']')
            && before
                .rfind("#[")
                .is_some_and(|a| before[a + 2..].trim_start().starts_with("path"));
        out.push(ModDecl {
            name,
            path_attribute,
        });
    }
    out
}

/// Every path of code from [`code`] that starts with `crate`, `$crate`, `self` or `super`,
/// as its segments; a `use` tree's `{a, b::{c, self}}` groups as one path per leaf (`self`
/// in a group names the group's base).
pub(crate) fn paths(code: &str) -> Vec<Vec<String>> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let boundary = i == 0 || !(is_ident(c[i - 1]) || c[i - 1] == ':');
        let start = if c[i] == '$' { i + 1 } else { i };
        let word = ident_at(&c, start);
        if boundary && ["crate", "self", "super"].contains(&word.as_str()) {
            let after = skip_ws(&c, start + word.len());
            if c.get(after) == Some(&':') && c.get(after + 1) == Some(&':') {
                let mut found = Vec::new();
                let end = use_tree(&c, start, Vec::new(), &mut found);
                out.extend(found);
                i = end.max(i + 1);
                continue;
            }
        }
        i += 1;
    }
    out
}

fn ident_at(c: &[char], i: usize) -> String {
    c[i.min(c.len())..]
        .iter()
        .take_while(|ch| is_ident(**ch))
        .collect()
}

fn skip_ws(c: &[char], mut i: usize) -> usize {
    while c.get(i).is_some_and(|ch| ch.is_whitespace()) {
        i += 1;
    }
    i
}

/// Reads the use tree (or expression path) at `i` under `base`, pushing its leaves into
/// `out`; returns where it ends.
fn use_tree(c: &[char], i: usize, base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segs = base;
    let mut i = skip_ws(c, i);
    loop {
        let word = ident_at(c, i);
        if word.is_empty() {
            break;
        }
        i += word.len();
        if word != "self" || segs.is_empty() {
            segs.push(word);
        }
        let after = skip_ws(c, i);
        if !(c.get(after) == Some(&':') && c.get(after + 1) == Some(&':')) {
            break;
        }
        i = skip_ws(c, after + 2);
        if c.get(i) == Some(&'{') {
            return group(c, i + 1, &segs, out);
        }
    }
    out.push(segs);
    i
}

/// The items of a `{...}` group whose content starts at `i`; returns the end of the group.
fn group(c: &[char], mut i: usize, base: &[String], out: &mut Vec<Vec<String>>) -> usize {
    loop {
        i = skip_ws(c, i);
        match c.get(i) {
            None => return c.len(),
            Some('}') => return i + 1,
            Some(',') => i += 1,
            Some(ch) if is_ident(*ch) => {
                let end = use_tree(c, i, base.to_vec(), out);
                // `x as y`, `*`, or anything the tree did not read: skip to the next item.
                i = end.max(i + 1);
                while let Some(ch) = c.get(i) {
                    if *ch == ',' || *ch == '}' {
                        break;
                    }
                    i += 1;
                }
            }
            Some(_) => i += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(code_text: &str) -> Vec<String> {
        paths(&code(code_text))
            .into_iter()
            .map(|p| p.join("::"))
            .collect()
    }

    #[test]
    fn use_groups_are_one_path_per_leaf() {
        assert_eq!(
            joined("use crate::{a::{self, B}, c::D as E, f::*};\n"),
            ["crate::a", "crate::a::B", "crate::c::D", "crate::f"]
        );
        assert_eq!(
            joined("let x = super::super::m::f(1);"),
            ["super::super::m::f"]
        );
        assert_eq!(joined("$crate::a::b!()"), ["crate::a::b"]);
    }

    #[test]
    fn comments_literals_and_test_modules_are_not_code() {
        let text = "// use crate::a;\n/* crate::b /* crate::c */ */\nlet s = \"crate::d\";\n\
                    let r = r#\"crate::e \"# ; let q = '\"'; let l: &'static str = x;\n\
                    use crate::f;\n#[cfg(test)]\nmod tests {\n use crate::g;\n fn x() { }\n}\n\
                    use crate::h;\n";
        assert_eq!(joined(text), ["crate::f", "crate::h"]);
    }

    #[test]
    fn mod_declarations_not_inline_modules() {
        let text = "pub mod a;\nmod b ;\npub(crate) mod c;\nmod inline { }\n#[path = \"x.rs\"]\nmod d;\n\
                    #[cfg(test)]\nmod tests;\n";
        let decls = mod_decls(&code(text));
        let names: Vec<_> = decls.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert!(decls[3].path_attribute && !decls[0].path_attribute);
    }
}
