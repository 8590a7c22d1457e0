//! Where the service keeps its socket and scratch space, and how their directory is made
//! safe before anything is bound in it.
//!
//! - runtime dir: `$XDG_RUNTIME_DIR/efr` (or the directory of `--socket PATH`), mode 0700;
//! - socket: `<runtime dir>/sandbox.sock`, mode 0600;
//! - scratch: `<runtime dir>/scratch`, the root under which each conversation's `$SCRATCH`
//!   lives (created by the launcher when it needs it, not here);
//! - config file: `$XDG_CONFIG_HOME/efr/config.toml` (see `efr_policy::config`).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use efr_sandbox_wire::SandboxPaths;

/// The file name of the socket in the runtime dir.
pub const SOCKET_NAME: &str = "sandbox.sock";

/// The paths the service uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePaths {
    pub runtime_dir: PathBuf,
    pub socket: PathBuf,
    pub scratch: PathBuf,
    pub config_file: PathBuf,
    /// The runtime dir is ours to create and tighten (the default one), not a directory the
    /// user named with `--socket`.
    pub runtime_dir_is_default: bool,
}

impl ServicePaths {
    /// Works out the paths from `--socket` (when given) and the environment.
    pub fn resolve(socket: Option<&Path>, config_file: PathBuf) -> anyhow::Result<ServicePaths> {
        let (runtime_dir, socket, runtime_dir_is_default) = match socket {
            Some(s) => {
                let s = if s.is_absolute() {
                    s.to_path_buf()
                } else {
                    std::env::current_dir()
                        .context("cannot read the current directory to place the socket")?
                        .join(s)
                };
                let Some(dir) = s.parent().filter(|d| !d.as_os_str().is_empty()) else {
                    bail!("--socket {} has no parent directory", s.display());
                };
                if s.file_name().is_none() {
                    bail!("--socket {} does not name a file", s.display());
                }
                (dir.to_path_buf(), s.clone(), false)
            }
            None => {
                let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) else {
                    bail!(
                        "XDG_RUNTIME_DIR is not set: set it (usually /run/user/$UID) or pass \
                         --socket PATH"
                    );
                };
                let rt = PathBuf::from(rt);
                if !rt.is_absolute() {
                    bail!("XDG_RUNTIME_DIR={} is not an absolute path", rt.display());
                }
                let dir = rt.join("efr");
                let sock = dir.join(SOCKET_NAME);
                (dir, sock, true)
            }
        };
        let scratch = runtime_dir.join("scratch");
        Ok(ServicePaths {
            runtime_dir,
            socket,
            scratch,
            config_file,
            runtime_dir_is_default,
        })
    }

    /// The wire form.
    pub fn to_wire(&self) -> SandboxPaths {
        SandboxPaths {
            runtime_dir: self.runtime_dir.display().to_string(),
            socket: self.socket.display().to_string(),
            scratch: self.scratch.display().to_string(),
            config_file: self.config_file.display().to_string(),
        }
    }
}

/// Makes sure `dir` exists, is a real directory (not a link) owned by `uid`, and that no
/// one else can write in it. A missing directory is created 0700. An existing one owned by
/// us is tightened to 0700 when `tighten` is set (the default runtime dir); one that is
/// group- or world-writable or owned by another uid is refused.
pub fn prepare_dir(dir: &Path, uid: u32, tighten: bool) -> anyhow::Result<()> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match fs::DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", dir.display()));
                }
            }
            // The umask only removes bits; make sure of 0700 all the same.
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .with_context(|| format!("cannot set mode 0700 on {}", dir.display()))?;
            check_dir(dir, uid, tighten)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", dir.display())),
        Ok(_) => check_dir(dir, uid, tighten),
    }
}

fn check_dir(dir: &Path, uid: u32, tighten: bool) -> anyhow::Result<()> {
    let meta =
        fs::symlink_metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if meta.file_type().is_symlink() {
        bail!(
            "{} is a symbolic link; refusing to put the socket behind it",
            dir.display()
        );
    }
    if !meta.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    if meta.uid() != uid {
        bail!(
            "{} is owned by uid {}, not by this service's uid {}; refusing to use it",
            dir.display(),
            meta.uid(),
            uid
        );
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        bail!(
            "{} is writable by group or others (mode {:04o}); refusing to use it (chmod 700 it)",
            dir.display(),
            mode
        );
    }
    if tighten && mode & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot set mode 0700 on {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    #[test]
    fn creates_missing_dir_0700() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("efr");
        prepare_dir(&d, uid(), true).unwrap();
        assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn refuses_world_writable_dir() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("efr");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare_dir(&d, uid(), true).unwrap_err().to_string();
        assert!(e.contains("writable by group or others"), "{e}");
    }

    #[test]
    fn refuses_dir_of_other_uid() {
        let t = tempfile::tempdir().unwrap();
        let e = prepare_dir(t.path(), uid().wrapping_add(1), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is owned by uid"), "{e}");
    }

    #[test]
    fn refuses_symlink() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = t.path().join("efr");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = prepare_dir(&link, uid(), true).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn tightens_own_default_dir() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("efr");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        prepare_dir(&d, uid(), true).unwrap();
        assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
    }
}
