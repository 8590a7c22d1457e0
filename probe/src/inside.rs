//! The self-tests that run inside a contained call (`efr-probe inside ...`, or the hidden
//! `efr-sandbox __probe inside ...`). Each looks at the process from the inside, never at
//! the plan, and prints one JSON object on stdout: `{"tests": [{name, pass, ms, detail}]}`.
//!
//! Run outside a sandbox, every test fails: that is how the tests of this crate show that
//! no check is a pass by construction.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use efr_sandbox_wire::SelfTest;
use serde::{Deserialize, Serialize};

use crate::sys;

/// One self-test's result as the probe reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsideTest {
    /// Which test (its wire name, such as `landlock` or `seccomp`).
    pub name: SelfTest,
    /// The test passed.
    pub pass: bool,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// What it saw, one line (why, when it failed).
    pub detail: String,
}

/// What the probe prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsideReport {
    /// Every test run, in order.
    pub tests: Vec<InsideTest>,
}

impl InsideReport {
    /// The test of this name.
    pub fn get(&self, name: SelfTest) -> Option<&InsideTest> {
        self.tests.iter().find(|t| t.name == name)
    }
}

/// The probe's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InsideArgs {
    /// A TCP port listening on the host's 127.0.0.1 (must be unreachable).
    pub port: Option<u16>,
    /// A project root (must be writable).
    pub project: Option<String>,
    /// A masked directory (must look empty).
    pub masked: Option<String>,
    /// A `.git/hooks` directory inside the project (must be read-only).
    pub hooks: Option<String>,
    /// A variable set in the launcher's environment that looks secret (must be gone).
    pub canary: Option<String>,
    /// Run the `netview` test only (a `net_view` call).
    pub netview: bool,
    /// Run the `proxy` test only (a call with a host grant): `NAME:PORT`, the granted test
    /// host to reach through the proxy.
    pub proxy: Option<String>,
    /// The `proxy` test: `NAME:PORT` the call was not granted (must be refused).
    pub denied: Option<String>,
    /// The `proxy` test: 64 hex digits, the client random of the hello to the test host.
    pub nonce: Option<String>,
}

impl InsideArgs {
    /// The arguments as `efr-probe inside` takes them.
    pub fn to_args(&self) -> Vec<String> {
        let mut v = vec!["inside".to_string()];
        let mut opt = |k: &str, x: &Option<String>| {
            if let Some(x) = x {
                v.push(k.into());
                v.push(x.clone());
            }
        };
        opt("--port", &self.port.map(|p| p.to_string()));
        opt("--project", &self.project);
        opt("--masked", &self.masked);
        opt("--hooks", &self.hooks);
        opt("--canary", &self.canary);
        opt("--proxy", &self.proxy);
        opt("--denied", &self.denied);
        opt("--nonce", &self.nonce);
        if self.netview {
            v.push("--netview".into());
        }
        v
    }

    /// Parses the arguments after `inside`.
    pub fn parse(args: &[String]) -> Result<InsideArgs, String> {
        let mut a = InsideArgs::default();
        let mut it = args.iter();
        while let Some(k) = it.next() {
            if k == "--netview" {
                a.netview = true;
                continue;
            }
            let v = it
                .next()
                .ok_or_else(|| format!("{k} needs a value"))?
                .clone();
            match k.as_str() {
                "--port" => a.port = Some(v.parse().map_err(|_| format!("bad port {v:?}"))?),
                "--project" => a.project = Some(v),
                "--masked" => a.masked = Some(v),
                "--hooks" => a.hooks = Some(v),
                "--canary" => a.canary = Some(v),
                "--proxy" => a.proxy = Some(v),
                "--denied" => a.denied = Some(v),
                "--nonce" => a.nonce = Some(v),
                _ => return Err(format!("unknown argument {k:?}")),
            }
        }
        Ok(a)
    }
}

