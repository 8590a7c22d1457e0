//! The placeholder a call holds instead of a credential's secret: the secret's length and
//! documented prefix, so that a tool's own format check passes, and random characters of the
//! secret's own alphabet after it, from the operating system's generator (`getrandom`), so
//! that each call's placeholder is its own and none can be guessed from another.

/// A documented prefix of a token format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// The literal prefix.
    pub prefix: &'static str,
    /// The format's last six characters are the base-62 CRC-32 of the 30 before them
    /// (`crate::secrets::crc32_ok`): the placeholder carries a valid one.
    pub crc32: bool,
    /// Why it is kept: whose format it is.
    pub reason: &'static str,
}

/// The prefixes kept, longest first where one begins another (`sk-ant-api03-` before
/// `sk-`): the first that begins the secret is its prefix.
pub const PREFIXES: [Prefix; 17] = [
    Prefix {
        prefix: "github_pat_",
        crc32: false,
        reason: "GitHub's fine-grained personal access tokens; gh and the API refuse a token \
                 of another shape with a clearer error than a 401",
    },
    Prefix {
        prefix: "ghp_",
        crc32: true,
        reason: "GitHub's classic personal access tokens, which carry a CRC-32 that GitHub's \
                 secret scanning and some tools check",
    },
    Prefix {
        prefix: "gho_",
        crc32: true,
        reason: "GitHub's OAuth tokens (`gh auth token` after `gh auth login`), with CRC-32",
    },
    Prefix {
        prefix: "ghu_",
        crc32: true,
        reason: "GitHub App user-to-server tokens, with CRC-32",
    },
    Prefix {
        prefix: "ghs_",
        crc32: true,
        reason: "GitHub App installation tokens (`GITHUB_TOKEN` in Actions), with CRC-32",
    },
    Prefix {
        prefix: "ghr_",
        crc32: true,
        reason: "GitHub refresh tokens, with CRC-32",
    },
    Prefix {
        prefix: "glpat-",
        crc32: false,
        reason: "GitLab personal access tokens; glab tells them from other tokens by it",
    },
    Prefix {
        prefix: "npm_",
        crc32: true,
        reason: "npm's granular and automation tokens, which carry a CRC-32 like GitHub's",
    },
    Prefix {
        prefix: "pypi-",
        crc32: false,
        reason: "PyPI API tokens (a macaroon after the prefix); twine checks the prefix",
    },
    Prefix {
        prefix: "hf_",
        crc32: false,
        reason: "Hugging Face user access tokens; huggingface_hub checks the prefix",
    },
    Prefix {
        prefix: "sk-ant-api03-",
        crc32: false,
        reason: "Anthropic API keys; the SDKs and tools tell them from admin keys by it",
    },
    Prefix {
        prefix: "sk-ant-",
        crc32: false,
        reason: "Anthropic's other keys (admin, OAuth), whose version part is kept as part \
                 of the secret's structure",
    },
    Prefix {
        prefix: "sk-proj-",
        crc32: false,
        reason: "OpenAI project API keys",
    },
    Prefix {
        prefix: "sk-",
        crc32: false,
        reason: "OpenAI's other API keys (and the services that copy their shape)",
    },
    Prefix {
        prefix: "AIza",
        crc32: false,
        reason: "Google API keys (Gemini's `GEMINI_API_KEY`), which the client libraries \
                 check for",
    },
    Prefix {
        prefix: "dckr_pat_",
        crc32: false,
        reason: "Docker Hub personal access tokens",
    },
    Prefix {
        prefix: "cio",
        crc32: false,
        reason: "crates.io API tokens (`cio` and 32 alphanumerics)",
    },
];

/// The longest tag an unknown secret's prefix keeps (`xoxb-`, `live_`).
const MAX_TAG: usize = 12;

/// A placeholder of `secret`: the same length, its documented prefix ([`PREFIXES`], or for
/// an unknown format the leading tags of letters each ended by `-`, `_` or `.`), the rest
/// random of the secret's own alphabet (hex stays hex, digits stay digits, letters and
/// digits stay letters and digits of the cases the secret uses, other characters stay
/// where they are), a valid CRC-32 where the format has one. Never equal to the secret.
pub fn placeholder(secret: &str) -> String {
    if secret.is_empty() {
        return String::new();
    }
    let (prefix, crc) = prefix_of(secret);
    let rest = &secret[prefix.len()..];
    if crc && rest.len() == 36 && rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        loop {
            let body = random_of(BASE62, 30);
            let tag = prefix.strip_suffix('_').unwrap_or(prefix);
            if let Some(t) = crate::secrets::checksummed_token(tag, &body) {
                if t != secret {
                    return t;
                }
            }
        }
    }
    let (prefix, rest) = if rest.is_empty() {
        ("", secret)
    } else {
        (prefix, rest)
    };
    loop {
        let out = format!("{prefix}{}", fill(rest));
        if out != secret {
            return out;
        }
    }
}

