//! cargo's registry cache (`~/.cargo/registry`) as the merge verifies it: which registry a
//! cache dir belongs to, the names cargo gives a crate's file, its index cache format, and
//! the checks of each file against what the registry serves.
//!
//! - `registry/cache/DIR/NAME-VERSION.crate` is merged when the sha256 of its bytes is the
//!   `cksum` of NAME VERSION in the index file fetched from the registry of DIR. Where the
//!   name ends and the version starts is the index's to say: each `-` followed by a digit
//!   is a candidate, and the one whose index file has an entry of that exact name and
//!   version is taken (two such are refused as ambiguous).
//! - `registry/index/DIR/.cache/...` (cargo's own binary format, [`parse_index_cache`]) is
//!   merged when its entries are exactly the lines of the index file fetched now: the same
//!   set, not a subset (a subset with a current etag would hide newer versions from the
//!   host's cargo).
//! - `registry/index/DIR/config.json` when it is byte-equal to the registry's.
//!
//! DIR is `HOST-HASH`, the hash of the registry's source URL ([`dir_names`]); the registry
//! of a DIR is the candidate URL whose name is exactly DIR (the call's own host grants,
//! crates.io, the registries of the user's cargo config).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::Path;

use super::fetch::Want;

/// The source URL of crates.io's sparse index.
pub const CRATES_IO: &str = "sparse+https://index.crates.io/";
/// The version of cargo's index cache format this reader knows (`CURRENT_CACHE_VERSION`).
const CACHE_VERSION: u8 = 3;
/// The index schema version of that format (`INDEX_V_MAX`).
const INDEX_V_MAX: u32 = 2;

/// The hex of a u64 as cargo writes a short hash (its little-endian bytes).
fn short_hex(v: u64) -> String {
    v.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// The discriminant of cargo's `SourceKind::SparseRegistry` (cargo >= 1.68), hashed
/// first.
const KIND_SPARSE: isize = 3;
/// The discriminant of `SourceKind::Registry`, which a sparse registry was before 1.68
/// (`-Z sparse-registry`, Debian 12's cargo 1.65): its URL alone said `sparse+`.
const KIND_REGISTRY: isize = 2;

/// cargo's hash of a registry's source id: the kind's discriminant (through
/// `write_isize`), then the URL string.
fn source_hash<H: Hasher>(mut h: H, kind: isize, url: &str) -> u64 {
    h.write_isize(kind);
    url.hash(&mut h);
    h.finish()
}

/// The hash cargo >= 1.85 gives the source `url` (rustc-stable-hash's `StableSipHasher128`).
pub fn hash_new(url: &str) -> String {
    short_hex(source_hash(
        rustc_stable_hash::StableSipHasher128::new(),
        KIND_SPARSE,
        url,
    ))
}

/// The hash cargo 1.68 to 1.84 gives it (SipHash-2-4 with zero keys), or with `kind`
/// [`KIND_REGISTRY`] the hash of cargo before 1.68.
fn hash_old_kind(kind: isize, url: &str) -> String {
    short_hex(source_hash(
        siphasher::sip::SipHasher24::new_with_keys(0, 0),
        kind,
        url,
    ))
}

/// The hash cargo 1.68 to 1.84 gives the source `url`.
pub fn hash_old(url: &str) -> String {
    hash_old_kind(KIND_SPARSE, url)
}

/// The URL without the `/` that ends a path other than the root (cargo >= 1.85 hashes this
/// canonical form of a registry URL).
fn canonical(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let path_start = url[scheme_end + 3..]
        .find('/')
        .map(|i| scheme_end + 3 + i)
        .unwrap_or(url.len());
    let trimmed = url.trim_end_matches('/');
    if trimmed.len() > path_start {
        trimmed.to_string()
    } else {
        url.to_string()
    }
}

/// The host of a source URL (`sparse+https://HOST:PORT/...`), as cargo names its dirs by.
fn host_of(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let auth = rest.split('/').next()?;
    let auth = auth.rsplit('@').next()?;
    let host = match auth.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => auth.split(':').next()?,
    };
    (!host.is_empty()).then_some(host)
}

/// The names cargo (>= 1.85, 1.68 to 1.84, before 1.68) gives the dirs of the sparse
/// registry `url` (`sparse+https://...`).
pub fn dir_names(url: &str) -> Vec<String> {
    let Some(host) = host_of(url) else {
        return Vec::new();
    };
    let host = host.to_ascii_lowercase();
    let mut out = vec![
        format!("{host}-{}", hash_new(&canonical(url))),
        format!("{host}-{}", hash_new(url)),
        format!("{host}-{}", hash_old(url)),
        format!("{host}-{}", hash_old_kind(KIND_REGISTRY, url)),
    ];
    out.dedup();
    out
}

