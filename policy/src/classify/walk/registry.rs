//! Package registries and container tools: `npm`, `pip`, `cargo`, ... and `docker`/`podman`.

use super::*;

impl Walker<'_> {
    pub(super) fn registry(
        &mut self,
        name: &str,
        ri: usize,
        rest: &[Arg],
        env: &mut Env,
        cmd: &Cmd,
    ) {
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
            || (sub.is_empty() && spec.bare_fetch.iter().any(|n| n == name));
        let mut because = None;
        if !publish && !fetch && spec.fetch_if_missing.iter().any(|s| s == sub) {
            because = match name {
                "cargo" => crate::tokens::registries::cargo_would_fetch(&words, &var, cwd, home),
                "go" => crate::tokens::registries::go_would_fetch(&var, cwd, home),
                _ => None,
            };
            fetch = because.is_some();
        }
        if !publish && !fetch {
            return;
        }
        let hosts = crate::tokens::registries::proposal(&spec, publish, &words, &var, cwd, home);
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
                    tcp: false,
                });
            }
        }
        f.reasons.extend(because);
        f.reasons.extend(hosts.iter().map(|h| h.why.clone()));
        if publish {
            let reached: Vec<(String, Option<u16>)> =
                hosts.iter().map(|h| (h.host.clone(), h.port)).collect();
            match credentials::publish_credential(self.ctx, name, &reached) {
                Some(c) => credentials::use_credential(&mut f, c, &reached, true),
                None => {
                    f.needs = Needs::Unsandboxed;
                    f.reasons.push(
                        "publishing needs your registry token, which the sandbox hides".into(),
                    );
                }
            }
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

    pub(super) fn docker(&mut self, name: &str, si: usize, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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
}
