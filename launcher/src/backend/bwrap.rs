//! The bubblewrap backend: the same view as bwrap arguments, our seccomp programs on fds
//! (`--add-seccomp-fd`), and `efr-launch --inner` as the command: it is the sandbox's pid 1
//! (`--as-pid-1`) and applies Landlock to the line itself.

use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

use crate::child::init::InnerSpec;
use crate::setup::SetupError;
use crate::sys;
use crate::view::{Op, View};

/// Where bubblewrap is looked for.
pub const BWRAP: &str = "/usr/bin/bwrap";

/// The oldest bubblewrap the backend works with: `--disable-userns` came in 0.8.0
/// (`--add-seccomp-fd` in 0.5.0, `--info-fd` and `--as-pid-1` before).
pub const MIN_VERSION: (u32, u32, u32) = (0, 8, 0);

/// `bwrap --version` of the bubblewrap at `path` as (major, minor, patch), with its text.
pub fn version(path: &str) -> Option<((u32, u32, u32), String)> {
    let out = std::process::Command::new(path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let v = text.split_whitespace().last()?;
    let mut it = v.split('.').map(|x| x.parse::<u32>().ok());
    let parsed = (
        it.next()??,
        it.next().flatten().unwrap_or(0),
        it.next().flatten().unwrap_or(0),
    );
    Some((parsed, text))
}

/// Whether bubblewrap is installed.
pub fn available() -> bool {
    std::path::Path::new(BWRAP).exists()
}

/// The arguments (after `bwrap`), up to and excluding the command.
/// `resolv` is the host file shown as `/etc/resolv.conf` of a call with a proxy.
/// The bwrap arguments of a view.
pub fn args(view: &View, empty_file: &str, resolv: Option<&str>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |x: &[&str]| a.extend(x.iter().map(|s| s.to_string()));
    push(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    // A call with a network namespace of its own gets it from the launcher
    // ([`pre_namespaces`]), never from bubblewrap (`--unshare-net`): made there, its
    // privileged ports are open to the call, on both backends.
    push(&[
        "--die-with-parent",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
        "--hostname",
        efr_sandbox_wire::CALL_HOSTNAME,
        "--disable-userns",
    ]);
    push(&["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]);
    // bubblewrap's /dev/shm is a directory of its /dev tmpfs, which has no size: the
    // call's gets a bounded tmpfs of its own, as /tmp does.
    let (tmp_size, shm_size) = (view.tmp_size.to_string(), view.shm_size.to_string());
    push(&[
        "--perms", "01777", "--size", &shm_size, "--tmpfs", "/dev/shm",
    ]);
    if let Some(s) = &view.proxy_socket {
        push(&["--ro-bind", s, crate::plan::INSIDE_PROXY_SOCKET]);
        if let Some(r) = resolv {
            push(&["--ro-bind", r, "/etc/resolv.conf"]);
        }
    }
    if let Some(t) = &view.trust {
        push(&["--ro-bind", &t.bundle, crate::plan::INSIDE_CA_BUNDLE]);
        push(&["--ro-bind", &t.ca, crate::plan::INSIDE_CA]);
        if let Some(g) = &t.git_config {
            push(&["--ro-bind", g, crate::plan::INSIDE_GIT_CONFIG]);
        }
    }
    match &view.tmp {
        Some(t) => push(&["--bind", t, "/tmp"]),
        None => push(&["--perms", "01777", "--size", &tmp_size, "--tmpfs", "/tmp"]),
    }
    if let Some(s) = &view.scratch {
        push(&["--bind", s, s]);
    }
    let mut scrubbed = 0usize;
    for op in &view.ops {
        match op {
            Op::Bind { src, dst, rw } => {
                push(&[if *rw { "--bind" } else { "--ro-bind" }, src, dst])
            }
            Op::Dev { path } => push(&["--dev-bind", path, path]),
            Op::MaskDir { path } => push(&["--tmpfs", path]),
            Op::MaskFile { path } => push(&["--ro-bind", empty_file, path]),
            Op::MaskWith { path, .. } => {
                // Written by [`Stage::new`] beside the empty file, in the same order.
                scrubbed += 1;
                let dir = Path::new(empty_file).parent().unwrap_or(Path::new("/"));
                let src = dir.join(format!("scrubbed-{scrubbed}"));
                push(&["--ro-bind", &src.to_string_lossy(), path])
            }
            Op::SealDir { path } => push(&["--remount-ro", path]),
            // Mounted before bubblewrap runs ([`pre_namespaces`]): bubblewrap's root bind
            // holds it read-only; bound again, writable.
            Op::Overlay { path, .. } => push(&["--bind", path, path]),
        }
    }
    a
}

/// A private directory on the host holding the empty file masks are bound from. The
/// launcher removes it as soon as the call's init runs (bubblewrap's mounts of its files
/// are made by then, and hold them), or when the launch ends before.
#[derive(Debug)]
pub struct Stage {
    /// The directory (mode 0700 in the temp dir), which also holds the scrubbed copies
    /// (`scrubbed-N`).
    pub dir: String,
    /// The empty read-only file masked files are bound from.
    pub empty: String,
    /// The call's `/etc/resolv.conf` (a call with a proxy).
    pub resolv: String,
}

impl Stage {
    /// The stage of `view`: the empty file, the resolv.conf and the scrubbed copies of its
    /// [`Op::MaskWith`] (`scrubbed-N`, in order), all read-only.
    pub fn new(view: &View) -> std::io::Result<Stage> {
        use std::os::unix::fs::PermissionsExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = format!(
            "{}/.efr-launch-{}-{nanos}",
            std::env::temp_dir().display(),
            sys::getpid()
        );
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)?;
        // Owned from here: a step that fails below removes the dir with it.
        let stage = Stage {
            empty: format!("{dir}/empty"),
            resolv: format!("{dir}/resolv.conf"),
            dir,
        };
        let read_only = |f: &str, content: &[u8]| {
            std::fs::write(f, content)?;
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o444))
        };
        read_only(&stage.empty, b"")?;
        read_only(&stage.resolv, crate::view::RESOLV_CONF.as_bytes())?;
        let mut n = 0;
        for op in &view.ops {
            if let Op::MaskWith { content, .. } = op {
                n += 1;
                read_only(&format!("{}/scrubbed-{n}", stage.dir), content.as_bytes())?;
            }
        }
        Ok(stage)
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where the launcher's own executable is bound inside bubblewrap's view, to run as the
/// sandbox's init (`--inner`): bubblewrap's `/dev` is a tmpfs private to the call, and not
/// mounted noexec.
pub const INSIDE_INIT: &str = "/dev/efr/init";

/// The fds bubblewrap's process hands to our init: the spec's memfd, the filter's memfd,
/// the report pipe and bubblewrap's info pipe.
struct InitFds {
    spec: RawFd,
    prog: RawFd,
    report_w: RawFd,
    info_w: RawFd,
}

/// The filter bubblewrap loads, as a memfd. It holds our init too; the supervisor in it
/// takes fds from and writes results into the line's processes, so those two calls are
/// refused to the line by a filter of its own instead (`supervise::filter::line_only`).
fn init_filter(view: &View, spec: &InnerSpec) -> Result<std::os::fd::OwnedFd, SetupError> {
    let mut drop = spec.seccomp_drop.clone();
    if spec.supervise.is_some() {
        drop.extend(
            crate::supervise::filter::INIT_NEEDS
                .iter()
                .map(|s| s.to_string()),
        );
    }
    let prog = crate::restrict::seccomp::program_without(view.landlock.deny_tcp, &drop)?;
    sys::memfd_with(
        "efr-seccomp",
        &crate::restrict::seccomp::program_bytes(&prog),
    )
    .map_err(SetupError::sys("memfd of the seccomp filter"))
}

/// bubblewrap's command line: the view, our executable bound at [`INSIDE_INIT`] (the host
/// path of this executable may not exist in the view: under /tmp, which the call has its
/// own of, or in a masked path), the info and filter fds, and our init with its fds.
fn bwrap_argv(bwrap: &str, view: &View, stage: &Stage, exe: String, fds: &InitFds) -> Vec<String> {
    let mut argv = vec![bwrap.to_string()];
    argv.extend(without_vanished_masks(
        args(view, &stage.empty, Some(&stage.resolv)),
        &stage.empty,
    ));
    argv.extend(["--ro-bind".into(), exe, INSIDE_INIT.into()]);
    argv.extend(["--info-fd".into(), fds.info_w.to_string()]);
    argv.extend(["--add-seccomp-fd".into(), fds.prog.to_string()]);
    argv.extend([
        "--".into(),
        INSIDE_INIT.into(),
        "--inner".into(),
        fds.spec.to_string(),
        fds.report_w.to_string(),
    ]);
    argv
}

/// Starts bwrap; returns its pid. `info_w` receives bwrap's `--info-fd` JSON (whose
/// `child-pid` is our inner init's pid). The tree's stdio are the launcher's.
pub fn spawn(
    bwrap: &str,
    view: &View,
    spec: &InnerSpec,
    stage: &Stage,
    report_w: RawFd,
    info_w: RawFd,
) -> Result<libc::pid_t, SetupError> {
    let exe = std::env::current_exe().map_err(SetupError::sys("own executable"))?;
    let exe = exe.to_string_lossy().into_owned();
    let spec_json = serde_json::to_vec(spec).map_err(SetupError::InnerSpec)?;
    let spec_fd = sys::memfd_with("efr-inner-spec", &spec_json)
        .map_err(SetupError::sys("memfd of the init's spec"))?;
    let prog_fd = init_filter(view, spec)?;
    let fds = InitFds {
        spec: spec_fd.as_raw_fd(),
        prog: prog_fd.as_raw_fd(),
        report_w,
        info_w,
    };
    let argv = bwrap_argv(bwrap, view, stage, exe, &fds);
    let me = sys::getpid();
    let pid = sys::fork().map_err(SetupError::sys("fork bubblewrap's process"))?;
    if pid == 0 {
        bwrap_process(bwrap, &argv, view, spec, &fds, me);
    }
    std::mem::drop(prog_fd);
    std::mem::drop(spec_fd);
    Ok(pid)
}

/// bubblewrap's process, forked by the launcher `me`: dies with it, ignores the signals the
/// launcher hands on, makes the call's network namespace and cache layers
/// ([`pre_namespaces`]), passes our init its fds and execs bubblewrap. Never returns.
fn bwrap_process(
    bwrap: &str,
    argv: &[String],
    view: &View,
    spec: &InnerSpec,
    fds: &InitFds,
    me: libc::pid_t,
) -> ! {
    let fail = |msg: String| -> ! {
        crate::child::report::setup_error(fds.report_w, msg);
        sys::exit_now(crate::exit_code::BACKEND_FAILED)
    };
    if let Err(e) = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0) {
        fail(format!("prctl(PR_SET_PDEATHSIG) of bubblewrap: {e}"));
    }
    // The launcher died before the death signal was set: nothing would end us.
    if sys::getppid() != me {
        sys::exit_now(crate::exit_code::BACKEND_FAILED);
    }
    // bubblewrap's process is in the caller's process group too, and handles no signal:
    // one sent to the group would kill it, and our init with it (it runs with
    // `--die-with-parent`), before the init reports how the line ended. It ignores what the
    // launcher ignores and forwards; the launcher ends it with SIGKILL.
    for &(sig, _) in crate::signals::IGNORED_SIGNALS {
        sys::ignore_signals(&[sig]);
    }
    sys::ignore_signals(&crate::signals::forwarded_signals());
    let layers: Vec<Layer<'_>> = view
        .ops
        .iter()
        .filter_map(|op| match op {
            Op::Overlay {
                path,
                upper,
                work,
                conversation,
            } => Some(Layer {
                path,
                upper,
                work,
                conversation: conversation.as_deref(),
            }),
            _ => None,
        })
        .collect();
    if !view.host_net || !layers.is_empty() {
        if let Err(e) = pre_namespaces(!view.host_net, &layers) {
            fail(e.to_string());
        }
    }
    for fd in [fds.prog, fds.spec, fds.report_w, fds.info_w]
        .into_iter()
        .chain(spec.launcher_pidfd)
    {
        if let Err(e) = sys::set_inheritable(fd) {
            fail(format!("fd {fd} for bubblewrap's init: {e}"));
        }
    }
    if let Some(t) = &spec.terminal {
        if let Err(e) = sys::set_inheritable(t.sock) {
            fail(format!("terminal fd {} for bubblewrap's init: {e}", t.sock));
        }
    }
    let e = sys::execve(bwrap, argv, &[]);
    fail(format!("exec {bwrap}: {e}"))
}

/// Whether `src` is what a mask binds: the stage's empty file, or a scrubbed copy written
/// beside it ([`Stage::new`]).
fn is_mask_source(src: &str, empty: &str) -> bool {
    let dir = Path::new(empty).parent().unwrap_or(Path::new("/"));
    src == empty
        || Path::new(src).parent() == Some(dir)
            && Path::new(src)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("scrubbed-"))
}

/// `args` without the masks (`--ro-bind EMPTY PATH`, or a scrubbed copy) of files gone since the view was
/// computed: a socket whose program has ended. bubblewrap would make the missing mount
/// point under the read-only root, fail ("Can't create file at PATH: Read-only file system")
/// and the call with it; the native backend skips such a mask the same way. A file made at
/// that path later is one made after the view, which meets the supervisor like any other.
fn without_vanished_masks(args: Vec<String>, empty: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        if a == "--ro-bind" && it.peek().is_some_and(|src| is_mask_source(src, empty)) {
            let src = it.next().unwrap_or_default();
            match it.next() {
                Some(dest)
                    if std::fs::symlink_metadata(&dest)
                        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) => {}
                Some(dest) => out.extend([a, src, dest]),
                None => out.extend([a, src]),
            }
            continue;
        }
        out.push(a);
    }
    out
}