/// The index URL (`https://.../`, ending in `/`) of the candidate sparse registry whose
/// dir is `dir`, of `candidates` (`sparse+https://...` URLs).
pub fn registry_of(dir: &str, candidates: &[String]) -> Option<String> {
    candidates
        .iter()
        .find(|c| dir_names(c).iter().any(|n| n == dir))
        .map(|c| {
            let u = c.strip_prefix("sparse+").unwrap_or(c);
            if u.ends_with('/') {
                u.to_string()
            } else {
                format!("{u}/")
            }
        })
}

/// The sparse registries of the user's own cargo config (`$CARGO_HOME/config.toml`,
/// `~/.cargo/config.toml`, and their old names without `.toml`); never a project's, which
/// a call can write.
pub fn user_registries(home: &Path) -> Vec<String> {
    let mut files = Vec::new();
    if let Some(ch) = std::env::var_os("CARGO_HOME").filter(|v| Path::new(v).is_absolute()) {
        files.push(Path::new(&ch).join("config.toml"));
        files.push(Path::new(&ch).join("config"));
    }
    files.push(home.join(".cargo/config.toml"));
    files.push(home.join(".cargo/config"));
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let Ok(v) = text.parse::<toml::Table>() else {
            continue;
        };
        for (table, key) in [("registries", "index"), ("source", "registry")] {
            let Some(t) = v.get(table).and_then(|t| t.as_table()) else {
                continue;
            };
            for (_, r) in t {
                if let Some(u) = r.get(key).and_then(|u| u.as_str()) {
                    if u.starts_with("sparse+") && !out.iter().any(|o| o == u) {
                        out.push(u.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The path of a crate's index file below its index URL (`1/a`, `2/ab`, `3/a/abc`,
/// `ab/cd/abcd...`), the name lower-cased; `None` for a name that is no crate name.
pub fn index_path(name: &str) -> Option<String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return None;
    }
    let n = name.to_ascii_lowercase();
    Some(match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    })
}

/// The ways `NAME-VERSION` (a `.crate`'s stem) may split: at each `-` followed by a digit,
/// where the name is a crate name and the version a semantic version (`MAJOR.MINOR.PATCH`
/// then `-PRE` or `+BUILD`); the index decides between those left.
pub fn splits(stem: &str) -> Vec<(&str, &str)> {
    stem.char_indices()
        .filter(|&(i, c)| c == '-' && stem[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
        .map(|(i, _)| (&stem[..i], &stem[i + 1..]))
        .filter(|(n, v)| index_path(n).is_some() && semver_like(v))
        .collect()
}

/// Whether `v` starts as a semantic version does: three dot-separated numbers, then its
/// end, `-` or `+`.
fn semver_like(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// One line of a sparse index file, as far as the merge reads it.
#[derive(Debug, serde::Deserialize)]
struct IndexLine {
    name: String,
    vers: String,
    cksum: String,
}

/// The lines of an index file (empty lines left out).
pub fn index_lines(body: &[u8]) -> Vec<&[u8]> {
    body.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

/// The `cksum` of `name` `vers` in an index file.
pub fn cksum_of(body: &[u8], name: &str, vers: &str) -> Option<String> {
    index_lines(body).into_iter().find_map(|l| {
        let e: IndexLine = serde_json::from_slice(l).ok()?;
        (e.name == name && e.vers == vers).then_some(e.cksum)
    })
}

/// What [`parse_index_cache`] read: the index version cargo keeps (an etag or a
/// last-modified date) and each (version, index line) entry.
#[derive(Debug, PartialEq, Eq)]
pub struct IndexCache<'a> {
    /// The header of the last answer (`etag: ...`).
    pub index_version: &'a str,
    /// The entries, each a version and its index line.
    pub entries: Vec<(&'a str, &'a [u8])>,
}

/// Why an index cache file could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexCacheError {
    /// Empty, or shorter than its header.
    #[error("an index cache shorter than its header")]
    Short,
    /// Another format version than 3 and schema version than 2 (those cargo writes now).
    #[error("an index cache of format {0}, schema {1}: not the one cargo writes now")]
    Version(u8, u32),
    /// Not `(version NUL line NUL)*` after the header, or not UTF-8 where text is.
    #[error("a malformed index cache")]
    Malformed,
}

/// Reads cargo's index cache format (`src/sources/registry/index/cache.rs`): a format
/// byte (3), the index schema version (u32, little-endian, 2), the index version then
/// each entry's version and index line, every one of these ended by a NUL.
pub fn parse_index_cache(data: &[u8]) -> Result<IndexCache<'_>, IndexCacheError> {
    let (&format, rest) = data.split_first().ok_or(IndexCacheError::Short)?;
    let schema = rest.get(..4).ok_or(IndexCacheError::Short)?;
    let schema = u32::from_le_bytes([schema[0], schema[1], schema[2], schema[3]]);
    if format != CACHE_VERSION || schema != INDEX_V_MAX {
        return Err(IndexCacheError::Version(format, schema));
    }
    let rest = &rest[4..];
    if rest.last() != Some(&0) {
        return Err(IndexCacheError::Malformed);
    }
    let mut parts = rest[..rest.len() - 1].split(|&b| b == 0);
    let index_version = parts
        .next()
        .and_then(|v| std::str::from_utf8(v).ok())
        .ok_or(IndexCacheError::Malformed)?;
    let mut entries = Vec::new();
    while let Some(v) = parts.next() {
        let v = std::str::from_utf8(v).map_err(|_| IndexCacheError::Malformed)?;
        let line = parts.next().ok_or(IndexCacheError::Malformed)?;
        if v.is_empty() || line.is_empty() {
            return Err(IndexCacheError::Malformed);
        }
        entries.push((v, line));
    }
    Ok(IndexCache {
        index_version,
        entries,
    })
}

/// Whether an index cache holds exactly the lines of the index file `body` (each entry's
/// version that of its line).
pub fn index_cache_matches(cache: &IndexCache<'_>, body: &[u8]) -> bool {
    let lines: BTreeSet<&[u8]> = index_lines(body).into_iter().collect();
    let entries: BTreeSet<&[u8]> = cache.entries.iter().map(|(_, l)| *l).collect();
    lines == entries
        && entries.len() == cache.entries.len()
        && cache
            .entries
            .iter()
            .all(|(v, l)| serde_json::from_slice::<IndexLine>(l).is_ok_and(|e| e.vers == *v))
}

/// A file of a cargo registry cache the merge may verify, by its path below the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CargoFile {
    /// `cache/DIR/STEM.crate`.
    Crate {
        /// The registry's dir.
        dir: String,
        /// `NAME-VERSION`.
        stem: String,
    },
    /// `index/DIR/.cache/PREFIX/NAME`.
    IndexCache {
        /// The registry's dir.
        dir: String,
        /// The index path below the index URL (`ef/rh/efrhello`).
        path: String,
    },
    /// `index/DIR/config.json`.
    Config {
        /// The registry's dir.
        dir: String,
    },
}

/// What `rel` (below the registry cache, `~/.cargo/registry`) is to the merge.
pub fn classify(rel: &Path) -> Option<CargoFile> {
    let comps: Vec<&str> = rel
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    match comps.as_slice() {
        ["cache", dir, file] => Some(CargoFile::Crate {
            dir: dir.to_string(),
            stem: file.strip_suffix(".crate")?.to_string(),
        }),
        ["index", dir, "config.json"] => Some(CargoFile::Config {
            dir: dir.to_string(),
        }),
        ["index", dir, ".cache", rest @ ..] if !rest.is_empty() => {
            let path = rest.join("/");
            let name = rest.last()?;
            // The path is the one cargo would use for that name.
            (index_path(name).as_deref() == Some(path.as_str())).then(|| CargoFile::IndexCache {
                dir: dir.to_string(),
                path,
            })
        }
        _ => None,
    }
}

/// The fetches a cargo file's check needs, given the index URL of its registry.
pub fn wants(f: &CargoFile, index: &str) -> Vec<Want> {
    let want = |p: &str| Want {
        url: format!("{index}{p}"),
        accept: None,
    };
    match f {
        CargoFile::Crate { stem, .. } => splits(stem)
            .into_iter()
            .filter_map(|(n, _)| index_path(n))
            .map(|p| want(&p))
            .collect(),
        CargoFile::IndexCache { path, .. } => vec![want(path)],
        CargoFile::Config { .. } => vec![want("config.json")],
    }
}

/// The outcome of one check.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The registry serves these bytes: merge.
    Verified,
    /// The registry says other bytes: a refusal, with why.
    Mismatch(String),
    /// Nothing to check against: not merged, with why.
    Unverified(String),
}

/// Checks a cargo file's bytes against the registry's answers (`answers`: by URL, `None`
/// where the fetch failed, with why).
pub fn verify(
    f: &CargoFile,
    index: &str,
    bytes: &[u8],
    answers: &BTreeMap<String, Result<Vec<u8>, String>>,
) -> Verdict {
    let answer = |p: &str| answers.get(&format!("{index}{p}"));
    match f {
        CargoFile::Crate { stem, .. } => {
            let mut found = Vec::new();
            let mut failed = None;
            for (name, vers) in splits(stem) {
                let Some(p) = index_path(name) else { continue };
                match answer(&p) {
                    Some(Ok(body)) => {
                        if let Some(c) = cksum_of(body, name, vers) {
                            found.push((name, vers, c));
                        }
                    }
                    Some(Err(e)) => failed = Some(e.clone()),
                    None => {}
                }
            }
            match found.as_slice() {
                [(name, vers, cksum)] => {
                    let got = super::hex(&sha2::Digest::finalize(
                        <sha2::Sha256 as sha2::Digest>::new_with_prefix(bytes),
                    ));
                    if &got == cksum {
                        Verdict::Verified
                    } else {
                        Verdict::Mismatch(format!(
                            "a crate whose sha256 is not the registry's checksum of {name} {vers}"
                        ))
                    }
                }
                [] => Verdict::Unverified(failed.unwrap_or_else(|| {
                    "the registry's index has no such crate and version".into()
                })),
                _ => Verdict::Unverified("a crate file name the index reads two ways".into()),
            }
        }
        CargoFile::IndexCache { path, .. } => match answer(path) {
            Some(Ok(body)) => match parse_index_cache(bytes) {
                Ok(c) if index_cache_matches(&c, body) => Verdict::Verified,
                Ok(_) => Verdict::Unverified(
                    "an index cache whose entries are not the registry's index lines".into(),
                ),
                Err(e) => Verdict::Unverified(e.to_string()),
            },
            Some(Err(e)) => Verdict::Unverified(e.clone()),
            None => Verdict::Unverified("not fetched".into()),
        },
        CargoFile::Config { .. } => match answer("config.json") {
            Some(Ok(body)) if body == bytes => Verdict::Verified,
            Some(Ok(_)) => Verdict::Unverified("a config.json that is not the registry's".into()),
            Some(Err(e)) => Verdict::Unverified(e.clone()),
            None => Verdict::Unverified("not fetched".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crates_io_dir_names_of_both_hashers() {
        let names = dir_names(CRATES_IO);
        assert!(names.contains(&"index.crates.io-1949cf8c6b5b557f".to_string()));
        assert!(names.contains(&"index.crates.io-6f17d22bba15001f".to_string()));
        assert_eq!(
            registry_of("index.crates.io-1949cf8c6b5b557f", &[CRATES_IO.into()]).as_deref(),
            Some("https://index.crates.io/")
        );
        assert_eq!(
            registry_of("index.crates.io-0000000000000000", &[CRATES_IO.into()]),
            None
        );
        assert_eq!(canonical("sparse+https://h/a/b/"), "sparse+https://h/a/b");
        assert_eq!(canonical("sparse+https://h/"), "sparse+https://h/");
        assert_eq!(
            host_of("sparse+http://registry.test:8080/"),
            Some("registry.test")
        );
        assert_eq!(host_of("sparse+https://u@[::1]:8/x"), Some("::1"));
        assert_eq!(host_of("nothing"), None);
    }

    #[test]
    fn names_split_where_the_index_can_say() {
        assert_eq!(splits("md-5-0.10.6"), [("md-5", "0.10.6")]);
        assert_eq!(splits("utf-8-0.7.6"), [("utf-8", "0.7.6")]);
        assert_eq!(splits("sha-1-0.10.1"), [("sha-1", "0.10.1")]);
        assert_eq!(splits("foo-bar-1.0.0-rc.1"), [("foo-bar", "1.0.0-rc.1")]);
        // A `-digit` that leaves no semantic version is no candidate.
        assert_eq!(splits("a-1-2.0.0"), [("a-1", "2.0.0")]);
        assert_eq!(splits("a-1.0.0-2.0.0"), [("a", "1.0.0-2.0.0")]);
        assert_eq!(splits("x-1.0"), []);
        assert_eq!(splits("serde"), []);
        assert_eq!(index_path("md-5").as_deref(), Some("md/-5/md-5"));
        assert_eq!(index_path("a").as_deref(), Some("1/a"));
        assert_eq!(index_path("ab").as_deref(), Some("2/ab"));
        assert_eq!(index_path("Abc").as_deref(), Some("3/a/abc"));
        assert_eq!(index_path("../x"), None);
        assert_eq!(index_path(""), None);
    }

    fn line(name: &str, vers: &str, cksum: &str) -> String {
        format!(
            "{{\"name\":\"{name}\",\"vers\":\"{vers}\",\"deps\":[],\"cksum\":\"{cksum}\",\"features\":{{}},\"yanked\":false}}"
        )
    }

    fn cache_file(etag: &str, entries: &[(&str, &str)]) -> Vec<u8> {
        let mut v = vec![3u8];
        v.extend(2u32.to_le_bytes());
        v.extend(etag.as_bytes());
        v.push(0);
        for (ver, l) in entries {
            v.extend(ver.as_bytes());
            v.push(0);
            v.extend(l.as_bytes());
            v.push(0);
        }
        v
    }

    #[test]
    fn the_index_cache_format() {
        let (a, b) = (line("x", "1.0.0", "aa"), line("x", "1.1.0", "bb"));
        let f = cache_file("etag: \"1\"", &[("1.0.0", &a), ("1.1.0", &b)]);
        let c = parse_index_cache(&f).unwrap();
        assert_eq!(c.index_version, "etag: \"1\"");
        assert_eq!(c.entries.len(), 2);
        let index = format!("{a}\n{b}\n");
        assert!(index_cache_matches(&c, index.as_bytes()));
        // A subset (a newer version hidden), a rewritten checksum, a version that is not
        // its line's: none is the registry's.
        assert!(!index_cache_matches(
            &c,
            format!("{a}\n{b}\n{}\n", line("x", "1.2.0", "cc")).as_bytes()
        ));
        let forged = line("x", "1.1.0", "ff");
        let f2 = cache_file("etag: \"1\"", &[("1.0.0", &a), ("1.1.0", &forged)]);
        assert!(!index_cache_matches(
            &parse_index_cache(&f2).unwrap(),
            index.as_bytes()
        ));
        let f3 = cache_file("etag: \"1\"", &[("1.0.0", &a), ("1.0.0", &b)]);
        assert!(!index_cache_matches(
            &parse_index_cache(&f3).unwrap(),
            index.as_bytes()
        ));
        let f4 = cache_file(
            "etag: \"1\"",
            &[("1.0.0", &a), ("1.0.0", &a), ("1.1.0", &b)],
        );
        assert!(!index_cache_matches(
            &parse_index_cache(&f4).unwrap(),
            index.as_bytes()
        ));
        // Bad input: errors, never a panic.
        assert_eq!(parse_index_cache(b""), Err(IndexCacheError::Short));
        assert_eq!(parse_index_cache(&[3, 2, 0]), Err(IndexCacheError::Short));
        assert_eq!(
            parse_index_cache(&[2, 2, 0, 0, 0, 0]),
            Err(IndexCacheError::Version(2, 2))
        );
        assert_eq!(
            parse_index_cache(&[3, 2, 0, 0, 0, b'e']),
            Err(IndexCacheError::Malformed)
        );
        let mut odd = cache_file("e", &[]);
        odd.extend(b"1.0.0\0");
        assert_eq!(parse_index_cache(&odd), Err(IndexCacheError::Malformed));
    }

    #[test]
    fn a_crate_is_verified_by_the_index_that_names_it() {
        let bytes = b"crate bytes";
        let sum = crate::caches::hex(&sha2::Digest::finalize(
            <sha2::Sha256 as sha2::Digest>::new_with_prefix(bytes),
        ));
        let index = "http://r/";
        let f = classify(Path::new("cache/r-1/md-5-0.10.6.crate")).unwrap();
        assert_eq!(wants(&f, index).len(), 1);
        assert_eq!(wants(&f, index)[0].url, "http://r/md/-5/md-5");
        let mut answers = BTreeMap::new();
        answers.insert(
            "http://r/md/-5/md-5".to_string(),
            Ok(format!("{}\n", line("md-5", "0.10.6", &sum)).into_bytes()),
        );
        assert_eq!(verify(&f, index, bytes, &answers), Verdict::Verified);
        assert!(matches!(
            verify(&f, index, b"planted", &answers),
            Verdict::Mismatch(_)
        ));
        answers.insert("http://r/md/-5/md-5".to_string(), Err("offline".into()));
        assert_eq!(
            verify(&f, index, bytes, &answers),
            Verdict::Unverified("offline".into())
        );
        assert_eq!(classify(Path::new("src/r-1/x-1.0.0/lib.rs")), None);
        assert_eq!(
            classify(Path::new("index/r-1/.cache/md/-5/md-5")),
            Some(CargoFile::IndexCache {
                dir: "r-1".into(),
                path: "md/-5/md-5".into()
            })
        );
        // A cache file at a path cargo would not use for its name.
        assert_eq!(classify(Path::new("index/r-1/.cache/zz/zz/md-5")), None);
    }
}
