//! The text form of a grant, `KIND=VALUE` as `run --grant` reads it: shared by every command
//! that shows a grant to the user (`run`'s refusal lines, `approvals`, the hooks' answers,
//! `log`), so each says it the one way the user can type back. The form itself is wire's
//! (`Grant`'s `Display` and `FromStr`); this decides which kinds are offered back.

use efr_sandbox_wire::Grant;

/// The `--grant` value of `g` as `run`'s `parse_grant` reads it back; `None` for a kind
/// not offered back to the user.
pub fn grant_arg(g: &Grant) -> Option<String> {
    match g {
        Grant::Write { .. }
        | Grant::Unmask { .. }
        | Grant::Device { .. }
        | Grant::Socket { .. }
        | Grant::Bus { .. }
        | Grant::Desktop { .. }
        | Grant::Host { .. }
        | Grant::NetView
        | Grant::OpenNetwork
        | Grant::Credential { .. } => Some(g.to_string()),
        // Not offered back as a word to retry with: a bus filter (the retry lines never
        // offered one, though `run` reads `bus_filter=`), an unknown kind (it has no text).
        Grant::BusFilter { .. } | Grant::Unknown => None,
    }
}
