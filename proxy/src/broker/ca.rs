//! The broker's per-user CA: `ca.pem` (0644) and `ca.key` (0600) in a 0700 state dir, made
//! on first use under a lock (two processes at once end with one CA), written with a
//! temporary file and a rename (a crash leaves no half-written key); and the leaves it signs
//! for each host a call reaches, cached in memory.

use std::collections::HashMap;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;
use time::{Duration, OffsetDateTime};

use crate::sys;

/// The CA certificate's file name in the state dir.
pub const CERT_FILE: &str = "ca.pem";
/// The CA key's file name in the state dir.
pub const KEY_FILE: &str = "ca.key";
const LOCK_FILE: &str = "ca.lock";

/// How long a leaf is valid; a cached leaf with less than [`LEAF_RENEW`] left is made anew.
pub const LEAF_VALIDITY: Duration = Duration::days(7);
/// A cached leaf this close to its end is made anew.
pub const LEAF_RENEW: Duration = Duration::days(1);
/// Most leaves one [`Ca`] keeps (a call reaching more hosts drops the oldest ones).
pub const MAX_LEAVES: usize = 1024;

/// Why the CA could not be loaded or made, or a leaf signed.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// A file or dir of the CA could not be read, written or made.
    #[error("broker ca: {what} {path}: {err}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        err: io::Error,
    },
    /// The key file (or the state dir) may be read by others or belongs to another user.
    #[error(
        "broker ca: refusing {path}: {why}; it must be a regular file of uid {uid} with mode \
         0600 (remove it, with ca.pem beside it, to make a new CA)"
    )]
    Unsafe {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
        /// The uid it must belong to.
        uid: u32,
    },
    /// The files do not hold a CA certificate and key.
    #[error("broker ca: {path} does not hold a usable CA: {why}")]
    Bad {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Certificate generation failed.
    #[error("broker ca: cannot make a certificate for {host}: {err}")]
    Sign {
        /// The host (or "the CA").
        host: String,
        /// rcgen's error.
        err: rcgen::Error,
    },
}

/// The per-user CA of the broker. Its key never leaves the service.
pub struct Ca {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    cert_path: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    leaves: Mutex<HashMap<String, Leaf>>,
}

#[derive(Clone)]
struct Leaf {
    key: Arc<CertifiedKey>,
    not_after: OffsetDateTime,
    made: u64,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca")
            .field("cert_path", &self.cert_path)
            .finish_non_exhaustive()
    }
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CaError + 'a {
    move |err| CaError::Io {
        what,
        path: path.to_path_buf(),
        err,
    }
}

