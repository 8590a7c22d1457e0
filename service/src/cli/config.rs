//! `efr-sandbox config`.

use clap::Args;
use efr_policy::config::{Config, Env};

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print the effective config as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `efr-sandbox config`: the effective config with the source of each value. A broken file
/// is an error (with its line and column) and a non-zero exit.
pub fn run(args: ConfigArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    let config = Config::load(&env)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&config.to_json())?);
    } else {
        print!("{}", config.render_text());
    }
    // What the bus filter leaves out of the config's rules, or opens through allow_never.
    for w in efr_policy::bus::filter_rules(&config.bus).warnings() {
        eprintln!("efr-sandbox: warning: {w}");
    }
    Ok(())
}
