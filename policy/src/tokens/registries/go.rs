//! go: `GOPROXY` and `GOSUMDB` (the environment, then `go env`'s file), and whether a build
//! would download modules (`go.sum` against the module cache; not with `-mod=vendor`).

use super::*;

pub(super) fn go(var: &dyn Fn(&str) -> Option<String>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let env_file = var("GOENV").map(PathBuf::from).unwrap_or_else(|| {
        var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".config"))
            .join("go/env")
    });
    let file = read_small(&env_file);
    let get = |k: &str| -> Option<(String, String)> {
        var(k)
            .map(|v| (v, k.to_string()))
            .or_else(|| Some((ini_value(file.as_deref()?, k)?, shown(&env_file, home))))
    };
    if let Some((value, from)) = get("GOPROXY") {
        // Every proxy of the list that is a URL; `direct` means the modules' own hosts,
        // which the line does not name; `off` means none.
        let proxies: Vec<Found> = value
            .split([',', '|'])
            .map(str::trim)
            .filter(|p| p.contains("://"))
            .filter_map(|u| found(u, from.clone()))
            .collect();
        s.replace_host.push(("proxy.golang.org".into(), proxies));
    }
    if let Some((value, from)) = get("GOSUMDB") {
        let v = value.trim().trim_matches('"');
        let list = if v == "off" {
            Vec::new()
        } else {
            // `name[+key] [url]`: the url when given, else the name is the host.
            let mut parts = v.split_whitespace();
            let name = parts.next().unwrap_or("");
            let name = name.split('+').next().unwrap_or(name);
            let u = parts
                .next()
                .map(str::to_string)
                .unwrap_or_else(|| format!("https://{name}"));
            found(&u, from).into_iter().collect()
        };
        s.replace_host.push(("sum.golang.org".into(), list));
    }
    s
}

/// A module path as go's module cache writes it: each capital letter as `!` and the letter
/// in lower case.
pub(super) fn go_escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Why a build-like go command (`go build`, `go test`) would download modules: the first
/// module of `go.sum` (a full module, not only its `go.mod`) whose zip the module cache
/// (`$GOMODCACHE`, else `$GOPATH/pkg/mod`, else `~/go/pkg/mod`) lacks. `None` when all are
/// there, when the module is vendored (`vendor/modules.txt`) or no go.mod is found.
/// Bounded: one go.sum of at most 1 MiB, one lookup per module.
pub fn go_would_fetch(
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Option<String> {
    let gomod = nearest(cwd, "go.mod")?;
    let dir = gomod.parent()?;
    if dir.join("vendor/modules.txt").is_file()
        || var("GOFLAGS").is_some_and(|f| f.contains("-mod=vendor"))
    {
        return None;
    }
    let cache = var("GOMODCACHE")
        .map(PathBuf::from)
        .or_else(|| {
            var("GOPATH").and_then(|p| {
                p.split(':')
                    .next()
                    .map(|p| PathBuf::from(p).join("pkg/mod"))
            })
        })
        .unwrap_or_else(|| home.join("go/pkg/mod"));
    let sum = read_small(&dir.join("go.sum"))?;
    for l in sum.lines().take(20_000) {
        let mut w = l.split_whitespace();
        let (Some(module), Some(version)) = (w.next(), w.next()) else {
            continue;
        };
        if version.ends_with("/go.mod") {
            continue;
        }
        let zip = cache
            .join("cache/download")
            .join(go_escape(module))
            .join("@v")
            .join(format!("{version}.zip"));
        if !zip.is_file() {
            return Some(format!(
                "{} names {module} {version}, which go's module cache ({}) lacks",
                shown(&dir.join("go.sum"), home),
                shown(&cache, home)
            ));
        }
    }
    None
}
