//! npm's cache (`~/.npm/_cacache`) as the merge verifies it.
//!
//! - `content-v2/ALGO/XX/YY/REST` is addressed by its hash: the content's sha512, sha384 or
//!   sha256 must be its path (checked in the merge itself).
//! - An `index-v5` bucket line (`SHA1\tJSON`, the bucket's path the sha256 of the line's
//!   key) is merged only when verified: its key is `make-fetch-happen:request-cache:URL`
//!   with URL on a host the call was granted, and
//!   - for a tarball (`.../NAME/-/BASENAME-VERSION.tgz`, scoped names too), the registry's
//!     packument of NAME (fetched with the `Accept` npm sends for installs) lists VERSION
//!     with `dist.integrity` the line's integrity and `dist.tarball` the URL;
//!   - for any other URL (a packument), the sha512 of the body the registry serves there
//!     (with the `Accept` of the line's request) is the line's integrity.
//!
//!   One fetch per package name serves both.
//!
//! Everything else in `~/.npm` (`_npx`, `_logs`, ...) is never merged.

use std::collections::BTreeMap;

use sha2::Digest;

use super::fetch::Want;

/// The `Accept` npm sends for the packuments of an install (the abbreviated document).
pub const INSTALL_ACCEPT: &str =
    "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*";
/// The key prefix of make-fetch-happen's HTTP cache entries.
const KEY_PREFIX: &str = "make-fetch-happen:request-cache:";

/// One line of an index bucket, as far as the merge reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexLine {
    /// The cache key.
    pub key: String,
    /// The integrity of its content (`sha512-BASE64 ...`).
    pub integrity: String,
    /// The `Accept` of the request that made it, when recorded.
    pub accept: Option<String>,
}

/// Why a bucket line is not one the merge can verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Not `SHA1\tJSON`, or the hash is not the sha1 of the JSON.
    #[error("a malformed index line")]
    Malformed,
    /// The JSON lacks a key or an integrity (a deletion entry).
    #[error("an index line without key or integrity")]
    Incomplete,
    /// The bucket's path is not the sha256 of the key.
    #[error("an index line in another key's bucket")]
    WrongBucket,
}

/// Reads one bucket line; `bucket` is the bucket's path below `index-v5` (`ab/cd/rest`).
pub fn parse_line(line: &str, bucket: &str) -> Result<IndexLine, LineError> {
    let (hash, json) = line.split_once('\t').ok_or(LineError::Malformed)?;
    if super::hex(&sha1_digest(json.as_bytes())) != hash {
        return Err(LineError::Malformed);
    }
    let v: serde_json::Value = serde_json::from_str(json).map_err(|_| LineError::Malformed)?;
    let key = v.get("key").and_then(|k| k.as_str());
    let integrity = v.get("integrity").and_then(|k| k.as_str());
    let (Some(key), Some(integrity)) = (key, integrity) else {
        return Err(LineError::Incomplete);
    };
    let want_bucket = super::hex(&sha2::Sha256::digest(key.as_bytes()));
    let bucket: String = bucket.chars().filter(|c| *c != '/').collect();
    if bucket != want_bucket {
        return Err(LineError::WrongBucket);
    }
    let accept = v
        .pointer("/metadata/reqHeaders/accept")
        .and_then(|a| a.as_str())
        .map(String::from);
    Ok(IndexLine {
        key: key.to_string(),
        integrity: integrity.to_string(),
        accept,
    })
}

/// sha1, which cacache names each bucket line by (not for security: a line's trust comes
/// from the registry's answer, not from this hash).
fn sha1_digest(b: &[u8]) -> Vec<u8> {
    sha1::Sha1::digest(b).to_vec()
}

/// What a key's URL is to the merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Url {
    /// A tarball: the packument URL of its package, its version.
    Tarball {
        /// The tarball's URL (the key's).
        url: String,
        /// The packument's URL (`{registry}/{name}`, a scope's `/` as `%2f`).
        packument: String,
        /// The version.
        version: String,
    },
    /// Any other document (a packument): checked by its own body.
    Document {
        /// The URL.
        url: String,
    },
}

/// The URL of a key, read as npm's registry lays tarballs out.
pub fn url_of(key: &str) -> Option<Url> {
    let url = key.strip_prefix(KEY_PREFIX)?;
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") || url.contains(['?', '#']) {
        return Some(Url::Document {
            url: url.to_string(),
        })
        .filter(|_| matches!(scheme, "http" | "https"));
    }
    let (authority, path) = rest.split_once('/')?;
    let Some((before, file)) = path.rsplit_once("/-/") else {
        return Some(Url::Document {
            url: url.to_string(),
        });
    };
    let Some(stem) = file.strip_suffix(".tgz").filter(|s| !s.contains('/')) else {
        return Some(Url::Document {
            url: url.to_string(),
        });
    };
    // NAME is the last segment before `/-/`, or the last two when the first is a scope
    // (`@scope/name`, also written `@scope%2fname`).
    let segs: Vec<&str> = before.split('/').collect();
    let (prefix, name, base) = match segs.as_slice() {
        [p @ .., scope, n] if scope.starts_with('@') => (p.to_vec(), format!("{scope}%2f{n}"), *n),
        [p @ .., n] => match n.split_once("%2f").or_else(|| n.split_once("%2F")) {
            Some((scope, b)) if scope.starts_with('@') => (p.to_vec(), format!("{scope}%2f{b}"), b),
            _ => (p.to_vec(), n.to_string(), *n),
        },
        [] => return None,
    };
    if base.is_empty() {
        return None;
    }
    let version = stem.strip_prefix(base)?.strip_prefix('-')?;
    if !version.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut packument = format!("{scheme}://{authority}/");
    for p in prefix {
        packument.push_str(p);
        packument.push('/');
    }
    packument.push_str(&name);
    Some(Url::Tarball {
        url: url.to_string(),
        packument,
        version: version.to_string(),
    })
}

