//! What `efr-sandbox config` prints: every value with where it came from.

use serde_json::{Value, json};

use super::{Config, Entry, Setting, ShownValue, Source};

fn scalar<T: Into<Value> + Clone>(key: &str, s: &Setting<T>) -> ShownValue {
    ShownValue {
        key: key.to_string(),
        value: s.value.clone().into(),
        reason: String::new(),
        source: s.source.clone(),
    }
}

fn list(out: &mut Vec<ShownValue>, key: &str, entries: &[Entry]) {
    for e in entries {
        // A cache's merge kind leads its reason: what reaches the real cache.
        let reason = match e.merge {
            Some(m) => format!("merge {}: {}", m.as_str(), e.reason),
            None => e.reason.clone(),
        };
        out.push(ShownValue {
            key: key.to_string(),
            value: Value::String(e.value.clone()),
            reason,
            source: e.source.clone(),
        });
    }
}

pub(super) fn entries(c: &Config) -> Vec<ShownValue> {
    let mut out = Vec::new();
    out.push(ShownValue {
        key: "sandbox.backend".into(),
        value: Value::String(c.sandbox.backend.value.as_str().into()),
        reason: String::new(),
        source: c.sandbox.backend.source.clone(),
    });
    list(&mut out, "sandbox.masks", &c.sandbox.masks);
    list(
        &mut out,
        "sandbox.read_only_inside",
        &c.sandbox.read_only_inside,
    );
    list(&mut out, "sandbox.writable", &c.sandbox.writable);
    list(&mut out, "sandbox.caches", &c.sandbox.caches);
    list(&mut out, "sandbox.build_output", &c.sandbox.build_output);
    list(&mut out, "sandbox.trash", &c.sandbox.trash);
    list(
        &mut out,
        "sandbox.quiet_refusals",
        &c.sandbox.quiet_refusals,
    );
    out.push(ShownValue {
        key: "sandbox.conversation_cache_days".into(),
        value: Value::from(c.sandbox.conversation_cache_days.value),
        reason: String::new(),
        source: c.sandbox.conversation_cache_days.source.clone(),
    });
    out.push(ShownValue {
        key: "sandbox.shell".into(),
        value: Value::String(c.sandbox.shell.value.as_string()),
        reason: String::new(),
        source: c.sandbox.shell.source.clone(),
    });
    for (key, s) in [
        ("sandbox.tmp_size", &c.sandbox.tmp_size),
        ("sandbox.shm_size", &c.sandbox.shm_size),
    ] {
        out.push(ShownValue {
            key: key.into(),
            value: Value::String(s.value.to_string()),
            reason: String::new(),
            source: s.source.clone(),
        });
    }
    list(&mut out, "network.allow", &c.network.allow);
    list(&mut out, "network.deny", &c.network.deny);
    for r in &c.network.resolve {
        out.push(ShownValue {
            key: format!("network.resolve.{}", r.name),
            value: Value::String(r.address.to_string()),
            reason: String::new(),
            source: r.source.clone(),
        });
    }
    out.push(scalar("network.netview", &c.network.netview));
    out.push(scalar(
        "network.proxy_connections",
        &c.network.proxy_connections,
    ));
    out.push(scalar("network.proxy_tunnels", &c.network.proxy_tunnels));
    list(&mut out, "network.token_files", &c.network.token_files);
    out.push(scalar("bus.filter", &c.bus.filter));
    list(&mut out, "bus.talk", &c.bus.talk);
    list(&mut out, "bus.see", &c.bus.see);
    list(&mut out, "bus.call", &c.bus.call);
    list(&mut out, "bus.broadcast", &c.bus.broadcast);
    list(&mut out, "bus.never", &c.bus.never);
    list(&mut out, "bus.allow_never", &c.bus.allow_never);
    list(&mut out, "git.safe_config_keys", &c.git.safe_config_keys);
    list(&mut out, "environment.keep", &c.environment.keep);
    list(&mut out, "environment.drop", &c.environment.drop);
    list(
        &mut out,
        "environment.secret_values",
        &c.environment.secret_values,
    );
    out.push(scalar("permissions.allow_full", &c.permissions.allow_full));
    list(&mut out, "floors.paths", &c.floors.paths);
    list(&mut out, "floors.lines", &c.floors.lines);
    let j = &c.jobs;
    out.push(scalar("jobs.min_minutes", &j.min_minutes));
    out.push(scalar("jobs.max_minutes", &j.max_minutes));
    out.push(scalar("jobs.max_running", &j.max_running));
    out.push(scalar("jobs.output_max", &j.output_max));
    out.push(scalar("jobs.cgroups", &j.cgroups));
    out.push(ShownValue {
        key: "jobs.memory_max".into(),
        value: j
            .memory_max
            .value
            .map_or(Value::String("none".into()), Value::from),
        reason: String::new(),
        source: j.memory_max.source.clone(),
    });
    out.push(scalar("jobs.pids_max", &j.pids_max));
    out.push(scalar("jobs.forwards", &j.forwards));
    out.push(scalar("jobs.forward_max", &j.forward_max));
    out.push(scalar("jobs.forward_connections", &j.forward_connections));
    list(&mut out, "jobs.forward_deny", &j.forward_deny);
    list(&mut out, "proxy.extra_roots", &c.proxy.extra_roots);
    for (i, r) in c.always.iter().enumerate() {
        let mut value = serde_json::to_value(r).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut value {
            m.remove("reason");
        }
        out.push(ShownValue {
            key: format!("always[{i}]"),
            value,
            reason: r.reason.clone(),
            source: r.source.clone().unwrap_or(Source::Default),
        });
    }
    for (c, src) in c.credentials.iter().zip(&c.credential_sources) {
        out.push(ShownValue {
            key: format!("credential[{}]", c.name),
            value: credential_value(c),
            reason: c.reason.clone().unwrap_or_default(),
            source: src.clone(),
        });
    }
    out
}

