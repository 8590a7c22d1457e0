//! `sandbox.explain`: what a contained call gets at a path, and which rule says so (design
//! sections 4 and 6).
//!
//! [`explain`] answers for one path, given the loaded [`Config`] and an [`Env`]:
//!
//! 1. The path is made absolute (`~` against the home, a relative path against `cwd`), then
//!    resolved as the kernel does: every link followed, `..` taken physically; the part that
//!    does not exist is appended lexically. `kind` is the `lstat` of the path itself; the link
//!    it goes through (the path itself, else its first parent that is one) is `link`.
//! 2. Writable roots: the projects of the request (`--project`), `sandbox.writable`,
//!    `$SCRATCH` and `/tmp` (`builtin`). The deepest root holding the path is the one that
//!    counts.
//! 3. Masked (`sandbox.masks`): the path, or any link it passes, is at or under a mask (the
//!    mask's path taken as written and with its links resolved). A writable root that lies
//!    inside a mask is bound on top of it, so what is under such a root is not masked.
//! 4. Floor (`floors.paths`): the canonical path is at or under a floor path.
//! 5. Read-only inside a writable root (`sandbox.read_only_inside`, and `floors.paths`):
//!    relative rules taken inside each project root and `sandbox.writable` path; the rules
//!    under `.git/` also apply to the git dir a `.git` file points to (a worktree or a
//!    submodule) and to its `commondir`, and the `.git` file itself is read-only.
//! 6. Class (first that applies): `masked`, `floor`, then the deepest of project
//!    (`build_output` when a component below the root is a `sandbox.build_output` name),
//!    scratch, tmp, `sandbox.caches` (`cache`), `sandbox.trash` (`trash`), home; else
//!    `system`.
//! 7. Access: `none` when masked, for a host socket outside the writable roots (a `socket`
//!    grant names one) and for a device the sandbox's `/dev` does not have; `write` inside a
//!    writable root unless read-only there; else `read`.
//! 8. The grant that would change it: `unmask` the mask, `write` a floor path (user only),
//!    `write` a read-only path, `socket` or `device`.
//!
//! Shown form: `<root name>/rel` inside a project root (the root itself is `<root name>`),
//! `$SCRATCH/rel`, `~/rel`, else absolute. Bytes that are not UTF-8 show as `\xNN` (and set
//! `non_utf8`); an `\xNN` in the asked path is read as that byte when the path as written
//! does not exist.

mod text;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use efr_sandbox_wire::{
    Access, ExplainParams, ExplainResult, FileKind, Grant, GrantHint, LinkInfo, RuleHit,
    TargetClass,
};

use crate::config::rules::{is_pattern, pattern_covers, wildcard};
use crate::config::{Config, Entry, Env, RulePath};
use crate::path::{LinkStep, Walk, canonical, kind, lkind, resolve};

pub use text::render_text;

/// Why a path could not be explained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    /// The path asked, or a project root given, is empty.
    #[error("cannot explain an empty path")]
    EmptyPath,
    /// The path holds a NUL byte, which no file name can.
    #[error("cannot explain {path}: it holds a nul byte")]
    Nul {
        /// The path asked.
        path: String,
    },
    /// A relative path, and neither the request nor the environment gives a working
    /// directory.
    #[error("cannot explain relative path {path}: no working directory was given")]
    NoCwd {
        /// The path asked.
        path: String,
    },
    /// A relative path, and the working directory to resolve it in is relative too.
    #[error("cannot explain {path}: working directory {cwd} is not absolute")]
    RelativeCwd {
        /// The path asked.
        path: String,
        /// The working directory given.
        cwd: String,
    },
    /// A path (asked, working directory or project root) starts with `~user`; only the home
    /// itself (`~`, `~/...`) is expanded.
    #[error("cannot explain {path}: ~user paths are not supported, only ~ and ~/...")]
    TildeUser {
        /// The path asked.
        path: String,
    },
}

