//! A call of the service: the params of `sandbox.launch` and `sandbox.plan`, the items of
//! the launch stream, and the params and result of the plan + finish pair (docs/protocol.md).
//! Built by `efr-call`, the owner of a call; read by efrd.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::exit::ExitRecord;
use crate::launch::Grant;

/// The params of `sandbox.launch` (and, flattened, of `sandbox.plan` and `sandbox.run`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallParams {
    /// The shell line.
    pub line: String,
    /// Where it runs (absolute; default: the first project root, else the home).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The turn's project roots (writable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// Grants on top of the default view (wire `grant`s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
    /// `auto`, `native` or `bwrap`; the config's `sandbox.backend` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Run outside the sandbox (an approved exit); the launcher still owns the tree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsandboxed: bool,
    /// The conversation: its `/tmp` and `$SCRATCH` live under the runtime dir and last
    /// between calls. Without one, `/tmp` is fresh and there is no `$SCRATCH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Run the call as a background job (`sandbox.launch` only): the stream ends after
    /// `started` and a `job` item, and the service owns the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<crate::job::Background>,
    /// The shell that runs the line: `bash`, `sh` or an absolute path; the config's
    /// `sandbox.shell` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// The shell's own command line after its name, as the shell takes it (options, `-c`
    /// and the line, `$0` and the arguments; none of `-c` to read a script from stdin), run
    /// instead of `SHELL -c LINE`: `efr-sandbox shell`. `line` is then what the call is
    /// recorded and classified as. Empty: `SHELL -c LINE`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shell_args: Vec<String>,
}

/// The params of `sandbox.plan`: a call, and the fd efrd gives the launcher for its status
/// lines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanParams {
    /// The call; its members sit at the top level of the params.
    #[serde(flatten)]
    pub call: CallParams,
    /// The fd efrd gives the launcher for its status lines (3 to 1024; default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_fd: Option<i32>,
}

/// The params of `sandbox.run`: a call of `efr-sandbox run` handed to the running service,
/// which runs it with the caller's stdio (the three fds sent with the request, stdin,
/// stdout and stderr, `SCM_RIGHTS`) and the caller's environment. The service takes it only
/// from its own build and for its own home, runtime dir and config home (else `conflict`:
/// the caller runs the call itself).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunParams {
    /// The call; its members sit at the top level of the params.
    #[serde(flatten)]
    pub call: CallParams,
    /// The environment the line starts from: the caller's (scrubbed as every call's).
    pub env: Vec<crate::plan::EnvVar>,
    /// `--env NAME[=VALUE]` of the command line, as typed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_args: Vec<String>,
    /// The caller's `$HOME`.
    pub home: String,
    /// The caller's `$XDG_RUNTIME_DIR` (absolute), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_dir: Option<String>,
    /// The caller's `$XDG_CONFIG_HOME` (absolute), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_home: Option<String>,
    /// The caller's build (its executable's identity): the service runs calls of its own
    /// build only.
    pub build: String,
}

/// The result of `sandbox.plan` (when the sandbox can start: else a finish with its
/// `setup_error`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanResult {
    /// Names the call in `sandbox.finish`.
    pub token: String,
    /// The launcher's command line (it reads the plan file).
    pub argv: Vec<String>,
    /// The plan file (0600 in a 0700 dir of the runtime dir), removed at `sandbox.finish`.
    pub plan_file: String,
    /// The fd the launcher writes its status lines on (the one asked, else 3): efrd runs
    /// `argv` with it open.
    pub status_fd: i32,
}

/// The params of `sandbox.finish`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FinishParams {
    /// The token `sandbox.plan` gave.
    pub token: String,
    /// The status lines the launcher wrote, as written (JSON lines).
    #[serde(default)]
    pub status: String,
}

/// The stream a line's output came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    /// The line's standard output.
    Stdout,
    /// The line's standard error.
    Stderr,
}

impl OutputStream {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }
}

