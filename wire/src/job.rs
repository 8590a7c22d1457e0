//! Background jobs (efr's protocol page, phase C): a contained call that outlives
//! its launch stream, owned by the service. The params and results of `sandbox.jobs`,
//! `sandbox.job_stop`, `sandbox.job_output`, `sandbox.job_events` and
//! `sandbox.call_background`, the `job_info` the service knows, and its events. Times are
//! Unix milliseconds. efrd keeps its own job list and events on top of these.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::call::{OutputData, OutputStream};
use crate::launch::Launch;

/// How a launch becomes a job: the `background` member of `sandbox.launch`'s params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Background {
    /// The job ends (`timed_out`, stopped by `time_limit`) this many minutes after it
    /// started; fractional values are taken. Within the config's `jobs.max_minutes` range.
    pub max_minutes: f64,
    /// A pattern (a regular expression) matched against each line of the job's output:
    /// each match is a `job_watch_matched` event, until `max_wakes` of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<String>,
    /// The most `job_watch_matched` events of the job (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wakes: Option<u32>,
}

/// A job's id: `j1`, `j2`, ... per conversation. Any other string is refused.
pub fn valid_job_id(id: &str) -> bool {
    let Some(n) = id.strip_prefix('j') else {
        return false;
    };
    !n.is_empty()
        && n.len() <= 10
        && !n.starts_with('0')
        && n.bytes().all(|b| b.is_ascii_digit())
        && n.parse::<u32>().is_ok()
}

/// `job_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// The job's line runs.
    Running,
    /// The line ended by itself (`exit_code`, or a signal it got from its own tree).
    Exited,
    /// Someone stopped it (`stopped_by`).
    Stopped,
    /// It ran to its `max_minutes`.
    TimedOut,
    /// It could not go on: its launcher was lost, it hit its memory limit, or its sandbox
    /// did not start (`reason`).
    Failed,
    /// A state this reader does not know.
    #[serde(other)]
    Unknown,
}

/// `job_stop_by`: who or what stopped a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStopBy {
    /// The model asked (efrd's own).
    Model,
    /// The user asked (`sandbox.job_stop`, `efr-sandbox jobs stop`).
    User,
    /// Its `max_minutes` ran out.
    TimeLimit,
    /// The service stopped.
    DaemonStop,
    /// The service was restarted: a job of an earlier service, seen ended by the next.
    DaemonRestart,
    /// A guard of efrd's.
    Guard,
    /// Full mode was turned off (efrd's own).
    FullOff,
    /// A cause this reader does not know.
    #[serde(other)]
    Unknown,
}

/// A job's `watch`: its pattern and how many matches it reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobWatch {
    /// The pattern, as asked.
    pub pattern: String,
    /// The most matches reported.
    pub max_wakes: u32,
}

/// A port the service forwards for a job: the job's listen address (as text, such as
/// `127.0.0.1` or `::1`) and port; the host's loopback has the same port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobForward {
    /// The address the job listens on.
    pub listen: String,
    /// The port, the same on the host.
    pub port: u16,
}

/// A port of a job that is not forwarded, and why: the last `job_port_forwarded` outcome
/// of that address and port (`in_use`, `refused`, `limit`), kept in the job's `unforwarded`
/// until the port is forwarded or the job stops listening on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobPortOutcome {
    /// The address the job listens on.
    pub listen: String,
    /// The port.
    pub port: u16,
    /// Why it is not forwarded.
    pub outcome: ForwardOutcome,
    /// The job of the same conversation that holds the port (`in_use`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_job: Option<String>,
    /// Why, in words (`refused`, `limit`, `in_use` by no job of the conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `outcome` of a `job_port_forwarded` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ForwardOutcome {
    /// The host's loopback has the port, relayed to the job.
    Forwarded,
    /// Another job (`by_job`, of the same conversation) or a host process holds it.
    InUse,
    /// Not forwarded by rule (`reason`): a port below 1024, the config's deny list.
    Refused,
    /// Past the config's count of forwards a job.
    Limit,
    /// The forward ended: the job stopped listening, or ended.
    Stopped,
    /// An outcome this reader does not know.
    #[serde(other)]
    Unknown,
}