/// Explains the path of `params` (see the module doc). `params.projects` are the writable
/// project roots; `env.scratch` and `env.tmp` are writable too.
pub fn explain(
    params: &ExplainParams,
    config: &Config,
    env: &Env,
) -> Result<ExplainResult, ExplainError> {
    if params.path.contains('\0') {
        return Err(ExplainError::Nul {
            path: params.path.clone(),
        });
    }
    let cwd = match &params.cwd {
        Some(c) => Some(absolute_cwd(c, env, &params.path)?),
        None => env.cwd.clone(),
    };
    let mut projects = Vec::new();
    for p in &params.projects {
        projects.push(absolute(&decode_arg(p), cwd.as_deref(), env, p)?);
    }
    let literal = PathBuf::from(&params.path);
    let mut path = literal.clone();
    let decoded = decode_arg(&params.path);
    if decoded != literal {
        let lit_abs = absolute(&literal, cwd.as_deref(), env, &params.path)?;
        if std::fs::symlink_metadata(&lit_abs).is_err() {
            path = decoded;
        }
    }
    let mut result = explain_path(&path, cwd.as_deref(), &projects, config, env)?;
    result.path = params.path.clone();
    Ok(result)
}

fn absolute_cwd(c: &str, env: &Env, path: &str) -> Result<PathBuf, ExplainError> {
    let p = decode_arg(c);
    let p = expand_tilde(&p, env, path)?;
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(ExplainError::RelativeCwd {
            path: path.to_string(),
            cwd: c.to_string(),
        })
    }
}

fn expand_tilde(p: &Path, env: &Env, asked: &str) -> Result<PathBuf, ExplainError> {
    let bytes = p.as_os_str().as_bytes();
    if bytes.starts_with(b"~") && bytes != b"~" && !bytes.starts_with(b"~/") {
        return Err(ExplainError::TildeUser {
            path: asked.to_string(),
        });
    }
    Ok(crate::path::expand_home_path(p, &env.home))
}

fn absolute(p: &Path, cwd: Option<&Path>, env: &Env, asked: &str) -> Result<PathBuf, ExplainError> {
    if p.as_os_str().is_empty() {
        return Err(ExplainError::EmptyPath);
    }
    let p = expand_tilde(p, env, asked)?;
    if p.is_absolute() {
        return Ok(p);
    }
    match cwd {
        Some(c) if c.is_absolute() => Ok(c.join(p)),
        Some(c) => Err(ExplainError::RelativeCwd {
            path: asked.to_string(),
            cwd: show(c),
        }),
        None => Err(ExplainError::NoCwd {
            path: asked.to_string(),
        }),
    }
}

/// Reads `\xNN` (a byte of 0x80 or more, as [`show`] writes it) back into the byte.
fn decode_arg(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
            let hex = std::str::from_utf8(&b[i + 2..i + 4])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(byte) = hex.filter(|v| *v >= 0x80) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(OsString::from_vec(out))
}

/// A path as text, each byte that is not UTF-8 as `\xNN`.
pub fn show(p: &Path) -> String {
    show_bytes(p.as_os_str().as_bytes())
}

fn show_bytes(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        s.push_str(chunk.valid());
        for byte in chunk.invalid() {
            s.push_str(&format!("\\x{byte:02x}"));
        }
    }
    s
}