/// A credential's keys as its entry writes them (where its secret comes from, never the
/// secret).
fn credential_value(c: &super::credential::CredentialSpec) -> Value {
    use super::credential::{SendAs, Source as From};
    let mut m = serde_json::Map::new();
    let hosts: Vec<String> = c
        .hosts
        .iter()
        .map(|h| match h.port {
            443 => h.pattern.clone(),
            p => format!("{}:{p}", h.pattern),
        })
        .collect();
    m.insert("hosts".into(), json!(hosts));
    match &c.source {
        From::Env(v) => {
            m.insert("env".into(), json!(v));
        }
        From::File { path, pattern } => {
            m.insert("file".into(), json!(path.to_string_lossy()));
            if let Some(p) = pattern {
                m.insert("pattern".into(), json!(p.as_str()));
            }
        }
        From::Command { argv, keep } => {
            m.insert("command".into(), json!(argv));
            m.insert("keep_seconds".into(), json!(keep.as_secs()));
        }
    }
    let send = match &c.send {
        SendAs::Bearer => "bearer".to_string(),
        SendAs::Token => "token".to_string(),
        SendAs::Basic { user } => {
            m.insert("user".into(), json!(user));
            "basic".to_string()
        }
        SendAs::Header(h) => format!("header:{h}"),
        SendAs::Query(q) => format!("query:{q}"),
    };
    m.insert("send".into(), json!(send));
    if let Some(v) = &c.placeholder_env {
        m.insert("placeholder_env".into(), json!(v));
    }
    if c.git {
        m.insert("git".into(), json!(true));
    }
    Value::Object(m)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => {
            let mut parts = Vec::new();
            for (k, v) in m {
                let text = match v {
                    Value::Array(words) => words
                        .iter()
                        .map(|w| w.as_str().unwrap_or("?"))
                        .collect::<Vec<_>>()
                        .join(" "),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                parts.push(format!("{k}={text}"));
            }
            parts.join(" ")
        }
        other => other.to_string(),
    }
}

pub(super) fn text(c: &Config) -> String {
    let shown = entries(c);
    let mut out = String::new();
    match &c.file {
        Some(p) => out.push_str(&format!("# config file: {}\n", p.display())),
        None => out.push_str("# config file: none (built-in defaults only)\n"),
    }
    let key_width = shown.iter().map(|s| s.key.len()).max().unwrap_or(0).min(28);
    let value_width = shown
        .iter()
        .map(|s| value_text(&s.value).chars().count())
        .max()
        .unwrap_or(0)
        .min(34);
    let mut last_section = "";
    for s in &shown {
        let section = s.key.split(['.', '[']).next().unwrap_or("");
        if section != last_section {
            if !last_section.is_empty() {
                out.push('\n');
            }
            last_section = section;
        }
        let origin = match (&s.source, s.reason.is_empty()) {
            (Source::Default, true) => "default".to_string(),
            (Source::Default, false) => format!("default: {}", s.reason),
            (src @ Source::File { .. }, true) => src.describe(),
            (src @ Source::File { .. }, false) => format!("{}: {}", src.describe(), s.reason),
            (src @ Source::Surface { .. }, _) => src.describe(),
        };
        out.push_str(&format!(
            "{:kw$}  {:vw$}  ({origin})\n",
            s.key,
            value_text(&s.value),
            kw = key_width,
            vw = value_width
        ));
    }
    if !c.ignored_sections.is_empty() {
        out.push_str(&format!(
            "\n# ignored (not sandbox sections): {}\n",
            c.ignored_sections
                .iter()
                .map(|s| format!("[{s}]"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

pub(super) fn json(c: &Config) -> Value {
    json!({
        "file": c.file.as_ref().map(|p| p.display().to_string()),
        "values": entries(c),
        "ignored_sections": c.ignored_sections,
    })
}
