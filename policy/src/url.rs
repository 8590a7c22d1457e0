//! Hosts of URLs: the one place that reads a host (and port) out of a URL or a git remote.
//! It imports no other module of the crate.

/// `scheme://[user[:pw]@]host[:port]/...`, `user@host:path` or a bare `host.tld/...`:
/// (host, port, plain http). Never keeps the user or password.
pub fn url_host(s: &str, bare_ok: bool) -> Option<(String, Option<u16>, bool)> {
    let (scheme, rest) = match s.find("://") {
        Some(i) => (s[..i].to_ascii_lowercase(), &s[i + 3..]),
        None => {
            if !bare_ok {
                return None;
            }
            (String::new(), s)
        }
    };
    if !scheme.is_empty()
        && !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
    {
        return None;
    }
    if scheme == "file" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        let end = h.find(']')?;
        let port = h[end + 1..].strip_prefix(':').and_then(|p| p.parse().ok());
        (h[..end].to_string(), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty() => {
                (h.to_string(), p.parse().ok())
            }
            Some((h, "")) => (h.to_string(), None),
            _ => (hostport.to_string(), None),
        }
    };
    let host = host.to_ascii_lowercase();
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
    {
        return None;
    }
    if scheme.is_empty() {
        // a bare word is a host only when it looks like a domain name
        let looks = host.contains('.')
            && !host.starts_with('.')
            && !host.ends_with('.')
            && host
                .rsplit('.')
                .next()
                .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()))
            && !s.starts_with('.')
            && !s.starts_with('/');
        if !looks && host != "localhost" {
            return None;
        }
        // file names such as notes.txt, a.tar.gz
        const FILE_EXT: [&str; 20] = [
            "txt", "md", "sh", "py", "rs", "js", "ts", "json", "toml", "yaml", "yml", "gz", "tar",
            "zip", "c", "h", "html", "log", "conf", "lock",
        ];
        if host
            .rsplit('.')
            .next()
            .is_some_and(|t| FILE_EXT.contains(&t))
            && !s.contains('/')
        {
            return None;
        }
    }
    let plain = scheme == "http";
    Some((host, port, plain))
}

/// Host, port and whether it goes over ssh, of a git URL (`https://`, `ssh://`, `git://`,
/// `user@host:path`); None for a local path. Never keeps the user or password.
pub fn url_host_port(url: &str) -> Option<(String, Option<u16>, bool)> {
    if url.starts_with('/')
        || url.starts_with('.')
        || url.starts_with("file://")
        || url.starts_with('~')
    {
        return None;
    }
    if let Some(i) = url.find("://") {
        let scheme = url[..i].to_ascii_lowercase();
        let (h, p, _) = url_host(url, false)?;
        let ssh = scheme == "ssh" || scheme == "git+ssh" || scheme == "ssh+git";
        return Some((h, p, ssh));
    }
    let (before, _) = url.split_once(':')?;
    if before.contains('/') || before.is_empty() {
        return None;
    }
    let host = before.rsplit('@').next()?.to_ascii_lowercase();
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return None;
    }
    Some((host, None, true))
}