/// `efr-probe ARGS`: `inside ...` runs the self-tests; the exit status is 0 when they ran
/// (pass or fail: the JSON says which), 2 on bad arguments.
pub fn main(args: Vec<String>) -> i32 {
    if args.first().map(String::as_str) != Some("inside") {
        eprintln!(
            "usage: efr-probe inside [--port N] [--project DIR] [--masked DIR] [--hooks DIR] [--canary NAME] [--netview] \
             [--proxy NAME:PORT --denied NAME:PORT --nonce HEX]"
        );
        return 2;
    }
    let a = match InsideArgs::parse(&args[1..]) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("efr-probe: {e}");
            return 2;
        }
    };
    let r = run(&a);
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, &r);
    let _ = out.write_all(b"\n");
    0
}

/// Runs the tests the arguments ask for.
pub fn run(a: &InsideArgs) -> InsideReport {
    let mut tests = Vec::new();
    let mut t = |name: SelfTest, f: &dyn Fn() -> Result<String, String>| {
        let start = Instant::now();
        let r = f();
        tests.push(InsideTest {
            name,
            pass: r.is_ok(),
            ms: crate::elapsed_ms(start),
            detail: r.unwrap_or_else(|e| e),
        });
    };
    if a.netview {
        t(SelfTest::Netview, &netview);
        return InsideReport { tests };
    }
    if let Some(p) = &a.proxy {
        t(SelfTest::Proxy, &|| {
            proxy(p, a.denied.as_deref(), a.nonce.as_deref())
        });
        return InsideReport { tests };
    }
    t(SelfTest::Userns, &userns);
    t(SelfTest::Mounts, &|| {
        mounts(a.project.as_deref(), a.hooks.as_deref())
    });
    t(SelfTest::Masks, &|| masks(a.masked.as_deref()));
    t(SelfTest::Pidns, &pidns);
    t(SelfTest::Netns, &|| netns(a.port));
    t(SelfTest::Landlock, &landlock);
    t(SelfTest::Seccomp, &seccomp);
    t(SelfTest::Caps, &caps);
    t(SelfTest::NoNewPrivs, &no_new_privs);
    t(SelfTest::Env, &|| env(a.canary.as_deref()));
    InsideReport { tests }
}

/// `EPERM`-style name of an errno.
pub fn errno_name(e: i32) -> String {
    let n = match e {
        0 => "success",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EROFS => "EROFS",
        libc::EBADF => "EBADF",
        libc::EFAULT => "EFAULT",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::ENOENT => "ENOENT",
        libc::ENOKEY => "ENOKEY",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ENOSPC => "ENOSPC",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::ESRCH => "ESRCH",
        _ => return format!("errno {e}"),
    };
    n.to_string()
}

fn status_field(name: &str) -> Option<String> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

fn userns() -> Result<String, String> {
    let map = std::fs::read_to_string("/proc/self/uid_map")
        .map_err(|e| format!("cannot read /proc/self/uid_map: {e}"))?;
    let lines: Vec<Vec<u64>> = map
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .collect();
    let shown = map.split_whitespace().collect::<Vec<_>>().join(" ");
    match lines.as_slice() {
        [l] if l.len() == 3 && l[2] == 1 => {
            Ok(format!("own user namespace: uid map `{shown}` (one uid)"))
        }
        _ => Err(format!(
            "no user namespace of the call's own: uid map `{shown}` is not a single uid"
        )),
    }
}

fn create_in(dir: &str) -> Result<(), i32> {
    let p = format!("{dir}/.efr-probe-{}", std::process::id());
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&p);
            Ok(())
        }
        Err(e) => Err(e.raw_os_error().unwrap_or(0)),
    }
}

