//! The walker: finds the exits of a parsed line, command by command.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use efr_sandbox_wire::{
    Bus, Desktop, ExitKind, Grant, HostFact, Needs, Target, TargetClass, TargetOp,
};

use super::knowledge::{ArgRole, HostArgs, Knowledge, Wrapper, WriteOp};
use super::paths::{classify_path, display, is_disk_device, is_harmless_device, normalize};
use super::url::{url_host, url_host_port};
use super::{ClassifyRequest, Context, Finding, Floor, WalkOut, git};
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
        k: Knowledge::get(),
    };
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
    pub(super) k: &'static Knowledge,
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
            "fetch" | "http" | "https" | "xh" | "aria2c" => true,
            _ => false,
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

    fn touch_known(&mut self, a: &Arg, op: TargetOp, env: &Env, cmd: &Cmd, recursive: bool) {
        if a.text == "-" && op != TargetOp::Delete {
            return;
        }
        let Some(path) = self.resolve(a, env) else {
            if op == TargetOp::Delete && recursive {
                self.note_opaque(format!(
                    "`{}` deletes a relative path in an unknown directory",
                    short(&cmd.display)
                ));
            }
            return;
        };
        // a glob: the directory it is in, and whether it takes everything there
        let (path, everything) = if a.glob {
            let s = path.to_string_lossy().into_owned();
            let cut = s.find(['*', '?', '[']).unwrap_or(s.len());
            let dir = s[..cut].rfind('/').map(|i| &s[..i.max(1)]).unwrap_or("/");
            let last = &s[s[..cut].rfind('/').map(|i| i + 1).unwrap_or(0)..];
            let everything =
                matches!(last, "*" | ".*" | "*.*" | "{*,.*}") && !s[cut..].contains('/');
            (PathBuf::from(dir), everything)
        } else {
            (path, false)
        };
        let shown = if a.glob {
            format!("{}/{}", display(self.ctx, &path).trim_end_matches('/'), "*")
        } else {
            display(self.ctx, &path)
        };
        let s = path.to_string_lossy();
        if s.starts_with("/dev/") && !a.glob {
            if is_harmless_device(&path) {
                return;
            }
            if is_disk_device(&path) && op != TargetOp::Read {
                self.floor(
                    "device_write",
                    false,
                    format!("`{}` writes the disk device {s}", short(&cmd.display)),
                    cmd,
                    |f| f.facts.devices.push(s.to_string()),
                );
                return;
            }
            let mut f = self.finding(
                ExitKind::Device,
                format!("`{}` uses the device {s}", short(&cmd.display)),
                cmd,
            );
            f.facts.devices.push(s.to_string());
            f.needs = Needs::Contained {
                grants: vec![Grant::Device {
                    path: s.to_string(),
                }],
            };
            self.push(f);
            return;
        }
        // floors of a delete
        if op == TargetOp::Delete && (!a.glob || (everything && recursive)) {
            let what = if a.glob { "everything in " } else { "" };
            if path == Path::new("/") {
                self.floor(
                    "delete_root",
                    true,
                    format!(
                        "`{}` deletes {what}the root file system",
                        short(&cmd.display)
                    ),
                    cmd,
                    |f| {
                        f.facts.targets.push(target("/", TargetClass::System, op));
                    },
                );
                return;
            }
            if path == self.ctx.home {
                self.floor(
                    "delete_home",
                    false,
                    format!(
                        "`{}` deletes {what}your home directory",
                        short(&cmd.display)
                    ),
                    cmd,
                    |f| {
                        f.facts.targets.push(target("~", TargetClass::Home, op));
                    },
                );
                return;
            }
            if let Some(root) = self.roots.iter().find(|r| **r == path).cloned() {
                let shown = display(self.ctx, &root);
                self.floor(
                    "delete_project_root",
                    false,
                    format!(
                        "`{}` deletes {what}the project root {shown}",
                        short(&cmd.display)
                    ),
                    cmd,
                    |f| {
                        f.facts
                            .targets
                            .push(target(&shown, TargetClass::Project, op))
                    },
                );
                return;
            }
        }
        // a glob is classified by a child of its directory
        let class_path = if a.glob { path.join("*") } else { path.clone() };
        let info = classify_path(self.ctx, &self.roots, &self.granted_writes, &class_path);
        let path_s = path.to_string_lossy().into_owned();
        if op == TargetOp::Read {
            // A settings file the call is shown scrubbed reads fine contained.
            let scrubbed = super::tokens::shown_scrubbed(&self.ctx.home, &path);
            if let Some(why) = info.masked.filter(|_| !scrubbed) {
                let mut f = self.finding(
                    ExitKind::Unmask,
                    format!(
                        "`{}` reads {shown}, which the sandbox hides ({why})",
                        short(&cmd.display)
                    ),
                    cmd,
                );
                let mut t = target(&shown, TargetClass::Masked, op);
                t.masked = true;
                f.facts.targets.push(t);
                f.needs = Needs::Contained {
                    grants: vec![Grant::Unmask { path: path_s }],
                };
                self.push(f);
            }
            return;
        }
        if let Some(why) = &info.floor {
            let verb = if op == TargetOp::Delete {
                "deletes"
            } else {
                "writes"
            };
            let mut f = self.finding(
                ExitKind::Floor,
                format!(
                    "`{}` {verb} {shown}, a floor file: {why}",
                    short(&cmd.display)
                ),
                cmd,
            );
            let mut t = target(&shown, TargetClass::Floor, op);
            t.masked = info.masked.is_some();
            t.backup_before_write = op == TargetOp::Write && path.is_file();
            f.facts.targets.push(t);
            f.needs = Needs::Contained {
                grants: vec![Grant::Write { path: path_s }],
            };
            f.floor = Some(Floor {
                reason: format!("{shown} {why}"),
                refuse: false,
            });
            self.push(f);
            return;
        }
        if info.writable {
            return;
        }
        let kind = match (op, info.class) {
            (TargetOp::Delete, TargetClass::Cache) => ExitKind::CacheDelete,
            (TargetOp::Delete, _) => ExitKind::Delete,
            _ => ExitKind::Write,
        };
        let verb = if op == TargetOp::Delete {
            "deletes"
        } else {
            "writes"
        };
        let why = match (&info.read_only, &info.masked) {
            (Some(r), _) => format!(", read-only inside the project: {r}"),
            (_, Some(m)) => format!(", which the sandbox hides: {m}"),
            _ => format!(" ({})", info.class.as_str()),
        };
        let mut f = self.finding(
            kind,
            format!("`{}` {verb} {shown}{why}", short(&cmd.display)),
            cmd,
        );
        let mut t = target(&shown, info.class, op);
        t.masked = info.masked.is_some();
        t.backup_before_write =
            op == TargetOp::Write && info.class == TargetClass::Home && path.is_file();
        f.facts.targets.push(t);
        let mut grants = vec![Grant::Write {
            path: path_s.clone(),
        }];
        if info.masked.is_some() {
            grants.insert(0, Grant::Unmask { path: path_s });
        }
        f.needs = Needs::Contained { grants };
        self.push(f);
    }

    // ----------------------------------------------------------------------------------
    // Commands

    fn walk_string(&mut self, text: &str, env: &Env, pc: Pc, what: &str) {
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

    fn dispatch(&mut self, args: &[Arg], env: &mut Env, pc: Pc, stdin: Option<&str>, cmd: &Cmd) {
        if args.is_empty() {
            return;
        }
        if self.wrap > MAX_WRAP {
            self.note_opaque("the command is wrapped too deeply for efr to read".into());
            return;
        }
        self.wrap += 1;
        self.dispatch_inner(args, env, pc, stdin, cmd);
        self.wrap -= 1;
    }

    fn dispatch_inner(
        &mut self,
        args: &[Arg],
        env: &mut Env,
        pc: Pc,
        stdin: Option<&str>,
        outer: &Cmd,
    ) {
        let a0 = &args[0];
        if !a0.known {
            if a0.download {
                self.floor(
                    "download_to_shell",
                    false,
                    format!("`{}` runs a download", short(&outer.display)),
                    outer,
                    |_| {},
                );
            }
            self.note_opaque(format!(
                "a variable or substitution is used as a command name: {}",
                a0.raw
            ));
            return;
        }
        let name = basename(&a0.text).to_string();
        if self.names.len() < 64 {
            self.names.push(name.clone());
        }
        if self.functions.contains(&name) && !a0.text.contains('/') {
            return;
        }
        // the command's own description, for inner commands of wrappers
        let cmd = Cmd {
            display: join_display(args),
            words: args.iter().map(|a| a.text.clone()).collect(),
            cwd: env.cwd.clone(),
            background: pc.background,
        };
        let cmd = if self.wrap <= 1 { outer.clone() } else { cmd };
        let rest = &args[1..];
        self.runs_download(&name, a0, rest, env, &cmd);
        let keys = self.key_files(&name, rest, env);
        // any argument that names a masked path or a device is read (or used)
        for a in rest {
            if keys.iter().any(|k| k.text == a.text) {
                continue;
            }
            if a.known
                && !a.glob
                && (a.text.starts_with('/') || a.text.starts_with("./") || a.text.contains('/'))
            {
                if let Some(p) = self.resolve(a, env) {
                    let masked = self
                        .ctx
                        .masks
                        .iter()
                        .any(|m| super::paths::rule_covers(m, &p, &self.roots));
                    let device =
                        p.starts_with("/dev/") && !is_harmless_device(&p) && !is_disk_device(&p);
                    if masked || device {
                        self.touch(a, TargetOp::Read, env, &cmd, false);
                    }
                }
            }
        }
        for k in &keys {
            self.touch(k, TargetOp::Write, env, &cmd, false);
        }
        match name.as_str() {
            "eval" => {
                if rest.iter().any(|a| a.download) {
                    self.floor(
                        "download_to_shell",
                        false,
                        format!("`{}` runs a download", short(&cmd.display)),
                        &cmd,
                        |_| {},
                    );
                }
                if rest.iter().all(|a| a.known) {
                    let text = rest
                        .iter()
                        .map(|a| a.text.as_str())
                        .collect::<Vec<_>>()
                        .join(" ");
                    self.walk_string(&text, env, pc, "the string of eval");
                } else {
                    self.note_opaque(format!(
                        "eval runs a string efr cannot read: {}",
                        short(&cmd.display)
                    ));
                }
                return;
            }
            "source" | "." => {
                if rest.first().is_some_and(|a| a.download) {
                    self.floor(
                        "download_to_shell",
                        false,
                        format!("`{}` runs a download", short(&cmd.display)),
                        &cmd,
                        |_| {},
                    );
                } else if rest.first().is_some_and(|a| !a.known) {
                    self.note_opaque(format!(
                        "`{}` runs a script efr cannot name",
                        short(&cmd.display)
                    ));
                }
                return;
            }
            "trap" => {
                if let Some(a) = rest.iter().find(|a| !is_opt(&a.text)) {
                    if a.known {
                        self.walk_string(&a.text.clone(), env, pc, "the string of trap");
                    }
                }
                return;
            }
            "git" => return self.git(rest, env, &cmd),
            "gh" => return self.gh(rest, env, &cmd),
            "find" => return self.find(rest, env, pc, &cmd),
            "xargs" => return self.xargs(rest, env, pc),
            "parallel" => return self.parallel(rest, env, pc),
            "dd" => return self.dd(rest, env, &cmd),
            "sed" | "perl"
                if rest.iter().any(|a| {
                    a.text.starts_with("-i")
                        || a.text == "--in-place"
                        || (name == "perl" && a.text.starts_with("-p") && a.text.contains('i'))
                }) =>
            {
                self.in_place(&name, rest, env, &cmd);
                if name == "perl" {
                    self.note_opaque(format!(
                        "perl runs code efr does not read: {}",
                        short(&cmd.display)
                    ));
                }
                return;
            }
            "tar" | "bsdtar" => return self.tar(rest, env, &cmd),
            "unzip" | "7z" | "7za" => return self.unzip(rest, env, &cmd),
            "crontab" => {
                if rest
                    .iter()
                    .all(|a| a.text == "-l" || a.text == "-u" || a.text.starts_with("-u"))
                    && !rest.is_empty()
                {
                    return;
                }
                let mut f = self.finding(
                    ExitKind::Floor,
                    format!("`{}` changes your crontab", short(&cmd.display)),
                    &cmd,
                );
                f.floor = Some(Floor {
                    reason: "crontabs run programs on a schedule".into(),
                    refuse: false,
                });
                f.runs_outside(&cmd.display);
                self.push(f);
                return;
            }
            _ if name.starts_with("mkfs")
                || matches!(
                    name.as_str(),
                    "mkswap" | "wipefs" | "blkdiscard" | "sgdisk" | "badblocks"
                ) =>
            {
                for a in rest.iter().filter(|a| !is_opt(&a.text)) {
                    if let Some(p) = self.resolve(a, env) {
                        if is_disk_device(&p) {
                            let s = p.to_string_lossy().into_owned();
                            self.floor(
                                "device_write",
                                false,
                                format!("`{}` formats the disk device {s}", short(&cmd.display)),
                                &cmd,
                                |f| f.facts.devices.push(s.clone()),
                            );
                            return;
                        }
                        self.touch(a, TargetOp::Write, env, &cmd, false);
                    }
                }
                return;
            }
            "ssh" | "autossh" | "mosh" => {
                self.ssh(&name, rest, &cmd);
                return;
            }
            _ => {}
        }
        let roles = self.k.roles(&name);
        if let Some(wi) = roles.wrapper {
            let w = &self.k.file.wrapper[wi];
            self.wrapper(&name, w, rest, env, pc, stdin, &cmd);
            return;
        }
        if let Some(si) = roles.shell {
            let opts = self.k.file.shell[si].opts_with_arg.clone();
            self.shell(&name, &opts, rest, env, pc, stdin, &cmd);
            return;
        }
        if let Some(ii) = roles.inline {
            self.inline(&name, ii, rest, env, pc, &cmd);
        }
        if let Some(wi) = roles.writer {
            self.writer(&name, wi, rest, env, &cmd);
        }
        if let Some(oi) = roles.outside {
            let o = &self.k.file.outside[oi];
            let applies =
                o.install_only.is_empty() || rest.iter().any(|a| o.install_only.contains(&a.text));
            if applies {
                let mut f = self.said(ExitKind::Outside, &o.reason, &cmd);
                f.runs_outside(&cmd.display);
                self.push(f);
            }
        }
        if let Some(pi) = roles.privilege {
            let why = self.k.file.privilege[pi].reason.clone();
            let mut f = self.said(ExitKind::Privilege, &why, &cmd);
            f.runs_outside(&cmd.display);
            self.push(f);
        }
        if let Some(bi) = roles.background {
            let why = self.k.file.background[bi].reason.clone();
            let mut f = self.said(ExitKind::Background, &why, &cmd);
            f.background = true;
            self.push(f);
        }
        if roles.signal.is_some() {
            self.signal(&name, rest, &cmd);
        }
        if let Some(bi) = roles.bus {
            let b = &self.k.file.bus[bi];
            let bus = if b.bus == "system" {
                Bus::System
            } else {
                Bus::Session
            };
            let grant = if name == "notify-send" {
                Grant::BusFilter { bus }
            } else {
                Grant::Bus { bus }
            };
            let real = matches!(grant, Grant::Bus { .. });
            let mut f = self.said(ExitKind::Bus, &b.reason, &cmd);
            f.needs = Needs::Contained {
                grants: vec![grant],
            };
            if real {
                // The real bus is a way out: whoever holds it can have code run outside.
                f.user_only = true;
                f.reasons.push(crate::bus::REAL_BUS_RUNS_CODE.to_string());
            }
            self.push(f);
        }
        if let Some(di) = roles.desktop {
            let d = &self.k.file.desktop[di];
            let desktop = match d.desktop.as_str() {
                "hyprland" => Desktop::Hyprland,
                "sway" => Desktop::Sway,
                "i3" => Desktop::I3,
                "niri" => Desktop::Niri,
                "x11" => Desktop::X11,
                _ => Desktop::Wayland,
            };
            let read = d.read_subcommands.contains(&name)
                || rest
                    .iter()
                    .find(|a| !is_opt(&a.text) || a.text == "-t" || a.text == "-j")
                    .is_some_and(|a| d.read_subcommands.contains(&a.text))
                    && !rest.iter().any(|a| {
                        a.text == "dispatch"
                            || a.text == "keyword"
                            || a.text == "--batch"
                            || a.text == "action"
                    });
            let mut f = self.said(ExitKind::Desktop, &d.reason, &cmd);
            f.facts.desktop_read = read;
            f.needs = Needs::Contained {
                grants: vec![Grant::Desktop { desktop }],
            };
            self.push(f);
        }
        if let Some(si) = roles.socket {
            self.docker(&name, si, rest, env, &cmd);
        }
        self.lasting(&name, rest, &cmd);
        self.cache_clean(&name, rest, env, &cmd);
        self.cloud_copy(&name, rest, env, &cmd);
        self.device_use(&name, rest, env, &cmd);
        self.install_dests(&name, rest, env, &cmd);
        if let Some(ni) = roles.network {
            self.network(&name, ni, rest, env, pc, &cmd);
        }
        if let Some(ri) = roles.registry {
            self.registry(&name, ri, rest, env, &cmd);
        }
        if !self.own_job_server(&name, pc, &cmd) {
            self.server(&name, rest, &cmd);
        }
        if name == "python" || name.starts_with("python3") || name == "python2" {
            // python -m pip / venv / http.server
            if let Some(i) = rest.iter().position(|a| a.text == "-m") {
                if let Some(m) = rest.get(i + 1) {
                    let m = m.text.clone();
                    let sub: Vec<Arg> = rest[i + 1..].to_vec();
                    if m == "pip" || m == "pipx" || m == "twine" || m == "uv" {
                        let ri = self.k.roles(&m).registry;
                        if let Some(ri) = ri {
                            self.registry(&m, ri, &sub[1..], env, &cmd);
                        }
                        self.install_dests(&m, &sub[1..], env, &cmd);
                    } else if !self.own_job_server(&m, pc, &cmd) {
                        self.server(&m, &sub[1..], &cmd);
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn wrapper(
        &mut self,
        name: &str,
        w: &Wrapper,
        rest: &[Arg],
        env: &mut Env,
        pc: Pc,
        stdin: Option<&str>,
        cmd: &Cmd,
    ) {
        let quiet;
        let waits = rest.iter().any(|a| w.foreground_opts.contains(&a.text));
        let w = if w.background && (waits || w.in_job_only && !pc.background) {
            // `nohup make`: the line waits for it and the sandbox ends it with the line
            quiet = Wrapper {
                background: false,
                ..w.clone()
            };
            &quiet
        } else {
            w
        };
        let mut i = 0;
        let mut e = env.clone();
        let mut user = None;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t == "--" {
                i += 1;
                break;
            }
            if w.no_command_opts.iter().any(|o| o == t) {
                return;
            }
            if w.string_opts.iter().any(|o| o == t) {
                if let Some(s) = rest.get(i + 1) {
                    self.wrapper_exit(name, w, &s.raw, user.as_deref(), cmd);
                    if s.known {
                        self.walk_string(
                            &s.text.clone(),
                            &e,
                            pc,
                            &format!("the command string of {name}"),
                        );
                    } else {
                        self.note_opaque(format!(
                            "{name} runs a string efr cannot read: {}",
                            s.raw
                        ));
                    }
                }
                return;
            }
            if is_opt(t) && !(name == "env" && t == "-") {
                if let Some((o, v)) = t.split_once('=') {
                    if (o == "--user" || o == "-u") && !v.is_empty() {
                        user = Some(v.to_string());
                    }
                    i += 1;
                    continue;
                }
                if w.opts_with_arg.iter().any(|o| o == t) {
                    if (t == "-u" || t == "--user") && rest.get(i + 1).is_some() {
                        user = Some(rest[i + 1].text.clone());
                    }
                    if matches!(t, "-D" | "--chdir") || (t == "-C" && name != "sudo") {
                        if let Some(d) = rest.get(i + 1) {
                            e.cwd = self.resolve(d, &e);
                        }
                    }
                    i += 2;
                    continue;
                }
                if name == "env" && t == "-i" {
                    e.vars.clear();
                }
                i += 1;
                continue;
            }
            if w.skip_assignments
                && t.contains('=')
                && t.split('=').next().is_some_and(|n| {
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            {
                if let Some((n, v)) = t.split_once('=') {
                    e.vars
                        .insert(n.to_string(), rest[i].known.then(|| v.to_string()));
                }
                i += 1;
                continue;
            }
            break;
        }
        if w.string_only {
            // `su` with no -c: an interactive shell as another user
            self.wrapper_exit(name, w, "", user.as_deref(), cmd);
            return;
        }
        i = (i + w.skip_positional).min(rest.len());
        let inner = &rest[i..];
        let inner_text = join_display(inner);
        self.wrapper_exit(name, w, &inner_text, user.as_deref(), cmd);
        if w.string_joined {
            if inner.iter().all(|a| a.known) && !inner.is_empty() {
                let text = inner
                    .iter()
                    .map(|a| a.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                self.walk_string(&text, &e, pc, &format!("the command of {name}"));
            } else if !inner.is_empty() {
                self.note_opaque(format!(
                    "{name} runs a string efr cannot read: {inner_text}"
                ));
            }
            return;
        }
        if inner.is_empty() {
            return;
        }
        let pc2 = Pc {
            background: pc.background || w.background,
            lasting: pc.lasting || w.background,
            ..pc
        };
        self.dispatch(inner, &mut e, pc2, stdin, cmd);
    }

    fn wrapper_exit(
        &mut self,
        name: &str,
        w: &Wrapper,
        inner: &str,
        user: Option<&str>,
        cmd: &Cmd,
    ) {
        let what = if inner.is_empty() {
            "a shell".to_string()
        } else {
            format!("`{}`", short(inner))
        };
        if w.privilege {
            let who = user
                .map(|u| format!("as {u}"))
                .unwrap_or_else(|| "as root".into());
            let mut f = self.finding(
                ExitKind::Privilege,
                format!("{name} runs {what} {who}"),
                cmd,
            );
            f.runs_outside(&cmd.display);
            self.push(f);
        }
        if w.background {
            let mut f = self.finding(
                ExitKind::Background,
                format!("{name} starts {what}, which can outlive the call"),
                cmd,
            );
            f.background = true;
            if w.outside {
                f.needs = Needs::Unsandboxed;
            }
            self.push(f);
        } else if w.outside {
            let mut f = self.finding(ExitKind::Outside, format!("{name} {}", w.reason), cmd);
            f.runs_outside(&cmd.display);
            self.push(f);
        }
        if w.open_network {
            let mut f = self.finding(ExitKind::OpenNetwork, format!("{name} {}", w.reason), cmd);
            f.needs = Needs::Contained {
                grants: vec![Grant::OpenNetwork],
            };
            self.push(f);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn shell(
        &mut self,
        name: &str,
        opts: &[String],
        rest: &[Arg],
        env: &mut Env,
        pc: Pc,
        stdin: Option<&str>,
        cmd: &Cmd,
    ) {
        let mut i = 0;
        let mut has_c = false;
        let mut reads_stdin = false;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t == "--" || t == "-" {
                i += 1;
                break;
            }
            if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
                if opts.iter().any(|o| o == t) {
                    i += 2;
                    continue;
                }
                if t.starts_with('-') && !t.starts_with("--") {
                    has_c |= t.contains('c');
                    reads_stdin |= t.contains('s');
                }
                if t == "--command" {
                    has_c = true;
                }
                i += 1;
                continue;
            }
            break;
        }
        if has_c {
            let Some(s) = rest.get(i) else { return };
            if s.download {
                self.floor(
                    "download_to_shell",
                    false,
                    format!("`{}` runs a download", short(&cmd.display)),
                    cmd,
                    |_| {},
                );
            }
            if s.known {
                self.walk_string(
                    &s.text.clone(),
                    env,
                    pc,
                    &format!("the string of {name} -c"),
                );
            } else {
                self.note_opaque(format!(
                    "{name} -c runs a string efr cannot read: {}",
                    s.raw
                ));
            }
            return;
        }
        if let Some(script) = rest.get(i).filter(|_| !reads_stdin) {
            if script.download {
                self.floor(
                    "download_to_shell",
                    false,
                    format!("`{}` runs a download", short(&cmd.display)),
                    cmd,
                    |_| {},
                );
            } else if !script.known {
                self.note_opaque(format!(
                    "{name} runs a script efr cannot name: {}",
                    script.raw
                ));
            }
            return;
        }
        // reads its commands from stdin
        if pc.stdin_download {
            self.floor(
                "download_to_shell",
                false,
                format!("`{}` runs what a download sends", short(&cmd.display)),
                cmd,
                |_| {},
            );
        } else if let Some(body) = stdin {
            self.walk_string(body, env, pc, &format!("the heredoc {name} reads"));
        } else if pc.stdin_piped {
            self.note_opaque(format!(
                "{name} runs commands from its input, which efr cannot see"
            ));
        }
    }

    fn inline(&mut self, name: &str, ii: usize, rest: &[Arg], env: &mut Env, pc: Pc, cmd: &Cmd) {
        let spec = &self.k.file.inline[ii];
        if spec.system_call {
            self.awk(rest, env, pc, cmd);
            return;
        }
        let code = rest.iter().any(|a| {
            spec.code_opts.iter().any(|o| {
                a.text == *o
                    || (a.text.starts_with(o.as_str()) && o.len() == 2 && !a.text.starts_with("--"))
            })
        });
        if code {
            self.note_opaque(format!("{}: {}", spec.reason, short(&cmd.display)));
            return;
        }
        let script = rest.iter().find(|a| !is_opt(&a.text));
        if spec.stdin_runs && pc.stdin_download && script.is_none_or(|s| s.text == "-") {
            self.floor(
                "download_to_shell",
                false,
                format!("`{}` runs what a download sends", short(&cmd.display)),
                cmd,
                |_| {},
            );
        }
        if script.is_some_and(|s| s.download) {
            self.floor(
                "download_to_shell",
                false,
                format!("`{}` runs a download", short(&cmd.display)),
                cmd,
                |_| {},
            );
        }
        let _ = name;
    }

    /// An awk line: the commands its program runs are walked like `sh -c`, the files it
    /// writes are targets; a program file or a computed command is opaque.
    fn awk(&mut self, rest: &[Arg], env: &mut Env, pc: Pc, cmd: &Cmd) {
        let mut i = 0;
        let mut program: Option<&Arg> = None;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t == "--" {
                program = rest.get(i + 1);
                break;
            }
            if t == "-f" || t.starts_with("--file") || (t.starts_with("-f") && t.len() > 2) {
                self.note_opaque(format!(
                    "awk runs a program file efr does not read: {}",
                    short(&cmd.display)
                ));
                return;
            }
            if matches!(t, "-F" | "-v" | "--field-separator" | "--assign") {
                i += 2;
                continue;
            }
            if is_opt(t) {
                i += 1;
                continue;
            }
            program = Some(&rest[i]);
            break;
        }
        let Some(program) = program else { return };
        if !program.known {
            self.note_opaque(format!(
                "the awk program is not known before the line runs: {}",
                short(&cmd.display)
            ));
            return;
        }
        for e in super::awk::effects(&program.text) {
            match e {
                super::awk::Effect::Runs(line) => {
                    self.walk_string(&line, env, pc, "a command of an awk program")
                }
                super::awk::Effect::Writes(path) => {
                    self.touch(&Arg::lit(&path), TargetOp::Write, env, cmd, false)
                }
                super::awk::Effect::RunsUnknown => self.note_opaque(format!(
                    "awk runs a command built while it runs: {}",
                    short(&cmd.display)
                )),
                super::awk::Effect::WritesUnknown => self.note_opaque(format!(
                    "awk writes a file whose name is built while it runs: {}",
                    short(&cmd.display)
                )),
            }
        }
    }

    fn positional<'b>(
        &self,
        rest: &'b [Arg],
        opts_with_arg: &[String],
        dest_opts: &[String],
    ) -> (Vec<&'b Arg>, Vec<&'b Arg>, bool) {
        let mut pos = Vec::new();
        let mut dest = Vec::new();
        let mut recursive = false;
        let mut i = 0;
        let mut opts_done = false;
        while i < rest.len() {
            let a = &rest[i];
            let t = a.text.as_str();
            if !opts_done && t == "--" {
                opts_done = true;
                i += 1;
                continue;
            }
            if !opts_done && is_opt(t) && a.known {
                if t == "--recursive"
                    || (!t.starts_with("--") && (t.contains('r') || t.contains('R')))
                {
                    recursive = true;
                }
                if let Some((o, v)) = t.split_once('=') {
                    if dest_opts.iter().any(|d| d == o) {
                        let mut d = a.clone();
                        d.text = v.to_string();
                        d.prefix = if d.known {
                            d.text.clone()
                        } else {
                            String::new()
                        };
                        dest.push(&rest[i]);
                        // keep the whole arg: touch handles the value below
                        let _ = d;
                    }
                    i += 1;
                    continue;
                }
                if dest_opts.iter().any(|d| d == t) {
                    if let Some(v) = rest.get(i + 1) {
                        dest.push(v);
                    }
                    i += 2;
                    continue;
                }
                if opts_with_arg.iter().any(|d| d == t) {
                    i += 2;
                    continue;
                }
                i += 1;
                continue;
            }
            pos.push(a);
            i += 1;
        }
        (pos, dest, recursive)
    }

    fn writer(&mut self, name: &str, wi: usize, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let w = self.k.file.writer[wi].clone();
        let (pos, dest, recursive) = self.positional(rest, &w.opts_with_arg, &w.dest_opts);
        let recursive = recursive || matches!(name, "rmdir");
        let op = if w.op == WriteOp::Delete {
            TargetOp::Delete
        } else {
            TargetOp::Write
        };
        // `--opt=value` dest options: take the value
        let dest: Vec<Arg> = dest
            .into_iter()
            .map(|a| match a.text.split_once('=') {
                Some((o, v)) if o.starts_with("--") => {
                    let mut b = a.clone();
                    b.text = v.to_string();
                    if b.known {
                        b.prefix = b.text.clone();
                    }
                    b
                }
                _ => a.clone(),
            })
            .collect();
        let mut targets: Vec<Arg> = Vec::new();
        let mut sources: Vec<Arg> = Vec::new();
        if !dest.is_empty() {
            targets.extend(dest);
            sources.extend(pos.iter().map(|a| (*a).clone()));
        } else {
            match w.args {
                ArgRole::All => targets.extend(pos.iter().map(|a| (*a).clone())),
                ArgRole::Last => {
                    if pos.len() >= 2 {
                        targets.push(pos[pos.len() - 1].clone());
                        sources.extend(pos[..pos.len() - 1].iter().map(|a| (*a).clone()));
                    } else if name == "ln" && pos.len() == 1 {
                        // `ln -s target`: a link named after the target in the cwd
                    }
                }
                ArgRole::RestAfterFirst => targets.extend(pos.iter().skip(1).map(|a| (*a).clone())),
                ArgRole::None => {}
            }
        }
        if w.privilege {
            let mut f = self.said(ExitKind::Privilege, &w.reason, cmd);
            f.runs_outside(&cmd.display);
            self.push(f);
        }
        if matches!(name, "chmod" | "chown" | "chgrp") && recursive {
            for t in &targets {
                if let Some(p) = self.resolve(t, env) {
                    let p = if t.glob {
                        p.parent().map(Path::to_path_buf).unwrap_or(p)
                    } else {
                        p
                    };
                    if p == self.ctx.home || p == Path::new("/") {
                        let shown = display(self.ctx, &p);
                        self.floor(
                            "chmod_home_recursive",
                            false,
                            format!("`{}` changes every file of {shown}", short(&cmd.display)),
                            cmd,
                            |f| {
                                f.facts.targets.push(target(
                                    &shown,
                                    TargetClass::Home,
                                    TargetOp::Write,
                                ))
                            },
                        );
                        return;
                    }
                }
            }
        }
        for t in &targets {
            self.touch(t, op, env, cmd, recursive);
        }
        if w.sources_deleted {
            for s in &sources {
                self.touch(s, TargetOp::Delete, env, cmd, true);
            }
        } else {
            for s in &sources {
                self.touch(s, TargetOp::Read, env, cmd, false);
            }
        }
    }

    fn in_place(&mut self, name: &str, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let mut script_given = false;
        let mut files = Vec::new();
        let mut i = 0;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t == "-e" || t == "-f" || t == "--expression" || t == "--file" {
                script_given = true;
                i += 2;
                continue;
            }
            if name == "perl"
                && t.starts_with('-')
                && (t.contains('e') || t.contains('E'))
                && !t.starts_with("--")
            {
                script_given = true;
                i += 1;
                continue;
            }
            if is_opt(t) {
                i += 1;
                continue;
            }
            files.push(&rest[i]);
            i += 1;
        }
        let files: Vec<Arg> = files
            .iter()
            .skip(if script_given { 0 } else { 1 })
            .map(|a| (*a).clone())
            .collect();
        for f in &files {
            self.touch(f, TargetOp::Write, env, cmd, false);
        }
    }

    fn dd(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        for a in rest {
            if let Some(v) = a.text.strip_prefix("of=") {
                let mut b = a.clone();
                b.text = v.to_string();
                b.prefix = b.prefix.strip_prefix("of=").unwrap_or("").to_string();
                self.touch(&b, TargetOp::Write, env, cmd, false);
            } else if let Some(v) = a.text.strip_prefix("if=") {
                let mut b = a.clone();
                b.text = v.to_string();
                b.prefix = b.prefix.strip_prefix("if=").unwrap_or("").to_string();
                self.touch(&b, TargetOp::Read, env, cmd, false);
            }
        }
    }

    fn tar(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let first = rest.first().map(|a| a.text.clone()).unwrap_or_default();
        let old_style = !first.starts_with('-') && !first.is_empty();
        let has = |c: char, long: &str| {
            rest.iter().any(|a| {
                a.text == long
                    || (a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains(c))
            }) || (old_style && first.contains(c))
        };
        let extract = has('x', "--extract") || rest.iter().any(|a| a.text == "--get");
        let create = has('c', "--create") || has('r', "--append") || has('u', "--update");
        let mut file = None;
        let mut dir = None;
        for (i, a) in rest.iter().enumerate() {
            let t = a.text.as_str();
            if t == "-C" || t == "--directory" {
                dir = rest.get(i + 1).cloned();
            } else if let Some(v) = t.strip_prefix("--directory=") {
                dir = Some(Arg {
                    text: v.into(),
                    prefix: v.into(),
                    ..a.clone()
                });
            } else if t == "-f" || t == "--file" {
                file = rest.get(i + 1).cloned();
            } else if let Some(v) = t.strip_prefix("--file=") {
                file = Some(Arg {
                    text: v.into(),
                    prefix: v.into(),
                    ..a.clone()
                });
            } else if t.starts_with('-') && !t.starts_with("--") && t.ends_with('f')
                || (i == 0 && old_style && t.contains('f'))
            {
                file = rest.get(i + 1).cloned();
            }
        }
        if extract {
            let d = dir.unwrap_or_else(|| Arg::lit("."));
            let d = Arg {
                text: format!("{}/*", d.text.trim_end_matches('/')),
                glob: true,
                prefix: format!("{}/", d.prefix),
                ..d
            };
            self.touch(&d, TargetOp::Write, env, cmd, false);
            if let Some(f) = file {
                self.touch(&f, TargetOp::Read, env, cmd, false);
            }
        } else if create {
            if let Some(f) = file {
                self.touch(&f, TargetOp::Write, env, cmd, false);
            }
        }
    }

    fn unzip(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let mut dir = None;
        for (i, a) in rest.iter().enumerate() {
            if a.text == "-d" {
                dir = rest.get(i + 1).cloned();
            } else if let Some(v) = a.text.strip_prefix("-o").filter(|v| !v.is_empty()) {
                dir = Some(Arg {
                    text: v.into(),
                    prefix: v.into(),
                    ..a.clone()
                });
            }
        }
        let d = dir.unwrap_or_else(|| Arg::lit("."));
        let d = Arg {
            text: format!("{}/*", d.text.trim_end_matches('/')),
            glob: true,
            prefix: format!("{}/", d.prefix),
            ..d
        };
        self.touch(&d, TargetOp::Write, env, cmd, false);
    }

    fn signal(&mut self, name: &str, rest: &[Arg], cmd: &Cmd) {
        if rest
            .iter()
            .any(|a| a.text == "-l" || a.text == "-L" || a.text == "--list")
        {
            return;
        }
        let mut i = 0;
        let mut targets = Vec::new();
        while i < rest.len() {
            let t = &rest[i].text;
            if t == "-s"
                || t == "-n"
                || (name != "kill"
                    && (t == "-u"
                        || t == "-U"
                        || t == "-g"
                        || t == "-G"
                        || t == "-P"
                        || t == "-t"
                        || t == "--signal"))
            {
                i += 2;
                continue;
            }
            if is_opt(t) {
                i += 1;
                continue;
            }
            targets.push(&rest[i]);
            i += 1;
        }
        let foreign: Vec<&Arg> = targets
            .into_iter()
            .filter(|a| {
                let raw = a.raw.as_str();
                let var = raw.trim_start_matches('$').trim_matches(['{', '}', '"']);
                if self.own_pids.contains(var) {
                    return false;
                }
                if raw.starts_with('%')
                    || raw.contains("$!")
                    || raw.contains("$$")
                    || raw.contains("$(jobs")
                    || raw == "0"
                {
                    return false;
                }
                if name == "kill" {
                    return true;
                }
                // pkill/killall of something this line started is its own
                !self
                    .names
                    .iter()
                    .any(|n| n == &a.text || (a.text.len() >= 3 && n.contains(a.text.as_str())))
            })
            .collect();
        if foreign.is_empty() {
            return;
        }
        let what = foreign
            .iter()
            .map(|a| a.raw.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let mut f = self.finding(
            ExitKind::Kill,
            format!(
                "`{}` signals {what}, which may not be the call's own",
                short(&cmd.display)
            ),
            cmd,
        );
        f.facts.signals.push(cmd.display.clone());
        f.needs = Needs::Unsandboxed;
        self.push(f);
    }

    fn server(&mut self, name: &str, rest: &[Arg], cmd: &Cmd) {
        let sub = rest
            .iter()
            .find(|a| !is_opt(&a.text))
            .map(|a| a.text.as_str())
            .unwrap_or("");
        let keyed = format!("{name}-{sub}");
        let spec = self
            .k
            .roles(name)
            .server
            .or_else(|| self.k.roles(&keyed).server)
            .or_else(|| {
                rest.iter()
                    .find(|a| is_opt(&a.text))
                    .and_then(|o| self.k.roles(&format!("{name}{}", o.text)).server)
            });
        let listen = matches!(name, "nc" | "ncat" | "netcat")
            && rest.iter().any(|a| {
                a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains('l')
            })
            || name == "socat"
                && rest
                    .iter()
                    .any(|a| a.text.to_ascii_uppercase().contains("LISTEN"));
        let generic_port = rest
            .iter()
            .any(|a| a.text == "--port" || a.text.starts_with("--port="));
        if spec.is_none() && !listen && !generic_port {
            return;
        }
        let mut ports = Vec::new();
        let port_opts: Vec<String> = spec
            .map(|s| self.k.file.server[s].port_opts.clone())
            .unwrap_or_else(|| vec!["--port".into(), "-p".into()]);
        for (i, a) in rest.iter().enumerate() {
            let t = a.text.as_str();
            let val = if port_opts.iter().any(|o| o == t) {
                rest.get(i + 1).map(|v| v.text.clone())
            } else if let Some((o, v)) = t.split_once('=') {
                port_opts.iter().any(|p| p == o).then(|| v.to_string())
            } else {
                None
            };
            if let Some(v) = val {
                if let Some(p) = v.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()) {
                    ports.push(p);
                }
            }
            if name == "socat" {
                if let Some(p) = t
                    .to_ascii_uppercase()
                    .split("LISTEN:")
                    .nth(1)
                    .and_then(|r| r.split(',').next().and_then(|p| p.parse::<u16>().ok()))
                {
                    ports.push(p);
                }
            }
        }
        if ports.is_empty() {
            // a bare port number (`python -m http.server 9000`, `nc -l 8080`) or host:port
            if let Some(p) = rest.iter().filter(|a| !is_opt(&a.text)).find_map(|a| {
                a.text
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse::<u16>().ok())
                    .filter(|p| *p > 0)
            }) {
                ports.push(p);
            }
        }
        if ports.is_empty() {
            let default = match name {
                "http.server" | "SimpleHTTPServer" | "mkdocs" | "uvicorn" | "gunicorn" => {
                    Some(8000)
                }
                "flask" => Some(5000),
                "jupyter" | "jupyter-notebook" | "jupyter-lab" => Some(8888),
                "vite" => Some(5173),
                "hugo" => Some(1313),
                "jekyll" => Some(4000),
                "rails" | "next" | "serve" => Some(3000),
                "http-server" => Some(8080),
                "streamlit" => Some(8501),
                _ => None,
            };
            ports.extend(default);
        }
        let what = if ports.is_empty() {
            "a port".to_string()
        } else {
            format!(
                "port {}",
                ports
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let mut f = self.finding(
            ExitKind::Port,
            format!("`{}` listens on {what}", short(&cmd.display)),
            cmd,
        );
        f.facts.ports = ports;
        f.needs = Needs::Contained {
            grants: vec![Grant::OpenNetwork],
        };
        self.push(f);
    }

    fn host_finding_or_local(&mut self, f: Finding) {
        if f.facts.hosts.iter().all(|h| is_loopback(&h.host)) && f.kind == ExitKind::Host {
            return;
        }
        self.push(f);
    }

    pub(super) fn host_finding(
        &self,
        kind: ExitKind,
        host: &str,
        port: Option<u16>,
        plain: bool,
        summary: String,
        cmd: &Cmd,
    ) -> Finding {
        let mut f = self.finding(kind, summary, cmd);
        f.facts.hosts.push(HostFact {
            host: host.to_string(),
            port,
            project_remote: git::is_project_remote(self.ctx, &self.roots, host),
        });
        f.needs = if kind == ExitKind::Host
            || kind == ExitKind::Upload && !matches!(f.needs, Needs::Unsandboxed)
        {
            Needs::Contained {
                grants: vec![Grant::Host {
                    host: host.to_string(),
                    port,
                    plain_http: plain,
                }],
            }
        } else {
            Needs::Unsandboxed
        };
        f
    }

    fn network(&mut self, name: &str, ni: usize, rest: &[Arg], env: &mut Env, pc: Pc, cmd: &Cmd) {
        let spec = self.k.file.network[ni].clone();
        match spec.host_args {
            HostArgs::Urls => {
                let upload_flag = rest.iter().enumerate().find_map(|(i, a)| {
                    let t = a.text.as_str();
                    if t == "-T"
                        || t == "--upload-file"
                        || t == "--post-file"
                        || t.starts_with("--post-file=")
                    {
                        return Some(rest.get(i + 1).map(|v| v.raw.clone()).unwrap_or_default());
                    }
                    if matches!(
                        t,
                        "-d" | "--data"
                            | "--data-binary"
                            | "--data-raw"
                            | "--data-urlencode"
                            | "-F"
                            | "--form"
                    ) {
                        if let Some(v) = rest.get(i + 1) {
                            if v.text.starts_with('@')
                                || v.text.contains("=@")
                                || v.text.contains("=<")
                            {
                                return Some(v.raw.clone());
                            }
                        }
                    }
                    None
                });
                let mut skip_next = false;
                let mut any = false;
                for (i, a) in rest.iter().enumerate() {
                    if skip_next {
                        skip_next = false;
                        continue;
                    }
                    let t = a.text.as_str();
                    if is_opt(t) {
                        // options with a value (common to curl and wget)
                        const VALUED: [&str; 38] = [
                            "-o",
                            "--output",
                            "-H",
                            "--header",
                            "-d",
                            "--data",
                            "--data-binary",
                            "--data-raw",
                            "-X",
                            "--request",
                            "-u",
                            "--user",
                            "-A",
                            "--user-agent",
                            "-e",
                            "--referer",
                            "-T",
                            "--upload-file",
                            "-F",
                            "--form",
                            "-x",
                            "--proxy",
                            "-w",
                            "--write-out",
                            "-b",
                            "--cookie",
                            "-c",
                            "--cookie-jar",
                            "-m",
                            "--max-time",
                            "-O",
                            "-P",
                            "--connect-timeout",
                            "--retry",
                            "-r",
                            "--range",
                            "--output-dir",
                            "--data-urlencode",
                        ];
                        if VALUED.contains(&t) && !(t == "-O" && name == "curl") {
                            skip_next = true;
                            if matches!(t, "-o" | "--output" | "-P" | "--output-dir")
                                || (t == "-O" && name != "curl")
                            {
                                if let Some(v) = rest.get(i + 1) {
                                    if v.text != "-" {
                                        self.touch(v, TargetOp::Write, env, cmd, false);
                                    }
                                }
                            }
                        }
                        continue;
                    }
                    if let Some((host, port, plain)) = url_host(t, true) {
                        any = true;
                        let f = if let Some(file) = &upload_flag {
                            let mut f = self.host_finding(
                                ExitKind::Upload,
                                &host,
                                port,
                                plain,
                                format!("`{}` sends {file} to {host}", short(&cmd.display)),
                                cmd,
                            );
                            f.needs = Needs::Contained {
                                grants: vec![Grant::Host {
                                    host: host.clone(),
                                    port,
                                    plain_http: plain,
                                }],
                            };
                            f
                        } else {
                            self.host_finding(
                                ExitKind::Host,
                                &host,
                                port,
                                plain,
                                format!("`{}` reaches {host}", short(&cmd.display)),
                                cmd,
                            )
                        };
                        self.host_finding_or_local(f);
                    } else if !a.known && (a.prefix.is_empty() || a.prefix.contains("://")) {
                        self.note_opaque(format!(
                            "{name} reaches a host efr cannot know: {}",
                            a.raw
                        ));
                    }
                }
                let _ = (any, pc);
            }
            HostArgs::First => {
                let mut host = None;
                let mut port = None;
                let mut i = 0;
                while i < rest.len() {
                    let t = rest[i].text.as_str();
                    if t == "-h" || t == "--host" || t == "-H" {
                        if let Some(v) = rest.get(i + 1) {
                            host = url_host(&v.text, true).map(|h| h.0).or_else(|| {
                                Some(v.text.clone())
                                    .filter(|s| !s.is_empty() && !s.starts_with('-'))
                            });
                        }
                        i += 2;
                        continue;
                    }
                    if let Some(v) = t.strip_prefix("--host=") {
                        host = Some(v.to_string());
                    }
                    if is_opt(t) || t.starts_with('@') {
                        i += 1;
                        continue;
                    }
                    if host.is_none() {
                        if let Some(h) = url_host(t, true).map(|h| h.0) {
                            host = Some(h);
                        } else if t.parse::<std::net::IpAddr>().is_ok() {
                            host = Some(t.to_string());
                        }
                    } else if port.is_none() {
                        port = t.parse::<u16>().ok();
                    }
                    i += 1;
                }
                let listening = matches!(name, "nc" | "ncat" | "netcat")
                    && rest.iter().any(|a| {
                        a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains('l')
                    });
                if listening {
                    return;
                }
                if let Some(h) = host {
                    let f = self.host_finding(
                        ExitKind::Host,
                        &h,
                        port,
                        false,
                        format!("`{}` reaches {h}", short(&cmd.display)),
                        cmd,
                    );
                    self.host_finding_or_local(f);
                }
            }
            HostArgs::Remote => {
                let pos: Vec<&Arg> = {
                    let mut v = Vec::new();
                    let mut i = 0;
                    while i < rest.len() {
                        let t = rest[i].text.as_str();
                        if matches!(
                            t,
                            "-e" | "-i"
                                | "-P"
                                | "-o"
                                | "-F"
                                | "-J"
                                | "-S"
                                | "-l"
                                | "-c"
                                | "--rsh"
                                | "--exclude"
                                | "--include"
                                | "--filter"
                                | "-f"
                                | "--port"
                                | "--config"
                        ) {
                            i += 2;
                            continue;
                        }
                        if is_opt(t) {
                            i += 1;
                            continue;
                        }
                        v.push(&rest[i]);
                        i += 1;
                    }
                    v
                };
                let Some((last, sources)) = pos.split_last() else {
                    return;
                };
                let dest_host = remote_host(&last.text);
                for s in sources {
                    if let Some(h) = remote_host(&s.text) {
                        let mut f = self.host_finding(
                            ExitKind::Outside,
                            &h,
                            None,
                            false,
                            format!("`{}` copies from {h}", short(&cmd.display)),
                            cmd,
                        );
                        f.runs_outside(&cmd.display);
                        self.push(f);
                    } else if dest_host.is_some() {
                        self.touch(s, TargetOp::Read, env, cmd, false);
                    }
                }
                if let Some(h) = dest_host {
                    let what = sources
                        .iter()
                        .map(|s| s.raw.as_str())
                        .collect::<Vec<_>>()
                        .join(" ");
                    let mut f = self.host_finding(
                        ExitKind::Upload,
                        &h,
                        None,
                        false,
                        format!("`{}` sends {what} to {h}", short(&cmd.display)),
                        cmd,
                    );
                    f.needs = Needs::Unsandboxed;
                    self.push(f);
                } else if !sources.is_empty() {
                    self.touch(last, TargetOp::Write, env, cmd, true);
                }
            }
        }
    }

    fn registry(&mut self, name: &str, ri: usize, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let spec = self.k.file.registry[ri].clone();
        let pos: Vec<&str> = rest
            .iter()
            .map(|a| a.text.as_str())
            .filter(|t| !is_opt(t))
            .collect();
        let sub = pos.first().copied().unwrap_or("");
        let sub2 = pos.get(1).map(|s| format!("{sub}-{s}")).unwrap_or_default();
        let is = |list: &[String]| list.iter().any(|s| s == "*" || s == sub || s == &sub2);
        // Every host the registry needs, as the user's setup names them, else the
        // knowledge's (`registries::proposal`); all of them are proposed as host grants.
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        if words.iter().any(|w| spec.quiet.iter().any(|q| q == w)) {
            return;
        }
        let var = |v: &str| env.vars.get(v).cloned().flatten();
        let (cwd, home) = (env.cwd.as_deref(), &self.ctx.home);
        let publish = is(&spec.publish);
        let mut fetch = spec.runner
            || is(&spec.fetch)
            || (sub.is_empty() && matches!(name, "yarn" | "pnpm" | "bun" | "bundle"));
        let mut because = None;
        if !publish && !fetch && spec.fetch_if_missing.iter().any(|s| s == sub) {
            because = match name {
                "cargo" => super::registries::cargo_would_fetch(&words, &var, cwd, home),
                "go" => super::registries::go_would_fetch(&var, cwd, home),
                _ => None,
            };
            fetch = because.is_some();
        }
        if !publish && !fetch {
            return;
        }
        let hosts = super::registries::proposal(&spec, publish, &words, &var, cwd, home);
        let Some(first) = hosts.first() else {
            // A vendored or local registry: nothing to reach.
            return;
        };
        let names = hosts
            .iter()
            .map(|h| h.host.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let kind = if publish {
            ExitKind::Upload
        } else {
            ExitKind::Host
        };
        let what = if publish {
            format!("publishes to {}", first.host)
        } else if spec.runner {
            format!(
                "fetches {} from {names} and runs it",
                pos.first().copied().unwrap_or("a package")
            )
        } else {
            format!("reaches {names}")
        };
        let mut f = self.host_finding(
            kind,
            &first.host,
            first.port,
            first.plain,
            format!("`{}` {what}", short(&cmd.display)),
            cmd,
        );
        for h in &hosts[1..] {
            f.facts.hosts.push(HostFact {
                host: h.host.clone(),
                port: h.port,
                project_remote: git::is_project_remote(self.ctx, &self.roots, &h.host),
            });
            if let Needs::Contained { grants } = &mut f.needs {
                grants.push(Grant::Host {
                    host: h.host.clone(),
                    port: h.port,
                    plain_http: h.plain,
                });
            }
        }
        f.reasons.extend(because);
        f.reasons.extend(hosts.iter().map(|h| h.why.clone()));
        if publish {
            f.needs = Needs::Unsandboxed;
            f.reasons
                .push("publishing needs your registry token, which the sandbox hides".into());
            self.push(f);
            return;
        }
        self.push(f);
        // installs outside the project
        let global = rest.iter().any(|a| spec.global_opts.contains(&a.text));
        let home_bin = match (name, sub) {
            ("cargo", "install") => Some("~/.cargo/bin/*"),
            ("go", "install") => Some("~/go/bin/*"),
            ("pipx", "install") => Some("~/.local/*"),
            (_, "install") if global && spec.global_opts.iter().any(|g| g == "--user") => {
                Some("~/.local/*")
            }
            _ => None,
        };
        if self.names_install_dest(name, rest, env) {
            // `cargo install --root DIR`, `npm i -g --prefix DIR`: written by dests.rs
        } else if let Some(p) = home_bin {
            let text = format!("{}{}", self.ctx.home.to_string_lossy(), &p[1..]);
            let a = Arg {
                glob: true,
                ..Arg::lit(&text)
            };
            self.touch(&a, TargetOp::Write, env, cmd, false);
        } else if global && spec.global_opts.iter().any(|g| g == "-g") {
            let mut f = self.finding(
                ExitKind::Write,
                format!(
                    "`{}` installs into npm's global prefix, outside the project",
                    short(&cmd.display)
                ),
                cmd,
            );
            f.facts.targets.push(target(
                "/usr/local/lib/node_modules",
                TargetClass::System,
                TargetOp::Write,
            ));
            f.needs = Needs::Unsandboxed;
            self.push(f);
        }
    }

    fn docker(&mut self, name: &str, si: usize, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let spec = self.k.file.socket[si].clone();
        let socket = spec
            .sockets
            .iter()
            .filter_map(|s| {
                if let Some(r) = s.strip_prefix("$XDG_RUNTIME_DIR") {
                    self.ctx
                        .runtime_dir
                        .as_ref()
                        .map(|d| format!("{}{r}", d.display()))
                } else {
                    Some(s.clone())
                }
            })
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| spec.sockets[0].clone());
        if rest
            .iter()
            .all(|a| a.text == "--version" || a.text == "version" || a.text == "--help")
            && !rest.is_empty()
        {
            return;
        }
        let sub = rest
            .iter()
            .find(|a| !is_opt(&a.text))
            .map(|a| a.text.as_str())
            .unwrap_or("");
        let mut f = self.said(ExitKind::Socket, &spec.reason, cmd);
        f.facts.sockets.push(socket.clone());
        f.needs = Needs::Contained {
            grants: vec![Grant::Socket { path: socket }],
        };
        self.push(f);
        if sub == "push" {
            let mut f = self.finding(
                ExitKind::Upload,
                format!("`{}` sends an image to a registry", short(&cmd.display)),
                cmd,
            );
            f.needs = Needs::Unsandboxed;
            self.push(f);
        }
        // a container that gets the host: root over it
        let mut grants_host = Vec::new();
        for (i, a) in rest.iter().enumerate() {
            let t = a.text.as_str();
            if t == "--privileged"
                || t.starts_with("--pid=host")
                || t.starts_with("--net=host")
                || t.starts_with("--network=host")
                || t == "--cap-add"
                || t.starts_with("--cap-add=")
                || t == "--userns=host"
            {
                grants_host.push(t.to_string());
            }
            if (t == "--network" || t == "--net" || t == "--pid")
                && rest.get(i + 1).is_some_and(|v| v.text == "host")
            {
                grants_host.push(format!("{t} host"));
            }
            let vol = if t == "-v" || t == "--volume" || t == "--mount" {
                rest.get(i + 1).map(|v| v.text.clone())
            } else {
                t.strip_prefix("--volume=")
                    .or_else(|| t.strip_prefix("-v"))
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
            };
            if let Some(v) = vol {
                let src = if v.contains("source=") || v.contains("src=") {
                    v.split(',')
                        .find_map(|kv| {
                            kv.strip_prefix("source=")
                                .or_else(|| kv.strip_prefix("src="))
                        })
                        .unwrap_or("")
                        .to_string()
                } else {
                    v.split(':').next().unwrap_or("").to_string()
                };
                if src.starts_with('/')
                    || src.starts_with('~')
                    || src.starts_with('.')
                    || src.starts_with('$')
                {
                    let arg = Arg::lit(&src.replacen('~', &self.ctx.home.to_string_lossy(), 1));
                    let inside = self.resolve(&arg, env).is_some_and(|p| {
                        let info = classify_path(self.ctx, &self.roots, &self.granted_writes, &p);
                        info.writable && p != Path::new("/")
                    });
                    if !inside {
                        grants_host.push(format!("-v {v}"));
                    }
                }
            }
        }
        if !grants_host.is_empty() {
            let mut f = self.finding(
                ExitKind::Privilege,
                format!(
                    "`{}` gives a container root over the host ({})",
                    short(&cmd.display),
                    grants_host.join(", ")
                ),
                cmd,
            );
            f.runs_outside(&cmd.display);
            self.push(f);
        }
        let _ = name;
    }

    fn ssh(&mut self, name: &str, rest: &[Arg], cmd: &Cmd) {
        const VALUED: [&str; 18] = [
            "-p", "-i", "-l", "-o", "-F", "-J", "-W", "-b", "-c", "-E", "-e", "-I", "-m", "-O",
            "-Q", "-S", "-w", "-B",
        ];
        let mut host = None;
        let mut port = None;
        let mut forwards = Vec::new();
        let mut i = 0;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t == "-L" || t == "-R" || t == "-D" {
                if let Some(v) = rest.get(i + 1) {
                    forwards.extend(v.text.split(':').next().and_then(|p| p.parse::<u16>().ok()));
                    if t == "-D" || v.text.split(':').count() > 1 {
                        if let Some(p) = v.text.split(':').find_map(|p| p.parse::<u16>().ok()) {
                            if !forwards.contains(&p) {
                                forwards.push(p);
                            }
                        }
                    }
                }
                i += 2;
                continue;
            }
            if VALUED.contains(&t) {
                if t == "-p" {
                    port = rest.get(i + 1).and_then(|v| v.text.parse().ok());
                }
                i += 2;
                continue;
            }
            if is_opt(t) {
                i += 1;
                continue;
            }
            host = Some(t.rsplit('@').next().unwrap_or(t).to_ascii_lowercase());
            break;
        }
        let h = host.clone().unwrap_or_else(|| "a host".into());
        let mut f = self.finding(
            ExitKind::Outside,
            format!("`{}` logs in to {h} with your keys", short(&cmd.display)),
            cmd,
        );
        if let Some(hh) = &host {
            let hh = hh.strip_prefix("ssh://").unwrap_or(hh).to_string();
            f.facts.hosts.push(HostFact {
                host: hh.clone(),
                port,
                project_remote: git::is_project_remote(self.ctx, &self.roots, &hh),
            });
        }
        f.runs_outside(&cmd.display);
        self.push(f);
        if !forwards.is_empty() {
            let mut f = self.finding(
                ExitKind::Port,
                format!("`{}` forwards a port", short(&cmd.display)),
                cmd,
            );
            f.facts.ports = forwards;
            f.needs = Needs::Unsandboxed;
            self.push(f);
        }
        let _ = name;
    }

    fn find(&mut self, rest: &[Arg], env: &mut Env, pc: Pc, cmd: &Cmd) {
        let mut i = 0;
        let mut roots = Vec::new();
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t.starts_with('-') && t.len() > 1 && !matches!(t, "-H" | "-L" | "-P")
                || t == "("
                || t == "!"
                || t == "\\("
            {
                break;
            }
            if !matches!(t, "-H" | "-L" | "-P") {
                roots.push(rest[i].clone());
            }
            i += 1;
        }
        if roots.is_empty() {
            roots.push(Arg::lit("."));
        }
        let expr = &rest[i..];
        let filtered = expr.iter().any(|a| {
            let t = a.text.as_str();
            t.starts_with('-')
                && !matches!(
                    t,
                    "-delete"
                        | "-depth"
                        | "-mindepth"
                        | "-maxdepth"
                        | "-xdev"
                        | "-mount"
                        | "-print"
                        | "-print0"
                        | "-exec"
                        | "-execdir"
                        | "-ok"
                        | "-okdir"
                        | "-ignore_readdir_race"
                )
        });
        let mut j = 0;
        while j < expr.len() {
            let t = expr[j].text.as_str();
            match t {
                "-delete" => {
                    for r in &roots {
                        let a = if filtered {
                            Arg {
                                text: format!("{}/*", r.text.trim_end_matches('/')),
                                prefix: format!("{}/", r.prefix),
                                glob: true,
                                ..r.clone()
                            }
                        } else {
                            r.clone()
                        };
                        // without a test, find -delete deletes everything below the root
                        let a = if !filtered {
                            Arg {
                                text: format!("{}/*", a.text.trim_end_matches('/')),
                                glob: true,
                                ..a
                            }
                        } else {
                            a
                        };
                        self.touch(&a, TargetOp::Delete, env, cmd, !filtered);
                    }
                }
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let start = j + 1;
                    let mut end = start;
                    while end < expr.len() && expr[end].text != ";" && expr[end].text != "+" {
                        end += 1;
                    }
                    let inner: Vec<Arg> = expr[start..end.min(expr.len())]
                        .iter()
                        .map(|a| {
                            if a.text.contains("{}") && roots.len() == 1 {
                                let r = &roots[0];
                                let text = a
                                    .text
                                    .replace("{}", &format!("{}/*", r.text.trim_end_matches('/')));
                                Arg {
                                    text: text.clone(),
                                    prefix: text,
                                    glob: true,
                                    known: r.known,
                                    ..a.clone()
                                }
                            } else if a.text.contains("{}") {
                                Arg {
                                    known: false,
                                    prefix: String::new(),
                                    ..a.clone()
                                }
                            } else {
                                a.clone()
                            }
                        })
                        .collect();
                    if !inner.is_empty() {
                        self.dispatch(&inner, env, pc, None, cmd);
                    }
                    j = end + 1;
                    continue;
                }
                "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                    if let Some(v) = expr.get(j + 1) {
                        self.touch(v, TargetOp::Write, env, cmd, false);
                    }
                }
                _ => {}
            }
            j += 1;
        }
    }

    fn xargs(&mut self, rest: &[Arg], env: &mut Env, pc: Pc) {
        const VALUED: [&str; 16] = [
            "-I",
            "-n",
            "-L",
            "-P",
            "-d",
            "-E",
            "-s",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-lines",
            "--replace",
            "--eof",
            "--max-chars",
        ];
        let mut i = 0;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if VALUED.contains(&t) {
                i += 2;
                continue;
            }
            if is_opt(t) {
                i += 1;
                continue;
            }
            break;
        }
        let mut inner: Vec<Arg> = rest[i.min(rest.len())..].to_vec();
        if inner.is_empty() {
            inner.push(Arg::lit("echo"));
        }
        // the input becomes arguments efr cannot see
        inner.push(Arg {
            text: "<input>".into(),
            raw: "<input>".into(),
            known: false,
            ..Arg::default()
        });
        let cmd = Cmd {
            display: join_display(&inner),
            words: inner.iter().map(|a| a.text.clone()).collect(),
            cwd: env.cwd.clone(),
            background: pc.background,
        };
        self.dispatch(&inner, env, pc, None, &cmd);
    }

    fn parallel(&mut self, rest: &[Arg], env: &mut Env, pc: Pc) {
        let end = rest
            .iter()
            .position(|a| a.text == ":::" || a.text == "::::")
            .unwrap_or(rest.len());
        let mut i = 0;
        while i < end && is_opt(&rest[i].text) {
            i += if matches!(
                rest[i].text.as_str(),
                "-j" | "--jobs" | "-S" | "--sshlogin" | "--joblog" | "-a" | "--arg-file"
            ) {
                2
            } else {
                1
            };
        }
        let words = &rest[i.min(end)..end];
        if words
            .iter()
            .any(|a| a.text == "-S" || a.text == "--sshlogin")
        {
            self.note_opaque("parallel runs commands on other hosts".into());
        }
        if words.iter().all(|a| a.known) && !words.is_empty() {
            let text = words
                .iter()
                .map(|a| a.text.replace("{}", "$PARALLEL_ARG"))
                .collect::<Vec<_>>()
                .join(" ");
            self.walk_string(&text, env, pc, "the command of parallel");
        }
    }

    fn git(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let mut i = 0;
        let mut dir = env.cwd.clone();
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if t == "-C" {
                if let Some(d) = rest.get(i + 1) {
                    dir = if d.known {
                        dir.map(|c| normalize(&c.join(&d.text)))
                            .or_else(|| self.resolve(d, env))
                    } else {
                        None
                    };
                }
                i += 2;
                continue;
            }
            if t == "-c" || t == "--git-dir" || t == "--work-tree" || t == "--namespace" {
                i += 2;
                continue;
            }
            if is_opt(t) {
                i += 1;
                continue;
            }
            break;
        }
        let Some(sub) = rest.get(i) else { return };
        let sub = sub.text.clone();
        let args = &rest[i + 1..];
        let pos: Vec<&Arg> = args.iter().filter(|a| !is_opt(&a.text)).collect();
        let repo = dir.clone().unwrap_or_else(|| PathBuf::from("."));
        self.git_writes(&sub, dir.as_deref(), args, env, cmd);
        match sub.as_str() {
            "push" | "send-email" | "send-pack" => {
                let remote = pos
                    .first()
                    .map(|a| a.text.clone())
                    .unwrap_or_else(|| "origin".into());
                let hosts = self.remote_hosts(&repo, &remote);
                let repo_shown = display(self.ctx, &repo);
                let what = if hosts.is_empty() {
                    remote.clone()
                } else {
                    hosts
                        .iter()
                        .map(|h| h.0.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let mut f = self.finding(
                    ExitKind::Upload,
                    format!("git push sends the commits of {repo_shown} to {what}"),
                    cmd,
                );
                for (h, p) in hosts {
                    f.facts.hosts.push(HostFact {
                        host: h.clone(),
                        port: p,
                        project_remote: git::is_project_remote(self.ctx, &self.roots, &h),
                    });
                }
                f.runs_outside(&cmd.display);
                f.git_repo = Some(repo);
                self.push(f);
            }
            "fetch" | "pull" | "ls-remote" | "clone" | "remote" | "submodule" | "archive" => {
                if sub == "remote"
                    && !pos
                        .first()
                        .is_some_and(|a| matches!(a.text.as_str(), "update" | "prune" | "show"))
                {
                    if pos.first().is_some_and(|a| {
                        matches!(
                            a.text.as_str(),
                            "add" | "set-url" | "remove" | "rm" | "rename"
                        )
                    }) {
                        self.git_config_write(&repo, env, cmd);
                    }
                    return;
                }
                if sub == "remote"
                    && pos.first().is_some_and(|a| a.text == "show")
                    && args.iter().any(|a| a.text == "-n")
                {
                    return;
                }
                if sub == "archive" && !args.iter().any(|a| a.text.starts_with("--remote")) {
                    for a in args {
                        if let Some(v) = a.text.strip_prefix("--output=") {
                            self.touch(&Arg::lit(v), TargetOp::Write, env, cmd, false);
                        }
                    }
                    return;
                }
                let hosts: Vec<(String, Option<u16>, bool)> = if sub == "clone" {
                    const VALUED: [&str; 16] = [
                        "--depth",
                        "-b",
                        "--branch",
                        "-o",
                        "--origin",
                        "--reference",
                        "-c",
                        "--config",
                        "--filter",
                        "-j",
                        "--jobs",
                        "--template",
                        "--separate-git-dir",
                        "-u",
                        "--upload-pack",
                        "--shallow-since",
                    ];
                    let mut pos: Vec<&Arg> = Vec::new();
                    let mut k = 0;
                    while k < args.len() {
                        if VALUED.contains(&args[k].text.as_str()) {
                            k += 2;
                            continue;
                        }
                        if !is_opt(&args[k].text) {
                            pos.push(&args[k]);
                        }
                        k += 1;
                    }
                    let url = pos.first().map(|a| a.text.clone()).unwrap_or_default();
                    if let Some(d) = pos.get(1) {
                        self.touch(d, TargetOp::Write, env, cmd, false);
                    }
                    let url = git::rewrite_url(&git::repo_config(self.ctx, None), &url, false);
                    url_host_port(&url)
                        .map(|(h, p, ssh)| vec![(h, p, ssh)])
                        .unwrap_or_default()
                } else if sub == "submodule" {
                    // Only `update` and `add` fetch; init, sync, status, foreach and the
                    // rest work on the local repository.
                    let action = pos.first().map(|a| a.text.as_str()).unwrap_or("");
                    let urls = match action {
                        "update" => git::submodule_urls(self.ctx, &repo),
                        "add" => pos.get(1).map(|a| vec![a.text.clone()]).unwrap_or_default(),
                        _ => Vec::new(),
                    };
                    let mut hosts: Vec<(String, Option<u16>, bool)> = Vec::new();
                    for u in urls {
                        if let Some(hp) = url_host_port(&u) {
                            if !hosts.contains(&hp) {
                                hosts.push(hp);
                            }
                        }
                    }
                    hosts
                } else {
                    let remote = pos
                        .iter()
                        .find(|a| {
                            !matches!(
                                a.text.as_str(),
                                "update"
                                    | "show"
                                    | "prune"
                                    | "--init"
                                    | "--recursive"
                                    | "foreach"
                                    | "sync"
                            )
                        })
                        .map(|a| a.text.clone())
                        .unwrap_or_else(|| "origin".into());
                    if let Some(hp) = url_host_port(&remote) {
                        vec![hp]
                    } else {
                        git::remote_urls(self.ctx, &repo, &remote)
                            .iter()
                            .filter_map(|u| url_host_port(u))
                            .collect()
                    }
                };
                for (h, p, ssh) in hosts {
                    let summary = format!("git {sub} reaches {h}");
                    let mut f = if ssh {
                        let mut f = self.finding(
                            ExitKind::Outside,
                            format!("{summary} over ssh, with your keys"),
                            cmd,
                        );
                        f.runs_outside(&cmd.display);
                        f.facts.hosts.push(HostFact {
                            host: h.clone(),
                            port: p,
                            project_remote: git::is_project_remote(self.ctx, &self.roots, &h),
                        });
                        f
                    } else {
                        self.host_finding(ExitKind::Host, &h, p, false, summary, cmd)
                    };
                    if sub != "clone" {
                        f.git_repo = Some(repo.clone());
                    }
                    self.push(f);
                }
            }
            "config" => {
                let global = args.iter().any(|a| a.text == "--global");
                let system = args.iter().any(|a| a.text == "--system");
                let reading = args.iter().any(|a| {
                    matches!(
                        a.text.as_str(),
                        "--get" | "--get-all" | "--list" | "-l" | "--get-regexp" | "get" | "list"
                    )
                }) || (pos.len() < 2
                    && !args.iter().any(|a| {
                        matches!(
                            a.text.as_str(),
                            "--unset"
                                | "--unset-all"
                                | "--add"
                                | "--edit"
                                | "-e"
                                | "--remove-section"
                                | "--rename-section"
                                | "set"
                                | "unset"
                        )
                    }));
                if reading {
                    return;
                }
                if global {
                    let p = self.ctx.home.join(".gitconfig");
                    let a = Arg::lit(&p.to_string_lossy());
                    self.touch(&a, TargetOp::Write, env, cmd, false);
                } else if system {
                    self.touch(
                        &Arg::lit("/etc/gitconfig"),
                        TargetOp::Write,
                        env,
                        cmd,
                        false,
                    );
                } else {
                    self.git_config_write(&repo, env, cmd);
                }
            }
            "clean"
                if args.iter().any(|a| {
                    a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains('f')
                        || a.text == "--force"
                }) =>
            {
                let a = Arg {
                    glob: true,
                    ..Arg::lit(&format!("{}/*", repo.to_string_lossy()))
                };
                self.touch(&a, TargetOp::Delete, env, cmd, false);
            }
            "init" => {
                if let Some(d) = pos.first() {
                    self.touch(d, TargetOp::Write, env, cmd, false);
                }
            }
            // work inside the repository: dests.rs (git_writes)
            _ => {}
        }
    }

    fn git_config_write(&mut self, repo: &Path, env: &mut Env, cmd: &Cmd) {
        let file = git::find_git_dir(repo)
            .map(|g| g.common.join("config"))
            .unwrap_or_else(|| repo.join(".git/config"));
        self.touch(
            &Arg::lit(&file.to_string_lossy()),
            TargetOp::Write,
            env,
            cmd,
            false,
        );
    }

    fn remote_hosts(&self, repo: &Path, remote: &str) -> Vec<(String, Option<u16>)> {
        if let Some((h, p, _)) = url_host_port(remote) {
            return vec![(h, p)];
        }
        let mut v: Vec<(String, Option<u16>)> = Vec::new();
        for u in git::remote_urls(self.ctx, repo, remote) {
            if let Some((h, p, _)) = url_host_port(&u) {
                if !v.iter().any(|x| x.0 == h) {
                    v.push((h, p));
                }
            }
        }
        v
    }

    fn gh(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
        let pos: Vec<&str> = rest
            .iter()
            .map(|a| a.text.as_str())
            .filter(|t| !is_opt(t))
            .collect();
        if pos.is_empty() || matches!(pos[0], "help" | "version" | "completion") {
            return;
        }
        let upload = matches!(
            (
                pos.first().copied().unwrap_or(""),
                pos.get(1).copied().unwrap_or("")
            ),
            ("pr", "create")
                | ("release", "create")
                | ("release", "upload")
                | ("gist", "create")
                | ("repo", "create")
                | ("repo", "fork")
        );
        let repo = env.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
        let mut f = if upload {
            self.finding(
                ExitKind::Upload,
                format!("`{}` sends project data to github.com", short(&cmd.display)),
                cmd,
            )
        } else {
            self.finding(
                ExitKind::Outside,
                format!(
                    "`{}` acts on github.com with your gh token",
                    short(&cmd.display)
                ),
                cmd,
            )
        };
        f.facts.hosts.push(HostFact {
            host: "github.com".into(),
            port: None,
            project_remote: git::is_project_remote(self.ctx, &self.roots, "github.com"),
        });
        f.runs_outside(&cmd.display);
        f.git_repo = Some(repo);
        self.push(f);
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
