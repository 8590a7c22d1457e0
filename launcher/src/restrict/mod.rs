//! What the line may do: Landlock ([`lockdown`]) and the seccomp filter's reviewed tables
//! ([`seccomp`]). Capabilities are dropped and no_new_privs set by the init through the
//! crate's `sys` module (each result checked: a failure fails the launch).

pub mod lockdown;
pub mod seccomp;
