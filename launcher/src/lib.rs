//! The launcher of the efr sandbox (to come, issue 3): the plan it reads, the native and
//! bubblewrap backends, mounts, Landlock and seccomp, and the `efr-launch` binary that runs
//! one shell line contained or unsandboxed and reports on a status fd.
