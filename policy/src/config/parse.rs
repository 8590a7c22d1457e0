//! Reads one TOML layer (the defaults or the user's file) onto a [`Config`], keeping the
//! line of every value and refusing unknown keys.

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::credential::{self, RawCredential};
use super::rules::{RuleShape, check_host, check_path};
use super::{
    AlwaysRule, BackendChoice, BusConfig, CacheMerge, Config, DEFAULTS_NAME, Entry,
    EnvironmentConfig, FLOOR_LINES, FloorsConfig, GitConfig, JobsConfig, LoadError, NetworkConfig,
    PermissionsConfig, ProxyConfig, Resolve, SandboxConfig, Setting, ShellChoice, Source,
};

type Check = fn(&str) -> Result<(), String>;

struct Ctx<'a> {
    text: &'a str,
    /// `None` for the built-in defaults.
    path: Option<&'a Path>,
}

impl Ctx<'_> {
    fn file(&self) -> PathBuf {
        match self.path {
            Some(p) => p.to_path_buf(),
            None => PathBuf::from(DEFAULTS_NAME),
        }
    }

    fn source(&self, span: &Range<usize>) -> Source {
        match self.path {
            None => Source::Default,
            Some(p) => Source::File {
                path: p.to_path_buf(),
                line: line_column(self.text, span.start).0,
            },
        }
    }

    fn invalid(&self, key: &str, span: &Range<usize>, message: impl Into<String>) -> LoadError {
        let (line, column) = line_column(self.text, span.start);
        LoadError::Invalid {
            path: self.file(),
            key: key.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    fn unknown(&self, key: &str, span: &Range<usize>, known: &[&str]) -> LoadError {
        self.invalid(
            key,
            span,
            format!("unknown key (known here: {})", known.join(", ")),
        )
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

type Pairs<'t, 'i> = Vec<(
    &'t Spanned<toml::de::DeString<'i>>,
    &'t Spanned<DeValue<'i>>,
)>;

/// The entries of a table in the order of the file.
pub(super) fn ordered<'t, 'i>(table: &'t DeTable<'i>) -> Pairs<'t, 'i> {
    let mut pairs: Pairs<'t, 'i> = table.iter().collect();
    pairs.sort_by_key(|(k, _)| k.span().start);
    pairs
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Applies one layer. `path` is `None` for the built-in defaults (whose list entries must
/// each give a reason).
pub(crate) fn apply(text: &str, path: Option<&Path>, config: &mut Config) -> Result<(), LoadError> {
    let ctx = Ctx { text, path };
    let doc = DeTable::parse(text).map_err(|e| {
        let (line, column) = e
            .span()
            .map(|s| line_column(text, s.start))
            .unwrap_or((1, 1));
        LoadError::Parse {
            path: ctx.file(),
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })?;
    for (k, v) in ordered(doc.get_ref()) {
        let name: &str = k.get_ref();
        match name {
            "sandbox" => sandbox(&ctx, table(&ctx, name, v)?, &mut config.sandbox)?,
            "network" => network(&ctx, table(&ctx, name, v)?, &mut config.network)?,
            "bus" => bus(&ctx, table(&ctx, name, v)?, &mut config.bus)?,
            "git" => git(&ctx, table(&ctx, name, v)?, &mut config.git)?,
            "environment" => environment(&ctx, table(&ctx, name, v)?, &mut config.environment)?,
            "permissions" => permissions(&ctx, table(&ctx, name, v)?, &mut config.permissions)?,
            "floors" => floors(&ctx, table(&ctx, name, v)?, &mut config.floors)?,
            "jobs" => jobs(&ctx, table(&ctx, name, v)?, &mut config.jobs)?,
            "proxy" => proxy(&ctx, table(&ctx, name, v)?, &mut config.proxy)?,
            "always" => always(&ctx, v, &mut config.always)?,
            "credential" => credential(&ctx, v, config)?,
            // Not a sandbox section: efrd's own (such as `[model]`) or a typo. Ignore it
            // and let `efr-sandbox config` name it.
            _ => config.ignored_sections.push(name.to_string()),
        }
    }
    Ok(())
}

fn table<'t, 'i>(
    ctx: &Ctx<'_>,
    key: &str,
    v: &'t Spanned<DeValue<'i>>,
) -> Result<&'t DeTable<'i>, LoadError> {
    match v.get_ref() {
        DeValue::Table(t) => Ok(t),
        other => Err(ctx.invalid(
            key,
            &v.span(),
            format!("expected a table, found {}", type_name(other)),
        )),
    }
}

fn boolean(ctx: &Ctx<'_>, key: &str, v: &Spanned<DeValue<'_>>) -> Result<Setting<bool>, LoadError> {
    match v.get_ref() {
        DeValue::Boolean(b) => Ok(Setting {
            value: *b,
            source: ctx.source(&v.span()),
        }),
        other => Err(ctx.invalid(
            key,
            &v.span(),
            format!("expected true or false, found {}", type_name(other)),
        )),
    }
}

fn string<'t>(ctx: &Ctx<'_>, key: &str, v: &'t Spanned<DeValue<'_>>) -> Result<&'t str, LoadError> {
    match v.get_ref() {
        DeValue::String(s) => Ok(s),
        other => Err(ctx.invalid(
            key,
            &v.span(),
            format!("expected a string, found {}", type_name(other)),
        )),
    }
}

/// [`string`], with the key made only for the error.
fn string_at<'t>(
    ctx: &Ctx<'_>,
    key: impl FnOnce() -> String,
    v: &'t Spanned<DeValue<'_>>,
) -> Result<&'t str, LoadError> {
    match v.get_ref() {
        DeValue::String(s) => Ok(s),
        _ => string(ctx, &key(), v),
    }
}

/// One list key and its `_remove` companion.
struct ListField<'c> {
    name: &'static str,
    /// The member that holds the value in the table form (`path`, `host`, `name`).
    field: &'static str,
    check: Check,
    list: &'c mut Vec<Entry>,
}

/// Handles `name` when it is one of `lists` or its `_remove`; false when it is neither.
fn lists(
    ctx: &Ctx<'_>,
    section: &str,
    name: &str,
    v: &Spanned<DeValue<'_>>,
    fields: &mut [ListField<'_>],
) -> Result<bool, LoadError> {
    for lf in fields.iter_mut() {
        if name == lf.name {
            let key = format!("{section}.{name}");
            // `merge` is a member of `sandbox.caches` entries alone.
            let merge = key == "sandbox.caches";
            add_entries(ctx, &key, lf.field, lf.check, merge, v, lf.list)?;
            return Ok(true);
        }
        if name.strip_suffix("_remove") == Some(lf.name) {
            let key = format!("{section}.{name}");
            remove_entries(ctx, &key, &format!("{section}.{}", lf.name), v, lf.list)?;
            return Ok(true);
        }
    }
    Ok(false)
}

fn known_keys(scalars: &[&'static str], fields: &[ListField<'_>]) -> Vec<String> {
    let mut keys: Vec<String> = scalars.iter().map(|s| s.to_string()).collect();
    for f in fields {
        keys.push(f.name.to_string());
        keys.push(format!("{}_remove", f.name));
    }
    keys
}

fn unknown_in(
    ctx: &Ctx<'_>,
    section: &str,
    k: &Spanned<toml::de::DeString<'_>>,
    known: &[String],
) -> LoadError {
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    ctx.unknown(&format!("{section}.{}", k.get_ref()), &k.span(), &known)
}

fn array<'t, 'i>(
    ctx: &Ctx<'_>,
    key: &str,
    v: &'t Spanned<DeValue<'i>>,
) -> Result<&'t [Spanned<DeValue<'i>>], LoadError> {
    match v.get_ref() {
        DeValue::Array(a) => Ok(a),
        other => Err(ctx.invalid(
            key,
            &v.span(),
            format!("expected an array, found {}", type_name(other)),
        )),
    }
}

fn add_entries(
    ctx: &Ctx<'_>,
    key: &str,
    field: &str,
    check: Check,
    merge_ok: bool,
    v: &Spanned<DeValue<'_>>,
    list: &mut Vec<Entry>,
) -> Result<(), LoadError> {
    // What the list names already, as `same` compares: a look-up per entry, not a scan of
    // the list (the defaults' lists have hundreds, and every command loads them).
    let mut named: std::collections::HashSet<String> =
        list.iter().map(|e| key_of(&e.value).to_string()).collect();
    for (i, item) in array(ctx, key, v)?.iter().enumerate() {
        // Made only for an error: the defaults' hundreds of entries need none.
        let item_key = || format!("{key}[{i}]");
        let (value, reason, merge) = match item.get_ref() {
            DeValue::String(s) => (s.to_string(), String::new(), None),
            DeValue::Table(t) => {
                let mut value = None;
                let mut reason = String::new();
                let mut merge = None;
                for (k, mv) in ordered(t) {
                    let kname: &str = k.get_ref();
                    if kname == field {
                        value = Some(
                            string_at(ctx, || format!("{}.{field}", item_key()), mv)?.to_string(),
                        );
                    } else if kname == "reason" {
                        reason = string_at(ctx, || format!("{}.reason", item_key()), mv)?
                            .trim()
                            .to_string();
                    } else if kname == "merge" && merge_ok {
                        let key = || format!("{}.merge", item_key());
                        let word = string_at(ctx, key, mv)?;
                        merge = Some(CacheMerge::parse(word).ok_or_else(|| {
                            ctx.invalid(
                                &key(),
                                &mv.span(),
                                format!("{word}: expected cargo, npm, installs or never"),
                            )
                        })?);
                    } else {
                        let known: &[&str] = if merge_ok {
                            &[field, "reason", "merge"]
                        } else {
                            &[field, "reason"]
                        };
                        return Err(ctx.unknown(
                            &format!("{}.{kname}", item_key()),
                            &k.span(),
                            known,
                        ));
                    }
                }
                let Some(value) = value else {
                    return Err(ctx.invalid(
                        &item_key(),
                        &item.span(),
                        format!("missing `{field}`"),
                    ));
                };
                (value, reason, merge)
            }
            other => {
                return Err(ctx.invalid(
                    &item_key(),
                    &item.span(),
                    format!(
                        "expected a string or a table with `{field}`, found {}",
                        type_name(other)
                    ),
                ));
            }
        };
        check(&value).map_err(|m| ctx.invalid(&item_key(), &item.span(), m))?;
        if ctx.path.is_none() && reason.is_empty() {
            return Err(ctx.invalid(&item_key(), &item.span(), "a built-in entry needs a reason"));
        }
        if reason.contains('\n') {
            return Err(ctx.invalid(&item_key(), &item.span(), "a reason is one line"));
        }
        if !named.insert(key_of(&value).to_string()) {
            // Already there (a default the user repeats): the first one stays.
            continue;
        }
        list.push(Entry {
            value,
            reason,
            source: ctx.source(&item.span()),
            merge: merge.or(merge_ok.then_some(CacheMerge::Never)),
        });
    }
    Ok(())
}

/// Two entries name the same thing: equal but for trailing slashes (a lone `/` stays).
fn same(a: &str, b: &str) -> bool {
    key_of(a) == key_of(b)
}

/// What [`same`] compares of an entry: it without its trailing slashes (a lone `/` stays).
fn key_of(s: &str) -> &str {
    if s.len() > 1 {
        &s[..s.trim_end_matches('/').len()]
    } else {
        s
    }
}

fn remove_entries(
    ctx: &Ctx<'_>,
    key: &str,
    list_key: &str,
    v: &Spanned<DeValue<'_>>,
    list: &mut Vec<Entry>,
) -> Result<(), LoadError> {
    for (i, item) in array(ctx, key, v)?.iter().enumerate() {
        let value = string(ctx, &format!("{key}[{i}]"), item)?;
        let before = list.len();
        list.retain(|e| !same(&e.value, value));
        if list.len() == before {
            return Err(ctx.invalid(
                &format!("{key}[{i}]"),
                &item.span(),
                format!("{list_key} has no entry {value} to remove"),
            ));
        }
    }
    Ok(())
}

fn check_anchored(s: &str) -> Result<(), String> {
    check_path(s, RuleShape::Anchored)
}
fn check_relative(s: &str) -> Result<(), String> {
    check_path(s, RuleShape::Relative)
}
fn check_any(s: &str) -> Result<(), String> {
    check_path(s, RuleShape::Any)
}

fn check_dir_name(s: &str) -> Result<(), String> {
    if s.is_empty() || s == "." || s == ".." || s.contains('/') || s.contains('\0') {
        Err(format!("{s:?}: not a directory name"))
    } else {
        Ok(())
    }
}

fn check_bus_name(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-*=@/".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("{s:?}: not a bus name or rule"))
    }
}

