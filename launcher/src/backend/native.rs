//! The native backend: clone into new user, mount, pid, ipc, uts (and net) namespaces, build
//! the view with our own mounts, pivot_root, and run the init.

use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::child::init::{InnerSpec, run_init};
use crate::sys::{self, MOUNT_ATTR_RDONLY, mount};
use crate::view::handoff::Rest;
use crate::view::{Op, View};

/// The most the child reads of a [`Rest`] (a view of many thousand paths fits).
const MAX_REST: usize = 64 << 20;

const O: &str = "/oldroot";
const N: &str = "/newroot";

fn err(what: &str, e: io::Error) -> String {
    format!("{what}: {e}")
}

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

fn bind(src: &str, dst: &str, ro: bool) -> Result<(), String> {
    let is_dir = std::fs::metadata(src).map(|m| m.is_dir()).unwrap_or(false);
    ensure_mountpoint(dst, is_dir);
    mount(Some(src), dst, None, libc::MS_BIND | libc::MS_REC, None).map_err(|e| err("bind", e))?;
    if ro {
        sys::mount_setattr_recursive(dst, MOUNT_ATTR_RDONLY, 0).map_err(|e| err("read-only", e))?;
    }
    Ok(())
}

fn setup_dev(view: &View) -> Result<(), String> {
    let dev = format!("{N}/dev");
    mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("mode=0755,size=1m"),
    )
    .map_err(|e| err("/dev", e))?;
    for d in ["null", "zero", "full", "random", "urandom", "tty"] {
        let src = format!("{O}/dev/{d}");
        if Path::new(&src).exists() {
            bind(&src, &format!("{dev}/{d}"), false)?;
        }
    }
    std::fs::create_dir(format!("{dev}/pts")).map_err(|e| err("/dev/pts", e))?;
    mount(
        Some("devpts"),
        &format!("{dev}/pts"),
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(|e| err("devpts", e))?;
    std::os::unix::fs::symlink("pts/ptmx", format!("{dev}/ptmx")).map_err(|e| err("ptmx", e))?;
    std::fs::create_dir(format!("{dev}/shm")).map_err(|e| err("/dev/shm", e))?;
    mount(
        Some("tmpfs"),
        &format!("{dev}/shm"),
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&format!("mode=1777,size={}", view.shm_size)),
    )
    .map_err(|e| err("/dev/shm", e))?;
    for (l, t) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(t, format!("{dev}/{l}")).map_err(|e| err("/dev link", e))?;
    }
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
        )
        .map_err(|e| format!("proxy socket {s}: {e}"))?;
    }
    mount(
        None,
        &dev,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
        None,
    )
    .map_err(|e| err("/dev read-only", e))?;
    Ok(())
}

/// `/etc/resolv.conf` of the new root names the call's DNS server: a read-only file of the
/// base tmpfs bound over it (over its target when it is a link, as `/etc/resolv.conf`
/// often is; an absolute target is taken inside the new root).
fn resolv_conf() -> Result<(), String> {
    let src = "/stage/resolv.conf";
    std::fs::write(src, crate::view::RESOLV_CONF).map_err(|e| err("resolv.conf", e))?;
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
        return Err(format!(
            "resolv.conf: {dst} is missing; the call's DNS server cannot be named"
        ));
    }
    mount(Some(src), &dst, None, libc::MS_BIND, None).map_err(|e| err("resolv.conf", e))?;
    sys::mount_setattr_recursive(&dst, MOUNT_ATTR_RDONLY, 0).map_err(|e| err("resolv.conf", e))
}