fn mounts(project: Option<&str>, hooks: Option<&str>) -> Result<String, String> {
    // An anonymous file on the root: no name is left behind if it is created.
    // open("/", O_TMPFILE | O_WRONLY, 0o600); the file, if any, is closed when dropped.
    let e = match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open("/")
    {
        Ok(_) => return Err("a file could be created on / : the root is writable".into()),
        Err(e) => e.raw_os_error().unwrap_or(0),
    };
    if e != libc::EROFS {
        return Err(format!(
            "a write on / failed with {} instead of EROFS: the root is not mounted read-only",
            errno_name(e)
        ));
    }
    let mut detail = vec!["/ is read-only (EROFS)".to_string()];
    if let Some(p) = project {
        create_in(p).map_err(|e| {
            format!(
                "the project {p} is not writable ({}): calls cannot work in it",
                errno_name(e)
            )
        })?;
        detail.push("the project is writable".into());
    }
    if let Some(h) = hooks {
        match create_in(h) {
            Ok(()) => {
                return Err(format!(
                    "{h} is writable: a call could plant a git hook that runs outside"
                ));
            }
            Err(libc::EROFS) => detail.push(".git/hooks is read-only (EROFS)".into()),
            Err(e) => {
                return Err(format!(
                    "a write in {h} failed with {} instead of EROFS: .git/hooks is not \
                     mounted read-only",
                    errno_name(e)
                ));
            }
        }
    }
    Ok(detail.join(", "))
}

fn masks(masked: Option<&str>) -> Result<String, String> {
    let Some(m) = masked else {
        return Err("no masked path to look at (probe argument --masked missing)".into());
    };
    let n = std::fs::read_dir(m)
        .map_err(|e| format!("masked path {m}: {e} (a mask must be present but empty)"))?
        .count();
    if n == 0 {
        Ok(format!("{m} is present and empty"))
    } else {
        Err(format!(
            "masked path {m} shows {n} entries: masks are not mounted, credential stores are readable"
        ))
    }
}

fn pidns() -> Result<String, String> {
    let pid = std::process::id();
    let ppid = std::os::unix::process::parent_id();
    let visible = std::fs::read_dir("/proc")
        .map_err(|e| format!("/proc: {e}"))?
        .filter_map(|d| d.ok())
        .filter(|d| d.file_name().to_string_lossy().parse::<u32>().is_ok())
        .count();
    if ppid != 1 {
        return Err(format!(
            "the probe's parent is pid {ppid}, not the sandbox's init (pid 1): no pid namespace"
        ));
    }
    if visible > 8 {
        return Err(format!(
            "{visible} processes are visible in /proc: the host's processes can be seen"
        ));
    }
    Ok(format!(
        "own pid namespace: pid {pid}, parent is the init (pid 1), {visible} processes visible"
    ))
}

fn netns(port: Option<u16>) -> Result<String, String> {
    let Some(port) = port else {
        return Err("no host port to try (probe argument --port missing)".into());
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
        Ok(_) => Err(format!(
            "connected to the host's 127.0.0.1:{port}: the call shares the host's network"
        )),
        Err(e) => Ok(format!(
            "the host's 127.0.0.1:{port} is unreachable ({}): own network namespace",
            errno_name(e.raw_os_error().unwrap_or(0))
        )),
    }
}

/// The kernel's Landlock ABI (0 when none).
pub fn landlock_abi() -> u32 {
    // Saturating: an ABI past u32::MAX (none is) still reads as one.
    crate::sys::landlock_abi_version().map_or(0, |r| u32::try_from(r).unwrap_or(u32::MAX))
}

fn landlock() -> Result<String, String> {
    let abi = landlock_abi();
    if abi == 0 {
        return Err("the kernel has no Landlock (ABI 0)".into());
    }
    // /proc is mounted writable, so only Landlock refuses this write.
    // open("/proc/self/comm", O_WRONLY); the file, if any, is closed when dropped.
    let e = match std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/comm")
    {
        Ok(_) => {
            return Err(format!(
                "ABI {abi}, but a write outside the writable roots (/proc/self/comm) was allowed: \
                 Landlock is not enforced"
            ));
        }
        Err(e) => e.raw_os_error().unwrap_or(0),
    };
    if e != libc::EACCES {
        return Err(format!(
            "ABI {abi}; a write to /proc/self/comm failed with {} instead of Landlock's EACCES",
            errno_name(e)
        ));
    }
    let mut d = format!("ABI {abi}: writes outside the writable roots refused (EACCES)");
    if abi >= 6 {
        // The parent is the init, outside the line's Landlock domain: the signal scope
        // refuses even a null signal to it.
        #[allow(
            clippy::cast_possible_wrap,
            reason = "a pid: at most the kernel's pid_max (2^22), always a positive pid_t"
        )]
        let parent = std::os::unix::process::parent_id() as libc::pid_t;
        // Signal 0 only checks the permission.
        let e = match crate::sys::kill(parent, 0) {
            Ok(()) => {
                return Err(format!(
                    "ABI {abi}, but the call could signal its init: Landlock's signal scope is not enforced"
                ));
            }
            Err(e) => e.raw_os_error().unwrap_or(0),
        };
        if e != libc::EPERM {
            return Err(format!(
                "ABI {abi}; a null signal to the init failed with {} instead of EPERM",
                errno_name(e)
            ));
        }
        d.push_str(", signals scoped (EPERM)");
    }
    Ok(d)
}

