//! What of the line's terminal output reaches the user's terminal: the one reviewed list of
//! escape sequences that act outside the terminal's screen, and the stream filter that
//! drops them.
//!
//! A terminal does more than draw: some sequences write the clipboard, read it back into
//! the input, change the font, move or resize the window, print, download files, program
//! the function keys, or echo text of the program's choice back as if the user typed it
//! (which lands in the user's shell once the call has ended). The call gets its own pty,
//! so whatever the terminal answers goes into the call's input, but the terminal itself is
//! the user's, and it outlives the call.
//!
//! The rule: text, C0 and C1 controls that act on the screen, ESC sequences and CSI
//! sequences pass, except the CSI finals below; OSC commands pass only when on
//! [`OSC_ALLOWED`]; DCS strings pass only as sixel graphics; SOS, PM and APC strings never
//! pass. A dropped sequence is dropped whole (introducer to terminator), so the terminal
//! never sees its beginning and stays in step with the filter.
//!
//! Every byte that starts a sequence in some terminal starts one for the filter, in every
//! state: ESC, CAN and SUB, and the C1 introducers both UTF-8 encoded (U+0090 DCS, U+0098
//! SOS, U+009B CSI, U+009C ST, U+009D OSC, U+009E PM, U+009F APC, as xterm and VTE take
//! them in UTF-8 mode) and as raw 8-bit bytes that are not part of a UTF-8 character. What
//! is not covered: a terminal in an 8-bit (non-UTF-8) mode that takes a raw C1 byte inside
//! what is a valid UTF-8 character as a control (xterm with `eightBitControls` in a Latin-1
//! locale); such terminals are not supported.

/// OSC commands let through: (number, what it is, why it may reach the user's terminal).
/// Every other OSC command is dropped whole (see [`DROPPED`] for the notable ones).
pub const OSC_ALLOWED: &[(u32, &str, &str)] = &[
    (
        0,
        "icon name and window title",
        "shells and editors set it; it is shown, never acted on (reading it back, CSI 21 t, is refused)",
    ),
    (1, "icon name", "as OSC 0"),
    (2, "window title", "as OSC 0"),
    (
        4,
        "palette colour: set or query",
        "colours of the screen; the answer is a fixed-form colour value, no text of the program's",
    ),
    (
        8,
        "hyperlink",
        "ls, gcc, cargo and man pages link text to URLs; the terminal opens one only when the user clicks it",
    ),
    (
        10,
        "default foreground colour: set or query",
        "editors and pagers ask it to choose a light or dark theme (vim, neovim, bat, delta); fixed-form answer",
    ),
    (11, "default background colour: set or query", "as OSC 10"),
    (12, "cursor colour: set or query", "as OSC 10"),
    (13, "pointer foreground colour", "as OSC 10"),
    (14, "pointer background colour", "as OSC 10"),
    (15, "Tektronix foreground colour", "as OSC 10"),
    (16, "Tektronix background colour", "as OSC 10"),
    (17, "highlight background colour", "as OSC 10"),
    (18, "Tektronix cursor colour", "as OSC 10"),
    (19, "highlight foreground colour", "as OSC 10"),
    (104, "reset palette colours", "undoes OSC 4"),
    (110, "reset default foreground", "undoes OSC 10"),
    (111, "reset default background", "undoes OSC 11"),
    (112, "reset cursor colour", "undoes OSC 12"),
    (113, "reset pointer foreground", "undoes OSC 13"),
    (114, "reset pointer background", "undoes OSC 14"),
    (115, "reset Tektronix foreground", "undoes OSC 15"),
    (116, "reset Tektronix background", "undoes OSC 16"),
    (117, "reset highlight background", "undoes OSC 17"),
    (118, "reset Tektronix cursor", "undoes OSC 18"),
    (119, "reset highlight foreground", "undoes OSC 19"),
    (
        133,
        "prompt and command marks (FinalTerm)",
        "marks where prompts and output begin for the terminal's scrollback; carries no data it acts on",
    ),
];

/// XTWINOPS (`CSI Ps ; ... t`, no private marker or intermediate) let through, by `Ps`:
/// (value, what it is). The others are dropped: 1-10 move, resize, iconify, raise, lower or
/// maximize the window (outside the screen), 20 and 21 report the icon label and the
/// window title (text the program set, echoed into the input: typed into the user's shell
/// when it arrives after the call), 24 and above resize the window.
pub const WINOPS_ALLOWED: &[(u32, &str)] = &[
    (
        11,
        "report whether the window is iconified (fixed-form answer)",
    ),
    (13, "report the window position (numbers)"),
    (
        14,
        "report the text area size in pixels (numbers; image viewers)",
    ),
    (15, "report the screen size in pixels (numbers)"),
    (
        16,
        "report the character cell size in pixels (numbers; sixel tools)",
    ),
    (18, "report the text area size in characters (numbers)"),
    (19, "report the screen size in characters (numbers)"),
    (
        22,
        "push the title on the terminal's stack (vim saves the title so)",
    ),
    (23, "pop the title from the stack (vim restores it so)"),
];

