//! Who a call of `efr-sandbox run` is for, as `sandbox.run` compares it: which build of
//! `efr-sandbox` a process is (its executable's device, inode, size and modification time)
//! and the directories its config and masks come from ([`Dirs`]). `efr-sandbox run` hands
//! its call only to a service of its own build and directories (`sandbox.run` answers
//! `conflict` to another): a service started before the binary was rebuilt or reinstalled
//! keeps running the old file, and a test's binary must not talk to the user's installed
//! service.

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use efr_policy::config::Env;

/// This process's build, read once (`?` when its executable cannot be read).
pub fn build() -> &'static str {
    static BUILD: OnceLock<String> = OnceLock::new();
    BUILD.get_or_init(|| match std::fs::metadata("/proc/self/exe") {
        Ok(m) => format!(
            "{}:{}:{}:{}.{}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec()
        ),
        Err(_) => "?".into(),
    })
}

/// `$HOME`, `$XDG_RUNTIME_DIR` and `$XDG_CONFIG_HOME` (`None`: unset) of an environment, as
/// `sandbox.run` carries them: the caller fills them and the service compares them with
/// its own, from this one definition.
#[derive(Debug, PartialEq, Eq)]
pub struct Dirs {
    pub home: String,
    pub runtime_dir: Option<String>,
    pub config_home: Option<String>,
}

impl Dirs {
    /// The directories of `env`.
    pub fn of(env: &Env) -> Dirs {
        let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
        Dirs {
            home: env.home.display().to_string(),
            runtime_dir: path(&env.runtime_dir),
            config_home: path(&env.config_home),
        }
    }
}

impl std::fmt::Display for Dirs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let or_unset = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".into());
        write!(
            f,
            "HOME={} XDG_RUNTIME_DIR={} XDG_CONFIG_HOME={}",
            self.home,
            or_unset(&self.runtime_dir),
            or_unset(&self.config_home)
        )
    }
}
