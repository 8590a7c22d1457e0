//! The text form of a grant, `KIND=VALUE` as `run --grant` reads it: shared by every command
//! that shows a grant to the user (`run`'s refusal lines, `approvals`, the hooks' answers,
//! `log`), so each says it the one way the user can type back.

use efr_sandbox_wire::Grant;

/// The `--grant` value of `g` as `run`'s `parse_grant` reads it back; `None` for a kind
/// `run` does not take.
pub fn grant_arg(g: &Grant) -> Option<String> {
    Some(match g {
        Grant::Write { path } => format!("write={path}"),
        Grant::Unmask { path } => format!("unmask={path}"),
        Grant::Device { path } => format!("device={path}"),
        Grant::Socket { path } => format!("socket={path}"),
        Grant::Bus { bus } => format!("bus={}", bus.as_str()),
        Grant::Desktop { desktop } => format!("desktop={}", desktop.as_str()),
        Grant::Host {
            host,
            port,
            plain_http,
            tcp,
        } => {
            // `::1` in brackets: the port follows a colon.
            let mut v = if host.contains(':') && !host.starts_with('[') {
                format!("host=[{host}]")
            } else {
                format!("host={host}")
            };
            if let Some(p) = port {
                v.push_str(&format!(":{p}"));
            }
            if *plain_http {
                v.push_str(":http");
            }
            if *tcp {
                v.push_str(":tcp");
            }
            v
        }
        Grant::NetView => "net_view".into(),
        Grant::OpenNetwork => "open_network".into(),
        Grant::BusFilter { .. } | Grant::Unknown => return None,
    })
}
