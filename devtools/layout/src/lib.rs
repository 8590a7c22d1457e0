//! The module layout of a crate, read from its sources: no two modules import each other in
//! a circle.
//!
//! A crate's modules form a tree; the check runs at every level of it. Under each module,
//! every import from somewhere inside one child to somewhere inside a sibling child is an
//! edge between those two children, and the children must form no circle. So `config` and
//! `classify` of a crate are in a circle when anything under `config` imports anything under
//! `classify` and anything under `classify` imports anything under `config`, whichever files
//! the two imports are in. A module's use of its own ancestors (how a Rust module reaches its
//! parent's types) and of its own descendants (a module holds its children) is no edge.
//!
//! The imports are the `crate::`, `self::`, `super::` (and a macro's `$crate::`) paths of the
//! code, `use` trees with their `{...}` groups included; comments, string and character
//! literals, and test code (a `tests` module, anything under `#[cfg(test)]` that is a module)
//! are left out. Modules are found the way the compiler finds them, from the crate root's
//! `mod NAME;` declarations.
//!
//! A crate's layout test calls [`assert_no_import_circle`] on its source dir.

#![warn(missing_docs)]

mod graph;
mod scan;
mod tree;

use std::path::{Path, PathBuf};

pub use graph::{Circle, circles};
pub use tree::{Module, read_crate};

/// Why a crate's layout could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// A source file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A `mod NAME;` declaration names no file (`NAME.rs` or `NAME/mod.rs`).
    #[error("{file}: module `{name}` has no file {expected}")]
    MissingModule {
        /// The file that declares the module.
        file: PathBuf,
        /// The module's name.
        name: String,
        /// Where its file was looked for.
        expected: PathBuf,
    },
    /// A `#[path = ...]` module, which this reader does not follow.
    #[error("{file}: a `#[path]` module, which the layout check does not follow")]
    PathAttribute {
        /// The file with the attribute.
        file: PathBuf,
    },
    /// The dir holds no crate root (`lib.rs`, `main.rs`, `bin/*.rs`).
    #[error("{dir}: no crate root (lib.rs, main.rs or bin/*.rs)")]
    NoRoot {
        /// The dir.
        dir: PathBuf,
    },
}

/// The crate roots of a source dir: `lib.rs`, `main.rs` and each `bin/*.rs`.
pub fn roots(src: &Path) -> Result<Vec<PathBuf>, LayoutError> {
    let mut out: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    let bin = src.join("bin");
    if bin.is_dir() {
        let entries = std::fs::read_dir(&bin).map_err(|source| LayoutError::Read {
            path: bin.clone(),
            source,
        })?;
        let mut bins: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        bins.sort();
        out.extend(bins);
    }
    if out.is_empty() {
        return Err(LayoutError::NoRoot {
            dir: src.to_path_buf(),
        });
    }
    Ok(out)
}

/// Every import circle of every crate rooted in `src` (see [`roots`]), with its root.
pub fn circles_of_dir(src: &Path) -> Result<Vec<(PathBuf, Circle)>, LayoutError> {
    let mut found = Vec::new();
    for root in roots(src)? {
        let modules = read_crate(&root)?;
        found.extend(circles(&modules).into_iter().map(|c| (root.clone(), c)));
    }
    Ok(found)
}

/// Every import circle of every crate rooted in `src` (see [`roots`]), described.
pub fn check_dir(src: &Path) -> Result<Vec<String>, LayoutError> {
    Ok(circles_of_dir(src)?
        .into_iter()
        .map(|(root, c)| format!("{}: {c}", root.display()))
        .collect())
}

/// Panics, naming every circle and the imports that make it, when a crate rooted in `src`
/// (its `lib.rs`, `main.rs` and `bin/*.rs`) has modules that import each other in a
/// circle, or when its sources cannot be read.
pub fn assert_no_import_circle(src: impl AsRef<Path>) {
    assert_import_circles_only(src, &[]);
}

/// [`assert_no_import_circle`] for a crate that still has circles its owner has not broken
/// yet: each of `known` is the members of one (as the failure names them, `["a", "b::c"]`).
/// A circle that is not within a known one fails, and so does a known one that is gone (its
/// entry is to be deleted), so that the list only shrinks.
pub fn assert_import_circles_only(src: impl AsRef<Path>, known: &[&[&str]]) {
    let src = src.as_ref();
    let found = match circles_of_dir(src) {
        Ok(found) => found,
        Err(e) => panic!("the module layout of {} was not read: {e}", src.display()),
    };
    let within = |c: &Circle, k: &[&str]| c.members.iter().all(|m| k.contains(&m.as_str()));
    let new: Vec<String> = found
        .iter()
        .filter(|(_, c)| !known.iter().any(|k| within(c, k)))
        .map(|(root, c)| format!("{}: {c}", root.display()))
        .collect();
    let gone: Vec<String> = known
        .iter()
        .filter(|k| !found.iter().any(|(_, c)| within(c, k)))
        .map(|k| k.join(", "))
        .collect();
    assert!(new.is_empty(), "import circles:\n{}", new.join("\n"));
    assert!(
        gone.is_empty(),
        "known import circles that are gone (delete their entries): {gone:?}"
    );
}
