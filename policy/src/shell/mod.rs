//! A shell parser that reads a line as bash does (the classifier judges what bash would run).
//!
//! A hand-written recursive-descent parser of the bash subset a coding agent writes:
//! lists (`;`, `&`, newlines), `&&`/`||`, pipelines (`|`, `|&`, `!`), subshells, brace groups,
//! `if`/`for`/`select`/`while`/`until`/`case`, `((...))`, `[[ ... ]]`, function definitions,
//! every redirection form with fd numbers (`>`, `>>`, `<`, `<>`, `>|`, `&>`, `&>>`, `N>&M`,
//! `<<`, `<<-`, `<<<`, `{var}>`), heredoc bodies, quoting (`'`, `"`, `$'...'`, `\`), `$(...)`,
//! backticks, `$((...))`, `${...}`, `<(...)`/`>(...)`, `~`, assignments before a command.
//!
//! It never panics and never hangs: every loop consumes input or stops, nesting is limited to
//! [`MAX_DEPTH`], and the input to [`MAX_LEN`] bytes. What it cannot read is a [`ParseError`];
//! the classifier makes such a line opaque, never "safe".
//!
//! - `ast`: what a parsed line is ([`Script`], [`List`], [`Command`], [`Word`], ...).
//! - `parser`: the reader of lists, pipelines and compound commands, and [`parse`].
//! - `word`: the reader of words, quotes, substitutions and redirections.
//!
//! Kept hand-written rather than on `brush-parser` for measured reasons: see
//! `docs/architecture.md` (the policy section) and `policy/tools/brush-eval`.

use std::fmt;

mod ast;
pub mod invocation;
mod parser;
mod word;

pub use ast::*;
pub use parser::parse;

/// The deepest nesting of commands and substitutions the parser follows.
pub const MAX_DEPTH: u32 = 48;
/// The longest line the parser reads (bytes).
pub const MAX_LEN: usize = 256 * 1024;

/// Why a line could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Char offset where reading stopped.
    pub pos: usize,
    /// What was wrong there, in a few words.
    pub msg: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.msg, self.pos)
    }
}