/// What is dropped and why: the rules of the filter (first column: the sequence).
pub const DROPPED: &[(&str, &str)] = &[
    (
        "OSC 52",
        "writes the user's clipboard, and with `?` reads it back into the call's input",
    ),
    (
        "OSC 50",
        "sets the terminal's font, and with `?` reports it (font-name reports were an xterm injection vector)",
    ),
    ("OSC 3", "sets an X property of the terminal's window"),
    (
        "OSC 5, 6, 105, 106",
        "special colours and their modes: not needed by common tools (default deny)",
    ),
    (
        "OSC 7",
        "tells the terminal the current directory: new tabs open there (a path of the call's view)",
    ),
    (
        "OSC 9, 99, 777",
        "desktop notifications (iTerm2/ConEmu, kitty, rxvt); ConEmu's OSC 9 also runs actions",
    ),
    ("OSC 22", "sets the mouse pointer's shape (default deny)"),
    (
        "OSC 46",
        "xterm: changes the log file the terminal writes on the host",
    ),
    (
        "OSC 51",
        "Emacs vterm / vim terminal commands: evaluate code in the editor",
    ),
    (
        "OSC 633",
        "VS Code shell integration: sets properties such as the terminal's working directory",
    ),
    (
        "OSC 1337",
        "iTerm2: downloads files to the user's disk (File=), sets user variables, steals focus, copies to the clipboard",
    ),
    (
        "OSC 5113, 5522",
        "kitty: file transfer to and from the user's disk, clipboard",
    ),
    ("any other OSC", "not on the allow list: dropped by default"),
    (
        "CSI ... t (XTWINOPS) not in WINOPS_ALLOWED",
        "moves, resizes, (de)iconifies the window; 20/21 echo the title into the input",
    ),
    (
        "CSI ... i (MC, DEC MC)",
        "media copy: sends the screen or the output to the host's printer command",
    ),
    (
        "DCS $ q (DECRQSS)",
        "asks a setting back; echoed the request into the input (xterm, CVE-2008-2383)",
    ),
    (
        "DCS + q, DCS + p (XTGETTCAP, XTSETTCAP)",
        "read and set the terminal's termcap entries",
    ),
    (
        "DCS ... | (DECUDK)",
        "programs the function keys: a later key press types the program's text into the user's shell",
    ),
    (
        "DCS $ p, DCS $ t (DECRSTS, DECRSPS)",
        "restore terminal state from data the program chose",
    ),
    (
        "DCS tmux; ...",
        "tmux and screen pass-through: hands any sequence (OSC 52 among them) to the outer terminal",
    ),
    ("any other DCS", "only sixel graphics (DCS P...q) pass"),
    (
        "APC (ESC _)",
        "kitty's graphics protocol can make the terminal read files and shared memory of the host (t=f, t=s)",
    ),
    (
        "PM (ESC ^), SOS (ESC X)",
        "no use in terminals of today; dropped whole",
    ),
];

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;
/// Most bytes of a sequence the filter holds before deciding (longer ones are dropped).
const MAX_HOLD: usize = 512;
/// Most digits of an OSC number.
const MAX_OSC_DIGITS: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    /// After ESC (held, with intermediates).
    Esc,
    /// In a CSI sequence (held).
    Csi,
    /// In an OSC command's number (held).
    OscNum,
    /// In a DCS sequence's parameters (held).
    DcsHead,
    /// In a string (OSC, DCS, SOS, PM, APC): passed or dropped.
    Str {
        pass: bool,
        osc: bool,
    },
    /// An ESC in a string, not yet passed on: ST when `\` follows.
    StrEsc {
        pass: bool,
        osc: bool,
    },
}

/// The stream filter of the line's output (state kept across chunks).
#[derive(Debug)]
pub struct Filter {
    state: State,
    /// The sequence being decided.
    hold: Vec<u8>,
    /// Bytes of the introducer at the start of `hold`.
    intro: usize,
    /// The held sequence went over [`MAX_HOLD`]: it is dropped.
    overlong: bool,
    /// UTF-8 continuation bytes still expected.
    need: u8,
    /// A 0xC2 byte not passed on yet (it may begin a UTF-8 encoded C1 control).
    c2: bool,
}

impl Default for Filter {
    fn default() -> Self {
        Filter::new()
    }
}

/// The length of the prefix of `s` with no ESC and no byte >= 0x80 (a word at a time).
fn plain_prefix(s: &[u8]) -> usize {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    const ESCS: u64 = 0x1b1b_1b1b_1b1b_1b1b;
    let mut i = 0;
    while i + 8 <= s.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[i..i + 8]);
        let w = u64::from_ne_bytes(w);
        let x = w ^ ESCS;
        // A zero byte in `x` (an ESC in `w`), exactly: (x - 1s) & !x & high bits.
        if w & HIGH != 0 || x.wrapping_sub(ONES) & !x & HIGH != 0 {
            break;
        }
        i += 8;
    }
    while i < s.len() && s[i] != ESC && s[i] < 0x80 {
        i += 1;
    }
    i
}