fn check_floor_line(s: &str) -> Result<(), String> {
    if FLOOR_LINES.contains(&s) {
        Ok(())
    } else {
        Err(format!(
            "{s}: unknown floor line (known: {})",
            FLOOR_LINES.join(", ")
        ))
    }
}

fn sandbox(ctx: &Ctx<'_>, t: &DeTable<'_>, cfg: &mut SandboxConfig) -> Result<(), LoadError> {
    let mut fields = [
        ListField {
            name: "masks",
            field: "path",
            check: check_any,
            list: &mut cfg.masks,
        },
        ListField {
            name: "read_only_inside",
            field: "path",
            check: check_relative,
            list: &mut cfg.read_only_inside,
        },
        ListField {
            name: "writable",
            field: "path",
            check: check_anchored,
            list: &mut cfg.writable,
        },
        ListField {
            name: "caches",
            field: "path",
            check: check_anchored,
            list: &mut cfg.caches,
        },
        ListField {
            name: "build_output",
            field: "name",
            check: check_dir_name,
            list: &mut cfg.build_output,
        },
        ListField {
            name: "trash",
            field: "path",
            check: check_anchored,
            list: &mut cfg.trash,
        },
        ListField {
            name: "quiet_refusals",
            field: "path",
            check: check_anchored,
            list: &mut cfg.quiet_refusals,
        },
    ];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        if name == "backend" {
            let key = "sandbox.backend";
            let value = match string(ctx, key, v)? {
                "auto" => BackendChoice::Auto,
                "native" => BackendChoice::Native,
                "bwrap" => BackendChoice::Bwrap,
                other => {
                    return Err(ctx.invalid(
                        key,
                        &v.span(),
                        format!("{other}: expected auto, native or bwrap"),
                    ));
                }
            };
            cfg.backend = Setting {
                value,
                source: ctx.source(&v.span()),
            };
        } else if name == "tmp_size" || name == "shm_size" {
            let key = format!("sandbox.{name}");
            let value = efr_sandbox_wire::size::Size::parse(string(ctx, &key, v)?)
                .map_err(|e| ctx.invalid(&key, &v.span(), e.to_string()))?;
            let setting = Setting {
                value,
                source: ctx.source(&v.span()),
            };
            if name == "tmp_size" {
                cfg.tmp_size = setting;
            } else {
                cfg.shm_size = setting;
            }
        } else if name == "shell" {
            let value = ShellChoice::parse(string(ctx, "sandbox.shell", v)?)
                .map_err(|e| ctx.invalid("sandbox.shell", &v.span(), e.to_string()))?;
            cfg.shell = Setting {
                value,
                source: ctx.source(&v.span()),
            };
        } else if name == "conversation_cache_days" {
            cfg.conversation_cache_days =
                count(ctx, "sandbox.conversation_cache_days", v, 1, 3650)?;
        } else if !lists(ctx, "sandbox", name, v, &mut fields)? {
            return Err(unknown_in(
                ctx,
                "sandbox",
                k,
                &known_keys(
                    &[
                        "backend",
                        "tmp_size",
                        "shm_size",
                        "conversation_cache_days",
                        "shell",
                    ],
                    &fields,
                ),
            ));
        }
    }
    Ok(())
}

