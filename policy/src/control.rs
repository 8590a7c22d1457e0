//! The sandbox's own control plane: what no contained call may see, reach or be granted,
//! wherever it lives. A call that reached the service's socket could ask for an
//! unsandboxed launch; one that read the runtime dir would see every conversation's `/tmp`
//! and `$SCRATCH`, the service's log and its jobs; one that wrote the state dir could undo
//! the user's surface answers or plant a cache layer.
//!
//! - each service's runtime dir: the directory of its socket (`$XDG_RUNTIME_DIR/efr`, the
//!   directory of `$EFR_SANDBOX_SOCKET`, the service's own `--socket`); when that directory
//!   is `/`, the home or above it (a socket put straight in the home), the socket, its lock
//!   and the service's entries there instead of the whole directory;
//! - the state dirs: `$XDG_STATE_HOME/efr` (the surface's answers, floor backups) and
//!   `$XDG_STATE_HOME/efr-sandbox` (cache layers, held deletes), `~/.local/state/...`
//!   without the variable.
//!
//! The launch view masks each of them (call/src/launch.rs), a grant that would show or reach
//! one is refused (call/src/launch.rs), `explain` and the classifier never propose one, and
//! the service answers a contained peer that reached its socket anyway with nothing but
//! `hello` (service/src/peer.rs).

use std::path::{Path, PathBuf};

use crate::config::Env;

/// The file name of the default service socket in `$XDG_RUNTIME_DIR/efr`.
pub const DEFAULT_SOCKET: &str = "sandbox.sock";

/// The entries a service keeps beside its socket: what is masked one by one when the
/// socket's directory cannot be masked whole.
const RUNTIME_ENTRIES: [&str; 6] = ["serve.log", "jobs", "plans", "tmp", "scratch", "calls"];

/// One path of the control plane, with what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPath {
    /// The path (a directory or a socket).
    pub path: PathBuf,
    /// What it is, for messages.
    pub what: &'static str,
}

/// Every path of the control plane for `env` (see the module doc).
pub fn control_plane(env: &Env) -> Vec<ControlPath> {
    let mut out: Vec<ControlPath> = Vec::new();
    let mut add = |path: PathBuf, what: &'static str| {
        if !out.iter().any(|c| c.path == path) {
            out.push(ControlPath { path, what });
        }
    };
    let sockets = env
        .runtime_dir
        .iter()
        .map(|r| r.join("efr").join(DEFAULT_SOCKET))
        .chain(env.service_sockets.iter().cloned());
    for sock in sockets {
        let Some(dir) = sock.parent().filter(|d| !d.as_os_str().is_empty()) else {
            continue;
        };
        if too_wide(dir, &env.home) {
            add(sock.clone(), "the sandbox service's socket");
            let mut lock = sock.clone().into_os_string();
            lock.push(".lock");
            add(PathBuf::from(lock), "the sandbox service's lock");
            for e in RUNTIME_ENTRIES {
                add(dir.join(e), "the sandbox service's runtime files");
            }
        } else {
            add(
                dir.to_path_buf(),
                "the sandbox service's runtime dir (its socket, every conversation's /tmp \
                 and $SCRATCH, its log and jobs)",
            );
        }
    }
    let state = state_home(env);
    add(
        state.join("efr"),
        "efr's state dir (the surface's answers, floor backups)",
    );
    add(
        state.join("efr-sandbox"),
        "the sandbox's state dir (cache layers, held deletes)",
    );
    out
}

/// `$XDG_STATE_HOME`, else `~/.local/state`.
pub fn state_home(env: &Env) -> PathBuf {
    env.state_home
        .clone()
        .unwrap_or_else(|| env.home.join(".local/state"))
}

/// A directory too wide to mask whole: `/`, the home, or one above the home.
fn too_wide(dir: &Path, home: &Path) -> bool {
    dir == Path::new("/") || home.starts_with(dir)
}

/// The control path that `path` is at or below, if any: a grant of it (a socket, an
/// unmask, a write, a device) would reach the control plane. Also a hard link of one of
/// its sockets elsewhere (the same file: connecting to a link connects to the listener).
pub fn holding<'a>(plane: &'a [ControlPath], path: &Path) -> Option<&'a ControlPath> {
    let canonical = crate::path::canonical_existing(path);
    let by_path = plane.iter().find(|c| {
        std::iter::once(path)
            .chain(canonical.as_deref())
            .any(|p| p.starts_with(&c.path))
    });
    by_path.or_else(|| {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let m = std::fs::metadata(path)
            .ok()
            .filter(|m| m.file_type().is_socket())?;
        let sockets = plane.iter().flat_map(|c| {
            // The control path itself, or the sockets directly in a runtime dir.
            let inside = std::fs::read_dir(&c.path)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path());
            std::iter::once(c.path.clone())
                .chain(inside)
                .map(move |p| (c, p))
        });
        sockets
            .filter_map(|(c, p)| std::fs::symlink_metadata(&p).ok().map(|pm| (c, pm)))
            .find(|(_, pm)| {
                pm.file_type().is_socket() && (pm.dev(), pm.ino()) == (m.dev(), m.ino())
            })
            .map(|(c, _)| c)
    })
}

