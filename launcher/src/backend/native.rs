//! The native backend: clone into new user, mount, pid, ipc, uts (and net) namespaces, build
//! the view with our own mounts, pivot_root, and run the init.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::child::init::{InnerSpec, run_init};
use crate::setup::SetupError;
use crate::sys::{self, MOUNT_ATTR_RDONLY, mount};
use crate::view::handoff::Rest;
use crate::view::{Op, View};

/// The most the child reads of a [`Rest`] (a view of many thousand paths fits).
const MAX_REST: usize = 64 << 20;

const O: &str = "/oldroot";
const N: &str = "/newroot";

/// Creates a mount point at `dst` (a directory or an empty file) where it is missing.
fn ensure_mountpoint(dst: &str, dir: bool) {
    let p = Path::new(dst);
    if std::fs::symlink_metadata(p).is_ok() {
        return;
    }
    if let Some(parent) = p.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if dir {
        let _ = std::fs::create_dir(p);
    } else {
        let _ = std::fs::File::create(p);
    }
}

fn bind(src: &str, dst: &str, ro: bool) -> Result<(), SetupError> {
    let is_dir = std::fs::metadata(src).map(|m| m.is_dir()).unwrap_or(false);
    ensure_mountpoint(dst, is_dir);
    mount(Some(src), dst, None, libc::MS_BIND | libc::MS_REC, None).map_err(|source| {
        SetupError::Bind {
            src: src.to_string(),
            path: dst.to_string(),
            source,
        }
    })?;
    if ro {
        sys::mount_setattr_recursive(dst, MOUNT_ATTR_RDONLY, 0)
            .map_err(SetupError::remount("make read-only", dst))?;
    }
    Ok(())
}

/// The call's `/dev` but what the plan adds to it: a tmpfs with the usual devices bound
/// from the host, its own devpts, the links every system has.
fn dev_base() -> Result<(), SetupError> {
    let dev = format!("{N}/dev");
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("mode=0755,size=1m"),
    )
    .map_err(SetupError::mount("tmpfs", &dev))?;
    for d in ["null", "zero", "full", "random", "urandom", "tty"] {
        let src = format!("{O}/dev/{d}");
        if Path::new(&src).exists() {
            bind(&src, &format!("{dev}/{d}"), false)?;
        }
    }
    let pts = format!("{dev}/pts");
    std::fs::create_dir(&pts).map_err(SetupError::create("directory", &pts))?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(SetupError::mount("devpts", &pts))?;
    let ptmx = format!("{dev}/ptmx");
    std::os::unix::fs::symlink("pts/ptmx", &ptmx).map_err(SetupError::create("link", &ptmx))?;
    for (l, t) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let link = format!("{dev}/{l}");
        std::os::unix::fs::symlink(t, &link).map_err(SetupError::create("link", &link))?;
    }
    Ok(())
}

/// The plan's part of `/dev` on [`dev_base`]: `/dev/shm` of its size, the devices of its
/// grants, the proxy's socket, the broker's trust files; then `/dev` read-only.
fn dev_call(view: &View) -> Result<(), SetupError> {
    let dev = format!("{N}/dev");
    let shm = format!("{dev}/shm");
    std::fs::create_dir(&shm).map_err(SetupError::create("directory", &shm))?;
    mount(
        Some("tmpfs"),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("mode=1777,size={}", view.shm_size)),
    )
    .map_err(SetupError::mount("tmpfs", &shm))?;
    for op in &view.ops {
        if let Op::Dev { path } = op {
            if path.starts_with("/dev/") {
                bind(&format!("{O}{path}"), &format!("{N}{path}"), false)?;
            }
        }
    }
    if let Some(s) = &view.proxy_socket {
        bind(
            &format!("{O}{s}"),
            &format!("{N}{}", crate::plan::INSIDE_PROXY_SOCKET),
            true,
        )?;
    }
    if let Some(t) = &view.trust {
        bind(
            &format!("{O}{}", t.bundle),
            &format!("{N}{}", crate::plan::INSIDE_CA_BUNDLE),
            true,
        )?;
        bind(
            &format!("{O}{}", t.ca),
            &format!("{N}{}", crate::plan::INSIDE_CA),
            true,
        )?;
        if let Some(g) = &t.git_config {
            bind(
                &format!("{O}{g}"),
                &format!("{N}{}", crate::plan::INSIDE_GIT_CONFIG),
                true,
            )?;
        }
    }
    mount(
        None,
        &dev,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
        None,
    )
    .map_err(SetupError::remount("remount read-only", &dev))?;
    Ok(())
}

