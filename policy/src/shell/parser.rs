//! The reader of lists, pipelines and compound commands; [`parse`] reads a whole line.

use super::ast::*;
use super::{MAX_DEPTH, MAX_LEN, ParseError};

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
pub(super) enum Stop {
    Eof,
    /// `)` ends the list (subshell, `$(`, process substitution, case pattern).
    Paren,
    /// `;;` / `;&` / `;;&` or `esac` end it (case arm).
    CaseArm,
}

pub(super) struct Pending {
    pub(super) delim: String,
    pub(super) strip_tabs: bool,
    pub(super) index: usize,
}

pub(super) struct Parser {
    pub(super) s: Vec<char>,
    pub(super) i: usize,
    pub(super) depth: u32,
    pub(super) heredocs: Vec<String>,
    pub(super) pending: Vec<Pending>,
}

pub(super) const RESERVED_STOPS: &[&str] = &[
    "then", "else", "elif", "fi", "do", "done", "esac", "}", "in",
];

pub(super) fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

pub(super) fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(super) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Parser {
    pub(super) fn new(input: &str, depth: u32) -> Self {
        Parser {
            s: input.chars().collect(),
            i: 0,
            depth,
            heredocs: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub(super) fn err(&self, msg: &'static str) -> ParseError {
        ParseError { pos: self.i, msg }
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    pub(super) fn peek_at(&self, n: usize) -> Option<char> {
        self.s.get(self.i + n).copied()
    }

    pub(super) fn starts_with(&self, pat: &str) -> bool {
        pat.chars()
            .enumerate()
            .all(|(k, c)| self.s.get(self.i + k) == Some(&c))
    }

    pub(super) fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(self.err("nested too deeply"))
        } else {
            Ok(())
        }
    }

    pub(super) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Skip blanks, line continuations and a comment (not newlines).
    pub(super) fn skip_blank(&mut self) {
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

    pub(super) fn newline(&mut self) -> bool {
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

    pub(super) fn skip_space_nl(&mut self) {
        loop {
            self.skip_blank();
            if !self.newline() {
                break;
            }
        }
    }

    /// Read the heredoc bodies pending at a newline.
    pub(super) fn read_heredoc_bodies(&mut self) {
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
    pub(super) fn at_reserved(&self, w: &str) -> bool {
        if !self.starts_with(w) {
            return false;
        }
        match self.s.get(self.i + w.chars().count()) {
            None => true,
            Some(&c) => is_meta(c) || (w == "}" && c == '}') || c == '\r',
        }
    }

    pub(super) fn eat_reserved(&mut self, w: &str) -> bool {
        if self.at_reserved(w) {
            self.i += w.chars().count();
            true
        } else {
            false
        }
    }

    pub(super) fn expect_reserved(&mut self, w: &str, msg: &'static str) -> Result<(), ParseError> {
        self.skip_space_nl();
        if self.eat_reserved(w) {
            Ok(())
        } else {
            Err(self.err(msg))
        }
    }

    pub(super) fn at_list_end(&self, stops: &[&str], stop: Stop) -> bool {
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

    pub(super) fn parse_list(&mut self, stops: &[&str], stop: Stop) -> Result<List, ParseError> {
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

    pub(super) fn parse_and_or(&mut self, stops: &[&str], stop: Stop) -> Result<AndOr, ParseError> {
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

    pub(super) fn parse_pipeline(
        &mut self,
        stops: &[&str],
        stop: Stop,
    ) -> Result<Pipeline, ParseError> {
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

    pub(super) fn parse_command(
        &mut self,
        stops: &[&str],
        stop: Stop,
    ) -> Result<Command, ParseError> {
        self.enter()?;
        let r = self.parse_command_inner(stops, stop);
        self.leave();
        r
    }

    pub(super) fn parse_command_inner(
        &mut self,
        stops: &[&str],
        stop: Stop,
    ) -> Result<Command, ParseError> {
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
    pub(super) fn parse_nonempty(&mut self, stops: &[&str]) -> Result<List, ParseError> {
        let l = self.parse_list(stops, Stop::Eof)?;
        if l.items.is_empty() {
            return Err(self.err("a command is missing"));
        }
        Ok(l)
    }

    pub(super) fn parse_do_done(&mut self) -> Result<List, ParseError> {
        self.expect_reserved("do", "'do' is missing")?;
        let body = self.parse_nonempty(&["done"])?;
        self.expect_reserved("done", "'done' is missing")?;
        Ok(body)
    }

    pub(super) fn parse_do_done_or_group(&mut self) -> Result<List, ParseError> {
        self.skip_space_nl();
        if self.eat_reserved("{") {
            let body = self.parse_list(&["}"], Stop::Eof)?;
            self.expect_reserved("}", "'}' is missing")?;
            return Ok(body);
        }
        self.parse_do_done()
    }

    pub(super) fn read_name(&mut self) -> Option<String> {
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
    pub(super) fn read_func_name(&mut self) -> Option<String> {
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
    pub(super) fn try_arith(&mut self, open: &str, close: &str) -> Option<String> {
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
}

/// Move each heredoc body from the parser's table into its redirection.
pub(super) fn fill_heredocs(list: &mut List, table: &[String]) {
    pub(super) fn redirs(rs: &mut [Redir], table: &[String]) {
        for r in rs {
            if let Some(i) = r.heredoc_index.take() {
                r.heredoc = Some(table.get(i).cloned().unwrap_or_default());
            }
            word(&mut r.target, table);
        }
    }
    pub(super) fn word(w: &mut Word, table: &[String]) {
        for p in &mut w.parts {
            match p {
                WordPart::CommandSub(s) => fill_heredocs(&mut s.list, table),
                WordPart::ProcessSub { script, .. } => fill_heredocs(&mut script.list, table),
                _ => {}
            }
        }
    }
    pub(super) fn cmd(c: &mut Command, table: &[String]) {
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