fn network(ctx: &Ctx<'_>, t: &DeTable<'_>, cfg: &mut NetworkConfig) -> Result<(), LoadError> {
    let resolve = &mut cfg.resolve;
    let netview = &mut cfg.netview;
    let (conns, tunnels) = (&mut cfg.proxy_connections, &mut cfg.proxy_tunnels);
    let mut fields = [
        ListField {
            name: "allow",
            field: "host",
            check: check_host,
            list: &mut cfg.allow,
        },
        ListField {
            name: "deny",
            field: "host",
            check: check_host,
            list: &mut cfg.deny,
        },
        ListField {
            name: "token_files",
            field: "path",
            check: check_any,
            list: &mut cfg.token_files,
        },
    ];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        match name {
            "netview" => *netview = boolean(ctx, "network.netview", v)?,
            "proxy_connections" => *conns = count(ctx, "network.proxy_connections", v, 8, 4096)?,
            "proxy_tunnels" => *tunnels = count(ctx, "network.proxy_tunnels", v, 1, 1024)?,
            "resolve" => {
                for (hk, hv) in ordered(table(ctx, "network.resolve", v)?) {
                    let host: &str = hk.get_ref();
                    let key = format!("network.resolve.{host}");
                    check_host(host).map_err(|m| ctx.invalid(&key, &hk.span(), m))?;
                    let text = string(ctx, &key, hv)?;
                    let address = text.parse().map_err(|_| {
                        ctx.invalid(&key, &hv.span(), format!("{text}: not an ip address"))
                    })?;
                    resolve.retain(|r| r.name != host);
                    resolve.push(Resolve {
                        name: host.to_string(),
                        address,
                        source: ctx.source(&hv.span()),
                    });
                }
            }
            _ => {
                if !lists(ctx, "network", name, v, &mut fields)? {
                    return Err(unknown_in(
                        ctx,
                        "network",
                        k,
                        &known_keys(
                            &["netview", "proxy_connections", "proxy_tunnels", "resolve"],
                            &fields,
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn bus(ctx: &Ctx<'_>, t: &DeTable<'_>, cfg: &mut BusConfig) -> Result<(), LoadError> {
    let filter = &mut cfg.filter;
    let mut fields = [
        ListField {
            name: "talk",
            field: "name",
            check: check_bus_name,
            list: &mut cfg.talk,
        },
        ListField {
            name: "see",
            field: "name",
            check: check_bus_name,
            list: &mut cfg.see,
        },
        ListField {
            name: "call",
            field: "name",
            check: check_bus_name,
            list: &mut cfg.call,
        },
        ListField {
            name: "broadcast",
            field: "name",
            check: check_bus_name,
            list: &mut cfg.broadcast,
        },
        ListField {
            name: "never",
            field: "name",
            check: check_bus_name,
            list: &mut cfg.never,
        },
        ListField {
            name: "allow_never",
            field: "name",
            check: check_bus_name,
            list: &mut cfg.allow_never,
        },
    ];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        if ctx.path.is_some() && (name == "never" || name == "never_remove") {
            return Err(ctx.invalid(
                &format!("bus.{name}"),
                &k.span(),
                "bus.never is the built-in list of names no bus filter opens; name one in \
                 bus.allow_never to open it anyway (config and check then warn)"
                    .to_string(),
            ));
        }
        if name == "filter" {
            *filter = boolean(ctx, "bus.filter", v)?;
        } else if !lists(ctx, "bus", name, v, &mut fields)? {
            return Err(unknown_in(ctx, "bus", k, &known_keys(&["filter"], &fields)));
        }
    }
    Ok(())
}

/// A git config key pattern: `section.name`, `section.sub.name` or `section.*.name`;
/// section and name of letters, digits and `-` (as git allows).
fn check_git_key(s: &str) -> Result<(), String> {
    let word = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let ok = match s.split_once('.') {
        Some((section, rest)) => {
            let name = rest.rsplit_once('.').map_or(rest, |(_, n)| n);
            let sub = rest.rsplit_once('.').map(|(sub, _)| sub);
            word(section)
                && word(name)
                && sub.is_none_or(|sub| !sub.is_empty() && !sub.contains(['\n', '\0']))
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?}: not a git config key (section.name, section.sub.name or section.*.name)"
        ))
    }
}

fn git(ctx: &Ctx<'_>, t: &DeTable<'_>, cfg: &mut GitConfig) -> Result<(), LoadError> {
    let mut fields = [ListField {
        name: "safe_config_keys",
        field: "key",
        check: check_git_key,
        list: &mut cfg.safe_config_keys,
    }];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        if !lists(ctx, "git", name, v, &mut fields)? {
            return Err(unknown_in(ctx, "git", k, &known_keys(&[], &fields)));
        }
    }
    Ok(())
}

fn check_env_glob(s: &str) -> Result<(), String> {
    efr_sandbox_wire::envfilter::check_glob(s)
}

fn check_value_pattern(s: &str) -> Result<(), String> {
    efr_sandbox_wire::envfilter::ValuePattern::parse(s).map(|_| ())
}

fn environment(
    ctx: &Ctx<'_>,
    t: &DeTable<'_>,
    cfg: &mut EnvironmentConfig,
) -> Result<(), LoadError> {
    let mut fields = [
        ListField {
            name: "keep",
            field: "name",
            check: check_env_glob,
            list: &mut cfg.keep,
        },
        ListField {
            name: "drop",
            field: "name",
            check: check_env_glob,
            list: &mut cfg.drop,
        },
        ListField {
            name: "secret_values",
            field: "pattern",
            check: check_value_pattern,
            list: &mut cfg.secret_values,
        },
    ];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        if !lists(ctx, "environment", name, v, &mut fields)? {
            return Err(unknown_in(ctx, "environment", k, &known_keys(&[], &fields)));
        }
    }
    Ok(())
}

fn permissions(
    ctx: &Ctx<'_>,
    t: &DeTable<'_>,
    cfg: &mut PermissionsConfig,
) -> Result<(), LoadError> {
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        match name {
            "allow_full" => cfg.allow_full = boolean(ctx, "permissions.allow_full", v)?,
            _ => {
                return Err(ctx.unknown(
                    &format!("permissions.{name}"),
                    &k.span(),
                    &["allow_full"],
                ));
            }
        }
    }
    Ok(())
}

/// A number of the config (an integer or a float), for `key`.
fn number(ctx: &Ctx<'_>, key: &str, v: &Spanned<DeValue<'_>>) -> Result<f64, LoadError> {
    let bad = |what: String| ctx.invalid(key, &v.span(), what);
    match v.get_ref() {
        DeValue::Integer(i) => i
            .to_string()
            .parse::<f64>()
            .map_err(|_| bad(format!("expected a number, found {i}"))),
        DeValue::Float(f) => f
            .to_string()
            .parse::<f64>()
            .map_err(|_| bad(format!("expected a number, found {f}"))),
        other => Err(bad(format!(
            "expected a number, found {}",
            type_name(other)
        ))),
    }
}

/// A whole number of the config from `min` to `max`, for `key`.
fn count(
    ctx: &Ctx<'_>,
    key: &str,
    v: &Spanned<DeValue<'_>>,
    min: u64,
    max: u64,
) -> Result<Setting<u64>, LoadError> {
    let bad = || format!("expected a whole number from {min} to {max}");
    let n = match v.get_ref() {
        DeValue::Integer(i) => i.to_string().parse::<u64>().ok(),
        _ => None,
    }
    .filter(|n| (min..=max).contains(n))
    .ok_or_else(|| ctx.invalid(key, &v.span(), bad()))?;
    Ok(Setting {
        value: n,
        source: ctx.source(&v.span()),
    })
}

/// A size in bytes: a whole number of bytes, or a string (`512M`, `2G`, at least 1M; not
/// a percentage), or `none` when `none_ok`.
fn bytes(
    ctx: &Ctx<'_>,
    key: &str,
    v: &Spanned<DeValue<'_>>,
    none_ok: bool,
) -> Result<Option<u64>, LoadError> {
    if let DeValue::Integer(i) = v.get_ref() {
        return match i.to_string().parse::<u64>() {
            Ok(b) if b >= 4096 => Ok(Some(b)),
            _ => Err(ctx.invalid(key, &v.span(), format!("{i}: expected at least 4096 bytes"))),
        };
    }
    let text = string(ctx, key, v)?;
    if none_ok && text == "none" {
        return Ok(None);
    }
    match efr_sandbox_wire::size::Size::parse(text) {
        Ok(efr_sandbox_wire::size::Size::Bytes(b)) if b > 0 => Ok(Some(b)),
        Ok(_) => Err(ctx.invalid(
            key,
            &v.span(),
            format!("{text:?}: expected a size in bytes such as 512M or 2G, not a percentage"),
        )),
        Err(e) => Err(ctx.invalid(key, &v.span(), e.to_string())),
    }
}

fn check_port(s: &str) -> Result<(), String> {
    match s.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("{s}: expected a port from 1 to 65535")),
    }
}

