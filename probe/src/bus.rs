//! The bus filter's self-test (the check's `bus_proxy`): a private dbus-daemon and one
//! contained call whose `bus_filter=session` grant leads to it, built and run through
//! [`efr_call::Call`] as every call is. It lives with the other self-tests rather than in
//! the call crate, which it would otherwise import from inside (a call runs the bus filter;
//! the test runs a call).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use efr_call::bus::{MIN_VERSION, PIPELINED_AUTH_VERSION, version};
use efr_policy::config::Config;
use efr_sandbox_wire::{Bus, Grant};

/// A private `dbus-daemon` (session config) for the self-test; killed on drop.
struct PrivateBus {
    child: Child,
    dir: PathBuf,
    path: PathBuf,
    abstract_name: String,
    /// Its id (GetId's answer).
    id: String,
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn private_bus() -> Result<PrivateBus, String> {
    let name = efr_call::sys::random_hex(8).map_err(|e| format!("no random name: {e}"))?;
    let uid = efr_call::sys::euid();
    let dir = std::env::temp_dir().join(format!("efr-sandbox-{uid}/bus-test-{name}"));
    efr_call::launch::private_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("bus");
    let abstract_name = format!("efr-bus-test-{name}");
    let conf = dir.join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" \
             \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n\
             <busconfig><type>session</type>\
             <listen>unix:path={}</listen><listen>unix:abstract={abstract_name}</listen>\
             <auth>EXTERNAL</auth><policy context=\"default\">\
             <allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/>\
             <allow own=\"*\"/></policy></busconfig>\n",
            path.display()
        ),
    )
    .map_err(|e| format!("{}: {e}", conf.display()))?;
    let mut child = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--print-address=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start dbus-daemon: {e}"))?;
    // Its address line is its readiness.
    let mut line = String::new();
    let read = child
        .stdout
        .take()
        .map(|o| std::io::BufRead::read_line(&mut std::io::BufReader::new(o), &mut line));
    let mut bus = PrivateBus {
        child,
        dir,
        path,
        abstract_name,
        id: String::new(),
    };
    if !matches!(read, Some(Ok(_))) || !line.starts_with("unix:") {
        return Err(format!(
            "dbus-daemon gave no address (it said {:?})",
            line.trim()
        ));
    }
    // The bus's id, asked directly: what GetId through the filter must answer.
    let o = Command::new("dbus-send")
        .arg(format!("--bus=unix:path={}", bus.path.display()))
        .args([
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
        ])
        .arg("org.freedesktop.DBus.GetId")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run dbus-send: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    match text.split('"').nth(1) {
        Some(id) if o.status.success() && !id.is_empty() => bus.id = id.to_string(),
        _ => {
            return Err(format!(
                "the private bus gave no id to GetId ({:?})",
                text.trim()
            ));
        }
    }
    Ok(bus)
}

