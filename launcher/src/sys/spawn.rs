//! Starting a program with fds placed at chosen numbers, by `posix_spawn(3)`: how a caller
//! (the service, the CLI, the probe) starts `efr-launch` with its plan at fd 3 and its status
//! pipe at fd 4.
//!
//! `std::process::Command` can place only fds 0 to 2; any other needs a `pre_exec` closure,
//! and with one std forks. A fork copies the caller's page tables, and the service's grow
//! with its calls and its proxy: measured at 0.36 ms of the service's CPU per call (perf, 60
//! `sandbox.launch`es). glibc's `posix_spawn` runs the child on the caller's memory
//! (`CLONE_VM | CLONE_VFORK`) until it execs, so nothing is copied; the file actions place
//! the fds in the child, where `dup2` also clears their close-on-exec.
//!
//! Every `unsafe` block here holds a `SAFETY:` line with its invariant, as in `sys.rs`.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The highest fd number a spawn places (0 to 4 in the launcher's use, 5 to 9 for the
/// cgroups it joins); a source fd at or below it is moved above it first, so one placement
/// never overwrites a source still to be placed.
const MAX_TARGET: RawFd = 9;

/// What to start: the program, its arguments (the first is its name) and, for each fd it
/// gets, the caller's fd that is placed there.
#[derive(Debug)]
pub struct Spawn<'a> {
    /// The program's path (not searched on PATH).
    pub program: &'a OsStr,
    /// `argv`, the program's name first.
    pub args: &'a [OsString],
    /// `(source, target)`: the caller's fd `source` is the child's `target`. Targets are at
    /// most [`MAX_TARGET`] and distinct. Fds not named here are not inherited (everything
    /// the caller opens through std is close-on-exec), but for fds 0 to 2 when not named.
    pub fds: &'a [(RawFd, RawFd)],
    /// The child's process group and session.
    pub detach: Detach,
}

/// Where a started launcher stands among its caller's processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Detach {
    /// In the caller's process group and session.
    #[default]
    None,
    /// A process group of its own in the caller's session: a signal sent to the caller's
    /// group reaches it only through the caller, and a terminal the caller has stays its
    /// controlling terminal (`efr-sandbox run` at a prompt).
    Group,
    /// A session of its own, and so a process group and, where the kernel groups sessions
    /// for scheduling (`autogroup`), a share of the processors of its own: a call that keeps
    /// the processors busy competes with the service and with each other call as one, not
    /// thread by thread inside the service's share. It has no controlling terminal (the
    /// service's calls: their stdio are pipes, or a terminal the launcher makes).
    Session,
}

