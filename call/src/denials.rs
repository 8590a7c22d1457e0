//! The exit records of what the sandbox refused a call (from the launcher's status
//! lines): a write (to a masked path, a lock file, a floor, a cache), a git code write, a
//! socket, a loopback port. Each says what the call needs to do it and how the policy
//! judges that.

use std::path::{Path, PathBuf};

use efr_policy::config::{Config, Env};
use efr_policy::explain;
use efr_sandbox_wire::{
    Action, ExitKind, ExitRecord, ExitSource, Facts, Grant, HostFact, JudgedBy, Judgement, Needs,
    Target, TargetClass, TargetOp, Verdict,
};

/// The exit record of a refused write to `path` (kind `write`, source `denial`): what every
/// write refusal shares; the caller gives what it needs and how it is judged.
fn write_denial(
    n: usize,
    path: &str,
    line: &str,
    class: TargetClass,
    masked: bool,
    needs: Needs,
    judgement: Judgement,
) -> ExitRecord {
    ExitRecord {
        id: format!("denial-{}", n + 1),
        source: ExitSource::Denial,
        kind: ExitKind::Write,
        summary: format!("write {path} (refused by the sandbox)"),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            targets: vec![Target {
                path: path.to_string(),
                class,
                op: TargetOp::Write,
                backup_before_write: false,
                masked,
            }],
            ..Default::default()
        },
        needs,
        judgement,
    }
}

/// The exit record of a refused write to a masked path `path` (the mask `mask`): needs the
/// `unmask` grant of the mask, judged `review` by policy.
fn unmask_record(
    n: usize,
    path: &str,
    mask: &str,
    line: &str,
    class: TargetClass,
    why: &str,
) -> ExitRecord {
    write_denial(
        n,
        path,
        line,
        class,
        true,
        Needs::Contained {
            grants: vec![Grant::Unmask {
                path: mask.to_string(),
            }],
        },
        Judgement {
            verdict: Verdict::Review,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the sandbox refused a write to {path}, which is masked ({why}); the grant \
                 unmask={mask} lifts the mask and lets the call write it (a write grant \
                 leaves the mask in place)"
            )],
        },
    )
}

/// The plain file `FILE` whose lock file `path` (`FILE.lock`) is, when it exists.
fn lock_target(path: &str) -> Option<String> {
    let file = path.strip_suffix(".lock").filter(|f| !f.ends_with('/'))?;
    std::fs::symlink_metadata(file)
        .is_ok_and(|m| m.is_file())
        .then(|| file.to_string())
}

/// The exit record of a refused lock file `path` of `file` that no grant of a contained
/// call makes work (outside the projects: its directory stays read-only to the call): a
/// grant of the lock would need it made on the host first and would leave it there, where
/// the next writer fails with `File exists`. Needs the line run unsandboxed (`user_only`).
fn lock_record(n: usize, path: &str, file: &str, line: &str, class: TargetClass) -> ExitRecord {
    write_denial(
        n,
        path,
        line,
        class,
        false,
        Needs::Unsandboxed,
        Judgement {
            verdict: Verdict::UserOnly,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "{path} is the lock file of {file}: its writer makes it next to {file} and \
                 renames it onto it, in a directory a contained call cannot write (a grant \
                 of a file brings its lock file only inside a project, and a grant of the \
                 lock would leave it on your disk, where the next writer fails with `File \
                 exists`); only you can run the line unsandboxed"
            )],
        },
    )
}

