//! What outlives a call, and what does not: `tmux new -d`, `screen -dm`, `pm2 start` and the
//! detaching wrappers (`setsid`, `nohup ... &`, in commands.toml) are `background` exits. A
//! plain `cmd &` job is not: the sandbox ends it when the line ends, and the result's notes
//! say so. A server in such a job is reachable only from the call's own loopback, so it is no
//! `port` exit either.

use efr_sandbox_wire::ExitKind;

use super::walk::{Cmd, Pc, Walker, short};
use super::words::{has_opt, positional};

/// The end of the note on a `cmd &` job.
const JOB_NOTE: &str = "runs as a job of the line: the sandbox ends it when the line ends";

impl Walker<'_> {
    /// A `cmd &` job of the line: no exit; a note that the sandbox ends it with the line.
    pub(super) fn line_job(&mut self, display: &str) {
        self.note(format!("`{}` {JOB_NOTE}", short(display)));
    }

    /// After the walk: a line that disowns its jobs (`cmd & disown`) means them to outlive
    /// it, which its `background` exit says; the job notes would contradict it.
    pub(super) fn finish_notes(&mut self) {
        if self.names.iter().any(|n| n == "disown") {
            self.notes.retain(|n| !n.ends_with(JOB_NOTE));
        }
    }

    pub(super) fn note(&mut self, n: String) {
        if !self.notes.contains(&n) && self.notes.len() < 16 {
            self.notes.push(n);
        }
    }

    /// A server in a plain `&` job of the line (`python -m http.server & curl localhost:8000`)
    /// serves only the line on the call's own loopback and ends with it: no port exit.
    pub(super) fn own_job_server(&mut self, name: &str, pc: Pc, cmd: &Cmd) -> bool {
        if !pc.background || pc.lasting {
            return false;
        }
        let k = self.k;
        let server = k.roles(name).server.is_some()
            || cmd
                .words
                .iter()
                .any(|w| w == "--port" || w.starts_with("--port="));
        if server {
            self.note(format!(
                "`{}` listens only on the call's own loopback, for the line itself",
                short(&cmd.display)
            ));
        }
        server
    }

    /// `[[lasting]]` of commands.toml: the command form leaves a job after the call.
    pub(super) fn lasting(&mut self, name: &str, rest: &[super::walk::Arg], cmd: &Cmd) {
        let k = self.k;
        if !k
            .file
            .lasting
            .iter()
            .any(|l| l.names.iter().any(|n| n == name))
        {
            return;
        }
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        for l in k
            .file
            .lasting
            .iter()
            .filter(|l| l.names.iter().any(|n| n == name))
        {
            if !l.subcommands.is_empty() {
                let pos = positional(&words, &[]);
                if !pos
                    .first()
                    .is_some_and(|s| l.subcommands.iter().any(|x| x == s))
                {
                    continue;
                }
            }
            if !l.when_opts.is_empty() && !l.when_opts.iter().any(|o| has_opt(&words, o)) {
                continue;
            }
            if !l.also_opts.iter().all(|o| has_opt(&words, o))
                || l.unless_opts.iter().any(|o| words.contains(&o.as_str()))
            {
                continue;
            }
            let mut f = self.said(ExitKind::Background, &l.reason, cmd);
            f.background = true;
            self.push(f);
            return;
        }
    }
}