fn is_utf8(p: &Path) -> bool {
    std::str::from_utf8(p.as_os_str().as_bytes()).is_ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RootKind {
    Project,
    Writable,
    Scratch,
    Tmp,
}

#[derive(Debug, Clone)]
struct Root {
    path: PathBuf,
    kind: RootKind,
    hit: RuleHit,
}

/// A rule's path, ready to match.
#[derive(Debug, Clone)]
enum Matcher {
    /// The path and everything below it.
    Under(PathBuf),
    /// A relative pattern inside a root.
    Pattern { root: PathBuf, pattern: PathBuf },
}

impl Matcher {
    /// The part of `p` the rule covers (the rule's own path), when it covers `p`.
    fn matched(&self, p: &Path) -> Option<PathBuf> {
        match self {
            Matcher::Under(base) => p.starts_with(base).then(|| base.clone()),
            Matcher::Pattern { root, pattern } => {
                let rel = p.strip_prefix(root).ok()?;
                let mut prefix = PathBuf::new();
                for c in rel.components() {
                    prefix.push(c);
                    if pattern_covers(pattern, &prefix) {
                        return Some(root.join(prefix));
                    }
                }
                None
            }
        }
    }
}

/// The matchers of one rule: an anchored rule as written and with its links resolved, a
/// relative one inside each of `roots`.
fn matchers(value: &str, env: &Env, roots: &[PathBuf]) -> Vec<Matcher> {
    let mut out = Vec::new();
    match RulePath::expand(value, env) {
        RulePath::Unset => {}
        RulePath::Abs(p) => {
            if is_pattern(&p) {
                let pattern = p
                    .strip_prefix("/")
                    .map(Path::to_path_buf)
                    .unwrap_or(p.clone());
                out.push(Matcher::Pattern {
                    root: PathBuf::from("/"),
                    pattern,
                });
            } else {
                let c = canonical(&p);
                if c != p {
                    out.push(Matcher::Under(c));
                }
                out.push(Matcher::Under(p));
            }
        }
        RulePath::InRoot(rel) => {
            for r in roots {
                if is_pattern(&rel) {
                    out.push(Matcher::Pattern {
                        root: r.clone(),
                        pattern: rel.clone(),
                    });
                } else {
                    let p = r.join(&rel);
                    let c = canonical(&p);
                    if c != p {
                        out.push(Matcher::Under(c));
                    }
                    out.push(Matcher::Under(p));
                }
            }
        }
    }
    out
}

fn hit(key: &str, e: &Entry) -> RuleHit {
    RuleHit {
        key: key.to_string(),
        rule: e.value.clone(),
        reason: e.reason_or_source(),
    }
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

/// The deepest of `roots` holding `p`; the first one listed wins a tie.
fn deepest<'r>(roots: &'r [Root], p: &Path) -> Option<&'r Root> {
    let mut best: Option<&Root> = None;
    for r in roots.iter().filter(|r| p.starts_with(&r.path)) {
        if best.is_none_or(|b| depth(&r.path) > depth(&b.path)) {
            best = Some(r);
        }
    }
    best
}

/// Devices the sandbox's minimal `/dev` has.
const DEV_KEPT: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// The file whose lock file `c` is (`FILE.lock` next to a plain file `FILE` in a project
/// root): a grant to write `FILE` lets the call make, write and rename `c` onto it (the
/// supervisor's lock-and-rename allowance), so that grant is the fix for `c`.
fn lock_of(c: &Path, projects: &[PathBuf]) -> Option<PathBuf> {
    let name = c.file_name()?.as_bytes();
    let stem = name.strip_suffix(b".lock").filter(|s| !s.is_empty())?;
    let file = c.with_file_name(std::ffi::OsStr::from_bytes(stem));
    let plain = std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file());
    let inside = projects.iter().any(|r| file.starts_with(r) && file != *r);
    (plain && inside).then_some(file)
}

