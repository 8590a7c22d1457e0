//! The dispatch: a command's name to the handler that reads its arguments. The table is
//! data: `[[handler]]` of commands.toml names the commands each [`Handler`] reads (this
//! file's `handle` runs it); the other commands are read by their roles (wrapper, shell,
//! writer, network, ...), also from the knowledge.

use super::*;
use crate::knowledge::Handler;

impl Walker<'_> {
    pub(super) fn dispatch(
        &mut self,
        args: &[Arg],
        env: &mut Env,
        pc: Pc,
        stdin: Option<&str>,
        cmd: &Cmd,
    ) {
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

    pub(super) fn dispatch_inner(
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
                        .any(|m| crate::context::rule_covers(m, &p, &self.roots));
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
        // commands read by a handler of their own (`[[handler]]` of commands.toml)
        if let Some(h) = self.k.handler(&name) {
            if self.handle(h, &name, rest, env, pc, &cmd) {
                return;
            }
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
            let bus = b.bus;
            let grant = if b.filtered.contains(&name) {
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
            let desktop = d.desktop;
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
        self.script_runner(&name, rest, env, pc, &cmd);
        if !self.own_job_server(&name, pc, &cmd) {
            self.server(&name, rest, &cmd);
        }
        if let Some(runner) = self.k.module_runner(&name) {
            // python -m pip / venv / http.server
            if let Some(i) = rest.iter().position(|a| a.text == runner.option) {
                if let Some(m) = rest.get(i + 1) {
                    let m = m.text.clone();
                    let sub: Vec<Arg> = rest[i + 1..].to_vec();
                    if runner.registry_modules.contains(&m) {
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
}

impl Walker<'_> {
    /// Runs the handler `h` for the command `name`; false when it does not apply to these
    /// arguments (`sed` without `-i`), so the command's roles read it as any other.
    fn handle(
        &mut self,
        h: Handler,
        name: &str,
        rest: &[Arg],
        env: &mut Env,
        pc: Pc,
        cmd: &Cmd,
    ) -> bool {
        match h {
            Handler::Eval => {
                if rest.iter().any(|a| a.download) {
                    self.floor(
                        "download_to_shell",
                        false,
                        format!("`{}` runs a download", short(&cmd.display)),
                        cmd,
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
            }
            Handler::Source => {
                if rest.first().is_some_and(|a| a.download) {
                    self.floor(
                        "download_to_shell",
                        false,
                        format!("`{}` runs a download", short(&cmd.display)),
                        cmd,
                        |_| {},
                    );
                } else if rest.first().is_some_and(|a| !a.known) {
                    self.note_opaque(format!(
                        "`{}` runs a script efr cannot name",
                        short(&cmd.display)
                    ));
                }
            }
            Handler::Trap => {
                if let Some(a) = rest.iter().find(|a| !is_opt(&a.text)) {
                    if a.known {
                        self.walk_string(&a.text.clone(), env, pc, "the string of trap");
                    }
                }
            }
            Handler::Git => self.git(rest, env, cmd),
            Handler::Gh => self.gh(rest, env, cmd),
            Handler::Find => self.find(rest, env, pc, cmd),
            Handler::Xargs => self.xargs(rest, env, pc),
            Handler::Parallel => self.parallel(rest, env, pc),
            Handler::Dd => self.dd(rest, env, cmd),
            Handler::InPlace => {
                let perl = name == "perl";
                if !rest.iter().any(|a| {
                    a.text.starts_with("-i")
                        || a.text == "--in-place"
                        || (perl && a.text.starts_with("-p") && a.text.contains('i'))
                }) {
                    return false;
                }
                self.in_place(name, rest, env, cmd);
                if perl {
                    self.note_opaque(format!(
                        "perl runs code efr does not read: {}",
                        short(&cmd.display)
                    ));
                }
            }
            Handler::Tar => self.tar(rest, env, cmd),
            Handler::Unzip => self.unzip(rest, env, cmd),
            Handler::Crontab => {
                if rest
                    .iter()
                    .all(|a| a.text == "-l" || a.text == "-u" || a.text.starts_with("-u"))
                    && !rest.is_empty()
                {
                    return true;
                }
                let mut f = self.finding(
                    ExitKind::Floor,
                    format!("`{}` changes your crontab", short(&cmd.display)),
                    cmd,
                );
                f.floor = Some(Floor {
                    reason: "crontabs run programs on a schedule".into(),
                    refuse: false,
                });
                f.runs_outside(&cmd.display);
                self.push(f);
            }
            Handler::Format => {
                for a in rest.iter().filter(|a| !is_opt(&a.text)) {
                    if let Some(p) = self.resolve(a, env) {
                        if is_disk_device(&p) {
                            let s = p.to_string_lossy().into_owned();
                            self.floor(
                                "device_write",
                                false,
                                format!("`{}` formats the disk device {s}", short(&cmd.display)),
                                cmd,
                                |f| f.facts.devices.push(s.clone()),
                            );
                            return true;
                        }
                        self.touch(a, TargetOp::Write, env, cmd, false);
                    }
                }
            }
            Handler::Ssh => self.ssh(name, rest, cmd),
        }
        true
    }
}
