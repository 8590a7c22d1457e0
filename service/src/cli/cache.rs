//! `efr-sandbox cache`: the held cache deletes and the conversations' cache layers of
//! [`efr_call::caches`].

use efr_call::caches::{RULES, apply, conversation, held, state_dir, store_path};
use efr_policy::config::Env;

use crate::cli::term::{Stream, inline};

/// `efr-sandbox cache`: the held deletes and the conversations' layers.
#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// List the held cache deletes, one path a line, then each conversation's layer of a
    /// cache (`conversation ID CACHE BYTES`).
    List,
    /// What the merge verifies and merges, by cache kind and path; everything else stays
    /// with the call's conversation.
    Rules,
    /// Remove a conversation's cache layers (what its calls left in caches).
    Clear {
        /// The conversation.
        #[arg(long, value_name = "ID")]
        conversation: String,
    },
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
                outln!(
                    "merge {}: {}: merged when {}",
                    r.merge.as_str(),
                    r.pattern,
                    r.check
                );
            }
            outln!(
                "everything else: never merged (kept for the call's conversation, else dropped)"
            );
            Ok(0)
        }
        CacheCommand::List => {
            let deletes = held(&state).map_err(|e| {
                anyhow::anyhow!("cannot read {}: {e}", store_path(&state).display())
            })?;
            let layers = conversation::list(&state);
            for d in &deletes {
                outln!("{}", inline(Stream::Stdout, &d.path));
            }
            for l in &layers {
                outln!("conversation {} {} {}", l.conversation, l.cache, l.bytes);
            }
            // Said on stderr: stdout stays the list, empty.
            if deletes.is_empty() && layers.is_empty() {
                eprintln!(
                    "efr-sandbox: no held cache deletes and no conversation's cache layers (in {})",
                    state.display()
                );
            }
            Ok(0)
        }
        CacheCommand::Clear { conversation: id } => {
            efr_call::launch::check_conversation(&id).map_err(|e| anyhow::anyhow!(e.message))?;
            match conversation::clear(&state, &id) {
                Ok(true) => {
                    outln!("cleared the cache layers of conversation {id}");
                    Ok(0)
                }
                Ok(false) => {
                    eprintln!("efr-sandbox cache clear: conversation {id} has no cache layers");
                    Ok(2)
                }
                Err(e) => Err(anyhow::anyhow!(
                    "cannot remove the cache layers of conversation {id}: {e}"
                )),
            }
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
                        outln!("deleted {}", inline(Stream::Stdout, p));
                    }
                    outln!("freed {} bytes", a.freed_bytes);
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