/// The fetch a line's check needs.
pub fn want(u: &Url, line: &IndexLine) -> Want {
    match u {
        Url::Tarball { packument, .. } => Want {
            url: packument.clone(),
            accept: Some(INSTALL_ACCEPT.to_string()),
        },
        Url::Document { url } => Want {
            url: url.clone(),
            accept: Some(
                line.accept
                    .clone()
                    .unwrap_or_else(|| INSTALL_ACCEPT.to_string()),
            ),
        },
    }
}

/// The digests of an integrity string by algorithm (`sha512` -> bytes), of the algorithms
/// the merge checks.
pub fn digests(integrity: &str) -> BTreeMap<String, Vec<u8>> {
    integrity
        .split_whitespace()
        .filter_map(|i| {
            let (algo, b64) = i.split_once('-')?;
            if !matches!(algo, "sha512" | "sha384" | "sha256") {
                return None;
            }
            Some((
                algo.to_string(),
                super::base64_decode(b64.split('?').next()?)?,
            ))
        })
        .collect()
}

/// Whether two integrity strings agree: a common algorithm, the same digest for each
/// algorithm both name.
fn same_integrity(a: &str, b: &str) -> bool {
    let (a, b) = (digests(a), digests(b));
    let mut common = a.keys().filter(|k| b.contains_key(*k)).peekable();
    common.peek().is_some() && a.iter().all(|(k, v)| b.get(k).is_none_or(|w| w == v))
}

/// The outcome of one line's check.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The registry says so: merge the line.
    Verified,
    /// The registry says otherwise: refused, with why.
    Mismatch(String),
    /// Nothing to check against, with why.
    Unverified(String),
}

