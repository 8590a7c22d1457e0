//! Which of many paths exist, by one listing of each of their directories instead of a
//! lookup of each path. The protected names (a hundred at each root and repository) mostly
//! do not exist, and a failed lookup costs as much as one that succeeds: at launch, a
//! listing of the few directories they sit in is much cheaper.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::fs::FileType;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Entries of one directory listed; past this the paths of that directory are looked up
/// one by one instead (the answer is the same, only its cost differs).
const MAX_LISTED: usize = 16384;

/// The paths of `paths` (absolute) that exist, with their type as the directory gives it
/// (a link is a link: nothing is followed), in no particular order. A path whose directory
/// cannot be listed is looked up on its own.
pub fn existing<P: AsRef<[u8]>>(paths: &[P]) -> Vec<(PathBuf, FileType)> {
    let mut by_dir: BTreeMap<&[u8], HashSet<&[u8]>> = BTreeMap::new();
    for p in paths {
        let p = p.as_ref();
        let p = match p.iter().rposition(|&b| b != b'/') {
            Some(end) => &p[..=end],
            None => continue,
        };
        let Some(i) = p.iter().rposition(|&b| b == b'/') else {
            continue;
        };
        let dir: &[u8] = if i == 0 { b"/" } else { &p[..i] };
        by_dir.entry(dir).or_default().insert(&p[i + 1..]);
    }
    let path_of = |b: &[u8]| PathBuf::from(OsStr::from_bytes(b));
    let mut out = Vec::new();
    for (dir, names) in by_dir {
        let listed = std::fs::read_dir(path_of(dir)).ok().and_then(|rd| {
            let mut found = Vec::new();
            for (n, e) in rd.enumerate() {
                if n >= MAX_LISTED {
                    return None;
                }
                let Ok(e) = e else { continue };
                if names.contains(e.file_name().as_bytes()) {
                    if let Ok(t) = e.file_type() {
                        found.push((e.path(), t));
                    }
                }
            }
            Some(found)
        });
        match listed {
            Some(found) => out.extend(found),
            // Unlistable or huge: one lookup per name.
            None => out.extend(names.iter().filter_map(|n| {
                let p = path_of(dir).join(OsStr::from_bytes(n));
                let t = std::fs::symlink_metadata(&p).ok()?.file_type();
                Some((p, t))
            })),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_paths_that_exist_with_their_types() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::fs::write(root.join("file"), "").unwrap();
        std::os::unix::fs::symlink("missing", root.join("link")).unwrap();
        std::fs::write(root.join("dir/inner"), "").unwrap();
        std::fs::write(root.join("other"), "").unwrap();
        let ask: Vec<String> = [
            "dir",
            "file",
            "link",
            "gone",
            "dir/inner",
            "dir/none",
            "file/",
        ]
        .iter()
        .map(|n| format!("{}/{n}", root.display()))
        .chain([format!("{}/nodir/x", root.display())])
        .collect();
        let mut got: Vec<(String, &str)> = existing(&ask)
            .into_iter()
            .map(|(p, t)| {
                let kind = if t.is_symlink() {
                    "link"
                } else if t.is_dir() {
                    "dir"
                } else {
                    "file"
                };
                (p.strip_prefix(root).unwrap().display().to_string(), kind)
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("dir".into(), "dir"),
                ("dir/inner".into(), "file"),
                ("file".into(), "file"),
                ("link".into(), "link"),
            ]
        );
    }
}