/// Explains an absolute, `~` or relative (to `cwd`, else `env.cwd`) path, with these
/// project roots (absolute, or relative to the same directory).
pub fn explain_path(
    path: &Path,
    cwd: Option<&Path>,
    projects: &[PathBuf],
    config: &Config,
    env: &Env,
) -> Result<ExplainResult, ExplainError> {
    let asked = show(path);
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(ExplainError::Nul { path: asked });
    }
    let cwd = cwd.map(Path::to_path_buf).or_else(|| env.cwd.clone());
    let abs = absolute(path, cwd.as_deref(), env, &asked)?;
    let walk = resolve(&abs);
    let c = walk.canonical.clone();
    let own_kind = lkind(&abs);
    let exists = own_kind != FileKind::Missing;
    let target_kind = if walk.exists {
        kind(&c)
    } else {
        FileKind::Missing
    };

    // Roots.
    let mut project_paths = Vec::new();
    for p in projects {
        let p = absolute(p, cwd.as_deref(), env, &show(p))?;
        project_paths.push(canonical(&p));
    }
    let mut roots: Vec<Root> = project_paths
        .iter()
        .map(|p| Root {
            path: p.clone(),
            kind: RootKind::Project,
            hit: RuleHit {
                key: "--project".into(),
                rule: show(p),
                reason: "a project root of the turn".into(),
            },
        })
        .collect();
    for e in &config.sandbox.writable {
        if let Some(p) = env.expand(&e.value) {
            roots.push(Root {
                path: canonical(&p),
                kind: RootKind::Writable,
                hit: hit("sandbox.writable", e),
            });
        }
    }
    if let Some(s) = &env.scratch {
        roots.push(Root {
            path: canonical(s),
            kind: RootKind::Scratch,
            hit: RuleHit {
                key: "builtin".into(),
                rule: "$SCRATCH".into(),
                reason: "the conversation's scratch directory".into(),
            },
        });
    }
    roots.push(Root {
        path: canonical(&env.tmp),
        kind: RootKind::Tmp,
        hit: RuleHit {
            key: "builtin".into(),
            rule: "/tmp".into(),
            reason: "the call's private /tmp".into(),
        },
    });
    let writable_root = deepest(&roots, &c).cloned();

    // Masked: the path or a link it passes.
    let mut locations = vec![c.clone()];
    locations.extend(walk.links.iter().map(|l| l.at.clone()));
    let mut masked: Option<(RuleHit, PathBuf)> = None;
    // The sandbox's own control plane first: masked wherever it lives, and no grant opens it.
    let plane = crate::control::control_plane(env);
    let control = locations
        .iter()
        .find_map(|loc| {
            let cp = crate::control::holding(&plane, loc)?;
            // A writable root inside it (a conversation's `$SCRATCH`) is bound on top.
            let lifted = deepest(&roots, loc)
                .is_some_and(|r| r.path.starts_with(&cp.path) && r.path != cp.path);
            (!lifted).then_some(cp)
        })
        .cloned();
    if let Some(cp) = &control {
        masked = Some((
            RuleHit {
                key: "builtin".into(),
                rule: show(&cp.path),
                reason: format!(
                    "{}: the sandbox's own control plane, which no grant opens",
                    cp.what
                ),
            },
            cp.path.clone(),
        ));
    }
    'masks: for e in config.sandbox.masks.iter().filter(|_| control.is_none()) {
        for m in matchers(&e.value, env, &project_paths) {
            for loc in &locations {
                if let Some(mp) = m.matched(loc) {
                    let lifted = deepest(&roots, loc)
                        .is_some_and(|r| r.path.starts_with(&mp) && r.path != mp);
                    if !lifted {
                        let key = match e.source {
                            crate::config::Source::Surface { .. } => "surface.answers",
                            _ => "sandbox.masks",
                        };
                        masked = Some((hit(key, e), mp));
                        break 'masks;
                    }
                }
            }
        }
    }

    // Floor.
    let mut floor: Option<RuleHit> = None;
    'floors: for e in &config.floors.paths {
        for m in matchers(&e.value, env, &project_paths) {
            if m.matched(&c).is_some() {
                floor = Some(hit("floors.paths", e));
                break 'floors;
            }
        }
    }

    // Read-only inside a writable root.
    let mut read_only: Option<RuleHit> = None;
    if writable_root
        .as_ref()
        .is_some_and(|w| matches!(w.kind, RootKind::Project | RootKind::Writable))
    {
        let ro_roots: Vec<PathBuf> = roots
            .iter()
            .filter(|r| matches!(r.kind, RootKind::Project | RootKind::Writable))
            .map(|r| r.path.clone())
            .collect();
        read_only = read_only_hit(&c, &ro_roots, config, env);
        if read_only.is_none() && floor.is_some() {
            read_only = floor.clone();
        }
    }

    // Class.
    let class = if masked.is_some() {
        TargetClass::Masked
    } else if floor.is_some() {
        TargetClass::Floor
    } else {
        class_of(&c, &project_paths, config, env)
    };

    // Access.
    let is_device = matches!(target_kind, FileKind::BlockDevice | FileKind::CharDevice);
    let dev_kept = DEV_KEPT.iter().any(|d| c == Path::new(d))
        || c.starts_with("/dev/pts")
        || c.starts_with("/dev/shm");
    let host_socket = target_kind == FileKind::Socket && writable_root.is_none();
    let host_device = is_device && !dev_kept;
    let dev_root = (is_device && dev_kept && masked.is_none()).then(|| RuleHit {
        key: "builtin".into(),
        rule: show(&c),
        reason: "a device of the sandbox's minimal /dev".into(),
    });
    let access = if masked.is_some() || host_socket || host_device {
        Access::None
    } else if (writable_root.is_some() && read_only.is_none()) || dev_root.is_some() {
        Access::Write
    } else {
        Access::Read
    };
    let writable_by = match access {
        Access::Write => dev_root.or_else(|| writable_root.as_ref().map(|r| r.hit.clone())),
        _ => None,
    };

    // The grant that would change it.
    let grant = if control.is_some() {
        None
    } else if let Some((rule, _)) = masked
        .as_ref()
        .filter(|(_, mp)| crate::control::reached(&plane, mp).is_some())
    {
        // Lifting this mask would lift the control plane's below it: the path alone.
        Some(GrantHint {
            grant: Grant::Unmask { path: show(&c) },
            effect: format!(
                "shows this path alone below the mask {} (which also hides the sandbox's own \
                 control plane, never lifted)",
                rule.rule
            ),
            user_only: false,
        })
    } else if let Some((rule, mp)) = &masked {
        let effect = if crate::tokens::shown_scrubbed(&env.home, &c) {
            format!(
                "lifts the mask {}: the call reads a copy with the secrets removed, and with the \
                 grant the real file (a token in it then denies its registry)",
                rule.rule
            )
        } else {
            format!(
                "lifts the mask {} so the call sees the real files",
                rule.rule
            )
        };
        Some(GrantHint {
            grant: Grant::Unmask { path: show(mp) },
            effect,
            user_only: false,
        })
    } else if host_socket {
        Some(GrantHint {
            grant: Grant::Socket { path: show(&c) },
            effect: "lets the call connect to this socket of the host".into(),
            user_only: false,
        })
    } else if host_device {
        Some(GrantHint {
            grant: Grant::Device { path: show(&c) },
            effect: "binds this device into the call".into(),
            user_only: false,
        })
    } else if floor.is_some() && access != Access::Write {
        Some(GrantHint {
            grant: Grant::Write { path: show(&c) },
            effect: "lets the call write this floor path".into(),
            user_only: true,
        })
    } else if let (Access::Read, Some(file)) = (access, lock_of(&c, &project_paths)) {
        Some(GrantHint {
            grant: Grant::Write { path: show(&file) },
            effect: format!(
                "lets the call write {} by lock file and rename, as git does: it makes this \
                 lock file, writes it and renames it onto the file; a lock it leaves is removed \
                 at the call's end",
                show(&file)
            ),
            user_only: false,
        })
    } else if access == Access::Read {
        let in_project = project_paths.iter().any(|r| c.starts_with(r) && c != *r);
        Some(GrantHint {
            grant: Grant::Write { path: show(&c) },
            effect: if !exists {
                "lets the call create it".into()
            } else if in_project && own_kind == FileKind::File {
                "lets the call write it, also by lock file and rename as git does: its lock \
                 file made next to it, renamed onto it"
                    .into()
            } else {
                "lets the call write it".into()
            },
            user_only: false,
        })
    } else {
        None
    };

    // Link.
    let link = pick_link(&walk).map(|l| {
        let resolved = canonical(&l.at);
        LinkInfo {
            link: show(&l.at),
            points_to: show(&l.points_to),
            target_kind: kind(&l.at),
            resolved: show(&resolved),
        }
    });

    let shown = shown(&c, &project_paths, env);
    let mut non_utf8 = !is_utf8(path) || !is_utf8(&c);
    if let Some(l) = pick_link(&walk) {
        non_utf8 |= !is_utf8(&l.at) || !is_utf8(&l.points_to);
    }

    Ok(ExplainResult {
        path: asked,
        canonical: show(&c),
        shown,
        exists,
        kind: own_kind,
        link,
        class,
        access,
        writable_by,
        masked: masked.map(|(h, _)| h),
        floor,
        read_only,
        grant,
        non_utf8,
    })
}

