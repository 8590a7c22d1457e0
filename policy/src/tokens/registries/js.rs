//! npm, pnpm, bun and yarn: the registry of `.npmrc` files (the project's, the user's,
//! `--registry`, `npm_config_registry`, scopes) and of `.yarnrc.yml`.

use super::*;

pub(super) fn npmrc_files(
    cwd: Option<&Path>,
    home: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = upwards(cwd).into_iter().map(|d| d.join(".npmrc")).collect();
    match var("npm_config_userconfig").or_else(|| var("NPM_CONFIG_USERCONFIG")) {
        Some(u) => files.push(PathBuf::from(u)),
        None => files.push(home.join(".npmrc")),
    }
    files
}

pub(super) fn npm(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let files = npmrc_files(cwd, home, var);
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter_map(|f| read_small(&f).map(|t| (f, t)))
        .collect();
    // Scoped registries of every file (`@scope:registry=`).
    for (f, t) in &texts {
        for (_, v) in ini_values(t, |k| k.starts_with('@') && k.ends_with(":registry")) {
            s.extra.extend(found(&v, shown(f, home)));
        }
    }
    if let Some(u) = option(words, "--registry", None) {
        s.replace_all = found(&u, "--registry").map(|f| vec![f]);
        return s;
    }
    for v in ["npm_config_registry", "NPM_CONFIG_REGISTRY"] {
        if let Some(u) = var(v) {
            s.replace_all = found(&u, v).map(|f| vec![f]);
            return s;
        }
    }
    for (f, t) in &texts {
        if let Some(u) = ini_value(t, "registry") {
            s.replace_all = found(&u, shown(f, home)).map(|f| vec![f]);
            return s;
        }
    }
    s
}

/// A `key: value` of a YAML file at any depth (`npmRegistryServer: "https://..."`).
pub(super) fn yaml_values(text: &str, key: &str) -> Vec<(usize, String)> {
    text.lines()
        .filter_map(|l| {
            let indent = l.len() - l.trim_start().len();
            let (k, v) = l.trim().split_once(':')?;
            (k.trim().trim_matches(['"', '\'']) == key).then(|| (indent, v.trim().to_string()))
        })
        .collect()
}

pub(super) fn yarn(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let mut files: Vec<PathBuf> = upwards(cwd)
        .into_iter()
        .map(|d| d.join(".yarnrc.yml"))
        .collect();
    files.push(home.join(".yarnrc.yml"));
    let mut primary = None;
    if let Some(u) = var("YARN_NPM_REGISTRY_SERVER") {
        primary = found(&u, "YARN_NPM_REGISTRY_SERVER");
    }
    for f in &files {
        let Some(t) = read_small(f) else { continue };
        for (indent, v) in yaml_values(&t, "npmRegistryServer") {
            let fd = found(&v, shown(f, home));
            if indent == 0 {
                if primary.is_none() {
                    primary = fd;
                }
            } else {
                s.extra.extend(fd);
            }
        }
    }
    // yarn v1: `.yarnrc` (`registry "https://..."`), then npm's own setup.
    if primary.is_none() {
        let mut v1: Vec<PathBuf> = upwards(cwd)
            .into_iter()
            .map(|d| d.join(".yarnrc"))
            .collect();
        v1.push(home.join(".yarnrc"));
        primary = v1.iter().find_map(|f| {
            let t = read_small(f)?;
            t.lines().find_map(|l| {
                let u = l.trim().strip_prefix("registry ")?;
                found(u, shown(f, home))
            })
        });
    }
    match primary {
        Some(p) => s.replace_all = Some(vec![p]),
        None => {
            let n = npm(words, var, cwd, home);
            s.replace_all = n.replace_all;
            s.extra.extend(n.extra);
        }
    }
    s
}