/// `/etc/resolv.conf` of the new root names the call's DNS server: a read-only file of the
/// base tmpfs bound over it (over its target when it is a link, as `/etc/resolv.conf`
/// often is; an absolute target is taken inside the new root).
fn resolv_conf() -> Result<(), SetupError> {
    let src = "/stage/resolv.conf";
    std::fs::write(src, crate::view::RESOLV_CONF).map_err(SetupError::write(src))?;
    let mut dst = format!("{N}/etc/resolv.conf");
    for _ in 0..8 {
        let Ok(t) = std::fs::read_link(&dst) else {
            break;
        };
        dst = if t.is_absolute() {
            format!("{N}{}", t.display())
        } else {
            let parent = Path::new(&dst).parent().unwrap_or(Path::new(N));
            parent.join(t).to_string_lossy().into_owned()
        };
    }
    if std::fs::symlink_metadata(&dst).is_err() {
        return Err(SetupError::Missing {
            what: "resolv.conf (the call's DNS server cannot be named)",
            path: dst,
        });
    }
    mount(Some(src), &dst, None, libc::MS_BIND, None).map_err(|source| SetupError::Bind {
        src: src.to_string(),
        path: dst.clone(),
        source,
    })?;
    sys::mount_setattr_recursive(&dst, MOUNT_ATTR_RDONLY, 0)
        .map_err(SetupError::remount("make read-only", &dst))
}

/// Builds the view under `/newroot` and pivots into it. Runs in the child, as root of the
/// new user namespace.
pub(super) fn build_root(view: &View, sync_r: OwnedFd) -> Result<Rest, SetupError> {
    host_base()?;
    finish_root(view, sync_r)
}