/// `[proxy]`: `extra_roots` (and its `_remove`), files `~/...` or absolute.
fn proxy(ctx: &Ctx<'_>, t: &DeTable<'_>, cfg: &mut ProxyConfig) -> Result<(), LoadError> {
    let mut fields = [ListField {
        name: "extra_roots",
        field: "path",
        check: check_anchored,
        list: &mut cfg.extra_roots,
    }];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        if !lists(ctx, "proxy", name, v, &mut fields)? {
            return Err(unknown_in(ctx, "proxy", k, &known_keys(&[], &fields)));
        }
    }
    Ok(())
}

fn jobs(ctx: &Ctx<'_>, t: &DeTable<'_>, cfg: &mut JobsConfig) -> Result<(), LoadError> {
    let mut fields = [ListField {
        name: "forward_deny",
        field: "port",
        check: check_port,
        list: &mut cfg.forward_deny,
    }];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        let key = format!("jobs.{name}");
        let source = ctx.source(&v.span());
        match name {
            "min_minutes" | "max_minutes" => {
                let n = number(ctx, &key, v)?;
                if !(n.is_finite() && (0.001..=525_600.0).contains(&n)) {
                    return Err(ctx.invalid(
                        &key,
                        &v.span(),
                        format!("{n}: expected minutes from 0.001 to 525600 (a year)"),
                    ));
                }
                let s = Setting { value: n, source };
                if name == "min_minutes" {
                    cfg.min_minutes = s;
                } else {
                    cfg.max_minutes = s;
                }
            }
            "max_running" => cfg.max_running = count(ctx, &key, v, 1, 4096)?,
            "output_max" => {
                let b = bytes(ctx, &key, v, false)?.unwrap_or(1 << 20);
                cfg.output_max = Setting { value: b, source };
            }
            "cgroups" => cfg.cgroups = boolean(ctx, &key, v)?,
            "memory_max" => {
                cfg.memory_max = Setting {
                    value: bytes(ctx, &key, v, true)?,
                    source,
                };
            }
            "pids_max" => cfg.pids_max = count(ctx, &key, v, 16, 4_194_304)?,
            "forwards" => cfg.forwards = boolean(ctx, &key, v)?,
            "forward_max" => cfg.forward_max = count(ctx, &key, v, 0, 256)?,
            "forward_connections" => cfg.forward_connections = count(ctx, &key, v, 1, 4096)?,
            _ => {
                if !lists(ctx, "jobs", name, v, &mut fields)? {
                    return Err(unknown_in(
                        ctx,
                        "jobs",
                        k,
                        &known_keys(
                            &[
                                "min_minutes",
                                "max_minutes",
                                "max_running",
                                "output_max",
                                "cgroups",
                                "memory_max",
                                "pids_max",
                                "forwards",
                                "forward_max",
                                "forward_connections",
                            ],
                            &fields,
                        ),
                    ));
                }
            }
        }
    }
    if cfg.min_minutes.value > cfg.max_minutes.value {
        return Err(ctx.invalid(
            "jobs.min_minutes",
            &(0..0),
            format!(
                "{} is above jobs.max_minutes {}",
                cfg.min_minutes.value, cfg.max_minutes.value
            ),
        ));
    }
    Ok(())
}

