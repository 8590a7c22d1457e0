//! Which build of `efr-sandbox` this process is: its executable's device, inode, size and
//! modification time. `efr-sandbox run` hands its call only to a service of its own build
//! (`sandbox.run` answers `conflict` to another): a service started before the binary was
//! rebuilt or reinstalled keeps running the old file, and a test's binary must not talk to
//! the user's installed service.

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

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