impl std::error::Error for ParseError {}
/// Every simple command of a list, depth first, including those in substitutions.
pub fn simple_commands(list: &List) -> Vec<&SimpleCommand> {
    fn walk_word<'a>(w: &'a Word, out: &mut Vec<&'a SimpleCommand>) {
        for p in &w.parts {
            match p {
                WordPart::CommandSub(s) => walk_list(&s.list, out),
                WordPart::ProcessSub { script, .. } => walk_list(&script.list, out),
                _ => {}
            }
        }
    }
    fn walk_cmd<'a>(c: &'a Command, out: &mut Vec<&'a SimpleCommand>) {
        match c {
            Command::Simple(sc) => {
                out.push(sc);
                for w in &sc.words {
                    walk_word(w, out);
                }
                for a in &sc.assigns {
                    walk_word(&a.value, out);
                }
            }
            Command::Subshell(l, _) | Command::Group(l, _) => walk_list(l, out),
            Command::If(ls, _) => ls.iter().for_each(|l| walk_list(l, out)),
            Command::While { cond, body, .. } => {
                walk_list(cond, out);
                walk_list(body, out);
            }
            Command::For { body, .. } | Command::ArithFor { body, .. } => walk_list(body, out),
            Command::Case { arms, .. } => arms.iter().for_each(|(_, l)| walk_list(l, out)),
            Command::Arith(..) | Command::Cond(..) => {}
            Command::Function { body, .. } => walk_cmd(body, out),
        }
    }
    fn walk_list<'a>(l: &'a List, out: &mut Vec<&'a SimpleCommand>) {
        for ao in &l.items {
            for p in ao.pipelines() {
                for c in &p.commands {
                    walk_cmd(c, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk_list(list, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        let s = parse(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        simple_commands(&s.list)
            .iter()
            .map(|c| {
                c.words
                    .iter()
                    .map(|w| w.literal().unwrap_or_else(|| format!("<{}>", w.raw)))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn basics() {
        assert_eq!(words("echo a b"), vec![vec!["echo", "a", "b"]]);
        assert_eq!(
            words("a && b || c; d & e"),
            vec![vec!["a"], vec!["b"], vec!["c"], vec!["d"], vec!["e"]]
        );
        assert_eq!(
            words("echo 'a b' \"c d\" e\\ f"),
            vec![vec!["echo", "a b", "c d", "e f"]]
        );
        assert_eq!(
            words("(cd x && make) | tee log"),
            vec![vec!["cd", "x"], vec!["make"], vec!["tee", "log"]]
        );
        assert_eq!(words("{ a; b; }"), vec![vec!["a"], vec!["b"]]);
        assert_eq!(
            words("if a; then b; elif c; then d; else e; fi"),
            vec![vec!["a"], vec!["b"], vec!["c"], vec!["d"], vec!["e"]]
        );
        assert_eq!(words("for f in *.c; do cc $f; done").len(), 1);
        assert_eq!(words("while read l; do echo $l; done < f").len(), 2);
        assert_eq!(words("case $x in a|b) echo 1;; *) echo 2;; esac").len(), 2);
        assert_eq!(words("f() { rm x; }; f"), vec![vec!["rm", "x"], vec!["f"]]);
        assert_eq!(
            words("echo $(rm -rf /tmp/x) `ls`"),
            vec![
                vec!["echo", "<$(rm -rf /tmp/x)>", "<`ls`>"],
                vec!["rm", "-rf", "/tmp/x"],
                vec!["ls"]
            ]
        );
        assert_eq!(words("diff <(ls a) >(cat)").len(), 3);
        assert_eq!(words("X=1 Y=2 make"), vec![vec!["make"]]);
        assert_eq!(words("(( i++ )); [[ -f x && y < z ]]").len(), 0);
    }

    #[test]
    fn redirections() {
        let s = parse("cmd 2>&1 >out 3<in 4<>rw >|c &>all &>>all2 <<<str 2>/dev/null {fd}>x >&2")
            .unwrap();
        let sc = simple_commands(&s.list)[0];
        let ops: Vec<_> = sc.redirs.iter().map(|r| (r.fd, r.op)).collect();
        assert_eq!(ops[0], (Some(2), RedirOp::Dup));
        assert_eq!(ops[1], (None, RedirOp::Out));
        assert_eq!(ops[2], (Some(3), RedirOp::In));
        assert_eq!(ops[3], (Some(4), RedirOp::ReadWrite));
        assert_eq!(ops[4], (None, RedirOp::Clobber));
        assert_eq!(ops[5], (None, RedirOp::OutErr));
        assert_eq!(ops[6], (None, RedirOp::AppendErr));
        assert_eq!(ops[7], (None, RedirOp::HereString));
        assert_eq!(sc.redirs[9].fd_var.as_deref(), Some("fd"));
        assert_eq!(ops[10], (None, RedirOp::Dup));
    }

    #[test]
    fn heredocs() {
        let s = parse("cat > f <<EOF\nhello $x\nEOF\necho done").unwrap();
        assert_eq!(s.heredocs, vec!["hello $x\n".to_string()]);
        assert_eq!(simple_commands(&s.list).len(), 2);
        let s = parse("cat <<-'E' | sh\n\trm -rf /\n\tE\n").unwrap();
        assert_eq!(s.heredocs, vec!["rm -rf /\n".to_string()]);
        assert!(s.list.items[0].first.commands.len() == 2);
    }

    #[test]
    fn errors_never_panic() {
        for bad in [
            "echo 'x",
            "echo \"x",
            "(a",
            "a &&",
            "if a; then",
            "case x in",
            "$(",
            "`",
            "a | | b",
            ";;",
            "f() ",
            "a >",
            "))))",
            "done",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let deep = "$(".repeat(10_000);
        assert!(parse(&deep).is_err());
        let deep = "(".repeat(10_000);
        assert!(parse(&deep).is_err());
    }
}
