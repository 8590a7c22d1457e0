//! The scan on a home built here: secrets of every kind in visible and hidden places, links
//! in and out, a FIFO named like a key, a 50 MiB file, a deep tree, a cache.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use efr_surface::{Budget, Class, Patterns, scan};

fn write(p: &Path, text: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    outside: PathBuf,
}

fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let outside = dir.path().join("outside");
    let h = |r: &str| home.join(r);
    // Visible secrets, one of each kind.
    write(
        &h(".aws/credentials"),
        b"[default]\naws_access_key_id = x\n",
    );
    write(
        &h(".ssh/id_ed25519"),
        b"-----BEGIN OPENSSH PRIVATE KEY-----\n",
    );
    write(&h(".ssh/id_ed25519.pub"), b"ssh-ed25519 AAAA user@host\n");
    write(
        &h("keys/deploy"),
        b"\n-----BEGIN RSA PRIVATE KEY-----\nMII\n",
    );
    write(
        &h(".config/gh/hosts.yml"),
        b"github.com:\n    oauth_token: gho_0123456789abcdefghijABCDEFGHIJ012345\n",
    );
    write(&h(".npmrc"), b"//registry.npmjs.org/:_authToken=npm_abc\n");
    write(&h("proj/.env"), b"SECRET=1\n");
    write(&h("proj/.env.example"), b"SECRET=\n");
    write(
        &h("proj/config/db.yml"),
        b"url: postgres://app:hunter2@db/app\n",
    );
    write(&h(".bash_history"), b"mysql -p secret\n");
    // Not secrets.
    write(&h("proj/src/main.rs"), b"fn main() {}\n");
    write(&h("proj/README.md"), b"see https://example.com\n");
    // Hidden from the call (masked): never reported.
    write(&h(".gnupg/private-keys-v1.d/x.key"), b"secret\n");
    write(&h("vault/credentials"), b"x\n");
    // Under skipped directories: installed packages, a tagged cache, git's store.
    write(&h("proj/node_modules/pkg/.env"), b"X=1\n");
    write(
        &h("proj/target/CACHEDIR.TAG"),
        b"Signature: 8a477f597d28d172789f06886806bc55\n",
    );
    write(&h("proj/target/debug/credentials"), b"x\n");
    write(&h("proj/.git/objects/ab/credentials"), b"x\n");
    // Outside the roots, reached by links from inside: never followed.
    write(&outside.join("credentials"), b"x\n");
    write(
        &outside.join("dir/id_rsa"),
        b"-----BEGIN RSA PRIVATE KEY-----\n",
    );
    std::os::unix::fs::symlink(outside.join("credentials"), h("proj/linked-credentials")).unwrap();
    std::os::unix::fs::symlink(outside.join("dir"), h("proj/linked-dir")).unwrap();
    // A link back up inside (a loop if followed).
    std::os::unix::fs::symlink(&home, h("proj/loop")).unwrap();
    // A FIFO named like a key: opening it for reading would block without a writer.
    for f in [h(".ssh/id_fifo"), h("proj/pipe")] {
        let st = std::process::Command::new("mkfifo")
            .arg(&f)
            .status()
            .unwrap();
        assert!(st.success());
    }
    // A 50 MiB file whose token lies past the bytes the scan reads.
    let mut big = vec![b'a'; 50 << 20];
    big.extend_from_slice(b" ghp_0123456789abcdefghijABCDEFGHIJ012345\n");
    write(&h("proj/big.log"), &big);
    // A deep tree with a secret at the bottom, past the depth bound.
    let mut deep = h("proj/deep");
    for i in 0..30 {
        deep = deep.join(format!("d{i}"));
    }
    write(&deep.join("credentials"), b"x\n");
    Home {
        _dir: dir,
        home,
        outside,
    }
}

fn masked(home: &Path) -> impl Fn(&Path) -> bool + '_ {
    move |p: &Path| !p.starts_with(home.join(".gnupg")) && !p.starts_with(home.join("vault"))
}

#[test]
fn finds_exactly_the_visible_secrets_and_never_blocks_or_follows_a_link() {
    let h = home();
    let p = Patterns::shipped().unwrap();
    let visible = masked(&h.home);
    let t = Instant::now();
    let s = scan(
        std::slice::from_ref(&h.home),
        &visible,
        &p,
        &Budget {
            time: Duration::from_secs(30),
            ..Budget::default()
        },
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(s.partial, None);
    let home = std::fs::canonicalize(&h.home).unwrap();
    let got: Vec<(String, Class)> = s
        .findings
        .iter()
        .map(|f| {
            (
                f.path.strip_prefix(&home).unwrap().display().to_string(),
                f.class,
            )
        })
        .collect();
    let want: Vec<(String, Class)> = [
        (".aws/credentials", Class::Credentials),
        (".bash_history", Class::History),
        (".config/gh/hosts.yml", Class::Token),
        (".npmrc", Class::Token),
        (".ssh/id_ed25519", Class::Key),
        ("keys/deploy", Class::Key),
        ("proj/.env", Class::Env),
        ("proj/config/db.yml", Class::Credentials),
    ]
    .iter()
    .map(|(p, c)| (p.to_string(), *c))
    .collect();
    assert_eq!(got, want);
    let gh = s
        .findings
        .iter()
        .find(|f| f.path.ends_with("hosts.yml"))
        .unwrap();
    assert_eq!(gh.host.as_deref(), Some("github.com"));
    assert_eq!(gh.hosts, ["github.com"]);
    let npmrc = s
        .findings
        .iter()
        .find(|f| f.path.ends_with(".npmrc"))
        .unwrap();
    assert_eq!(npmrc.hosts, ["registry.npmjs.org"]);
    // A file found by its name is read too, for the hosts of its tokens.
    let creds = s
        .findings
        .iter()
        .find(|f| f.path.ends_with(".aws/credentials"))
        .unwrap();
    assert!(creds.hosts.is_empty());
    assert!(
        s.findings.iter().all(|f| !f.path.starts_with(&h.outside)),
        "{:?}",
        s.findings
    );
}

#[test]
fn a_scan_cut_by_its_budget_says_partial_and_where() {
    let h = home();
    let p = Patterns::shipped().unwrap();
    let visible = |_: &Path| true;
    let s = scan(
        std::slice::from_ref(&h.home),
        &visible,
        &p,
        &Budget {
            max_entries: 10,
            ..Budget::default()
        },
    );
    let part = s.partial.expect("cut by entries");
    assert_eq!(part.why, "entries");
    assert!(part.at.starts_with(std::fs::canonicalize(&h.home).unwrap()));
    assert!(s.entries <= 11);
    let s = scan(
        std::slice::from_ref(&h.home),
        &visible,
        &p,
        &Budget {
            time: Duration::ZERO,
            ..Budget::default()
        },
    );
    assert_eq!(s.partial.map(|p| p.why), Some("time"));
}

#[test]
fn a_masked_root_a_missing_root_and_a_root_that_is_a_file_give_nothing() {
    let h = home();
    let p = Patterns::shipped().unwrap();
    let none = |_: &Path| false;
    let s = scan(std::slice::from_ref(&h.home), &none, &p, &Budget::default());
    assert!(s.findings.is_empty());
    let roots = [h.home.join("nope"), h.home.join(".npmrc")];
    let all = |_: &Path| true;
    let s = scan(&roots, &all, &p, &Budget::default());
    assert!(s.findings.is_empty() && s.partial.is_none());
}
