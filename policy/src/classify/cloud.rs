//! Cloud copies: `aws s3 cp dist s3://b`, `gsutil rsync . gs://b`, `az storage blob upload`
//! send project data to a storage service with the user's cloud credentials
//! (`[[cloud_copy]]` of commands.toml). Each is an `upload` exit with the service's host; it
//! needs an unsandboxed launch, as the credentials are masked. `rclone`, `scp` and `rsync` to
//! `host:` are read by the walker's network table.

use efr_sandbox_wire::{ExitKind, Needs};

use super::walk::{Arg, Cmd, Env, Walker, short};
use super::words::{opt_values, positional};

impl Walker<'_> {
    pub(super) fn cloud_copy(&mut self, name: &str, rest: &[Arg], env: &Env, cmd: &Cmd) {
        let k = self.k;
        if !k
            .file
            .cloud_copy
            .iter()
            .any(|c| c.names.iter().any(|n| n == name))
        {
            return;
        }
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        for c in k
            .file
            .cloud_copy
            .iter()
            .filter(|c| c.names.iter().any(|n| n == name))
        {
            // options are skipped; the valued ones of the table take their word
            let pos = positional(&words, &c.account_opts);
            let Some(after) = starts(&pos, &c.words) else {
                continue;
            };
            let mut bucket = String::new();
            let mut shown = String::new();
            if !c.schemes.is_empty() {
                // an upload: a local source first, a remote destination after it
                let remote = |w: &str| c.schemes.iter().any(|s| w.starts_with(s.as_str()));
                if after.first().is_none_or(|w| remote(w)) {
                    continue;
                }
                let Some(dest) = after.iter().skip(1).find(|w| remote(w)) else {
                    continue;
                };
                let tail = dest.split_once("://").map(|x| x.1).unwrap_or(dest);
                bucket = tail.split('/').next().unwrap_or("").to_string();
                shown = (*dest).to_string();
            }
            let account = opt_values(&words, &c.account_opts)
                .into_iter()
                .next()
                .or_else(|| {
                    (!c.account_env.is_empty())
                        .then(|| env.vars.get(&c.account_env).cloned().flatten())
                        .flatten()
                })
                .unwrap_or_default();
            let host = fill(&fill(&c.host, "{bucket}", &bucket), "{account}", &account);
            if host.is_empty() {
                continue;
            }
            let to = if shown.is_empty() {
                host.clone()
            } else {
                shown
            };
            let mut f = self.host_finding(
                ExitKind::Upload,
                &host,
                None,
                false,
                format!("`{}` uploads to {to}", short(&cmd.display)),
                cmd,
            );
            f.needs = Needs::Unsandboxed;
            f.reasons.push(c.reason.clone());
            f.reasons
                .push("it needs your cloud credentials, which the sandbox hides".into());
            self.push(f);
            return;
        }
    }
}

/// `pos` starts with `words` (compared as strings).
fn starts<'a, 'b>(pos: &'b [&'a str], words: &[String]) -> Option<&'b [&'a str]> {
    (pos.len() >= words.len() && pos.iter().zip(words).all(|(p, w)| p == w))
        .then(|| &pos[words.len()..])
}

/// The template with `key` replaced; an unknown (empty) value drops its label (`{account}.`).
fn fill(template: &str, key: &str, value: &str) -> String {
    if value.is_empty() {
        template.replace(&format!("{key}."), "").replace(key, "")
    } else if value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        template.replace(key, &value.to_ascii_lowercase())
    } else {
        template.replace(&format!("{key}."), "")
    }
}
