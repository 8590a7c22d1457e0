//! `efr-launch`: runs one shell line contained or unsandboxed, from a plan.
//!
//! ```text
//! efr-launch (--plan FILE | --plan-fd N) [--status-fd N] [--caller-pid PID]
//! efr-launch --inner SPECFD REPORTFD      (inside bubblewrap; not for direct use)
//! ```

fn main() {
    std::process::exit(efr_launcher::cli::main(std::env::args().skip(1).collect()));
}