/// The bytes of one `output` item: `data` when they are valid UTF-8 (a character split
/// between two reads is carried to the next item), else `data_b64` (standard base64 of the
/// raw bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputData {
    /// The bytes as UTF-8 text (member `data`).
    Data(String),
    /// The raw bytes in standard base64 with padding (member `data_b64`).
    DataB64(String),
}

/// The `started` item: the launcher's `started` status line, as efrd sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Started {
    /// The launcher's own pid, in its caller's pid namespace.
    pub launcher_pid: u32,
    /// The line's process, as the launcher's pid namespace numbers it (0 when unknown).
    pub pid: u32,
    /// The backend the line really ran on.
    pub backend: crate::RunBackend,
    /// The launcher's Landlock report (`null` when it reported none), as its status line
    /// has it.
    pub landlock: Option<Value>,
    /// The seccomp filter is loaded.
    pub seccomp: bool,
    /// The call's cgroup, as the status line has it (`null`: none).
    pub cgroup: Option<Value>,
    /// The call's id in the service (`sandbox.launch`): what `sandbox.call_background`
    /// names it by. Absent from other streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// One item of the `sandbox.launch` stream, before its end (a [`crate::Finish`]):
/// `started` first, then the line's `output` and the `exit` records of its refusals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LaunchItem {
    /// The line is running; always the first item.
    Started(Started),
    /// Some of the line's output, at most 32 KiB per item, in the order it came.
    Output {
        /// The stream the bytes came on.
        stream: OutputStream,
        /// The bytes, as `data` or `data_b64`.
        #[serde(flatten)]
        data: OutputData,
    },
    /// One of the call's refusals as an `exit_record` (a write, a host, a held cache
    /// delete, ...).
    Exit {
        // Boxed: an exit record is far larger than the other items.
        /// The exit record.
        record: Box<ExitRecord>,
    },
    /// A variable the line does not get (of the caller's environment or its `env_args`),
    /// with why; `sandbox.run` only, before `started`.
    EnvDropped {
        /// The variable's name.
        name: String,
        /// Why it is not passed.
        why: String,
    },
    /// The call is a background job now (after `started`, for a launch with
    /// `background`): the stream ends, the job runs on.
    Job(Box<crate::job::JobStarted>),
    /// The call was moved to a job (`sandbox.call_background`): the stream ends, the job
    /// runs on with its output.
    Moved {
        /// The job.
        job_id: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The typed items are the bytes the service wrote with `json!` before them.
    #[test]
    fn items_as_before() {
        let out = LaunchItem::Output {
            stream: OutputStream::Stderr,
            data: OutputData::DataB64("/w==".into()),
        };
        assert_eq!(
            serde_json::to_string(&out).unwrap(),
            json!({"kind": "output", "stream": "stderr", "data_b64": "/w=="}).to_string()
        );
        let started = LaunchItem::Started(Started {
            launcher_pid: 7,
            pid: 2,
            backend: crate::RunBackend::Bwrap,
            landlock: None,
            seccomp: false,
            cgroup: None,
            call_id: None,
        });
        assert_eq!(
            serde_json::to_string(&started).unwrap(),
            json!({"kind": "started", "launcher_pid": 7, "pid": 2, "backend": "bwrap",
                   "landlock": null, "seccomp": false, "cgroup": null})
            .to_string()
        );
        let plan = PlanResult {
            token: "t".into(),
            argv: vec!["efr-launch".into()],
            plan_file: "/p.json".into(),
            status_fd: 3,
        };
        assert_eq!(
            serde_json::to_string(&plan).unwrap(),
            json!({"token": "t", "argv": ["efr-launch"], "plan_file": "/p.json", "status_fd": 3})
                .to_string()
        );
        let p: PlanParams =
            serde_json::from_value(json!({"line": "true", "status_fd": 5})).unwrap();
        assert_eq!(p.call.line, "true");
        assert_eq!(p.status_fd, Some(5));
    }
}
