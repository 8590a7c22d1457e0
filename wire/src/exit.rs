//! Exits and exit records: each way a call would leave its sandbox, with the facts a
//! reviewer needs and the verdict of the rules.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::launch::Grant;
use crate::serde_util::{is_false, is_zero};

/// `exit_kind`: the 18 kinds of exit, frozen in `fixtures/v1/exit_kinds.json`. The set is
/// closed: change it only with a changelog line.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExitKind {
    /// Writes a path the sandbox keeps read-only.
    Write,
    /// Deletes a path the sandbox keeps read-only.
    Delete,
    /// Reaches a network host.
    Host,
    /// Needs the host network as it is.
    OpenNetwork,
    /// Connects to a host Unix socket.
    Socket,
    /// Talks on a D-Bus bus.
    Bus,
    /// Uses a device node.
    Device,
    /// Reads a masked path.
    Unmask,
    /// Talks to the desktop.
    Desktop,
    /// Runs a command that only works outside (sudo, ssh, docker, systemctl, ...).
    Outside,
    /// Sends project data away (git push, scp, npm publish, ...).
    Upload,
    /// Gains privilege (sudo, su, doas, pkexec, setcap).
    Privilege,
    /// Touches a floor: a floor file or a floor line.
    Floor,
    /// Deletes in a real cache.
    CacheDelete,
    /// Starts a job that outlives the call.
    Background,
    /// Listens on or forwards a port.
    Port,
    /// Signals processes outside the call.
    Kill,
    /// Sends a credential's placeholder to a host the credential is not bound to (a
    /// misuse: `facts.hosts` names the host, `facts.credential` the credential). No grant
    /// fixes it: the retry proposes nothing that would send the secret there.
    Credential,
}

impl ExitKind {
    /// Every kind, in wire order.
    pub const ALL: [ExitKind; 18] = [
        ExitKind::Write,
        ExitKind::Delete,
        ExitKind::Host,
        ExitKind::OpenNetwork,
        ExitKind::Socket,
        ExitKind::Bus,
        ExitKind::Device,
        ExitKind::Unmask,
        ExitKind::Desktop,
        ExitKind::Outside,
        ExitKind::Upload,
        ExitKind::Privilege,
        ExitKind::Floor,
        ExitKind::CacheDelete,
        ExitKind::Background,
        ExitKind::Port,
        ExitKind::Kill,
        ExitKind::Credential,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExitKind::Write => "write",
            ExitKind::Delete => "delete",
            ExitKind::Host => "host",
            ExitKind::OpenNetwork => "open_network",
            ExitKind::Socket => "socket",
            ExitKind::Bus => "bus",
            ExitKind::Device => "device",
            ExitKind::Unmask => "unmask",
            ExitKind::Desktop => "desktop",
            ExitKind::Outside => "outside",
            ExitKind::Upload => "upload",
            ExitKind::Privilege => "privilege",
            ExitKind::Floor => "floor",
            ExitKind::CacheDelete => "cache_delete",
            ExitKind::Background => "background",
            ExitKind::Port => "port",
            ExitKind::Kill => "kill",
            ExitKind::Credential => "credential",
        }
    }
}

/// `exit_source`: where an exit was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExitSource {
    /// The line, read before it runs.
    Line,
    /// A refusal seen while the call ran (proxy, bus filter, a read-only write).
    Denial,
    /// A file tool's edit.
    FileTool,
    /// A delete in a real cache.
    CacheDelete,
    /// A background job.
    Job,
}

impl ExitSource {
    /// Every source, in wire order.
    pub const ALL: [ExitSource; 5] = [
        ExitSource::Line,
        ExitSource::Denial,
        ExitSource::FileTool,
        ExitSource::CacheDelete,
        ExitSource::Job,
    ];
}

/// `needs`: the launch that would let an exit run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Needs {
    /// Contained, with these grants added to the call's own.
    Contained {
        /// The grants the exit needs (absent when empty).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        grants: Vec<Grant>,
    },
    /// Outside the sandbox, through the launcher.
    Unsandboxed,
    /// Nothing can let it run (a refused exit).
    Nothing,
}

/// The class of a path an exit touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetClass {
    /// Inside a project root of the turn.
    Project,
    /// Inside the conversation's scratch directory.
    Scratch,
    /// Inside `/tmp` (the call's private one).
    Tmp,
    /// Inside the home, outside every project.
    Home,
    /// Outside the home: the system.
    System,
    /// A real cache (`~/.cache`, `~/.cargo/registry`, ...).
    Cache,
    /// Build output inside a project (`target/`, `node_modules/`, `dist/`, ...).
    BuildOutput,
    /// The trash.
    Trash,
    /// A floor file.
    Floor,
    /// A path the sandbox masks.
    Masked,
}

impl TargetClass {
    /// Every class, in wire order.
    pub const ALL: [TargetClass; 10] = [
        TargetClass::Project,
        TargetClass::Scratch,
        TargetClass::Tmp,
        TargetClass::Home,
        TargetClass::System,
        TargetClass::Cache,
        TargetClass::BuildOutput,
        TargetClass::Trash,
        TargetClass::Floor,
        TargetClass::Masked,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetClass::Project => "project",
            TargetClass::Scratch => "scratch",
            TargetClass::Tmp => "tmp",
            TargetClass::Home => "home",
            TargetClass::System => "system",
            TargetClass::Cache => "cache",
            TargetClass::BuildOutput => "build_output",
            TargetClass::Trash => "trash",
            TargetClass::Floor => "floor",
            TargetClass::Masked => "masked",
        }
    }
}