/// The length of the prefix of `s` that is text: no ESC, and whole UTF-8 characters none
/// of which is a C1 control (the rest, even a character cut by the end of `s`, goes byte by
/// byte).
fn text_prefix(s: &[u8]) -> usize {
    let mut i = 0;
    let mut ascii = 0;
    while i < s.len() {
        let b = s[i];
        if b < 0x80 {
            if b == ESC {
                return i;
            }
            i += 1;
            ascii += 1;
            // A long ASCII run: the rest of it a word at a time.
            if ascii == 8 {
                i += plain_prefix(&s[i..]);
                ascii = 0;
            }
            continue;
        }
        ascii = 0;
        let n = match b {
            0xc2 if s.get(i + 1).is_some_and(|&c| c >= 0xa0) => 2,
            0xc3..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return i,
        };
        match s.get(i + 1..i + n) {
            Some(cont) if cont.iter().all(|&c| (0x80..=0xbf).contains(&c)) => i += n,
            _ => return i,
        }
    }
    i
}

/// The length of the 7-bit CSI sequence at the start of `s` when all of it is there and
/// plain (parameters and intermediates, then the final byte: no control inside, short).
fn whole_csi(s: &[u8]) -> Option<usize> {
    if s.len() < 3 || s[0] != ESC || s[1] != b'[' {
        return None;
    }
    let end = s.len().min(64);
    let mut j = 2;
    while j < end && (0x20..=0x3f).contains(&s[j]) {
        j += 1;
    }
    (j < end && (0x40..=0x7e).contains(&s[j])).then_some(j + 1)
}

fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > MAX_OSC_DIGITS {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Whether OSC `n` is let through.
pub fn osc_allowed(n: u32) -> bool {
    OSC_ALLOWED.iter().any(|&(m, _, _)| m == n)
}

/// Whether the CSI sequence with parameters and intermediates `params` and final `fin` is
/// let through.
fn csi_allowed(params: &[u8], fin: u8) -> bool {
    match fin {
        b'i' => false,
        b't' => {
            let marked = params
                .iter()
                .any(|&c| matches!(c, 0x20..=0x2f | b'<' | b'=' | b'>' | b'?'));
            if marked {
                // Private markers or intermediates: title modes (CSI > t), DECSWBV (CSI SP t),
                // DECRARA (CSI $ t): screen and bell, nothing outside.
                return true;
            }
            // Sub-parameters (`:`) count as separators: a terminal may read `21:1` as 21.
            let first = params
                .split(|&c| c == b';' || c == b':')
                .next()
                .unwrap_or(&[]);
            number(first).is_some_and(|n| WINOPS_ALLOWED.iter().any(|&(m, _)| m == n))
        }
        _ => true,
    }
}

/// Whether the DCS sequence with parameters and intermediates `params` and final `fin` is
/// let through: sixel graphics only.
fn dcs_allowed(params: &[u8], fin: u8) -> bool {
    fin == b'q' && params.iter().all(|&c| c.is_ascii_digit() || c == b';')
}

impl Filter {
    /// A filter at the start of the line's output: no sequence held.
    pub fn new() -> Filter {
        Filter {
            state: State::Ground,
            hold: Vec::with_capacity(64),
            intro: 0,
            overlong: false,
            need: 0,
            c2: false,
        }
    }

    /// Filters `input`, appending what may reach the terminal to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut i = 0;
        while i < input.len() {
            if self.state == State::Ground && self.need == 0 && !self.c2 {
                // Fast paths (the same decisions as byte by byte, which the tests compare):
                // text, and CSI sequences that are all in this chunk, passed on in one run.
                let mut run = i;
                loop {
                    i += text_prefix(&input[i..]);
                    let Some(n) = whole_csi(&input[i..]) else {
                        break;
                    };
                    if !csi_allowed(&input[i + 2..i + n - 1], input[i + n - 1]) {
                        out.extend_from_slice(&input[run..i]);
                        run = i + n;
                    }
                    i += n;
                }
                out.extend_from_slice(&input[run..i]);
                if i == input.len() {
                    break;
                }
            }
            let b = input[i];
            i += 1;
            self.decode(b, out);
        }
    }

    /// The end of the output: a held sequence is dropped, a string let through is closed
    /// (so the terminal does not take what the user's shell prints next as part of it).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.c2 {
            self.c2 = false;
            self.byte(0xc2, out);
        }
        if let State::Str { pass: true, .. } | State::StrEsc { pass: true, .. } = self.state {
            out.extend_from_slice(&[ESC, b'\\']);
        }
        self.hold.clear();
        self.overlong = false;
        self.need = 0;
        self.state = State::Ground;
    }

    /// One byte: UTF-8 decoding, to tell C1 controls from text.
    fn decode(&mut self, b: u8, out: &mut Vec<u8>) {
        if self.c2 {
            self.c2 = false;
            if (0x80..=0x9f).contains(&b) {
                self.c1(b, &[0xc2, b], out);
                return;
            }
            self.byte(0xc2, out);
            if (0xa0..=0xbf).contains(&b) {
                self.byte(b, out);
                return;
            }
        }
        if self.need > 0 {
            if (0x80..=0xbf).contains(&b) {
                self.need -= 1;
                self.byte(b, out);
                return;
            }
            self.need = 0;
        }
        match b {
            0xc2 => self.c2 = true,
            0xc3..=0xdf => {
                self.need = 1;
                self.byte(b, out);
            }
            0xe0..=0xef => {
                self.need = 2;
                self.byte(b, out);
            }
            0xf0..=0xf4 => {
                self.need = 3;
                self.byte(b, out);
            }
            // Not part of a UTF-8 character: an 8-bit C1 control.
            0x80..=0x9f => self.c1(b, &[b], out),
            _ => self.byte(b, out),
        }
    }

    fn start(&mut self, state: State, intro: &[u8]) {
        self.hold.clear();
        self.hold.extend_from_slice(intro);
        self.intro = self.hold.len();
        self.overlong = false;
        self.state = state;
    }

    fn push_held(&mut self, b: u8) {
        if self.hold.len() < MAX_HOLD {
            self.hold.push(b);
        } else {
            self.overlong = true;
        }
    }

    fn ground(&mut self) {
        self.hold.clear();
        self.overlong = false;
        self.state = State::Ground;
    }

    /// Decides a held OSC number: the string that follows passes or is dropped.
    fn open_osc(&mut self, out: &mut Vec<u8>) {
        let pass = !self.overlong && number(&self.hold[self.intro..]).is_some_and(osc_allowed);
        if pass {
            out.extend_from_slice(&self.hold);
        }
        self.hold.clear();
        self.state = State::Str { pass, osc: true };
    }

    /// A byte that is not a C1 control: fed to the state's handler, again while the handler
    /// says the byte is the next state's to read.
    fn byte(&mut self, b: u8, out: &mut Vec<u8>) {
        loop {
            let again = match self.state {
                State::Ground => {
                    if b == ESC {
                        self.start(State::Esc, &[ESC]);
                    } else {
                        out.push(b);
                    }
                    false
                }
                State::Esc => self.esc_byte(b, out),
                State::Csi | State::DcsHead => self.csi_byte(b, out),
                State::OscNum => self.osc_num_byte(b, out),
                State::Str { pass, osc } => {
                    self.str_byte(b, pass, osc, out);
                    false
                }
                State::StrEsc { pass, .. } => self.str_esc_byte(b, pass, out),
            };
            if !again {
                return;
            }
        }
    }

    /// A byte after an ESC: a CSI, OSC or DCS opened, a string dropped, an escape sequence
    /// held or ended. True when the byte ends the sequence unread (read it again).
    fn esc_byte(&mut self, b: u8, out: &mut Vec<u8>) -> bool {
        match b {
            b'[' if self.hold.len() == 1 => {
                self.hold.push(b);
                self.intro = 2;
                self.state = State::Csi;
            }
            b']' if self.hold.len() == 1 => {
                self.hold.push(b);
                self.intro = 2;
                self.state = State::OscNum;
            }
            b'P' if self.hold.len() == 1 => {
                self.hold.push(b);
                self.intro = 2;
                self.state = State::DcsHead;
            }
            b'X' | b'^' | b'_' if self.hold.len() == 1 => {
                self.hold.clear();
                self.state = State::Str {
                    pass: false,
                    osc: false,
                };
            }
            0x20..=0x2f => {
                if self.hold.len() < 16 {
                    self.hold.push(b);
                } else {
                    self.overlong = true;
                }
            }
            0x30..=0x7e => {
                if !self.overlong {
                    out.extend_from_slice(&self.hold);
                    out.push(b);
                }
                self.ground();
            }
            ESC => self.start(State::Esc, &[ESC]),
            CAN | SUB => {
                self.ground();
                out.push(b);
            }
            // Executed by the terminal in the middle of the sequence.
            0x00..=0x1f => out.push(b),
            0x7f => {}
            _ => {
                self.ground();
                return true;
            }
        }
        false
    }

    /// A byte of a CSI sequence or of a DCS's head. True when the byte ends the sequence
    /// unread (read it again).
    fn csi_byte(&mut self, b: u8, out: &mut Vec<u8>) -> bool {
        let csi = self.state == State::Csi;
        match b {
            0x20..=0x3f => self.push_held(b),
            0x40..=0x7e => {
                let params = &self.hold[self.intro..];
                if csi {
                    if !self.overlong && csi_allowed(params, b) {
                        out.extend_from_slice(&self.hold);
                        out.push(b);
                    }
                    self.ground();
                } else {
                    let pass = !self.overlong && dcs_allowed(params, b);
                    if pass {
                        out.extend_from_slice(&self.hold);
                        out.push(b);
                    }
                    self.hold.clear();
                    self.state = State::Str { pass, osc: false };
                }
            }
            ESC => self.start(State::Esc, &[ESC]),
            CAN | SUB => {
                self.ground();
                if csi {
                    out.push(b);
                }
            }
            // Executed inside a CSI sequence; ignored inside a DCS one.
            0x00..=0x1f => {
                if csi {
                    out.push(b);
                }
            }
            0x7f => {}
            _ => {
                self.ground();
                return true;
            }
        }
        false
    }

    /// A byte of an OSC's number. True when the byte ends the number unread (read it
    /// again, in the string's state).
    fn osc_num_byte(&mut self, b: u8, out: &mut Vec<u8>) -> bool {
        match b {
            b'0'..=b'9' => {
                if self.hold.len() - self.intro < MAX_OSC_DIGITS {
                    self.hold.push(b);
                } else {
                    self.overlong = true;
                }
            }
            b';' => {
                self.open_osc(out);
                if let State::Str { pass: true, .. } = self.state {
                    out.push(b);
                }
            }
            // A command with no argument (OSC 104 BEL), or one cut short.
            BEL | ESC | CAN | SUB => {
                self.open_osc(out);
                return true;
            }
            _ => {
                self.hold.clear();
                self.state = State::Str {
                    pass: false,
                    osc: true,
                };
            }
        }
        false
    }

    /// A byte of a string (passed when `pass`), BEL ending an OSC's.
    fn str_byte(&mut self, b: u8, pass: bool, osc: bool, out: &mut Vec<u8>) {
        match b {
            BEL if osc => {
                if pass {
                    out.push(b);
                }
                self.ground();
            }
            ESC => self.state = State::StrEsc { pass, osc },
            CAN | SUB => {
                if pass {
                    out.push(b);
                }
                self.ground();
            }
            _ => {
                if pass {
                    out.push(b);
                }
            }
        }
    }

    /// The byte after an ESC inside a string. True when it begins a new sequence (read it
    /// again after the ESC).
    fn str_esc_byte(&mut self, b: u8, pass: bool, out: &mut Vec<u8>) -> bool {
        if pass {
            // ST, or the string ends here for the terminal: closed with ST either way, and
            // whatever the ESC begins is filtered anew.
            out.extend_from_slice(&[ESC, b'\\']);
        }
        if b == b'\\' {
            self.ground();
            false
        } else {
            self.start(State::Esc, &[ESC]);
            true
        }
    }

    /// A C1 control (`raw`: its bytes as written, 8-bit or UTF-8).
    fn c1(&mut self, code: u8, raw: &[u8], out: &mut Vec<u8>) {
        const ST: u8 = 0x9c;
        match self.state {
            State::Ground => {}
            State::Str { pass, .. } => {
                if pass {
                    out.extend_from_slice(if code == ST { raw } else { &[ESC, b'\\'] });
                }
                self.ground();
                if code == ST {
                    return;
                }
            }
            State::StrEsc { pass, .. } => {
                if pass {
                    out.extend_from_slice(&[ESC, b'\\']);
                }
                self.ground();
            }
            State::OscNum => {
                self.open_osc(out);
                return self.c1(code, raw, out);
            }
            State::Esc | State::Csi | State::DcsHead => self.ground(),
        }
        match code {
            0x9b => self.start(State::Csi, raw),
            0x9d => self.start(State::OscNum, raw),
            0x90 => self.start(State::DcsHead, raw),
            0x98 | 0x9e | 0x9f => {
                self.hold.clear();
                self.state = State::Str {
                    pass: false,
                    osc: false,
                };
            }
            // The other C1 controls (NEL, IND, RI, HTS, ...) act on the screen only.
            _ => out.extend_from_slice(raw),
        }
    }
}

