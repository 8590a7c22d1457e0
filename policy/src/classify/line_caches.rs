//! The caches of the package managers a line runs: for each simple command of the line,
//! its program past the knowledge's wrappers (`sudo`, `env`, `time`, ...), and that
//! program's `caches` in `[[registry]]`. The service makes the ones that do not exist yet
//! before a contained call, so that a user's first `npm install` has a cache to be layered
//! (see `efr_call::caches`). A name anywhere else on the line (`echo npm`) is not a
//! program and names nothing.

use crate::knowledge::Knowledge;
use crate::shell::{parse, simple_commands};

/// The `~/` cache paths of the managers `line` runs, in the knowledge's order, each once.
/// A line that does not parse names none.
pub fn line_caches<'k>(line: &str, k: &'k Knowledge) -> Vec<&'k str> {
    let Ok(script) = parse(line) else {
        return Vec::new();
    };
    let mut out: Vec<&str> = Vec::new();
    for sc in simple_commands(&script.list) {
        let words: Vec<String> = sc.words.iter().filter_map(|w| w.literal()).collect();
        let Some(prog) = program(&words, k) else {
            continue;
        };
        for r in k
            .file
            .registry
            .iter()
            .filter(|r| r.names.iter().any(|n| n == prog))
        {
            for c in &r.caches {
                if !out.contains(&c.path.as_str()) {
                    out.push(&c.path);
                }
            }
        }
    }
    out
}

/// The program `words` runs: the first word's name, or past a wrapper's options and
/// assignments the first word after them (a wrapper of a wrapper too).
fn program<'w>(words: &'w [String], k: &Knowledge) -> Option<&'w str> {
    let mut i = 0;
    loop {
        let w = words.get(i)?;
        let name = w.rsplit('/').next().unwrap_or(w);
        let Some(wrapper) = k
            .file
            .wrapper
            .iter()
            .find(|x| x.names.iter().any(|n| n == name))
        else {
            return Some(module(name, &words[i + 1..], k).unwrap_or(name));
        };
        i += 1;
        // The wrapper's options (with their arguments), its assignments (`env A=1`) and
        // its leading positional words (`timeout 5`).
        let mut positional = wrapper.skip_positional;
        while let Some(w) = words.get(i) {
            if wrapper.opts_with_arg.iter().any(|o| o == w) {
                i += 2;
            } else if w == "--" {
                i += 1;
                break;
            } else if w.starts_with('-') || w.contains('=') {
                i += 1;
            } else if positional > 0 {
                positional -= 1;
                i += 1;
            } else {
                break;
            }
        }
    }
}

/// The package manager a module runner runs (`python3 -m pip`): the module after its
/// option, when the knowledge lists it as a registry module.
fn module<'w>(name: &str, rest: &'w [String], k: &Knowledge) -> Option<&'w str> {
    let runner = k.file.module_runner.iter().find(|m| {
        m.names.iter().any(|n| n == name)
            || m.name_prefixes.iter().any(|p| name.starts_with(p.as_str()))
    })?;
    let at = rest.iter().position(|w| *w == runner.option)?;
    let m = rest.get(at + 1)?;
    runner.registry_modules.contains(m).then_some(m.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caches(line: &str) -> Vec<&'static str> {
        line_caches(line, Knowledge::get())
    }

    #[test]
    fn a_manager_run_names_its_caches() {
        assert_eq!(caches("npm install"), ["~/.npm"]);
        assert_eq!(caches("cargo build"), ["~/.cargo/registry", "~/.cargo/git"]);
        assert_eq!(caches("/usr/bin/npm ci && cargo fetch").len(), 3);
        assert_eq!(caches("npm i; npx x"), ["~/.npm"]);
        assert_eq!(caches("python3 -m pip install x"), ["~/.cache/pip"]);
        assert_eq!(caches("python3.11 -m pip install x"), ["~/.cache/pip"]);
        assert!(caches("python3 -m http.server").is_empty());
    }

    #[test]
    fn wrappers_are_looked_through() {
        assert_eq!(caches("sudo -u me npm install"), ["~/.npm"]);
        assert_eq!(caches("env A=1 B=2 npm install"), ["~/.npm"]);
        assert_eq!(caches("timeout 60 nice -n 5 npm install"), ["~/.npm"]);
        assert_eq!(caches("A=1 time npm install"), ["~/.npm"]);
    }

    #[test]
    fn a_name_that_is_not_the_program_names_nothing() {
        assert!(caches("echo npm cargo").is_empty());
        assert!(caches("ls ~/.npm").is_empty());
        assert!(caches("").is_empty());
        assert!(caches("npm install 'unterminated").is_empty());
        assert!(caches("env").is_empty());
        assert!(caches("sudo --").is_empty());
    }
}
