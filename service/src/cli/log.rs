//! `efr-sandbox log [--json] [-n N] [ID]`: the user's call log ([`efr_call::history`]).

use clap::Args;
use efr_call::history::{self, Record};
use efr_policy::config::Env;

use crate::cli::term::{Stream, inline, json};

#[derive(Debug, Args)]
pub struct LogArgs {
    /// One JSON object per record, a line each (with ID: that record's).
    #[arg(long)]
    pub json: bool,
    /// How many of the latest calls (0: all the log holds).
    #[arg(short = 'n', long, value_name = "N", default_value_t = 20)]
    pub count: usize,
    /// The call to show whole (the first column of the table; a unique start is enough).
    #[arg(value_name = "ID")]
    pub id: Option<String>,
}

/// The widest line the table shows of a call's line.
const LINE_COLUMN: usize = 60;

/// `efr-sandbox log`: the table of recent calls, one call whole, or JSON lines; exit status
/// 1 when ID names no record (or more than one).
pub fn run(a: LogArgs) -> anyhow::Result<i32> {
    let env = Env::from_process();
    let state = efr_call::caches::state_dir(&env);
    let read = history::read(&state)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", history::file(&state).display()))?;
    // A line that is no record is said and skipped: the others are still shown.
    for u in &read.unreadable {
        eprintln!(
            "efr-sandbox: {}:{}: not a call record, skipped: {}",
            u.file.display(),
            u.line,
            u.why
        );
    }
    let records = read.records;
    if let Some(id) = &a.id {
        let found: Vec<&Record> = records
            .iter()
            .filter(|r| r.id.starts_with(id.as_str()))
            .collect();
        let [r] = found.as_slice() else {
            eprintln!(
                "efr-sandbox: {} calls in the log have an id starting with {id:?} ({})",
                found.len(),
                history::file(&state).display()
            );
            return Ok(1);
        };
        if a.json {
            outln!("{}", json(Stream::Stdout, &serde_json::to_string(r)?));
        } else {
            crate::cli::term::print_lines(&whole(r));
        }
        return Ok(0);
    }
    let skip = match a.count {
        0 => 0,
        n => records.len().saturating_sub(n),
    };
    if records.is_empty() {
        eprintln!(
            "efr-sandbox: no calls in the log ({})",
            history::file(&state).display()
        );
        return Ok(0);
    }
    if !a.json {
        outln!(
            "{:<12}  {:<16}  {:<11}  {:>8}  {:>7}  {:<24}  LINE",
            "ID",
            "TIME",
            "STATUS",
            "DURATION",
            "REFUSED",
            "PROJECT"
        );
    }
    for r in &records[skip..] {
        if a.json {
            outln!("{}", json(Stream::Stdout, &serde_json::to_string(r)?));
        } else {
            outln!("{}", inline(Stream::Stdout, &row(r)));
        }
    }
    Ok(0)
}

/// `time` (seconds since the epoch) in the local time zone, to the minute.
fn local_time(time: u64) -> String {
    i64::try_from(time)
        .ok()
        .and_then(|t| jiff::Timestamp::from_second(t).ok())
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        })
        .unwrap_or_else(|| time.to_string())
}

/// A duration in milliseconds, in the largest unit that reads well.
fn duration(ms: u64) -> String {
    match ms {
        0..=9_999 => format!("{ms}ms"),
        10_000..=599_999 => format!("{}s", ms / 1000),
        _ => format!("{}m", ms / 60_000),
    }
}

/// `text` cut to `max` characters, the cut marked.
fn cut(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut s: String = one_line.chars().take(max.saturating_sub(3)).collect();
    s.push_str("...");
    s
}

/// The project column: the last component of the first project root.
fn project(r: &Record) -> String {
    let p = r.projects.first().map(String::as_str).unwrap_or("-");
    let name = std::path::Path::new(p)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.to_string());
    let more = if r.projects.len() > 1 { "+" } else { "" };
    cut(&format!("{name}{more}"), 24)
}

/// One row of the table.
fn row(r: &Record) -> String {
    format!(
        "{:<12}  {:<16}  {:<11}  {:>8}  {:>7}  {:<24}  {}",
        r.id,
        local_time(r.time),
        r.status(),
        duration(r.duration_ms),
        r.refused.len() + r.refused_more,
        project(r),
        cut(&r.line, LINE_COLUMN)
    )
}

/// One record whole, a field a line.
fn whole(r: &Record) -> String {
    let mut s = String::new();
    let mut field = |k: &str, v: &str| s.push_str(&format!("{k:<13} {v}\n"));
    field("id", &r.id);
    field("time", &local_time(r.time));
    if let Some(c) = &r.call_id {
        field("call id", c);
    }
    field(
        "status",
        &format!("{} (exit status {})", r.status(), r.exit_status),
    );
    field("duration", &duration(r.duration_ms));
    field("line", &r.line);
    if let Some(c) = &r.cwd {
        field("cwd", c);
    }
    for p in &r.projects {
        field("project", p);
    }
    for g in &r.grants {
        let g = crate::cli::grants::grant_arg(g)
            .unwrap_or_else(|| serde_json::to_string(g).unwrap_or_default());
        field("grant", &g);
    }
    if let Some(c) = &r.conversation {
        field("conversation", c);
    }
    let mut how = Vec::new();
    if r.unsandboxed {
        how.push("unsandboxed");
    }
    if r.background {
        how.push("a background job");
    }
    if r.stopped {
        how.push("stopped before its end");
    }
    if !how.is_empty() {
        field("how", &how.join(", "));
    }
    if let Some(e) = &r.setup_error {
        field("setup error", e);
    }
    for x in &r.refused {
        field("refused", x);
    }
    if r.refused_more > 0 {
        field("refused", &format!("and {} more", r.refused_more));
    }
    for n in &r.env_dropped {
        field("not passed", &format!("the variable {n}"));
    }
    for u in &r.credentials_used {
        field(
            "credential",
            &format!(
                "{} sent to {} {} {} ({}x)",
                u.name, u.host, u.method, u.path, u.count
            ),
        );
    }
    s
}
