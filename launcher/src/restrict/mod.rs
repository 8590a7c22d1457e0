//! What the line may do: Landlock ([`lockdown`]), the seccomp filter's reviewed tables
//! ([`seccomp`]) and the capabilities dropped ([`caps`]). no_new_privs is set by the init
//! through the crate's `sys` module (each result checked: a failure fails the launch).

pub mod caps;
pub mod lockdown;
pub mod seccomp;
