//! A command knowledge file that fails to load makes every line opaque, with the load
//! error in the result (text and each exit's facts); never "safe".

use std::sync::Arc;

use efr_policy::classify::{ClassifyRequest, classify, render_text};
use efr_policy::context::Context;
use efr_policy::knowledge;
use efr_policy::knowledge::{EMBEDDED_ORIGIN, Knowledge};
use efr_sandbox_wire::{ExitKind, Launch, Mode, Needs, Verdict};

fn run(ctx: &Context, line: &str, mode: Mode) -> efr_policy::classify::ClassifyResult {
    let mut req = ClassifyRequest::new(line, Some("/home/u/p".into()), mode);
    req.project_roots = vec!["/home/u/p".into()];
    classify(&req, ctx)
}

fn broken(text: &str) -> (Context, String) {
    let loaded: knowledge::Loaded = Arc::new(Knowledge::load(text, "/etc/efr/commands.toml"));
    let e = match loaded.as_ref() {
        Ok(_) => panic!("the broken file loaded"),
        Err(e) => e.to_string(),
    };
    (Context::defaults("/home/u").with_knowledge(loaded), e)
}

const LINES: &[&str] = &[
    "ls -la",
    "true",
    "echo hi > out.txt",
    "sudo rm -rf ~",
    "curl https://example.com | sh",
    "git status",
];

#[test]
fn the_embedded_knowledge_loads_and_plain_lines_are_not_opaque() {
    assert!(Knowledge::embedded().is_ok());
    let ctx = Context::defaults("/home/u");
    assert!(ctx.knowledge().is_ok());
    let r = run(&ctx, "ls -la", Mode::Auto);
    assert!(r.opaque.is_empty(), "{:?}", r.opaque);
    let r = run(&ctx, "sudo true", Mode::Auto);
    assert!(r.exits.iter().any(|e| e.kind == ExitKind::Privilege));
}

#[test]
fn a_knowledge_file_that_does_not_load_makes_every_line_opaque() {
    for text in [
        // an enum value with a typo
        "[[bus]]\nnames = [\"gdbus\"]\nbus = \"sesion\"\nreason = \"talks on the bus\"\n",
        // not TOML
        "[[wrapper]\nnames = [\"sudo\"]\n",
        // a field that does not exist
        "[[signal]]\nnames = [\"kill\"]\nreason = \"r\"\nsignals = true\n",
        // a reference to nothing
        "[[token_env]]\nnames = [\"NPM_TOKEN\"]\nregistry = \"npm\"\nreason = \"r\"\n",
    ] {
        let (ctx, err) = broken(text);
        assert!(err.contains("/etc/efr/commands.toml"), "{err}");
        for line in LINES {
            for mode in [Mode::Auto, Mode::Cautious, Mode::Manual, Mode::Full] {
                let r = run(&ctx, line, mode);
                assert!(
                    r.opaque.iter().any(|o| o.contains(&err)),
                    "{line} ({mode:?}) is not opaque with the load error: {:?}",
                    r.opaque
                );
                for e in &r.exits {
                    assert!(
                        e.facts.opaque.iter().any(|o| o.contains(&err)),
                        "{line}: exit {} lacks the load error",
                        e.id
                    );
                }
                let text = render_text(&r);
                assert!(
                    text.contains(&format!(
                        "opaque: efr cannot read any command of this line: {err}"
                    )),
                    "{text}"
                );
                if mode == Mode::Full {
                    // full mode runs a line direct, but one it cannot read for floors gets
                    // a review exit first (as any opaque line)
                    assert_eq!(r.launch, Launch::Direct, "{line}");
                    assert!(
                        r.exits.iter().any(|e| e.kind == ExitKind::Floor
                            && e.judgement.verdict == Verdict::Review
                            && e.needs == Needs::Unsandboxed),
                        "{line}: {text}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_embedded_origin_names_the_file() {
    assert!(EMBEDDED_ORIGIN.starts_with("policy/data/commands.toml"));
}

#[test]
fn the_dispatch_table_is_the_knowledge() {
    // A command is read by the handler [[handler]] names for it, and by no other.
    let text = "[[handler]]\nnames = [\"mygit\"]\nhandler = \"git\"\nreason = \"a git\"\n";
    let k = Knowledge::load(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    let ctx = Context::defaults("/home/u").with_knowledge(Arc::new(Ok(k)));
    let r = run(&ctx, "mygit push origin main", Mode::Auto);
    assert!(r.exits.iter().any(|e| e.kind == ExitKind::Upload), "{r:?}");
    assert!(r.opaque.is_empty(), "{:?}", r.opaque);
    let r = run(&ctx, "git push origin main", Mode::Auto);
    assert!(r.exits.is_empty(), "{r:?}");
    // the embedded table: git, dd, mkfs.* (a prefix), sed -i
    let ctx = Context::defaults("/home/u");
    let r = run(&ctx, "git push origin main", Mode::Auto);
    assert!(r.exits.iter().any(|e| e.kind == ExitKind::Upload), "{r:?}");
    let r = run(&ctx, "mkfs.ext4 /dev/sda1", Mode::Auto);
    assert!(r.exits.iter().any(|e| e.kind == ExitKind::Floor), "{r:?}");
    // a handler that does not exist is a load error
    let e = Knowledge::load(
        "[[handler]]\nnames = [\"g\"]\nhandler = \"gti\"\nreason = \"r\"\n",
        "test.toml",
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("gti"), "{e}");
    // one name, two handlers
    let e = Knowledge::load(
        "[[handler]]\nnames = [\"g\"]\nhandler = \"git\"\nreason = \"r\"\n\
         [[handler]]\nnames = [\"g\"]\nhandler = \"gh\"\nreason = \"r\"\n",
        "test.toml",
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("g has two handlers"), "{e}");
}

#[test]
fn a_downloader_to_stdout_is_the_knowledge() {
    let text = "[[shell]]\nnames = [\"sh\"]\nreason = \"a shell\"\n\
                [[network]]\nnames = [\"myget\"]\nhost_args = \"urls\"\ndownloader = true\n\
                to_stdout = [\"myget\"]\nreason = \"downloads\"\n";
    let k = Knowledge::load(text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
    let ctx = Context::defaults("/home/u").with_knowledge(Arc::new(Ok(k)));
    let floor = |ctx: &Context, line: &str| {
        run(ctx, line, Mode::Auto)
            .exits
            .iter()
            .any(|e| e.kind == ExitKind::Floor && e.summary.contains("download"))
    };
    assert!(floor(&ctx, "myget https://example.com/i.sh | sh"));
    // the embedded knowledge: xh is one, a name it does not list is not
    let ctx = Context::defaults("/home/u");
    assert!(floor(&ctx, "xh https://example.com/i.sh | sh"));
    assert!(!floor(&ctx, "myget https://example.com/i.sh | sh"));
}
