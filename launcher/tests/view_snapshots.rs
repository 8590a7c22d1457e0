//! Snapshot tests of the contained view: the mount list and Landlock rules
//! [`efr_launcher::view::build_on`] computes for the default plan and for one plan per grant
//! kind, compared with the text kept in `tests/view-snapshots/NAME.txt`. A change in what is
//! masked, bound or hidden shows as a diff of those files.
//!
//! The tests are pure: no namespace, no mount, no privilege. Each builds a fake host under a
//! fresh directory of `/var/tmp` (a home, a project, the system's runtime dirs and sockets;
//! not under `/tmp`, which the view treats as the call's own), gives the view a
//! [`Host`] with a fixed uid and those system paths, and prints every path relative to that
//! directory (`$ROOT`), so the text is the same on every machine and for every user.
//!
//! `EFR_UPDATE_SNAPSHOTS=1 cargo test -p efr-launcher --test view_snapshots` rewrites the
//! files; review their diff before committing it.

use std::fmt::Write as _;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use efr_launcher::plan::{CacheFile, CacheLayer, EnvVar, Plan, ProxyPlan, ScrubbedFile, TrustPlan};
use efr_launcher::view::{Host, Op, View, build_on};
use efr_sandbox_wire::{Bus, Desktop, Grant};

/// The uid of the fake host's user.
const UID: u32 = 1000;

/// The masks of the default plan: one of each shape the view meets (a directory, a file, a
/// link to a directory, a link to a file, a missing path, a file scrubbed, a file inside a
/// cache), as the policy names them below the home.
const MASKS: &[&str] = &[
    ".ssh",
    ".aws",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".npmrc",
    ".config/gh",
    ".vault-token",
    ".cache/tool/token",
];

/// A fake host under a fresh directory: what the view of a plan reads.
struct World {
    _dir: tempfile::TempDir,
    /// The directory, its links resolved.
    root: String,
}

impl World {
    fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("efr-view-")
            .tempdir_in("/var/tmp")
            .expect("making a directory in /var/tmp");
        let root = std::fs::canonicalize(dir.path())
            .expect("resolving the test directory")
            .to_string_lossy()
            .into_owned();
        let w = World { _dir: dir, root };
        w.make_tree();
        w
    }

    /// The path `rel` below the fake host's root.
    fn p(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root)
    }

    /// The fake home's path `rel`.
    fn home(&self, rel: &str) -> String {
        self.p(&format!("home/{rel}"))
    }

    /// The fake host's runtime dir.
    fn runtime(&self) -> String {
        self.p(&format!("sys/run/user/{UID}"))
    }

    fn make_tree(&self) {
        let dirs = [
            "home/.ssh",
            "home/dotfiles/aws",
            "home/.docker",
            "home/.cache/tool",
            "home/proj/.git",
            "home/other",
            "layers/tool/upper",
            "layers/tool/work",
            "layers/tool/conversation",
            "layers/files",
            "sys/run/dbus",
            "sys/tmp/.X11-unix",
        ];
        for d in dirs {
            std::fs::create_dir_all(self.p(d)).expect("making the fake tree");
        }
        std::fs::create_dir_all(format!("{}/efr/scratch", self.runtime()))
            .expect("making the scratch dir");
        std::fs::create_dir_all(format!("{}/hypr/sig", self.runtime()))
            .expect("making hyprland's dir");
        let files = [
            "home/.ssh/id_ed25519",
            "home/.ssh/known_hosts",
            "home/.netrc",
            "home/.git-credentials",
            "home/.docker/config.json",
            "home/dotfiles/npmrc",
            "home/.cache/tool/token",
            "home/.cargo-config",
            "home/proj/Cargo.lock",
            "layers/files/.cargo-config",
        ];
        for f in files {
            std::fs::write(self.p(f), "secret\n").expect("writing the fake tree");
        }
        std::os::unix::fs::symlink(self.p("home/dotfiles/aws"), self.home(".aws"))
            .expect("linking .aws");
        std::os::unix::fs::symlink(self.p("home/dotfiles/npmrc"), self.home(".npmrc"))
            .expect("linking .npmrc");
        for s in self.sockets() {
            drop(UnixListener::bind(&s).expect("binding a fake socket"));
        }
    }

    /// The fake host's Unix sockets (all of them listening).
    fn sockets(&self) -> Vec<String> {
        let rt = self.runtime();
        let mut v = vec![
            self.home("agent.sock"),
            self.home("proj/app.sock"),
            self.p("sys/run/docker.sock"),
            self.p("sys/run/dbus/system_bus_socket"),
            self.p("sys/tmp/.X11-unix/X0"),
        ];
        for s in [
            "bus",
            "wayland-0",
            "sway.sock",
            "i3.sock",
            "niri.sock",
            "hypr/sig/.socket.sock",
            "hypr/sig/.socket2.sock",
        ] {
            v.push(format!("{rt}/{s}"));
        }
        v
    }

    fn host(&self) -> Host {
        Host {
            uid: UID,
            system_root: self.p("sys"),
            listening: Some(self.sockets()),
        }
    }

    /// The default plan: the project in the home, the masks, a scrubbed `.netrc`, the
    /// scratch dir under the (masked) runtime dir, no grant.
    fn plan(&self) -> Plan {
        let proj = self.home("proj");
        let mut plan = Plan::contained("true", proj.clone());
        plan.home = Some(self.home(""));
        plan.projects = vec![proj];
        plan.scratch = Some(format!("{}/efr/scratch", self.runtime()));
        plan.tmp_size = Some("64M".into());
        plan.shm_size = Some("16M".into());
        plan.masks = MASKS.iter().map(|m| self.home(m)).collect();
        plan.scrubbed = vec![ScrubbedFile {
            path: self.home(".netrc"),
            content: "machine example.com\n".into(),
        }];
        let rt = self.runtime();
        let env = [
            ("HOME", self.home("")),
            ("XDG_RUNTIME_DIR", rt.clone()),
            ("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={rt}/bus")),
            ("WAYLAND_DISPLAY", "wayland-0".into()),
            ("DISPLAY", ":0".into()),
            ("HYPRLAND_INSTANCE_SIGNATURE", "sig".into()),
            ("SWAYSOCK", "sway.sock".into()),
            ("I3SOCK", format!("{rt}/i3.sock")),
            ("NIRI_SOCKET", "niri.sock".into()),
        ];
        plan.env = Some(
            env.into_iter()
                .map(|(name, value)| EnvVar {
                    name: name.into(),
                    value,
                })
                .collect(),
        );
        plan
    }

    /// The default plan with `grants`.
    fn with(&self, grants: Vec<Grant>) -> Plan {
        let mut plan = self.plan();
        plan.grants = grants;
        plan
    }

    /// The default plan with `grants` and the call's proxy (as the service gives a call
    /// with host grants).
    fn with_proxy(&self, grants: Vec<Grant>) -> Plan {
        let mut plan = self.with(grants);
        plan.proxy = Some(ProxyPlan::new(format!("{}/efr/proxy.sock", self.runtime())));
        plan
    }
}

