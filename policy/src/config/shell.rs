//! `sandbox.shell`: the shell that runs a call's line (`SHELL -c LINE`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where bash is looked for, in order: a merged-`/usr` system has both, an older one only
/// `/bin/bash`. Both are system paths every view shows read-only.
const BASH_PATHS: &[&str] = &["/usr/bin/bash", "/bin/bash"];

/// `sandbox.shell`, `run --shell`, the wire's `shell`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellChoice {
    /// bash, found in `BASH_PATHS`: what coding agents write (`[[ ]]`, `source`, brace
    /// expansion, `read -s`).
    Bash,
    /// `/bin/sh` (dash on Debian), only when asked.
    Sh,
    /// A shell at an absolute path; it must take `-c LINE`.
    Path(PathBuf),
}

/// Why a shell cannot run a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShellError {
    /// Not `bash`, `sh` or an absolute path.
    #[error("shell {0:?}: expected bash, sh or an absolute path")]
    Invalid(String),
    /// bash asked for, and none installed.
    #[error(
        "the line's shell is bash and there is none at {}: install bash, or run lines with /bin/sh: {} (or run --shell sh)",
        BASH_PATHS.join(" or "),
        sh_hint()
    )]
    NoBash,
    /// The path is not an executable file.
    #[error("the line's shell {}: not an executable file", .0.display())]
    NotExecutable(PathBuf),
}

/// The config entry that makes `/bin/sh` run the lines, with its table named (a dotted
/// `sandbox.shell` line pasted below another table's header would land in that table).
fn sh_hint() -> String {
    let h = super::ConfigHint::sandbox_shell(&ShellChoice::Sh);
    format!(
        "set {} in the [{}] table of the config",
        h.entry_lines().join(", "),
        h.table()
    )
}

impl ShellChoice {
    /// Reads `bash`, `sh` or an absolute path.
    pub fn parse(s: &str) -> Result<ShellChoice, ShellError> {
        match s {
            "bash" => Ok(ShellChoice::Bash),
            "sh" => Ok(ShellChoice::Sh),
            p if p.starts_with('/') && !p.contains('\0') => Ok(ShellChoice::Path(p.into())),
            other => Err(ShellError::Invalid(other.to_string())),
        }
    }

    /// As the config writes it.
    pub fn as_string(&self) -> String {
        match self {
            ShellChoice::Bash => "bash".into(),
            ShellChoice::Sh => "sh".into(),
            ShellChoice::Path(p) => p.to_string_lossy().into_owned(),
        }
    }

    /// The absolute path of the shell on this host (the view shows the system's programs
    /// at their own paths); a shell that is missing or not executable is an error.
    pub fn resolve(&self) -> Result<String, ShellError> {
        let path = match self {
            ShellChoice::Bash => {
                return BASH_PATHS
                    .iter()
                    .find(|p| executable(Path::new(p)))
                    .map(|p| p.to_string())
                    .ok_or(ShellError::NoBash);
            }
            ShellChoice::Sh => PathBuf::from("/bin/sh"),
            ShellChoice::Path(p) => p.clone(),
        };
        if executable(&path) {
            Ok(path.to_string_lossy().into_owned())
        } else {
            Err(ShellError::NotExecutable(path))
        }
    }
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_resolves() {
        assert_eq!(ShellChoice::parse("bash").unwrap(), ShellChoice::Bash);
        assert_eq!(
            ShellChoice::parse("sh").unwrap().resolve().unwrap(),
            "/bin/sh"
        );
        for bad in ["dash", "bin/bash", ""] {
            assert!(ShellChoice::parse(bad).is_err(), "{bad}");
        }
        let e = ShellChoice::parse("/nonexistent/zsh")
            .unwrap()
            .resolve()
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/zsh"), "{e}");
        // The test machines have bash, as every machine the agents' lines run on.
        let b = ShellChoice::Bash.resolve().unwrap();
        assert!(b.ends_with("/bash"), "{b}");
        assert_eq!(ShellChoice::parse(&b).unwrap().as_string(), b);
    }
}