/// Why a job has no cgroup of its own (`cgroup.off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CgroupOff {
    /// The config turns job cgroups off (`jobs.cgroups = false`).
    Config,
    /// The user's cgroup is not delegated to them (no systemd user manager, or the service
    /// runs in a cgroup it does not own).
    NoDelegation,
    /// The memory and pids controllers are mounted as cgroup v1 only, which is not
    /// delegated to users.
    V1Only,
    /// The delegated cgroup lacks the memory or pids controller.
    NoControllers,
    /// Making or joining the cgroup failed (`off_detail` says what).
    Error,
    /// A reason this reader does not know.
    #[serde(other)]
    Unknown,
}

/// `cgroup` of a job (ADR 0021).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobCgroupInfo {
    /// Why the job has no cgroup of its own; absent when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<CgroupOff>,
    /// What of `off` the service saw (the path and its owner, the error), one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_detail: Option<String>,
    /// Memory now while the job runs, the most it had at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// CPU time of the whole job, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usec: Option<u64>,
    /// The job's memory limit (`jobs.memory_max`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max: Option<u64>,
    /// The job's process limit (`jobs.pids_max`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
}

/// `moved_from`: the running call a job was moved from (`sandbox.call_background`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MovedFrom {
    /// The call's id, as its `started` item gave it.
    pub call_id: String,
    /// How long the call had run when it moved, in seconds.
    pub after_secs: f64,
}

/// What the service knows of one job (the protocol's `job_info`, its sandbox members).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobInfo {
    /// `j1`, `j2`, ... per conversation.
    pub id: String,
    /// The conversation; absent for a job of no conversation (the CLI's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The id of the call that started it (its `started` item's `call_id`).
    pub call_id: String,
    /// The line.
    pub command: String,
    /// How it runs (always `contained`: only a contained call becomes a job).
    pub launch: Launch,
    /// Where it is.
    pub state: JobState,
    /// When it started.
    pub started_at: u64,
    /// When it ends at the latest (`max_minutes` after it started).
    pub ends_by: u64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// The line's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the line, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Who stopped it (`stopped`, `timed_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<JobStopBy>,
    /// Why it `failed`, one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its watch pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<JobWatch>,
    /// Bytes of output it wrote, all of them (the service keeps a bounded tail).
    pub output_bytes: u64,
    /// Its watch's matches so far (0 when absent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wakes: u32,
    /// The ports forwarded for it now (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forwards: Vec<JobForward>,
    /// The ports it listens on that are not forwarded, each with why (absent when none; at
    /// most 32, the latest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unforwarded: Vec<JobPortOutcome>,
    /// Its cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<JobCgroupInfo>,
    /// The call it was moved from (absent for a job started as one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<MovedFrom>,
    /// Its launcher died before the line's end was known (false when absent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub launcher_lost: bool,
    /// Processes of the job found alive after its launcher was lost, then killed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<u32>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The `job` item of a background `sandbox.launch`, after `started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobStarted {
    /// The job, running.
    pub job: JobInfo,
}

/// The end of a `sandbox.launch` whose call runs on as a job: started as one, or moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobHandedOff {
    /// The job.
    pub job_id: String,
    /// The call was moved to the job (`sandbox.call_background`); false when absent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moved: bool,
}

/// Params of `sandbox.jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobsParams {
    /// Only this conversation's jobs; every job when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
}

/// Result of `sandbox.jobs`: newest first, at most 200.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobsResult {
    /// The jobs (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobInfo>,
}

/// Params of `sandbox.job_stop`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobStopParams {
    /// The job's conversation (absent: a job of no conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The job.
    pub job_id: String,
    /// `user` (when absent) or `daemon_stop`, as the protocol's `job_stop_by`; efrd may
    /// also pass `model`, `guard` or `full_off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<JobStopBy>,
}

/// Result of `sandbox.job_stop`: the job, ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobStopResult {
    /// The job as it ended.
    pub job: JobInfo,
}

/// Params of `sandbox.job_output`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobOutputParams {
    /// The job's conversation (absent: a job of no conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The job.
    pub job_id: String,
    /// The first byte wanted, counted from the job's first byte of output (0 when absent).
    #[serde(default)]
    pub offset: u64,
    /// Keep streaming what the job writes until it ends (false: what there is now).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow: bool,
}

