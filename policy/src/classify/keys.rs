//! Keys generated into a directory: `ssh-keygen -f ~/.ssh/deploy` writes the key pair there,
//! `gpg --gen-key` writes the keyring (`[[keygen]]` of commands.toml). The file is a write of
//! the masked directory (unmask and write), not a read of it.

use super::walk::{Arg, Env, Walker};
use super::words::{has_opt, home_path, opt_values};

impl Walker<'_> {
    /// The files the command writes as keys; the walker writes them and does not take them as
    /// reads of a masked path.
    pub(super) fn key_files(&self, name: &str, rest: &[Arg], env: &Env) -> Vec<Arg> {
        let k = self.k;
        let Some(g) = k
            .file
            .keygen
            .iter()
            .find(|g| g.names.iter().any(|n| n == name))
        else {
            return Vec::new();
        };
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        if g.read_opts.iter().any(|o| has_opt(&words, o)) {
            return Vec::new();
        }
        if !g.when_opts.is_empty() && !words.iter().any(|w| g.when_opts.iter().any(|o| o == w)) {
            return Vec::new();
        }
        // a named key file, as written on the line (so the walker can skip its read)
        let named: Vec<Arg> = rest
            .iter()
            .enumerate()
            .filter(|(i, _)| *i > 0 && g.file_opts.iter().any(|o| o == &rest[i - 1].text))
            .map(|(_, a)| a.clone())
            .collect();
        if !named.is_empty() {
            return named;
        }
        let dir = opt_values(&words, &g.dir_opts)
            .into_iter()
            .next()
            .or_else(|| {
                (!g.dir_env.is_empty())
                    .then(|| env.vars.get(&g.dir_env).cloned().flatten())
                    .flatten()
            });
        let other = g.other_opts.iter().any(|o| has_opt(&words, o));
        let path = match dir {
            Some(d) => d,
            None if other => home_path(&g.other_default, &self.ctx.home),
            None => {
                let ty = opt_values(&words, &g.type_opts)
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| g.default_type.clone())
                    .replace('-', "_");
                home_path(&g.default.replace("{type}", &ty), &self.ctx.home)
            }
        };
        vec![Arg::lit(&path)]
    }
}