/// The bus filter's self-test (the check's `bus_proxy`): a private dbus-daemon, and one
/// contained call on `backend` with a `bus_filter=session` grant whose filter leads to it.
/// A call to the bus's own driver (GetId) must answer with that bus's id; a call to a name
/// no rule names and a BecomeMonitor must be refused and in the filter's log; the bus's
/// socket (path and abstract) must be out of reach.
pub fn self_test(
    config: &std::sync::Arc<Config>,
    env: &efr_policy::config::Env,
    backend: &str,
    runtime: Option<&Path>,
    handle: &tokio::runtime::Handle,
) -> Result<String, (efr_sandbox_wire::BusProxyOff, String)> {
    use efr_sandbox_wire::BusProxyOff;
    let fail = |m: String| (BusProxyOff::SelfTest, m);
    let v = version().map_err(|e| fail(e.to_string()))?;
    if v < MIN_VERSION {
        return Err((
            BusProxyOff::OldVersion,
            format!(
                "xdg-dbus-proxy {}.{}.{} is older than {}.{}.{}, which fixed its reading of \
                 multi-line auth and of a Hello() answered with an error",
                v.0, v.1, v.2, MIN_VERSION.0, MIN_VERSION.1, MIN_VERSION.2
            ),
        ));
    }
    let bus = private_bus().map_err(fail)?;
    let proj = bus.dir.join("proj");
    efr_call::launch::private_dir(&proj).map_err(|e| fail(format!("{}: {e}", proj.display())))?;
    let send = |dest: &str, path: &str, method: &str| {
        format!("dbus-send --session --print-reply --dest={dest} {path} {method}")
    };
    let line = [
        format!(
            "{} && echo EFR_ALLOWED_OK",
            send(
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.GetId"
            )
        ),
        format!(
            "{} || echo EFR_REFUSED",
            send(
                "org.efr.SelfTest.Refused",
                "/org/efr/SelfTest",
                "org.efr.SelfTest.Ping"
            )
        ),
        format!(
            "{} array:string: uint32:0 || echo EFR_MONITOR_REFUSED",
            send(
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.Monitoring.BecomeMonitor"
            )
        ),
        // sd-bus sends its whole auth at once (where busctl is installed).
        "if command -v busctl >/dev/null; then busctl --user call org.freedesktop.DBus \
         /org/freedesktop/DBus org.freedesktop.DBus GetId >/dev/null && echo EFR_PIPELINED_OK \
         || echo EFR_PIPELINED_FAILED; fi"
            .into(),
        format!(
            "dbus-send --bus=unix:path={} --print-reply --dest=org.freedesktop.DBus \
             /org/freedesktop/DBus org.freedesktop.DBus.GetId && echo EFR_REAL_PATH_REACHED",
            bus.path.display()
        ),
        format!(
            "dbus-send --bus=unix:abstract={} --print-reply --dest=org.freedesktop.DBus \
             /org/freedesktop/DBus org.freedesktop.DBus.GetId && echo EFR_REAL_ABSTRACT_REACHED",
            bus.abstract_name
        ),
        "true".into(),
    ]
    .join("; ");
    let p = efr_call::launch::CallParams {
        line,
        cwd: Some(proj.to_string_lossy().into_owned()),
        projects: vec![proj.to_string_lossy().into_owned()],
        grants: vec![Grant::BusFilter { bus: Bus::Session }],
        backend: Some(backend.to_string()),
        ..Default::default()
    };
    let mut penv: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k != "DBUS_SESSION_BUS_ADDRESS")
        .collect();
    penv.push((
        "DBUS_SESSION_BUS_ADDRESS".into(),
        format!("unix:path={}", bus.path.display()),
    ));
    let ctx = efr_call::Ctx {
        config: config.clone(),
        env: env.clone(),
        conversations: runtime.map(Path::to_path_buf),
        sockets: runtime.map(Path::to_path_buf),
        handle: handle.clone(),
        standby: None,
    };
    let mut call = match efr_call::Call::prepare_with_env(&p, &ctx, Some(penv)) {
        Ok(c) => c,
        Err(e) => return Err(fail(format!("the test call's plan: {e}"))),
    };
    call.attach(None, &ctx).map_err(|e| fail(e.to_string()))?;
    let mut run = call
        .spawn(
            efr_launcher::api::Io::null(),
            efr_launcher::api::Io::piped(),
            efr_launcher::api::Io::null(),
        )
        .map_err(|e| fail(format!("cannot start efr-launch: {}", e.source)))?;
    let mut out = String::new();
    if let Some(mut o) = run.child().stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let (waited, mut call) = run.wait_call();
    let (outcome, _) = waited.map_err(|e| fail(format!("the test call: {e}")))?;
    let summary = call.bus_summary();
    if let Some(e) = &outcome.setup_error {
        return Err(fail(format!("the test call could not start: {e}")));
    }
    let refused = |name: &str, member: &str| {
        summary
            .bus_refused
            .iter()
            .any(|r| r.name == name && r.member.as_deref() == Some(member))
    };
    let checks = [
        (
            out.contains("EFR_ALLOWED_OK") && out.contains(&format!("\"{}\"", bus.id)),
            "a filtered call to the bus driver (GetId) did not get the private bus's id",
        ),
        (
            out.contains("EFR_REFUSED")
                && refused("org.efr.SelfTest.Refused", "org.efr.SelfTest.Ping"),
            "a call to a name no rule names was not refused and logged",
        ),
        (
            out.contains("EFR_MONITOR_REFUSED")
                && refused(
                    "org.freedesktop.DBus",
                    "org.freedesktop.DBus.Monitoring.BecomeMonitor",
                ),
            "BecomeMonitor was not refused and logged",
        ),
        (
            !out.contains("EFR_PIPELINED_FAILED"),
            "busctl (a client that sends its whole auth at once) got no answer",
        ),
        (
            !out.contains("EFR_REAL_PATH_REACHED"),
            "the real bus's socket path was reachable",
        ),
        (
            !out.contains("EFR_REAL_ABSTRACT_REACHED"),
            "the real bus's abstract socket was reachable",
        ),
    ];
    if let Some((_, why)) = checks.iter().find(|(ok, _)| !ok) {
        return Err(fail(format!("{why} (the call printed {:?})", out.trim())));
    }
    let mut detail = format!(
        "xdg-dbus-proxy {}.{}.{}: a filtered call reached a private bus's driver, a name no \
         rule names and BecomeMonitor were refused and logged, the bus's own sockets were out \
         of reach",
        v.0, v.1, v.2
    );
    if out.contains("EFR_PIPELINED_OK") {
        detail += ", busctl (its whole auth at once) was answered";
    }
    if v < PIPELINED_AUTH_VERSION {
        detail += &format!(
            "; before {}.{}.{} it closes a client that sends its whole auth at once (sd-bus's \
             busctl, zbus), such clients are served through the service's auth relay",
            PIPELINED_AUTH_VERSION.0, PIPELINED_AUTH_VERSION.1, PIPELINED_AUTH_VERSION.2
        );
    }
    Ok(detail)
}
