//! The standalone runner: `efr-sandbox proxy --listen PATH --grant host=NAME[:PORT][:http]...`
//! (and the `efr-proxy` binary), for debugging and benchmarks.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::policy::{HostRule, ProxyPolicy};
use crate::server::Proxy;

const USAGE: &str = "\
usage: efr-proxy [--listen PATH] [--listen-tcp ADDR]
                 [--relay-tcp ADDR] [--dns-udp ADDR] [--synthetic-tcp ADDR]...
                 [--grant host=NAME[:PORT][:http]]... [--allow NAME[:PORT][:http]]...
                 [--deny PATTERN]... [--token-host PATTERN]... [--resolve NAME=IP[,IP...]]...
                 [--max-conns N] [--max-bytes N] [--idle-timeout SECS] [--handshake-timeout SECS]
Serves until SIGINT or SIGTERM, logs each refusal on stderr, then prints the summary
(sandbox_summary JSON) and the counters on stdout. --relay-tcp, --dns-udp and
--synthetic-tcp bind those sockets and hand them to the proxy over the --listen socket, as
the launcher's init does in a call's network namespace (a relay listener, the DNS server,
listeners for synthetic addresses 127.77.x.y).";

/// Parsed options of the standalone runner.
#[derive(Debug, Clone, Default)]
pub struct StandaloneArgs {
    /// `--listen PATH`: the Unix socket clients (and hand-overs) come on.
    pub listen: Option<PathBuf>,
    /// `--listen-tcp ADDR`: a TCP listener for proxy requests (tests and benchmarks).
    pub listen_tcp: Option<SocketAddr>,
    /// `--relay-tcp ADDR`: a relay listener to bind and hand over on `listen`.
    pub relay_tcp: Option<SocketAddr>,
    /// `--dns-udp ADDR`: a DNS socket to bind and hand over on `listen`.
    pub dns_udp: Option<SocketAddr>,
    /// `--synthetic-tcp ADDR`: listeners for synthetic addresses to bind and hand over on
    /// `listen`.
    pub synthetic_tcp: Vec<SocketAddr>,
    /// The grants, allow and deny lists, token hosts, `--resolve` names and limits.
    pub policy: ProxyPolicy,
}

impl StandaloneArgs {
    /// Parse the command line (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<StandaloneArgs, String> {
        let mut out = StandaloneArgs::default();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (a.clone(), None),
            };
            if flag == "--help" || flag == "-h" {
                return Err(USAGE.to_string());
            }
            let mut val = || {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .ok_or(format!("{flag} needs a value"))
            };
            let secs = |v: String| -> Result<Duration, String> {
                v.parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && s.is_finite())
                    .map(Duration::from_secs_f64)
                    .ok_or(format!("{flag}: not a number of seconds: {v}"))
            };
            let lim = &mut out.policy.limits;
            match flag.as_str() {
                "--listen" => out.listen = Some(PathBuf::from(val()?)),
                "--listen-tcp" => {
                    out.listen_tcp = Some(val()?.parse().map_err(|e| format!("{flag}: {e}"))?)
                }
                "--relay-tcp" => {
                    out.relay_tcp = Some(val()?.parse().map_err(|e| format!("{flag}: {e}"))?)
                }
                "--dns-udp" => {
                    out.dns_udp = Some(val()?.parse().map_err(|e| format!("{flag}: {e}"))?)
                }
                "--synthetic-tcp" => out
                    .synthetic_tcp
                    .push(val()?.parse().map_err(|e| format!("{flag}: {e}"))?),
                "--grant" => {
                    let v = val()?;
                    let spec = v.strip_prefix("host=").unwrap_or(&v);
                    let r = HostRule::parse_cli(spec).ok_or(format!("bad host grant: {v}"))?;
                    out.policy.grants.push(r);
                }
                "--allow" => {
                    let v = val()?;
                    out.policy
                        .allow
                        .push(HostRule::parse_cli(&v).ok_or(format!("bad allow rule: {v}"))?);
                }
                "--deny" => out.policy.deny(&val()?),
                "--token-host" => out.policy.token_host(&val()?),
                "--resolve" => {
                    let v = val()?;
                    let (n, ips) = v.split_once('=').ok_or(format!("--resolve NAME=IP: {v}"))?;
                    let ips: Vec<IpAddr> = ips
                        .split(',')
                        .map(|s| {
                            s.parse::<IpAddr>()
                                .map_err(|e| format!("--resolve {v}: {e}"))
                        })
                        .collect::<Result<_, _>>()?;
                    out.policy.map(n, ips);
                }
                "--max-conns" => {
                    lim.max_conns = val()?.parse().map_err(|e| format!("{flag}: {e}"))?
                }
                "--max-bytes" => {
                    lim.max_bytes = val()?.parse().map_err(|e| format!("{flag}: {e}"))?
                }
                "--idle-timeout" => lim.idle_timeout = secs(val()?)?,
                "--handshake-timeout" => lim.handshake_timeout = secs(val()?)?,
                _ => return Err(format!("unknown option {a}\n{USAGE}")),
            }
        }
        if out.listen.is_none() && out.listen_tcp.is_none() {
            return Err(format!("give --listen PATH or --listen-tcp ADDR\n{USAGE}"));
        }
        let hand_over =
            out.relay_tcp.is_some() || out.dns_udp.is_some() || !out.synthetic_tcp.is_empty();
        if hand_over && out.listen.is_none() {
            return Err("--relay-tcp, --dns-udp and --synthetic-tcp need --listen PATH".into());
        }
        Ok(out)
    }
}