/// One refused call: the result, and the errno that the filter answers.
struct Refusal {
    what: &'static str,
    entry: &'static str,
    want: i32,
    /// The errno the kernel would give without the filter, for the detail.
    got: i32,
}

/// The errno of a refused call, 0 when it worked.
fn refused(r: sys::Raw) -> i32 {
    r.map_or_else(|e| e, |_| 0)
}

fn seccomp_calls() -> Vec<Refusal> {
    vec![
        // unshare with an invalid flag: EINVAL without the filter, EPERM with it.
        // Bit 0 is not a valid unshare flag: the call changes nothing.
        Refusal {
            what: "unshare(invalid flag)",
            entry: "unshare",
            want: libc::EPERM,
            got: refused(sys::unshare(1)),
        },
        // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_THREAD_KEYRING, create=0): ENOKEY or an id
        // without the filter.
        Refusal {
            what: "keyctl(GET_KEYRING_ID)",
            entry: "keyctl",
            want: libc::EPERM,
            got: refused(sys::keyctl_thread_keyring_id()),
        },
        // ioctl(-1, TIOCSTI): EBADF without the filter.
        Refusal {
            what: "ioctl(-1, TIOCSTI)",
            entry: "ioctl",
            want: libc::EPERM,
            got: refused(sys::ioctl_tiocsti_bad_fd()),
        },
        // clone3(NULL, 0): EINVAL without the filter (size too small), ENOSYS with it.
        Refusal {
            what: "clone3(NULL, 0)",
            entry: "clone3",
            want: libc::ENOSYS,
            got: refused(sys::clone3_null()),
        },
    ]
}

fn seccomp() -> Result<String, String> {
    let mode = status_field("Seccomp").unwrap_or_default();
    if mode != "2" {
        return Err(format!(
            "no seccomp filter on the call (/proc/self/status Seccomp: {mode:?})"
        ));
    }
    let calls = seccomp_calls();
    let bad: Vec<String> = calls
        .iter()
        .filter(|c| c.got != c.want)
        .map(|c| {
            format!(
                "{} gave {} instead of {} (the filter lacks its `{}` entry)",
                c.what,
                errno_name(c.got),
                errno_name(c.want),
                c.entry
            )
        })
        .collect();
    if !bad.is_empty() {
        return Err(bad.join("; "));
    }
    let filters = status_field("Seccomp_filters").unwrap_or_else(|| "?".into());
    Ok(format!(
        "{} filters; {} refused as expected",
        filters,
        calls
            .iter()
            .map(|c| format!("{} -> {}", c.what, errno_name(c.want)))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn caps() -> Result<String, String> {
    let mut bad = Vec::new();
    for f in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let v = status_field(f).unwrap_or_else(|| "?".into());
        if u64::from_str_radix(&v, 16) != Ok(0) {
            bad.push(format!("{f} {v}"));
        }
    }
    if bad.is_empty() {
        Ok("no capability in any set (CapInh, CapPrm, CapEff, CapBnd, CapAmb all 0)".into())
    } else {
        Err(format!("capabilities left: {}", bad.join(", ")))
    }
}

fn no_new_privs() -> Result<String, String> {
    match status_field("NoNewPrivs").as_deref() {
        Some("1") => Ok("set: setuid programs cannot raise privileges".into()),
        other => Err(format!(
            "NoNewPrivs is {:?}: setuid programs could raise privileges",
            other.unwrap_or("missing")
        )),
    }
}

fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
    ]
    .iter()
    .any(|s| n.contains(s))
        || n.starts_with("AWS_")
        || n.starts_with("AZURE_")
        || n == "SSH_AUTH_SOCK"
        || n == "GPG_AGENT_INFO"
}

