use super::*;

/// GitHub's token format with its CRC32 (the detector checks it).
fn github_token(body: &str) -> String {
    efr_policy::secrets::checksummed_token("ghp", body).unwrap()
}

#[test]
fn the_shipped_patterns_load_and_each_has_a_reason() {
    let p = Patterns::shipped().unwrap();
    assert!(p.name_entries.len() >= 10);
}

#[test]
fn names_need_what_they_say() {
    let p = Patterns::shipped().unwrap();
    for (n, c) in [
        ("credentials", Class::Credentials),
        ("credentials.toml", Class::Credentials),
        ("id_ed25519", Class::Key),
        ("server.PEM", Class::Key),
        (".env.local", Class::Env),
        (".bash_history", Class::History),
        ("hosts_token.json", Class::Token),
        (".netrc", Class::Credentials),
    ] {
        assert_eq!(p.by_name(n).map(|m| m.0.class), Some(c), "{n}");
    }
    for n in [
        "id_ed25519.pub",
        ".env.sample",
        ".env.example",
        "README.md",
        "main.rs",
        "tokens.rs",
        "credentials.py",
        "token.md",
        "tokenizer.json",
    ] {
        assert_eq!(p.by_name(n), None, "{n}");
    }
    // A key's body made here: a literal one in this file would be asked about in a clone.
    let body: String = (0..300u32)
        .map(|i| char::from(b"AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/"[(i * 7 % 37) as usize]))
        .collect();
    let key =
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n");
    assert!(p.holds(Needs::PrivateKey, key.as_bytes(), 400));
    assert!(!p.holds(
        Needs::PrivateKey,
        b"-----BEGIN CERTIFICATE-----\nMIIB...",
        40
    ));
    assert!(p.holds(Needs::PrivateKey, &[0x30, 0x82, 0x04, 0xa4, 0xff, 0xfe], 6));
    assert!(p.holds(
        Needs::RandomWord,
        b"hf_Vq8Zc2mPx7LkT4rWn9bYd3sGh6JfQa1E\n",
        38
    ));
    assert!(!p.holds(Needs::RandomWord, b"{\"model\": \"bert-base-uncased\"}", 30));
    assert!(p.holds(
        Needs::Dotenv,
        b"DEBUG=1\nSTRIPE_SECRET_KEY=q8Zc2mPx7LkT4rW\n",
        40
    ));
    assert!(!p.holds(
        Needs::Dotenv,
        b"DEBUG=1\nAPI_KEY=\nPORT=8080\nSECRET_KEY=changeme\n",
        40
    ));
}

#[test]
fn contents_by_the_shapes() {
    let p = Patterns::shipped().unwrap();
    let gh = github_token("Vq8Zc2mPx7LkT4rWn9bYd3sGh6JfQa");
    let m = p
        .by_content(format!("github.com:\n  oauth_token: {gh}\n").as_bytes())
        .unwrap();
    assert_eq!(
        (m.class, m.host.as_deref(), m.pattern.as_str()),
        (Class::Token, Some("api.github.com"), "shape:github")
    );
    let npmrc = format!(
        "registry=https://r.example/\n//r.example/:_authToken={}\n",
        "Vq8Zc2mPx7LkT4rWn9bYd3sG"
    );
    assert_eq!(p.hosts(npmrc.as_bytes()), ["r.example"]);
    assert_eq!(
        p.hosts(
            format!(
                "//R.Example:8443/npm/:_authToken={}\n//registry.npmjs.org/:_authToken={}\ngh: {gh}\n",
                "Vq8Zc2mPx7LkT4rWn9bYd3sG", "Hk3Lp9Qw2Ez7Rt5Yu1Io8Pa"
            )
            .as_bytes()
        ),
        ["api.github.com", "github.com", "r.example", "registry.npmjs.org"]
    );
    let url = p
        .by_content(
            format!(
                "DATABASE=postgres://app:{}@db.internal/app\n",
                "Zq8vT2mLw9rK"
            )
            .as_bytes(),
        )
        .unwrap();
    assert_eq!(url.class, Class::Credentials);
    for clean in [
        &b"fn main() { println!(\"hello\"); }\n"[..],
        b"see https://example.com/path for more",
        b"-----BEGIN CERTIFICATE-----\nMIIB...",
        b"let t = \"ghp_0123456789abcdefghijABCDEFGHIJ012345\"; // a test token",
        b"AKIAIOSFODNN7EXAMPLE is an id",
        b"//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
        b"_authToken=x",
        b"",
    ] {
        assert_eq!(
            p.by_content(clean),
            None,
            "{}",
            String::from_utf8_lossy(clean)
        );
    }
}

/// The prefilter (the shapes' patterns as one regex set) finds every place the shapes'
/// own matcher does, on the texts of the detector's tests and around them.
#[test]
fn the_prefilter_agrees_with_the_shapes() {
    let p = Patterns::shipped().unwrap();
    let gh = github_token("Vq8Zc2mPx7LkT4rWn9bYd3sGh6JfQa");
    for text in [
        gh.as_str(),
        "x=ghp_aaaa",
        "https://TOKEN@pkgs.dev.azure.com/",
        "é-----BEGIN PRIVATE KEY-----",
        "AKIAIOSFODNN7EXAMPLE_",
        "_AKIAIOSFODNN7EXAMPLE",
        "wordAKIAIOSFODNN7EXAMPLE",
        "\u{e9}AKIAIOSFODNN7EXAMPLE",
        "PrivateKey = abc",
        "sk-ant-aaaaaaaaaaaaaaaaaaaaaaaaaa sk-aaaaaaaaaaaaaaaaaaaaaa",
    ] {
        for (i, shape) in p.shapes.all().iter().enumerate() {
            let exact = shape.compiled.found_in(text);
            let pre = p.prefilter.matches(text.as_bytes()).matched(i);
            assert_eq!(exact, pre, "{} on {text:?}", shape.name);
        }
    }
}

#[test]
fn skips_by_name_anywhere_and_by_path_at_the_end() {
    let p = Patterns::shipped().unwrap();
    assert!(p.skips_dir(&["home", "u", "app", "node_modules"]));
    assert!(p.skips_dir(&["home", "u", ".cargo", "registry"]));
    assert!(p.skips_dir(&["home", "u", "venv", "lib", "python3.11", "site-packages"]));
    assert!(!p.skips_dir(&["home", "u", "registry"]));
    assert!(!p.skips_dir(&["home", "u", ".cargo"]));
    assert!(!p.skips_dir(&[]));
}

#[test]
fn bad_patterns_are_errors_that_say_which() {
    for (text, want) in [
        (
            "[[name]]\nglob = \"[\"\nclass = \"key\"\nreason = \"x\"\n",
            "name glob",
        ),
        (
            "[[name]]\nglob = \"x\"\nclass = \"key\"\nreason = \" \"\n",
            "empty reason",
        ),
        (
            "[[name]]\nglob = \"x\"\nclass = \"session_bus\"\nreason = \"x\"\n",
            "unknown variant",
        ),
        (
            "[[name]]\nglob = \"x\"\nclass = \"key\"\nneeds = \"magic\"\nreason = \"x\"\n",
            "unknown variant",
        ),
        ("[[skip]]\nreason = \"x\"\n", "exactly one"),
        ("[[nme]]\n", "unknown field"),
        ("[[token]]\nregex = \"x\"\n", "unknown field"),
    ] {
        let e = Patterns::parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}
