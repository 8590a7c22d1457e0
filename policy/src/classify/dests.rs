//! Writes whose target is an argument, a directory option or a variable: `make install
//! PREFIX=/usr/local`, `DESTDIR=/opt/x ninja install`, `cmake --install build --prefix
//! ~/.local`, `pip install --target DIR`, `cargo install --root DIR` (`[[install_dest]]` of
//! commands.toml), and git run in another repository (`git -C ../other pull`, `git worktree
//! add ../x`; `[git_writes]`). Each target is classified like any written path: inside the
//! project it is no exit, outside it is a `write`.

use std::path::Path;

use efr_sandbox_wire::TargetOp;

use super::walk::{Arg, Cmd, Env, Walker};
use super::words::{is_opt, opt_values, positional};
use crate::knowledge::InstallDest;

impl Walker<'_> {
    /// The destinations an installing command writes.
    fn dest_paths(&self, d: &InstallDest, rest: &[Arg], env: &Env) -> Vec<String> {
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        let pos = positional(&words, &d.dest_opts);
        if !d.subcommands.is_empty()
            && !pos
                .first()
                .is_some_and(|s| d.subcommands.iter().any(|x| x == s))
        {
            return Vec::new();
        }
        let target = |p: &str| {
            d.targets.iter().any(|t| match t.strip_suffix('*') {
                Some(prefix) => p.starts_with(prefix),
                None => p == t,
            })
        };
        if !d.targets.is_empty() && !pos.iter().any(|p| target(p)) {
            return Vec::new();
        }
        if !d.when_opts.is_empty() && !words.iter().any(|w| d.when_opts.iter().any(|o| o == w)) {
            return Vec::new();
        }
        let mut out = opt_values(&words, &d.dest_opts);
        for w in &pos {
            if let Some((n, v)) = w.split_once('=') {
                if d.var_args.iter().any(|x| x == n) && !v.is_empty() {
                    out.push(v.to_string());
                }
            }
        }
        if out.is_empty() {
            for v in &d.env_vars {
                if let Some(Some(val)) = env.vars.get(v) {
                    if !val.is_empty() {
                        out.push(val.clone());
                    }
                }
            }
        }
        out.dedup();
        out
    }

    /// Whether the command names where it installs (then a registry's default place, such as
    /// `~/.cargo/bin`, is not where it writes).
    pub(super) fn names_install_dest(&self, name: &str, rest: &[Arg], env: &Env) -> bool {
        let k = self.k;
        k.file
            .install_dest
            .iter()
            .filter(|d| d.names.iter().any(|n| n == name))
            .any(|d| !self.dest_paths(d, rest, env).is_empty())
    }

    pub(super) fn install_dests(&mut self, name: &str, rest: &[Arg], env: &Env, cmd: &Cmd) {
        let k = self.k;
        if !k
            .file
            .install_dest
            .iter()
            .any(|d| d.names.iter().any(|n| n == name))
        {
            return;
        }
        for d in k
            .file
            .install_dest
            .iter()
            .filter(|d| d.names.iter().any(|n| n == name))
        {
            let paths = self.dest_paths(d, rest, env);
            if paths.is_empty() {
                continue;
            }
            let from = self.findings.len();
            for p in paths {
                if p.contains('$') {
                    // `PREFIX=$X`: a variable the line does not set
                    self.note_opaque(format!(
                        "`{}` installs into {p}, which efr cannot know",
                        super::walk::short(&cmd.display)
                    ));
                    continue;
                }
                let a = self.word_arg(rest, &p);
                self.touch(&a, TargetOp::Write, env, cmd, false);
            }
            self.give_reason(from, &d.reason);
            return;
        }
    }

    /// The argument whose text holds `value` (so an unknown part stays unknown), else a
    /// literal (a value from a variable).
    fn word_arg(&self, rest: &[Arg], value: &str) -> Arg {
        rest.iter()
            .find(|a| a.text == value)
            .cloned()
            .unwrap_or_else(|| Arg::lit(value))
    }

    /// A git subcommand that changes the repository it runs in, run in `repo`: a write there
    /// (no exit inside the project). `git worktree add PATH` writes PATH.
    pub(super) fn git_writes(
        &mut self,
        sub: &str,
        repo: Option<&Path>,
        args: &[Arg],
        env: &Env,
        cmd: &Cmd,
    ) {
        let k = self.k;
        if sub == "worktree" {
            let words: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
            let valued = ["-b", "-B", "--reason"].map(String::from);
            let pos = positional(&words, &valued);
            let (op, path) = match pos.as_slice() {
                ["add", path, ..] => (TargetOp::Write, *path),
                ["move", _, to, ..] => (TargetOp::Write, *to),
                ["remove", path, ..] => (TargetOp::Delete, *path),
                _ => return,
            };
            let a = self.word_arg(args, path);
            // a relative path is relative to the repository git runs in
            let mut e = env.clone();
            if let Some(r) = repo {
                e.cwd = Some(r.to_path_buf());
            }
            self.touch(&a, op, &e, cmd, op == TargetOp::Delete);
            return;
        }
        let gw = &k.file.git_writes;
        let writes = gw.subcommands.iter().any(|s| s == sub)
            || (gw.with_args.iter().any(|s| s == sub) && !args.is_empty());
        if !writes {
            return;
        }
        // `git stash list`, `git branch --list`: readers
        let first = args
            .iter()
            .find(|a| !is_opt(&a.text))
            .map(|a| a.text.as_str());
        if matches!((sub, first), ("stash", Some("list" | "show")))
            || args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "--list"
                        | "-l"
                        | "--show-current"
                        | "-a"
                        | "--all"
                        | "-r"
                        | "--remotes"
                        | "-v"
                        | "--contains"
                        | "--merged"
                        | "--no-merged"
                )
            }) && matches!(sub, "branch" | "tag")
        {
            return;
        }
        let Some(repo) = repo else { return };
        // the work tree and the git dir: everything in the repository
        let a = Arg {
            glob: true,
            ..Arg::lit(&format!("{}/*", repo.to_string_lossy()))
        };
        let from = self.findings.len();
        self.touch(&a, TargetOp::Write, env, cmd, false);
        let why = k.file.git_writes.reason.clone();
        self.give_reason(from, &format!("git {sub} {why}"));
    }
}