/// The exit record of one refused write: kind `write`, source `denial`, needs a contained
/// call with a `write` grant (`unmask` for a masked path: a write grant leaves the mask),
/// judged `review` by policy (`user_only` by floor for a floor).
pub fn denial_record(
    n: usize,
    path: &str,
    line: &str,
    projects: &[String],
    config: &Config,
    env: &Env,
) -> ExitRecord {
    let projects: Vec<PathBuf> = projects.iter().map(PathBuf::from).collect();
    let ex = explain::explain_path(Path::new(path), None, &projects, config, env).ok();
    let class = ex.as_ref().map(|e| e.class).unwrap_or(TargetClass::System);
    let floor = ex.as_ref().and_then(|e| e.floor.clone());
    let why = ex
        .as_ref()
        .and_then(|e| e.read_only.clone().or(e.masked.clone()))
        .map(|h| h.reason)
        .unwrap_or_else(|| "outside the call's writable roots".into());
    // A write in a cache: the grant is the cache's root (the next write of the same tool
    // lands elsewhere in it); anywhere else (a read-only path of the project, the home, the
    // system), the path itself.
    let cache = (class == TargetClass::Cache)
        .then(|| cache_root(Path::new(path), config, env))
        .flatten();
    let hint = ex.as_ref().and_then(|e| e.grant.as_ref()).map(|h| &h.grant);
    // A masked path: the grant that lifts the mask (a write grant would leave it, and the
    // write would fail again).
    if let (Some(Grant::Unmask { path: m }), Some(e)) = (hint, &ex)
        && e.masked.is_some()
        && floor.is_none()
    {
        return unmask_record(n, path, m, line, class, &why);
    }
    let lock_writer = !matches!(hint, Some(Grant::Write { path: f }) if f != path);
    if let (true, None, None, Some(file)) = (lock_writer, &cache, &floor, lock_target(path)) {
        return lock_record(n, path, &file, line, class);
    }
    let (grant_path, why) = match &cache {
        Some((root, reason)) => (
            root.to_string_lossy().into_owned(),
            format!(
                "in the cache {} ({reason}), read-only to a call",
                root.display()
            ),
        ),
        None => match hint {
            // The lock file of a file in the project (git writes `.git/config` by
            // `.git/config.lock` and a rename): the grant is the file, which brings its lock
            // file with it (a grant of the lock itself would leave it on the host).
            Some(Grant::Write { path: file }) if file != path => (
                file.clone(),
                format!("{why}; it is the lock file of {file}, which the writer renames onto it"),
            ),
            _ => (path.to_string(), why),
        },
    };
    let judgement = match &floor {
        Some(f) => Judgement {
            verdict: Verdict::UserOnly,
            by: JudgedBy::Floor,
            reasons: vec![format!(
                "the sandbox refused a write to {path}, a floor path ({}); only you can allow it",
                f.reason
            )],
        },
        None => Judgement {
            verdict: Verdict::Review,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the sandbox refused a write to {path} ({why}); the grant write={grant_path} \
                 lets the call do it{}",
                if Path::new(&grant_path).symlink_metadata().is_err() {
                    " once the path exists (a write grant names a path that exists)"
                } else {
                    ""
                }
            )],
        },
    };
    write_denial(
        n,
        path,
        line,
        class,
        class == TargetClass::Masked,
        Needs::Contained {
            grants: vec![Grant::Write { path: grant_path }],
        },
        judgement,
    )
}

/// The exit record of a write refused because it would leave code git runs in a directory
/// git takes as a git dir (a config key off `git.safe_config_keys`, a hook): kind `write`,
/// source `denial`. No grant of a contained call lets it through (the supervisor checks it
/// in every writable place), so it needs the line run unsandboxed, which only the user
/// approves (`user_only`): the git code would then run as the user.
pub fn git_denial_record(
    n: usize,
    g: &efr_sandbox_wire::GitDenial,
    line: &str,
    projects: &[String],
    config: &Config,
    env: &Env,
) -> ExitRecord {
    let projects: Vec<PathBuf> = projects.iter().map(PathBuf::from).collect();
    let class = explain::explain_path(Path::new(&g.path), None, &projects, config, env)
        .map(|e| e.class)
        .unwrap_or(TargetClass::System);
    ExitRecord {
        summary: format!("write {} (git code, refused by the sandbox)", g.path),
        ..write_denial(
            n,
            &g.path,
            line,
            class,
            false,
            Needs::Unsandboxed,
            Judgement {
                verdict: Verdict::UserOnly,
                by: JudgedBy::Policy,
                reasons: vec![format!(
                    "{}: git would run it outside the sandbox (its directory is one git takes \
                     as a git dir), so no grant lets a contained call write it; only you can \
                     run the line unsandboxed",
                    g.reason
                )],
            },
        )
    }
}