fn floors(ctx: &Ctx<'_>, t: &DeTable<'_>, cfg: &mut FloorsConfig) -> Result<(), LoadError> {
    let mut fields = [
        ListField {
            name: "paths",
            field: "path",
            check: check_any,
            list: &mut cfg.paths,
        },
        ListField {
            name: "lines",
            field: "name",
            check: check_floor_line,
            list: &mut cfg.lines,
        },
    ];
    for (k, v) in ordered(t) {
        let name: &str = k.get_ref();
        if !lists(ctx, "floors", name, v, &mut fields)? {
            return Err(unknown_in(ctx, "floors", k, &known_keys(&[], &fields)));
        }
    }
    Ok(())
}

fn always(
    ctx: &Ctx<'_>,
    v: &Spanned<DeValue<'_>>,
    out: &mut Vec<AlwaysRule>,
) -> Result<(), LoadError> {
    const KNOWN: [&str; 5] = ["command", "host", "path", "kind", "reason"];
    for item in array(ctx, "always", v)? {
        let index = out.len();
        let key = format!("always[{index}]");
        let t = table(ctx, &key, item)?;
        let mut rule = AlwaysRule {
            command: Vec::new(),
            host: None,
            path: None,
            kind: None,
            reason: String::new(),
            source: Some(ctx.source(&item.span())),
        };
        for (k, mv) in ordered(t) {
            let name: &str = k.get_ref();
            let mkey = format!("{key}.{name}");
            match name {
                "command" => {
                    rule.command = match mv.get_ref() {
                        DeValue::String(s) => s.split_whitespace().map(str::to_string).collect(),
                        DeValue::Array(a) => {
                            let mut words = Vec::new();
                            for (i, w) in a.iter().enumerate() {
                                let w = string(ctx, &format!("{mkey}[{i}]"), w)?;
                                if w.is_empty() {
                                    return Err(ctx.invalid(
                                        &mkey,
                                        &mv.span(),
                                        "a command word may not be empty",
                                    ));
                                }
                                words.push(w.to_string());
                            }
                            words
                        }
                        other => {
                            return Err(ctx.invalid(
                                &mkey,
                                &mv.span(),
                                format!("expected an array of words, found {}", type_name(other)),
                            ));
                        }
                    };
                    if rule.command.is_empty() {
                        return Err(ctx.invalid(
                            &mkey,
                            &mv.span(),
                            "a command needs at least one word",
                        ));
                    }
                    if rule
                        .command
                        .first()
                        .is_some_and(|w| w.bytes().all(|b| b == b'*'))
                    {
                        return Err(ctx.invalid(
                            &mkey,
                            &mv.span(),
                            "the command name may not be a bare *",
                        ));
                    }
                }
                "host" => {
                    let h = string(ctx, &mkey, mv)?;
                    check_host(h).map_err(|m| ctx.invalid(&mkey, &mv.span(), m))?;
                    rule.host = Some(h.to_string());
                }
                "path" => {
                    let p = string(ctx, &mkey, mv)?;
                    check_path(p, RuleShape::Anchored)
                        .map_err(|m| ctx.invalid(&mkey, &mv.span(), m))?;
                    rule.path = Some(p.to_string());
                }
                "kind" => {
                    let s = string(ctx, &mkey, mv)?;
                    let kind = efr_sandbox_wire::ExitKind::ALL
                        .into_iter()
                        .find(|k| k.as_str() == s);
                    let Some(kind) = kind else {
                        return Err(ctx.invalid(
                            &mkey,
                            &mv.span(),
                            format!("{s}: not an exit kind"),
                        ));
                    };
                    rule.kind = Some(kind);
                }
                "reason" => rule.reason = string(ctx, &mkey, mv)?.trim().to_string(),
                _ => return Err(ctx.unknown(&mkey, &k.span(), &KNOWN)),
            }
        }
        if rule.command.is_empty() && rule.host.is_none() && rule.path.is_none() {
            return Err(ctx.invalid(
                &key,
                &item.span(),
                "an always rule needs command, host or path",
            ));
        }
        out.push(rule);
    }
    Ok(())
}