/// The part of the view no plan changes: the mount namespace made private, the base tmpfs
/// pivoted into, the host's tree bound read-only at `/newroot` with a `/proc` of the call's
/// pid namespace and the base of its `/dev` ([`dev_base`]). A warm init builds it as soon
/// as its call is announced ([`super::warm`]).
pub(super) fn host_base() -> Result<(), SetupError> {
    mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(SetupError::remount("make private", "/"))?;
    // A base tmpfs (over /tmp of this mount namespace only) holds the old and new roots.
    mount(
        Some("tmpfs"),
        "/tmp",
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0700,size=1m"),
    )
    .map_err(SetupError::mount("tmpfs (the base)", "/tmp"))?;
    for d in [
        "/tmp/oldroot",
        "/tmp/newroot",
        "/tmp/stage",
        "/tmp/stage/emptydir",
    ] {
        std::fs::create_dir(d).map_err(SetupError::create("directory", d))?;
    }
    std::fs::File::create("/tmp/stage/empty")
        .map_err(SetupError::create("file", "/tmp/stage/empty"))?;
    let _ = std::fs::set_permissions("/tmp/stage/empty", std::fs::Permissions::from_mode(0o444));
    sys::pivot_root("/tmp", "/tmp/oldroot").map_err(SetupError::root("pivot_root into", "/tmp"))?;
    sys::chdir("/").map_err(SetupError::root("chdir", "/"))?;
    // The host's tree, read-only.
    mount(Some(O), N, None, libc::MS_BIND | libc::MS_REC, None).map_err(|source| {
        SetupError::Bind {
            src: O.into(),
            path: N.into(),
            source,
        }
    })?;
    sys::mount_setattr_recursive(N, MOUNT_ATTR_RDONLY, 0)
        .map_err(SetupError::remount("make read-only", N))?;
    mount(
        Some("proc"),
        &format!("{N}/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .map_err(SetupError::mount("proc", &format!("{N}/proc")))?;
    dev_base()
}

/// The sysctl of the lowest port a process without `CAP_NET_BIND_SERVICE` may bind, in the
/// network namespace of the process that opens it.
const LOW_PORTS: &str = "/proc/sys/net/ipv4/ip_unprivileged_port_start";

/// Opens the privileged ports (below 1024) of the call's own network namespace to every
/// user of it (`ip_unprivileged_port_start = 0`), as the bwrap backend does: only the call
/// lives there, its line holds no capability, and a server it starts on port 80 or 22
/// listens on its own loopback (a port forward of a job refuses such a port on the
/// host's side, `efr_jobs::forward`). Written through the `/proc` of the process's
/// time (the host's before the view, the call's after), whose `net` files are those of
/// the writer's network namespace.
pub(super) fn open_low_ports() -> Result<(), SetupError> {
    std::fs::write(LOW_PORTS, "0").map_err(SetupError::write(LOW_PORTS))
}

/// The rest of the view on top of [`host_base`], in steps: the plan's `/dev`, `/tmp` and
/// scratch dir, then the rest of the view from the launcher (each [`Op`] applied), the
/// call's `/etc/resolv.conf`, and the pivot into the new root.
pub(super) fn finish_root(view: &View, sync_r: OwnedFd) -> Result<Rest, SetupError> {
    dev_call(view)?;
    tmp_and_scratch(view)?;
    // The launcher computes the rest of the view while the steps above run: a length, then a [`Rest`] (EOF: it failed or died).
    let rest = read_rest(sync_r.as_fd())?;
    drop(sync_r);
    let mut scrubbed = 0usize;
    for op in &rest.ops {
        apply_op(op, &mut scrubbed)?;
    }
    if view.proxy_socket.is_some() {
        resolv_conf()?;
    }
    pivot_into_new_root()?;
    Ok(rest)
}

/// The call's `/tmp` (the plan's dir, or a fresh tmpfs) and its scratch dir.
fn tmp_and_scratch(view: &View) -> Result<(), SetupError> {
    match &view.tmp {
        Some(t) => bind(&format!("{O}{t}"), &format!("{N}/tmp"), false)?,
        None => mount(
            Some("tmpfs"),
            &format!("{N}/tmp"),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&format!("mode=1777,size={}", view.tmp_size)),
        )
        .map_err(SetupError::mount("tmpfs", &format!("{N}/tmp")))?,
    }
    if let Some(s) = &view.scratch {
        bind(&format!("{O}{s}"), &format!("{N}{s}"), false)?;
    }
    Ok(())
}

/// Applies one mount operation of the view's rest (`scrubbed` counts the scrubbed copies
/// staged so far).
fn apply_op(op: &Op, scrubbed: &mut usize) -> Result<(), SetupError> {
    match op {
        Op::Bind { src, dst, rw } => bind(&format!("{O}{src}"), &format!("{N}{dst}"), !rw),
        Op::Dev { .. } => Ok(()),
        Op::Overlay {
            path,
            upper,
            work,
            conversation,
        } => overlay(path, upper, work, conversation.as_deref()),
        Op::MaskDir { path } => mask_dir(path),
        Op::MaskFile { path } => mask_file(path),
        Op::MaskWith { path, content } => {
            // The copy lives in the staging tmpfs of this mount namespace.
            *scrubbed += 1;
            mask_with(path, content, *scrubbed)
        }
        Op::SealDir { path } => seal_dir(path),
    }
}

/// A cache's layer: overlayfs on the cache's path.
fn overlay(
    path: &str,
    upper: &str,
    work: &str,
    conversation: Option<&str>,
) -> Result<(), SetupError> {
    let dst = format!("{N}{path}");
    let conv = conversation.map(|c| format!("{O}{c}"));
    let opts = crate::view::overlay_options(
        &format!("{O}{path}"),
        conv.as_deref(),
        &format!("{O}{upper}"),
        &format!("{O}{work}"),
    );
    mount(
        Some("overlay"),
        &dst,
        Some("overlay"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&opts),
    )
    .map_err(|source| SetupError::Overlay {
        path: path.to_string(),
        upper: upper.to_string(),
        work: work.to_string(),
        source,
    })?;
    Ok(())
}

/// An empty tmpfs over a masked directory (sealed read-only later).
fn mask_dir(path: &str) -> Result<(), SetupError> {
    match mount(
        Some("tmpfs"),
        &format!("{N}{path}"),
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755,size=64k"),
    ) {
        Ok(_) => Ok(()),
        // Not in the view: gone since the view was computed, or below the call's own /tmp
        // (a runtime dir under the host's /tmp), which shows nothing of the host's. Nothing
        // to hide; one that appears later has no Landlock read rule (see
        // `crate::restrict::lockdown`).
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SetupError::mask("tmpfs", path)(e)),
    }
}

/// The staged empty file over a masked file, read-only.
fn mask_file(path: &str) -> Result<(), SetupError> {
    let p = format!("{N}{path}");
    match mount(Some("/stage/empty"), &p, None, libc::MS_BIND, None) {
        Ok(_) => {}
        // Gone since the view was computed (a socket of a program that ended): nothing left
        // to hide.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        // Out of this namespace's reach: root's view lists every socket of the host, but
        // root's call holds no power over another user's files (their owner is not mapped
        // here), so a socket in their private directory stays out of reach of this setup,
        // which has every capability the call's processes have and more; the call cannot
        // name it either. One that opens up later meets the supervisor, as one that
        // appears does.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(()),
        Err(e) => return Err(SetupError::mask("empty file", path)(e)),
    }
    sys::mount_setattr_recursive(&p, MOUNT_ATTR_RDONLY, 0)
        .map_err(SetupError::mask("empty file (read-only)", path))
}

