//! Wrappers and the commands that run other commands: `env`, `sudo`, `time`, `nice`, ... (the knowledge's wrappers), `sh -c`, inline code, `awk`, `find -exec`, `xargs`, `parallel`.

use super::*;

impl Walker<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wrapper(
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

    pub(super) fn wrapper_exit(
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
    pub(super) fn shell(
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

    pub(super) fn inline(
        &mut self,
        name: &str,
        ii: usize,
        rest: &[Arg],
        env: &mut Env,
        pc: Pc,
        cmd: &Cmd,
    ) {
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
    pub(super) fn awk(&mut self, rest: &[Arg], env: &mut Env, pc: Pc, cmd: &Cmd) {
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
        for e in super::super::awk::effects(&program.text) {
            match e {
                super::super::awk::Effect::Runs(line) => {
                    self.walk_string(&line, env, pc, "a command of an awk program")
                }
                super::super::awk::Effect::Writes(path) => {
                    self.touch(&Arg::lit(&path), TargetOp::Write, env, cmd, false)
                }
                super::super::awk::Effect::RunsUnknown => self.note_opaque(format!(
                    "awk runs a command built while it runs: {}",
                    short(&cmd.display)
                )),
                super::super::awk::Effect::WritesUnknown => self.note_opaque(format!(
                    "awk writes a file whose name is built while it runs: {}",
                    short(&cmd.display)
                )),
            }
        }
    }

    pub(super) fn positional<'b>(
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

    pub(super) fn find(&mut self, rest: &[Arg], env: &mut Env, pc: Pc, cmd: &Cmd) {
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

    pub(super) fn xargs(&mut self, rest: &[Arg], env: &mut Env, pc: Pc) {
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

    pub(super) fn parallel(&mut self, rest: &[Arg], env: &mut Env, pc: Pc) {
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
}
