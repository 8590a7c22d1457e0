//! The crate's private directories: a leaf every part that makes one (the call's sockets,
//! the proxy's and bus filters' dirs, the call log's state dir) uses.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Creates `dir` (and its parents) with mode 0700.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}
