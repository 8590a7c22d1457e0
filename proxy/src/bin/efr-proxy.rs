//! `efr-proxy`: a standalone egress proxy for debugging and benchmarks (the same as
//! `efr-sandbox proxy`). `efr-proxy --help` lists the options.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = efr_proxy::run_standalone(args) {
        eprintln!("efr-proxy: {e}");
        std::process::exit(2);
    }
}
