//! The host's read-only mounts, read from the launcher's `/proc/self/mountinfo` before the
//! call's view is made: what tells a write the host's own file system refused (a project on
//! a read-only bind mount, a read-only root) from one the sandbox refused (the view's
//! read-only mounts, Landlock, the supervisor's rules). Both fail with `EROFS` inside the
//! call; only the sandbox's is a refusal a `write` grant can lift, so only it becomes an
//! exit record.
//!
//! Pure: [`parse`] reads a mountinfo text, [`HostMounts::read_only`] answers for a path.

use serde::{Deserialize, Serialize};

/// One host mount that matters to the answer: a read-only one, or a writable one below a
/// read-only one (which a path below it reaches instead).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostMount {
    /// Where it is mounted (absolute, no trailing `/` except for `/` itself).
    pub point: String,
    /// Its per-mount flags say `ro`.
    pub read_only: bool,
}

/// The host's mounts that decide whether a path is on a read-only host mount.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HostMounts(pub Vec<HostMount>);

impl HostMounts {
    /// The launcher's own mount table (the host's: it has not entered the call's
    /// namespaces). Empty when it cannot be read: no write is then taken for the host's.
    pub fn of_host() -> Self {
        std::fs::read_to_string("/proc/self/mountinfo")
            .map(|t| parse(&t))
            .unwrap_or_default()
    }

    /// Whether `path` (absolute, as the call named it) lies on a mount the host itself has
    /// read-only: the mount with the longest point that holds it says.
    pub fn read_only(&self, path: &[u8]) -> bool {
        self.0
            .iter()
            .filter(|m| holds(m.point.as_bytes(), path))
            .max_by_key(|m| m.point.len())
            .is_some_and(|m| m.read_only)
    }
}

/// Whether mount point `point` holds `path`.
fn holds(point: &[u8], path: &[u8]) -> bool {
    point == b"/" || (path.starts_with(point) && matches!(path.get(point.len()), None | Some(b'/')))
}

/// The mounts of a mountinfo text that decide [`HostMounts::read_only`]: the read-only
/// ones and the writable ones below one of them, each point once (a later line, mounted on
/// top, wins). Lines that do not parse are skipped.
pub fn parse(mountinfo: &str) -> HostMounts {
    let mut all: Vec<HostMount> = Vec::new();
    for l in mountinfo.lines() {
        let Some((pre, _)) = l.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = pre.split_whitespace().collect();
        let (Some(point), Some(opts)) = (f.get(4), f.get(5)) else {
            continue;
        };
        let point = unescape(point);
        if !point.starts_with('/') {
            continue;
        }
        let point = match point.trim_end_matches('/') {
            "" => "/".to_string(),
            p => p.to_string(),
        };
        let read_only = opts.split(',').any(|o| o == "ro");
        all.retain(|m| m.point != point);
        all.push(HostMount { point, read_only });
    }
    let ro: Vec<String> = all
        .iter()
        .filter(|m| m.read_only)
        .map(|m| m.point.clone())
        .collect();
    all.retain(|m| m.read_only || ro.iter().any(|r| holds(r.as_bytes(), m.point.as_bytes())));
    HostMounts(all)
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let esc = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let (b'\\', Some(d)) = (b[i], esc) {
            let v =
                u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8 + u32::from(d[2] - b'0');
            if let Ok(c) = u8::try_from(v) {
                out.push(c);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::parse;

    const TABLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 8:2 / /home rw,relatime shared:2 - ext4 /dev/sda2 rw
41 30 8:2 /src /home/ada/ro\\040proj ro,relatime shared:2 - ext4 /dev/sda2 rw
42 41 0:50 / /home/ada/ro\\040proj/build rw,relatime - tmpfs tmpfs rw
43 22 0:51 / /mnt/iso ro - iso9660 /dev/sr0 ro
garbage line
";

    #[test]
    fn a_path_on_a_read_only_host_mount_is_the_hosts() {
        let m = parse(TABLE);
        assert!(m.read_only(b"/home/ada/ro proj"));
        assert!(m.read_only(b"/home/ada/ro proj/src/main.rs"));
        assert!(m.read_only(b"/mnt/iso/x"));
    }

    #[test]
    fn a_writable_mount_below_a_read_only_one_is_not() {
        let m = parse(TABLE);
        assert!(!m.read_only(b"/home/ada/ro proj/build/out.o"));
        assert!(!m.read_only(b"/home/ada/ro projx/a"));
        assert!(!m.read_only(b"/home/ada/src/a"));
        assert!(!m.read_only(b"/etc/hosts"));
        // Only the mounts that decide are kept.
        assert_eq!(m.0.len(), 3, "{m:?}");
    }

    #[test]
    fn a_later_mount_on_the_same_point_wins() {
        let t = "1 0 8:1 / / ro - ext4 /dev/sda1 ro\n2 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
        assert!(!parse(t).read_only(b"/a"));
        let t = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:1 / / ro - ext4 /dev/sda1 rw\n";
        assert!(parse(t).read_only(b"/a"));
    }

    #[test]
    fn an_empty_or_broken_table_says_nothing_is_the_hosts() {
        assert!(!parse("").read_only(b"/a"));
        assert!(!parse("x y z\n1 2 3 - a b\n").read_only(b"/a"));
    }
}