/// The link to report: the path itself when it is one, else the first of its parents.
fn pick_link(walk: &Walk) -> Option<&LinkStep> {
    let last = walk.orig_len.checked_sub(1);
    walk.links
        .iter()
        .find(|l| l.orig.is_some() && l.orig == last)
        .or_else(|| walk.links.iter().find(|l| l.orig.is_some()))
}

/// The read-only rule of `c` inside one of the writable `roots`, if any; `NAME.lock` is
/// read-only with `NAME`, as the supervisor keeps it (git writes its files by lock file and
/// rename).
fn read_only_hit(c: &Path, roots: &[PathBuf], config: &Config, env: &Env) -> Option<RuleHit> {
    read_only_rule(c, roots, config, env).or_else(|| {
        let stem = c.file_name()?.as_bytes().strip_suffix(b".lock")?;
        if stem.is_empty() {
            return None;
        }
        let file = c.with_file_name(OsStr::from_bytes(stem));
        read_only_rule(&file, roots, config, env).map(|h| RuleHit {
            reason: format!("the lock file of {}: {}", show(&file), h.reason),
            ..h
        })
    })
}

/// [`read_only_hit`] of `c` itself.
fn read_only_rule(c: &Path, roots: &[PathBuf], config: &Config, env: &Env) -> Option<RuleHit> {
    for e in &config.sandbox.read_only_inside {
        for m in matchers(&e.value, env, roots) {
            if m.matched(c).is_some() {
                return Some(hit("sandbox.read_only_inside", e));
            }
        }
    }
    // Repositories below a writable root, at any depth and under any name: the launcher's
    // supervisor takes every relative rule in each as in the root.
    let mut nested: Vec<PathBuf> = Vec::new();
    for r in roots.iter().filter(|r| c.starts_with(r)) {
        for a in c.ancestors() {
            if a == r.as_path() || !a.starts_with(r) {
                break;
            }
            if std::fs::symlink_metadata(a.join(".git")).is_ok() && !nested.iter().any(|n| n == a) {
                nested.push(a.to_path_buf());
            }
        }
    }
    for e in &config.sandbox.read_only_inside {
        for n in &nested {
            for m in matchers(&e.value, env, std::slice::from_ref(n)) {
                if m.matched(c).is_some() {
                    return Some(RuleHit {
                        key: "sandbox.read_only_inside".into(),
                        rule: e.value.clone(),
                        reason: format!(
                            "{} (in the repository {}, below a writable root)",
                            e.reason_or_source(),
                            show(n)
                        ),
                    });
                }
            }
        }
    }
    let git_rules: Vec<&Entry> = config
        .sandbox
        .read_only_inside
        .iter()
        .filter(|e| e.value.starts_with(".git/"))
        .collect();
    if git_rules.is_empty() {
        return None;
    }
    // A `.git` file (a worktree's or a submodule's) inside a writable root.
    if c.file_name() == Some(OsStr::new(".git"))
        && roots.iter().any(|r| c.starts_with(r))
        && lkind(c) == FileKind::File
    {
        return Some(RuleHit {
            key: "sandbox.read_only_inside".into(),
            rule: ".git".into(),
            reason: "a .git file says which git dir (and hooks) git uses".into(),
        });
    }
    // The git dir a root's (or a nested repository's) `.git` file points to, and its
    // common dir.
    for r in roots.iter().chain(&nested) {
        let Some(gitdir) = gitdir_of(r) else { continue };
        let mut dirs = vec![gitdir.clone()];
        if let Ok(common) = std::fs::read(gitdir.join("commondir")) {
            let text = String::from_utf8_lossy(&common);
            let text = text.trim();
            if !text.is_empty() {
                dirs.push(canonical(&gitdir.join(text)));
            }
        }
        for dir in &dirs {
            for e in &git_rules {
                let rel = e.value.trim_start_matches(".git/");
                let m = if is_pattern(Path::new(rel)) {
                    Matcher::Pattern {
                        root: dir.clone(),
                        pattern: PathBuf::from(rel),
                    }
                } else {
                    Matcher::Under(dir.join(rel))
                };
                if m.matched(c).is_some() {
                    return Some(RuleHit {
                        key: "sandbox.read_only_inside".into(),
                        rule: e.value.clone(),
                        reason: format!(
                            "{} (in {}, the git dir of {}/.git)",
                            e.reason_or_source(),
                            show(dir),
                            show(r)
                        ),
                    });
                }
            }
        }
    }
    None
}

