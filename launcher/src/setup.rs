//! The one error of a launch's setup inside the call's namespaces (the native backend's
//! view, the namespaces made before bubblewrap): every variant names the operation and the
//! path it failed on, with the system's error. It crosses to the launcher as the report's
//! `setup_error` line (`crate::child::report::Report::SetupError`, its text), which the
//! launcher writes as the `setup_error` status line.

use std::io;

/// Why the call's setup failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file system mounted (`tmpfs`, `proc`, `devpts`, `overlay`) on `path`.
    #[error("mount {what} on {path}: {source}")]
    Mount {
        /// The file system (`tmpfs`, `proc`, `devpts`, `overlay`).
        what: &'static str,
        /// Where it was to be mounted.
        path: String,
        /// What mount said.
        #[source]
        source: io::Error,
    },
    /// A cache's overlay on `path`.
    #[error("mount overlay on {path} (upper {upper}, work {work}): {source}")]
    Overlay {
        /// The cache the overlay was to go on.
        path: String,
        /// The overlay's upper dir (the call's layer).
        upper: String,
        /// The overlay's work dir.
        work: String,
        /// What mount said.
        #[source]
        source: io::Error,
    },
    /// `src` bound on `path`.
    #[error("bind {src} on {path}: {source}")]
    Bind {
        /// The path bound.
        src: String,
        /// Where it was to be bound.
        path: String,
        /// What mount said.
        #[source]
        source: io::Error,
    },
    /// A mount at `path` made read-only (or remounted: `what`).
    #[error("{what} {path}: {source}")]
    Remount {
        /// The operation (`make read-only`, `remount read-only`).
        what: &'static str,
        /// The mount.
        path: String,
        /// What mount said.
        #[source]
        source: io::Error,
    },
    /// A mask (`what`: a directory's tmpfs, a file's empty bind, a scrubbed copy, the seal
    /// of a directory's mask) over `path`.
    #[error("mask {what} over {path}: {source}")]
    Mask {
        /// The kind of mask (a directory's tmpfs, a file's empty bind, a scrubbed copy, a seal).
        what: &'static str,
        /// The path masked.
        path: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// A file, directory or link of the view made at `path`.
    #[error("create {what} {path}: {source}")]
    Create {
        /// What was made (a file, a directory, a link).
        what: &'static str,
        /// The path it was to be made at.
        path: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// A file written at `path` (`/proc/self/uid_map`, the stage's `resolv.conf`).
    #[error("write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// What the write said.
        #[source]
        source: io::Error,
    },
    /// `pivot_root`, `chdir` or a detach (`what`) at `path`.
    #[error("{what} {path}: {source}")]
    Root {
        /// The operation (`pivot_root`, `chdir`, a detach).
        what: &'static str,
        /// The path it was done at.
        path: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// A path the view needs is not there.
    #[error("{what} {path} is missing")]
    Missing {
        /// What is missing and why it is needed (`resolv.conf`, the bwrap backend).
        what: &'static str,
        /// The path.
        path: String,
    },
    /// A system call with no path (`clone`, `pipe`, `unshare`, loopback).
    #[error("{what}: {source}")]
    Sys {
        /// The system call (`clone`, `pipe`, `unshare`, loopback).
        what: &'static str,
        /// What it said.
        #[source]
        source: io::Error,
    },
    /// The line's seccomp filter (compiled for bubblewrap to load).
    #[error(transparent)]
    Seccomp(#[from] crate::restrict::seccomp::SeccompError),
    /// The init's spec (bubblewrap's init reads it from a memfd).
    #[error("the init's spec: {0}")]
    InnerSpec(#[source] serde_json::Error),
    /// The rest of the view from the launcher did not come whole (`what`).
    #[error("the view from the launcher: {0}")]
    Handoff(String),
    /// The rest of the view from the launcher does not decode.
    #[error("the view from the launcher: {0}")]
    HandoffDecode(#[from] crate::view::handoff::HandoffError),
}

impl SetupError {
    /// A [`SetupError::Mount`].
    pub fn mount(what: &'static str, path: &str) -> impl FnOnce(io::Error) -> SetupError {
        let path = path.to_string();
        move |source| SetupError::Mount { what, path, source }
    }

    /// A [`SetupError::Create`].
    pub fn create(what: &'static str, path: &str) -> impl FnOnce(io::Error) -> SetupError {
        let path = path.to_string();
        move |source| SetupError::Create { what, path, source }
    }

    /// A [`SetupError::Remount`].
    pub fn remount(what: &'static str, path: &str) -> impl FnOnce(io::Error) -> SetupError {
        let path = path.to_string();
        move |source| SetupError::Remount { what, path, source }
    }

    /// A [`SetupError::Mask`].
    pub fn mask(what: &'static str, path: &str) -> impl FnOnce(io::Error) -> SetupError {
        let path = path.to_string();
        move |source| SetupError::Mask { what, path, source }
    }

    /// A [`SetupError::Root`].
    pub fn root(what: &'static str, path: &str) -> impl FnOnce(io::Error) -> SetupError {
        let path = path.to_string();
        move |source| SetupError::Root { what, path, source }
    }

    /// A [`SetupError::Write`].
    pub fn write(path: &str) -> impl FnOnce(io::Error) -> SetupError {
        let path = path.to_string();
        move |source| SetupError::Write { path, source }
    }

    /// A [`SetupError::Sys`].
    pub fn sys(what: &'static str) -> impl FnOnce(io::Error) -> SetupError {
        move |source| SetupError::Sys { what, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_names_the_operation_and_the_path() {
        let e = || io::Error::from_raw_os_error(libc::ENOENT);
        for (err, want) in [
            (
                SetupError::mount("tmpfs", "/newroot/tmp")(e()),
                "mount tmpfs on /newroot/tmp: ",
            ),
            (
                SetupError::Bind {
                    src: "/oldroot/a".into(),
                    path: "/newroot/a".into(),
                    source: e(),
                },
                "bind /oldroot/a on /newroot/a: ",
            ),
            (
                SetupError::mask("tmpfs", "/newroot/home/u/.ssh")(e()),
                "mask tmpfs over /newroot/home/u/.ssh: ",
            ),
            (
                SetupError::write("/proc/self/uid_map")(e()),
                "write /proc/self/uid_map: ",
            ),
        ] {
            let m = err.to_string();
            assert!(m.starts_with(want), "{m}");
            assert!(m.ends_with("No such file or directory (os error 2)"), "{m}");
            assert!(!m.ends_with('.'), "{m}");
        }
    }
}