/// The case that shows a grant kind in the view: every kind has one (the match has no
/// `_`: a new kind does not compile until it names its case).
fn case_of(g: &Grant) -> &'static str {
    match g {
        Grant::Write { .. } => "write",
        Grant::Host { tcp: false, .. } => "host",
        Grant::Host { tcp: true, .. } => "host-tcp",
        Grant::OpenNetwork => "open-network",
        Grant::Socket { .. } => "socket",
        Grant::Bus { bus: Bus::Session } => "bus-session",
        Grant::Bus { bus: Bus::System } => "bus-system",
        Grant::BusFilter { .. } => "bus-filter",
        Grant::Device { .. } => "device",
        Grant::Unmask { .. } => "unmask",
        Grant::Desktop { desktop } => match desktop {
            Desktop::Wayland => "desktop-wayland",
            Desktop::X11 => "desktop-x11",
            Desktop::Hyprland => "desktop-hyprland",
            Desktop::Sway => "desktop-sway",
            Desktop::I3 => "desktop-i3",
            Desktop::Niri => "desktop-niri",
        },
        Grant::NetView => "net-view",
        // The call side puts placeholders in the plan's env and files; the grant itself
        // adds nothing to the view, so its view is the default one.
        Grant::Credential { .. } => "credential",
        // Refused by the plan's check before any view is built.
        Grant::Unknown => "default",
    }
}

