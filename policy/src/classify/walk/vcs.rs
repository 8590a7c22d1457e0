//! Version control: `git` (remotes, config writes, code it runs outside) and `gh`.

use super::*;

impl Walker<'_> {
    pub(super) fn git(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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
                for (h, p) in &hosts {
                    f.facts.hosts.push(HostFact {
                        host: h.clone(),
                        port: *p,
                        project_remote: git::is_project_remote(self.ctx, &self.roots, h),
                    });
                }
                f.runs_outside(&cmd.display);
                if let Some(c) = self.git_credential(&repo, &remote) {
                    credentials::use_credential(&mut f, c, &hosts, false);
                }
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
                        let mut f = self.host_finding(ExitKind::Host, &h, p, false, summary, cmd);
                        let c = self.ctx.credential_for(&h, p).filter(|c| {
                            c.git && matches!(sub.as_str(), "fetch" | "pull" | "clone")
                        });
                        if let Some(c) = c {
                            credentials::use_credential(&mut f, c, &[(h.clone(), p)], false);
                        }
                        f
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

    pub(super) fn git_config_write(&mut self, repo: &Path, env: &mut Env, cmd: &Cmd) {
        let file = crate::git::find_git_dir(repo)
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

    /// The credential with `git = true` bound to every HTTPS URL of `remote` (a URL or a
    /// remote's name), when there is one and no URL is ssh.
    fn git_credential(
        &self,
        repo: &Path,
        remote: &str,
    ) -> Option<&crate::config::credential::CredentialSpec> {
        let raw: Vec<String> = match url_host_port(remote) {
            Some(_) => vec![remote.to_string()],
            None => git::remote_urls(self.ctx, repo, remote),
        };
        // A URL with a user part carries its own login, which git sends instead of asking
        // a credential helper.
        let own_login = |u: &str| {
            u.split_once("://")
                .is_some_and(|(_, rest)| rest.split('/').next().unwrap_or("").contains('@'))
        };
        if raw.iter().any(|u| own_login(u)) {
            return None;
        }
        let urls: Vec<(String, Option<u16>, bool)> =
            raw.iter().filter_map(|u| url_host_port(u)).collect();
        let (first, rest) = urls.split_first()?;
        if urls.iter().any(|u| u.2) {
            return None;
        }
        let c = self
            .ctx
            .credential_for(&first.0, first.1)
            .filter(|c| c.git)?;
        rest.iter()
            .all(|u| c.binds(&u.0, u.1.unwrap_or(443)))
            .then_some(c)
    }

    pub(super) fn remote_hosts(&self, repo: &Path, remote: &str) -> Vec<(String, Option<u16>)> {
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

    pub(super) fn gh(&mut self, rest: &[Arg], env: &mut Env, cmd: &Cmd) {
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
        if let Some(c) = credentials::gh_credential(self.ctx, pos[0]) {
            // Contained, it reaches GitHub's hosts with a placeholder: a host exit, no
            // longer a command that only works outside.
            if f.kind == ExitKind::Outside {
                f.kind = ExitKind::Host;
                f.summary = format!(
                    "`{}` acts on github.com with credential {}",
                    short(&cmd.display),
                    c.name
                );
            }
            credentials::use_credential(&mut f, c, &[], true);
        }
        f.git_repo = Some(repo);
        self.push(f);
    }
}
