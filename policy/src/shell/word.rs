//! The reader of words, quotes, substitutions and redirections.

use super::ast::*;
use super::parser::*;
use super::{MAX_DEPTH, ParseError};

impl Parser {
    pub(super) fn parse_redirs(&mut self) -> Result<Vec<Redir>, ParseError> {
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
    pub(super) fn try_redir(&mut self) -> Result<Option<Redir>, ParseError> {
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

    pub(super) fn parse_simple(&mut self) -> Result<Command, ParseError> {
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
    pub(super) fn try_assign(&mut self) -> Result<Option<Assign>, ParseError> {
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

    pub(super) fn read_word(&mut self) -> Result<Word, ParseError> {
        self.read_word_opts(false)
    }

    /// Read one word up to an unquoted metacharacter.
    pub(super) fn read_word_opts(&mut self, assign_value: bool) -> Result<Word, ParseError> {
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

    pub(super) fn read_double_quoted(
        &mut self,
        parts: &mut Vec<WordPart>,
    ) -> Result<(), ParseError> {
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

    pub(super) fn read_ansi_c(&mut self) -> Result<String, ParseError> {
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
    pub(super) fn read_dollar(&mut self, quoted: bool) -> Result<WordPart, ParseError> {
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
    pub(super) fn parse_sub_until_paren(&mut self) -> Result<Script, ParseError> {
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
    pub(super) fn read_backtick(&mut self) -> Result<WordPart, ParseError> {
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
