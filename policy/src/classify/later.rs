//! A download run later in the same line: `curl -o x.sh URL && bash x.sh`, `wget -O- URL > f;
//! sh f`, `wget URL/tool && chmod +x tool && ./tool`. The walker remembers the files that a
//! downloader writes (its output option, the name of the URL, or its stdout redirected to a
//! file); a shell, an interpreter or `source` that runs one, or running it as a program, is the
//! same floor as a pipe into a shell (`download_to_shell`).

use std::path::PathBuf;

use super::walk::{Arg, Cmd, Env, Walker, basename, short};
use super::words::{is_opt, opt_values};
use crate::shell::Redir;

/// The downloaders whose output files the walker follows.
const DOWNLOADERS: [&str; 6] = ["curl", "wget", "wget2", "aria2c", "axel", "fetch"];

impl Walker<'_> {
    /// Remember the files a downloader writes.
    pub(super) fn record_download(&mut self, args: &[Arg], redirs: &[Redir], env: &Env) {
        let Some(a0) = args.first().filter(|a| a.known) else {
            return;
        };
        let name = basename(&a0.text);
        if !DOWNLOADERS.contains(&name) {
            return;
        }
        let words: Vec<&str> = args[1..].iter().map(|a| a.text.as_str()).collect();
        let urls: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| w.contains("://"))
            .collect();
        let url_name = |u: &str| -> Option<String> {
            let path = u.split_once("://")?.1.split(['?', '#']).next()?;
            let (_, file) = path.split_once('/')?;
            let last = file.rsplit('/').next().unwrap_or("");
            (!last.is_empty()).then(|| last.to_string())
        };
        let v = |opts: &[&str]| {
            let opts: Vec<String> = opts.iter().map(|o| o.to_string()).collect();
            opt_values(&words, &opts)
        };
        let mut files: Vec<String> = Vec::new();
        let mut stdout = false;
        let dir: Option<String>;
        match name {
            "curl" => {
                files.extend(v(&["-o", "--output"]));
                let mut remote_name = false;
                for (i, w) in words.iter().enumerate() {
                    let group = w.len() > 2
                        && w.starts_with('-')
                        && !w.starts_with("--")
                        && w[1..].chars().all(|c| c.is_ascii_alphabetic());
                    if group && w.ends_with('o') {
                        files.extend(words.get(i + 1).map(|f| f.to_string()));
                    }
                    if *w == "-O"
                        || *w == "--remote-name"
                        || *w == "--remote-name-all"
                        || (group && w.contains('O'))
                    {
                        remote_name = true;
                    }
                }
                if remote_name {
                    files.extend(urls.iter().filter_map(|u| url_name(u)));
                }
                dir = v(&["--output-dir"]).into_iter().next();
                stdout = files.is_empty();
            }
            "wget" | "wget2" => {
                let mut named = v(&["-O", "--output-document"]);
                // `-qO FILE`, `-qO-`: -O at the end of a group of short options
                for (i, w) in words.iter().enumerate() {
                    if w.len() > 2 && w.starts_with('-') && !w.starts_with("--") && w != &"-O-" {
                        let letters = w[1..].trim_end_matches('-');
                        if letters.chars().all(|c| c.is_ascii_alphabetic())
                            && letters.ends_with('O')
                        {
                            if w.ends_with('-') {
                                named.push("-".into());
                            } else if let Some(f) = words.get(i + 1) {
                                named.push((*f).to_string());
                            }
                        }
                    }
                }
                if named.iter().any(|f| f == "-") {
                    stdout = true;
                } else if named.is_empty() {
                    files.extend(urls.iter().filter_map(|u| url_name(u)));
                } else {
                    files.extend(named);
                }
                dir = v(&["-P", "--directory-prefix"]).into_iter().next();
            }
            _ => {
                let named = v(&["-o", "--out", "--output"]);
                if named.is_empty() {
                    files.extend(urls.iter().filter_map(|u| url_name(u)));
                } else {
                    files.extend(named);
                }
                dir = v(&["-d", "--dir"]).into_iter().next();
            }
        }
        if stdout {
            for r in redirs {
                if r.op.writes() && r.fd.unwrap_or(1) == 1 {
                    files.extend(r.target.literal());
                }
            }
        }
        for f in files {
            let f = match &dir {
                Some(d) if !f.starts_with('/') => format!("{}/{f}", d.trim_end_matches('/')),
                _ => f,
            };
            if let Some(p) = self.resolve(&Arg::lit(&f), env) {
                if !self.downloaded.contains(&p) && self.downloaded.len() < 64 {
                    self.downloaded.push(p);
                }
            }
        }
    }

    /// The command runs a file the line downloaded: as a program (`./tool`), or as the script
    /// of a shell, an interpreter or `source`.
    pub(super) fn runs_download(
        &mut self,
        name: &str,
        a0: &Arg,
        rest: &[Arg],
        env: &Env,
        cmd: &Cmd,
    ) {
        if self.downloaded.is_empty() {
            return;
        }
        let downloaded = |w: &Walker<'_>, a: &Arg| -> Option<PathBuf> {
            w.resolve(a, env).filter(|p| w.downloaded.contains(p))
        };
        let k = self.k;
        let roles = k.roles(name);
        let ran = if a0.text.contains('/') {
            downloaded(self, a0)
        } else if roles.shell.is_some() || roles.inline.is_some() || matches!(name, "source" | ".")
        {
            // `bash -c ...`, `python3 -c ...` run a string, not a file
            let code_opts = roles
                .inline
                .map(|i| k.file.inline[i].code_opts.as_slice())
                .unwrap_or_default();
            if rest
                .iter()
                .any(|a| a.text == "-c" || code_opts.contains(&a.text))
            {
                None
            } else {
                rest.iter()
                    .find(|a| !is_opt(&a.text))
                    .and_then(|a| downloaded(self, a))
            }
        } else {
            None
        };
        if let Some(p) = ran {
            let shown = super::paths::display(self.ctx, &p);
            self.floor(
                "download_to_shell",
                false,
                format!(
                    "`{}` runs {shown}, which the line downloaded",
                    short(&cmd.display)
                ),
                cmd,
                |_| {},
            );
        }
    }
}
