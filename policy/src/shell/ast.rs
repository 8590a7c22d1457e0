//! What a parsed line is.

/// A parsed line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    pub list: List,
    /// Bodies of the `<<` redirections of the line, in order (also in each [`Redir`]).
    pub heredocs: Vec<String>,
}

/// Commands separated by `;`, `&` or newlines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct List {
    pub items: Vec<AndOr>,
}

/// How an and-or list joins the next pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    And,
    Or,
}

/// `a && b || c`, optionally run in the background (`&`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AndOr {
    pub first: Pipeline,
    pub rest: Vec<(Connector, Pipeline)>,
    pub background: bool,
}

impl AndOr {
    /// Every pipeline of the list, in order.
    pub fn pipelines(&self) -> impl Iterator<Item = &Pipeline> {
        std::iter::once(&self.first).chain(self.rest.iter().map(|(_, p)| p))
    }
}

/// `[!] a | b |& c`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pipeline {
    pub negated: bool,
    /// `time` keyword before the pipeline.
    pub timed: bool,
    pub commands: Vec<Command>,
}

/// One command of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Simple(SimpleCommand),
    /// `( list )`
    Subshell(List, Vec<Redir>),
    /// `{ list; }`
    Group(List, Vec<Redir>),
    /// `if c; then b; [elif c; then b;]... [else b;] fi`: conditions and bodies in order.
    If(Vec<List>, Vec<Redir>),
    /// `while c; do b; done` / `until`.
    While {
        until: bool,
        cond: List,
        body: List,
        redirs: Vec<Redir>,
    },
    /// `for name [in words]; do body; done` (also `select`); `words` None means `"$@"`.
    For {
        var: String,
        words: Option<Vec<Word>>,
        body: List,
        redirs: Vec<Redir>,
    },
    /// `for ((a; b; c)); do body; done`
    ArithFor {
        header: String,
        body: List,
        redirs: Vec<Redir>,
    },
    /// `case word in pat|pat) list ;; ... esac`
    Case {
        word: Word,
        arms: Vec<(Vec<Word>, List)>,
        redirs: Vec<Redir>,
    },
    /// `(( expr ))`
    Arith(String, Vec<Redir>),
    /// `[[ ... ]]`: its words.
    Cond(Vec<Word>, Vec<Redir>),
    /// `name() body` / `function name body`.
    Function {
        name: String,
        body: Box<Command>,
    },
}

/// `name=value` or `name+=value` before a command (or alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assign {
    pub name: String,
    pub append: bool,
    pub value: Word,
}

/// A simple command: assignments, words, redirections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    pub assigns: Vec<Assign>,
    pub words: Vec<Word>,
    pub redirs: Vec<Redir>,
}

/// The operator of a redirection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirOp {
    /// `<`
    In,
    /// `>`
    Out,
    /// `>|`
    Clobber,
    /// `>>`
    Append,
    /// `<>`
    ReadWrite,
    /// `&>` / `>&word` with a non-number word
    OutErr,
    /// `&>>`
    AppendErr,
    /// `N>&M`, `N<&M`, `N>&-`
    Dup,
    /// `<<` / `<<-`
    HereDoc,
    /// `<<<`
    HereString,
}

impl RedirOp {
    /// The redirection writes its target file.
    pub fn writes(self) -> bool {
        matches!(
            self,
            RedirOp::Out
                | RedirOp::Clobber
                | RedirOp::Append
                | RedirOp::ReadWrite
                | RedirOp::OutErr
                | RedirOp::AppendErr
        )
    }

    /// The redirection reads its target file.
    pub fn reads(self) -> bool {
        matches!(self, RedirOp::In | RedirOp::ReadWrite)
    }
}

/// One redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redir {
    /// The fd number before the operator (`2>`), absent when implied.
    pub fd: Option<u32>,
    /// `{name}>`: the variable that receives the fd.
    pub fd_var: Option<String>,
    pub op: RedirOp,
    /// The file, the fd (`Dup`), the delimiter (`HereDoc`) or the string (`HereString`).
    pub target: Word,
    /// The body of a `HereDoc`.
    pub heredoc: Option<String>,
    /// Where the parser keeps the body until the line's end (internal).
    pub heredoc_index: Option<usize>,
    /// A heredoc whose delimiter was quoted: its body is not expanded.
    pub heredoc_quoted: bool,
}

/// One part of a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WordPart {
    /// Literal text; `quoted` when it came from quotes or an escape (no glob, no split).
    Lit { text: String, quoted: bool },
    /// `~` or `~user` at the start of a word or after `=`/`:` in an assignment.
    Tilde(String),
    /// `$name`, `${name}`, `$1`, `$@`...: the name; `quoted` when inside double quotes.
    Var { name: String, quoted: bool },
    /// `${...}` with an operator we do not evaluate: the raw inside.
    Param { raw: String, quoted: bool },
    /// `$(...)` or backticks.
    CommandSub(Box<Script>),
    /// `<(...)` (`output` false) or `>(...)` (`output` true).
    ProcessSub { output: bool, script: Box<Script> },
    /// `$((...))`
    Arith(String),
}

/// A word: its parts and the raw text as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    pub parts: Vec<WordPart>,
    pub raw: String,
}

impl Word {
    /// The word's text when it is only literal text (quotes removed), else None.
    pub fn literal(&self) -> Option<String> {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                WordPart::Lit { text, .. } => s.push_str(text),
                _ => return None,
            }
        }
        Some(s)
    }

    /// The word holds an unquoted glob character (`*`, `?`, `[`).
    pub fn has_glob(&self) -> bool {
        self.parts.iter().any(|p| match p {
            WordPart::Lit {
                text,
                quoted: false,
            } => text.contains(['*', '?', '[']),
            _ => false,
        })
    }

    /// The word has any quoted part (a reserved word must have none).
    pub fn is_quoted(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, WordPart::Lit { quoted: true, .. }))
            || self.raw.contains(['\'', '"', '\\'])
    }
}
