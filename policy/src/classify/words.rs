//! Reading a command's words without knowing its whole grammar: positional words, options
//! (also inside a single-dash group such as `-dmS`) and option values.

/// An option word: `-x`, `--long`, not `-` alone.
pub(crate) fn is_opt(s: &str) -> bool {
    s.len() > 1 && s.starts_with('-')
}

/// The words that are not options. An option listed in `valued` takes the next word, which
/// is then not positional either.
pub(crate) fn positional<'a>(words: &[&'a str], valued: &[String]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if w == "--" {
            out.extend(words[i + 1..].iter().copied());
            break;
        }
        if is_opt(w) {
            if valued.iter().any(|v| v == w) {
                i += 1;
            }
        } else {
            out.push(w);
        }
        i += 1;
    }
    out
}

/// Whether `opt` is among the words: the word itself, `opt=...`, or for a one-letter option
/// (`-d`) a single-dash group holding the letter (`-dmS`).
pub(crate) fn has_opt(words: &[&str], opt: &str) -> bool {
    let letter = opt
        .strip_prefix('-')
        .filter(|l| l.len() == 1 && !l.starts_with('-'));
    words.iter().any(|w| {
        *w == opt
            || w.strip_prefix(opt).is_some_and(|r| r.starts_with('='))
            || letter.is_some_and(|l| {
                w.len() > 2
                    && w.starts_with('-')
                    && !w.starts_with("--")
                    && w[1..].chars().all(|c| c.is_ascii_alphabetic())
                    && w[1..].contains(l)
            })
    })
}

/// The values of the options `opts`: `--opt VALUE`, `--opt=VALUE`, and for a one-letter
/// option `-tVALUE`.
pub(crate) fn opt_values(words: &[&str], opts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        for o in opts {
            if *w == o {
                if let Some(v) = words.get(i + 1) {
                    out.push((*v).to_string());
                }
            } else if let Some(v) = w.strip_prefix(o.as_str()) {
                if let Some(v) = v.strip_prefix('=') {
                    out.push(v.to_string());
                } else if o.len() == 2 && !o.starts_with("--") && !v.is_empty() {
                    out.push(v.to_string());
                }
            }
        }
    }
    out
}

/// `~/x` with the home put in ([`crate::path::expand_home`]), as text.
pub(crate) fn home_path(p: &str, home: &std::path::Path) -> String {
    crate::path::expand_home(p, home)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_values() {
        assert!(has_opt(&["-dmS", "x"], "-d"));
        assert!(has_opt(&["-dmS", "x"], "-m"));
        assert!(!has_opt(&["-r", "x"], "-d"));
        assert!(!has_opt(&["--detach"], "-d"));
        assert!(has_opt(&["--prefix=/x"], "--prefix"));
        let v = |w: &[&str], o: &str| opt_values(w, &[o.to_string()]);
        assert_eq!(v(&["--prefix", "/a"], "--prefix"), ["/a"]);
        assert_eq!(v(&["--prefix=/a"], "--prefix"), ["/a"]);
        assert_eq!(v(&["-t/a"], "-t"), ["/a"]);
        assert!(v(&["--prefixes"], "--prefix").is_empty());
        assert_eq!(
            positional(&["-C", "d", "x", "--", "-y"], &["-C".to_string()]),
            ["x", "-y"]
        );
        assert_eq!(home_path("~/.npm", std::path::Path::new("/h")), "/h/.npm");
        assert_eq!(home_path("~x/.npm", std::path::Path::new("/h")), "~x/.npm");
    }
}
