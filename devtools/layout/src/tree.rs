//! A crate's modules, found from its root file's `mod NAME;` declarations.

use std::path::{Path, PathBuf};

use crate::LayoutError;
use crate::scan;

/// One module of a crate (a file), its imports read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The module's path in the crate (`config::parse`; empty for the crate root).
    pub name: String,
    /// Its file.
    pub file: PathBuf,
    /// Every `crate::`/`self::`/`super::` path of its code, as segments.
    pub paths: Vec<Vec<String>>,
}

/// Every module of the crate whose root file (`lib.rs`, `main.rs`, `bin/x.rs`) is `root`,
/// root first. A module named `tests` is test code and left out.
pub fn read_crate(root: &Path) -> Result<Vec<Module>, LayoutError> {
    let mut out = Vec::new();
    let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
    read_module(root, String::new(), dir, &mut out)?;
    Ok(out)
}

/// Reads `file` as module `name`, whose children's files are in `children_dir`.
fn read_module(
    file: &Path,
    name: String,
    children_dir: PathBuf,
    out: &mut Vec<Module>,
) -> Result<(), LayoutError> {
    let text = std::fs::read_to_string(file).map_err(|source| LayoutError::Read {
        path: file.to_path_buf(),
        source,
    })?;
    let code = scan::code(&text);
    out.push(Module {
        name: name.clone(),
        file: file.to_path_buf(),
        paths: scan::paths(&code),
    });
    for decl in scan::mod_decls(&code) {
        if decl.name == "tests" {
            continue;
        }
        if decl.path_attribute {
            return Err(LayoutError::PathAttribute {
                file: file.to_path_buf(),
            });
        }
        let child = if name.is_empty() {
            decl.name.clone()
        } else {
            format!("{name}::{}", decl.name)
        };
        let flat = children_dir.join(format!("{}.rs", decl.name));
        let nested = children_dir.join(&decl.name).join("mod.rs");
        if flat.is_file() {
            read_module(&flat, child, children_dir.join(&decl.name), out)?;
        } else if nested.is_file() {
            read_module(&nested, child, children_dir.join(&decl.name), out)?;
        } else {
            return Err(LayoutError::MissingModule {
                file: file.to_path_buf(),
                name: decl.name,
                expected: flat,
            });
        }
    }
    Ok(())
}
