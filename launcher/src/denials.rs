//! Refused writes seen in a contained line's stderr: the paths of EROFS and EACCES messages,
//! as the usual tools print them (coreutils, shells, python, node, git, make, cc); and, for
//! the paths a placeholder covers (an empty read-only file where a protected path was
//! missing), ENOTDIR and EEXIST messages too (`mkdir .vscode`, `.vscode/tasks.json`).

const PHRASES: &[&str] = &[
    "Read-only file system",
    "read-only file system",
    "Permission denied",
    "permission denied",
    "EROFS",
    "EACCES",
];

/// At most this many paths are kept.
/// What a write under a placeholder fails with: the placeholder is a file, so making the
/// directory it stands for says it exists, and a path below it says it is not a directory.
const COVERED_PHRASES: &[&str] = &[
    "Not a directory",
    // dash's word for ENOTDIR on a redirection.
    "Directory nonexistent",
    "not a directory",
    "File exists",
    "file exists",
    "ENOTDIR",
    "EEXIST",
];

pub const MAX_DENIALS: usize = 64;

/// Collects denial paths from stderr as it streams by.
#[derive(Debug, Default)]
pub struct Scanner {
    partial: Vec<u8>,
    cwd: String,
    /// Placeholder paths (see [`COVERED_PHRASES`]).
    covered: Vec<String>,
    pub paths: Vec<String>,
}

fn strip_quotes(s: &str) -> &str {
    let s = s.trim();
    let s = s.trim_matches(|c| matches!(c, '\'' | '"' | '`' | '‘' | '’' | '“' | '”'));
    s.trim()
}

fn path_like(s: &str) -> bool {
    !s.is_empty()
        && !s.contains(char::is_whitespace)
        && s.len() < 4096
        && (s.contains('/') || s.starts_with('.') || s.contains('.'))
}

/// The paths one stderr line blames.
pub fn paths_in_line(line: &str) -> Vec<String> {
    paths_for(line, PHRASES, true)
}

