//! Landlock for a contained line: read and execute everywhere but the masked paths, write
//! only where the view is writable, TCP bind/connect refused under `net_view`, signals and
//! abstract Unix sockets scoped to the sandbox (ABI 6), and path Unix sockets only in
//! writable roots or granted ones (ABI 9, where the kernel has it). Best effort: the
//! enforced status is reported.
//!
//! Masked paths ([`LandlockSpec::hidden`]) get no read rule, whether or not they exist:
//! Landlock rules add access below the inode a rule names, so a read rule on a directory
//! would cover whatever appears in it later (the user's `aws configure` making `~/.aws`
//! during the call). Instead, every directory on the way from `/` to a masked path (its
//! *chain*) gets only `READ_DIR` (its names may be listed), and each of its entries gets the
//! full read rule on its own, but the chain's next directory (which is walked the same way)
//! and the masked path itself (which gets a rule only when it is the view's mask mount: an
//! empty tmpfs or empty file, so that it reads as present and empty). An entry that appears
//! in a chain directory after the rules are made has no rule: it cannot be read (its name
//! can be listed), whoever made it. Symbolic links get no rule (what they lead to has its
//! own).

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use landlock::BitFlags;
use serde::{Deserialize, Serialize};

use crate::status::LandlockReport;
use efr_sandbox_wire::Enforcement;

/// The newest ABI this code knows.
const TARGET: ABI = ABI::V9;

/// The rules, as paths of the view the line sees.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandlockSpec {
    /// Read and execute below these.
    pub read: Vec<String>,
    /// Everything below these (writable roots, /tmp, scratch, write grants).
    pub write: Vec<String>,
    /// Device access (read, write, ioctl) below these.
    pub dev: Vec<String>,
    /// Path sockets that may be connected outside the writable roots (socket, bus, desktop).
    pub sockets: Vec<String>,
    /// Masked paths, as the view resolves them (no link in them): no read rule covers them
    /// (see the module doc), so one that does not exist at launch stays unreadable when it
    /// appears. Paths inside `write` are left out (a write rule covers them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
    /// Handle TCP bind/connect (refused: no rule allows any port).
    pub deny_tcp: bool,
    /// Scope signals and abstract Unix sockets.
    pub scopes: bool,
}

/// The ABI the kernel offers (0 when none).
pub fn kernel_abi() -> u32 {
    crate::sys::landlock_abi()
}

/// Why the line's Landlock domain could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// The rule of one path.
    #[error("landlock rule {path}: {source}")]
    Rule {
        /// The path the rule was for, as the view shows it.
        path: String,
        /// What the landlock crate said.
        #[source]
        source: landlock::RulesetError,
    },
    /// The ruleset itself (`what`: handle, scope, create, restrict_self).
    #[error("landlock {what}: {source}")]
    Ruleset {
        /// The step: handle, scope, create, restrict_self.
        what: &'static str,
        /// What the landlock crate said.
        #[source]
        source: landlock::RulesetError,
    },
    /// The plan requires Landlock and the kernel enforces none of it.
    #[error("landlock is required but not enforced")]
    Required,
}

fn ruleset(what: &'static str) -> impl Fn(landlock::RulesetError) -> LandlockError {
    move |source| LandlockError::Ruleset { what, source }
}

fn add_rules(
    mut created: landlock::RulesetCreated,
    paths: &[String],
    access: landlock::BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, LandlockError> {
    for p in paths {
        let Ok(fd) = PathFd::new(p) else { continue };
        let is_dir = std::fs::metadata(p).map(|m| m.is_dir()).unwrap_or(false);
        let acc = if is_dir {
            access
        } else {
            access & AccessFs::from_file(TARGET)
        };
        created = created
            .add_rule(PathBeneath::new(fd, acc))
            .map_err(|source| LandlockError::Rule {
                path: p.clone(),
                source,
            })?;
    }
    Ok(created)
}

/// Opens `p` as an `O_PATH` fd without following a last link.
fn open_path(p: &Path) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)
        .ok()
        .map(OwnedFd::from)
}

/// What one read rule grants on an opened path: `access` on a directory, its file rights on
/// anything else; `None` for a link (no rule).
fn rights_of(fd: &OwnedFd, access: BitFlags<AccessFs>) -> Option<BitFlags<AccessFs>> {
    let f = std::fs::File::from(fd.try_clone().ok()?);
    let t = f.metadata().ok()?.file_type();
    if t.is_symlink() {
        None
    } else if t.is_dir() {
        Some(access)
    } else {
        Some(access & AccessFs::from_file(TARGET))
    }
}

/// The masked paths and the directories on the way to them (their chains), looked up by
/// the bytes of a path: a walk asks both of every entry of a chain directory (hundreds in a
/// home), so each question is a hash lookup, not a scan of the list.
struct Hidden {
    paths: HashSet<Vec<u8>>,
    chains: HashSet<Vec<u8>>,
}

impl Hidden {
    fn new(hidden: &[String]) -> Hidden {
        let mut paths = HashSet::new();
        let mut chains = HashSet::new();
        for h in hidden {
            let p = Path::new(h.trim_end_matches('/'));
            if !p.is_absolute() {
                continue;
            }
            paths.insert(p.as_os_str().as_bytes().to_vec());
            for a in p.ancestors().skip(1) {
                chains.insert(a.as_os_str().as_bytes().to_vec());
            }
        }
        Hidden { paths, chains }
    }