/// Builds the view under `/newroot` and pivots into it. Runs in the child, as root of the
/// new user namespace.
fn build_root(view: &View, sync_r: RawFd) -> Result<Rest, String> {
    mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| err("private /", e))?;
    // A base tmpfs (over /tmp of this mount namespace only) holds the old and new roots.
    mount(
        Some("tmpfs"),
        "/tmp",
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0700,size=1m"),
    )
    .map_err(|e| err("base tmpfs", e))?;
    for d in [
        "/tmp/oldroot",
        "/tmp/newroot",
        "/tmp/stage",
        "/tmp/stage/emptydir",
    ] {
        std::fs::create_dir(d).map_err(|e| err(d, e))?;
    }
    std::fs::File::create("/tmp/stage/empty").map_err(|e| err("stage", e))?;
    let _ = std::fs::set_permissions("/tmp/stage/empty", std::fs::Permissions::from_mode(0o444));
    sys::pivot_root("/tmp", "/tmp/oldroot").map_err(|e| err("pivot_root (base)", e))?;
    sys::chdir("/").map_err(|e| err("chdir", e))?;
    // The host's tree, read-only.
    mount(Some(O), N, None, libc::MS_BIND | libc::MS_REC, None).map_err(|e| err("root bind", e))?;
    sys::mount_setattr_recursive(N, MOUNT_ATTR_RDONLY, 0).map_err(|e| err("root read-only", e))?;
    mount(
        Some("proc"),
        &format!("{N}/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .map_err(|e| err("/proc", e))?;
    setup_dev(view)?;
    match &view.tmp {
        Some(t) => bind(&format!("{O}{t}"), &format!("{N}/tmp"), false)?,
        None => mount(
            Some("tmpfs"),
            &format!("{N}/tmp"),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&format!("mode=1777,size={}", view.tmp_size)),
        )
        .map_err(|e| err("/tmp", e))?,
    }
    if let Some(s) = &view.scratch {
        bind(&format!("{O}{s}"), &format!("{N}{s}"), false)?;
    }
    // The launcher computes the rest of the view while the steps above run: a length, then a [`Rest`] (EOF: it failed or died).
    let rest = read_rest(sync_r)?;
    sys::close(sync_r);
    let mut scrubbed = 0usize;
    for op in &rest.ops {
        match op {
            Op::Bind { src, dst, rw } => bind(&format!("{O}{src}"), &format!("{N}{dst}"), !rw)
                .map_err(|e| format!("{dst}: {e}"))?,
            Op::Dev { .. } => {}
            Op::Overlay { path, upper, work } => {
                let dst = format!("{N}{path}");
                let opts = crate::view::overlay_options(
                    &format!("{O}{path}"),
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
                .map_err(|e| format!("cache layer {path}: {}", err("overlay", e)))?;
            }
            Op::MaskDir { path } => {
                match mount(
                    Some("tmpfs"),
                    &format!("{N}{path}"),
                    Some("tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    Some("mode=0755,size=64k"),
                ) {
                    Ok(_) => {}
                    // Not in the view: gone since the view was computed, or below the
                    // call's own /tmp (a runtime dir under the host's /tmp), which shows
                    // nothing of the host's. Nothing to hide; one that appears later has
                    // no Landlock read rule (see `crate::restrict::lockdown`).
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(err("mask", e)),
                }
            }
            Op::MaskFile { path } => {
                let p = format!("{N}{path}");
                match mount(Some("/stage/empty"), &p, None, libc::MS_BIND, None) {
                    Ok(_) => {}
                    // Gone since the view was computed (a socket of a program that
                    // ended): nothing left to hide.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(err("mask", e)),
                }
                sys::mount_setattr_recursive(&p, MOUNT_ATTR_RDONLY, 0)
                    .map_err(|e| err("mask", e))?;
            }
            Op::MaskWith { path, content } => {
                // The copy lives in the staging tmpfs of this mount namespace.
                scrubbed += 1;
                let src = format!("/stage/scrubbed-{scrubbed}");
                std::fs::write(&src, content).map_err(|e| err("scrubbed copy", e))?;
                let _ = std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o444));
                let p = format!("{N}{path}");
                match mount(Some(&src), &p, None, libc::MS_BIND, None) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(err("scrubbed copy", e)),
                }
                sys::mount_setattr_recursive(&p, MOUNT_ATTR_RDONLY, 0)
                    .map_err(|e| err("scrubbed copy", e))?;
            }
            Op::SealDir { path } => {
                let p = format!("{N}{path}");
                match mount(
                    None,
                    &p,
                    None,
                    libc::MS_REMOUNT
                        | libc::MS_BIND
                        | libc::MS_RDONLY
                        | libc::MS_NOSUID
                        | libc::MS_NODEV,
                    None,
                ) {
                    Ok(_) => {}
                    // Its mask was not in the view (above): nothing to seal.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(err("seal mask", e)),
                }
            }
        }
    }
    if view.proxy_socket.is_some() {
        resolv_conf()?;
    }
    // Leave the old root behind and make the new one the root.
    sys::umount2(O, libc::MNT_DETACH).map_err(|e| err("detach old root", e))?;
    sys::chdir(N).map_err(|e| err("chdir newroot", e))?;
    sys::pivot_root(".", ".").map_err(|e| err("pivot_root", e))?;
    sys::umount2(".", libc::MNT_DETACH).map_err(|e| err("detach base", e))?;
    sys::chdir("/").map_err(|e| err("chdir /", e))?;
    Ok(rest)
}

