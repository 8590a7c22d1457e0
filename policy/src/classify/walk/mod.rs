//! The walker: finds the exits of a parsed line, command by command.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use efr_sandbox_wire::{ExitKind, Grant, HostFact, Needs, Target, TargetClass, TargetOp};

use super::paths::{classify_path, display, is_disk_device, is_harmless_device};
use super::{ClassifyRequest, Finding, Floor, WalkOut, git};
use crate::context::Context;
use crate::knowledge::{ArgRole, HostArgs, Knowledge, Wrapper, WriteOp};
use crate::path::normalize;
use crate::url::{url_host, url_host_port};
mod credentials;
mod dispatch;
mod network;
mod registry;
mod signals;
mod vcs;
mod wrappers;
mod writes;

use crate::shell::{self, Command, List, Pipeline, Redir, RedirOp, SimpleCommand, Word, WordPart};

/// The most commands the walker reads in one line (eval and sh -c strings included).
const MAX_STEPS: u32 = 20_000;
/// The deepest wrapping (sudo env nice sh -c ...) followed.
const MAX_WRAP: u32 = 24;
/// The most bytes of strings (eval, sh -c, trap) the walker parses again in one line: each
/// level of `eval eval ...` parses the rest once more, so depth alone does not bound time.
const MAX_REPARSE: usize = 64 * 1024;

pub(crate) fn walk_line(req: &ClassifyRequest, ctx: &Context) -> WalkOut {
    let roots: Vec<PathBuf> = req
        .project_roots
        .iter()
        .filter(|r| r.is_absolute())
        .map(|r| normalize(r))
        .collect();
    let granted_writes = match &req.granted {
        Some(efr_sandbox_wire::Launch::Contained { grants }) => grants
            .iter()
            .filter_map(|g| match g {
                Grant::Write { path } => Some(normalize(Path::new(path))),
                // Only a write grant makes a path writable.
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let cwd = req
        .cwd
        .as_ref()
        .filter(|c| c.is_absolute())
        .map(|c| normalize(c));
    let mut out = WalkOut {
        roots: roots.clone(),
        ..WalkOut::default()
    };
    let script = match shell::parse(&req.line) {
        Ok(s) => s,
        Err(e) => {
            out.parse_error = Some(e.to_string());
            return out;
        }
    };
    let mut w = Walker {
        ctx,
        roots,
        granted_writes,
        findings: Vec::new(),
        opaque: Vec::new(),
        functions: HashSet::new(),
        names: Vec::new(),
        has_wait: shell::simple_commands(&script.list).iter().any(|c| {
            c.words
                .first()
                .and_then(|w| w.literal())
                .is_some_and(|n| n == "wait")
        }),
        own_pids: HashSet::new(),
        wrap: 0,
        steps: 0,
        downloaded: Vec::new(),
        notes: Vec::new(),
        reparsed: 0,
        k: ctx.knowledge_or_empty(),
    };
    if let Err(e) = ctx.knowledge() {
        // Not "safe": without the knowledge efr cannot say what any command does.
        w.note_opaque(format!("efr cannot read any command of this line: {e}"));
    }
    let mut env = Env {
        vars: HashMap::new(),
        cwd,
    };
    w.walk_list(&script.list, &mut env, Pc::default());
    w.finish_notes();
    out.findings = w.findings;
    out.opaque = w.opaque;
    out.notes = w.notes;
    out
}

#[derive(Debug, Clone)]
pub(super) struct Env {
    /// Variables set on the line: `None` when the value is not known.
    pub(super) vars: HashMap<String, Option<String>>,
    pub(super) cwd: Option<PathBuf>,
}

/// The pipe and job context of a command.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pc {
    pub(super) background: bool,
    /// The job outlives the line (nohup in a `&` job, setsid, ...); a plain `&` job does not.
    pub(super) lasting: bool,
    /// stdin comes from a download (curl ... |).
    pub(super) stdin_download: bool,
    /// stdin comes from a pipe.
    pub(super) stdin_piped: bool,
}

/// A word after expansion.
#[derive(Debug, Clone, Default)]
pub(super) struct Arg {
    /// The text; unknown parts are kept as written (`$X`).
    pub(super) text: String,
    pub(super) raw: String,
    pub(super) known: bool,
    /// The text before the first unknown part.
    pub(super) prefix: String,
    pub(super) glob: bool,
    /// It holds the output of a download (`$(curl ...)`, `<(curl ...)`).
    pub(super) download: bool,
}

impl Arg {
    pub(super) fn lit(s: &str) -> Arg {
        Arg {
            text: s.into(),
            raw: s.into(),
            known: true,
            prefix: s.into(),
            ..Arg::default()
        }
    }
}

/// The simple command a finding comes from.
#[derive(Debug, Clone)]
pub(super) struct Cmd {
    pub(super) display: String,
    pub(super) words: Vec<String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) background: bool,
}

pub(super) struct Walker<'a> {
    pub(super) ctx: &'a Context,
    pub(super) roots: Vec<PathBuf>,
    pub(super) granted_writes: Vec<PathBuf>,
    pub(super) findings: Vec<Finding>,
    pub(super) opaque: Vec<String>,
    pub(super) functions: HashSet<String>,
    /// Names of the commands the line itself runs (its own processes).
    pub(super) names: Vec<String>,
    pub(super) has_wait: bool,
    /// Variables that hold a pid of the line's own (`pid=$!`).
    pub(super) own_pids: HashSet<String>,
    pub(super) wrap: u32,
    pub(super) steps: u32,
    /// Files the line downloaded (`curl -o f`), by absolute path (later.rs).
    pub(super) downloaded: Vec<PathBuf>,
    /// What the line does that is no exit but that the record says (lasting.rs).
    pub(super) notes: Vec<String>,
    /// Bytes of strings parsed again so far (MAX_REPARSE).
    pub(super) reparsed: usize,
    pub(super) k: &'a Knowledge,
}

