//! Refused writes seen in a contained line's stderr: the paths of EROFS and EACCES messages,
//! as the usual tools print them (coreutils, shells, python, node, git, make, cc). (The
//! writes the init's supervisor refuses reach the launcher on the report pipe instead.)

const PHRASES: &[&str] = &[
    "Read-only file system",
    "read-only file system",
    "Permission denied",
    "permission denied",
    "EROFS",
    "EACCES",
];

/// At most this many paths are kept.
pub const MAX_DENIALS: usize = 64;

/// Collects denial paths from stderr as it streams by.
#[derive(Debug, Default)]
pub struct Scanner {
    partial: Vec<u8>,
    cwd: String,
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
        let found: Vec<String> = paths_in_line(l)
            .into_iter()
            .map(|p| self.absolute(p))
            .collect();
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
    fn relative_paths_resolved() {
        let mut s = Scanner::new("/p");
        s.feed(b"touch: cannot touch '.git/hooks/x': Read-only file system\n");
        assert_eq!(s.paths, vec!["/p/.git/hooks/x".to_string()]);
    }
}
