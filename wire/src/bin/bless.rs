//! Re-blesses the frozen fixtures and the schema on purpose:
//! `cargo run -p efr-sandbox-wire --bin efr-wire-bless`. Review the diff, then add a line
//! to the changelog of `docs/protocol.md`.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("fixtures/v1");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("efr-wire-bless: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let mut written = 0;
    for f in efr_sandbox_wire::fixtures::all() {
        let path = dir.join(f.name);
        if let Err(e) = std::fs::write(&path, efr_sandbox_wire::fixtures::render(&f.value)) {
            eprintln!("efr-wire-bless: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        written += 1;
    }
    let schema = root.join("../docs/sandbox.schema.json");
    if let Err(e) = std::fs::write(&schema, efr_sandbox_wire::schema::render()) {
        eprintln!("efr-wire-bless: cannot write {}: {e}", schema.display());
        return ExitCode::FAILURE;
    }
    println!(
        "wrote {written} fixtures to {} and {}",
        dir.display(),
        schema.display()
    );
    ExitCode::SUCCESS
}