/// One cache layer [`pre_namespaces`] mounts: the cache, the call's upper and work dirs,
/// the conversation's layer.
#[derive(Debug)]
struct Layer<'a> {
    path: &'a str,
    upper: &'a str,
    work: &'a str,
    conversation: Option<&'a str>,
}

/// The namespaces a bwrap call needs made before bwrap runs.
///
/// The network namespace of a call that has one of its own (`net`; always made here, not
/// by bubblewrap): a proxied call's init must bind ports 53 and 443 there, a job's server
/// may listen on a low port, and inside bwrap the call holds no capability over a
/// namespace bwrap makes (bwrap
/// nests a second user namespace for `--dev` and `--disable-userns`). The caches' layers
/// (`layers`: cache, upper, work, conversation layer): bubblewrap 0.8 (Debian 12) has no `--overlay`, and
/// inside bwrap nothing may mount. So this process (the future bwrap) enters a user
/// namespace A where it is root, a new network namespace (`net`) and a new mount namespace
/// (`layers`) owned by A, brings loopback up and opens the privileged ports to every user
/// of that namespace (`ip_unprivileged_port_start = 0`: only the call lives there), mounts
/// each layer on its cache, then enters a user namespace B mapping its own ids back, so
/// bwrap runs as the same user as without them; its root bind holds the layers.
fn pre_namespaces(net: bool, layers: &[Layer<'_>]) -> Result<(), SetupError> {
    let (uid, gid) = sys::ids();
    let mut flags = libc::CLONE_NEWUSER;
    if net {
        flags |= libc::CLONE_NEWNET;
    }
    if !layers.is_empty() {
        flags |= libc::CLONE_NEWNS;
    }
    let write = |path: &str, content: String| {
        std::fs::write(path, content).map_err(SetupError::write(path))
    };
    sys::unshare(flags).map_err(SetupError::sys("unshare the namespaces before bwrap"))?;
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("0 {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("0 {gid} 1\n"))?;
    if net {
        sys::loopback_up().map_err(SetupError::sys(
            "bring loopback up in the call's network namespace",
        ))?;
        write("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0".into())?;
    }
    if !layers.is_empty() {
        sys::mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)
            .map_err(SetupError::remount("make private", "/"))?;
        for l in layers {
            sys::mount(
                Some("overlay"),
                l.path,
                Some("overlay"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(&crate::view::overlay_options(
                    l.path,
                    l.conversation,
                    l.upper,
                    l.work,
                )),
            )
            .map_err(|source| SetupError::Overlay {
                path: l.path.to_string(),
                upper: l.upper.to_string(),
                work: l.work.to_string(),
                source,
            })?;
        }
    }
    sys::unshare(libc::CLONE_NEWUSER)
        .map_err(SetupError::sys("unshare the user namespace bwrap runs in"))?;
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} 0 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} 0 1\n"))?;
    Ok(())
}

