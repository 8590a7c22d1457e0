//! The log of xdg-dbus-proxy (`--log`, on its stdout) read into `bus_refused` entries.
//!
//! With `--log` the proxy prints one header line per message a client sends, then, when the
//! filter drops it, one verdict line:
//!
//! ```text
//! C4: -> org.example.Refused call org.example.Iface.Ping at /org/example/Obj
//! *DENIED* (ping)
//! ```
//!
//! `*DENIED*` (the name is visible, the call is not allowed) and `*HIDDEN*` (the name is not
//! even visible) are refusals; ` (ping)` says the client was sent an error reply. Every
//! other line (replies, signals, `B` lines of the bus side, the proxy's warnings) is read
//! and passed over. The reader takes any bytes: a line longer than [`MAX_LINE`] is cut,
//! names and members are cut to [`MAX_FIELD`] bytes, and at most [`MAX_DISTINCT`] distinct
//! refusals are kept (the rest only counted), so a call that floods the log cannot grow the
//! service's memory.

use efr_sandbox_wire::{Bus, BusRefused};

/// The longest line read; the rest of a longer line is passed over.
pub const MAX_LINE: usize = 4096;
/// The longest name, member or path kept (a D-Bus name is at most 255 bytes).
pub const MAX_FIELD: usize = 255;
/// Distinct refusals kept; more are only counted.
pub const MAX_DISTINCT: usize = 256;
/// Entries of `bus_refused` in a summary.
pub const MAX_SUMMARY: usize = 16;

/// A call the client sent, waiting for its verdict line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    name: String,
    member: Option<String>,
    path: Option<String>,
}

/// Reads a proxy log, line by line or in chunks of any size.
#[derive(Debug, Clone)]
pub struct BusLog {
    bus: Bus,
    partial: Vec<u8>,
    /// The partial line was longer than [`MAX_LINE`]: pass over the rest of it.
    overlong: bool,
    pending: Option<Pending>,
    refused: Vec<BusRefused>,
    /// Refusals not kept in `refused` (over [`MAX_DISTINCT`]).
    uncounted: u32,
}

impl BusLog {
    /// A reader of the log of `bus`'s filter, before its first byte.
    pub fn new(bus: Bus) -> BusLog {
        BusLog {
            bus,
            partial: Vec::new(),
            overlong: false,
            pending: None,
            refused: Vec::new(),
            uncounted: 0,
        }
    }

    /// Feeds the next bytes of the log (any split, any bytes).
    pub fn feed(&mut self, bytes: &[u8]) {
        for chunk in bytes.split_inclusive(|b| *b == b'\n') {
            let (body, ends) = match chunk.strip_suffix(b"\n") {
                Some(b) => (b, true),
                None => (chunk, false),
            };
            if !self.overlong {
                let room = MAX_LINE - self.partial.len();
                if body.len() > room {
                    self.partial.extend_from_slice(&body[..room]);
                    self.overlong = true;
                } else {
                    self.partial.extend_from_slice(body);
                }
            }
            if ends {
                let line = std::mem::take(&mut self.partial);
                self.overlong = false;
                self.line(&line);
            }
        }
    }

    /// The end of the log: a last line without its newline is read.
    pub fn finish(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.overlong = false;
            self.line(&line);
        }
        self.pending = None;
    }

    /// Reads one whole line (without its newline).
    pub fn line(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(&line[..line.len().min(MAX_LINE)]);
        let line = line.trim_end_matches('\r');
        if let Some(verdict) = line.strip_prefix('*') {
            let refused = verdict.starts_with("DENIED*") || verdict.starts_with("HIDDEN*");
            if let (true, Some(p)) = (refused, self.pending.take()) {
                self.count(p);
            }
            return;
        }
        if let Some(p) = header(line) {
            self.pending = p;
        }
    }

    fn count(&mut self, p: Pending) {
        if let Some(r) = self
            .refused
            .iter_mut()
            .find(|r| r.name == p.name && r.member == p.member && r.path == p.path)
        {
            r.count = r.count.saturating_add(1);
        } else if self.refused.len() < MAX_DISTINCT {
            self.refused.push(BusRefused {
                bus: self.bus,
                name: p.name,
                member: p.member,
                path: p.path,
                count: 1,
                cut: None,
            });
        } else {
            self.uncounted = self.uncounted.saturating_add(1);
        }
    }

    /// Every refusal kept, in first-seen order.
    pub fn refused(&self) -> &[BusRefused] {
        &self.refused
    }

    /// `(bus_refused, bus_refused_more)`: the first [`MAX_SUMMARY`] refusals seen, and the
    /// count of the refused messages they leave out.
    pub fn summary(&self) -> (Vec<BusRefused>, u32) {
        let listed: Vec<BusRefused> = self.refused.iter().take(MAX_SUMMARY).cloned().collect();
        let more = self
            .refused
            .iter()
            .skip(MAX_SUMMARY)
            .fold(self.uncounted, |n, r| n.saturating_add(r.count));
        (listed, more)
    }
}

