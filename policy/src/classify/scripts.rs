//! Scripts a package manager runs from the project's manifest: `npm run dev`, `npm start`,
//! `pnpm dev`, `yarn serve` run the line of `package.json`'s `scripts` of that name, with
//! `sh -c`; the walker reads that line as it reads a `sh -c` string, so a script that
//! starts a dev server (`vite`, `next dev`) is a `port` exit like the server typed as it is
//! (`[[script_runner]]` of commands.toml).

use super::walk::{Arg, Cmd, Env, Pc, Walker};
use super::words::positional;

/// The most bytes of a `package.json` read (a manifest is a few KiB; a larger one is not
/// read, and the line is read without its script).
const MAX_MANIFEST: u64 = 1 << 20;

impl Walker<'_> {
    /// `[[script_runner]]`: the script a package manager runs, read as a line.
    pub(super) fn script_runner(&mut self, name: &str, rest: &[Arg], env: &Env, pc: Pc, cmd: &Cmd) {
        let k = self.k;
        let Some(r) = k
            .file
            .script_runner
            .iter()
            .find(|r| r.names.iter().any(|n| n == name))
        else {
            return;
        };
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        let pos = positional(&words, &[]);
        let script = match pos.first() {
            Some(sub) if r.run.iter().any(|x| x == sub) => pos.get(1).copied(),
            Some(sub) if r.direct.iter().any(|x| x == sub) => Some(*sub),
            _ => None,
        };
        let (Some(script), Some(dir)) = (script, env.cwd.as_deref().or(cmd.cwd.as_deref())) else {
            return;
        };
        let Some(line) = manifest_script(&dir.join("package.json"), script) else {
            return;
        };
        let what = format!("the script `{script}` of package.json");
        self.walk_string(&line, env, pc, &what);
    }
}

/// The line of the script `name` of the manifest at `path`; `None` when there is no such
/// file, it is larger than [`MAX_MANIFEST`], it is not JSON, or it has no such script.
fn manifest_script(path: &std::path::Path, name: &str) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    f.take(MAX_MANIFEST + 1).read_to_string(&mut text).ok()?;
    if text.len() as u64 > MAX_MANIFEST {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("scripts")?.get(name)?.as_str().map(str::to_owned)
}
