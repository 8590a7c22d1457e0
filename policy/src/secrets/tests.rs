use super::*;

/// A token of GitHub's or npm's format with its CRC32, from a 30-character body.
pub(crate) fn checksummed(prefix: &str, body: &str) -> String {
    checksummed_token(prefix, body).unwrap()
}

/// A random-looking run of `n` characters of `alphabet` (a fixed generator: the tests
/// need no randomness, only text no placeholder rule takes for one).
fn rnd(alphabet: &str, n: usize, seed: u64) -> String {
    let a = alphabet.as_bytes();
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            a[usize::try_from(x % a.len() as u64).unwrap()] as char
        })
        .collect()
}

const B62: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn names(text: &str) -> Vec<(String, Vec<String>)> {
    let s = Shapes::shipped();
    s.find(text, None)
        .into_iter()
        .map(|h| (s.all()[h.shape].name.clone(), h.hosts))
        .collect()
}

#[test]
fn the_shipped_shapes_load_each_with_a_reason_and_a_source() {
    let s = Shapes::shipped();
    assert!(s.all().len() >= 20);
    for shape in s.all() {
        assert!(
            !shape.reason.is_empty() && shape.source.starts_with("https://"),
            "{}",
            shape.name
        );
    }
    assert!(matches!(
        Shapes::parse(
            "[[shape]]\nname = \"x\"\npattern = \"a(\"\nclass = \"token\"\ncheck = \"random\"\nreason = \"r\"\nsource = \"s\"\n"
        ),
        Err(ShapesError::Pattern { .. })
    ));
    assert!(matches!(
        Shapes::parse(
            "[[shape]]\nname = \"x\"\npattern = \"ab\"\nclass = \"token\"\ncheck = \"random\"\nreason = \"\"\nsource = \"s\"\n"
        ),
        Err(ShapesError::Undocumented(_))
    ));
}