/// `[[credential]]`: each entry read into a [`RawCredential`] and validated. A built-in
/// entry needs a reason; a user entry of a built-in profile's name replaces it; two entries
/// of one name in one layer are an error.
fn credential(
    ctx: &Ctx<'_>,
    v: &Spanned<DeValue<'_>>,
    config: &mut Config,
) -> Result<(), LoadError> {
    let mut seen: Vec<String> = Vec::new();
    for (index, item) in array(ctx, "credential", v)?.iter().enumerate() {
        let key = format!("credential[{index}]");
        let t = table(ctx, &key, item)?;
        let raw = raw_credential(ctx, &key, t)?;
        let at =
            |k: &str| -> Range<usize> { t.get(k).map(|v| v.span()).unwrap_or_else(|| item.span()) };
        let spec = raw.validate().map_err(|e| {
            let k = if e.key.is_empty() {
                key.clone()
            } else {
                format!("{key}.{}", e.key)
            };
            ctx.invalid(&k, &at(e.key), e.message)
        })?;
        if ctx.path.is_none() && spec.reason.is_none() {
            return Err(ctx.invalid(&key, &item.span(), "a built-in credential needs a reason"));
        }
        if seen.contains(&spec.name) {
            return Err(ctx.invalid(
                &format!("{key}.name"),
                &at("name"),
                format!("credential {}: a second entry of this name", spec.name),
            ));
        }
        seen.push(spec.name.clone());
        let source = ctx.source(&item.span());
        match config.credentials.iter().position(|c| c.name == spec.name) {
            Some(i) => {
                config.credentials[i] = spec;
                config.credential_sources[i] = source;
            }
            None => {
                config.credentials.push(spec);
                config.credential_sources.push(source);
            }
        }
    }
    Ok(())
}

