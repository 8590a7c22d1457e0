//! Landlock for a contained line: read and execute everywhere, write only where the view is
//! writable, TCP bind/connect refused under `net_view`, signals and abstract Unix sockets
//! scoped to the sandbox (ABI 6), and path Unix sockets only in writable roots or granted
//! ones (ABI 9, where the kernel has it). Best effort: the enforced status is reported.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use serde::{Deserialize, Serialize};

use crate::status::LandlockReport;

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
    /// Handle TCP bind/connect (refused: no rule allows any port).
    pub deny_tcp: bool,
    /// Scope signals and abstract Unix sockets.
    pub scopes: bool,
}

/// The ABI the kernel offers (0 when none).
pub fn kernel_abi() -> u32 {
    crate::sys::landlock_abi()
}

fn add_rules(
    mut created: landlock::RulesetCreated,
    paths: &[String],
    access: landlock::BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, String> {
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
            .map_err(|e| format!("landlock rule {p}: {e}"))?;
    }
    Ok(created)
}

fn rs_str(s: RulesetStatus) -> &'static str {
    match s {
        RulesetStatus::FullyEnforced => "fully_enforced",
        RulesetStatus::PartiallyEnforced => "partially_enforced",
        RulesetStatus::NotEnforced => "not_enforced",
    }
}

/// Restricts the calling process (no_new_privs must be set). Paths that do not exist are
/// skipped.
pub fn restrict(spec: &LandlockSpec) -> Result<LandlockReport, String> {
    let abi = kernel_abi().min(TARGET as u32);
    let all = AccessFs::from_all(TARGET);
    let read = AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir;
    let write_all = all & !AccessFs::ResolveUnix & !AccessFs::IoctlDev;
    let dev = read | AccessFs::WriteFile | AccessFs::IoctlDev | AccessFs::Truncate;
    let e = |e: landlock::RulesetError| format!("landlock: {e}");
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(e)?;
    if spec.deny_tcp {
        rs = rs.handle_access(AccessNet::from_all(TARGET)).map_err(e)?;
    }
    if spec.scopes {
        rs = rs.scope(Scope::from_all(TARGET)).map_err(e)?;
    }
    let mut created = rs.create().map_err(e)?;
    created = add_rules(created, &spec.read, read)?;
    created = add_rules(created, &spec.write, write_all | AccessFs::ResolveUnix)?;
    created = add_rules(created, &spec.dev, dev)?;
    created = add_rules(created, &spec.sockets, read | AccessFs::ResolveUnix)?;
    let st = created.restrict_self().map_err(e)?;
    Ok(LandlockReport {
        abi,
        status: rs_str(st.ruleset).into(),
        net: spec.deny_tcp && abi >= 4,
        scopes: spec.scopes && abi >= 6,
        unix_sockets: abi >= 9,
    })
}

/// A domain of the calling process nested in the one it is in, with the scopes only
/// (signals and abstract sockets may not leave it): the line's, under the init's full
/// domain (see `crate::inner::run_init`), so that it cannot signal the init. No path is
/// opened: it costs a fraction of [`restrict`]. Without scopes in the kernel (ABI < 6), it
/// does nothing.
pub fn nest_scopes() -> Result<(), String> {
    if kernel_abi() < 6 {
        return Ok(());
    }
    let e = |e: landlock::RulesetError| format!("landlock: {e}");
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::from_all(TARGET))
        .map_err(e)?
        .create()
        .map_err(e)?
        .restrict_self()
        .map_err(e)?;
    Ok(())
}
