//! maven (the `<mirror>`s of `~/.m2/settings.xml`, the `<repository>`s of `pom.xml`) and
//! gradle (the wrapper's `distributionUrl`).

use super::*;

/// The text of every `<tag>...</tag>` in `text`.
pub(super) fn xml_all<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let Some(j) = after.find(&close) else { break };
        out.push(&after[..j]);
        rest = &after[j + close.len()..];
    }
    out
}

pub(super) fn maven(cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let settings = home.join(".m2/settings.xml");
    if let Some(t) = read_small(&settings) {
        for m in xml_all(&t, "mirror") {
            let of = xml_all(m, "mirrorOf").first().copied().unwrap_or("");
            let Some(u) = xml_all(m, "url").first().copied() else {
                continue;
            };
            let fd = found(u, shown(&settings, home));
            if of
                .split(',')
                .any(|o| matches!(o.trim(), "*" | "central" | "external:*"))
            {
                s.replace_host
                    .push(("repo.maven.apache.org".into(), fd.into_iter().collect()));
            } else {
                s.extra.extend(fd);
            }
        }
    }
    if let Some(p) = nearest(cwd, "pom.xml") {
        if let Some(t) = read_small(&p) {
            for tag in ["repository", "pluginRepository"] {
                for r in xml_all(&t, tag) {
                    for u in xml_all(r, "url") {
                        s.extra.extend(found(u, shown(&p, home)));
                    }
                }
            }
        }
    }
    s
}

pub(super) fn gradle(cwd: Option<&Path>, home: &Path) -> Setup {
    let mut s = Setup::default();
    let Some(f) = nearest(cwd, "gradle/wrapper/gradle-wrapper.properties") else {
        return s;
    };
    let Some(u) = read_small(&f).and_then(|t| ini_value(&t, "distributionUrl")) else {
        return s;
    };
    if let Some(fd) = found(&u.replace("\\:", ":"), shown(&f, home)) {
        if fd.host != "services.gradle.org" {
            s.replace_host
                .push(("services.gradle.org".into(), vec![fd]));
            s.replace_host
                .push(("downloads.gradle.org".into(), Vec::new()));
        }
    }
    s
}
