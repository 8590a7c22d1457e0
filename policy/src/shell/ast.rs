//! What a parsed line is.

/// A parsed line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// The line's commands.
    pub list: List,
    /// Bodies of the `<<` redirections of the line, in order (also in each [`Redir`]).
    pub heredocs: Vec<String>,
}

/// Commands separated by `;`, `&` or newlines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct List {
    /// The and-or lists, in the order they run.
    pub items: Vec<AndOr>,
}

/// How an and-or list joins the next pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    /// `&&`: the next pipeline runs when this one succeeds.
    And,
    /// `||`: the next pipeline runs when this one fails.
    Or,
}

/// `a && b || c`, optionally run in the background (`&`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AndOr {
    /// The first pipeline.
    pub first: Pipeline,
    /// The pipelines after it, each with the `&&` or `||` before it.
    pub rest: Vec<(Connector, Pipeline)>,
    /// The list ends with `&`: it runs in the background.
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
    /// `!` before the pipeline (an odd number of them): its status is inverted.
    pub negated: bool,
    /// `time` keyword before the pipeline.
    pub timed: bool,
    /// The commands joined by `|` or `|&`, in order (none for a bare `time`).
    pub commands: Vec<Command>,
}

/// One command of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Assignments, words and redirections: a program, builtin or function run.
    Simple(SimpleCommand),
    /// `( list )`
    Subshell(List, Vec<Redir>),
    /// `{ list; }`
    Group(List, Vec<Redir>),
    /// `if c; then b; [elif c; then b;]... [else b;] fi`: conditions and bodies in order.
    If(Vec<List>, Vec<Redir>),
    /// `while c; do b; done` / `until`.
    While {
        /// `until`: the body runs while the condition fails.
        until: bool,
        /// The condition list.
        cond: List,
        /// The loop's body.
        body: List,
        /// The redirections after the command.
        redirs: Vec<Redir>,
    },
    /// `for name [in words]; do body; done` (also `select`); `words` None means `"$@"`.
    For {
        /// The loop variable's name.
        var: String,
        /// The words after `in`; `None` without `in` (the positional parameters).
        words: Option<Vec<Word>>,
        /// The loop's body.
        body: List,
        /// The redirections after the command.
        redirs: Vec<Redir>,
    },
    /// `for ((a; b; c)); do body; done`
    ArithFor {
        /// The text between `((` and `))` (`a; b; c`), not evaluated.
        header: String,
        /// The loop's body.
        body: List,
        /// The redirections after the command.
        redirs: Vec<Redir>,
    },
    /// `case word in pat|pat) list ;; ... esac`
    Case {
        /// The word matched against the patterns.
        word: Word,
        /// Each arm's patterns and the list it runs, in order.
        arms: Vec<(Vec<Word>, List)>,
        /// The redirections after the command.
        redirs: Vec<Redir>,
    },
    /// `(( expr ))`
    Arith(String, Vec<Redir>),
    /// `[[ ... ]]`: its words.
    Cond(Vec<Word>, Vec<Redir>),
    /// `name() body` / `function name body`.
    Function {
        /// The function's name.
        name: String,
        /// The compound command that runs when it is called.
        body: Box<Command>,
    },
}

/// `name=value` or `name+=value` before a command (or alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assign {
    /// The variable assigned.
    pub name: String,
    /// `+=`: the value is appended to the variable's.
    pub append: bool,
    /// The word after `=` (empty for `name=`).
    pub value: Word,
}

/// A simple command: assignments, words, redirections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The assignments before the first word.
    pub assigns: Vec<Assign>,
    /// The command name and its arguments, unexpanded.
    pub words: Vec<Word>,
    /// The redirections, wherever they stood among the words.
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
    /// The operator, which says what is done with the target.
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
    Lit {
        /// The text, quotes and escapes removed.
        text: String,
        /// It came from quotes or an escape.
        quoted: bool,
    },
    /// `~` or `~user` at the start of a word or after `=`/`:` in an assignment.
    Tilde(String),
    /// `$name`, `${name}`, `$1`, `$@`...: the name; `quoted` when inside double quotes.
    Var {
        /// The variable's name (or the special parameter: `1`, `@`, `?`, ...).
        name: String,
        /// Inside double quotes (no field splitting or globbing of the value).
        quoted: bool,
    },
    /// `${...}` with an operator we do not evaluate: the raw inside.
    Param {
        /// The text between `${` and `}`, as written.
        raw: String,
        /// Inside double quotes.
        quoted: bool,
    },
    /// `$(...)` or backticks.
    CommandSub(Box<Script>),
    /// `<(...)` (`output` false) or `>(...)` (`output` true).
    ProcessSub {
        /// `>(...)`: the command reads what is written to it; `<(...)` (false): the command
        /// writes what is read from it.
        output: bool,
        /// The line inside the parentheses.
        script: Box<Script>,
    },
    /// `$((...))`
    Arith(String),
}

/// A word: its parts and the raw text as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    /// The parts in order: literal text, expansions and substitutions.
    pub parts: Vec<WordPart>,
    /// The word exactly as written on the line, quotes included.
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