impl Ca {
    /// Load the CA of `state_dir` (`$XDG_STATE_HOME/efr-sandbox`), or make it there on first
    /// use. Refuses a key file that is not a regular file of this uid with mode 0600, and a
    /// state dir of another uid.
    pub fn load_or_create(state_dir: &Path) -> Result<Ca, CaError> {
        let uid = sys::euid();
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir)
            .map_err(io_err("create", state_dir))?;
        let meta = fs::symlink_metadata(state_dir).map_err(io_err("stat", state_dir))?;
        if !meta.is_dir() || meta.uid() != uid {
            return Err(CaError::Unsafe {
                path: state_dir.to_path_buf(),
                why: format!("a dir of uid {} (or not a dir)", meta.uid()),
                uid,
            });
        }
        if meta.mode() & 0o077 != 0 {
            fs::set_permissions(state_dir, fs::Permissions::from_mode(0o700))
                .map_err(io_err("chmod", state_dir))?;
        }
        let lock_path = state_dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io_err("open", &lock_path))?;
        sys::lock_exclusive(&lock).map_err(io_err("lock", &lock_path))?;
        let (cert_path, key_path) = (state_dir.join(CERT_FILE), state_dir.join(KEY_FILE));
        let both = cert_path.exists() && key_path.exists();
        let ca = if both {
            Ca::load(&cert_path, &key_path, uid)?
        } else {
            Ca::create(&cert_path, &key_path)?
        };
        drop(lock);
        Ok(ca)
    }

    fn load(cert_path: &Path, key_path: &Path, uid: u32) -> Result<Ca, CaError> {
        check_key_file(key_path, uid)?;
        let key_pem = fs::read_to_string(key_path).map_err(io_err("read", key_path))?;
        let cert_pem = fs::read_to_string(cert_path).map_err(io_err("read", cert_path))?;
        let key = KeyPair::from_pem(&key_pem).map_err(|e| CaError::Bad {
            path: key_path.to_path_buf(),
            why: e.to_string(),
        })?;
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key).map_err(|e| CaError::Bad {
            path: cert_path.to_path_buf(),
            why: e.to_string(),
        })?;
        let cert_der = first_cert(&cert_pem).ok_or_else(|| CaError::Bad {
            path: cert_path.to_path_buf(),
            why: "no certificate".into(),
        })?;
        Ok(Ca::assemble(cert_pem, cert_der, cert_path, issuer))
    }

    fn create(cert_path: &Path, key_path: &Path) -> Result<Ca, CaError> {
        let sign = |err| CaError::Sign {
            host: "the CA".into(),
            err,
        };
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(sign)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(sign)?;
        params
            .distinguished_name
            .push(DnType::CommonName, ca_name());
        params
            .distinguished_name
            .push(DnType::OrganizationName, "efr-sandbox");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + Duration::days(3650);
        let cert = params.self_signed(&key).map_err(sign)?;
        // The key first: a crash between the two renames leaves one file, and the next
        // use, seeing only one, makes both anew.
        write_atomic(key_path, key.serialize_pem().as_bytes(), 0o600)?;
        write_atomic(cert_path, cert.pem().as_bytes(), 0o644)?;
        let cert_der = cert.der().clone();
        Ok(Ca::assemble(
            cert.pem(),
            cert_der,
            cert_path,
            Issuer::new(params, key),
        ))
    }

    fn assemble(
        cert_pem: String,
        cert_der: CertificateDer<'static>,
        cert_path: &Path,
        issuer: Issuer<'static, KeyPair>,
    ) -> Ca {
        Ca {
            cert_pem,
            cert_der,
            cert_path: cert_path.to_path_buf(),
            issuer,
            leaves: Mutex::new(HashMap::new()),
        }
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA certificate, DER.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// Where the CA certificate is (`STATE_DIR/ca.pem`).
    pub fn cert_path(&self) -> &Path {
        &self.cert_path
    }

    /// The leaf for `host` (a normalised name): from the cache, or signed now (valid
    /// [`LEAF_VALIDITY`], SAN the host; made anew when it has less than [`LEAF_RENEW`] left).
    pub fn leaf(&self, host: &str) -> Result<Arc<CertifiedKey>, CaError> {
        let now = OffsetDateTime::now_utc();
        let mut cache = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cache.get(host)
            && l.not_after - now > LEAF_RENEW
        {
            return Ok(l.key.clone());
        }
        let leaf = self.sign_leaf(host, now)?;
        if cache.len() >= MAX_LEAVES && !cache.contains_key(host) {
            let oldest = cache
                .iter()
                .min_by_key(|(_, l)| l.made)
                .map(|(h, _)| h.clone());
            if let Some(h) = oldest {
                cache.remove(&h);
            }
        }
        let made = cache.values().map(|l| l.made).max().unwrap_or(0) + 1;
        let key = leaf.key.clone();
        cache.insert(host.to_string(), Leaf { made, ..leaf });
        Ok(key)
    }

    /// How many leaves the cache holds.
    pub fn cached_leaves(&self) -> usize {
        self.leaves.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn sign_leaf(&self, host: &str, now: OffsetDateTime) -> Result<Leaf, CaError> {
        let sign = |err| CaError::Sign {
            host: host.to_string(),
            err,
        };
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(sign)?;
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(sign)?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = now - Duration::hours(1);
        params.not_after = now + LEAF_VALIDITY;
        let cert = params.signed_by(&key, &self.issuer).map_err(sign)?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing =
            rustls::crypto::ring::sign::any_ecdsa_type(&der).map_err(|e| CaError::Bad {
                path: self.cert_path.clone(),
                why: format!("leaf key for {host}: {e}"),
            })?;
        let chain = vec![cert.der().clone(), self.cert_der.clone()];
        Ok(Leaf {
            key: Arc::new(CertifiedKey::new(chain, signing)),
            not_after: params.not_after,
            made: 0,
        })
    }
}

/// "efr-sandbox local CA (USER@HOST)".
fn ca_name() -> String {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("uid {}", sys::euid()));
    let host = fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!("efr-sandbox local CA ({user}@{host})")
}