/// The plans of the cases, by name.
fn cases(w: &World) -> Vec<(&'static str, Plan)> {
    let mut v = vec![
        ("default", w.plan()),
        (
            "write",
            w.with(vec![Grant::Write {
                path: w.home("other"),
            }]),
        ),
        (
            // A file inside the project: written by lock file and rename, no mount.
            "write-lock-file",
            w.with(vec![Grant::Write {
                path: w.home("proj/Cargo.lock"),
            }]),
        ),
        (
            "host",
            w.with_proxy(vec![Grant::Host {
                host: "example.com".into(),
                port: None,
                plain_http: false,
                tcp: false,
            }]),
        ),
        (
            "host-tcp",
            w.with_proxy(vec![Grant::Host {
                host: "localhost".into(),
                port: Some(5432),
                plain_http: false,
                tcp: true,
            }]),
        ),
        ("open-network", w.with(vec![Grant::OpenNetwork])),
        ("net-view", w.with(vec![Grant::NetView])),
        (
            "socket",
            w.with(vec![Grant::Socket {
                path: w.home("agent.sock"),
            }]),
        ),
        (
            "bus-session",
            w.with(vec![Grant::Bus { bus: Bus::Session }]),
        ),
        ("bus-system", w.with(vec![Grant::Bus { bus: Bus::System }])),
        (
            "bus-filter",
            w.with(vec![Grant::BusFilter { bus: Bus::Session }]),
        ),
        (
            "device",
            w.with(vec![Grant::Device {
                path: "/dev/kvm".into(),
            }]),
        ),
        (
            // Lifts a mask of its own.
            "unmask",
            w.with(vec![Grant::Unmask {
                path: w.home(".aws"),
            }]),
        ),
        (
            // Shows a file below a masked directory, read-only.
            "unmask-below",
            w.with(vec![Grant::Unmask {
                path: w.home(".ssh/known_hosts"),
            }]),
        ),
    ];
    for d in Desktop::ALL {
        let plan = w.with(vec![Grant::Desktop { desktop: d }]);
        v.push((case_of(&Grant::Desktop { desktop: d }), plan));
    }
    let mut caches = w.plan();
    caches.caches = vec![CacheLayer {
        path: w.home(".cache/tool"),
        upper: w.p("layers/tool/upper"),
        work: w.p("layers/tool/work"),
        conversation: Some(w.p("layers/tool/conversation")),
    }];
    caches.cache_files = vec![CacheFile {
        path: w.home(".cargo-config"),
        private: w.p("layers/files/.cargo-config"),
    }];
    v.push(("caches", caches));
    // A call holding a credential: the broker's bundle over the system bundles, the
    // bundle and the CA in the call's `/dev`.
    let mut trusted = w.with_proxy(vec![Grant::Credential {
        name: "github".into(),
    }]);
    trusted.trust = Some(TrustPlan {
        bundle: w.p("calls/c1/ca-bundle.pem"),
        ca: w.p("calls/c1/ca.pem"),
        system: vec![
            w.p("sys/etc/ssl/certs/ca-certificates.crt"),
            w.p("sys/etc/pki/tls/certs/ca-bundle.crt"),
        ],
        git_config: Some(w.p("calls/c1/gitconfig")),
    });
    v.push(("credential", trusted));
    let mut shown = w.plan();
    shown.hide_sockets = false;
    v.push(("sockets-shown", shown));
    v
}

/// The view as text, every path of the fake host as `$ROOT/...`.
fn render(v: &View, root: &str) -> String {
    let mut s = String::new();
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    writeln!(s, "tmp: {} ({} bytes)", opt(&v.tmp), v.tmp_size).unwrap();
    writeln!(s, "shm: {} bytes", v.shm_size).unwrap();
    writeln!(s, "scratch: {}", opt(&v.scratch)).unwrap();
    writeln!(s, "host_net: {}", v.host_net).unwrap();
    writeln!(s, "proxy_socket: {}", opt(&v.proxy_socket)).unwrap();
    // Only a call holding a credential has one: the other snapshots stay as they were.
    if let Some(t) = &v.trust {
        writeln!(s, "trust: bundle {} ca {}", t.bundle, t.ca).unwrap();
    }
    writeln!(s, "ops:").unwrap();
    for op in &v.ops {
        let line = match op {
            Op::Bind { src, dst, rw } => {
                let mode = if *rw { "rw" } else { "ro" };
                if src == dst {
                    format!("bind {mode} {src}")
                } else {
                    format!("bind {mode} {src} -> {dst}")
                }
            }
            Op::Dev { path } => format!("dev {path}"),
            Op::MaskDir { path } => format!("mask-dir {path}"),
            Op::MaskFile { path } => format!("mask-file {path}"),
            Op::MaskWith { path, content } => format!("mask-with {path} {content:?}"),
            Op::SealDir { path } => format!("seal-dir {path}"),
            Op::Overlay {
                path,
                upper,
                work,
                conversation,
            } => format!(
                "overlay {path} upper={upper} work={work} conversation={}",
                opt(conversation)
            ),
        };
        writeln!(s, "  {line}").unwrap();
    }
    let l = &v.landlock;
    writeln!(s, "landlock:").unwrap();
    for (name, list) in [
        ("read", &l.read),
        ("write", &l.write),
        ("dev", &l.dev),
        ("sockets", &l.sockets),
        ("hidden", &l.hidden),
    ] {
        writeln!(s, "  {name}:").unwrap();
        for p in list {
            writeln!(s, "    {p}").unwrap();
        }
    }
    writeln!(s, "  deny_tcp: {}", l.deny_tcp).unwrap();
    writeln!(s, "  scopes: {}", l.scopes).unwrap();
    s.replace(root, "$ROOT")
}