/// What an exit does to a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetOp {
    /// Reads the path.
    Read,
    /// Writes the path (makes or changes it).
    Write,
    /// Deletes the path.
    Delete,
}

/// A path an exit touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Target {
    /// The path, absolute (the classifier writes the home as `~`).
    pub path: String,
    /// Where the path lies, which sets how it is judged.
    pub class: TargetClass,
    /// What the exit does to the path.
    pub op: TargetOp,
    /// efr backs the file up before the write runs (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub backup_before_write: bool,
    /// The sandbox hides this path, such as a credential store (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub masked: bool,
}

/// A host an exit reaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HostFact {
    /// The host name or IP address, as the line names it.
    pub host: String,
    /// Absent when the line names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The host of a remote of a pinned project git dir (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub project_remote: bool,
}

/// The git code a git or gh line would run outside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GitCode {
    /// False when efr could not check it (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub checked: bool,
    /// Only the items a contained call can write (absent when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<GitCodeItem>,
}

/// One hook or config key that runs a program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GitCodeItem {
    /// The repository's git dir or work tree.
    pub repo: String,
    /// Such as `hooks/pre-push` or `core.sshcommand`; never a URL's user or password.
    pub item: String,
    /// The file that holds it.
    pub file: String,
    /// A contained call can write that file.
    pub writable: bool,
}

/// `facts` of an exit record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Facts {
    /// The paths the exit touches (absent when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Target>,
    /// The network hosts the exit reaches (absent when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostFact>,
    /// Host Unix sockets the line connects to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<String>,
    /// Device nodes the line uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// Ports the line listens on or forwards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// Processes the line signals, as the line names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
    /// The commands of an outside exit that run outside the sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_commands: Vec<String>,
    /// The configured credential whose placeholder a `credential` exit sent to a host it is
    /// not bound to (absent for every other kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// The host a `credential` exit sent the placeholder to (the same as its one entry of
    /// `hosts`, named on its own for readers of that kind; absent for every other kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// A desktop command that only reads the desktop's state or reloads its config.
    #[serde(default, skip_serializing_if = "is_false")]
    pub desktop_read: bool,
    /// Absent when efr did not use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_code: Option<GitCode>,
    /// Why part of the line could not be read (eval, a variable as a command, a script
    /// efr cannot see); absent when the whole line was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opaque: Vec<String>,
    /// The caller's count of the user's denials in a row this turn, as `sandbox.classify`
    /// got it (0 when absent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub denials_in_a_row: u32,
    /// The caller's count of the user's denials this turn, as `sandbox.classify` got it (0
    /// when absent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub denials_this_turn: u32,
}

/// The verdict of the rules.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Runs with no question.
    Allow,
    /// The daemon's chain (classifier model, turn model, user) decides.
    Review,
    /// Only the user may approve.
    UserOnly,
    /// Never runs.
    Refuse,
}

impl Verdict {
    /// Every verdict, in wire order.
    pub const ALL: [Verdict; 4] = [
        Verdict::Allow,
        Verdict::Review,
        Verdict::UserOnly,
        Verdict::Refuse,
    ];
}

/// What set the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JudgedBy {
    /// A floor of efr's config.
    Floor,
    /// A saved "allow always" rule.
    Always,
    /// The mode and the config.
    Policy,
}

/// `judgement` of an exit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Judgement {
    /// What the rules say about the exit.
    pub verdict: Verdict,
    /// Which rule set the verdict.
    pub by: JudgedBy,
    /// Plain sentences; absent when none. An entry may go on after its first line with a
    /// config hint: the TOML lines to paste into the user's config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// The payload of a file tool's edit of a floor file (at most 8 KiB).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Edit {
    /// The floor file the edit writes.
    pub path: String,
    /// The file's whole new content.
    pub content: String,
}

/// `action` of an exit record: what would run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Action {
    /// The whole line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub line: String,
    /// The simple commands of the line that make this exit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// The exit starts a job that outlives the call (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub background: bool,
    /// A pattern whose match in the job's output wakes the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<String>,
    /// The job's end wakes the turn (false when absent).
    #[serde(default, skip_serializing_if = "is_false")]
    pub wake_turn: bool,
    /// Absent when the call starts no job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_minutes: Option<u32>,
    /// The edit a file tool's exit writes; absent for every other source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<Edit>,
}

/// `exit_record`: one exit with its facts, needs and judgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExitRecord {
    /// Names the exit within its answer (`x1`, `denial-1`, `host-1`, ...).
    pub id: String,
    /// Where the exit was found.
    pub source: ExitSource,
    /// What kind of exit it is.
    pub kind: ExitKind,
    /// One plain line.
    pub summary: String,
    /// What would run.
    pub action: Action,
    /// What the exit touches and reaches, for the reviewer.
    pub facts: Facts,
    /// The launch that would let the exit run.
    pub needs: Needs,
    /// The verdict of the rules, with who set it and why.
    pub judgement: Judgement,
}

/// `exit_info`: the exit as an approval question carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExitInfo {
    /// The exit record's `id`.
    pub id: String,
    /// The exit record's `kind`.
    pub kind: ExitKind,
    /// The exit record's `source`.
    pub source: ExitSource,
    /// The exit record's `summary`: one plain line.
    pub summary: String,
    /// The exit record's `needs`.
    pub needs: Needs,
    /// The rule an "allow always" answer would save, in words; absent when no rule may
    /// cover the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<String>,
}