    /// `p` is a masked path.
    fn is_masked(&self, p: &Path) -> bool {
        self.paths.contains(p.as_os_str().as_bytes())
    }

    /// A masked path is below `p`.
    fn holds(&self, p: &Path) -> bool {
        self.chains.contains(p.as_os_str().as_bytes())
    }
}

/// The read rules of `root` that leave out `hidden` (see the module doc).
fn add_read_rules(
    mut created: landlock::RulesetCreated,
    root: &Path,
    hidden: &Hidden,
    read: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, LandlockError> {
    let rule = |c: landlock::RulesetCreated, fd: OwnedFd, acc, p: &Path| {
        c.add_rule(PathBeneath::new(fd, acc))
            .map_err(|source| LandlockError::Rule {
                path: p.display().to_string(),
                source,
            })
    };
    let Some(fd) = open_path(root) else {
        return Ok(created);
    };
    if !hidden.holds(root) {
        if let Some(acc) = rights_of(&fd, read) {
            created = rule(created, fd, acc, root)?;
        }
        return Ok(created);
    }
    // A chain directory: its names, and each entry on its own.
    created = rule(created, fd, AccessFs::ReadDir.into(), root)?;
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(created);
    };
    for e in entries.flatten() {
        // The entry's type from the directory itself (no stat); a link gets no rule. (One
        // replaced by a file since gets the file's rights: the crate trims them.)
        let Ok(t) = e.file_type() else { continue };
        if t.is_symlink() {
            continue;
        }
        let acc = if t.is_dir() {
            read
        } else {
            read & AccessFs::from_file(TARGET)
        };
        let p = root.join(e.file_name());
        let Some(fd) = open_path(&p) else { continue };
        if hidden.is_masked(&p) {
            // Only the view's own mask (a mount over the path) may be read: it is empty.
            // Anything else here appeared after the view was made.
            if crate::sys::is_mount_root(fd.as_fd()).unwrap_or(false) {
                created = rule(created, fd, acc, &p)?;
            }
        } else if t.is_dir() && hidden.holds(&p) {
            drop(fd);
            created = add_read_rules(created, &p, hidden, read)?;
        } else {
            created = rule(created, fd, acc, &p)?;
        }
    }
    Ok(created)
}

fn enforcement(s: RulesetStatus) -> Enforcement {
    match s {
        RulesetStatus::FullyEnforced => Enforcement::FullyEnforced,
        RulesetStatus::PartiallyEnforced => Enforcement::PartiallyEnforced,
        RulesetStatus::NotEnforced => Enforcement::NotEnforced,
    }
}

/// Restricts the calling process (no_new_privs must be set). Paths that do not exist are
/// skipped.
pub fn restrict(spec: &LandlockSpec) -> Result<LandlockReport, LandlockError> {
    let abi = kernel_abi().min(TARGET as u32);
    let all = AccessFs::from_all(TARGET);
    let read = AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir;
    let write_all = all & !AccessFs::ResolveUnix & !AccessFs::IoctlDev;
    let dev = read | AccessFs::WriteFile | AccessFs::IoctlDev | AccessFs::Truncate;
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(ruleset("handle file system access"))?;
    if spec.deny_tcp {
        rs = rs
            .handle_access(AccessNet::from_all(TARGET))
            .map_err(ruleset("handle tcp access"))?;
    }
    if spec.scopes {
        rs = rs
            .scope(Scope::from_all(TARGET))
            .map_err(ruleset("scope signals and abstract sockets"))?;
    }
    let mut created = rs.create().map_err(ruleset("create the ruleset"))?;
    let hidden = Hidden::new(&spec.hidden);
    for r in &spec.read {
        created = add_read_rules(created, Path::new(r), &hidden, read)?;
    }
    created = add_rules(created, &spec.write, write_all | AccessFs::ResolveUnix)?;
    created = add_rules(created, &spec.dev, dev)?;
    created = add_rules(created, &spec.sockets, read | AccessFs::ResolveUnix)?;
    let st = created
        .restrict_self()
        .map_err(ruleset("restrict the process"))?;
    Ok(LandlockReport {
        abi,
        status: enforcement(st.ruleset),
        net: spec.deny_tcp && abi >= 4,
        scopes: spec.scopes && abi >= 6,
        unix_sockets: abi >= 9,
    })
}

/// A domain of the calling process nested in the one it is in, with the scopes only
/// (signals and abstract sockets may not leave it): the line's, under the init's full
/// domain (see `crate::child::init::run_init`), so that it cannot signal the init. No path is
/// opened: it costs a fraction of [`restrict`]. Without scopes in the kernel (ABI < 6), it
/// does nothing.
pub fn nest_scopes() -> Result<(), LandlockError> {
    if kernel_abi() < 6 {
        return Ok(());
    }
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::from_all(TARGET))
        .map_err(ruleset("scope the line's nested domain"))?
        .create()
        .map_err(ruleset("create the line's nested domain"))?
        .restrict_self()
        .map_err(ruleset("restrict the line to its nested domain"))?;
    Ok(())
}
