//! Writes: the targets a command writes or deletes (`touch_known`), the writers of the knowledge, in-place editors, `dd`, `tar`, `unzip`.

use super::*;

impl Walker<'_> {
    pub(super) fn touch_known(
        &mut self,
        a: &Arg,
        op: TargetOp,
        env: &Env,
        cmd: &Cmd,
        recursive: bool,
    ) {
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
            let scrubbed = crate::tokens::shown_scrubbed(&self.ctx.home, &path);
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

    pub(super) fn writer(&mut self, name: &str, wi: usize, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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

    pub(super) fn in_place(&mut self, name: &str, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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

    pub(super) fn dd(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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

    pub(super) fn tar(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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

    pub(super) fn unzip(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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
}