/// The paths a line names next to one of `phrases`; a quoted path must hold a `/` when
/// `quoted_need_slash` (a bare quoted word is too often not a path).
fn paths_for(line: &str, phrases: &[&str], quoted_need_slash: bool) -> Vec<String> {
    if !phrases.iter().any(|p| line.contains(p)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    // Quoted paths anywhere (python, node, git, make).
    for q in ['\'', '"', '‘', '`'] {
        let close = if q == '‘' {
            '’'
        } else if q == '`' {
            '\''
        } else {
            q
        };
        let mut rest = line;
        while let Some(i) = rest.find(q) {
            let after = &rest[i + q.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            let cand = &after[..j];
            if path_like(cand) && (cand.contains('/') || !quoted_need_slash) {
                out.push(cand.to_string());
            }
            rest = &after[j + close.len_utf8()..];
        }
    }
    // `prog: [verb ]PATH: Read-only file system` (coreutils, shells).
    let parts: Vec<&str> = line.split(": ").collect();
    for w in parts.windows(2) {
        if phrases.iter().any(|p| w[1].trim_start().starts_with(p)) {
            let mut cand = strip_quotes(w[0]);
            for pre in [
                "cannot create ",
                "cannot touch ",
                "cannot remove ",
                "cannot open ",
                "can't create ",
                "cannot make directory ",
                "cannot create directory ",
                "cannot create regular file ",
                "cannot overwrite ",
                "cannot move ",
                "open ",
                "mkdir ",
                "unlink ",
            ] {
                if let Some(r) = cand.strip_prefix(pre) {
                    cand = strip_quotes(r);
                }
            }
            // `sh: 1: cannot create /x: ...` and `bash: line 1: /x: ...`
            if let Some(idx) = cand.rfind(' ') {
                if cand[idx + 1..].contains('/') {
                    cand = &cand[idx + 1..];
                }
            }
            let cand = strip_quotes(cand);
            if path_like(cand) && !out.iter().any(|o| o == cand) {
                out.push(cand.to_string());
            }
        }
    }
    out
}

impl Scanner {
    pub fn new(cwd: &str) -> Scanner {
        Scanner {
            cwd: cwd.to_string(),
            ..Default::default()
        }
    }

    /// Also reports ENOTDIR and EEXIST messages on paths at or under `placeholders`.
    pub fn covering(mut self, placeholders: Vec<String>) -> Scanner {
        self.covered = placeholders;
        self
    }

    fn absolute(&self, p: String) -> String {
        if p.starts_with('/') {
            p
        } else {
            format!(
                "{}/{}",
                self.cwd.trim_end_matches('/'),
                p.trim_start_matches("./")
            )
        }
    }

    /// Feeds a chunk of stderr.
    pub fn feed(&mut self, data: &[u8]) {
        self.partial.extend_from_slice(data);
        while let Some(i) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            self.line(&String::from_utf8_lossy(&line));
        }
        if self.partial.len() > 64 * 1024 {
            self.partial.clear();
        }
    }

    /// Ends the stream.
    pub fn finish(&mut self) {
        let rest = std::mem::take(&mut self.partial);
        self.line(&String::from_utf8_lossy(&rest));
    }

    fn line(&mut self, l: &str) {
        let l = l.trim_end();
        let mut found: Vec<String> = paths_in_line(l)
            .into_iter()
            .map(|p| self.absolute(p))
            .collect();
        if !self.covered.is_empty() {
            for p in paths_for(l, COVERED_PHRASES, false) {
                let abs = self.absolute(p);
                let abs = abs.trim_end_matches('/');
                if self.covered.iter().any(|c| crate::view::under(abs, c)) {
                    found.push(abs.to_string());
                }
            }
        }
        for abs in found {
            if self.paths.len() >= MAX_DENIALS {
                return;
            }
            if !self.paths.contains(&abs) {
                self.paths.push(abs);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_messages() {
        let cases = [
            (
                "touch: cannot touch '/etc/x': Read-only file system",
                "/etc/x",
            ),
            (
                "sh: 1: cannot create /etc/y: Read-only file system",
                "/etc/y",
            ),
            ("bash: line 1: /usr/z: Read-only file system", "/usr/z"),
            (
                "PermissionError: [Errno 13] Permission denied: '/root/a'",
                "/root/a",
            ),
            (
                "OSError: [Errno 30] Read-only file system: '/opt/b'",
                "/opt/b",
            ),
            (
                "Error: EROFS: read-only file system, open '/srv/c'",
                "/srv/c",
            ),
            (
                "mkdir: cannot create directory ‘/var/d’: Read-only file system",
                "/var/d",
            ),
        ];
        for (line, want) in cases {
            let got = paths_in_line(line);
            assert!(got.iter().any(|g| g == want), "{line}: {got:?}");
        }
        assert!(paths_in_line("all good /x").is_empty());
    }

    #[test]
    fn placeholder_messages_only_for_covered_paths() {
        let mut s = Scanner::new("/p").covering(vec!["/p/.vscode".into(), "/p/.envrc".into()]);
        for l in [
            "mkdir: cannot create directory ‘.vscode’: File exists",
            "sh: 1: cannot create .vscode/tasks.json: Not a directory",
            "/bin/sh: 1: cannot create .vscode/a.json: Directory nonexistent",
            "FileExistsError: [Errno 17] File exists: '.vscode'",
            "NotADirectoryError: [Errno 20] Not a directory: '/p/.vscode/launch.json'",
            "Error: ENOTDIR: not a directory, open '.vscode/settings.json'",
            // Not covered: an ordinary EEXIST is no denial.
            "mkdir: cannot create directory ‘src’: File exists",
            "mkdir: cannot create directory ‘/p/.vscodex’: File exists",
        ] {
            s.feed(format!("{l}\n").as_bytes());
        }
        assert_eq!(
            s.paths,
            vec![
                "/p/.vscode",
                "/p/.vscode/tasks.json",
                "/p/.vscode/a.json",
                "/p/.vscode/launch.json",
                "/p/.vscode/settings.json"
            ]
        );
        let mut plain = Scanner::new("/p");
        plain.feed("sh: 1: cannot create .vscode/tasks.json: Not a directory\n".as_bytes());
        assert!(plain.paths.is_empty());
    }

    #[test]
    fn relative_paths_resolved() {
        let mut s = Scanner::new("/p");
        s.feed(b"touch: cannot touch '.git/hooks/x': Read-only file system\n");
        assert_eq!(s.paths, vec!["/p/.git/hooks/x".to_string()]);
    }
}