/// `p` with the links of its longest existing ancestor resolved, the rest appended as
/// written (a refused write is often to a file that does not exist).
fn canonical_lexical(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(c) = std::fs::canonicalize(&cur) {
            return rest.iter().rev().fold(c, |acc: PathBuf, n| acc.join(n));
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n);
                cur = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// The root of the `sandbox.caches` entry that holds `path` (the deepest), and its reason.
/// Entries are a path (`~/` against the home); one with a wildcard names no one root and is
/// skipped.
fn cache_root(path: &Path, config: &Config, env: &Env) -> Option<(PathBuf, String)> {
    let canon = canonical_lexical(path);
    config
        .sandbox
        .caches
        .iter()
        .filter(|e| !e.value.contains(['*', '?', '[']))
        .filter_map(|e| {
            let p = efr_policy::path::expand_home(&e.value, &env.home);
            let root = canonical_lexical(&p);
            canon.starts_with(&root).then(|| (root, e.reason.clone()))
        })
        .max_by_key(|(r, _)| r.components().count())
}

/// The exit record of one refused path socket: kind `socket`, source `denial`, needs a
/// contained call with a `socket` grant, judged `review` (a host socket is often a way to
/// run code outside: the user decides).
pub fn socket_denial_record(n: usize, path: &str, line: &str) -> ExitRecord {
    ExitRecord {
        id: format!("denial-{}", n + 1),
        source: ExitSource::Denial,
        kind: ExitKind::Socket,
        summary: format!("connect to the socket {path} (refused by the sandbox)"),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            targets: vec![Target {
                path: path.to_string(),
                class: TargetClass::System,
                op: TargetOp::Write,
                backup_before_write: false,
                masked: false,
            }],
            ..Default::default()
        },
        needs: Needs::Contained {
            grants: vec![Grant::Socket {
                path: path.to_string(),
            }],
        },
        judgement: Judgement {
            verdict: Verdict::Review,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the sandbox refused the call a socket outside its own places ({path}); a \
                 socket grant lets it through, and whatever serves that socket then acts for \
                 the call outside the sandbox"
            )],
        },
    }
}

/// The exit record of a connect to the call's own loopback on `port` that was refused
/// (nothing of the call listens there): kind `host`, source `denial`, needs the `tcp` host
/// grant `host=localhost:PORT:tcp`, which relays the call's connections on that port to the
/// host's, judged `review` by policy.
pub fn loopback_record(n: usize, port: u16, line: &str) -> ExitRecord {
    ExitRecord {
        id: format!("denial-{}", n + 1),
        source: ExitSource::Denial,
        kind: ExitKind::Host,
        summary: format!(
            "connect to localhost:{port} (refused: the call's loopback is its own, the host's \
             is not reachable)"
        ),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            hosts: vec![HostFact {
                host: "localhost".into(),
                port: Some(port),
                project_remote: false,
            }],
            ..Default::default()
        },
        needs: Needs::Contained {
            grants: vec![Grant::Host {
                host: "localhost".into(),
                port: Some(port),
                plain_http: false,
                tcp: true,
            }],
        },
        judgement: Judgement {
            verdict: Verdict::Review,
            by: JudgedBy::Policy,
            reasons: vec![format!(
                "the call connected to localhost:{port} and was refused: the call's loopback \
                 is its own and nothing of the call listens on that port; the host's \
                 localhost:{port} needs a tcp host grant (host=localhost:{port}:tcp), which \
                 relays the call's connections there, any protocol, to whatever serves that \
                 port on the host"
            )],
        },
    }
}