fn c(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// An error number returned by a `posix_spawn*` function (they return it, not -1).
fn ret(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// The file actions, freed on drop.
struct Actions(libc::posix_spawn_file_actions_t);

impl Drop for Actions {
    fn drop(&mut self) {
        // SAFETY: `self.0` was initialised by posix_spawn_file_actions_init (`Actions` is
        // only made after it succeeded) and is destroyed once, here.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// The attributes, freed on drop.
struct Attrs(libc::posix_spawnattr_t);

impl Drop for Attrs {
    fn drop(&mut self) {
        // SAFETY: initialised by posix_spawnattr_init (`Attrs` is only made after it
        // succeeded), destroyed once, here.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

/// The `(source, target)` pairs of the spawn's dup2s, a source low enough to be a target
/// copied above [`MAX_TARGET`] first: the copies (closed when they drop, after the spawn)
/// and the pairs.
#[allow(
    clippy::type_complexity,
    reason = "the copies and the pairs, named here"
)]
fn fd_pairs(
    fds: &[(RawFd, RawFd)],
) -> io::Result<(Vec<std::os::fd::OwnedFd>, Vec<(RawFd, RawFd)>)> {
    let mut moved: Vec<std::os::fd::OwnedFd> = Vec::new();
    let mut pairs: Vec<(RawFd, RawFd)> = Vec::with_capacity(fds.len());
    for &(src, dst) in fds {
        if src <= MAX_TARGET {
            use std::os::fd::{AsRawFd, FromRawFd};
            // SAFETY: F_DUPFD_CLOEXEC on an fd the caller keeps open for the call.
            let d =
                super::check(unsafe { libc::fcntl(src, libc::F_DUPFD_CLOEXEC, MAX_TARGET + 1) })?;
            // SAFETY: `d` was just made by fcntl for this process; nothing else owns it.
            let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(d) };
            pairs.push((owned.as_raw_fd(), dst));
            moved.push(owned);
        } else {
            pairs.push((src, dst));
        }
    }
    Ok((moved, pairs))
}

/// The spawn's attributes, initialised in `attrs`: the signal mask and defaults, and the
/// child's group or session (`detach`).
fn set_attrs(attrs: &mut Attrs, detach: Detach) -> io::Result<()> {
    // As std's spawn: no signal blocked in the child, and SIGPIPE (which Rust's runtime
    // ignores in this process) back to its default.
    // SAFETY: sigset_t is plain storage that sigemptyset fills in.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid storage; sigemptyset and sigaddset only write into it.
    unsafe {
        libc::sigemptyset(&mut set);
    }
    // SAFETY: `attrs.0` is initialised and `set` is a valid, empty set.
    ret(unsafe { libc::posix_spawnattr_setsigmask(&mut attrs.0, &set) })?;
    // SAFETY: `set` is a valid set; SIGPIPE is a valid signal number.
    unsafe {
        libc::sigaddset(&mut set, libc::SIGPIPE);
    }
    // SAFETY: `attrs.0` is initialised and `set` is valid.
    ret(unsafe { libc::posix_spawnattr_setsigdefault(&mut attrs.0, &set) })?;
    let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
    match detach {
        Detach::None => {}
        Detach::Group => {
            flags |= libc::POSIX_SPAWN_SETPGROUP;
            // SAFETY: `attrs.0` is initialised; 0 is "a group of the child's own pid".
            ret(unsafe { libc::posix_spawnattr_setpgroup(&mut attrs.0, 0) })?;
        }
        // glibc's child calls setsid(2) before it execs (a new session leads a new group).
        Detach::Session => flags |= libc::c_int::from(libc::POSIX_SPAWN_SETSID),
    }
    let flags =
        libc::c_short::try_from(flags).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `attrs.0` is initialised; the flags are posix_spawn's own constants.
    ret(unsafe { libc::posix_spawnattr_setflags(&mut attrs.0, flags) })?;
    Ok(())
}

/// Starts `s` with this process's environment; returns the child's pid. An error of the
/// exec itself (a missing program, no permission) is returned here, as glibc reports it.
pub fn spawn(s: &Spawn<'_>) -> io::Result<libc::pid_t> {
    let mut targets: Vec<RawFd> = s.fds.iter().map(|&(_, t)| t).collect();
    targets.sort_unstable();
    targets.dedup();
    if targets.len() != s.fds.len() || s.fds.iter().any(|&(_, t)| !(0..=MAX_TARGET).contains(&t)) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // Sources low enough to be a target are copied above MAX_TARGET first (closed when
    // `moved` drops, after the spawn).
    let (moved, pairs) = fd_pairs(s.fds)?;
    let program = c(s.program)?;
    let args: Vec<CString> = s.args.iter().map(|a| c(a)).collect::<io::Result<_>>()?;
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut argv: Vec<*mut libc::c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut libc::c_char> = env.iter().map(|a| a.as_ptr().cast_mut()).collect();
    envp.push(std::ptr::null_mut());

    // SAFETY: posix_spawn_file_actions_t is a plain C struct that init fills in; zeroed
    // memory is only storage for it.
    let mut fa: libc::posix_spawn_file_actions_t = unsafe { std::mem::zeroed() };
    // SAFETY: `fa` is valid storage for the call.
    ret(unsafe { libc::posix_spawn_file_actions_init(&mut fa) })?;
    let mut actions = Actions(fa);
    for &(src, dst) in &pairs {
        // SAFETY: `actions.0` is initialised; src and dst are plain fd numbers (src open in
        // this process until the spawn returns, dst at most MAX_TARGET).
        ret(unsafe { libc::posix_spawn_file_actions_adddup2(&mut actions.0, src, dst) })?;
    }
    // SAFETY: as above: zeroed storage that init fills in.
    let mut at: libc::posix_spawnattr_t = unsafe { std::mem::zeroed() };
    // SAFETY: `at` is valid storage for the call.
    ret(unsafe { libc::posix_spawnattr_init(&mut at) })?;
    let mut attrs = Attrs(at);
    set_attrs(&mut attrs, s.detach)?;
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid for the call: `program` and the strings `argv`/`envp`
    // point into (`args`, `env`) live until it returns, both arrays end with a null pointer,
    // the actions and attributes are initialised, and the sources they name stay open (the
    // caller's, or `moved`). glibc's child runs on this memory only until it execs.
    ret(unsafe {
        libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attrs.0,
            argv.as_ptr(),
            envp.as_ptr(),
        )
    })?;
    drop(moved);
    Ok(pid)
}
