//! What an awk program does outside itself: the commands it runs (`system("...")`,
//! `print | "cmd"`, `"cmd" | getline`) and the files it writes (`print > "file"`). A literal
//! command is classified like `sh -c`; anything computed makes the line opaque.
//!
//! This is a scanner, not an awk parser: it skips string literals, finds those few forms,
//! and never fails (unknown text is just passed over).

/// One effect of an awk program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Runs this shell line.
    Runs(String),
    /// Runs a command efr cannot read (built from variables).
    RunsUnknown,
    /// Writes (or appends to) this file.
    Writes(String),
    /// Writes a file whose name efr cannot read.
    WritesUnknown,
}

/// Reads a string literal starting at the `"` at `i`; the text and the index after it.
fn string_at(b: &[u8], i: usize) -> (String, usize) {
    let mut out = Vec::new();
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'"' => return (String::from_utf8_lossy(&out).into_owned(), j + 1),
            b'\\' if j + 1 < b.len() => {
                let c = b[j + 1];
                out.push(match c {
                    b'n' => b'\n',
                    b't' => b'\t',
                    other => other,
                });
                j += 2;
            }
            c => {
                out.push(c);
                j += 1;
            }
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), j)
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i
}

fn ident_at(b: &[u8], i: usize) -> &[u8] {
    let mut j = i;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
        j += 1;
    }
    &b[i..j]
}

/// The effects of an awk program, in order.
pub fn effects(program: &str) -> Vec<Effect> {
    let b = program.as_bytes();
    let mut out = Vec::new();
    let mut in_print = false;
    // The string literal that ended just before (for `"cmd" | getline`).
    let mut last_string: Option<String> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => {
                let (s, next) = string_at(b, i);
                last_string = Some(s);
                i = next;
                continue;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b';' | b'{' | b'}' | b'\n' => in_print = false,
            b'|' if b.get(i + 1) == Some(&b'|') => {
                i += 2;
                last_string = None;
                continue;
            }
            b'|' => {
                let mut j = i + 1;
                if b.get(j) == Some(&b'&') {
                    j += 1;
                }
                j = skip_space(b, j);
                if ident_at(b, j) == b"getline" {
                    out.push(match last_string.take() {
                        Some(s) => Effect::Runs(s),
                        None => Effect::RunsUnknown,
                    });
                    i = j + 7;
                } else if b.get(j) == Some(&b'"') {
                    let (s, next) = string_at(b, j);
                    out.push(Effect::Runs(s));
                    i = next;
                } else {
                    out.push(Effect::RunsUnknown);
                    i = j;
                }
                last_string = None;
                continue;
            }
            b'>' if in_print => {
                let mut j = i + 1;
                if b.get(j) == Some(&b'>') {
                    j += 1;
                }
                j = skip_space(b, j);
                if b.get(j) == Some(&b'"') {
                    let (s, next) = string_at(b, j);
                    out.push(Effect::Writes(s));
                    i = next;
                } else {
                    out.push(Effect::WritesUnknown);
                    i = j;
                }
                last_string = None;
                continue;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let word = ident_at(b, i);
                let end = i + word.len();
                let at_boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
                if at_boundary && (word == b"print" || word == b"printf") {
                    in_print = true;
                }
                if at_boundary && word == b"system" {
                    let j = skip_space(b, end);
                    if b.get(j) == Some(&b'(') {
                        let k = skip_space(b, j + 1);
                        let literal = (b.get(k) == Some(&b'"')).then(|| string_at(b, k));
                        match literal {
                            Some((s, next)) if b.get(skip_space(b, next)) == Some(&b')') => {
                                out.push(Effect::Runs(s));
                                i = skip_space(b, next) + 1;
                            }
                            _ => {
                                out.push(Effect::RunsUnknown);
                                i = j + 1;
                            }
                        }
                        last_string = None;
                        continue;
                    }
                }
                last_string = None;
                i = end;
                continue;
            }
            b' ' | b'\t' => {}
            _ => last_string = None,
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Effect::*;
    use super::effects;

    #[test]
    fn commands_and_files() {
        assert_eq!(
            effects(r#"BEGIN{system("rm -rf ~")}"#),
            [Runs("rm -rf ~".into())]
        );
        assert_eq!(effects(r#"{ system("echo " $1) }"#), [RunsUnknown]);
        assert_eq!(
            effects(r#"{print $1 > "/etc/x"}"#),
            [Writes("/etc/x".into())]
        );
        assert_eq!(
            effects(r#"{print $1 >> "out.txt"; print > f}"#),
            [Writes("out.txt".into()), WritesUnknown]
        );
        assert_eq!(
            effects(r#"{print | "sort -u > /etc/y"}"#),
            [Runs("sort -u > /etc/y".into())]
        );
        assert_eq!(
            effects(r#"BEGIN { while (("curl -s x" | getline l) > 0) print l }"#),
            [Runs("curl -s x".into())]
        );
        assert_eq!(effects(r#"{ print $0 |& cmd }"#), [RunsUnknown]);
    }

    #[test]
    fn plain_programs_have_none() {
        for p in [
            "{print $1}",
            "$1 > 5 {print}",
            "NR%2==0 || /x/ {n++} END {printf \"%d\\n\", n}",
            r#"{ if ($2 > "m") print "system(\"x\")" }"#,
            "# system(\"rm\")\n{print}",
            "",
            "\"",
            "system(",
            "{print >",
        ] {
            let e = effects(p);
            assert!(
                e.iter().all(|x| !matches!(x, Runs(_) | Writes(_))),
                "{p}: {e:?}"
            );
        }
    }
}