/// The scrubbed copy `n` of a masked file, staged and bound over it read-only.
fn mask_with(path: &str, content: &str, n: usize) -> Result<(), SetupError> {
    let src = format!("/stage/scrubbed-{n}");
    std::fs::write(&src, content).map_err(SetupError::write(&src))?;
    let _ = std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o444));
    let p = format!("{N}{path}");
    match mount(Some(&src), &p, None, libc::MS_BIND, None) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(SetupError::mask("scrubbed copy", path)(e)),
    }
    sys::mount_setattr_recursive(&p, MOUNT_ATTR_RDONLY, 0)
        .map_err(SetupError::mask("scrubbed copy (read-only)", path))
}

/// A masked directory made read-only once what is bound inside it is in place.
fn seal_dir(path: &str) -> Result<(), SetupError> {
    let p = format!("{N}{path}");
    match mount(
        None,
        &p,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        None,
    ) {
        Ok(_) => Ok(()),
        // Its mask was not in the view (above): nothing to seal.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SetupError::mask("seal", path)(e)),
    }
}

/// Makes the new root the root and leaves the base behind. One lazy detach of the base
/// takes the old root (the host's tree, mounted on `/oldroot` of the base) with it: a
/// detach frees its mounts after an expedited RCU grace period the caller waits for
/// (`strace -T`: 0.10-0.12 ms each of two detaches, 0.06-0.10 ms for the one; the launch's
/// A/B of one detach against two is inside this machine's noise).
fn pivot_into_new_root() -> Result<(), SetupError> {
    sys::chdir(N).map_err(SetupError::root("chdir", N))?;
    sys::pivot_root(".", ".").map_err(SetupError::root("pivot_root into", N))?;
    sys::umount2(".", libc::MNT_DETACH).map_err(SetupError::root("detach the base", "/tmp"))?;
    sys::chdir("/").map_err(SetupError::root("chdir", "/"))
}

/// Maps `uid` and `gid` to themselves in the new user namespace of child `pid` (which
/// cannot `setgroups`): what the call's processes run as.
pub(super) fn write_id_maps(pid: libc::pid_t, uid: u32, gid: u32) -> Result<(), SetupError> {
    for (file, content) in [
        ("uid_map", format!("{uid} {uid} 1\n")),
        ("setgroups", "deny".to_string()),
        ("gid_map", format!("{gid} {gid} 1\n")),
    ] {
        let path = format!("/proc/{pid}/{file}");
        std::fs::write(&path, content).map_err(SetupError::write(&path))?;
    }
    Ok(())
}