/// The git dir a root's `.git` file names (`gitdir: PATH`), resolved.
fn gitdir_of(root: &Path) -> Option<PathBuf> {
    let dotgit = root.join(".git");
    if lkind(&dotgit) != FileKind::File {
        return None;
    }
    let meta = std::fs::metadata(&dotgit).ok()?;
    if meta.len() > 64 * 1024 {
        return None;
    }
    let text = std::fs::read(&dotgit).ok()?;
    let text = text.strip_prefix(b"gitdir:")?;
    let text = text.trim_ascii();
    if text.is_empty() {
        return None;
    }
    let p = PathBuf::from(OsStr::from_bytes(text));
    Some(canonical(&root.join(p)))
}

fn class_of(c: &Path, projects: &[PathBuf], config: &Config, env: &Env) -> TargetClass {
    // (path, class, rank for ties: lower wins)
    let mut candidates: Vec<(PathBuf, TargetClass, usize)> = Vec::new();
    for p in projects {
        if c.starts_with(p) {
            let below = c.strip_prefix(p).unwrap_or(Path::new(""));
            let build = below.components().any(|comp| {
                config
                    .sandbox
                    .build_output
                    .iter()
                    .any(|e| wildcard(e.value.as_bytes(), comp.as_os_str().as_bytes()))
            });
            let class = if build {
                TargetClass::BuildOutput
            } else {
                TargetClass::Project
            };
            candidates.push((p.clone(), class, 0));
        }
    }
    if let Some(s) = &env.scratch {
        candidates.push((canonical(s), TargetClass::Scratch, 1));
    }
    candidates.push((canonical(&env.tmp), TargetClass::Tmp, 2));
    for e in &config.sandbox.caches {
        for m in matchers(&e.value, env, &[]) {
            if let Some(mp) = m.matched(c) {
                candidates.push((mp, TargetClass::Cache, 3));
            }
        }
    }
    for e in &config.sandbox.trash {
        for m in matchers(&e.value, env, &[]) {
            if let Some(mp) = m.matched(c) {
                candidates.push((mp, TargetClass::Trash, 4));
            }
        }
    }
    candidates.push((canonical(&env.home), TargetClass::Home, 5));
    candidates
        .into_iter()
        .filter(|(p, _, _)| c.starts_with(p))
        .max_by(|a, b| depth(&a.0).cmp(&depth(&b.0)).then(b.2.cmp(&a.2)))
        .map(|(_, class, _)| class)
        .unwrap_or(TargetClass::System)
}

/// How efr shows a path: `<root name>/rel` in a project, `$SCRATCH/rel`, `~/rel`, else
/// absolute.
fn shown(c: &Path, projects: &[PathBuf], env: &Env) -> String {
    let mut best: Option<(usize, String)> = None;
    let mut consider = |base: &Path, prefix: String| {
        if let Ok(rel) = c.strip_prefix(base) {
            let d = depth(base);
            if best.as_ref().is_none_or(|(bd, _)| d > *bd) {
                let text = if rel.as_os_str().is_empty() {
                    prefix
                } else {
                    format!("{prefix}/{}", show(rel))
                };
                best = Some((d, text));
            }
        }
    };
    // A tie goes to the first considered: a project, then scratch, then the home.
    for p in projects {
        if let Some(name) = p.file_name() {
            consider(p, show(Path::new(name)));
        }
    }
    if let Some(s) = &env.scratch {
        consider(&canonical(s), "$SCRATCH".into());
    }
    let home = canonical(&env.home);
    if home != Path::new("/") {
        consider(&home, "~".into());
    }
    best.map(|(_, t)| t).unwrap_or_else(|| show(c))
}
