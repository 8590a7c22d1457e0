//! The path patterns of the config's path lists (`read_only_inside`, `masks`, ...): `*`
//! matches any run of bytes inside one component, `**` any number of whole components,
//! every other byte itself. Shared by the policy (explain, the launch view) and the
//! launcher's write supervisor, so that what `explain` says is what a call gets. Pure byte
//! functions: a non-UTF-8 name is matched like any other.

/// The components of a relative path (empty ones and `.` left out).
pub fn components(p: &[u8]) -> Vec<&[u8]> {
    p.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect()
}

/// Whether `pattern` matches the whole of `rel`, component by component.
pub fn matches(pattern: &[u8], rel: &[u8]) -> bool {
    let pat = components(pattern);
    !pat.is_empty() && match_components(&pat, &components(rel))
}

/// Whether `pattern` matches `rel` or one of its ancestors (a rule for a directory covers
/// what is below it).
pub fn covers(pattern: &[u8], rel: &[u8]) -> bool {
    let pat = components(pattern);
    let rel = components(rel);
    !pat.is_empty() && (1..=rel.len()).any(|n| match_components(&pat, &rel[..n]))
}

/// [`covers`] on components already split.
pub fn covers_components(pat: &[&[u8]], rel: &[&[u8]]) -> bool {
    !pat.is_empty() && (1..=rel.len()).any(|n| match_components(pat, &rel[..n]))
}

/// Whether the pattern's components match the path's.
pub fn match_components(pat: &[&[u8]], path: &[&[u8]]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if *first == b"**" => {
            (0..=path.len()).any(|skip| match_components(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((p, prest)) => wildcard(first, p) && match_components(rest, prest),
            None => false,
        },
    }
}

/// `*` matches any run of bytes; everything else matches itself.
pub fn wildcard(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && pat[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pat.len() && pat[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(covers(b".git/hooks", b".git/hooks/pre-push"));
        assert!(covers(b".git/hooks", b".git/hooks"));
        assert!(!covers(b".git/hooks", b".git"));
        assert!(covers(
            b".git/modules/**/hooks",
            b".git/modules/a/b/hooks/x"
        ));
        assert!(covers(b".git/modules/**/hooks", b".git/modules/hooks"));
        assert!(matches(b"lefthook.*", b"lefthook.toml"));
        assert!(!matches(b"lefthook.*", b"sub/lefthook.toml"));
        assert!(matches(b"a/*/c", b"a/\xff/c"));
        assert!(!matches(b"", b"a"));
        assert!(wildcard(b"*.sample", b"pre-commit.sample"));
        assert!(!wildcard(b"*.sample", b"pre-commit"));
    }
}
