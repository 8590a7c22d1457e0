//! `efr-probe inside ...`: the self-tests run inside a contained call (see efr_probe::inside).

fn main() {
    std::process::exit(efr_probe::inside::main(std::env::args().skip(1).collect()));
}