fn env(canary: Option<&str>) -> Result<String, String> {
    let names: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    if let Some(c) = canary {
        if names.iter().any(|n| n == c) {
            return Err(format!(
                "the canary secret {c} set in the launcher's environment reached the call"
            ));
        }
    }
    let leaked: Vec<&String> = names.iter().filter(|n| looks_secret(n)).collect();
    if !leaked.is_empty() {
        return Err(format!(
            "secret-looking variables reached the call: {}",
            leaked
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(format!(
        "scrubbed: {} variables, none secret-looking{}",
        names.len(),
        if canary.is_some() {
            ", the canary is gone"
        } else {
            ""
        }
    ))
}

fn netview() -> Result<String, String> {
    // The sockets, if any, are closed when dropped.
    let inet_err = match sys::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC) {
        Ok(_) => {
            return Err("socket(AF_INET) worked: a net_view call could reach the network".into());
        }
        Err(e) => e.raw_os_error().unwrap_or(0),
    };
    if inet_err != libc::EPERM {
        return Err(format!(
            "socket(AF_INET) failed with {} instead of EPERM",
            errno_name(inet_err)
        ));
    }
    if let Err(e) = sys::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC) {
        return Err(format!(
            "socket(AF_UNIX) failed with {}: net_view breaks local tools",
            errno_name(e.raw_os_error().unwrap_or(0))
        ));
    }
    Ok("socket(AF_INET) refused (EPERM), socket(AF_UNIX) works".into())
}

/// How long the `proxy` test waits for each answer.
const PROXY_TIMEOUT: Duration = Duration::from_secs(3);

/// The relay the call's `HTTPS_PROXY` names (`http://127.0.0.1:PORT`).
fn proxy_addr() -> Result<std::net::SocketAddr, String> {
    let v = std::env::var("HTTPS_PROXY")
        .or_else(|_| std::env::var("https_proxy"))
        .map_err(|_| {
            "no HTTPS_PROXY in the call's environment: the proxy variables are not set".to_string()
        })?;
    let hp = v
        .strip_prefix("http://")
        .unwrap_or(&v)
        .trim_end_matches('/');
    hp.parse()
        .map_err(|_| format!("HTTPS_PROXY={v:?} is not http://ADDRESS:PORT"))
}

/// Sends `CONNECT target` through the relay and reads the answer's head: `(status line,
/// X-Efr-Block-Reason)`.
fn connect_through(
    relay: std::net::SocketAddr,
    target: &str,
) -> Result<(std::net::TcpStream, String, Option<String>), String> {
    use std::io::Read;
    let mut c = std::net::TcpStream::connect_timeout(&relay, PROXY_TIMEOUT).map_err(|e| {
        format!(
            "the proxy did not answer: its relay at {relay} (HTTPS_PROXY) refused the \
             connection ({})",
            errno_name(e.raw_os_error().unwrap_or(0))
        )
    })?;
    let _ = c.set_read_timeout(Some(PROXY_TIMEOUT));
    c.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .map_err(|e| {
            format!("the proxy did not answer: CONNECT {target} could not be sent: {e}")
        })?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match c.read(&mut b) {
            Ok(1) => head.push(b[0]),
            Ok(_) if head.is_empty() => {
                return Err(format!(
                    "the proxy did not answer CONNECT {target}: the connection closed with no \
                     answer (the proxy closed it, or stopped serving)"
                ));
            }
            Ok(_) => {
                return Err(format!(
                    "the proxy's answer to CONNECT {target} was cut short: {:?}",
                    String::from_utf8_lossy(&head)
                ));
            }
            Err(e)
                if head.is_empty()
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                return Err(format!(
                    "the proxy did not answer CONNECT {target} within {} s",
                    PROXY_TIMEOUT.as_secs()
                ));
            }
            Err(e) if head.is_empty() => {
                return Err(format!(
                    "the proxy did not answer CONNECT {target}: the connection ended with {} \
                     and no answer (the proxy closed it, or stopped serving)",
                    errno_name(e.raw_os_error().unwrap_or(0))
                ));
            }
            Err(e) => {
                return Err(format!(
                    "the proxy's answer to CONNECT {target} was cut short ({e})"
                ));
            }
        }
        if head.len() > 16 * 1024 {
            return Err(format!(
                "the proxy's answer to CONNECT {target} is too long"
            ));
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.lines();
    let status = lines.next().unwrap_or("").trim().to_string();
    let reason = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("X-Efr-Block-Reason")
            .then(|| v.trim().to_string())
    });
    Ok((c, status, reason))
}