/// `efr-launch --inner SPECFD REPORTFD`: the init inside bubblewrap.
pub fn inner_main(spec_fd: RawFd, report_fd: RawFd) -> ! {
    let mut data = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match sys::read(spec_fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
        if data.len() > 4 * crate::plan::MAX_PLAN_BYTES {
            break;
        }
    }
    sys::close(spec_fd);
    // The report fd must not reach the line (it could write the launcher's report).
    if let Err(e) = sys::set_cloexec(report_fd) {
        crate::child::report::setup_error(
            report_fd,
            format!("the report fd {report_fd} close-on-exec: {e}"),
        );
        sys::exit_now(crate::exit_code::BACKEND_FAILED)
    }
    match serde_json::from_slice::<InnerSpec>(&data) {
        Ok(spec) => crate::child::init::run_init(&spec, report_fd),
        Err(e) => {
            crate::child::report::setup_error(report_fd, format!("inner spec: {e}"));
            sys::exit_now(crate::exit_code::BACKEND_FAILED)
        }
    }
}

#[cfg(test)]
mod vanished_masks {
    use super::without_vanished_masks;

    /// `line`'s words, `HERE` and `GONE` put for the two paths.
    fn argv(line: &str, here: &str, gone: &str) -> Vec<String> {
        line.split_whitespace()
            .map(|w| w.replace("HERE", here).replace("GONE", gone))
            .collect()
    }

    #[test]
    fn a_mask_of_a_file_gone_is_dropped_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("here.sock");
        std::fs::write(&here, b"").unwrap();
        let gone = dir.path().join("gone.sock");
        let (here, gone) = (here.to_str().unwrap(), gone.to_str().unwrap());
        let args = argv(
            "--ro-bind / / --ro-bind /stage/empty HERE --ro-bind /stage/empty GONE \
             --ro-bind /stage/scrubbed-1 GONE --ro-bind /stage/scrubbed-2 HERE \
             --ro-bind /usr/share GONE --tmpfs /tmp",
            here,
            gone,
        );
        assert_eq!(
            without_vanished_masks(args, "/stage/empty"),
            argv(
                "--ro-bind / / --ro-bind /stage/empty HERE \
                 --ro-bind /stage/scrubbed-2 HERE --ro-bind /usr/share GONE --tmpfs /tmp",
                here,
                gone,
            ),
            "the masks of the gone file are dropped; its other bind stays bubblewrap's error"
        );
    }
}
