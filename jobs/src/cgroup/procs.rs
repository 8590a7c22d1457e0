//! Processes as `/proc` shows them: the live parent links, a process's tree (it and its
//! descendants), and whether a process descends from this one.

use std::collections::HashMap;

/// The parent of every live process (zombies left out), from `/proc/<pid>/stat`.
pub fn ppids() -> HashMap<u32, u32> {
    let mut m = HashMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return m;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(pp) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| super::parse::live_ppid(&s))
        {
            m.insert(pid, pp);
        }
    }
    m
}

/// `root` (when live) and every live descendant of it, sorted. A descendant whose parent
/// ended was handed to a reaper and is no longer in the tree.
pub fn tree(root: u32) -> Vec<u32> {
    let parents = ppids();
    tree_in(&parents, root)
}

/// [`tree`] over a given parent map.
pub fn tree_in(parents: &HashMap<u32, u32>, root: u32) -> Vec<u32> {
    let mut out: Vec<u32> = parents
        .keys()
        .copied()
        .filter(|&p| descends(parents, p, root))
        .collect();
    out.sort_unstable();
    out
}

/// Whether `pid` is `root` or below it in `parents` (at most 4096 links up: a loop or a
/// deeper chain is not followed).
pub fn descends(parents: &HashMap<u32, u32>, pid: u32, root: u32) -> bool {
    let mut cur = pid;
    for _ in 0..4096 {
        if cur == root {
            return true;
        }
        match parents.get(&cur) {
            Some(&pp) if pp != 0 && pp != cur => cur = pp,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees() {
        let p: HashMap<u32, u32> = [(1, 0), (10, 1), (11, 10), (12, 11), (20, 1), (21, 20)]
            .into_iter()
            .collect();
        assert_eq!(tree_in(&p, 10), [10, 11, 12]);
        assert_eq!(tree_in(&p, 20), [20, 21]);
        assert!(tree_in(&p, 99).is_empty());
        assert!(descends(&p, 12, 1) && !descends(&p, 21, 10));
        // A loop in the links (not the kernel's, but a torn read) ends.
        let l: HashMap<u32, u32> = [(5, 6), (6, 5)].into_iter().collect();
        assert!(!descends(&l, 5, 7));
    }

    /// This process is in its own tree.
    #[test]
    fn own_tree() {
        let me = std::process::id();
        assert!(tree(me).contains(&me));
    }
}
