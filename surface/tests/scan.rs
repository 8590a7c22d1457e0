//! The scan on a home built here: secrets of every kind in visible and hidden places, the
//! same shapes merely mentioned in source code and test fixtures, links in and out, a
//! repository's config, a credential store, a FIFO named like a key, a 50 MiB file, a deep
//! tree, a cache, a virtual environment.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use efr_policy::secrets::checksummed_token;
use efr_surface::{Budget, Class, Patterns, scan};

fn write(p: &Path, text: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A key's body of `n` base64 characters (lines of 70), random-looking.
fn key_body(n: usize) -> String {
    let a = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = String::new();
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(a[(x % 64) as usize] as char);
        if i % 70 == 69 {
            out.push('\n');
        }
    }
    out
}

fn pem(kind: &str) -> Vec<u8> {
    format!(
        "-----BEGIN {kind}PRIVATE KEY-----\n{}\n-----END {kind}PRIVATE KEY-----\n",
        key_body(400)
    )
    .into_bytes()
}

struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    outside: PathBuf,
}

fn home() -> Home {
    // Not under /tmp: a call has a /tmp of its own, and the scan follows no link there.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let home = dir.path().join("home");
    let outside = dir.path().join("outside");
    let h = |r: &str| home.join(r);
    let gho = checksummed_token("gho", "Vq8Zc2mPx7LkT4rWn9bYd3sGh6JfQa").unwrap();
    let ghs = checksummed_token("ghs", "Hk3Lp9Qw2Ez7Rt5Yu1Io8PaSd4Fg6J").unwrap();
    let npm = checksummed_token("npm", "Zx7Cv5Bn3Mq1Wd9Ef2Rg4Th6Yj8Uk0").unwrap();
    // Visible secrets, one of each kind.
    write(
        &h(".aws/credentials"),
        format!(
            "[default]\naws_access_key_id = AKIA{}\n",
            "Q7X2M9LK4TRW8ZPD"
        )
        .as_bytes(),
    );
    write(&h(".ssh/id_ed25519"), &pem("OPENSSH "));
    write(&h(".ssh/id_ed25519.pub"), b"ssh-ed25519 AAAA user@host\n");
    write(
        &h("keys/deploy"),
        &[b"\n".as_slice(), &pem("RSA ")].concat(),
    );
    write(
        &h(".config/gh/hosts.yml"),
        format!("github.com:\n    oauth_token: {gho}\n").as_bytes(),
    );
    write(
        &h(".npmrc"),
        format!("//registry.npmjs.org/:_authToken={npm}\n").as_bytes(),
    );
    write(&h("proj/.env"), b"DEBUG=1\nAPP_SECRET=Tq4vN8mZx2Lp7Rk\n");
    write(&h("proj/.env.example"), b"APP_SECRET=\n");
    write(
        &h("proj/config/db.yml"),
        format!("url: postgres://app:{}@db/app\n", "Zq8vT2mLw9rK").as_bytes(),
    );
    write(&h(".bash_history"), b"mysql -p secret\n");
    // A repository whose remote carries a token (git's store is not walked; its config
    // is read).
    write(
        &h("proj/.git/config"),
        format!(
            "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://x-access-token:{ghs}@github.com/o/r.git\n"
        )
        .as_bytes(),
    );
    write(&h("proj/.git/objects/ab/credentials"), b"x\n");
    // Mentions and fixtures, not secrets.
    write(&h("proj/src/main.rs"), b"fn main() {}\n");
    write(
        &h("proj/src/tokens.rs"),
        b"// a GitHub token looks like ghp_0123456789abcdefghijABCDEFGHIJ012345\nconst HEADER: &str = \"-----BEGIN OPENSSH PRIVATE KEY\";\nfn url() -> &'static str { \"https://user:pass@host/\" }\n",
    );
    write(
        &h("proj/tests/fixtures/key.pem"),
        b"-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE KEY-----\n",
    );
    write(
        &h("proj/certs/ca.pem"),
        b"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n",
    );
    write(&h("proj/README.md"), b"see https://example.com\n");
    // Hidden from the call (masked): never reported.
    write(&h(".gnupg/private-keys-v1.d/x.key"), &pem(""));
    write(&h("vault/credentials"), b"x\n");
    // Under skipped directories: installed packages, a tagged cache, a virtual
    // environment of its own name.
    write(
        &h("proj/node_modules/pkg/.env"),
        b"API_TOKEN=Tq4vN8mZx2Lp7Rk\n",
    );
    write(
        &h("proj/target/CACHEDIR.TAG"),
        b"Signature: 8a477f597d28d172789f06886806bc55\n",
    );
    write(&h("proj/target/debug/credentials"), b"x\n");
    write(&h("proj/env/pyvenv.cfg"), b"home = /usr/bin\n");
    write(&h("proj/env/lib/python3/site/k.pem"), &pem(""));
    // Outside the home, reached by links from inside: followed (a call reaches them).
    write(&outside.join("credentials"), b"[x]\nkey = 1\n");
    write(&outside.join("dir/id_rsa"), &pem("RSA "));
    std::os::unix::fs::symlink(outside.join("credentials"), h("proj/linked-credentials")).unwrap();
    std::os::unix::fs::symlink(outside.join("dir"), h("proj/linked-dir")).unwrap();
    // A link back up inside (a loop if followed), and into the system.
    std::os::unix::fs::symlink(&home, h("proj/loop")).unwrap();
    std::os::unix::fs::symlink("/etc", h("proj/etc")).unwrap();
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
    big.extend_from_slice(format!(" {gho}\n").as_bytes());
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
fn finds_exactly_the_visible_secrets_and_never_blocks_or_loops() {
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
    let outside = std::fs::canonicalize(&h.outside).unwrap();
    let got: Vec<(String, Class)> = s
        .findings
        .iter()
        .map(|f| {
            let shown = match f.path.strip_prefix(&home) {
                Ok(r) => r.display().to_string(),
                Err(_) => format!(
                    "OUTSIDE/{}",
                    f.path.strip_prefix(&outside).unwrap().display()
                ),
            };
            (shown, f.class)
        })
        .collect();
    let want: Vec<(String, Class)> = [
        ("OUTSIDE/dir/id_rsa", Class::Key),
        (".aws/credentials", Class::Credentials),
        (".bash_history", Class::History),
        (".config/gh/hosts.yml", Class::Token),
        (".npmrc", Class::Token),
        (".ssh/id_ed25519", Class::Key),
        ("keys/deploy", Class::Key),
        ("proj/.env", Class::Env),
        ("proj/.git/config", Class::Credentials),
        ("proj/config/db.yml", Class::Credentials),
        ("proj/linked-credentials", Class::Credentials),
    ]
    .iter()
    .map(|(p, c)| (p.to_string(), *c))
    .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(got_sorted, want_sorted);
    let find = |end: &str| s.findings.iter().find(|f| f.path.ends_with(end)).unwrap();
    let gh = find("hosts.yml");
    assert_eq!(gh.host.as_deref(), Some("api.github.com"));
    assert_eq!(gh.hosts, ["api.github.com", "github.com"]);
    assert_eq!(find(".npmrc").hosts, ["registry.npmjs.org"]);
    assert_eq!(find(".git/config").hosts, ["api.github.com", "github.com"]);
    assert_eq!(find("db.yml").hosts, ["db"]);
    // A file found by its name is read too, for the hosts of its tokens.
    assert!(find(".aws/credentials").hosts.is_empty());
}

/// A credential helper's store that git config names, outside the walked trees.
#[test]
fn a_credential_stores_file_is_found_where_git_config_names_it() {
    let h = home();
    let store = h.outside.join("git-creds");
    write(
        &store,
        format!(
            "https://alice:{}@gitlab.corp.example\n",
            "Hk3Lp9Qw2Ez7Rt5Yu1Io"
        )
        .as_bytes(),
    );
    write(
        &h.home.join(".gitconfig"),
        format!(
            "[credential]\n\thelper = store --file {}\n",
            store.display()
        )
        .as_bytes(),
    );
    let p = Patterns::shipped().unwrap();
    let all = |_: &Path| true;
    let s = scan(std::slice::from_ref(&h.home), &all, &p, &Budget::default());
    let f = s
        .findings
        .iter()
        .find(|f| f.path == store)
        .unwrap_or_else(|| panic!("{:?}", s.findings));
    assert_eq!(f.hosts, ["gitlab.corp.example"]);
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
