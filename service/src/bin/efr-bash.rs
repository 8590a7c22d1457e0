//! `efr-bash`: `efr-sandbox shell` as a single executable an agent can take as its shell.
//! It runs the `efr-sandbox` installed beside it (the same `cargo install` puts both in one
//! directory), named `efr-bash`, with the same words; `efr-sandbox` reads that name as
//! `shell`. Only the executable beside this one is taken, never one found on `PATH`.

use std::os::unix::process::CommandExt;
use std::process::ExitCode;

fn main() -> ExitCode {
    let beside = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map(|me| me.with_file_name("efr-sandbox"));
    let sandbox = match beside {
        Ok(p) if p.is_file() => p,
        Ok(p) => {
            eprintln!(
                "efr-bash: {} is missing: install efr-bash and efr-sandbox together (cargo install --path service)",
                p.display()
            );
            return ExitCode::from(125);
        }
        Err(e) => {
            eprintln!("efr-bash: cannot find its own executable: {e}");
            return ExitCode::from(125);
        }
    };
    let e = std::process::Command::new(&sandbox)
        .arg0("efr-bash")
        .args(std::env::args_os().skip(1))
        .exec();
    eprintln!("efr-bash: cannot run {}: {e}", sandbox.display());
    ExitCode::from(125)
}