/// The sockets of `--relay-tcp`, `--dns-udp` and `--synthetic-tcp`, bound.
fn bind_handed(a: &StandaloneArgs) -> Result<crate::inside::Sockets, String> {
    let tcp = |addr: SocketAddr| {
        let l = std::net::TcpListener::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
        eprintln!("efr-proxy: handing over a listener on {addr}");
        Ok::<_, String>(l)
    };
    let dns = match a.dns_udp {
        Some(addr) => {
            let u = std::net::UdpSocket::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
            eprintln!("efr-proxy: handing over the DNS socket on {addr}");
            Some(u)
        }
        None => None,
    };
    Ok(crate::inside::Sockets {
        relay: a.relay_tcp.map(tcp).transpose()?,
        dns,
        synthetic: a
            .synthetic_tcp
            .iter()
            .map(|&addr| tcp(addr))
            .collect::<Result<_, _>>()?,
        tcp: Vec::new(),
    })
}

/// Run a standalone proxy until SIGINT or SIGTERM; print its summary as JSON.
pub fn run_standalone(args: impl IntoIterator<Item = String>) -> Result<(), String> {
    let a = StandaloneArgs::parse(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(async move {
        // Both signals caught before anything is said: one sent as soon as `listening` is
        // read still ends the proxy with its summary.
        use tokio::signal::unix::{SignalKind, signal};
        let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("signal: {e}"))?;
        let mut term = signal(SignalKind::terminate()).map_err(|e| format!("signal: {e}"))?;
        let proxy = Proxy::new(a.policy.clone());
        let mut events = proxy.subscribe(4096);
        tokio::spawn(async move {
            while let Some(r) = events.recv().await {
                eprintln!(
                    "efr-proxy: refused {}:{} {}",
                    r.host,
                    r.port,
                    r.reason.as_str()
                );
            }
        });
        if let Some(path) = &a.listen {
            let l = Proxy::bind_unix(path).map_err(|e| format!("bind {}: {e}", path.display()))?;
            let p = proxy.clone();
            tokio::spawn(async move { p.serve_unix(l).await });
        }
        if let Some(addr) = a.listen_tcp {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("bind {addr}: {e}"))?;
            eprintln!(
                "efr-proxy: listening on {}",
                l.local_addr().map_err(|e| e.to_string())?
            );
            let p = proxy.clone();
            tokio::spawn(async move { p.serve_tcp(l).await });
        }
        if let Some(path) = a.listen.clone() {
            let socks = bind_handed(&a)?;
            if socks.relay.is_some() || socks.dns.is_some() || !socks.synthetic.is_empty() {
                let wait = Duration::from_secs(10);
                let to = path.clone();
                tokio::task::spawn_blocking(move || crate::inside::hand_over(&to, socks, wait))
                    .await
                    .map_err(|e| format!("hand-over: {e}"))?
                    .map_err(|e| format!("hand-over: {e}"))?;
            }
            // Said only now: the proxy takes a hand-over on its first connection only, so a
            // client told to go ahead must come after this runner's own.
            eprintln!("efr-proxy: listening on {}", path.display());
        }
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        proxy.shutdown();
        if let Some(path) = &a.listen {
            let _ = std::fs::remove_file(path);
        }
        // The summary only, one JSON line; a stdout closed by then is no error of the
        // proxy's (it has served its calls).
        let summary = serde_json::to_string(&proxy.summary()).map_err(|e| e.to_string())?;
        let _ = writeln!(std::io::stdout(), "{summary}");
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<StandaloneArgs, String> {
        StandaloneArgs::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn args() {
        let a = parse("--listen /tmp/x --grant host=a.test:8443:http --grant=b.test --resolve a.test=127.0.0.1 --max-conns 4")
            .unwrap();
        assert_eq!(a.policy.grants.len(), 2);
        assert_eq!(a.policy.grants[0].port, Some(8443));
        assert!(a.policy.grants[0].plain_http);
        assert_eq!(a.policy.limits.max_conns, 4);
        assert!(a.policy.resolve.contains_key("a.test"));
        assert!(parse("--grant a.test").is_err());
        assert!(parse("--listen /x --grant host=1.2.3.4").is_err());
        assert!(parse("--listen /x --bogus").is_err());
        assert!(parse("--listen-tcp 127.0.0.1:0 --relay-tcp 127.0.0.1:0").is_err());
        let a = parse("--listen /x --dns-udp 127.0.0.1:53 --synthetic-tcp 0.0.0.0:443 --synthetic-tcp 0.0.0.0:8443")
            .unwrap();
        assert_eq!(a.synthetic_tcp.len(), 2);
        assert!(a.dns_udp.is_some());
    }
}