pub(super) fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

pub(super) fn is_opt(s: &str) -> bool {
    s.len() > 1 && s.starts_with('-')
}

fn join_display(args: &[Arg]) -> String {
    args.iter()
        .map(|a| a.raw.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `[user@]host:path` (scp, rsync): the host, or None for a local path.
fn remote_host(s: &str) -> Option<String> {
    if s.starts_with('/') || s.starts_with('.') || s.starts_with('~') {
        return None;
    }
    if s.contains("://") {
        return url_host(s, false).map(|h| h.0);
    }
    let (before, _) = s.split_once(':')?;
    if before.contains('/') || before.is_empty() {
        return None;
    }
    let host = before.rsplit('@').next().unwrap_or(before);
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

impl Walker<'_> {
    pub(super) fn note_opaque(&mut self, why: String) {
        if !self.opaque.contains(&why) && self.opaque.len() < 16 {
            self.opaque.push(why);
        }
    }

    pub(super) fn push(&mut self, f: Finding) {
        if self.findings.len() < 256 {
            self.findings.push(f);
        }
    }

    pub(super) fn finding(&self, kind: ExitKind, summary: String, cmd: &Cmd) -> Finding {
        let mut f = Finding::new(kind, summary, &cmd.display, &cmd.words);
        f.cwd = cmd.cwd.clone();
        f.background = cmd.background;
        f
    }

    /// A finding whose summary is the command, quoted and shortened, then what it does:
    /// "`sudo apt install x` gains root".
    pub(super) fn said(&self, kind: ExitKind, what: &str, cmd: &Cmd) -> Finding {
        self.finding(kind, format!("`{}` {what}", short(&cmd.display)), cmd)
    }

    pub(super) fn floor(
        &mut self,
        name: &str,
        refuse: bool,
        summary: String,
        cmd: &Cmd,
        fill: impl FnOnce(&mut Finding),
    ) {
        if !self.ctx.floor_line(name) {
            return;
        }
        let reason = match name {
            "delete_home" => "deletes your home directory",
            "delete_root" => "deletes the root file system",
            "delete_project_root" => "deletes a project root",
            "device_write" => "dd or mkfs on a device wipes a disk",
            "chmod_home_recursive" => "chmod -R of the home breaks ssh, gpg and more",
            "download_to_shell" => "pipes a download into a shell",
            other => other,
        };
        let mut f = self.finding(ExitKind::Floor, summary, cmd);
        f.needs = Needs::Unsandboxed;
        f.floor = Some(Floor {
            reason: reason.into(),
            refuse,
        });
        fill(&mut f);
        self.push(f);
    }

    // ----------------------------------------------------------------------------------
    // Structure

    fn walk_list(&mut self, list: &List, env: &mut Env, pc: Pc) {
        for ao in &list.items {
            let bg = pc.background || ao.background;
            if ao.background && !self.has_wait && !pc.background {
                let display = ao
                    .pipelines()
                    .map(pipeline_display)
                    .collect::<Vec<_>>()
                    .join(" && ");
                self.line_job(&display);
            }
            // `a & b`: a runs in a subshell of its own
            let mut sub_env;
            let e: &mut Env = if ao.background {
                sub_env = env.clone();
                &mut sub_env
            } else {
                env
            };
            for p in ao.pipelines() {
                self.walk_pipeline(
                    p,
                    e,
                    Pc {
                        background: bg,
                        ..pc
                    },
                );
            }
        }
    }

    fn walk_pipeline(&mut self, p: &Pipeline, env: &mut Env, pc: Pc) {
        if p.commands.len() == 1 {
            self.walk_command(&p.commands[0], env, pc);
            return;
        }
        let mut download = false;
        for (i, c) in p.commands.iter().enumerate() {
            let mut e = env.clone();
            let pc2 = Pc {
                stdin_download: download || (i == 0 && pc.stdin_download),
                stdin_piped: i > 0 || pc.stdin_piped,
                ..pc
            };
            self.walk_command(c, &mut e, pc2);
            download = match c {
                Command::Simple(sc) => self.is_downloader(sc),
                _ => false,
            };
        }
    }

    fn is_downloader(&self, sc: &SimpleCommand) -> bool {
        let words: Vec<String> = sc
            .words
            .iter()
            .map(|w| w.literal().unwrap_or_else(|| w.raw.clone()))
            .collect();
        let mut i = 0;
        // through wrappers such as sudo, env, timeout
        while i < words.len() {
            let n = basename(&words[i]);
            if let Some(wi) = self.k.roles(n).wrapper {
                let w = &self.k.file.wrapper[wi];
                i += 1;
                while i < words.len()
                    && (is_opt(&words[i]) || (w.skip_assignments && words[i].contains('=')))
                {
                    if w.opts_with_arg.contains(&words[i]) {
                        i += 1;
                    }
                    i += 1;
                }
                i += w.skip_positional;
                continue;
            }
            break;
        }
        let Some(n) = words.get(i).map(|w| basename(w)) else {
            return false;
        };
        let rest = &words[i + 1..];
        match n {
            "curl" => !rest.iter().any(|a| {
                a == "-o"
                    || a == "-O"
                    || a.starts_with("--output")
                    || a == "--remote-name"
                    || (a.starts_with('-')
                        && !a.starts_with("--")
                        && (a.contains('o') || a.contains('O')))
            }),
            "wget" | "wget2" => rest.iter().enumerate().any(|(j, a)| {
                a.ends_with("O-")
                    || a == "--output-document=-"
                    || ((a == "-O" || a == "--output-document")
                        && rest.get(j + 1).is_some_and(|b| b == "-"))
            }),
            _ => self
                .k
                .file
                .network
                .iter()
                .any(|e| e.to_stdout.iter().any(|x| x == n)),
        }
    }

    fn walk_command(&mut self, c: &Command, env: &mut Env, pc: Pc) {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            self.note_opaque("the line is too long for efr to read to the end".into());
            return;
        }
        match c {
            Command::Simple(sc) => self.walk_simple(sc, env, pc),
            Command::Subshell(l, r) => {
                let mut e = env.clone();
                self.walk_list(l, &mut e, pc);
                self.walk_redirs(r, env, &cmd_of("( ... )", env, pc), None);
            }
            Command::Group(l, r) => {
                self.walk_list(l, env, pc);
                self.walk_redirs(r, env, &cmd_of("{ ... }", env, pc), None);
            }
            Command::If(ls, r) => {
                for l in ls {
                    self.walk_list(l, env, pc);
                }
                self.walk_redirs(r, env, &cmd_of("if ...", env, pc), None);
            }
            Command::While {
                cond, body, redirs, ..
            } => {
                self.walk_list(cond, env, pc);
                self.walk_list(body, env, pc);
                self.walk_redirs(redirs, env, &cmd_of("while ...", env, pc), None);
            }
            Command::For {
                var,
                words,
                body,
                redirs,
            } => {
                if let Some(ws) = words {
                    for w in ws {
                        self.expand(w, env);
                    }
                }
                env.vars.insert(var.clone(), None);
                self.walk_list(body, env, pc);
                self.walk_redirs(redirs, env, &cmd_of("for ...", env, pc), None);
            }
            Command::ArithFor { body, redirs, .. } => {
                self.walk_list(body, env, pc);
                self.walk_redirs(redirs, env, &cmd_of("for ...", env, pc), None);
            }
            Command::Case { word, arms, redirs } => {
                self.expand(word, env);
                for (_, l) in arms {
                    let mut e = env.clone();
                    self.walk_list(l, &mut e, pc);
                }
                self.walk_redirs(redirs, env, &cmd_of("case ...", env, pc), None);
            }
            Command::Arith(_, r) => self.walk_redirs(r, env, &cmd_of("((...))", env, pc), None),
            Command::Cond(ws, r) => {
                for w in ws {
                    self.expand(w, env);
                }
                self.walk_redirs(r, env, &cmd_of("[[ ... ]]", env, pc), None);
            }
            Command::Function { name, body } => {
                self.functions.insert(name.clone());
                let mut e = env.clone();
                self.walk_command(body, &mut e, pc);
            }
        }
    }

    fn walk_simple(&mut self, sc: &SimpleCommand, env: &mut Env, pc: Pc) {
        let mut cmd_env = env.clone();
        for a in &sc.assigns {
            if a.value.raw.contains("$!") {
                self.own_pids.insert(a.name.clone());
            }
            let v = self.expand(&a.value, env);
            let value = if v.known { Some(v.text) } else { None };
            let value = if a.append {
                match (env.vars.get(&a.name).cloned().flatten(), value) {
                    (Some(old), Some(new)) => Some(old + &new),
                    _ => None,
                }
            } else {
                value
            };
            if sc.words.is_empty() {
                env.vars.insert(a.name.clone(), value.clone());
            }
            cmd_env.vars.insert(a.name.clone(), value);
        }
        let args: Vec<Arg> = sc.words.iter().map(|w| self.expand(w, &cmd_env)).collect();
        let display = {
            let mut d = join_display(&args);
            for r in &sc.redirs {
                if !d.is_empty() {
                    d.push(' ');
                }
                d.push_str(&redir_display(r));
            }
            d
        };
        let cmd = Cmd {
            display,
            words: args.iter().map(|a| a.text.clone()).collect(),
            cwd: env.cwd.clone(),
            background: pc.background,
        };
        let stdin = sc.redirs.iter().rev().find_map(|r| {
            if r.op == RedirOp::HereDoc && r.fd.unwrap_or(0) == 0 {
                r.heredoc.clone()
            } else {
                None
            }
        });
        self.walk_redirs(&sc.redirs, &cmd_env, &cmd, None);
        if args.is_empty() {
            return;
        }
        self.record_download(&args, &sc.redirs, &cmd_env);
        // builtins that change the line's own state
        if let Some(name) = args[0].known.then(|| basename(&args[0].text).to_string()) {
            match name.as_str() {
                "cd" | "pushd" => {
                    let target = args.iter().skip(1).find(|a| !is_opt(&a.text));
                    env.cwd = match target {
                        None => Some(self.ctx.home.clone()),
                        Some(a) if a.known && a.text != "-" => self.resolve(a, env),
                        _ => None,
                    };
                    return;
                }
                "popd" => {
                    env.cwd = None;
                    return;
                }
                "export" | "declare" | "typeset" | "local" | "readonly" => {
                    for a in &args[1..] {
                        if let Some((n, v)) = a.text.split_once('=') {
                            if a.known {
                                env.vars.insert(n.to_string(), Some(v.to_string()));
                            } else {
                                env.vars.insert(n.to_string(), None);
                            }
                        }
                    }
                    return;
                }
                "read" | "mapfile" | "readarray" | "getopts" => {
                    for a in &args[1..] {
                        if !is_opt(&a.text) {
                            env.vars.insert(a.text.clone(), None);
                        }
                    }
                    return;
                }
                "unset" => {
                    for a in &args[1..] {
                        if !is_opt(&a.text) {
                            env.vars.insert(a.text.clone(), Some(String::new()));
                        }
                    }
                    return;
                }
                _ => {}
            }
        }
        self.dispatch(&args, &mut cmd_env, pc, stdin.as_deref(), &cmd);
    }

    fn walk_redirs(&mut self, redirs: &[Redir], env: &Env, cmd: &Cmd, _x: Option<()>) {
        for r in redirs {
            if matches!(r.op, RedirOp::Dup | RedirOp::HereDoc | RedirOp::HereString) {
                if r.op == RedirOp::HereString {
                    self.expand(&r.target, env);
                }
                continue;
            }
            let a = self.expand(&r.target, env);
            if r.op.writes() {
                self.touch(&a, TargetOp::Write, env, cmd, false);
            } else if r.op.reads() {
                self.touch(&a, TargetOp::Read, env, cmd, false);
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // Words

    fn lookup(&self, name: &str, env: &Env) -> Option<String> {
        if let Some(v) = env.vars.get(name) {
            return v.clone();
        }
        match name {
            "HOME" => Some(self.ctx.home.to_string_lossy().into_owned()),
            "PWD" => env.cwd.as_ref().map(|c| c.to_string_lossy().into_owned()),
            "SCRATCH" => self
                .ctx
                .scratch
                .as_ref()
                .map(|c| c.to_string_lossy().into_owned()),
            "XDG_RUNTIME_DIR" => self
                .ctx
                .runtime_dir
                .as_ref()
                .map(|c| c.to_string_lossy().into_owned()),
            "XDG_CONFIG_HOME" => Some(self.ctx.config_home.to_string_lossy().into_owned()),
            _ => None,
        }
    }

    fn expand(&mut self, w: &Word, env: &Env) -> Arg {
        let mut a = Arg {
            raw: w.raw.clone(),
            known: true,
            ..Arg::default()
        };
        let unknown = |a: &mut Arg, s: &str| {
            if a.known {
                a.prefix = a.text.clone();
            }
            a.known = false;
            a.text.push_str(s);
        };
        for p in &w.parts {
            match p {
                WordPart::Lit { text, quoted } => {
                    if !quoted && text.contains(['*', '?', '[']) {
                        a.glob = true;
                    }
                    a.text.push_str(text);
                }
                WordPart::Tilde(user) => {
                    if user.is_empty() {
                        a.text.push_str(&self.ctx.home.to_string_lossy());
                    } else {
                        unknown(&mut a, &format!("~{user}"));
                    }
                }
                WordPart::Var { name, .. } => match self.lookup(name, env) {
                    Some(v) => a.text.push_str(&v),
                    None => unknown(&mut a, &format!("${name}")),
                },
                WordPart::Param { raw, .. } => {
                    let name: String = raw
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    let rest = &raw[name.len()..];
                    let known = self.lookup(&name, env);
                    let default = rest
                        .strip_prefix(":-")
                        .or_else(|| rest.strip_prefix('-'))
                        .or_else(|| rest.strip_prefix(":="));
                    match (known, default) {
                        (Some(v), Some(_)) if !v.is_empty() => a.text.push_str(&v),
                        (None, Some(d))
                            if !env.vars.contains_key(&name)
                                && !d.contains(['$', '`'])
                                && name != "HOME" =>
                        {
                            // unset variable with a literal default: still unknown (it may be set
                            // in the environment), but keep the default visible
                            unknown(&mut a, &format!("${{{raw}}}"));
                        }
                        _ => unknown(&mut a, &format!("${{{raw}}}")),
                    }
                }
                WordPart::CommandSub(s) => {
                    if self.script_downloads(s) {
                        a.download = true;
                    }
                    let mut e = env.clone();
                    self.walk_list(&s.list, &mut e, Pc::default());
                    unknown(&mut a, "$(...)");
                }
                WordPart::ProcessSub { script, .. } => {
                    if self.script_downloads(script) {
                        a.download = true;
                    }
                    let mut e = env.clone();
                    self.walk_list(&script.list, &mut e, Pc::default());
                    a.text.push_str("/dev/fd/63");
                }
                WordPart::Arith(_) => unknown(&mut a, "$((...))"),
            }
        }
        if a.known {
            a.prefix = a.text.clone();
        }
        a
    }

    fn script_downloads(&self, s: &shell::Script) -> bool {
        s.list.items.iter().any(|ao| {
            ao.pipelines().any(|p| match p.commands.last() {
                Some(Command::Simple(sc)) => self.is_downloader(sc),
                _ => false,
            })
        })
    }

    /// The absolute path of a known argument.
    pub(super) fn resolve(&self, a: &Arg, env: &Env) -> Option<PathBuf> {
        let text = if a.known {
            a.text.as_str()
        } else {
            return None;
        };
        if text.is_empty() {
            return None;
        }
        let p = Path::new(text);
        if p.is_absolute() {
            Some(normalize(p))
        } else {
            env.cwd.as_ref().map(|c| normalize(&c.join(p)))
        }
    }

    // ----------------------------------------------------------------------------------
    // Targets

    /// A path the command reads, writes or deletes.
    pub(super) fn touch(&mut self, a: &Arg, op: TargetOp, env: &Env, cmd: &Cmd, recursive: bool) {
        if !a.known {
            // `rm -rf $DIR`: the sandbox still holds a contained call, but efr cannot know
            if op == TargetOp::Delete {
                self.note_opaque(format!(
                    "`{}` deletes a path efr cannot know ({})",
                    short(&cmd.display),
                    a.raw
                ));
            }
            // a known directory before the unknown part still says where it is
            let Some(dir) = a.prefix.rfind('/').map(|i| &a.prefix[..=i]) else {
                return;
            };
            if op == TargetOp::Read || dir.is_empty() {
                return;
            }
            let d = Arg::lit(&format!("{dir}*"));
            let d = Arg { glob: true, ..d };
            self.touch_known(&d, op, env, cmd, false);
            return;
        }
        self.touch_known(a, op, env, cmd, recursive);
    }

    pub(in crate::classify) fn walk_string(&mut self, text: &str, env: &Env, pc: Pc, what: &str) {
        if self.wrap > MAX_WRAP {
            self.note_opaque(format!("{what} is nested too deeply for efr to read"));
            return;
        }
        self.reparsed += text.len();
        if self.reparsed > MAX_REPARSE {
            self.note_opaque(format!("{what} is too long for efr to read again"));
            return;
        }
        match shell::parse(text) {
            Ok(s) => {
                self.wrap += 1;
                let mut e = env.clone();
                self.walk_list(&s.list, &mut e, pc);
                self.wrap -= 1;
            }
            Err(e) => self.note_opaque(format!("{what} does not parse ({e})")),
        }
    }
}

/// Loopback is the call's own (its network namespace has only loopback).
fn is_loopback(h: &str) -> bool {
    h == "localhost"
        || h.ends_with(".localhost")
        || h.starts_with("127.")
        || h == "::1"
        || h == "0.0.0.0"
        || h == "[::1]"
}

pub(super) fn target(path: &str, class: TargetClass, op: TargetOp) -> Target {
    Target {
        path: path.to_string(),
        class,
        op,
        backup_before_write: false,
        masked: false,
    }
}

pub(super) fn short(s: &str) -> String {
    let one = s.replace('\n', " ");
    if one.chars().count() > 80 {
        let mut t: String = one.chars().take(77).collect();
        t.push_str("...");
        t
    } else {
        one
    }
}

fn redir_display(r: &Redir) -> String {
    let fd =
        r.fd.map(|n| n.to_string())
            .or_else(|| r.fd_var.as_ref().map(|v| format!("{{{v}}}")))
            .unwrap_or_default();
    let op = match r.op {
        RedirOp::In => "<",
        RedirOp::Out => ">",
        RedirOp::Clobber => ">|",
        RedirOp::Append => ">>",
        RedirOp::ReadWrite => "<>",
        RedirOp::OutErr => "&>",
        RedirOp::AppendErr => "&>>",
        RedirOp::Dup => ">&",
        RedirOp::HereDoc => "<<",
        RedirOp::HereString => "<<<",
    };
    format!("{fd}{op}{}", r.target.raw)
}

fn pipeline_display(p: &Pipeline) -> String {
    p.commands
        .iter()
        .map(|c| match c {
            Command::Simple(sc) => {
                let mut s = sc
                    .words
                    .iter()
                    .map(|w| w.raw.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                for r in &sc.redirs {
                    s.push(' ');
                    s.push_str(&redir_display(r));
                }
                s
            }
            Command::Subshell(..) => "( ... )".into(),
            Command::Group(..) => "{ ... }".into(),
            _ => "...".into(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

fn cmd_of(what: &str, env: &Env, pc: Pc) -> Cmd {
    Cmd {
        display: what.to_string(),
        words: Vec::new(),
        cwd: env.cwd.clone(),
        background: pc.background,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            url_host("https://user:pw@Example.com:8443/x", false),
            Some(("example.com".into(), Some(8443), false))
        );
        assert_eq!(
            url_host("http://a.b/c", false),
            Some(("a.b".into(), None, true))
        );
        assert_eq!(
            url_host("example.com/x", true),
            Some(("example.com".into(), None, false))
        );
        assert_eq!(url_host("notes.txt", true), None);
        assert_eq!(url_host("./a.b", true), None);
        assert_eq!(remote_host("git@github.com:a/b"), Some("github.com".into()));
        assert_eq!(remote_host("./x:y"), None);
        assert_eq!(remote_host("/a/b"), None);
    }
}
