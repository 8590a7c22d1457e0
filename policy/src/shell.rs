//! A shell parser that reads a line as bash does (issue 4).
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

use std::fmt;

/// The deepest nesting of commands and substitutions the parser follows.
pub const MAX_DEPTH: u32 = 48;
/// The longest line the parser reads (bytes).
pub const MAX_LEN: usize = 256 * 1024;

/// Why a line could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Char offset where reading stopped.
    pub pos: usize,
    pub msg: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.msg, self.pos)
    }
}

impl std::error::Error for ParseError {}

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

/// Parse a whole line (or script).
pub fn parse(input: &str) -> Result<Script, ParseError> {
    if input.len() > MAX_LEN {
        return Err(ParseError {
            pos: 0,
            msg: "line too long to read",
        });
    }
    let mut p = Parser::new(input, 0);
    let list = p.parse_list(&[], Stop::Eof)?;
    p.skip_space_nl();
    if p.i < p.s.len() {
        return Err(p.err("unexpected token"));
    }
    if !p.pending.is_empty() {
        p.read_heredoc_bodies();
    }
    let mut list = list;
    fill_heredocs(&mut list, &p.heredocs);
    Ok(Script {
        list,
        heredocs: p.heredocs,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Eof,
    /// `)` ends the list (subshell, `$(`, process substitution, case pattern).
    Paren,
    /// `;;` / `;&` / `;;&` or `esac` end it (case arm).
    CaseArm,
}

struct Pending {
    delim: String,
    strip_tabs: bool,
    index: usize,
}

struct Parser {
    s: Vec<char>,
    i: usize,
    depth: u32,
    heredocs: Vec<String>,
    pending: Vec<Pending>,
}

const RESERVED_STOPS: &[&str] = &[
    "then", "else", "elif", "fi", "do", "done", "esac", "}", "in",
];

fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Parser {
    fn new(input: &str, depth: u32) -> Self {
        Parser {
            s: input.chars().collect(),
            i: 0,
            depth,
            heredocs: Vec::new(),
            pending: Vec::new(),
        }
    }

    fn err(&self, msg: &'static str) -> ParseError {
        ParseError { pos: self.i, msg }
    }

    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.s.get(self.i + n).copied()
    }

    fn starts_with(&self, pat: &str) -> bool {
        pat.chars()
            .enumerate()
            .all(|(k, c)| self.s.get(self.i + k) == Some(&c))
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(self.err("nested too deeply"))
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Skip blanks, line continuations and a comment (not newlines).
    fn skip_blank(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.i += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.i += 2,
                Some('#') => {
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn newline(&mut self) -> bool {
        if self.peek() == Some('\n') {
            self.i += 1;
            if !self.pending.is_empty() {
                self.read_heredoc_bodies();
            }
            true
        } else {
            false
        }
    }

    fn skip_space_nl(&mut self) {
        loop {
            self.skip_blank();
            if !self.newline() {
                break;
            }
        }
    }

    /// Read the heredoc bodies pending at a newline.
    fn read_heredoc_bodies(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let mut body = String::new();
            loop {
                if self.i >= self.s.len() {
                    break;
                }
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i] != '\n' {
                    self.i += 1;
                }
                let mut line: String = self.s[start..self.i].iter().collect();
                if self.i < self.s.len() {
                    self.i += 1;
                }
                if p.strip_tabs {
                    line = line.trim_start_matches('\t').to_string();
                }
                if line == p.delim {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if let Some(slot) = self.heredocs.get_mut(p.index) {
                *slot = body;
            }
        }
    }

    /// The next word is this unquoted reserved word (does not consume).
    fn at_reserved(&self, w: &str) -> bool {
        if !self.starts_with(w) {
            return false;
        }
        match self.s.get(self.i + w.chars().count()) {
            None => true,
            Some(&c) => is_meta(c) || (w == "}" && c == '}') || c == '\r',
        }
    }

    fn eat_reserved(&mut self, w: &str) -> bool {
        if self.at_reserved(w) {
            self.i += w.chars().count();
            true
        } else {
            false
        }
    }

    fn expect_reserved(&mut self, w: &str, msg: &'static str) -> Result<(), ParseError> {
        self.skip_space_nl();
        if self.eat_reserved(w) {
            Ok(())
        } else {
            Err(self.err(msg))
        }
    }

    fn at_list_end(&self, stops: &[&str], stop: Stop) -> bool {
        match self.peek() {
            None => true,
            Some(')') => stop == Stop::Paren || stop == Stop::CaseArm,
            Some(';') if stop == Stop::CaseArm => {
                matches!(self.peek_at(1), Some(';') | Some('&'))
            }
            _ => {
                stops.iter().any(|w| self.at_reserved(w))
                    || (stop == Stop::CaseArm && self.at_reserved("esac"))
            }
        }
    }

    fn parse_list(&mut self, stops: &[&str], stop: Stop) -> Result<List, ParseError> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            self.skip_space_nl();
            if self.at_list_end(stops, stop) {
                break;
            }
            let before = self.i;
            let mut ao = self.parse_and_or(stops, stop)?;
            self.skip_blank();
            match self.peek() {
                Some(';')
                    if !(stop == Stop::CaseArm
                        && matches!(self.peek_at(1), Some(';') | Some('&'))) =>
                {
                    if self.peek_at(1) == Some(';') {
                        return Err(self.err("';;' outside case"));
                    }
                    self.i += 1;
                }
                Some('&') => {
                    ao.background = true;
                    self.i += 1;
                }
                Some('\n') => {
                    self.newline();
                }
                _ => {
                    items.push(ao);
                    if !self.at_list_end(stops, stop) {
                        self.leave();
                        return Err(self.err("unexpected token"));
                    }
                    break;
                }
            }
            items.push(ao);
            if self.i == before {
                return Err(self.err("no progress"));
            }
        }
        self.leave();
        Ok(List { items })
    }

    fn parse_and_or(&mut self, stops: &[&str], stop: Stop) -> Result<AndOr, ParseError> {
        let first = self.parse_pipeline(stops, stop)?;
        let mut rest = Vec::new();
        loop {
            self.skip_blank();
            let conn = if self.starts_with("&&") {
                Connector::And
            } else if self.starts_with("||") {
                Connector::Or
            } else {
                break;
            };
            self.i += 2;
            self.skip_space_nl();
            rest.push((conn, self.parse_pipeline(stops, stop)?));
        }
        Ok(AndOr {
            first,
            rest,
            background: false,
        })
    }

    fn parse_pipeline(&mut self, stops: &[&str], stop: Stop) -> Result<Pipeline, ParseError> {
        let mut pl = Pipeline::default();
        loop {
            self.skip_blank();
            if self.at_reserved("!") {
                self.i += 1;
                pl.negated = !pl.negated;
            } else if self.at_reserved("time") && pl.commands.is_empty() && !pl.timed {
                self.i += 4;
                pl.timed = true;
                self.skip_blank();
                while self.starts_with("-p") && self.s.get(self.i + 2).is_none_or(|c| is_meta(*c)) {
                    self.i += 2;
                    self.skip_blank();
                }
            } else {
                break;
            }
        }
        if pl.timed && self.at_list_end(stops, stop) {
            return Ok(pl);
        }
        loop {
            self.skip_blank();
            pl.commands.push(self.parse_command(stops, stop)?);
            self.skip_blank();
            if self.starts_with("||") {
                break;
            }
            if self.starts_with("|&") {
                self.i += 2;
            } else if self.peek() == Some('|') {
                self.i += 1;
            } else {
                break;
            }
            self.skip_space_nl();
        }
        Ok(pl)
    }

    fn parse_command(&mut self, stops: &[&str], stop: Stop) -> Result<Command, ParseError> {
        self.enter()?;
        let r = self.parse_command_inner(stops, stop);
        self.leave();
        r
    }

    fn parse_command_inner(&mut self, stops: &[&str], stop: Stop) -> Result<Command, ParseError> {
        self.skip_blank();
        let c = match self.peek() {
            None => return Err(self.err("a command is missing")),
            Some(c) => c,
        };
        if c == '(' {
            if self.peek_at(1) == Some('(') {
                if let Some(raw) = self.try_arith("((", "))") {
                    let redirs = self.parse_redirs()?;
                    return Ok(Command::Arith(raw, redirs));
                }
            }
            self.i += 1;
            let list = self.parse_list(&[], Stop::Paren)?;
            self.skip_space_nl();
            if self.peek() != Some(')') {
                return Err(self.err("')' is missing"));
            }
            self.i += 1;
            let redirs = self.parse_redirs()?;
            return Ok(Command::Subshell(list, redirs));
        }
        if self.eat_reserved("{") {
            let list = self.parse_list(&["}"], Stop::Eof)?;
            self.expect_reserved("}", "'}' is missing")?;
            let redirs = self.parse_redirs()?;
            return Ok(Command::Group(list, redirs));
        }
        if self.eat_reserved("if") {
            let mut parts = Vec::new();
            parts.push(self.parse_nonempty(&["then"])?);
            self.expect_reserved("then", "'then' is missing")?;
            parts.push(self.parse_nonempty(&["elif", "else", "fi"])?);
            loop {
                self.skip_space_nl();
                if self.eat_reserved("elif") {
                    parts.push(self.parse_list(&["then"], Stop::Eof)?);
                    self.expect_reserved("then", "'then' is missing")?;
                    parts.push(self.parse_list(&["elif", "else", "fi"], Stop::Eof)?);
                } else if self.eat_reserved("else") {
                    parts.push(self.parse_list(&["fi"], Stop::Eof)?);
                    self.expect_reserved("fi", "'fi' is missing")?;
                    break;
                } else {
                    self.expect_reserved("fi", "'fi' is missing")?;
                    break;
                }
            }
            let redirs = self.parse_redirs()?;
            return Ok(Command::If(parts, redirs));
        }
        for (kw, until) in [("while", false), ("until", true)] {
            if self.eat_reserved(kw) {
                let cond = self.parse_nonempty(&["do"])?;
                let body = self.parse_do_done()?;
                let redirs = self.parse_redirs()?;
                return Ok(Command::While {
                    until,
                    cond,
                    body,
                    redirs,
                });
            }
        }
        if self.eat_reserved("for") || self.eat_reserved("select") {
            self.skip_blank();
            if self.starts_with("((") {
                let header = self
                    .try_arith("((", "))")
                    .ok_or_else(|| self.err("'))' is missing"))?;
                self.skip_blank();
                if self.peek() == Some(';') {
                    self.i += 1;
                }
                let body = self.parse_do_done_or_group()?;
                let redirs = self.parse_redirs()?;
                return Ok(Command::ArithFor {
                    header,
                    body,
                    redirs,
                });
            }
            let var = self
                .read_name()
                .ok_or_else(|| self.err("a loop variable is missing"))?;
            self.skip_blank();
            let mut words = None;
            // `for x; do`, `for x do`, `for x in a b; do`, with newlines allowed before `in`/`do`.
            let save = self.i;
            self.skip_space_nl();
            if self.eat_reserved("in") {
                let mut ws = Vec::new();
                loop {
                    self.skip_blank();
                    match self.peek() {
                        None | Some(';') | Some('\n') => break,
                        Some(c) if is_meta(c) => return Err(self.err("unexpected token in for")),
                        _ => ws.push(self.read_word()?),
                    }
                }
                words = Some(ws);
            } else {
                self.i = save;
            }
            self.skip_blank();
            if self.peek() == Some(';') {
                self.i += 1;
            }
            let body = self.parse_do_done_or_group()?;
            let redirs = self.parse_redirs()?;
            return Ok(Command::For {
                var,
                words,
                body,
                redirs,
            });
        }
        if self.eat_reserved("case") {
            self.skip_blank();
            let word = self.read_word()?;
            self.expect_reserved("in", "'in' is missing")?;
            let mut arms = Vec::new();
            loop {
                self.skip_space_nl();
                if self.eat_reserved("esac") {
                    break;
                }
                if self.peek().is_none() {
                    return Err(self.err("'esac' is missing"));
                }
                if self.peek() == Some('(') {
                    self.i += 1;
                }
                let mut pats = Vec::new();
                loop {
                    self.skip_blank();
                    match self.peek() {
                        Some(')') => {
                            self.i += 1;
                            break;
                        }
                        Some('|') => self.i += 1,
                        Some(c) if !is_meta(c) => pats.push(self.read_word()?),
                        _ => return Err(self.err("bad case pattern")),
                    }
                }
                let body = self.parse_list(&[], Stop::CaseArm)?;
                self.skip_space_nl();
                if self.starts_with(";;&") {
                    self.i += 3;
                } else if self.starts_with(";;") || self.starts_with(";&") {
                    self.i += 2;
                }
                arms.push((pats, body));
            }
            let redirs = self.parse_redirs()?;
            return Ok(Command::Case { word, arms, redirs });
        }
        if self.at_reserved("[[") {
            self.i += 2;
            let mut words = Vec::new();
            loop {
                self.skip_space_nl();
                if self.at_reserved("]]") {
                    self.i += 2;
                    break;
                }
                match self.peek() {
                    None => return Err(self.err("']]' is missing")),
                    Some(c) if is_meta(c) => {
                        // operators inside [[ ]] are plain tokens
                        let start = self.i;
                        while let Some(c) = self.peek() {
                            if matches!(c, '&' | '|' | '<' | '>' | '(' | ')' | ';') {
                                self.i += 1;
                            } else {
                                break;
                            }
                        }
                        if self.i == start {
                            self.i += 1;
                        }
                        let raw: String = self.s[start..self.i].iter().collect();
                        words.push(Word {
                            parts: vec![WordPart::Lit {
                                text: raw.clone(),
                                quoted: false,
                            }],
                            raw,
                        });
                    }
                    _ => words.push(self.read_word()?),
                }
            }
            let redirs = self.parse_redirs()?;
            return Ok(Command::Cond(words, redirs));
        }
        if self.eat_reserved("function") {
            self.skip_blank();
            let name = self
                .read_func_name()
                .ok_or_else(|| self.err("a function name is missing"))?;
            self.skip_blank();
            if self.starts_with("()") {
                self.i += 2;
            } else if self.peek() == Some('(') {
                self.i += 1;
                self.skip_blank();
                if self.peek() != Some(')') {
                    return Err(self.err("')' is missing"));
                }
                self.i += 1;
            }
            self.skip_space_nl();
            let body = self.parse_command(stops, stop)?;
            return Ok(Command::Function {
                name,
                body: Box::new(body),
            });
        }
        // `name () body`
        {
            let save = self.i;
            if let Some(name) = self.read_func_name() {
                self.skip_blank();
                if self.peek() == Some('(') {
                    self.i += 1;
                    self.skip_blank();
                    if self.peek() == Some(')') {
                        self.i += 1;
                        self.skip_space_nl();
                        let body = self.parse_command(stops, stop)?;
                        return Ok(Command::Function {
                            name,
                            body: Box::new(body),
                        });
                    }
                }
            }
            self.i = save;
        }
        for w in RESERVED_STOPS {
            if self.at_reserved(w) {
                return Err(self.err("unexpected reserved word"));
            }
        }
        self.parse_simple()
    }

    /// A list that bash requires to hold a command (if, while, do ... done).
    fn parse_nonempty(&mut self, stops: &[&str]) -> Result<List, ParseError> {
        let l = self.parse_list(stops, Stop::Eof)?;
        if l.items.is_empty() {
            return Err(self.err("a command is missing"));
        }
        Ok(l)
    }

    fn parse_do_done(&mut self) -> Result<List, ParseError> {
        self.expect_reserved("do", "'do' is missing")?;
        let body = self.parse_nonempty(&["done"])?;
        self.expect_reserved("done", "'done' is missing")?;
        Ok(body)
    }

    fn parse_do_done_or_group(&mut self) -> Result<List, ParseError> {
        self.skip_space_nl();
        if self.eat_reserved("{") {
            let body = self.parse_list(&["}"], Stop::Eof)?;
            self.expect_reserved("}", "'}' is missing")?;
            return Ok(body);
        }
        self.parse_do_done()
    }

    fn read_name(&mut self) -> Option<String> {
        let start = self.i;
        if !self.peek().is_some_and(is_name_start) {
            return None;
        }
        while self.peek().is_some_and(is_name_char) {
            self.i += 1;
        }
        Some(self.s[start..self.i].iter().collect())
    }

    /// A function name: bash allows most unquoted characters but not metacharacters,
    /// quotes or `$`.
    fn read_func_name(&mut self) -> Option<String> {
        let start = self.i;
        while let Some(c) = self.peek() {
            if is_meta(c) || matches!(c, '\'' | '"' | '$' | '`' | '\\' | '=' | '{' | '}') {
                break;
            }
            self.i += 1;
        }
        if self.i == start {
            return None;
        }
        let name: String = self.s[start..self.i].iter().collect();
        if RESERVED_STOPS.contains(&name.as_str())
            || [
                "if", "while", "until", "for", "case", "function", "select", "!", "[[",
            ]
            .contains(&name.as_str())
        {
            self.i = start;
            return None;
        }
        Some(name)
    }

    /// `((...))` or `$((...))` body when it balances; restores position when it does not
    /// (then `((` is two subshells).
    fn try_arith(&mut self, open: &str, close: &str) -> Option<String> {
        let save = self.i;
        self.i += open.chars().count();
        let start = self.i;
        let mut depth = 0i32;
        while let Some(c) = self.peek() {
            match c {
                '(' => depth += 1,
                ')' => {
                    if depth == 0 {
                        if self.starts_with(close) {
                            let raw: String = self.s[start..self.i].iter().collect();
                            self.i += close.chars().count();
                            return Some(raw);
                        }
                        break;
                    }
                    depth -= 1;
                }
                '\n' if open == "((" => {}
                _ => {}
            }
            self.i += 1;
        }
        self.i = save;
        None
    }

    fn parse_redirs(&mut self) -> Result<Vec<Redir>, ParseError> {
        let mut v = Vec::new();
        loop {
            self.skip_blank();
            match self.try_redir()? {
                Some(r) => v.push(r),
                None => break,
            }
        }
        Ok(v)
    }

    /// A redirection at the current position, with its fd prefix.
    fn try_redir(&mut self) -> Result<Option<Redir>, ParseError> {
        let save = self.i;
        let mut fd = None;
        let mut fd_var = None;
        // N>  or {var}>
        let mut j = self.i;
        while self.s.get(j).is_some_and(|c| c.is_ascii_digit()) {
            j += 1;
        }
        if j > self.i && matches!(self.s.get(j), Some('<' | '>')) {
            let n: String = self.s[self.i..j].iter().collect();
            fd = n.parse::<u32>().ok();
            if fd.is_none() {
                return Err(self.err("bad fd number"));
            }
            self.i = j;
        } else if self.peek() == Some('{') {
            let mut k = self.i + 1;
            while self.s.get(k).is_some_and(|c| is_name_char(*c)) {
                k += 1;
            }
            if k > self.i + 1
                && self.s.get(k) == Some(&'}')
                && matches!(self.s.get(k + 1), Some('<' | '>'))
            {
                fd_var = Some(self.s[self.i + 1..k].iter().collect());
                self.i = k + 1;
            }
        }
        let op = if self.starts_with("&>>") {
            self.i += 3;
            RedirOp::AppendErr
        } else if self.starts_with("&>") {
            self.i += 2;
            RedirOp::OutErr
        } else if self.starts_with("<<<") {
            self.i += 3;
            RedirOp::HereString
        } else if self.starts_with("<<") && !self.starts_with("<<(") {
            self.i += 2;
            RedirOp::HereDoc
        } else if self.starts_with("<>") {
            self.i += 2;
            RedirOp::ReadWrite
        } else if self.starts_with(">>") {
            self.i += 2;
            RedirOp::Append
        } else if self.starts_with(">|") {
            self.i += 2;
            RedirOp::Clobber
        } else if self.starts_with(">&") || self.starts_with("<&") {
            self.i += 2;
            RedirOp::Dup
        } else if self.peek() == Some('>') && self.peek_at(1) != Some('(') {
            self.i += 1;
            RedirOp::Out
        } else if self.peek() == Some('<') && self.peek_at(1) != Some('(') {
            self.i += 1;
            RedirOp::In
        } else {
            self.i = save;
            return Ok(None);
        };
        let mut op = op;
        if op == RedirOp::HereDoc {
            let strip_tabs = if self.peek() == Some('-') {
                self.i += 1;
                true
            } else {
                false
            };
            self.skip_blank();
            let target = self.read_word()?;
            let quoted = target.is_quoted();
            let delim = target
                .literal()
                .unwrap_or_else(|| target.raw.replace(['\'', '"', '\\'], ""));
            let index = self.heredocs.len();
            self.heredocs.push(String::new());
            self.pending.push(Pending {
                delim,
                strip_tabs,
                index,
            });
            return Ok(Some(Redir {
                fd,
                fd_var,
                op,
                target,
                heredoc: None,
                heredoc_index: Some(index),
                heredoc_quoted: quoted,
            }));
        }
        self.skip_blank();
        if op == RedirOp::Dup && self.peek() == Some('-') && self.peek_at(1).is_none_or(is_meta) {
            self.i += 1;
            let target = Word {
                parts: vec![WordPart::Lit {
                    text: "-".into(),
                    quoted: false,
                }],
                raw: "-".into(),
            };
            return Ok(Some(Redir {
                fd,
                fd_var,
                op,
                target,
                heredoc: None,
                heredoc_index: None,
                heredoc_quoted: false,
            }));
        }
        match self.peek() {
            None => return Err(self.err("a redirection target is missing")),
            Some(c) if is_meta(c) && !(c == '<' || c == '>') => {
                return Err(self.err("a redirection target is missing"));
            }
            Some('<' | '>') if self.peek_at(1) != Some('(') => {
                return Err(self.err("a redirection target is missing"));
            }
            _ => {}
        }
        let target = self.read_word()?;
        if op == RedirOp::Dup {
            // `>&file` (not a number) is `&>file`.
            let lit = target.literal().unwrap_or_default();
            let is_fd = !lit.is_empty()
                && lit
                    .trim_end_matches('-')
                    .chars()
                    .all(|c| c.is_ascii_digit());
            if !is_fd
                && !target
                    .parts
                    .iter()
                    .any(|p| matches!(p, WordPart::Var { .. } | WordPart::Param { .. }))
            {
                let was_input = self.s.get(save..self.i).is_some_and(|s| s.contains(&'<'));
                if !was_input {
                    op = RedirOp::OutErr;
                }
            }
        }
        Ok(Some(Redir {
            fd,
            fd_var,
            op,
            target,
            heredoc: None,
            heredoc_index: None,
            heredoc_quoted: false,
        }))
    }

    fn parse_simple(&mut self) -> Result<Command, ParseError> {
        let mut sc = SimpleCommand::default();
        loop {
            self.skip_blank();
            if let Some(r) = self.try_redir()? {
                sc.redirs.push(r);
                continue;
            }
            match self.peek() {
                None => break,
                Some(c) if is_meta(c) => {
                    // process substitution starts a word
                    if (c == '<' || c == '>') && self.peek_at(1) == Some('(') {
                        sc.words.push(self.read_word()?);
                        continue;
                    }
                    if c == '(' && sc.words.is_empty() && !sc.assigns.is_empty() {
                        // `arr=(a b)` handled in read_assign; a bare `(` here is an error
                        return Err(self.err("unexpected '('"));
                    }
                    break;
                }
                Some(_) => {
                    if sc.words.is_empty() {
                        if let Some(a) = self.try_assign()? {
                            sc.assigns.push(a);
                            continue;
                        }
                    }
                    let w = self.read_word()?;
                    sc.words.push(w);
                }
            }
        }
        if sc.words.is_empty() && sc.assigns.is_empty() && sc.redirs.is_empty() {
            return Err(self.err("a command is missing"));
        }
        Ok(Command::Simple(sc))
    }

    /// `name=value`, `name+=value`, `name=(a b)` (arrays become one word of the inside).
    fn try_assign(&mut self) -> Result<Option<Assign>, ParseError> {
        let save = self.i;
        let Some(name) = self.read_name() else {
            return Ok(None);
        };
        // name[idx]=
        if self.peek() == Some('[') {
            let mut depth = 0;
            while let Some(c) = self.peek() {
                self.i += 1;
                if c == '[' {
                    depth += 1;
                } else if c == ']' {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                } else if c == '\n' {
                    break;
                }
            }
        }
        let append = if self.starts_with("+=") {
            self.i += 2;
            true
        } else if self.peek() == Some('=') {
            self.i += 1;
            false
        } else {
            self.i = save;
            return Ok(None);
        };
        if self.peek() == Some('(') {
            // array: read words up to the matching ')'
            self.i += 1;
            let start = self.i;
            let mut parts = Vec::new();
            loop {
                self.skip_space_nl();
                match self.peek() {
                    None => return Err(self.err("')' is missing")),
                    Some(')') => {
                        self.i += 1;
                        break;
                    }
                    Some(c) if is_meta(c) => return Err(self.err("unexpected token in array")),
                    _ => {
                        let w = self.read_word()?;
                        if !parts.is_empty() {
                            parts.push(WordPart::Lit {
                                text: " ".into(),
                                quoted: true,
                            });
                        }
                        parts.extend(w.parts);
                    }
                }
            }
            let raw: String = self.s[start..self.i.saturating_sub(1)].iter().collect();
            return Ok(Some(Assign {
                name,
                append,
                value: Word { parts, raw },
            }));
        }
        let value = match self.peek() {
            None => Word::default(),
            Some(c) if is_meta(c) && !((c == '<' || c == '>') && self.peek_at(1) == Some('(')) => {
                Word::default()
            }
            _ => self.read_word_opts(true)?,
        };
        Ok(Some(Assign {
            name,
            append,
            value,
        }))
    }

    fn read_word(&mut self) -> Result<Word, ParseError> {
        self.read_word_opts(false)
    }

    /// Read one word up to an unquoted metacharacter.
    fn read_word_opts(&mut self, assign_value: bool) -> Result<Word, ParseError> {
        let start = self.i;
        let mut parts: Vec<WordPart> = Vec::new();
        let mut lit = String::new();
        let mut lit_quoted = false;
        fn flush(parts: &mut Vec<WordPart>, lit: &mut String, quoted: bool) {
            if !lit.is_empty() {
                parts.push(WordPart::Lit {
                    text: std::mem::take(lit),
                    quoted,
                });
            }
        }
        macro_rules! push_lit {
            ($text:expr, $quoted:expr) => {{
                let q: bool = $quoted;
                if q != lit_quoted {
                    flush(&mut parts, &mut lit, lit_quoted);
                    lit_quoted = q;
                }
                lit.push_str($text);
            }};
        }
        // tilde at the start
        if self.peek() == Some('~') {
            self.i += 1;
            let ts = self.i;
            while self
                .peek()
                .is_some_and(|c| is_name_char(c) || c == '-' || c == '.' || c == '+')
            {
                self.i += 1;
            }
            if self
                .peek()
                .is_none_or(|c| c == '/' || is_meta(c) || (assign_value && c == ':'))
            {
                parts.push(WordPart::Tilde(self.s[ts..self.i].iter().collect()));
            } else {
                self.i = ts - 1;
            }
        }
        let mut brace_depth = 0u32;
        while let Some(c) = self.peek() {
            if is_meta(c) {
                if (c == '<' || c == '>') && self.peek_at(1) == Some('(') {
                    let output = c == '>';
                    self.i += 2;
                    flush(&mut parts, &mut lit, lit_quoted);
                    let script = self.parse_sub_until_paren()?;
                    parts.push(WordPart::ProcessSub {
                        output,
                        script: Box::new(script),
                    });
                    continue;
                }
                break;
            }
            match c {
                '\\' => {
                    self.i += 1;
                    match self.peek() {
                        None => push_lit!("\\", false),
                        Some('\n') => self.i += 1,
                        Some(n) => {
                            self.i += 1;
                            push_lit!(&n.to_string(), true);
                        }
                    }
                }
                '\'' => {
                    self.i += 1;
                    let s0 = self.i;
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.i += 1;
                    }
                    if self.peek().is_none() {
                        return Err(self.err("a closing ' is missing"));
                    }
                    let t: String = self.s[s0..self.i].iter().collect();
                    self.i += 1;
                    push_lit!(&t, true);
                    if t.is_empty() {
                        flush(&mut parts, &mut lit, lit_quoted);
                        parts.push(WordPart::Lit {
                            text: String::new(),
                            quoted: true,
                        });
                    }
                }
                '"' => {
                    self.i += 1;
                    flush(&mut parts, &mut lit, lit_quoted);
                    let before = parts.len();
                    self.read_double_quoted(&mut parts)?;
                    if parts.len() == before {
                        parts.push(WordPart::Lit {
                            text: String::new(),
                            quoted: true,
                        });
                    }
                }
                '`' => {
                    self.i += 1;
                    flush(&mut parts, &mut lit, lit_quoted);
                    parts.push(self.read_backtick()?);
                }
                '$' => {
                    flush(&mut parts, &mut lit, lit_quoted);
                    if self.peek_at(1) == Some('\'') {
                        self.i += 2;
                        let t = self.read_ansi_c()?;
                        parts.push(WordPart::Lit {
                            text: t,
                            quoted: true,
                        });
                    } else if self.peek_at(1) == Some('"') {
                        // $"..." locale string: as "..."
                        self.i += 2;
                        self.read_double_quoted(&mut parts)?;
                    } else {
                        parts.push(self.read_dollar(false)?);
                    }
                }
                '{' => {
                    brace_depth += 1;
                    self.i += 1;
                    push_lit!("{", false);
                }
                '}' => {
                    brace_depth = brace_depth.saturating_sub(1);
                    self.i += 1;
                    push_lit!("}", false);
                }
                '=' | ':' if assign_value && self.peek_at(1) == Some('~') => {
                    self.i += 2;
                    push_lit!(&c.to_string(), false);
                    flush(&mut parts, &mut lit, lit_quoted);
                    let ts = self.i;
                    while self
                        .peek()
                        .is_some_and(|c| is_name_char(c) || c == '-' || c == '.')
                    {
                        self.i += 1;
                    }
                    parts.push(WordPart::Tilde(self.s[ts..self.i].iter().collect()));
                }
                _ => {
                    self.i += 1;
                    push_lit!(&c.to_string(), false);
                }
            }
        }
        let _ = brace_depth;
        flush(&mut parts, &mut lit, lit_quoted);
        if self.i == start {
            return Err(self.err("a word is missing"));
        }
        let raw: String = self.s[start..self.i].iter().collect();
        Ok(Word { parts, raw })
    }

    fn read_double_quoted(&mut self, parts: &mut Vec<WordPart>) -> Result<(), ParseError> {
        let mut lit = String::new();
        loop {
            match self.peek() {
                None => return Err(self.err("a closing \" is missing")),
                Some('"') => {
                    self.i += 1;
                    break;
                }
                Some('\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(n @ ('$' | '`' | '"' | '\\')) => {
                            self.i += 1;
                            lit.push(n);
                        }
                        Some('\n') => self.i += 1,
                        _ => lit.push('\\'),
                    }
                }
                Some('$') if self.peek_at(1).is_some_and(|c| c != '"') => {
                    if !lit.is_empty() {
                        parts.push(WordPart::Lit {
                            text: std::mem::take(&mut lit),
                            quoted: true,
                        });
                    }
                    parts.push(self.read_dollar(true)?);
                }
                Some('`') => {
                    self.i += 1;
                    if !lit.is_empty() {
                        parts.push(WordPart::Lit {
                            text: std::mem::take(&mut lit),
                            quoted: true,
                        });
                    }
                    parts.push(self.read_backtick()?);
                }
                Some(c) => {
                    self.i += 1;
                    lit.push(c);
                }
            }
        }
        if !lit.is_empty() {
            parts.push(WordPart::Lit {
                text: lit,
                quoted: true,
            });
        }
        Ok(())
    }

    fn read_ansi_c(&mut self) -> Result<String, ParseError> {
        let mut t = String::new();
        loop {
            match self.peek() {
                None => return Err(self.err("a closing ' is missing")),
                Some('\'') => {
                    self.i += 1;
                    return Ok(t);
                }
                Some('\\') => {
                    self.i += 1;
                    let Some(n) = self.peek() else {
                        return Err(self.err("a closing ' is missing"));
                    };
                    self.i += 1;
                    t.push(match n {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'e' | 'E' => '\u{1b}',
                        'a' => '\u{7}',
                        '0' => '\0',
                        other => other,
                    });
                }
                Some(c) => {
                    self.i += 1;
                    t.push(c);
                }
            }
        }
    }

    /// `$...` at the current position (`$` not yet consumed).
    fn read_dollar(&mut self, quoted: bool) -> Result<WordPart, ParseError> {
        self.i += 1; // $
        match self.peek() {
            Some('(') => {
                if self.peek_at(1) == Some('(') {
                    self.i -= 1;
                    let save = self.i;
                    self.i += 1;
                    if let Some(raw) = self.try_arith("((", "))") {
                        return Ok(WordPart::Arith(raw));
                    }
                    self.i = save + 1;
                }
                self.i += 1;
                let script = self.parse_sub_until_paren()?;
                Ok(WordPart::CommandSub(Box::new(script)))
            }
            Some('{') => {
                self.i += 1;
                let start = self.i;
                let mut depth = 1u32;
                while let Some(c) = self.peek() {
                    match c {
                        '\\' => self.i += 1,
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        '\'' if !quoted => {
                            self.i += 1;
                            while self.peek().is_some_and(|c| c != '\'') {
                                self.i += 1;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                if self.peek() != Some('}') {
                    return Err(self.err("a closing } is missing"));
                }
                let raw: String = self.s[start..self.i.min(self.s.len())].iter().collect();
                self.i += 1;
                let simple =
                    raw.chars().next().is_some_and(is_name_start) && raw.chars().all(is_name_char);
                if simple {
                    Ok(WordPart::Var { name: raw, quoted })
                } else {
                    Ok(WordPart::Param { raw, quoted })
                }
            }
            Some(c) if is_name_start(c) => {
                let name = self.read_name().unwrap_or_default();
                Ok(WordPart::Var { name, quoted })
            }
            Some(c)
                if c.is_ascii_digit() || matches!(c, '@' | '*' | '#' | '?' | '-' | '$' | '!') =>
            {
                self.i += 1;
                Ok(WordPart::Var {
                    name: c.to_string(),
                    quoted,
                })
            }
            _ => Ok(WordPart::Lit {
                text: "$".into(),
                quoted,
            }),
        }
    }

    /// The inside of `$(`/`<(`/`>(` up to its `)`, as a script.
    fn parse_sub_until_paren(&mut self) -> Result<Script, ParseError> {
        self.enter()?;
        let outer_pending = std::mem::take(&mut self.pending);
        let list = self.parse_list(&[], Stop::Paren);
        let list = match list {
            Ok(l) => l,
            Err(e) => {
                self.leave();
                return Err(e);
            }
        };
        self.skip_space_nl();
        if self.peek() != Some(')') {
            self.leave();
            return Err(self.err("')' is missing"));
        }
        self.i += 1;
        self.pending = outer_pending;
        self.leave();
        // the bodies stay in the outer table until the line's end fills them in
        Ok(Script {
            list,
            heredocs: Vec::new(),
        })
    }

    /// The inside of backticks (the opening one consumed), parsed as its own script.
    fn read_backtick(&mut self) -> Result<WordPart, ParseError> {
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => return Err(self.err("a closing ` is missing")),
                Some('`') => {
                    self.i += 1;
                    break;
                }
                Some('\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(n @ ('`' | '\\' | '$')) => {
                            self.i += 1;
                            inner.push(n);
                        }
                        _ => inner.push('\\'),
                    }
                }
                Some(c) => {
                    self.i += 1;
                    inner.push(c);
                }
            }
        }
        if self.depth + 1 > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        let mut p = Parser::new(&inner, self.depth + 1);
        let list = p.parse_list(&[], Stop::Eof).map_err(|e| ParseError {
            pos: self.i,
            msg: e.msg,
        })?;
        p.skip_space_nl();
        if p.i < p.s.len() {
            return Err(self.err("unexpected token in backticks"));
        }
        if !p.pending.is_empty() {
            p.read_heredoc_bodies();
        }
        let mut list = list;
        fill_heredocs(&mut list, &p.heredocs);
        Ok(WordPart::CommandSub(Box::new(Script {
            list,
            heredocs: p.heredocs,
        })))
    }
}

/// Move each heredoc body from the parser's table into its redirection.
fn fill_heredocs(list: &mut List, table: &[String]) {
    fn redirs(rs: &mut [Redir], table: &[String]) {
        for r in rs {
            if let Some(i) = r.heredoc_index.take() {
                r.heredoc = Some(table.get(i).cloned().unwrap_or_default());
            }
            word(&mut r.target, table);
        }
    }
    fn word(w: &mut Word, table: &[String]) {
        for p in &mut w.parts {
            match p {
                WordPart::CommandSub(s) => fill_heredocs(&mut s.list, table),
                WordPart::ProcessSub { script, .. } => fill_heredocs(&mut script.list, table),
                _ => {}
            }
        }
    }
    fn cmd(c: &mut Command, table: &[String]) {
        match c {
            Command::Simple(sc) => {
                redirs(&mut sc.redirs, table);
                sc.words.iter_mut().for_each(|w| word(w, table));
                sc.assigns
                    .iter_mut()
                    .for_each(|a| word(&mut a.value, table));
            }
            Command::Subshell(l, r) | Command::Group(l, r) => {
                fill_heredocs(l, table);
                redirs(r, table);
            }
            Command::If(ls, r) => {
                ls.iter_mut().for_each(|l| fill_heredocs(l, table));
                redirs(r, table);
            }
            Command::While {
                cond,
                body,
                redirs: r,
                ..
            } => {
                fill_heredocs(cond, table);
                fill_heredocs(body, table);
                redirs(r, table);
            }
            Command::For {
                words,
                body,
                redirs: r,
                ..
            } => {
                if let Some(ws) = words {
                    ws.iter_mut().for_each(|w| word(w, table));
                }
                fill_heredocs(body, table);
                redirs(r, table);
            }
            Command::ArithFor {
                body, redirs: r, ..
            } => {
                fill_heredocs(body, table);
                redirs(r, table);
            }
            Command::Case {
                word: w,
                arms,
                redirs: r,
            } => {
                word(w, table);
                arms.iter_mut().for_each(|(_, l)| fill_heredocs(l, table));
                redirs(r, table);
            }
            Command::Arith(_, r) => redirs(r, table),
            Command::Cond(ws, r) => {
                ws.iter_mut().for_each(|w| word(w, table));
                redirs(r, table);
            }
            Command::Function { body, .. } => cmd(body, table),
        }
    }
    for ao in &mut list.items {
        for c in &mut ao.first.commands {
            cmd(c, table);
        }
        for (_, p) in &mut ao.rest {
            for c in &mut p.commands {
                cmd(c, table);
            }
        }
    }
}

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