fn snapshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/view-snapshots")
}

fn updating() -> bool {
    std::env::var_os("EFR_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1")
}

/// Every case's view matches its snapshot (or, when updating, is written as it).
#[test]
fn views_match_their_snapshots() {
    let w = World::new();
    let dir = snapshot_dir();
    let mut failed = Vec::new();
    for (name, plan) in cases(&w) {
        let text = render(&build_on(&plan, &w.host()), &w.root);
        let file = dir.join(format!("{name}.txt"));
        if updating() {
            std::fs::create_dir_all(&dir).expect("making the snapshot dir");
            std::fs::write(&file, &text).expect("writing a snapshot");
            continue;
        }
        match std::fs::read_to_string(&file) {
            Ok(want) if want == text => {}
            Ok(want) => failed.push(format!(
                "{name}: the view differs from {}\n{}",
                file.display(),
                diff(&want, &text)
            )),
            Err(e) => failed.push(format!("{name}: reading {}: {e}", file.display())),
        }
    }
    assert!(
        failed.is_empty(),
        "{}\n(EFR_UPDATE_SNAPSHOTS=1 rewrites the snapshots; review their diff)",
        failed.join("\n")
    );
}

/// The lines only in `want` (`-`) and only in `got` (`+`), in order: enough to see what
/// moved without a diff crate.
fn diff(want: &str, got: &str) -> String {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let mut out = String::new();
    for l in &w {
        if !g.contains(l) {
            writeln!(out, "- {l}").unwrap();
        }
    }
    for l in &g {
        if !w.contains(l) {
            writeln!(out, "+ {l}").unwrap();
        }
    }
    if out.is_empty() {
        out = format!("(the same lines in another order)\n--- want\n{want}--- got\n{got}");
    }
    out
}

/// Every grant kind the cases hold has its snapshot, every snapshot is a case's, and no
/// two cases share a name.
#[test]
fn every_case_has_a_snapshot_and_every_snapshot_a_case() {
    let w = World::new();
    let cases = cases(&w);
    let mut names: Vec<&str> = cases.iter().map(|(n, _)| *n).collect();
    for (name, plan) in &cases {
        for g in &plan.grants {
            assert!(
                names.contains(&case_of(g)),
                "{name}: the grant {g:?} has no case of its own"
            );
        }
    }
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "two cases share a name");
    if updating() {
        return;
    }
    let mut files: Vec<String> = std::fs::read_dir(snapshot_dir())
        .expect("listing the snapshots")
        .map(|e| e.expect("reading the snapshot dir").file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut want: Vec<String> = names.iter().map(|n| format!("{n}.txt")).collect();
    want.sort();
    assert_eq!(files, want, "the snapshot files are not the cases'");
}

/// The default plan's view is the view [`efr_launcher::view::build`] gives on the real
/// host apart from what the host adds (its system masks and sockets): the snapshots test
/// the function the launcher runs.
#[test]
fn build_is_build_on_the_real_host() {
    let w = World::new();
    let mut plan = w.plan();
    plan.hide_sockets = false;
    let real = efr_launcher::view::build(&plan);
    let ours = build_on(&plan, &w.host());
    let under_root = |v: &View| -> Vec<Op> {
        v.ops
            .iter()
            .filter(|op| format!("{op:?}").contains(&w.root))
            .filter(|op| !format!("{op:?}").contains(&format!("{}/sys/", w.root)))
            .cloned()
            .collect()
    };
    assert_eq!(under_root(&real), under_root(&ours));
}

/// A credential grant adds nothing to the view by itself (the call side puts its
/// placeholders in the plan's env and files): its view is the default view.
#[test]
fn a_credential_grant_leaves_the_view_as_it_is() {
    let w = World::new();
    let default = render(&build_on(&w.plan(), &w.host()), &w.root);
    let granted = w.with(vec![Grant::Credential {
        name: "github".into(),
    }]);
    assert_eq!(render(&build_on(&granted, &w.host()), &w.root), default);
}
