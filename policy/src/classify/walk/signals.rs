//! Signals and servers: `kill` and its kin, and commands that listen on a port.

use super::*;

impl Walker<'_> {
    pub(super) fn signal(&mut self, name: &str, rest: &[Arg], cmd: &Cmd) {
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

    pub(super) fn server(&mut self, name: &str, rest: &[Arg], cmd: &Cmd) {
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
        if spec.is_some_and(|s| {
            self.k.file.server[s]
                .not_subcommands
                .iter()
                .any(|n| n == sub)
        }) {
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
            let default = self
                .k
                .file
                .default_port
                .iter()
                .find(|d| d.names.iter().any(|n| n == name))
                .map(|d| d.port);
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
        let f = self.listens(cmd, ports, &what);
        self.push(f);
    }

    /// The `port` exit of a server in the foreground of a call: in the call's own network
    /// it is unreachable from the host and holds the call until it ends, so it is proposed
    /// as a job (`action.background`, contained), whose port the service forwards to the
    /// host's loopback. A port below 1024 is never forwarded: that server needs the open
    /// network, and the reason says why.
    fn listens(&self, cmd: &Cmd, ports: Vec<u16>, what: &str) -> Finding {
        let privileged: Vec<String> = ports
            .iter()
            .filter(|p| **p < 1024)
            .map(u16::to_string)
            .collect();
        let display = short(&cmd.display);
        let mut f = if privileged.is_empty() {
            let mut f = self.finding(
                ExitKind::Port,
                format!(
                    "`{display}` listens on {what}: run it in the background \
                     (`efr-sandbox run --background --max-minutes N`), with {what} \
                     forwarded to the host's loopback"
                ),
                cmd,
            );
            f.background = true;
            f.reasons.push(format!(
                "a server in the foreground of a call listens in the call's own network, \
                 which the host cannot reach, and holds the call until it ends; as a job, the \
                 service forwards {what} to the same port of the host's loopback (unless \
                 another job or a host process holds it, or jobs.forward_deny names it)"
            ));
            f
        } else {
            let mut f = self.finding(
                ExitKind::Port,
                format!("`{display}` listens on {what}"),
                cmd,
            );
            f.needs = Needs::Contained {
                grants: vec![Grant::OpenNetwork],
            };
            f.reasons.push(format!(
                "port {} is below 1024: a job's forward never takes a privileged port of the \
                 host, so only the open network lets the host reach it",
                privileged.join(", ")
            ));
            f
        };
        f.facts.ports = ports;
        f
    }
}
