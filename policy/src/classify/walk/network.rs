//! Network: downloaders, clients and their hosts, `ssh` and its kin.

use super::*;

impl Walker<'_> {
    pub(super) fn host_finding_or_local(&mut self, f: Finding) {
        if f.facts.hosts.iter().all(|h| is_loopback(&h.host)) && f.kind == ExitKind::Host {
            return;
        }
        self.push(f);
    }

    pub(in crate::classify) fn host_finding(
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
                    tcp: false,
                }],
            }
        } else {
            Needs::Unsandboxed
        };
        f
    }

    pub(super) fn network(
        &mut self,
        name: &str,
        ni: usize,
        rest: &[Arg],
        env: &mut Env,
        pc: Pc,
        cmd: &Cmd,
    ) {
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
                let header_creds = credentials::header_credentials(self.ctx, rest);
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
                        let mut f = if let Some(file) = &upload_flag {
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
                                    tcp: false,
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
                        let bound = header_creds
                            .iter()
                            .find(|c| c.binds(&host, port.unwrap_or(if plain { 80 } else { 443 })));
                        if let Some(c) = bound.filter(|_| !plain) {
                            credentials::use_credential(&mut f, c, &[(host.clone(), port)], false);
                        }
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

    pub(super) fn ssh(&mut self, name: &str, rest: &[Arg], cmd: &Cmd) {
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
}
