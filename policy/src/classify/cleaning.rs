//! Cache cleaning: `npm cache clean`, `pip cache purge`, `go clean -modcache`, ... delete a
//! real cache (`[[cache_clean]]` of commands.toml). Each path is a `cache_delete` exit with the
//! cache as its target (class `cache`, from `caches` of defaults.toml).

use efr_sandbox_wire::TargetOp;

use super::walk::{Arg, Cmd, Env, Walker};
use super::words::{home_path, opt_values, positional};

impl Walker<'_> {
    pub(super) fn cache_clean(&mut self, name: &str, rest: &[Arg], env: &Env, cmd: &Cmd) {
        let k = self.k;
        if !k
            .file
            .cache_clean
            .iter()
            .any(|c| c.names.iter().any(|n| n == name))
        {
            return;
        }
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        let pos = positional(&words, &[]);
        for c in k
            .file
            .cache_clean
            .iter()
            .filter(|c| c.names.iter().any(|n| n == name))
        {
            if pos.len() < c.words.len() || pos.iter().zip(&c.words).any(|(p, w)| p != w) {
                continue;
            }
            if !c.when_opts.is_empty() && !words.iter().any(|w| c.when_opts.iter().any(|o| o == w))
            {
                continue;
            }
            let from = self.findings.len();
            let named = opt_values(&words, &c.dir_opts);
            if named.is_empty() {
                for cache in &c.caches {
                    let p = home_path(cache, &self.ctx.home);
                    self.touch(&Arg::lit(&p), TargetOp::Delete, env, cmd, true);
                }
            }
            for d in named {
                let a = rest
                    .iter()
                    .find(|a| a.text == d)
                    .cloned()
                    .unwrap_or_else(|| Arg::lit(&d));
                self.touch(&a, TargetOp::Delete, env, cmd, true);
            }
            self.give_reason(from, &c.reason);
            return;
        }
    }
}