fn first_cert(pem: &str) -> Option<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes()).next()?.ok()
}

/// The key file must be a regular file of `uid` that no one else may read.
fn check_key_file(path: &Path, uid: u32) -> Result<(), CaError> {
    let meta = fs::symlink_metadata(path).map_err(io_err("stat", path))?;
    let why = if !meta.file_type().is_file() {
        Some("not a regular file".to_string())
    } else if meta.uid() != uid {
        Some(format!("owned by uid {}", meta.uid()))
    } else if meta.mode() & 0o077 != 0 {
        Some(format!(
            "mode {:04o} lets others read it",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(CaError::Unsafe {
            path: path.to_path_buf(),
            why,
            uid,
        }),
        None => Ok(()),
    }
}

/// Write `data` to `path` through `path.tmp` (mode `mode`, synced) and a rename.
fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), CaError> {
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp);
    let mut f: File = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io_err("create", &tmp))?;
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .map_err(io_err("write", &tmp))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).map_err(io_err("chmod", &tmp))?;
    fs::rename(&tmp, path).map_err(io_err("rename", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_then_loaded_with_its_modes() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state/efr-sandbox");
        let a = Ca::load_or_create(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(KEY_FILE)), 0o600);
        assert_eq!(mode(&dir.join(CERT_FILE)), 0o644);
        assert!(a.cert_pem().contains("BEGIN CERTIFICATE"));
        let b = Ca::load_or_create(&dir).unwrap();
        assert_eq!(
            a.cert_pem(),
            b.cert_pem(),
            "the second use loads the first CA"
        );
        assert!(!dir.join("ca.tmp").exists());
    }

    #[test]
    fn a_readable_key_is_refused_naming_it() {
        let d = tempfile::tempdir().unwrap();
        Ca::load_or_create(d.path()).unwrap();
        let key = d.path().join(KEY_FILE);
        fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
        let e = Ca::load_or_create(d.path()).unwrap_err();
        assert!(matches!(e, CaError::Unsafe { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(&key.display().to_string()), "{msg}");
        assert!(msg.contains("0644"), "{msg}");
        fs::set_permissions(&key, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(Ca::load_or_create(d.path()).is_err());
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Ca::load_or_create(d.path()).is_ok());
        // A key of another user (only root can make one here).
        if sys::euid() == 0 {
            std::os::unix::fs::chown(&key, Some(65534), None).unwrap();
            let e = Ca::load_or_create(d.path()).unwrap_err().to_string();
            assert!(
                e.contains("owned by uid 65534") && e.contains(KEY_FILE),
                "{e}"
            );
        }
        // A symbolic link in its place.
        fs::remove_file(&key).unwrap();
        std::os::unix::fs::symlink(d.path().join(CERT_FILE), &key).unwrap();
        let e = Ca::load_or_create(d.path()).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn parallel_first_use_ends_with_one_ca() {
        for _ in 0..4 {
            let d = tempfile::tempdir().unwrap();
            let dir = d.path().to_path_buf();
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let dir = dir.clone();
                    std::thread::spawn(move || {
                        Ca::load_or_create(&dir).unwrap().cert_pem().to_string()
                    })
                })
                .collect();
            let pems: Vec<String> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            assert!(pems.windows(2).all(|w| w[0] == w[1]));
            let on_disk = fs::read_to_string(dir.join(CERT_FILE)).unwrap();
            assert_eq!(on_disk, pems[0]);
        }
    }

    #[test]
    fn leaves_are_cached_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let ca = Ca::load_or_create(d.path()).unwrap();
        let a = ca.leaf("a.test").unwrap();
        let b = ca.leaf("a.test").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.cert.len(), 2, "leaf then CA");
        assert_eq!(a.cert[1], *ca.cert_der());
        for i in 0..MAX_LEAVES + 5 {
            ca.leaf(&format!("h{i}.test")).unwrap();
        }
        assert_eq!(ca.cached_leaves(), MAX_LEAVES);
    }
}