/// Fills `buf` from `fd`; false at EOF or on an error.
fn read_full(fd: RawFd, buf: &mut [u8]) -> bool {
    let mut at = 0;
    while at < buf.len() {
        match sys::read(fd, &mut buf[at..]) {
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
fn read_rest(fd: RawFd) -> Result<Rest, String> {
    let ended = || "the launcher ended during setup".to_string();
    let mut len = [0u8; 4];
    if !read_full(fd, &mut len) {
        return Err(ended());
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_REST {
        return Err(format!("view of {len} bytes, over {MAX_REST}"));
    }
    let mut buf = vec![0u8; len];
    if !read_full(fd, &mut buf) {
        return Err(ended());
    }
    crate::view::handoff::decode(&buf).map_err(|e| format!("view from the launcher: {e}"))
}

/// Starts the contained tree; returns the init's pid (in the launcher's pid namespace).
/// `view` is the base of the view ([`crate::view::base`]); `rest` runs in the launcher while
/// the child builds that base, and gives what the child applies next (so computing the view
/// costs no time of its own). The tree's stdio are the launcher's.
pub fn spawn(
    view: &View,
    spec: &InnerSpec,
    report_w: RawFd,
    rest: impl FnOnce() -> Rest,
) -> Result<libc::pid_t, String> {
    let (uid, gid) = sys::ids();
    let (sync_r, sync_w) = sys::pipe().map_err(|e| err("pipe", e))?;
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if !view.host_net {
        flags |= libc::CLONE_NEWNET;
    }
    let pid = sys::clone_fork(flags).map_err(|e| err("clone (user namespaces)", e))?;
    if pid == 0 {
        sys::close(sync_w);
        // The init dies with the launcher. (It cannot compare getppid, its parent is
        // outside its pid namespace: the launcher's pidfd tells whether the launcher died
        // before this, see `run_init`.)
        if let Err(e) = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0) {
            crate::child::report::setup_error(
                report_w,
                format!("prctl(PR_SET_PDEATHSIG) of the call's init: {e}"),
            );
            sys::exit_now(crate::exit_code::BACKEND_FAILED);
        }
        let mut b = [0u8; 1];
        // The launcher writes one byte once the id maps are in place; EOF means it failed
        // or died.
        if !matches!(sys::read(sync_r, &mut b), Ok(1)) {
            sys::exit_now(crate::exit_code::BACKEND_FAILED);
        }
        let rest = match build_root(view, sync_r) {
            Ok(r) => r,
            Err(e) => {
                crate::child::report::setup_error(report_w, e);
                sys::exit_now(crate::exit_code::BACKEND_FAILED);
            }
        };
        let _ = sys::sethostname("efr-sandbox");
        if !view.host_net {
            if let Err(e) = sys::loopback_up() {
                crate::child::report::setup_error(report_w, format!("loopback: {e}"));
                sys::exit_now(crate::exit_code::BACKEND_FAILED);
            }
        }
        let mut spec = spec.clone();
        spec.landlock = rest.landlock;
        run_init(&spec, report_w)
    }
    sys::close(sync_r);
    let maps = (|| -> io::Result<()> {
        std::fs::write(format!("/proc/{pid}/uid_map"), format!("{uid} {uid} 1\n"))?;
        std::fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
        std::fs::write(format!("/proc/{pid}/gid_map"), format!("{gid} {gid} 1\n"))?;
        Ok(())
    })();
    match maps {
        Ok(()) => {
            let _ = sys::write_all(sync_w, b"1");
            // The child builds the base of its view meanwhile.
            let bytes = crate::view::handoff::encode(&rest());
            let mut msg = (bytes.len() as u32).to_le_bytes().to_vec();
            msg.extend_from_slice(&bytes);
            let sent = sys::write_all(sync_w, &msg).map_err(|e| err("view to the child", e));
            sys::close(sync_w);
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
            sys::close(sync_w);
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::waitpid(pid, 0);
            Err(err("uid/gid maps", e))
        }
    }
}