/// The secret's kept prefix, and whether its format carries a CRC-32.
fn prefix_of(secret: &str) -> (&str, bool) {
    if let Some(p) = PREFIXES.iter().find(|p| secret.starts_with(p.prefix)) {
        return (p.prefix, p.crc32);
    }
    let mut end = 0;
    loop {
        let tail = &secret[end..];
        let Some(sep) = tail.find(['-', '_', '.']) else {
            break;
        };
        let tag = &tail[..sep];
        if tag.is_empty() || tag.len() > MAX_TAG || !tag.bytes().all(|b| b.is_ascii_alphabetic()) {
            break;
        }
        end += sep + 1;
    }
    (&secret[..end], false)
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const DIGITS: &[u8] = b"0123456789";
const HEX_LOWER: &[u8] = b"0123456789abcdef";
const HEX_UPPER: &[u8] = b"0123456789ABCDEF";

/// The alphabet the random part is drawn from: hex or digits when the part is, else the
/// letters and digits of the cases it uses.
fn alphabet(part: &str) -> Vec<u8> {
    let b = part.as_bytes();
    let alnum: Vec<u8> = b
        .iter()
        .copied()
        .filter(u8::is_ascii_alphanumeric)
        .collect();
    if alnum.is_empty() {
        return BASE62.to_vec();
    }
    if alnum.iter().all(u8::is_ascii_digit) {
        return DIGITS.to_vec();
    }
    if alnum.iter().all(|c| HEX_LOWER.contains(c)) {
        return HEX_LOWER.to_vec();
    }
    if alnum.iter().all(|c| HEX_UPPER.contains(c)) {
        return HEX_UPPER.to_vec();
    }
    let has = |f: fn(&u8) -> bool| alnum.iter().any(f);
    let (lower, upper, digit) = (
        has(u8::is_ascii_lowercase),
        has(u8::is_ascii_uppercase),
        has(u8::is_ascii_digit),
    );
    BASE62
        .iter()
        .copied()
        .filter(|c| {
            (digit && c.is_ascii_digit())
                || (upper && c.is_ascii_uppercase())
                || (lower && c.is_ascii_lowercase())
        })
        .collect()
}

/// `part` with each letter or digit drawn at random from its [`alphabet`]; every other
/// character (a separator, base64's `+/=`, a non-ASCII one) where it is. Without a letter
/// or digit, every character is drawn (so the result can differ from `part`).
fn fill(part: &str) -> String {
    let abc = alphabet(part);
    let all = !part.bytes().any(|b| b.is_ascii_alphanumeric());
    let mut out = String::with_capacity(part.len());
    for ch in part.chars() {
        if all || ch.is_ascii_alphanumeric() {
            for _ in 0..ch.len_utf8() {
                out.push(char::from(pick(&abc)));
            }
        } else {
            out.push(ch);
        }
    }
    out
}

fn random_of(abc: &[u8], n: usize) -> String {
    (0..n).map(|_| char::from(pick(abc))).collect()
}

/// One byte of `abc` drawn uniformly with the operating system's generator (rejection
/// sampling: no bias toward the first letters).
fn pick(abc: &[u8]) -> u8 {
    let n = abc.len().clamp(1, 256);
    let limit = 256 - 256 % n;
    loop {
        let mut b = [0u8; 1];
        // The kernel's generator does not fail once the system is up; if it did, no
        // placeholder may be made predictable, so this stops the caller.
        if let Err(e) = getrandom::fill(&mut b) {
            panic!("the system's random generator failed: {e}");
        }
        if usize::from(b[0]) < limit {
            return abc[usize::from(b[0]) % n];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{checksummed_token, crc32_ok};

    /// A random secret of `n` characters of `abc`.
    fn secret_of(prefix: &str, abc: &[u8], n: usize) -> String {
        format!("{prefix}{}", random_of(abc, n))
    }

    fn same_shape(secret: &str, p: &str, prefix: &str) {
        assert_eq!(p.len(), secret.len(), "{secret} -> {p}");
        assert!(p.starts_with(prefix), "{secret} -> {p}");
        assert_ne!(p, secret);
        let abc = alphabet(&secret[prefix.len()..]);
        for (a, b) in secret[prefix.len()..]
            .bytes()
            .zip(p[prefix.len()..].bytes())
        {
            if a.is_ascii_alphanumeric() {
                assert!(abc.contains(&b), "{secret} -> {p}: {}", char::from(b));
            } else {
                assert_eq!(a, b, "{secret} -> {p}");
            }
        }
    }

    #[test]
    fn known_formats_keep_prefix_length_and_alphabet() {
        let cases: Vec<(String, &str)> = vec![
            (
                secret_of("github_pat_", BASE62, 22) + "_" + &random_of(BASE62, 59),
                "github_pat_",
            ),
            (secret_of("glpat-", BASE62, 20), "glpat-"),
            (
                secret_of("pypi-", BASE62, 150) + "-_" + &random_of(BASE62, 20),
                "pypi-",
            ),
            (secret_of("hf_", BASE62, 34), "hf_"),
            (
                secret_of("sk-ant-api03-", BASE62, 95) + "-_AA",
                "sk-ant-api03-",
            ),
            (secret_of("sk-proj-", BASE62, 156), "sk-proj-"),
            (secret_of("sk-", BASE62, 48), "sk-"),
            (secret_of("AIza", BASE62, 35), "AIza"),
            (secret_of("dckr_pat_", BASE62, 27), "dckr_pat_"),
            (secret_of("cio", BASE62, 32), "cio"),
            (
                secret_of("xoxb-", DIGITS, 12) + "-" + &random_of(BASE62, 24),
                "xoxb-",
            ),
            (secret_of("", HEX_LOWER, 40), ""),
            (secret_of("", HEX_UPPER, 32), ""),
            (secret_of("", DIGITS, 10), ""),
            (
                secret_of("", b"abcdefghijklmnopqrstuvwxyz0123456789", 40),
                "",
            ),
        ];
        for _ in 0..200 {
            for (s, prefix) in &cases {
                same_shape(s, &placeholder(s), prefix);
            }
        }
    }

    #[test]
    fn hex_stays_hex_and_base62_stays_base62() {
        for _ in 0..500 {
            let hex = secret_of("", HEX_LOWER, 40);
            assert!(placeholder(&hex).bytes().all(|b| HEX_LOWER.contains(&b)));
            let b62 = format!("aZ9{}", random_of(BASE62, 37));
            let p = placeholder(&b62);
            assert!(p.bytes().all(|b| BASE62.contains(&b)), "{p}");
        }
    }

    #[test]
    fn github_and_npm_tokens_get_a_valid_checksum() {
        for tag in ["ghp", "gho", "ghu", "ghs", "ghr", "npm"] {
            for _ in 0..200 {
                let secret = checksummed_token(tag, &random_of(BASE62, 30)).unwrap();
                let p = placeholder(&secret);
                assert!(crc32_ok(&p), "{p}");
                assert!(p.starts_with(&format!("{tag}_")), "{p}");
                assert_eq!(p.len(), secret.len());
                assert_ne!(p, secret);
            }
        }
    }

    #[test]
    fn placeholders_are_unique() {
        let secret = secret_of("ghp_", BASE62, 36);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            assert!(seen.insert(placeholder(&secret)));
        }
        let short = "12";
        for _ in 0..500 {
            let p = placeholder(short);
            assert_ne!(p, short);
            assert_eq!(p.len(), 2);
            assert!(p.bytes().all(|b| b.is_ascii_digit()));
        }
    }

    #[test]
    fn odd_secrets_still_differ() {
        for s in [
            "x",
            "-",
            "---",
            "ghp_",
            "sk-",
            "a_b",
            "é",
            "päss-wörd",
            "tok en",
        ] {
            for _ in 0..100 {
                let p = placeholder(s);
                assert_ne!(p, s);
                assert_eq!(p.len(), s.len(), "{s} -> {p}");
            }
        }
        assert_eq!(placeholder(""), "");
    }

    #[test]
    fn unknown_prefixes_keep_their_tags_only() {
        assert_eq!(prefix_of("xoxb-123-abc").0, "xoxb-");
        assert_eq!(prefix_of("live_sk_Ab12").0, "live_sk_");
        assert_eq!(prefix_of("Ab12cd_ef").0, "");
        assert_eq!(prefix_of("abcdefghijklmnop-x").0, "");
    }
}
