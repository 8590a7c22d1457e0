//! pip, uv and poetry: the index of `pip.conf`, requirements files and options, uv's
//! `[[index]]` tables and poetry's sources.

use super::*;

/// pip's config files, in the order pip reads them (the last wins): site, user, the
/// environment's, `PIP_CONFIG_FILE`.
pub(super) fn pip_conf_files(var: &dyn Fn(&str) -> Option<String>, home: &Path) -> Vec<PathBuf> {
    let mut v = vec![
        PathBuf::from("/etc/xdg/pip/pip.conf"),
        PathBuf::from("/etc/pip.conf"),
        home.join(".pip/pip.conf"),
        home.join(".config/pip/pip.conf"),
    ];
    if let Some(x) = var("XDG_CONFIG_HOME") {
        v.push(PathBuf::from(x).join("pip/pip.conf"));
    }
    if let Some(e) = var("VIRTUAL_ENV") {
        v.push(PathBuf::from(e).join("pip.conf"));
    }
    if let Some(f) = var("PIP_CONFIG_FILE") {
        v.push(PathBuf::from(f));
    }
    v
}

/// The index options of requirements files (`-r FILE`, read from `cwd`; nested `-r` lines
/// too, at most 8 files).
pub(super) fn requirements_options(words: &[&str], cwd: Option<&Path>) -> Vec<String> {
    let mut todo: Vec<PathBuf> = options(words, "--requirement", Some("-r"))
        .into_iter()
        .chain(options(words, "--constraint", Some("-c")))
        .map(|f| match cwd {
            Some(c) => c.join(f),
            None => PathBuf::from(f),
        })
        .collect();
    let mut out = Vec::new();
    let mut seen = 0;
    while let Some(f) = todo.pop() {
        seen += 1;
        if seen > 8 {
            break;
        }
        let Some(t) = read_small(&f) else { continue };
        for l in t.lines() {
            let l = l.trim();
            if l.starts_with('-') {
                out.extend(l.split_whitespace().map(str::to_string));
                if let Some(r) = l
                    .strip_prefix("-r ")
                    .or_else(|| l.strip_prefix("--requirement "))
                    .or_else(|| l.strip_prefix("-c "))
                {
                    let base = f.parent().unwrap_or(Path::new("/"));
                    todo.push(base.join(r.trim()));
                }
            }
        }
    }
    out
}

pub(super) fn pip(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let req = requirements_options(words, cwd);
    let req: Vec<&str> = req.iter().map(String::as_str).collect();
    let confs: Vec<(PathBuf, String)> = pip_conf_files(var, home)
        .into_iter()
        .filter_map(|f| read_small(&f).map(|t| (f, t)))
        .collect();
    // Extra indexes and find-links: every place adds.
    for (o, short) in [("--extra-index-url", None), ("--find-links", Some("-f"))] {
        for u in options(words, o, short) {
            s.extra.extend(found(&u, o));
        }
        for u in options(&req, o, short) {
            s.extra.extend(found(&u, "the requirements file"));
        }
    }
    for v in ["PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"] {
        for u in var(v).unwrap_or_default().split_whitespace() {
            s.extra.extend(found(u, v));
        }
    }
    for (f, t) in &confs {
        for (_, v) in ini_values(t, |k| k == "extra-index-url" || k == "find-links") {
            for u in v.split_whitespace() {
                s.extra.extend(found(u, shown(f, home)));
            }
        }
    }
    // The index: the line, the requirements file, the variable, the last config file.
    let primary = option(words, "--index-url", Some("-i"))
        .and_then(|u| found(&u, "--index-url"))
        .or_else(|| {
            option(&req, "--index-url", Some("-i")).and_then(|u| found(&u, "the requirements file"))
        })
        .or_else(|| var("PIP_INDEX_URL").and_then(|u| found(&u, "PIP_INDEX_URL")))
        .or_else(|| {
            confs
                .iter()
                .rev()
                .find_map(|(f, t)| found(&ini_value(t, "index-url")?, shown(f, home)))
        });
    if words.contains(&"--no-index") || req.contains(&"--no-index") {
        s.replace_all = Some(Vec::new());
    } else if let Some(p) = primary {
        s.replace_all = Some(vec![p]);
    }
    s
}