fn status_code(line: &str) -> u16 {
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The `proxy` test: (a) the granted test host is reached through the proxy variables
/// (CONNECT 200, a ClientHello with its SNI and the nonce, the host's TLS alert back), (b)
/// a name the call was not granted is refused (403, `X-Efr-Block-Reason: not_allowed`).
fn proxy(granted: &str, denied: Option<&str>, nonce: Option<&str>) -> Result<String, String> {
    use std::io::Read;
    let nonce = nonce
        .and_then(crate::testhost::unhex32)
        .ok_or("no nonce for the test host (probe argument --nonce missing or malformed)")?;
    let denied = denied.ok_or("no name to be refused (probe argument --denied missing)")?;
    let name = granted
        .rsplit_once(':')
        .map(|(n, _)| n)
        .ok_or_else(|| format!("--proxy {granted:?} is not NAME:PORT"))?;
    let relay = proxy_addr()?;

    // (a) The granted host, through the proxy.
    let (mut c, status, reason) = connect_through(relay, granted)?;
    if status_code(&status) != 200 {
        return Err(format!(
            "the proxy answered `{status}`{} to CONNECT {granted}, a granted name",
            reason
                .map(|r| format!(" (X-Efr-Block-Reason: {r})"))
                .unwrap_or_default()
        ));
    }
    c.write_all(&crate::testhost::client_hello(name, &nonce))
        .map_err(|e| {
            format!("CONNECT {granted} gave 200 but the ClientHello could not be sent: {e}")
        })?;
    let mut answer = [0u8; 7];
    let mut got = 0;
    while got < answer.len() {
        match c.read(&mut answer[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(_) => break,
        }
    }
    if got == 0 {
        return Err(format!(
            "CONNECT {granted} gave 200 but no answer to the ClientHello came back through the \
             tunnel (the proxy dropped it, or the test host was not reached)"
        ));
    }
    if answer[..got] != crate::testhost::ALERT_OK {
        return Err(format!(
            "CONNECT {granted} gave 200 but the answer to the ClientHello is not the test \
             host's (bytes {})",
            crate::testhost::hex(&answer[..got])
        ));
    }
    drop(c);

    // (b) A name the call was not granted.
    let (_c, status, reason) = connect_through(relay, denied)?;
    let code = status_code(&status);
    if code == 200 {
        return Err(format!(
            "the proxy let CONNECT {denied} through (200), a name the call was not granted"
        ));
    }
    if code != 403 || reason.as_deref() != Some("not_allowed") {
        return Err(format!(
            "CONNECT {denied}, a name the call was not granted, got `{status}` ({}) instead of \
             403 with X-Efr-Block-Reason: not_allowed",
            reason
                .map(|r| format!("X-Efr-Block-Reason: {r}"))
                .unwrap_or_else(|| "no block reason".into())
        ));
    }
    Ok(format!(
        "through HTTPS_PROXY ({relay}): CONNECT {granted} 200, a ClientHello with SNI {name} \
         reached the loopback test host and its TLS alert came back (no full handshake); \
         CONNECT {denied} 403 not_allowed"
    ))
}