#[test]
fn every_shape_is_found_and_names_its_hosts() {
    let gh = checksummed("ghp", &rnd(B62, 30, 1));
    let npm = checksummed("npm", &rnd(B62, 30, 2));
    let key_body = rnd(B62, 300, 3);
    let pem = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
        &key_body[..150],
        &key_body[150..]
    );
    let gcp = format!(
        "{{\"type\": \"service_account\", \"private_key_id\": \"ab\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n\"}}",
        key_body
    );
    let cases: Vec<(String, &str, Vec<&str>)> = vec![
        (
            format!("token = {gh}"),
            "github",
            vec!["api.github.com", "github.com"],
        ),
        (
            format!("GITHUB=github_pat_{}", rnd(B62, 82, 4)),
            "github_fine_grained",
            vec!["api.github.com", "github.com"],
        ),
        (
            format!("gitlab: glpat-{}", rnd(B62, 20, 5)),
            "gitlab",
            vec!["gitlab.com"],
        ),
        (
            format!("xoxb-{}", rnd(B62, 24, 6)),
            "slack",
            vec!["slack.com"],
        ),
        (
            format!("ANTHROPIC sk-ant-api03-{}", rnd(B62, 40, 7)),
            "anthropic",
            vec!["api.anthropic.com"],
        ),
        (
            format!("key: sk-proj-{}", rnd(B62, 40, 8)),
            "openai",
            vec!["api.openai.com"],
        ),
        (
            format!("STRIPE=sk_live_{}", rnd(B62, 24, 9)),
            "stripe",
            vec!["api.stripe.com"],
        ),
        (
            format!("id AKIA{}", rnd("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 10)),
            "aws_access_key_id",
            vec![],
        ),
        (
            format!("maps: AIza{}", rnd(B62, 35, 11)),
            "google_api_key",
            vec![],
        ),
        (
            format!("//registry.npmjs.org/:_authToken={npm}"),
            "npm",
            vec!["registry.npmjs.org"],
        ),
        (
            format!("HF_TOKEN=hf_{}", rnd(B62, 34, 12)),
            "huggingface",
            vec!["huggingface.co"],
        ),
        (
            format!(
                "auth: eyJ{}.{}.{}",
                rnd(B62, 20, 13),
                rnd(B62, 30, 14),
                rnd(B62, 43, 15)
            ),
            "jwt",
            vec![],
        ),
        (pem.clone(), "private_key", vec![]),
        (gcp, "private_key", vec![]),
        (
            format!(
                "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\n{}\nPrivate-Lines: 1\n{}\n",
                rnd(B62, 68, 16),
                rnd(B62, 44, 17)
            ),
            "putty",
            vec![],
        ),
        (
            format!(
                "# created: 2024\nAGE-SECRET-KEY-1{}\n",
                rnd("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 18)
            ),
            "age",
            vec![],
        ),
        (
            format!(
                "[Interface]\nPrivateKey = {}=\nAddress = 10.0.0.2/32\n",
                rnd(B62, 43, 19)
            ),
            "wireguard",
            vec![],
        ),
        (
            format!(
                "index-url = https://{}:@repo.fury.io/acme/",
                rnd(B62, 20, 20)
            ),
            "url_userinfo",
            vec!["repo.fury.io"],
        ),
        (
            format!(
                "PIP_EXTRA_INDEX_URL=https://{}@pkgs.dev.azure.com/org/_packaging/f/pypi/simple/",
                rnd(B62, 52, 21)
            ),
            "url_userinfo",
            vec!["pkgs.dev.azure.com"],
        ),
        (
            format!(
                "DATABASE_URL=postgres://app:{}@db.internal:5432/app",
                rnd(B62, 12, 27)
            ),
            "url_userinfo",
            vec!["db.internal"],
        ),
        (
            format!(
                "registry=https://npm.corp.example/\n_authToken={}\n",
                rnd(B62, 36, 22)
            ),
            "npmrc_auth",
            vec!["npm.corp.example"],
        ),
        (
            format!("//npm.pkg.github.com/:_authToken={}\n", rnd(B62, 40, 23)),
            "npmrc_auth",
            vec!["npm.pkg.github.com"],
        ),
        (
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://k8s.corp.example:6443\n  name: c\nusers:\n- name: u\n  user:\n    token: {}\n",
                rnd(B62, 40, 24)
            ),
            "kube_token",
            vec!["k8s.corp.example"],
        ),
        (
            format!(
                "kind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\nusers:\n- user:\n    client-key-data: {}\n",
                rnd(B62, 80, 25)
            ),
            "kube_client_key",
            vec!["10.0.0.1"],
        ),
        (
            format!(
                "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {}\n",
                rnd(B62, 40, 26)
            ),
            "git_extraheader",
            vec!["github.com"],
        ),
    ];
    for (text, shape, hosts) in cases {
        let got = names(&text);
        assert!(
            got.iter().any(|(n, h)| n == shape && *h == hosts),
            "{shape} {hosts:?} in {text:?}: {got:?}"
        );
    }
}

#[test]
fn mentions_and_fixtures_are_not_secrets() {
    for text in [
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "ghp_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hI6",
        "AKIAIOSFODNN7EXAMPLE",
        "glpat-xxxxxxxxxxxxxxxxxxxx",
        "sk-your-api-key-here-xxxxxxxxxxxx",
        "sk_live_0000000000000000",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE KEY-----",
        "b\"-----BEGIN OPENSSH PRIVATE KEY\"",
        "header = \"-----BEGIN PRIVATE KEY-----\"",
        "https://user:pass@host/",
        "postgres://app:hunter2@db.internal/app",
        "postgres://postgres:postgres@localhost:5432/db",
        "https://${USER}:${PASSWORD}@repo.example/",
        "ssh://git@github.com/org/repo.git",
        "https://git@github.com/org/repo.git",
        "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
        "_authToken=x",
        "hf_0000000000000000000000000000000000",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "the docs say: token: abcdefghijklmnopqrstuvwxyz",
        "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
        "fn main() { let url = \"https://example.com/path\"; }",
    ] {
        assert_eq!(names(text), vec![], "{text}");
    }
}

#[test]
fn a_kept_variable_counts_on_its_shape() {
    let s = Shapes::shipped();
    assert_eq!(
        s.value_hosts("https://proxy.golang.org,direct"),
        Vec::<String>::new()
    );
    assert_eq!(
        s.value_hosts("https://user:pw@goproxy.corp.example,direct"),
        ["goproxy.corp.example"]
    );
    assert_eq!(
        s.value_hosts("https://TOKEN@pkgs.dev.azure.com/org/_packaging/f/pypi/simple/"),
        ["pkgs.dev.azure.com"]
    );
    assert_eq!(
        s.value_hosts("x ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ["api.github.com", "github.com"]
    );
    // The environment filter's patterns: every shape but the files' own.
    let env: Vec<&str> = s.env_patterns().map(|e| e.name.as_str()).collect();
    assert!(env.contains(&"url_userinfo") && env.contains(&"npm") && !env.contains(&"kube_token"));
}

#[test]
fn crc32_of_githubs_format() {
    let t = checksummed("ghp", &rnd(B62, 30, 99));
    assert!(crc32_ok(&t));
    let mut bad = t.clone().into_bytes();
    let last = bad.len() - 1;
    bad[last] = if bad[last] == b'A' { b'B' } else { b'A' };
    assert!(!crc32_ok(std::str::from_utf8(&bad).unwrap()));
    assert!(!crc32_ok("ghp_short"));
    assert_eq!(literal_prefix("gh[pousr]_[A-Za-z0-9]{36}"), 2);
    assert_eq!(literal_prefix("sk-ant-[A-Za-z0-9_-]{20,}"), 7);
    assert_eq!(literal_prefix("PrivateKey *= *[A-Za-z0-9+/]{43}="), 10);
    assert_eq!(literal_prefix("eyJ[A-Za-z0-9_-]{8,}\\.x"), 3);
}