/// A client's header line: `Some(Some(call))` for a method call, `Some(None)` for another
/// message of the client (its verdict is not a call's), `None` for any other line.
fn header(line: &str) -> Option<Option<Pending>> {
    let rest = line.strip_prefix('C')?;
    let (serial, rest) = rest.split_once(": -> ")?;
    if serial.is_empty() || !serial.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let Some((dest, rest)) = rest.split_once(" call ") else {
        return Some(None);
    };
    // `IFACE.MEMBER at PATH`; a path holds no space, a member neither.
    let (member, path) = match rest.rsplit_once(" at ") {
        Some((m, p)) => (m, p),
        None => (rest, ""),
    };
    let member = member.trim_start_matches('.');
    let field = |s: &str| -> Option<String> {
        let s = s.trim();
        (!s.is_empty()).then(|| cut(s).to_string())
    };
    Some(Some(Pending {
        name: field(dest).unwrap_or_else(|| "(no dest)".into()),
        member: field(member),
        path: field(path),
    }))
}

/// `s` cut to at most [`MAX_FIELD`] bytes, at a character boundary.
fn cut(s: &str) -> &str {
    if s.len() <= MAX_FIELD {
        return s;
    }
    let mut n = MAX_FIELD;
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(log: &str) -> BusLog {
        let mut l = BusLog::new(Bus::Session);
        l.feed(log.as_bytes());
        l.finish();
        l
    }

    #[test]
    fn denied_and_hidden_calls_are_counted() {
        let l = read(
            "C1: -> org.freedesktop.DBus call org.freedesktop.DBus.Hello at /org/freedesktop/DBus\n\
             B1: <- org.freedesktop.DBus return from C1\n\
             C2: -> org.example.Refused call org.example.Iface.Ping at /org/example/Obj\n\
             *DENIED* (ping)\n\
             C3: -> org.example.Allowed call org.example.Iface.Ping at /\n\
             B5: <- :1.3 return from C3\n\
             C4: -> org.example.Refused call org.example.Iface.Ping at /org/example/Obj\n\
             Filtering message due to arg0 org.example.Refused, policy: 0 (required 1)\n\
             *DENIED* (ping)\n\
             C5: -> org.freedesktop.systemd1 call org.freedesktop.systemd1.Manager.StartTransientUnit at /org/freedesktop/systemd1\n\
             *HIDDEN* (ping)\n\
             C6: -> org.example.Quiet signal org.example.Iface.Sig at /x\n\
             *DENIED*\n",
        );
        let r = l.refused();
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].name, "org.example.Refused");
        assert_eq!(r[0].member.as_deref(), Some("org.example.Iface.Ping"));
        assert_eq!(r[0].path.as_deref(), Some("/org/example/Obj"));
        assert_eq!(r[0].count, 2);
        assert_eq!(r[1].name, "org.freedesktop.systemd1");
        assert_eq!(r[1].count, 1);
        assert_eq!(r[1].bus, Bus::Session);
    }

    #[test]
    fn a_verdict_without_its_call_and_split_lines() {
        let mut l = BusLog::new(Bus::System);
        l.feed(b"*DENIED*\nC9: -> a.b call c.D at /p");
        l.feed(b"\n*HID");
        l.feed(b"DEN*\n");
        l.finish();
        assert_eq!(l.refused().len(), 1);
        assert_eq!(l.refused()[0].name, "a.b");
        assert_eq!(l.refused()[0].bus, Bus::System);
    }

    #[test]
    fn summary_keeps_sixteen_and_counts_the_rest() {
        let mut log = String::new();
        for i in 0..20 {
            for _ in 0..=i % 3 {
                log += &format!("C{i}: -> org.n{i} call i.M at /\n*DENIED* (ping)\n");
            }
        }
        let l = read(&log);
        let (listed, more) = l.summary();
        assert_eq!(listed.len(), MAX_SUMMARY);
        assert_eq!(listed[0].name, "org.n0");
        // n16..n19 are left out: counts 2, 3, 1, 2.
        assert_eq!(more, 8);
    }

    #[test]
    fn bounded_on_floods_and_garbage() {
        let mut l = BusLog::new(Bus::Session);
        // A line over the bound is cut (its verdict still read), a long name cut.
        let long = "x".repeat(10 * MAX_LINE);
        l.feed(format!("C1: -> {long} call a.B at /\n*DENIED*\n").as_bytes());
        assert!(l.refused().is_empty());
        let name = "y".repeat(1000);
        l.feed(format!("C1: -> {name} call a.B at /\n*DENIED*\n").as_bytes());
        assert_eq!(l.refused()[0].name.len(), MAX_FIELD);
        for i in 0..(MAX_DISTINCT + 50) {
            l.feed(format!("C1: -> n{i} call a.B at /\n*DENIED*\n").as_bytes());
        }
        assert_eq!(l.refused().len(), MAX_DISTINCT);
        let (listed, more) = l.summary();
        assert_eq!(listed.len(), MAX_SUMMARY);
        assert_eq!(more as usize, MAX_DISTINCT + 51 - MAX_SUMMARY);
        l.feed(&[0xff, 0xfe, b'\n', b'C', b':', b'\n', b'*', b'\n']);
        l.feed("C1: -> é call  at \n*DENIED*\n".as_bytes());
        l.finish();
    }
}
