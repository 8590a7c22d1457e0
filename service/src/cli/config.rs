//! `efr-sandbox config`.

use clap::Args;
use efr_policy::config::{Config, Env};

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print the effective config as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write a commented starter config file (every setting commented out) where the
    /// sandbox reads it, `$XDG_CONFIG_HOME/efr/config.toml` or `~/.config/efr/config.toml`;
    /// a file already there is left as it is (an error).
    #[arg(long, conflicts_with = "json")]
    pub init: bool,
}

/// The starter file of `config --init`: every setting commented out, the defaults in force.
pub const STARTER: &str = include_str!("config-starter.toml");

/// `config --init`: writes [`STARTER`] at `file`, never over a file (or link) already there.
fn init(file: &std::path::Path) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    // create_new: O_EXCL, which also refuses a dangling link in the file's place.
    let mut f = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => anyhow::bail!(
            "{} exists already: not overwritten (edit it, or move it away first)",
            file.display()
        ),
        Err(e) => anyhow::bail!("cannot create {}: {e}", file.display()),
    };
    f.write_all(STARTER.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))?;
    eprintln!(
        "efr-sandbox: wrote {}: every setting in it is commented out",
        file.display()
    );
    Ok(())
}

/// `efr-sandbox config`: the effective config with the source of each value. A broken file
/// is an error (with its line and column) and a non-zero exit.
pub fn run(args: ConfigArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    if args.init {
        return init(&env.config_file());
    }
    let config = Config::load(&env)?;
    // The surface's answered masks (the user's answers to its questions), from the state
    // directory: after the config (`surface_masks` in the JSON).
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
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let text = config.render_text();
        match &config.file {
            // With no file, where one would be read, after the first line.
            None => {
                let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
                outln!("{first}");
                outln!(
                    "# your config file would be {} (`efr-sandbox config --init` writes a commented starter there)",
                    env.config_file().display()
                );
                out!("{rest}");
            }
            Some(_) => out!("{text}"),
        }
        if !masks.is_empty() {
            outln!(
                "\n# masked by the surface's answers ({})",
                store.file().display()
            );
            for m in &masks {
                outln!("{m}");
            }
        }
    }
    // What the bus filter leaves out of the config's rules, or opens through allow_never.
    for w in efr_policy::bus::filter_rules(&config.bus).warnings() {
        eprintln!("efr-sandbox: warning: {w}");
    }
    Ok(())
}
