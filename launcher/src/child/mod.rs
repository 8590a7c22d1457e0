//! What runs inside the call: the init (pid 1 of the call, and the line's process up to its
//! exec), the proxy's sockets it binds in the call's network namespace, and the one codec of
//! what the call's processes report to the launcher.

pub mod egress;
pub mod init;
pub mod report;