/// The keys of one `[[credential]]` table, each of its type.
fn raw_credential(ctx: &Ctx<'_>, key: &str, t: &DeTable<'_>) -> Result<RawCredential, LoadError> {
    let mut raw = RawCredential::default();
    for (k, mv) in ordered(t) {
        let name: &str = k.get_ref();
        let mkey = format!("{key}.{name}");
        let text = || string(ctx, &mkey, mv).map(str::to_string);
        match name {
            "name" => raw.name = Some(text()?),
            "env" => raw.env = Some(text()?),
            "file" => raw.file = Some(text()?),
            "pattern" => raw.pattern = Some(text()?),
            "send" => raw.send = Some(text()?),
            "user" => raw.user = Some(text()?),
            "placeholder_env" => raw.placeholder_env = Some(text()?),
            "reason" => raw.reason = Some(text()?.trim().to_string()),
            "git" => raw.git = Some(boolean(ctx, &mkey, mv)?.value),
            "hosts" | "command" => {
                let words = array(ctx, &mkey, mv)?
                    .iter()
                    .enumerate()
                    .map(|(i, w)| string(ctx, &format!("{mkey}[{i}]"), w).map(str::to_string))
                    .collect::<Result<Vec<_>, _>>()?;
                if name == "hosts" {
                    raw.hosts = Some(words);
                } else {
                    raw.command = Some(words);
                }
            }
            "keep_seconds" => match mv.get_ref() {
                DeValue::Integer(i) => {
                    raw.keep_seconds = Some(i.to_string().parse::<i64>().map_err(|_| {
                        ctx.invalid(
                            &mkey,
                            &mv.span(),
                            "keep_seconds is a whole number of seconds",
                        )
                    })?);
                }
                other => {
                    return Err(ctx.invalid(
                        &mkey,
                        &mv.span(),
                        format!("expected a number of seconds, found {}", type_name(other)),
                    ));
                }
            },
            _ => return Err(ctx.unknown(&mkey, &k.span(), &credential::KEYS)),
        }
    }
    Ok(raw)
}