/// Fills `buf` from `fd`; false at EOF or on an error.
fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8]) -> bool {
    let mut at = 0;
    while at < buf.len() {
        match sys::read(fd.as_raw_fd(), &mut buf[at..]) {
            Ok(0) => return false,
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// The [`Rest`] the launcher writes on the sync pipe: its length (u32, little-endian),
/// then its bytes.
fn read_rest(fd: BorrowedFd<'_>) -> Result<Rest, SetupError> {
    Ok(crate::view::handoff::decode(&read_framed(fd, MAX_REST)?)?)
}

/// A message [`send_framed`] wrote: its length (u32, little-endian, at most `max`), then its
/// bytes.
pub(super) fn read_framed(fd: BorrowedFd<'_>, max: usize) -> Result<Vec<u8>, SetupError> {
    let ended = || SetupError::Handoff("the launcher ended during setup".into());
    let mut len = [0u8; 4];
    if !read_full(fd, &mut len) {
        return Err(ended());
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(SetupError::Handoff(format!("{len} bytes, over {max}")));
    }
    let mut buf = vec![0u8; len];
    if !read_full(fd, &mut buf) {
        return Err(ended());
    }
    Ok(buf)
}

/// Writes `bytes` on `fd` as the child reads them: their length (u32, little-endian), then
/// the bytes. A message past u32::MAX bytes is refused here, as the child refuses one past
/// its bound.
pub(super) fn send_framed(fd: RawFd, bytes: &[u8]) -> Result<(), SetupError> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| SetupError::Handoff(format!("{} bytes, over {MAX_REST}", bytes.len())))?;
    let mut msg = len.to_le_bytes().to_vec();
    msg.extend_from_slice(bytes);
    sys::write_all(fd, &msg).map_err(SetupError::sys("write the view to the child"))
}

/// Starts the contained tree; returns the init's pid (in the launcher's pid namespace).
/// `view` is the base of the view ([`crate::view::base`]); `rest` runs in the launcher while
/// the child builds that base, and gives what the child applies next (so computing the view
/// costs no time of its own). The tree's stdio are the launcher's. With `warm`, an init
/// made ahead ([`super::warm`]) gets the call when it still waits; otherwise (or when it is
/// gone) a new init is cloned.
pub fn spawn(
    view: &View,
    spec: &InnerSpec,
    report_w: RawFd,
    rest: impl FnOnce() -> Rest,
    warm: Option<super::warm::Waiting>,
) -> Result<libc::pid_t, SetupError> {
    if let Some(w) = warm.filter(|_| super::warm::fits(view)) {
        if let Some(going) = w.go(view, spec) {
            return going.and_then(|g| g.rest(&rest()));
        }
    }
    spawn_cold(view, spec, report_w, rest)
}

/// [`spawn`] with a new clone.
fn spawn_cold(
    view: &View,
    spec: &InnerSpec,
    report_w: RawFd,
    rest: impl FnOnce() -> Rest,
) -> Result<libc::pid_t, SetupError> {
    let (uid, gid) = sys::ids();
    let (sync_r, sync_w) = sys::pipe_owned().map_err(SetupError::sys("pipe"))?;
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if !view.host_net {
        flags |= libc::CLONE_NEWNET;
    }
    let pid = sys::clone_fork(flags).map_err(SetupError::sys("clone (user namespaces)"))?;
    if pid == 0 {
        drop(sync_w);
        // The init dies with the launcher (ending the call itself on the signal, see
        // `LAUNCHER_DEATH_SIGNAL`). (It cannot compare getppid, its parent is
        // outside its pid namespace: the launcher's pidfd tells whether the launcher died
        // before this, see `run_init`.)
        let death = crate::signals::LAUNCHER_DEATH_SIGNAL as libc::c_ulong;
        if let Err(e) = sys::prctl(libc::PR_SET_PDEATHSIG, death, 0) {
            crate::child::report::setup_error(
                report_w,
                format!("prctl(PR_SET_PDEATHSIG) of the call's init: {e}"),
            );
            sys::exit_now(crate::exit_code::BACKEND_FAILED);
        }
        let mut b = [0u8; 1];
        // The launcher writes one byte once the id maps are in place; EOF means it failed
        // or died.
        if !matches!(sys::read(sync_r.as_raw_fd(), &mut b), Ok(1)) {
            sys::exit_now(crate::exit_code::BACKEND_FAILED);
        }
        let rest = match build_root(view, sync_r) {
            Ok(r) => r,
            Err(e) => {
                crate::child::report::setup_error(report_w, e);
                sys::exit_now(crate::exit_code::BACKEND_FAILED);
            }
        };
        let _ = sys::sethostname(efr_sandbox_wire::CALL_HOSTNAME);
        if !view.host_net {
            if let Err(e) = sys::loopback_up() {
                crate::child::report::setup_error(
                    report_w,
                    SetupError::sys("bring loopback up in the call's network namespace")(e),
                );
                sys::exit_now(crate::exit_code::BACKEND_FAILED);
            }
            if let Err(e) = open_low_ports() {
                crate::child::report::setup_error(report_w, e);
                sys::exit_now(crate::exit_code::BACKEND_FAILED);
            }
        }
        let mut spec = spec.clone();
        spec.landlock = rest.landlock;
        run_init(&spec, report_w)
    }
    drop(sync_r);
    match write_id_maps(pid, uid, gid) {
        Ok(()) => {
            let _ = sys::write_all(sync_w.as_raw_fd(), b"1");
            // The child builds the base of its view meanwhile.
            let sent = send_framed(sync_w.as_raw_fd(), &crate::view::handoff::encode(&rest()));
            drop(sync_w);
            match sent {
                Ok(()) => Ok(pid),
                Err(e) => {
                    let _ = sys::kill(pid, libc::SIGKILL);
                    let _ = sys::waitpid(pid, 0);
                    Err(e)
                }
            }
        }
        Err(e) => {
            drop(sync_w);
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::waitpid(pid, 0);
            Err(e)
        }
    }
}