/// An item of `sandbox.job_output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobOutputItem {
    /// Bytes of output from `offset`.
    Output {
        /// The offset of the first byte.
        offset: u64,
        /// The stream they came on.
        stream: OutputStream,
        /// The bytes, as `data` or `data_b64`.
        #[serde(flatten)]
        data: OutputData,
    },
    /// Output the service no longer keeps (its bound): bytes `from` to `to` (exclusive).
    Skipped {
        /// The first byte not kept.
        from: u64,
        /// The first byte kept again.
        to: u64,
    },
}

/// The end of `sandbox.job_output`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobOutputEnd {
    /// The offset after the last byte sent (where a next read starts).
    pub next_offset: u64,
    /// The job's state when the stream ended.
    pub state: JobState,
}

/// Params of `sandbox.job_events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobEventsParams {
    /// The conversation whose events are wanted (absent: jobs of no conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Replay the events kept after this `seq` first (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

/// An event of a job, as `sandbox.job_events` streams it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobEvent {
    /// Its number: increasing over the service's events of every conversation.
    pub seq: u64,
    /// The job's conversation (absent: no conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The job.
    pub job_id: String,
    /// What happened.
    #[serde(flatten)]
    pub what: JobEventKind,
}

/// What a [`JobEvent`] says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobEventKind {
    /// The job ended.
    JobEnded {
        /// How.
        state: JobState,
        /// The line's exit code, when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Who stopped it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped_by: Option<JobStopBy>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// All the bytes it wrote.
        output_bytes: u64,
        /// How long it ran, in seconds.
        ran_secs: f64,
        /// The last lines of its output (at most 4 KiB).
        tail: String,
        /// Output was dropped from the service's bound (false when absent).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        output_truncated: bool,
        /// Its launcher died before the end was known (false when absent).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        launcher_lost: bool,
        /// Processes found alive after the launcher was lost, then killed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        survivors: Vec<u32>,
        /// The exit records of what the sandbox refused the job (a host, a write), at
        /// most 64; absent when none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        exits: Vec<crate::ExitRecord>,
    },
    /// The checks that run while a job lives (the post-call git guard, every few seconds)
    /// took git code the job left out of git's way: one line each, as the finish's
    /// `quarantined`.
    JobGuarded {
        /// What was done, where, and why.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        quarantined: Vec<String>,
        /// The index flags the job set that were taken off again (as a finish's
        /// `index_flags`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        index_flags: Vec<crate::IndexFlagSet>,
    },
    /// A line of its output matched its watch.
    JobWatchMatched {
        /// The line (at most 1000 bytes of it).
        line: String,
        /// Matches it may still report.
        wakes_left: u32,
    },
    /// A port of the job: forwarded, or why not.
    JobPortForwarded {
        /// The address the job listens on.
        listen: String,
        /// The port.
        port: u16,
        /// What became of it.
        outcome: ForwardOutcome,
        /// The job of the same conversation that holds the port (`in_use`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by_job: Option<String>,
        /// Why (`refused`, `limit`, `in_use` by no job of the conversation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Events were lost to this reader (it read too slowly): `missed` of them; read
    /// `sandbox.jobs` again.
    Lagged {
        /// How many.
        missed: u64,
    },
}

/// Params of `sandbox.call_background`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallBackgroundParams {
    /// The call's conversation (absent: a call of no conversation); a call of another
    /// conversation is not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The running call (its `started` item's `call_id`).
    pub call_id: String,
    /// The job's time limit, as [`Background::max_minutes`].
    pub max_minutes: f64,
}

/// Result of `sandbox.call_background`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CallBackgroundResult {
    /// The job the call became.
    pub job_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_j_and_a_number() {
        for ok in ["j1", "j2", "j10", "j4294967295"] {
            assert!(valid_job_id(ok), "{ok}");
        }
        for bad in [
            "",
            "j",
            "j0",
            "j01",
            "1",
            "J1",
            "j-1",
            "j1a",
            "j 1",
            "j4294967296",
            "jj1",
        ] {
            assert!(!valid_job_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_unknown_state_reads_as_unknown() {
        let s: JobState = serde_json::from_str("\"frozen\"").unwrap();
        assert_eq!(s, JobState::Unknown);
        let o: ForwardOutcome = serde_json::from_str("\"tunnelled\"").unwrap();
        assert_eq!(o, ForwardOutcome::Unknown);
    }
}
