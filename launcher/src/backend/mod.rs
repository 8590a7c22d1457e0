//! How the call's namespaces come to be: the native backend (clone with user namespaces,
//! the view built by the clone child), bubblewrap (the init execs inside it), and the
//! unsandboxed launch (a cgroup around an ordinary child, still owning its process tree).

pub mod bwrap;
pub mod native;
pub mod unsandboxed;
pub mod warm;