/// Text of the call's shown inside a line of the CLI's own (a job's command line, a path
/// the line chose, a refusal's summary), for a terminal: every control character, C0
/// (`\n`, `\t` and ESC included), DEL and C1 (U+0080 to U+009F, which a UTF-8 terminal
/// takes as 8-bit controls: U+009B is CSI), written as a visible escape (`\e`, `\n`,
/// `\t`, `\r`, `\xNN`, `\u{NN}`). Inline text has no business acting on the terminal at all: where the stream
/// filter lets colours and titles through (a program's output), a line of the CLI's own
/// lets nothing through, nor a cursor move that would paint over what the CLI says.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// JSON text (serde's, which escapes only C0 controls, `"` and `\`) for a terminal: DEL
/// and the C1 controls written as `\u00NN` escapes too, so that the text is the same JSON
/// and a UTF-8 terminal takes none of it as a control (U+009B is CSI, U+009D OSC).
pub fn escape_json_controls(json: &str) -> std::borrow::Cow<'_, str> {
    let c1 = |c: char| ('\u{7f}'..='\u{9f}').contains(&c);
    if !json.chars().any(c1) {
        return std::borrow::Cow::Borrowed(json);
    }
    std::borrow::Cow::Owned(
        json.chars()
            .map(|c| {
                if c1(c) {
                    format!("\\u{:04x}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Where `out` (the filter's output) holds the start of a sequence that must not reach the
/// terminal, found by a parser of its own (as a terminal reads the 7-bit and UTF-8 forms:
/// C0 controls inside a CSI sequence are executed and skipped) with the same allow lists. For the tests and the
/// fuzz target (`fuzz/fuzz_targets/pty_filter.rs`): the filter's output must never have one.
pub fn first_leak(out: &[u8]) -> Option<usize> {
    let n = out.len();
    for i in 0..n {
        let (kind, mut j) = match (out[i], out.get(i + 1).copied()) {
            (ESC, Some(k @ (b'[' | b']' | b'P' | b'X' | b'^' | b'_'))) => (k, i + 2),
            (0xc2, Some(0x9b)) => (b'[', i + 2),
            (0xc2, Some(0x9d)) => (b']', i + 2),
            (0xc2, Some(0x90)) => (b'P', i + 2),
            (0xc2, Some(0x98 | 0x9e | 0x9f)) => (b'_', i + 2),
            _ => continue,
        };
        let bad = match kind {
            b'X' | b'^' | b'_' => true,
            b']' => {
                let start = j;
                while j < n && out[j].is_ascii_digit() {
                    j += 1;
                }
                !number(&out[start..j]).is_some_and(osc_allowed)
            }
            _ => {
                let mut params = Vec::new();
                while j < n {
                    match out[j] {
                        ESC | CAN | SUB => break,
                        0x00..=0x1f if kind == b'[' => {}
                        0x20..=0x3f => params.push(out[j]),
                        _ => break,
                    }
                    j += 1;
                }
                match out.get(j) {
                    Some(&f @ 0x40..=0x7e) if kind == b'[' => !csi_allowed(&params, f),
                    Some(&f @ 0x40..=0x7e) => !dcs_allowed(&params, f),
                    _ => false,
                }
            }
        };
        if bad {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn inline_text_shows_every_control() {
        use super::{escape_controls, escape_json_controls};
        assert_eq!(escape_controls("ls -l src/"), "ls -l src/");
        assert!(matches!(
            escape_controls("plain"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\u{1b}]52;c;eA==\u{7}b\nc\td\r\u{7f}\u{9b}2J"),
            "a\\e]52;c;eA==\\x07b\\nc\\td\\r\\x7f\\u{9b}2J"
        );
        let shown = escape_controls("\u{9d}52;c;x\u{9c}\u{1b}[2A");
        assert!(!shown.chars().any(char::is_control), "{shown}");
        let json = serde_json::to_string("x\u{9b}2J\u{1b}").unwrap();
        let safe = escape_json_controls(&json);
        assert!(!safe.chars().any(char::is_control), "{safe}");
        assert_eq!(
            serde_json::from_str::<String>(&safe).unwrap(),
            "x\u{9b}2J\u{1b}"
        );
    }

    use super::*;

    fn run(input: &[u8]) -> Vec<u8> {
        let mut f = Filter::new();
        let mut out = Vec::new();
        f.feed(input, &mut out);
        f.finish(&mut out);
        // Fed a byte at a time, the result is the same.
        let mut g = Filter::new();
        let mut out1 = Vec::new();
        for &b in input {
            g.feed(&[b], &mut out1);
        }
        g.finish(&mut out1);
        assert_eq!(out, out1, "chunking changed the result of {input:?}");
        out
    }

    fn passes(s: &[u8]) {
        assert_eq!(run(s), s, "{:?}", String::from_utf8_lossy(s));
    }

    fn dropped(s: &[u8]) {
        let mut input = b"a".to_vec();
        input.extend_from_slice(s);
        input.extend_from_slice(b"b");
        assert_eq!(run(&input), b"ab", "{:?}", String::from_utf8_lossy(s));
    }

    #[test]
    fn text_and_screen_sequences_pass() {
        passes(b"plain text\r\n\ttab\x08\x07");
        passes("héllo wörld — ← Н52; 日本語 🎉".as_bytes());
        passes(b"\x1b[31mred\x1b[0m \x1b[1;2H\x1b[2J\x1b[?1049h\x1b[?25l\x1b[K");
        passes(b"\x1b[6n\x1b[c\x1b[>c\x1b[?2004h\x1b[2 q\x1b[>q\x1b[?u");
        passes(b"\x1b(B\x1b)0\x1b7\x1b8\x1bc\x1b=\x1b>\x1bM\x1b#8");
        passes(b"\x1b]0;my title\x07\x1b]2;other\x1b\\");
        passes(b"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\");
        passes(b"\x1b]11;?\x07\x1b]4;1;rgb:ff/00/00\x07\x1b]104\x07\x1b]110\x1b\\");
        passes(b"\x1b]133;A\x07");
        passes(b"\x1b[22;0t\x1b[23;0t\x1b[18t\x1b[14t\x1b[>3t");
        passes(b"\x1bPq#0;2;0;0;0#1!6~\x1b\\");
        passes("\u{85}next line".as_bytes());
        passes(b"100%\x1b[0K\r");
    }

    #[test]
    fn outside_the_screen_is_dropped() {
        dropped(b"\x1b]52;c;c2VjcmV0\x07");
        dropped(b"\x1b]52;c;?\x1b\\");
        dropped(b"\x1b]50;?\x07");
        dropped(b"\x1b]7;file:///home\x07");
        dropped(b"\x1b]1337;File=name=eA==:eA==\x07");
        dropped(b"\x1b]9;notify\x07");
        dropped(b"\x1b]777;notify;a;b\x07");
        dropped(b"\x1b]5113;ac=send\x1b\\");
        dropped(b"\x1b]052;c;x\x07");
        dropped(b"\x1b];title\x07");
        dropped(b"\x1b]L\x07");
        dropped(b"\x1b]99999999999999;x\x07");
        dropped(b"\x1b[21t");
        dropped(b"\x1b[21:1t");
        dropped(b"\x1b[021;0t");
        dropped(b"\x1b[20t");
        dropped(b"\x1b[t");
        dropped(b"\x1b[3;0;0t");
        dropped(b"\x1b[8;100;100t");
        dropped(b"\x1b[5i");
        dropped(b"\x1b[?4i");
        dropped(b"\x1bP$q\"p\x1b\\");
        dropped(b"\x1bP+q544e\x1b\\");
        dropped(b"\x1bP0;1|17/6162\x1b\\");
        // What follows the pass-through's inner sequence is a lone ST: harmless.
        assert_eq!(
            run(b"a\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\b"),
            b"a\x1b\\b".to_vec()
        );
        dropped(b"\x1b_Ga=T,t=f;L2V0Yy9wYXNzd2Q=\x1b\\");
        dropped(b"\x1b^private\x1b\\");
        dropped(b"\x1bXstring\x1b\\");
    }

    #[test]
    fn c1_introducers_count() {
        // UTF-8 encoded C1 (xterm and VTE act on them in UTF-8 mode).
        dropped("\u{9d}52;c;eA==\u{07}".as_bytes());
        dropped("\u{9d}52;c;eA==\u{9c}".as_bytes());
        dropped("\u{9b}21t".as_bytes());
        dropped("\u{90}$q\"p\u{9c}".as_bytes());
        dropped("\u{9f}Ga=T\u{9c}".as_bytes());
        // Raw 8-bit C1 after ASCII.
        dropped(b"\x9d52;c;eA==\x07");
        dropped(b"\x9b21t");
        // An allowed OSC in C1 form passes.
        passes("\u{9d}0;title\u{9c}".as_bytes());
        passes(b"\x9d2;title\x07");
        // A continuation byte in a UTF-8 character is text.
        passes("Н52;x".as_bytes());
    }

    #[test]
    fn strings_cannot_smuggle() {
        // A new sequence inside an allowed title: the title is closed, the OSC 52 dropped.
        assert_eq!(
            run(b"\x1b]0;t\x1b]52;c;eA==\x07z"),
            b"\x1b]0;t\x1b\\z".to_vec()
        );
        // CAN aborts the title for the terminal; what follows is filtered afresh.
        assert_eq!(
            run(b"\x1b]0;t\x18\x1b]52;c;eA==\x07z"),
            b"\x1b]0;t\x18z".to_vec()
        );
        // A C1 OSC inside an allowed title.
        assert_eq!(
            run("\x1b]0;t\u{9d}52;c;eA==\x07z".as_bytes()),
            b"\x1b]0;t\x1b\\z".to_vec()
        );
        // Inside a dropped string an ESC that is not ST starts a new sequence.
        assert_eq!(run(b"\x1b]52;x\x1b[1mB"), b"\x1b[1mB".to_vec());
        // An unterminated allowed string is closed at the end.
        assert_eq!(run(b"\x1b]0;half"), b"\x1b]0;half\x1b\\".to_vec());
        // An unfinished held sequence is dropped at the end.
        assert_eq!(run(b"a\x1b[21"), b"a".to_vec());
        assert_eq!(run(b"a\x1b]5"), b"a".to_vec());
        // A lone C2 at the end is text.
        assert_eq!(run(b"a\xc2"), b"a\xc2".to_vec());
    }

    #[test]
    fn controls_inside_sequences() {
        // C0 inside a CSI is executed by the terminal; the CSI goes on.
        assert_eq!(run(b"\x1b[3\n1m"), b"\n\x1b[31m".to_vec());
        assert_eq!(run(b"\x1b[2\n1t"), b"\n".to_vec());
        // ESC restarts; CAN aborts.
        assert_eq!(run(b"\x1b[2\x1b[1m"), b"\x1b[1m".to_vec());
        assert_eq!(run(b"\x1b[2\x18x"), b"\x18x".to_vec());
        // A held sequence over the bound is dropped whole.
        let mut long = b"\x1b[".to_vec();
        long.extend(std::iter::repeat_n(b'1', 2000));
        long.push(b'm');
        dropped(&long);
    }

    #[test]
    fn every_dropped_osc_is_not_allowed() {
        for (seq, _) in DROPPED {
            let Some(rest) = seq.strip_prefix("OSC ") else {
                continue;
            };
            for n in rest.split(", ").filter_map(|x| x.parse::<u32>().ok()) {
                assert!(!osc_allowed(n), "OSC {n} is both allowed and dropped");
            }
        }
        for (n, what, why) in OSC_ALLOWED {
            assert!(
                !what.is_empty() && !why.is_empty(),
                "OSC {n} without a reason"
            );
        }
    }

    /// Random mixtures of the pieces sequences are made of: the output never leaks, does
    /// not depend on how the input is cut, and goes through the filter again unchanged.
    #[test]
    #[allow(
        clippy::cast_possible_truncation,
        reason = "a test's random numbers: any of their bits do"
    )]
    fn random_mixtures_never_leak() {
        const PIECES: &[&[u8]] = &[
            b"\x1b",
            b"[",
            b"]",
            b"P",
            b"_",
            b"^",
            b"X",
            b"\\",
            b"52",
            b"0",
            b"21",
            b"8",
            b";",
            b"t",
            b"i",
            b"q",
            b"$",
            b"+",
            b"|",
            b"\x07",
            b"\x18",
            b"\x1a",
            b"\n",
            b"m",
            b"a",
            b"\xc2",
            b"\x9d",
            b"\x9b",
            b"\x9c",
            b"\x90",
            b"\x9f",
            b"\xd0",
            b"\xe2\x80",
            b"\xff",
            b"\x7f",
            b"?",
            b">",
            b"14",
            b"tmux;",
            b"c2VjcmV0",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let mut input = Vec::new();
            for _ in 0..len {
                input.extend_from_slice(PIECES[(next() % PIECES.len() as u64) as usize]);
            }
            let out = run(&input);
            assert_eq!(
                first_leak(&out),
                None,
                "{:?} -> {:?}",
                String::from_utf8_lossy(&input),
                String::from_utf8_lossy(&out)
            );
            assert_eq!(run(&out), out, "{:?}", String::from_utf8_lossy(&input));
            let cut = (next() as usize) % (input.len() + 1);
            let mut f = Filter::new();
            let mut two = Vec::new();
            f.feed(&input[..cut], &mut two);
            f.feed(&input[cut..], &mut two);
            f.finish(&mut two);
            assert_eq!(two, out);
        }
    }

    #[test]
    fn the_leak_finder_finds_leaks() {
        assert_eq!(first_leak(b"a\x1b]52;c;x\x07"), Some(1));
        assert_eq!(first_leak("a\u{9d}52;x".as_bytes()), Some(1));
        assert_eq!(first_leak(b"\x1b[2\n1t"), Some(0));
        assert_eq!(first_leak(b"\x1bP$qx"), Some(0));
        assert_eq!(first_leak(b"\x1b_G"), Some(0));
        assert_eq!(first_leak(b"\x1b]0;t\x07\x1b[1m\x1bPq#\x1b\\"), None);
    }

    /// The filter's own speed (`cargo test --release -p efr-launcher --lib throughput --
    /// --ignored --nocapture`): MB/s on plain and coloured text, in 4 KiB reads as from a
    /// pty.
    #[test]
    #[ignore]
    fn throughput() {
        let plain: Vec<u8> = (0..200_000u32)
            .flat_map(|i| {
                format!("{i:08} abcdefghijklmnopqrstuvwxyz0123456789 lorem ipsum dolor\n")
                    .into_bytes()
            })
            .collect();
        let color: Vec<u8> = (0..200_000u32)
            .flat_map(|i| {
                format!(
                    "\x1b[1;32m{i:08}\x1b[0m \x1b[34mhéllo wörld — ✓ ← 日本語\x1b[0m \x1b[2mdone\x1b[0m\n"
                )
                .into_bytes()
            })
            .collect();
        for (name, data) in [("plain", &plain), ("color", &color)] {
            // The best of 7 passes (a shared machine).
            let mut best = 0f64;
            for _ in 0..7 {
                let mut f = Filter::new();
                let mut out = Vec::with_capacity(8192);
                let t = std::time::Instant::now();
                let mut total = 0usize;
                for c in data.chunks(4095) {
                    out.clear();
                    f.feed(c, &mut out);
                    total += out.len();
                }
                assert!(total > 0);
                best = best.max(data.len() as f64 / t.elapsed().as_secs_f64() / 1e6);
            }
            println!("{name}: {best:.0} MB/s");
        }
    }

    #[test]
    fn plain_prefix_finds_the_first_special_byte() {
        let mut s = vec![b'x'; 100];
        assert_eq!(plain_prefix(&s), 100);
        for at in [0, 7, 8, 9, 63, 99] {
            s[at] = ESC;
            assert_eq!(plain_prefix(&s), at);
            s[at] = 0x80;
            assert_eq!(plain_prefix(&s), at);
            s[at] = b'x';
        }
    }
}
