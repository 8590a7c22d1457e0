//! `efr-sandbox completions SHELL` and `efr-sandbox man`: made at run time from the same clap
//! definition the parser uses, so that they describe the installed binary (a file made at
//! build time would need installing beside it, and `cargo install` installs binaries only).

use clap::CommandFactory;

use super::Cli;

/// `completions SHELL`: the shell's completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "efr-sandbox", &mut buf);
    out!("{}", String::from_utf8_lossy(&buf));
    Ok(())
}

/// `man [COMMAND]`: the manual page (roff) on stdout: efr-sandbox(1), which lists the
/// commands, or efr-sandbox-COMMAND(1) with the command's options.
pub fn man(command: Option<&str>) -> anyhow::Result<()> {
    let top = Cli::command();
    let cmd = match command {
        None => top,
        Some(name) => {
            let Some(sub) = top
                .get_subcommands()
                .find(|s| s.get_name() == name && !s.is_hide_set())
            else {
                let names: Vec<&str> = top
                    .get_subcommands()
                    .filter(|s| !s.is_hide_set())
                    .map(|s| s.get_name())
                    .collect();
                anyhow::bail!("no command {name:?}; the commands: {}", names.join(", "));
            };
            sub.clone()
                .display_name(format!("efr-sandbox-{name}"))
                .bin_name(format!("efr-sandbox {name}"))
        }
    };
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    out!("{}", String::from_utf8_lossy(&buf));
    Ok(())
}