/// The control path that `path` is at, below or above: an `unmask` of it would lift that
/// path's mask (an unmask of a directory lifts the masks below it).
pub fn reached<'a>(plane: &'a [ControlPath], path: &Path) -> Option<&'a ControlPath> {
    holding(plane, path).or_else(|| {
        let canonical = crate::path::canonical_existing(path);
        plane.iter().find(|c| {
            std::iter::once(path)
                .chain(canonical.as_deref())
                .any(|p| c.path.starts_with(p))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        let mut e = Env::new("/home/u");
        e.runtime_dir = Some(PathBuf::from("/run/user/1000"));
        e
    }

    fn paths(p: &[ControlPath]) -> Vec<String> {
        p.iter().map(|c| c.path.display().to_string()).collect()
    }

    #[test]
    fn the_runtime_and_state_dirs_wherever_they_live() {
        let e = env();
        assert_eq!(
            paths(&control_plane(&e)),
            [
                "/run/user/1000/efr",
                "/home/u/.local/state/efr",
                "/home/u/.local/state/efr-sandbox"
            ]
        );
        // A socket elsewhere, no runtime dir, a state home of its own.
        let mut e = Env::new("/home/u");
        e.service_sockets = vec![PathBuf::from("/var/tmp/efr-x/s.sock")];
        e.state_home = Some(PathBuf::from("/srv/state"));
        assert_eq!(
            paths(&control_plane(&e)),
            ["/var/tmp/efr-x", "/srv/state/efr", "/srv/state/efr-sandbox"]
        );
        // A socket put straight in the home: its entries, never the home.
        let mut e = Env::new("/home/u");
        e.service_sockets = vec![PathBuf::from("/home/u/efr.sock")];
        let p = paths(&control_plane(&e));
        assert!(p.contains(&"/home/u/efr.sock".to_string()), "{p:?}");
        assert!(p.contains(&"/home/u/efr.sock.lock".to_string()), "{p:?}");
        assert!(p.contains(&"/home/u/tmp".to_string()), "{p:?}");
        assert!(!p.contains(&"/home/u".to_string()), "{p:?}");
    }

    #[test]
    fn grants_at_below_or_above() {
        let plane = control_plane(&env());
        let sock = Path::new("/run/user/1000/efr/sandbox.sock");
        assert!(holding(&plane, sock).is_some());
        assert!(holding(&plane, Path::new("/run/user/1000/bus")).is_none());
        assert!(holding(&plane, Path::new("/run/user/1000")).is_none());
        assert!(reached(&plane, Path::new("/run/user/1000")).is_some());
        assert!(reached(&plane, Path::new("/home/u/.local")).is_some());
        assert!(reached(&plane, Path::new("/home/u/proj")).is_none());
    }

    /// A line that reads or writes in the runtime dir gets an exit that needs nothing and
    /// is refused; a path beside it under the same mask keeps its `unmask`.
    #[test]
    fn the_classifier_never_proposes_a_grant_of_it() {
        use crate::classify::{ClassifyRequest, classify};
        use crate::config::Config;
        use crate::context::Context;
        use efr_sandbox_wire::{Grant, Mode, Needs, Verdict};
        // Not under /tmp, which the classifier takes for the call's own.
        let t = tempfile::tempdir_in("/var/tmp").unwrap();
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join("proj")).unwrap();
        let mut e = Env::new(&home);
        e.runtime_dir = Some(t.path().join("run"));
        std::fs::create_dir_all(t.path().join("run/efr")).unwrap();
        std::fs::write(t.path().join("run/efr/serve.log"), "x").unwrap();
        std::fs::write(t.path().join("run/bus"), "x").unwrap();
        let ctx = Context::new(&Config::defaults(), &e);
        let one = |line: &str| {
            let r = classify(
                &ClassifyRequest::new(line, Some(home.join("proj")), Mode::Auto),
                &ctx,
            );
            r.exits
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("no exit: {line}"))
        };
        let rt = t.path().join("run").display().to_string();
        for line in [
            format!("cat {rt}/efr/serve.log"),
            format!("echo x > {rt}/efr/tmp/other/f"),
        ] {
            let x = one(&line);
            assert_eq!(x.needs, Needs::Nothing, "{line}: {x:?}");
            assert_eq!(x.judgement.verdict, Verdict::Refuse, "{line}: {x:?}");
            assert!(
                x.judgement.reasons[0].contains("control plane"),
                "{line}: {x:?}"
            );
        }
        let x = one(&format!("cat {rt}/bus"));
        assert_eq!(
            x.needs,
            Needs::Contained {
                grants: vec![Grant::Unmask {
                    path: format!("{rt}/bus")
                }]
            }
        );
    }

    /// A hard link of the service's socket elsewhere is the same listener.
    #[test]
    fn a_hard_link_of_the_socket_is_the_socket() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("rt");
        std::fs::create_dir(&dir).unwrap();
        let sock = dir.join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let link = t.path().join("elsewhere.sock");
        std::fs::hard_link(&sock, &link).unwrap();
        let mut e = Env::new("/home/u");
        e.service_sockets = vec![sock.clone()];
        let plane = control_plane(&e);
        assert_eq!(holding(&plane, &link).map(|c| &c.path), Some(&dir));
        let other = t.path().join("other.sock");
        let _o = std::os::unix::net::UnixListener::bind(&other).unwrap();
        assert!(holding(&plane, &other).is_none());
    }
}