/// Checks a line against the registry's answer to [`want`].
pub fn verify(u: &Url, line: &IndexLine, answer: Option<&Result<Vec<u8>, String>>) -> Verdict {
    let body = match answer {
        Some(Ok(b)) => b,
        Some(Err(e)) => return Verdict::Unverified(e.clone()),
        None => return Verdict::Unverified("not fetched".into()),
    };
    match u {
        Url::Document { url } => {
            let got = format!(
                "sha512-{}",
                super::base64_encode(&sha2::Sha512::digest(body))
            );
            if same_integrity(&got, &line.integrity) {
                Verdict::Verified
            } else {
                Verdict::Mismatch(format!(
                    "an index entry of {url} whose integrity is not that of what the registry serves"
                ))
            }
        }
        Url::Tarball {
            url,
            version,
            packument,
        } => {
            let Ok(doc) = serde_json::from_slice::<serde_json::Value>(body) else {
                return Verdict::Unverified(format!("{packument}: not a JSON packument"));
            };
            let Some(dist) = doc
                .get("versions")
                .and_then(|v| v.get(version))
                .and_then(|v| v.get("dist"))
            else {
                return Verdict::Unverified(format!("{packument} lists no version {version}"));
            };
            let tarball = dist.get("tarball").and_then(|t| t.as_str());
            let integrity = dist.get("integrity").and_then(|t| t.as_str());
            match (tarball, integrity) {
                (Some(t), Some(i)) if t == url && same_integrity(i, &line.integrity) => {
                    Verdict::Verified
                }
                (Some(t), Some(_)) if t == url => Verdict::Mismatch(format!(
                    "an index entry of {url} whose integrity is not the registry's for {version}"
                )),
                (_, None) => {
                    Verdict::Unverified(format!("{packument} gives no integrity for {version}"))
                }
                _ => Verdict::Unverified(format!(
                    "{packument} gives another tarball URL for {version}"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_of_known_strings() {
        assert_eq!(
            crate::caches::hex(&sha1_digest(b"")),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            crate::caches::hex(&sha1_digest(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        let long = vec![b'a'; 1000];
        assert_eq!(
            crate::caches::hex(&sha1_digest(&long)),
            "291e9a6c66994949b57ba5e650361e98fc36b1ba"
        );
    }

    #[test]
    fn tarball_and_packument_urls() {
        let k = |u: &str| format!("{KEY_PREFIX}{u}");
        assert_eq!(
            url_of(&k(
                "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz"
            )),
            Some(Url::Tarball {
                url: "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz".into(),
                packument: "https://registry.npmjs.org/left-pad".into(),
                version: "1.3.0".into(),
            })
        );
        assert_eq!(
            url_of(&k(
                "https://registry.npmjs.org/@types/node/-/node-20.1.0-beta.1.tgz"
            )),
            Some(Url::Tarball {
                url: "https://registry.npmjs.org/@types/node/-/node-20.1.0-beta.1.tgz".into(),
                packument: "https://registry.npmjs.org/@types%2fnode".into(),
                version: "20.1.0-beta.1".into(),
            })
        );
        assert_eq!(
            url_of(&k("http://r.test:8/npm/@s%2fx/-/x-2.0.0.tgz")),
            Some(Url::Tarball {
                url: "http://r.test:8/npm/@s%2fx/-/x-2.0.0.tgz".into(),
                packument: "http://r.test:8/npm/@s%2fx".into(),
                version: "2.0.0".into(),
            })
        );
        assert_eq!(
            url_of(&k("https://registry.npmjs.org/@types%2fnode")),
            Some(Url::Document {
                url: "https://registry.npmjs.org/@types%2fnode".into()
            })
        );
        // A tarball whose file is not BASENAME-VERSION.tgz is no tarball the merge reads.
        assert_eq!(url_of(&k("https://r/a/-/b-1.0.0.tgz")), None);
        assert_eq!(url_of(&k("https://r/a/-/a-x.tgz")), None);
        assert_eq!(url_of("pacote:tarball:x"), None);
        assert_eq!(url_of(&k("file:///etc/passwd")), None);
    }

    fn line_of(key: &str, integrity: &str) -> (String, String) {
        let json = format!(
            "{{\"key\":\"{key}\",\"integrity\":\"{integrity}\",\"time\":1,\"size\":1,\
             \"metadata\":{{\"reqHeaders\":{{\"accept\":\"application/json\"}}}}}}"
        );
        let line = format!(
            "{}\t{json}",
            crate::caches::hex(&sha1_digest(json.as_bytes()))
        );
        let h = crate::caches::hex(&sha2::Sha256::digest(key.as_bytes()));
        let bucket = format!("{}/{}/{}", &h[..2], &h[2..4], &h[4..]);
        (line, bucket)
    }

    #[test]
    fn index_lines_are_read_and_checked_against_the_registry() {
        let tgz = b"tarball";
        let integ = format!(
            "sha512-{}",
            crate::caches::base64_encode(&sha2::Sha512::digest(tgz))
        );
        let url = "http://r.test:8/efrhello/-/efrhello-1.0.0.tgz";
        let key = format!("{KEY_PREFIX}{url}");
        let (line, bucket) = line_of(&key, &integ);
        let l = parse_line(&line, &bucket).unwrap();
        assert_eq!(l.accept.as_deref(), Some("application/json"));
        assert_eq!(parse_line(&line, "00/00/00"), Err(LineError::WrongBucket));
        assert_eq!(
            parse_line(&line.replacen('a', "b", 1), &bucket),
            Err(LineError::Malformed)
        );
        assert_eq!(parse_line("no tab", &bucket), Err(LineError::Malformed));
        let u = url_of(&l.key).unwrap();
        assert_eq!(want(&u, &l).url, "http://r.test:8/efrhello");
        let doc = |i: &str, t: &str| {
            Ok(format!(
                "{{\"versions\":{{\"1.0.0\":{{\"dist\":{{\"tarball\":\"{t}\",\"integrity\":\"{i}\"}}}}}}}}"
            )
            .into_bytes())
        };
        assert_eq!(verify(&u, &l, Some(&doc(&integ, url))), Verdict::Verified);
        let other = format!(
            "sha512-{}",
            crate::caches::base64_encode(&sha2::Sha512::digest(b"x"))
        );
        assert!(matches!(
            verify(&u, &l, Some(&doc(&other, url))),
            Verdict::Mismatch(_)
        ));
        assert!(matches!(
            verify(&u, &l, Some(&doc(&integ, "http://elsewhere/x.tgz"))),
            Verdict::Unverified(_)
        ));
        assert!(matches!(
            verify(&u, &l, Some(&Ok(b"garbage".to_vec()))),
            Verdict::Unverified(_)
        ));
        assert!(matches!(verify(&u, &l, None), Verdict::Unverified(_)));
        // A packument line: its integrity is that of the body the registry serves.
        let body = b"{\"name\":\"efrhello\"}";
        let bi = format!(
            "sha512-{}",
            crate::caches::base64_encode(&sha2::Sha512::digest(body))
        );
        let (pl, pb) = line_of(&format!("{KEY_PREFIX}http://r.test:8/efrhello"), &bi);
        let p = parse_line(&pl, &pb).unwrap();
        let pu = url_of(&p.key).unwrap();
        assert_eq!(verify(&pu, &p, Some(&Ok(body.to_vec()))), Verdict::Verified);
        assert!(matches!(
            verify(&pu, &p, Some(&Ok(b"{}".to_vec()))),
            Verdict::Mismatch(_)
        ));
    }
}
