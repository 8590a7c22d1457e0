//! `efr-sandbox`: the efr sandbox service (`serve`) and the user's commands.

mod classify;
mod cli;
mod conn;
mod dispatch;
mod methods;
mod paths;
mod policy;
mod server;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("efr-sandbox: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
