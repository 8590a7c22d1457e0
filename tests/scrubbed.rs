//! Settings files that also hold a token are shown to a contained call with the secret
//! values removed (the settings must work inside, the token must not be read): a generated copy bound read-only over the masked path, on
//! both backends, so the registry, `cafile` and `proxy` settings still apply inside.

use std::path::PathBuf;

use efr_launcher::api::BackendChoice;
use efr_launcher::plan::PlanCheck;
use efr_sandbox_tests::common::{Fixture, SECRET, backends, run_plan};

fn write(p: &str, s: &str) {
    if let Some(d) = std::path::Path::new(p).parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, s).unwrap();
}

const NPMRC: &str = "registry=https://npm.corp.example/\ncafile=/etc/ssl/certs/corp.pem\nproxy=http://proxy.corp.example:3128/\n//npm.corp.example/:_authToken=TOPSECRET-efr-escape\n";

fn suite(backend: BackendChoice) {
    let fx = Fixture::new();
    let h = &fx.home;
    write(&format!("{h}/.npmrc"), NPMRC);
    write(
        &format!("{h}/.yarnrc.yml"),
        &format!("npmRegistryServer: \"https://yarn.corp.example\"\nnpmAuthToken: \"{SECRET}\"\n"),
    );
    // Not masked by default; masked and shown scrubbed because it holds a token.
    write(
        &format!("{h}/.cargo/config.toml"),
        &format!(
            "[source.crates-io]\nreplace-with = \"corp\"\n[source.corp]\nregistry = \"sparse+https://crates.corp.example/index/\"\n[registry]\ntoken = \"{SECRET}\"\n"
        ),
    );
    write(
        &format!("{h}/.config/pip/pip.conf"),
        &format!("[global]\nindex-url = https://bob:{SECRET}@pypi.corp.example/simple\n"),
    );
    let mut r = fx.request(
        "cat ~/.npmrc; echo ---; cat ~/.yarnrc.yml; echo ---; cat ~/.cargo/config.toml; echo ---; \
         cat ~/.config/pip/pip.conf; echo ---; \
         (echo x >> ~/.npmrc) 2>/dev/null && echo WROTE-NPMRC; echo end",
        backend,
    );
    let copies = efr_policy::tokens::scrubbed_copies(&PathBuf::from(h), &mut r.masks);
    r.scrubbed = copies.into_iter().map(Into::into).collect();
    assert_eq!(r.scrubbed.len(), 4, "{:?}", r.scrubbed);
    let plan = r;
    let ran = run_plan(&plan, None);
    let out = ran.all_output();
    assert!(ran.status.success(), "{backend:?}: {out}");
    assert!(
        !out.contains(SECRET),
        "{backend:?}: a secret reached the call: {out}"
    );
    for want in [
        "registry=https://npm.corp.example/",
        "cafile=/etc/ssl/certs/corp.pem",
        "proxy=http://proxy.corp.example:3128/",
        "npmRegistryServer: \"https://yarn.corp.example\"",
        "replace-with = \"corp\"",
        "sparse+https://crates.corp.example/index/",
        "index-url = https://bob@pypi.corp.example/simple",
        "end",
    ] {
        assert!(out.contains(want), "{backend:?}: {want:?} not in {out}");
    }
    assert!(
        !out.contains("WROTE-NPMRC"),
        "{backend:?}: the copy is writable: {out}"
    );
    // The host's files are as they were.
    assert_eq!(
        std::fs::read_to_string(format!("{h}/.npmrc")).unwrap(),
        NPMRC
    );
}

#[test]
fn settings_files_are_shown_without_their_secrets() {
    for b in backends() {
        suite(b);
    }
}

/// Without the copies, the same files are masked: empty (what a plan without `scrubbed`
/// shows, so the test above cannot pass on a mask alone).
#[test]
fn without_a_copy_the_mask_is_empty() {
    for backend in backends() {
        let fx = Fixture::new();
        write(&format!("{}/.npmrc", fx.home), NPMRC);
        let r = fx.request("wc -c < ~/.npmrc", backend);
        let ran = run_plan(&r, None);
        assert_eq!(ran.stdout.trim(), "0", "{backend:?}: {}", ran.all_output());
    }
}

/// A plan whose copy names a path that is not one of its masks is refused.
#[test]
fn a_copy_must_be_a_mask() {
    let fx = Fixture::new();
    let mut r = fx.request("true", BackendChoice::Native);
    r.scrubbed = vec![(format!("{}/README", fx.proj), "x".to_string()).into()];
    let e = r.validate().unwrap_err().to_string();
    assert!(e.contains("not a mask of the plan"), "{e}");
}
