//! `efr-sandbox cache`: the held cache deletes of [`efr_call::caches`].

use efr_call::caches::{RULES, RuleKind, apply, held, state_dir, store_path};
use efr_policy::config::Env;

use crate::cli::term::{Stream, inline};

/// `efr-sandbox cache`: the held deletes.
#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// List the held cache deletes, one path a line.
    List,
    /// What the merge verifies or leaves out, by path pattern, and why.
    Rules,
    /// Apply held cache deletes (paths as `cache list` or a call's summary shows them).
    Apply {
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<String>,
    },
}

/// Runs `efr-sandbox cache ...`; the exit status (2 for an unknown or stale path).
pub fn cache_cli(c: CacheCommand) -> anyhow::Result<i32> {
    let env = Env::from_process();
    let state = state_dir(&env);
    match c {
        CacheCommand::Rules => {
            for r in RULES {
                let what = match r.kind {
                    RuleKind::NpmContent => "verified (hash), never replaced",
                    RuleKind::NpmIndex => "lines added, unverified ones dropped",
                    RuleKind::CargoCrate => "checked against the host's index, never replaced",
                    RuleKind::Skip => "not merged",
                    RuleKind::Refuse => "refused",
                };
                println!(".../{}: {what}: {}", r.pattern.join("/"), r.reason);
            }
            Ok(0)
        }
        CacheCommand::List => {
            for d in held(&state)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", store_path(&state).display()))?
            {
                println!("{}", inline(Stream::Stdout, &d.path));
            }
            Ok(0)
        }
        CacheCommand::Apply { paths } => {
            let paths: Vec<String> = paths
                .iter()
                .map(|p| {
                    if p.starts_with("~/") {
                        efr_policy::path::expand_home(p, &env.home)
                            .to_string_lossy()
                            .into_owned()
                    } else {
                        p.clone()
                    }
                })
                .collect();
            match apply(&state, &paths) {
                Ok(a) => {
                    for p in &a.paths {
                        println!("deleted {}", inline(Stream::Stdout, p));
                    }
                    println!("freed {} bytes", a.freed_bytes);
                    Ok(0)
                }
                Err(e) => {
                    eprintln!(
                        "efr-sandbox cache apply: {}",
                        inline(Stream::Stderr, &e.to_string())
                    );
                    Ok(if e.is_invalid() { 2 } else { 1 })
                }
            }
        }
    }
}