/// The `[[index]]`, `index-url`, `extra-index-url` and `find-links` of a uv config table.
pub(super) fn uv_table(t: &toml::Table, from: &str, primary: &mut Option<Found>, s: &mut Setup) {
    let urls = |v: Option<&toml::Value>| -> Vec<String> {
        match v {
            Some(toml::Value::String(u)) => vec![u.clone()],
            Some(toml::Value::Array(a)) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    };
    if let Some(toml::Value::Array(idx)) = t.get("index") {
        for i in idx {
            let Some(u) = i.get("url").and_then(|u| u.as_str()) else {
                continue;
            };
            let f = found(u, from);
            if i.get("default").and_then(|d| d.as_bool()) == Some(true) {
                if primary.is_none() {
                    *primary = f;
                }
            } else {
                s.extra.extend(f);
            }
        }
    }
    for u in urls(t.get("index-url")) {
        if primary.is_none() {
            *primary = found(&u, from);
        }
    }
    for k in ["extra-index-url", "find-links"] {
        for u in urls(t.get(k)) {
            s.extra.extend(found(&u, from));
        }
    }
    if let Some(pip) = t.get("pip").and_then(|p| p.as_table()) {
        uv_table(pip, from, primary, s);
    }
}

pub(super) fn uv(
    words: &[&str],
    var: &dyn Fn(&str) -> Option<String>,
    cwd: Option<&Path>,
    home: &Path,
) -> Setup {
    let mut s = Setup::default();
    let mut primary = option(words, "--default-index", None)
        .and_then(|u| found(&u, "--default-index"))
        .or_else(|| option(words, "--index-url", Some("-i")).and_then(|u| found(&u, "--index-url")))
        .or_else(|| var("UV_DEFAULT_INDEX").and_then(|u| found(&u, "UV_DEFAULT_INDEX")))
        .or_else(|| var("UV_INDEX_URL").and_then(|u| found(&u, "UV_INDEX_URL")));
    for o in ["--index", "--extra-index-url", "--find-links"] {
        for u in options(words, o, None) {
            // `--index name=url`
            let u = u.split_once('=').map(|(_, u)| u.to_string()).unwrap_or(u);
            s.extra.extend(found(&u, o));
        }
    }
    for v in ["UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS"] {
        for u in var(v).unwrap_or_default().split_whitespace() {
            let u = u.split_once('=').map(|(_, u)| u).unwrap_or(u);
            s.extra.extend(found(u, v));
        }
    }
    // The project's uv.toml or pyproject.toml [tool.uv] (the nearest), then the user's.
    let project = upwards(cwd).into_iter().find_map(|d| {
        let u = d.join("uv.toml");
        if let Some(t) = read_small(&u).and_then(|t| t.parse::<toml::Table>().ok()) {
            return Some((u, t));
        }
        let p = d.join("pyproject.toml");
        let t = read_small(&p)?.parse::<toml::Table>().ok()?;
        let uvt = t.get("tool")?.get("uv")?.as_table()?.clone();
        Some((p, uvt))
    });
    let user_dir = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    let user = user_dir.join("uv/uv.toml");
    let user = read_small(&user)
        .and_then(|t| t.parse::<toml::Table>().ok())
        .map(|t| (user, t));
    for (f, t) in project.iter().chain(user.iter()) {
        uv_table(t, &shown(f, home), &mut primary, &mut s);
    }
    if let Some(p) = primary {
        s.replace_all = Some(vec![p]);
    }
    s
}

pub(super) fn poetry(cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let Some(f) = nearest(cwd, "pyproject.toml") else {
        return s;
    };
    let Some(t) = read_small(&f).and_then(|t| t.parse::<toml::Table>().ok()) else {
        return s;
    };
    let Some(sources) = t
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("source"))
        .and_then(|s| s.as_array())
    else {
        return s;
    };
    let from = shown(&f, home);
    let mut primary = Vec::new();
    let mut pypi_listed = false;
    for src in sources {
        let name = src.get("name").and_then(|n| n.as_str()).unwrap_or("");
        if name.eq_ignore_ascii_case("pypi") {
            pypi_listed = true;
            continue;
        }
        let Some(u) = src.get("url").and_then(|u| u.as_str()) else {
            continue;
        };
        let prio = src
            .get("priority")
            .and_then(|p| p.as_str())
            .unwrap_or("primary");
        let fd = found(u, from.clone());
        if matches!(prio, "primary" | "default") {
            primary.extend(fd);
        } else {
            s.extra.extend(fd);
        }
    }
    // A primary source turns the python package index off unless a source names it.
    if !primary.is_empty() && !pypi_listed {
        s.replace_all = Some(primary);
    } else {
        s.extra.extend(primary);
    }
    s
}
