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
    // The surface's answered masks (issue 15), from the state directory: after the config
    // (`surface_masks` in the JSON).
    let store = efr_surface::state::Store::for_home(&env.home);
    let masks = match store.read() {
        Ok(st) => st.masks(),
        Err(e) => {
            eprintln!("efr-sandbox: warning: the surface's answers: {e}");
            Vec::new()
        }
    };
    if args.json {
        let mut v = config.to_json();
        if let Some(o) = v.as_object_mut() {
            o.insert("surface_masks".into(), serde_json::json!(masks));
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", config.render_text());
        if !masks.is_empty() {
            println!(
                "\n# masked by the surface's answers ({})",
                store.file().display()
            );
            for m in &masks {
                println!("{m}");
            }
        }
    }
    // What the bus filter leaves out of the config's rules, or opens through allow_never.
    for w in efr_policy::bus::filter_rules(&config.bus).warnings() {
        eprintln!("efr-sandbox: warning: {w}");
    }
    Ok(())
}
