//! Dev servers: a line that listens in the foreground of a call (unreachable from the host,
//! holding the call) is proposed as a job whose port is forwarded (`action.background`,
//! contained, no open network); a privileged port says why it needs the open network; a
//! package manager's script (`npm run dev`) is read from `package.json`; a subcommand that
//! does not serve (`vite build`, `flask routes`) is no `port` exit.

use efr_policy::classify::{ClassifyRequest, ClassifyResult, classify};
use efr_policy::context::Context;
use efr_sandbox_wire::{ExitKind, ExitRecord, Grant, Mode, Needs};

fn run_in(line: &str, project: &std::path::Path) -> ClassifyResult {
    let home = project.parent().unwrap();
    let ctx = Context::defaults(home);
    let mut req = ClassifyRequest::new(line, Some(project.into()), Mode::Auto);
    req.project_roots = vec![project.into()];
    classify(&req, &ctx)
}

fn port_exit(r: &ClassifyResult) -> Option<&ExitRecord> {
    r.exits.iter().find(|e| e.kind == ExitKind::Port)
}

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("p");
    std::fs::create_dir(&p).unwrap();
    (d, p)
}

/// A server of a line, as a job with its port forwarded: contained, no grant.
fn assert_job_with_forward(line: &str, project: &std::path::Path, port: u16) {
    let r = run_in(line, project);
    let e = port_exit(&r).unwrap_or_else(|| panic!("{line}: no port exit: {r:?}"));
    assert_eq!(e.facts.ports, vec![port], "{line}");
    assert!(e.action.background, "{line}: {e:?}");
    assert_eq!(e.needs, Needs::Contained { grants: vec![] }, "{line}");
    assert!(e.summary.contains("--background"), "{line}: {}", e.summary);
    assert!(
        !e.judgement.reasons.is_empty() && e.judgement.reasons[0].contains("forwards"),
        "{line}: {:?}",
        e.judgement.reasons
    );
}

#[test]
fn a_server_is_proposed_as_a_job_with_its_port_forwarded() {
    let (_d, p) = project();
    for (line, port) in [
        ("python3 -m http.server 8000 --bind 127.0.0.1", 8000),
        ("python3 -m http.server", 8000),
        ("vite", 5173),
        ("vite --port 3001", 3001),
        ("flask run", 5000),
        ("uvicorn app:app --port 8002", 8002),
        ("rails s -p 4000", 4000),
        ("php -S localhost:8001", 8001),
        ("jekyll serve", 4000),
        ("next dev", 3000),
        ("next start", 3000),
        ("ng serve", 4200),
        ("gatsby develop", 8000),
    ] {
        assert_job_with_forward(line, &p, port);
    }
}

#[test]
fn a_privileged_port_needs_the_open_network_and_says_why() {
    let (_d, p) = project();
    let r = run_in("python3 -m http.server 80", &p);
    let e = port_exit(&r).unwrap();
    assert!(!e.action.background);
    assert_eq!(
        e.needs,
        Needs::Contained {
            grants: vec![Grant::OpenNetwork]
        }
    );
    assert!(
        e.judgement.reasons.iter().any(|w| w.contains("below 1024")),
        "{:?}",
        e.judgement.reasons
    );
}

#[test]
fn a_package_managers_script_is_read_from_package_json() {
    let (_d, p) = project();
    std::fs::write(
        p.join("package.json"),
        r#"{"scripts": {"dev": "vite --port 5174", "serve": "python3 -m http.server 8080",
            "build": "vite build", "start": "node server.js"}}"#,
    )
    .unwrap();
    for line in [
        "npm run dev",
        "npm run-script dev",
        "pnpm dev",
        "yarn run dev",
        "bun dev",
    ] {
        assert_job_with_forward(line, &p, 5174);
    }
    assert_job_with_forward("pnpm serve", &p, 8080);
    // A script that does not serve, one efr cannot see into, and one that is not there.
    for line in ["npm run build", "npm start", "npm run nope", "bun test"] {
        let r = run_in(line, &p);
        assert!(port_exit(&r).is_none(), "{line}: {r:?}");
    }
    // No manifest, or one that does not read: the line is read without its script.
    std::fs::write(p.join("package.json"), "{not json").unwrap();
    assert!(port_exit(&run_in("npm run dev", &p)).is_none());
}

#[test]
fn subcommands_that_do_not_serve_are_no_port_exit() {
    let (_d, p) = project();
    for line in [
        "vite build",
        "vite optimize",
        "flask routes",
        "flask db upgrade",
    ] {
        let r = run_in(line, &p);
        assert!(port_exit(&r).is_none(), "{line}: {r:?}");
    }
}
