//! `efr-launch` for the integration tests (same code as the real binary).

fn main() {
    std::process::exit(efr_launcher::cli::main(std::env::args().skip(1).collect()));
}
